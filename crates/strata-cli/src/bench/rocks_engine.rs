//! RocksDB as a benchmark peer (cargo feature `rocksdb`).
//!
//! The `rocksdb` crate 0.20 linked against the system's librocksdb (Debian's 7.8.3):
//! `apt-get install -y librocksdb-dev libclang-dev` and build with
//! `ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu`. Options start from RocksDB's defaults (those
//! db_bench also starts from) with the run-wide settings applied: an LRU block cache of
//! `--cache-bytes`, a full bloom filter of `--bloom-bits` bits per key, `--compression`,
//! `use_direct_reads` for `--direct-io`.
//!
//! The store itself is the `strata` crate's [`RocksEngine`] (the shard engine of the sharded
//! front); this file only turns the benchmark's settings into its options.

use super::engine::{Compression, Engine, EngineConfig};
use crate::text::human_bytes;
use anyhow::{anyhow, Context, Result};
use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options};
use std::path::Path;
use strata::rocks::{RocksConfig, RocksEngine, RocksIter};

/// `--opt rocksdb.NAME=VALUE` names set before opening; any other name is passed to
/// `DB::set_options` after opening (RocksDB's mutable options).
pub const ROCKSDB_OPTS: &str = "write_buffer_size, max_write_buffer_number, \
level0_file_num_compaction_trigger, level0_slowdown_writes_trigger, level0_stop_writes_trigger, \
max_bytes_for_level_base, max_bytes_for_level_multiplier, target_file_size_base, num_levels, \
max_background_jobs, max_subcompactions, max_open_files, bytes_per_sync, \
compaction_readahead_size, level_compaction_dynamic_level_bytes, \
use_direct_io_for_flush_and_compaction, block_size, cache_index_and_filter_blocks, \
format_version, optimize_filters_for_hits; other names go to DB::set_options";

pub struct Rocks {
    engine: RocksEngine,
    sync: bool,
}

/// RocksDB's options for a run.
pub(crate) struct RocksSettings {
    /// With the block cache in its table factory (RocksDB keeps the cache alive).
    pub(crate) options: Options,
    /// `--opt`s left for `DB::set_options` after opening.
    pub(crate) later: Vec<(String, String)>,
    /// One line for the header.
    pub(crate) describe: String,
}

pub(crate) fn options(cfg: &EngineConfig) -> Result<RocksSettings> {
    let mut o = Options::default();
    o.create_if_missing(cfg.create_if_missing);
    o.set_compression_type(match cfg.compression {
        Compression::None => DBCompressionType::None,
        Compression::Lz4 => DBCompressionType::Lz4,
    });
    if cfg.direct_io {
        o.set_use_direct_reads(true);
    }
    let mut bbo = BlockBasedOptions::default();
    let cache = Cache::new_lru_cache(cfg.cache_bytes as usize)
        .map_err(|e| anyhow!("cannot create RocksDB's block cache: {e}"))?;
    bbo.set_block_cache(&cache);
    if cfg.bloom_bits > 0 {
        bbo.set_bloom_filter(cfg.bloom_bits as f64, false);
    }
    let mut desc = vec![
        format!("block_cache={}", human_bytes(cfg.cache_bytes)),
        format!("bloom_bits={}", cfg.bloom_bits),
        format!("compression={}", cfg.compression.name()),
        format!("use_direct_reads={}", cfg.direct_io),
    ];
    let mut later = Vec::new();
    for (name, value) in &cfg.opts {
        let bad = |what: &str| anyhow!("bad --opt rocksdb.{name}={value}: {what}");
        let num = || -> Result<u64> { value.parse().map_err(|_| bad("not a number")) };
        let int = || -> Result<i32> { value.parse().map_err(|_| bad("not a number")) };
        let boolean = || -> Result<bool> {
            match value.as_str() {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(bad("expected true or false")),
            }
        };
        match name.as_str() {
            "write_buffer_size" => o.set_write_buffer_size(num()? as usize),
            "max_write_buffer_number" => o.set_max_write_buffer_number(int()?),
            "level0_file_num_compaction_trigger" => {
                o.set_level_zero_file_num_compaction_trigger(int()?)
            }
            "level0_slowdown_writes_trigger" => o.set_level_zero_slowdown_writes_trigger(int()?),
            "level0_stop_writes_trigger" => o.set_level_zero_stop_writes_trigger(int()?),
            "max_bytes_for_level_base" => o.set_max_bytes_for_level_base(num()?),
            "max_bytes_for_level_multiplier" => o.set_max_bytes_for_level_multiplier(
                value.parse().map_err(|_| bad("not a number"))?,
            ),
            "target_file_size_base" => o.set_target_file_size_base(num()?),
            "num_levels" => o.set_num_levels(int()?),
            "max_background_jobs" => o.set_max_background_jobs(int()?),
            "max_subcompactions" => o.set_max_subcompactions(num()? as u32),
            "max_open_files" => o.set_max_open_files(int()?),
            "bytes_per_sync" => o.set_bytes_per_sync(num()?),
            "compaction_readahead_size" => o.set_compaction_readahead_size(num()? as usize),
            "level_compaction_dynamic_level_bytes" => {
                o.set_level_compaction_dynamic_level_bytes(boolean()?)
            }
            "use_direct_io_for_flush_and_compaction" => {
                o.set_use_direct_io_for_flush_and_compaction(boolean()?)
            }
            "block_size" => bbo.set_block_size(num()? as usize),
            "cache_index_and_filter_blocks" => bbo.set_cache_index_and_filter_blocks(boolean()?),
            "format_version" => bbo.set_format_version(int()?),
            "optimize_filters_for_hits" => o.set_optimize_filters_for_hits(boolean()?),
            _ => {
                later.push((name.clone(), value.clone()));
                continue;
            }
        }
        desc.push(format!("{name}={value}"));
    }
    o.set_block_based_table_factory(&bbo);
    for (n, v) in &later {
        desc.push(format!("{n}={v} (set_options)"));
    }
    Ok(RocksSettings {
        options: o,
        later,
        describe: desc.join(" "),
    })
}

