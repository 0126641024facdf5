//! The database subcommands: put, get, delete, scan, stats, gc, check, export-rdb.

use crate::opts::build_options;
use crate::store::{check_shards_flag, require_existing_db, require_flags_fit, Kind, Store};
use crate::text::{escape, parse_hex};
use crate::{
    Command, DbArgs, DeleteArgs, ExportRdbArgs, GcArgs, GetArgs, Outcome, PutArgs, ScanArgs,
};
use anyhow::{bail, Context, Result};
use std::io::{BufWriter, Write};
use strata::EngineIter;
use strata_engine::{CheckReport, GcReport, ReadOptions, Stats};

pub fn run(cmd: Command) -> Result<Outcome> {
    match cmd {
        Command::Put(a) => put(a),
        Command::Get(a) => get(a),
        Command::Delete(a) => delete(a),
        Command::Scan(a) => scan(a),
        Command::Stats(a) => stats(a),
        Command::Gc(a) => gc(a),
        Command::Check(a) => check(a),
        Command::Bench(a) => crate::bench::run(*a).map(|()| Outcome::Done),
        Command::Serve(a) => strata_server::serve_main(&a.args)
            .map(|()| Outcome::Done)
            .map_err(Into::into),
        Command::Stress(a) => crate::stress::run(a),
        Command::IndexBench(a) => crate::index_bench::run(&a).map(|()| Outcome::Done),
        Command::L0Space(a) => crate::l0_space::run(&a).map(|()| Outcome::Done),
        Command::ExportRdb(a) => export_rdb(&a).map(|()| Outcome::Done),
    }
}

/// Reads a key (or value) argument: text as UTF-8 bytes, or hex with --hex.
fn arg_bytes(what: &str, s: &str, hex: bool) -> Result<Vec<u8>> {
    if hex {
        parse_hex(s).map_err(|e| anyhow::anyhow!("bad {what}: {e}"))
    } else {
        Ok(s.as_bytes().to_vec())
    }
}

fn put(a: PutArgs) -> Result<Outcome> {
    let key = arg_bytes("KEY", &a.key, a.hex)?;
    let value = arg_bytes("VALUE", &a.value, a.hex)?;
    let db = Store::open(&a.db, true)?;
    db.put(&key, &value, a.sync)
        .with_context(|| format!("cannot put key {}", escape(&key)))?;
    db.close(&a.db.db)?;
    Ok(Outcome::Done)
}

fn get(a: GetArgs) -> Result<Outcome> {
    let key = arg_bytes("KEY", &a.key, a.hex)?;
    let db = Store::open(&a.db, false)?;
    let value = db
        .get(&key)
        .with_context(|| format!("cannot get key {}", escape(&key)))?;
    db.close(&a.db.db)?;
    let Some(value) = value else {
        return Ok(Outcome::NotFound);
    };
    let mut out = std::io::stdout().lock();
    if a.raw {
        out.write_all(&value)?;
    } else {
        writeln!(out, "{}", escape(&value))?;
    }
    out.flush()?;
    Ok(Outcome::Done)
}

fn delete(a: DeleteArgs) -> Result<Outcome> {
    let key = arg_bytes("KEY", &a.key, a.hex)?;
    let db = Store::open(&a.db, true)?;
    db.delete(&key, a.sync)
        .with_context(|| format!("cannot delete key {}", escape(&key)))?;
    db.close(&a.db.db)?;
    Ok(Outcome::Done)
}

