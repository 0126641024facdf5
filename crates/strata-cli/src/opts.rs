//! `--opt NAME=VALUE`: engine options from the command line.

use anyhow::{anyhow, Result};
use strata_engine::Options;

/// Help text shared by every `--opt` flag.
pub const OPT_HELP: &str = "Engine option NAME=VALUE passed to Options::set; repeatable. \
Names: create_if_missing, error_if_exists, write_buffer_bytes, max_immutable_memtables, \
l0_compaction_trigger, l0_slowdown_writes_trigger, l0_stop_writes_trigger, \
max_bytes_for_level_base, level_size_multiplier, num_levels, target_file_size_bytes, \
block_size_bytes, block_align (true: data blocks fit 4 KiB pages; auto: with direct_io), block_restart_interval, filter, compression (none|lz4), block_cache_bytes, \
max_open_files, background_threads, compaction_readahead_bytes, paranoid_checks, \
io_backend (auto|io_uring|threads|sync: how multi_get overlaps its reads), \
direct_io (true: read tables with O_DIRECT, bypassing the page cache), \
sep_threshold_bytes (a number or inf), vlog_file_bytes, vlog_buffer_bytes, \
vlog_head_mmap (true: append to the value log through a shared mapping), wal_mmap (true: \
append to the write-ahead log through a shared mapping), vlog_group_unsynced \
(true: concurrent unsynced writers of separated values share one value-log append), gc_garbage_ratio, \
gc_bytes_per_sec, gc_interval_ms, vlog_prefetch, vlog_prefetch_background (true: scans read \
the next batch of values on a thread pool), l0_tier_dir (a directory for the byte-addressable \
L0 tier, or none), l0_tier_bytes, pgm_epsilon, l0_inline_threshold_bytes, vlog_mmap, \
vlog_value_cache_bytes (a number or auto: verified values kept for point reads)";

/// clap value parser for `NAME=VALUE`.
pub fn parse_opt(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
}

/// Default options with every `--opt` applied.
///
/// `Options::set` validates the whole set after each assignment, so options that only make
/// sense together (raising both l0_slowdown_writes_trigger and l0_stop_writes_trigger) can be
/// refused one at a time. An assignment happens before that validation, so a second pass over
/// the refused ones judges them against the complete set; what still fails is reported.
pub fn build_options(opts: &[(String, String)]) -> Result<Options> {
    let mut o = Options::default();
    let mut refused = Vec::new();
    for (name, value) in opts {
        if o.set(name, value).is_err() {
            refused.push((name, value));
        }
    }
    for (name, value) in refused {
        o.set(name, value)
            .map_err(|e| anyhow!("bad --opt {name}={value}: {e}"))?;
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_engine::Compression;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn parse_opt_splits_on_first_equals() {
        assert_eq!(parse_opt("a=b").unwrap(), ("a".into(), "b".into()));
        assert_eq!(parse_opt("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert_eq!(parse_opt(" a = 1 ").unwrap(), ("a".into(), "1".into()));
        assert!(parse_opt("novalue").is_err());
        assert!(parse_opt("=1").is_err());
    }

    #[test]
    fn build_options_applies_values() {
        let o = build_options(&pairs(&[
            ("write_buffer_bytes", "8388608"),
            ("compression", "lz4"),
            ("filter", "false"),
        ]))
        .unwrap();
        assert_eq!(o.write_buffer_bytes, 8 << 20);
        assert_eq!(o.compression, Compression::Lz4);
        assert!(!o.filter);
    }

    #[test]
    fn build_options_accepts_interdependent_values_in_any_order() {
        // Slowdown 50 alone is above the default stop trigger (40).
        let o = build_options(&pairs(&[
            ("l0_slowdown_writes_trigger", "50"),
            ("l0_stop_writes_trigger", "60"),
        ]))
        .unwrap();
        assert_eq!(o.l0_slowdown_writes_trigger, 50);
        assert_eq!(o.l0_stop_writes_trigger, 60);
    }

    #[test]
    fn build_options_reports_bad_names_and_values() {
        let e = build_options(&pairs(&[("no_such_option", "1")]))
            .err()
            .unwrap();
        let msg = format!("{e:#}");
        assert!(msg.contains("bad --opt no_such_option=1"), "{msg}");
        assert!(msg.contains("unknown option"), "{msg}");
        let e = build_options(&pairs(&[("write_buffer_bytes", "lots")]))
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("cannot parse"), "{e:#}");
        let e = build_options(&pairs(&[("num_levels", "1")])).err().unwrap();
        assert!(format!("{e:#}").contains("num_levels"), "{e:#}");
    }
}
