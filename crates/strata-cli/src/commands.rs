//! The database subcommands: put, get, delete, scan, stats, gc, check.

use crate::opts::build_options;
use crate::text::{escape, parse_hex};
use crate::{Command, DbArgs, DeleteArgs, GcArgs, GetArgs, Outcome, PutArgs, ScanArgs};
use anyhow::{bail, Context, Result};
use std::io::{BufWriter, Write};
use std::path::Path;
use strata_engine::{CheckReport, Db, ReadOptions, WriteOptions};

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

/// Refuses, with a clear message, a directory that cannot hold a database. Commands that
/// only read call this before opening, so that they never create anything.
pub fn require_existing_db(dir: &Path) -> Result<()> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("no database exists at {shown}: the directory does not exist")
        }
        Err(e) => bail!("cannot access {shown}: {e}"),
        Ok(m) if !m.is_dir() => bail!("no database exists at {shown}: it is not a directory"),
        Ok(_) => {}
    }
    let mut entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read directory {shown}"))?;
    if entries.next().is_none() {
        bail!("no database exists at {shown}: the directory is empty");
    }
    Ok(())
}

/// Opens an existing database; never creates one.
fn open_existing(a: &DbArgs) -> Result<Db> {
    let mut o = build_options(&a.opts)?;
    require_existing_db(&a.db)?;
    o.create_if_missing = false;
    Db::open(&a.db, o).with_context(|| format!("cannot open database at {}", a.db.display()))
}

/// Opens the database, creating it (and its directory) unless an --opt says otherwise.
fn open_or_create(a: &DbArgs) -> Result<Db> {
    let o = build_options(&a.opts)?;
    if o.create_if_missing {
        std::fs::create_dir_all(&a.db)
            .with_context(|| format!("cannot create directory {}", a.db.display()))?;
    }
    Db::open(&a.db, o).with_context(|| format!("cannot open database at {}", a.db.display()))
}

fn close(db: Db, dir: &Path) -> Result<()> {
    db.close()
        .with_context(|| format!("cannot close database at {} cleanly", dir.display()))
}

fn put(a: PutArgs) -> Result<Outcome> {
    let key = arg_bytes("KEY", &a.key, a.hex)?;
    let value = arg_bytes("VALUE", &a.value, a.hex)?;
    let db = open_or_create(&a.db)?;
    let wo = WriteOptions {
        sync: a.sync,
        ..WriteOptions::default()
    };
    db.put_opt(&wo, &key, &value)
        .with_context(|| format!("cannot put key {}", escape(&key)))?;
    close(db, &a.db.db)?;
    Ok(Outcome::Done)
}

fn get(a: GetArgs) -> Result<Outcome> {
    let key = arg_bytes("KEY", &a.key, a.hex)?;
    let db = open_existing(&a.db)?;
    let value = db
        .get(&key)
        .with_context(|| format!("cannot get key {}", escape(&key)))?;
    close(db, &a.db.db)?;
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
    let db = open_or_create(&a.db)?;
    let wo = WriteOptions {
        sync: a.sync,
        ..WriteOptions::default()
    };
    db.delete_opt(&wo, &key)
        .with_context(|| format!("cannot delete key {}", escape(&key)))?;
    close(db, &a.db.db)?;
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
    let db = open_existing(&a.db)?;
    let range = ScanRange {
        start,
        end,
        limit: a.limit.unwrap_or(u64::MAX),
        reverse: a.reverse,
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    print_range(&db, &range, &mut out)?;
    out.flush()?;
    close(db, &a.db.db)?;
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

/// Writes one `KEY<TAB>VALUE` line per entry of `r`. The iterator lives only in here, so it
/// is gone before the database is closed.
fn print_range(db: &Db, r: &ScanRange, out: &mut impl Write) -> Result<()> {
    // The bounds let the engine skip tables outside the range. A reverse scan starts with
    // seek_for_prev(end), and a target at the upper bound is outside the iterator's range,
    // so a reverse scan passes only the lower bound and finds its start itself.
    let ro = ReadOptions {
        fill_cache: false,
        lower_bound: r.start.clone(),
        upper_bound: if r.reverse { None } else { r.end.clone() },
        ..ReadOptions::default()
    };
    let mut it = db.iter(&ro).context("cannot create an iterator")?;
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

fn stats(a: DbArgs) -> Result<Outcome> {
    let db = open_existing(&a)?;
    let s = db.stats();
    println!("{s}");
    close(db, &a.db)?;
    Ok(Outcome::Done)
}

fn gc(a: GcArgs) -> Result<Outcome> {
    if let Some(r) = a.ratio {
        if !(0.0..=1.0).contains(&r) {
            bail!("--ratio must be between 0 and 1, got {r}");
        }
    }
    let db = open_existing(&a.db)?;
    let report = match a.ratio {
        Some(r) => db.gc_opt(r),
        None => db.gc(),
    }
    .context("garbage collection failed")?;
    println!("{report}");
    let s = db.stats();
    println!(
        "value log: {} files, {:.1} MiB, {:.1} MiB garbage; space amplification {:.2}",
        s.vlog_files,
        s.vlog_bytes as f64 / (1 << 20) as f64,
        s.vlog_garbage_bytes as f64 / (1 << 20) as f64,
        s.space_amplification
    );
    close(db, &a.db.db)?;
    Ok(Outcome::Done)
}

fn check(a: DbArgs) -> Result<Outcome> {
    let mut o = build_options(&a.opts)?;
    require_existing_db(&a.db)?;
    o.create_if_missing = false;
    let report = Db::check(&a.db, o)
        .with_context(|| format!("cannot check database at {}", a.db.display()))?;
    print!("{}", format_check_report(&report));
    if report.problems.is_empty() {
        Ok(Outcome::Done)
    } else {
        eprintln!(
            "error: database at {} has {} problem(s)",
            a.db.display(),
            report.problems.len()
        );
        Ok(Outcome::Problems)
    }
}

/// The report as printed by `strata check`.
pub fn format_check_report(r: &CheckReport) -> String {
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
        r.problems.len()
    );
    for n in &r.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    for p in &r.problems {
        s.push_str(&format!("problem: {p}\n"));
    }
    s.push_str(if r.problems.is_empty() {
        "OK\n"
    } else {
        "CORRUPT\n"
    });
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_directory_is_reported_and_not_created() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("nope");
        let e = require_existing_db(&dir).unwrap_err().to_string();
        assert!(e.contains("no database exists at"), "{e}");
        assert!(e.contains("does not exist"), "{e}");
        assert!(!dir.exists());
    }

    #[test]
    fn empty_directory_and_file_are_not_databases() {
        let tmp = tempfile::tempdir().unwrap();
        let e = require_existing_db(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("the directory is empty"), "{e}");
        let f = tmp.path().join("file");
        std::fs::write(&f, b"x").unwrap();
        let e = require_existing_db(&f).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        assert!(require_existing_db(tmp.path()).is_ok());
    }

    #[test]
    fn hex_arguments() {
        assert_eq!(arg_bytes("KEY", "00ff", true).unwrap(), vec![0, 255]);
        assert_eq!(arg_bytes("KEY", "00ff", false).unwrap(), b"00ff".to_vec());
        let e = arg_bytes("KEY", "0", true).unwrap_err().to_string();
        assert!(e.starts_with("bad KEY:"), "{e}");
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