fn scan(a: ScanArgs) -> Result<Outcome> {
    let start = a
        .start
        .as_deref()
        .map(|s| arg_bytes("--start", s, a.hex))
        .transpose()?;
    let end = a
        .end
        .as_deref()
        .map(|s| arg_bytes("--end", s, a.hex))
        .transpose()?;
    let db = Store::open(&a.db, false)?;
    let range = ScanRange {
        start,
        end,
        limit: a.limit.unwrap_or(u64::MAX),
        reverse: a.reverse,
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    // The bounds let the engine skip tables outside the range. A reverse scan starts with
    // seek_for_prev(end), and a target at the upper bound is outside the iterator's range,
    // so a reverse scan passes only the lower bound and finds its start itself.
    let lower = range.start.clone();
    let upper = if range.reverse {
        None
    } else {
        range.end.clone()
    };
    // Each iterator lives only in its arm, so it is gone before the database is closed.
    match &db {
        Store::Engine(e) => {
            let ro = ReadOptions {
                fill_cache: false,
                lower_bound: lower,
                upper_bound: upper,
                ..ReadOptions::default()
            };
            let it = e.iter(&ro).context("cannot create an iterator")?;
            print_range(it, &range, &mut out)?;
        }
        Store::Sharded(s) => {
            let io = strata::IterOptions {
                lower_bound: lower,
                upper_bound: upper,
            };
            let it = s.iter_opt(&io).context("cannot create an iterator")?;
            print_range(it, &range, &mut out)?;
        }
    }
    out.flush()?;
    db.close(&a.db.db)?;
    Ok(Outcome::Done)
}

/// What `scan` prints.
struct ScanRange {
    /// Inclusive.
    start: Option<Vec<u8>>,
    /// Exclusive.
    end: Option<Vec<u8>>,
    limit: u64,
    reverse: bool,
}

/// Writes one `KEY<TAB>VALUE` line per entry of `r`, read from `it` (one engine instance or
/// the merged iterator of a sharded database).
fn print_range(mut it: impl EngineIter, r: &ScanRange, out: &mut impl Write) -> Result<()> {
    // The bounds are also checked here, so the output is right whatever the iterator does
    // with them.
    let in_range = |k: &[u8]| {
        r.start.as_deref().is_none_or(|s| k >= s) && r.end.as_deref().is_none_or(|e| k < e)
    };
    if r.reverse {
        match &r.end {
            Some(e) => {
                it.seek_for_prev(e);
                if it.valid() && it.key() >= e.as_slice() {
                    it.prev();
                }
            }
            None => it.seek_to_last(),
        }
    } else {
        match &r.start {
            Some(s) => it.seek(s),
            None => it.seek_to_first(),
        }
    }
    let mut printed = 0u64;
    while printed < r.limit && it.valid() && in_range(it.key()) {
        writeln!(out, "{}\t{}", escape(it.key()), escape(it.value()))?;
        printed += 1;
        if r.reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().context("scan failed")
}

/// Each shard's engine statistics, in shard order.
fn shard_stats(db: &strata::Db) -> Vec<Stats> {
    (0..db.shard_count())
        .map(|i| db.engine(i).db().stats())
        .collect()
}

fn stats(a: DbArgs) -> Result<Outcome> {
    let db = Store::open(&a, false)?;
    match &db {
        Store::Engine(e) => println!("{}", e.stats()),
        Store::Sharded(s) => {
            let per = shard_stats(s);
            println!("Sharded database: {} shards", per.len());
            for (i, st) in per.iter().enumerate() {
                println!("== shard {i} ({}) ==", shard_name(i));
                println!("{st}");
            }
            println!("== total ({} shards) ==", per.len());
            println!("{}", Stats::sum(&per));
            println!("Batching (since this open):\n{}", s.batch_stats());
        }
    }
    db.close(&a.db)?;
    Ok(Outcome::Done)
}

/// The directory name of shard `i` (docs/format/shards.md).
fn shard_name(i: usize) -> String {
    format!("shard-{i:03}")
}

/// The value-log line `gc` prints after a report.
fn vlog_line(s: &Stats) -> String {
    format!(
        "value log: {} files, {:.1} MiB, {:.1} MiB garbage; space amplification {:.2}",
        s.vlog_files,
        s.vlog_bytes as f64 / (1 << 20) as f64,
        s.vlog_garbage_bytes as f64 / (1 << 20) as f64,
        s.space_amplification
    )
}

fn sum_gc(reports: &[GcReport]) -> GcReport {
    let mut t = GcReport::default();
    for r in reports {
        t.files_collected += r.files_collected;
        t.files_pending += r.files_pending;
        t.files_deleted += r.files_deleted;
        t.bytes_read += r.bytes_read;
        t.bytes_written += r.bytes_written;
        t.values_relocated += r.values_relocated;
    }
    t
}

fn gc(a: GcArgs) -> Result<Outcome> {
    if let Some(r) = a.ratio {
        if !(0.0..=1.0).contains(&r) {
            bail!("--ratio must be between 0 and 1, got {r}");
        }
    }
    let db = Store::open(&a.db, false)?;
    match &db {
        Store::Engine(e) => {
            let report = match a.ratio {
                Some(r) => e.gc_opt(r),
                None => e.gc(),
            }
            .context("garbage collection failed")?;
            println!("{report}");
            println!("{}", vlog_line(&e.stats()));
        }
        Store::Sharded(s) => {
            let reports = match a.ratio {
                Some(r) => s.gc_opt(r),
                None => s.gc(),
            }
            .context("garbage collection failed")?;
            let per = shard_stats(s);
            for (i, (r, st)) in reports.iter().zip(&per).enumerate() {
                println!("shard {i}: {r}");
                println!("shard {i}: {}", vlog_line(st));
            }
            println!("total: {}", sum_gc(&reports));
            println!("total: {}", vlog_line(&Stats::sum(&per)));
        }
    }
    db.close(&a.db.db)?;
    Ok(Outcome::Done)
}

fn check(a: DbArgs) -> Result<Outcome> {
    let mut o = build_options(&a.opts)?;
    check_shards_flag(&a)?;
    let kind = require_existing_db(&a.db)?;
    // Without flags to fit, a damaged SHARDS file is for check to report, not to refuse.
    if a.engine_only || a.shards.is_some() {
        require_flags_fit(&a, kind, &*o.fs)?;
    }
    o.create_if_missing = false;
    let shown = a.db.display();
    let problems = match kind {
        Kind::Engine => {
            let report = strata_engine::Db::check(&a.db, o)
                .with_context(|| format!("cannot check database at {shown}"))?;
            print!("{}", format_check_report(&report));
            report.problems.len()
        }
        Kind::Sharded => {
            let opts = strata::DbOptions::with_engine(o);
            let report = strata::Db::check(&a.db, opts)
                .with_context(|| format!("cannot check sharded database at {shown}"))?;
            print!("{}", format_sharded_check_report(&report));
            report.problem_count() + check_redis_types(&a, report.is_ok())?
        }
    };
    if problems == 0 {
        Ok(Outcome::Done)
    } else {
        eprintln!("error: database at {shown} has {problems} problem(s)");
        Ok(Outcome::Problems)
    }
}

/// A server's database (`strata serve`'s format record in it): the Redis types' check
/// (`strata_server::check`), printed after the engine's; returns the problems it found. The
/// database is opened as `stats` opens it (replaying its logs; no record is written), without
/// the server's compaction filter, so nothing is dropped while it is read. Not after the
/// engine's check found problems: opening a damaged database is not for a read-only check.
fn check_redis_types(a: &DbArgs, engine_ok: bool) -> Result<usize> {
    if !engine_ok {
        eprintln!("note: Redis keys (if any) not checked: the engine's check found problems");
        return Ok(0);
    }
    let mut o = build_options(&a.opts)?;
    o.create_if_missing = false;
    // Only slot-routed databases can be the server's (it refuses others): any other is
    // left unopened.
    match strata::meta::ShardMeta::load(&*o.fs, &a.db) {
        Ok(Some(m)) if m.routing == strata::Routing::Slot => {}
        _ => return Ok(0),
    }
    let shown = a.db.display();
    let db = strata::Db::open(&a.db, strata::DbOptions::with_engine(o))
        .with_context(|| format!("cannot open sharded database at {shown}"))?;
    if !strata_server::check::is_server_db(&db)? {
        db.close()?;
        return Ok(0);
    }
    let report = strata_server::check::check_types(&db)
        .with_context(|| format!("cannot read the Redis keys of {shown}"))?;
    db.close()?;
    print!("{}", format_type_report(&report));
    Ok(report.problem_count as usize)
}

/// The Redis types' report as printed by `strata check`.
pub fn format_type_report(r: &strata_server::check::TypeReport) -> String {
    let mut s = String::from("== Redis keys ==\n");
    for (name, n) in strata_server::check::TYPE_NAMES.iter().zip(r.keys) {
        s.push_str(&format!("{:<18}{n}\n", format!("{name} keys:")));
    }
    s.push_str(&format!(
        "expired keys:     {}\n\
         member records:   {}\n\
         score records:    {}\n\
         garbage records:  {}\n\
         problems:         {}\n",
        r.expired_keys, r.members, r.score_records, r.garbage, r.problem_count
    ));
    if !r.moved_databases.is_empty() {
        let moved: Vec<String> = r
            .moved_databases
            .iter()
            .map(|(l, p)| format!("db {l} in {p}"))
            .collect();
        s.push_str(&format!("database map:     {}\n", moved.join(", ")));
    }
    for p in &r.problems {
        s.push_str(&format!("problem: {p}\n"));
    }
    let unlisted = r.problem_count - r.problems.len() as u64;
    if unlisted > 0 {
        s.push_str(&format!("note: {unlisted} more problem(s) not listed\n"));
    }
    s.push_str(if r.is_ok() { "OK\n" } else { "CORRUPT\n" });
    s
}

/// The report of a sharded database as printed by `strata check`: each shard's report, the
/// transaction log, then the totals in the single-engine layout.
pub fn format_sharded_check_report(r: &strata::ShardedCheckReport) -> String {
    let mut s = format!("shards:           {}\n", r.shard_count);
    for (i, shard) in r.shards.iter().enumerate() {
        s.push_str(&format!("== shard {i} ({}) ==\n", shard_name(i)));
        s.push_str(&format_check_report(shard));
    }
    s.push_str("== transaction log (TXLOG) ==\n");
    s.push_str(&format!(
        "txlog records:    {}\ncommitted gsn:    {}\n",
        r.txlog_records, r.committed_gsn
    ));
    let mut total = CheckReport::default();
    for shard in &r.shards {
        total.tables += shard.tables;
        total.blocks += shard.blocks;
        total.entries += shard.entries;
        total.wal_files += shard.wal_files;
        total.wal_records += shard.wal_records;
        total.vlog_files += shard.vlog_files;
        total.vlog_frames += shard.vlog_frames;
        total.manifest_records += shard.manifest_records;
    }
    // The front's own problems and notes are listed with the totals; the shards' problems
    // were listed under each shard and are only counted here.
    let t = format_report(&total, r.problem_count(), &r.notes, &r.problems);
    s.push_str(&format!("== total ({} shards) ==\n", r.shard_count));
    s.push_str(&t);
    s
}

/// The report as printed by `strata check`.
pub fn format_check_report(r: &CheckReport) -> String {
    format_report(r, r.problems.len(), &r.notes, &r.problems)
}

/// The figures of `r`, `problem_count` and the given notes and problems, ending in OK or
/// CORRUPT by `problem_count`.
fn format_report(
    r: &CheckReport,
    problem_count: usize,
    notes: &[String],
    problems: &[strata_engine::Error],
) -> String {
    let mut s = format!(
        "tables:           {}\n\
         blocks:           {}\n\
         entries:          {}\n\
         wal files:        {}\n\
         wal records:      {}\n\
         vlog files:       {}\n\
         vlog frames:      {}\n\
         manifest records: {}\n\
         problems:         {}\n",
        r.tables,
        r.blocks,
        r.entries,
        r.wal_files,
        r.wal_records,
        r.vlog_files,
        r.vlog_frames,
        r.manifest_records,
        problem_count
    );
    for n in notes {
        s.push_str(&format!("note: {n}\n"));
    }
    for p in problems {
        s.push_str(&format!("problem: {p}\n"));
    }
    s.push_str(if problem_count == 0 {
        "OK\n"
    } else {
        "CORRUPT\n"
    });
    s
}

/// `strata export-rdb`: the server database's dataset as an RDB file
/// (`strata_server::rdb::export`), with progress on stderr at most once a second.
fn export_rdb(a: &ExportRdbArgs) -> Result<()> {
    use std::cell::Cell;
    use std::time::{Duration, Instant};
    let last = Cell::new(Instant::now());
    let progress = |s: &strata_server::rdb::DatasetStats| {
        if last.get().elapsed() >= Duration::from_secs(1) {
            last.set(Instant::now());
            eprintln!(
                "export-rdb: {} keys, {} bytes written, {:.1} s",
                s.keys,
                s.bytes,
                s.elapsed.as_secs_f64()
            );
        }
    };
    let stats = strata_server::rdb::export::export_rdb(&a.db, &a.out, &progress)
        .with_context(|| format!("cannot export {} to {}", a.db.display(), a.out.display()))?;
    eprintln!("{}", format_export(&stats, &a.out));
    Ok(())
}

/// The summary `strata export-rdb` ends with.
pub fn format_export(s: &strata_server::rdb::DatasetStats, out: &std::path::Path) -> String {
    let dbs: Vec<String> = s
        .per_db
        .iter()
        .map(|d| format!("db{}={}", d.db, d.keys))
        .collect();
    format!(
        "exported {} keys ({} with an expiry; {}) and {} function libraries to {}: {} bytes \
         in {:.2} s",
        s.keys,
        s.expires,
        if dbs.is_empty() {
            "no databases".to_string()
        } else {
            dbs.join(" ")
        },
        s.functions,
        out.display(),
        s.bytes,
        s.elapsed.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_arguments() {
        assert_eq!(arg_bytes("KEY", "00ff", true).unwrap(), vec![0, 255]);
        assert_eq!(arg_bytes("KEY", "00ff", false).unwrap(), b"00ff".to_vec());
        let e = arg_bytes("KEY", "0", true).unwrap_err().to_string();
        assert!(e.starts_with("bad KEY:"), "{e}");
    }

    #[test]
    fn type_report_format() {
        let mut r = strata_server::check::TypeReport {
            keys: [1, 2, 3, 4, 5, 6],
            members: 20,
            garbage: 7,
            ..Default::default()
        };
        let s = format_type_report(&r);
        assert!(
            s.starts_with("== Redis keys ==\nstring keys:      1\n"),
            "{s}"
        );
        assert!(s.contains("zset keys:        5\n"), "{s}");
        assert!(s.contains("stream keys:      6\n"), "{s}");
        assert!(s.contains("garbage records:  7\n"), "{s}");
        assert!(s.ends_with("problems:         0\nOK\n"), "{s}");
        // The database map is printed only when SWAPDB moved a database.
        r.moved_databases = vec![(0, 1), (1, 0)];
        let s = format_type_report(&r);
        assert!(
            s.ends_with("problems:         0\ndatabase map:     db 0 in 1, db 1 in 0\nOK\n"),
            "{s}"
        );
        r.problems
            .push("db 0 key \"s\": set size 5 but 2 member records".into());
        r.problem_count = 3;
        let s = format_type_report(&r);
        assert!(
            s.contains("problem: db 0 key \"s\": set size 5 but 2 member records\n"),
            "{s}"
        );
        assert!(
            s.ends_with("note: 2 more problem(s) not listed\nCORRUPT\n"),
            "{s}"
        );
    }

    #[test]
    fn check_report_format() {
        let mut r = CheckReport {
            tables: 3,
            blocks: 40,
            entries: 1000,
            wal_records: 7,
            manifest_records: 5,
            ..Default::default()
        };
        let s = format_check_report(&r);
        assert!(s.contains("tables:           3\n"), "{s}");
        assert!(s.ends_with("problems:         0\nOK\n"), "{s}");
        r.problems.push(strata_engine::Error::corruption(
            "/db/000007.sst",
            4096,
            "bad block checksum",
        ));
        let s = format_check_report(&r);
        assert!(
            s.contains(
                "problem: corruption in /db/000007.sst at offset 4096: bad block checksum\n"
            ),
            "{s}"
        );
        assert!(s.ends_with("CORRUPT\n"), "{s}");
    }
}
