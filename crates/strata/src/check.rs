//! Maintenance of a sharded database over Strata's engine: `check` (verify every checksum
//! without changing anything, `strata check`) and value-log garbage collection on every shard
//! (`strata gc`).
//!
//! `check` reads the `SHARDS` file, checks each shard directory with
//! [`strata_engine::Db::check`] and walks the transaction log (`txlog.rs`): header, every
//! record's checksum and order. It holds the database's `LOCK` for the whole run, so it never
//! races a writer, and goes on after a problem so that one run lists all of them.

use crate::meta::{shard_dir, ShardMeta};
use crate::txlog;
use crate::{DbOptions, Engine, ShardedDb, StrataEngine};
use std::path::Path;
use strata_engine::{CheckReport, Error, GcReport, Result};

/// What [`ShardedDb::check`] found.
#[derive(Debug, Default)]
pub struct ShardedCheckReport {
    /// Shard count from the `SHARDS` file (0 if it could not be read).
    pub shard_count: usize,
    /// Each shard's report, in shard order (a shard that could not be checked at all has an
    /// empty report holding the reason as its problem).
    pub shards: Vec<CheckReport>,
    /// Valid commit records in `TXLOG`.
    pub txlog_records: u64,
    /// The committed GSN those records establish.
    pub committed_gsn: u64,
    /// Problems of the front's own files (`SHARDS`, `TXLOG`, shard directories).
    pub problems: Vec<Error>,
    /// Facts worth knowing that are not damage (e.g. a torn last commit record).
    pub notes: Vec<String>,
}

impl ShardedCheckReport {
    /// Problems found anywhere: in the front's files and in every shard.
    pub fn problem_count(&self) -> usize {
        self.problems.len() + self.shards.iter().map(|s| s.problems.len()).sum::<usize>()
    }

    pub fn is_ok(&self) -> bool {
        self.problem_count() == 0
    }
}

impl ShardedDb<StrataEngine> {
    /// Verifies every checksum of the sharded database at `path` without modifying it: the
    /// `SHARDS` file, each shard (tables, WALs, value log, MANIFEST) and the transaction log.
    /// Fails (rather than reporting a problem) when `path` holds no sharded database, holds
    /// one over another engine, or is open.
    pub fn check(path: impl AsRef<Path>, opts: DbOptions) -> Result<ShardedCheckReport> {
        let root = path.as_ref();
        let fs = opts.engine.fs.clone();
        let shards_file = root.join(crate::meta::FILE);
        if !fs.exists(&shards_file)? {
            return Err(Error::InvalidArgument(format!(
                "no sharded database at {} (no SHARDS file)",
                root.display()
            )));
        }
        let _lock = fs.lock(&root.join("LOCK"))?;
        let mut report = ShardedCheckReport::default();
        let meta = match ShardMeta::load(&*fs, root) {
            Ok(Some(m)) => m,
            Ok(None) => unreachable!("SHARDS exists and the database is locked"),
            Err(e) if e.is_corruption() => {
                report.problems.push(e);
                return Ok(report);
            }
            Err(e) => return Err(e),
        };
        if meta.engine != <StrataEngine as Engine>::NAME {
            return Err(Error::InvalidArgument(format!(
                "{} holds a sharded database over engine {:?}, not Strata's",
                root.display(),
                meta.engine
            )));
        }
        report.shard_count = meta.shards;
        for i in 0..meta.shards {
            let dir = shard_dir(root, i);
            let shard = if !fs.exists(&dir.join("CURRENT"))? {
                CheckReport {
                    problems: vec![Error::corruption(
                        &dir,
                        0,
                        "shard directory (or its CURRENT file) is missing",
                    )],
                    ..CheckReport::default()
                }
            } else {
                strata_engine::Db::check(&dir, opts.engine.clone()).unwrap_or_else(|e| {
                    CheckReport {
                        problems: vec![e],
                        ..CheckReport::default()
                    }
                })
            };
            report.shards.push(shard);
        }
        let extra = shard_dir(root, meta.shards);
        if fs.exists(&extra)? {
            report.problems.push(Error::corruption(
                &extra,
                0,
                format!(
                    "shard directory beyond the {} shards of the SHARDS file",
                    meta.shards
                ),
            ));
        }
        let log = root.join(txlog::FILE);
        if !fs.exists(&log)? {
            report.notes.push(format!(
                "{}: absent (no cross-shard batch ever committed)",
                log.display()
            ));
            return Ok(report);
        }
        match fs.read_all(&log).and_then(|d| txlog::scan(&d, &log)) {
            Ok(s) => {
                report.txlog_records = s.records;
                report.committed_gsn = s.committed;
                if let Some(off) = s.torn_tail {
                    report.notes.push(format!(
                        "{}: torn last commit record at offset {off}; recovery ignores it",
                        log.display()
                    ));
                }
            }
            Err(e) => report.problems.push(e),
        }
        Ok(report)
    }