impl Engine for Rocks {
    type Iter<'a> = RocksIter;
    const NAME: &'static str = "rocksdb";

    fn describe(cfg: &EngineConfig) -> Result<String> {
        Ok(options(cfg)?.describe)
    }

    fn open(dir: &Path, cfg: &EngineConfig) -> Result<Self> {
        let RocksSettings { options, later, .. } = options(cfg)?;
        let mut c = RocksConfig::from_options(options);
        c.disable_wal = cfg.disable_wal;
        let engine = RocksEngine::open_exact(dir, &c)
            .with_context(|| format!("cannot open RocksDB database at {}", dir.display()))?;
        for (n, v) in &later {
            engine
                .db()
                .set_options(&[(n.as_str(), v.as_str())])
                .map_err(|e| {
                    anyhow!("bad --opt rocksdb.{n}={v}: {e} (known before open: {ROCKSDB_OPTS})")
                })?;
        }
        Ok(Rocks {
            engine,
            sync: cfg.sync,
        })
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.engine.put(key, value, self.sync)?)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(self.engine.delete(key, self.sync)?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(strata::Engine::get(&self.engine, None, key)?)
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        strata::Engine::multi_get(&self.engine, None, keys)
            .into_iter()
            .map(|r| r.map_err(anyhow::Error::from))
            .collect()
    }

    fn iter(&self) -> Result<RocksIter> {
        Ok(strata::Engine::iter(&self.engine, None, None, None)?)
    }

    fn flush(&self) -> Result<()> {
        Ok(strata::Engine::flush(&self.engine)?)
    }

    fn compact(&self) -> Result<()> {
        Ok(strata::Engine::compact(&self.engine)?)
    }

    fn wait_idle(&self) -> Result<()> {
        Ok(strata::Engine::wait_idle(&self.engine)?)
    }

    fn stall_micros(&self) -> Option<u64> {
        self.engine.stall_micros()
    }

    fn stats(&self) -> String {
        strata::Engine::stats(&self.engine)
    }

    fn close(self) -> Result<()> {
        strata::Engine::close(self.engine).context("cannot flush RocksDB before closing")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_writes_reads_and_reports_stalls() {
        let t = tempfile::tempdir().unwrap();
        let cfg = EngineConfig {
            opts: vec![
                ("write_buffer_size".into(), "1048576".into()),
                ("disable_auto_compactions".into(), "false".into()),
            ],
            ..EngineConfig::default()
        };
        let d = Rocks::describe(&cfg).unwrap();
        assert!(d.contains("write_buffer_size=1048576"), "{d}");
        assert!(
            d.contains("disable_auto_compactions=false (set_options)"),
            "{d}"
        );
        let e = Rocks::open(t.path(), &cfg).unwrap();
        e.put(b"k", b"v").unwrap();
        assert_eq!(e.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        let got = e.multi_get(&[b"k", b"x"]).unwrap();
        assert_eq!(got, vec![Some(b"v".to_vec()), None]);
        assert_eq!(e.stall_micros(), Some(0));
        e.flush().unwrap();
        e.wait_idle().unwrap();
        e.close().unwrap();
        let bad = EngineConfig {
            opts: vec![("no_such_option".into(), "1".into())],
            ..EngineConfig::default()
        };
        let t2 = tempfile::tempdir().unwrap();
        let err = Rocks::open(t2.path(), &bad).err().unwrap().to_string();
        assert!(err.contains("no_such_option"), "{err}");
    }
}