    /// Runs value-log garbage collection now on every shard, in parallel, and waits:
    /// [`strata_engine::Db::gc`] on each. Returns each shard's report, in shard order.
    pub fn gc(&self) -> Result<Vec<GcReport>> {
        self.on_every_engine(|db| db.gc())
    }

    /// Like [`ShardedDb::gc`] with another garbage ratio (see [`strata_engine::Db::gc_opt`]).
    pub fn gc_opt(&self, min_garbage_ratio: f64) -> Result<Vec<GcReport>> {
        self.on_every_engine(|db| db.gc_opt(min_garbage_ratio))
    }

    /// Runs `f` on every shard's engine in parallel, in the calling thread's scope rather
    /// than on the workers: the engine's GC runs beside writes (as its background GC does),
    /// so the shards keep serving requests meanwhile.
    fn on_every_engine<T: Send>(
        &self,
        f: impl Fn(&strata_engine::Db) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        self.health()?;
        let f = &f;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.shard_count())
                .map(|i| {
                    let db = self.engine(i).db();
                    s.spawn(move || f(db))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Poisoned(
                            "a shard's maintenance panicked".to_string(),
                        ))
                    })
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{Db, DbOptions, WriteBatch};

    fn opts(shards: Option<usize>) -> DbOptions {
        DbOptions {
            shards,
            ..DbOptions::default()
        }
    }

    #[test]
    fn check_sees_every_shard_and_the_txlog_and_gc_runs_on_every_shard() {
        let t = tempfile::tempdir().unwrap();
        let db = Db::open(t.path(), opts(Some(3))).unwrap();
        let mut b = WriteBatch::new();
        for i in 0..20u32 {
            b.put(&i.to_be_bytes(), b"v");
        }
        db.write(b).unwrap();
        db.flush().unwrap();
        assert_eq!(db.gc_opt(0.0).unwrap().len(), 3);
        db.close().unwrap();

        let r = Db::check(t.path(), opts(None)).unwrap();
        assert!(r.is_ok(), "{r:?}");
        assert_eq!((r.shard_count, r.shards.len()), (3, 3));
        assert!(r.committed_gsn >= 1 && r.txlog_records >= 1, "{r:?}");
        assert!(r.shards.iter().map(|s| s.entries).sum::<u64>() >= 20);

        // A damaged transaction log header and a missing shard are both reported.
        let log = t.path().join(crate::txlog::FILE);
        let mut d = std::fs::read(&log).unwrap();
        d[0] ^= 1;
        std::fs::write(&log, d).unwrap();
        std::fs::remove_dir_all(crate::meta::shard_dir(t.path(), 1)).unwrap();
        let r = Db::check(t.path(), opts(None)).unwrap();
        assert_eq!(r.problem_count(), 2, "{r:?}");
        assert!(r.problems[0].is_corruption());
        assert_eq!(r.shards[1].problems.len(), 1);
    }

    #[test]
    fn check_refuses_what_is_not_a_sharded_database() {
        let t = tempfile::tempdir().unwrap();
        let e = Db::check(t.path(), opts(None)).unwrap_err().to_string();
        assert!(e.contains("no sharded database"), "{e}");
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);
    }
}
