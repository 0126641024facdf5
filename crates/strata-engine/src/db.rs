//! [`Db`]: one LSM-tree instance: the public API and `open`. The state it works on is
//! `state.rs`'s; background work is `jobs/`.
//!
//! Concurrency (`docs/design.md` §3): `state` (a mutex) owns the version set, the memtables
//! and the background bookkeeping and is never held for table I/O; writers go through the
//! group-commit queue (`write.rs`); readers take the super version and the sequence number
//! together (`docs/design.md` §5.1) and never take `state`; background threads flush and
//! compact (`jobs/`), one GC thread collects the value log (`jobs/gc.rs`); an I/O error in a
//! log, a flush or a compaction poisons every later write until reopen.

use crate::batch::WriteBatch;
use crate::commit::CommitPipeline;
use crate::compaction::{self, Busy, Shape};
use crate::error::{Error, Result};
use crate::filename::{self};

use crate::iter::{InternalIterator, MergingIterator};
use crate::options::{Options, ReadOptions, Snapshot, WriteOptions};
use crate::sst::TableOptions;
use crate::stats::Counters;
use crate::table_cache::TableCache;
use crate::version::VersionSet;
use crate::vlog::Vlog;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub use crate::check::CheckReport;
pub use crate::iter::DbIterator;
pub use crate::recovery::RecoveryInfo;
use crate::state::{DbInner, DbLog, DbState, SnapshotGuard, SuperVersion, DONE_RECHECK};
pub use crate::stats_report::Stats;
pub use crate::vlog::gc::GcReport;

/// One LSM-tree instance. Cheap to share between threads (`&Db` is enough for every
/// operation).
pub struct Db {
    pub(crate) inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database in directory `path`,
    /// replaying its WALs. Takes an exclusive lock on the directory.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let dir = path.as_ref().to_path_buf();
        let fs = opts.fs.clone();
        if !fs.exists(&dir)? {
            if !opts.create_if_missing {
                return Err(Error::InvalidArgument(format!(
                    "no database at {} (create_if_missing is off)",
                    dir.display()
                )));
            }
            crate::io::create_dir_durably(&fs, &dir)?;
        }
        let lock = fs.lock(&filename::lock(&dir))?;
        if fs.exists(&filename::current(&dir))? {
            if opts.error_if_exists {
                return Err(Error::InvalidArgument(format!(
                    "a database already exists at {} (error_if_exists is on)",
                    dir.display()
                )));
            }
        } else if opts.create_if_missing {
            VersionSet::create_new(&fs, &dir)?;
        } else {
            return Err(Error::InvalidArgument(format!(
                "no database at {} (create_if_missing is off)",
                dir.display()
            )));
        }
        let tier = match &opts.l0_tier_dir {
            Some(t) => Some(Arc::new(crate::l0tier::TierDir::open(
                t,
                opts.l0_table_options(),
            )?)),
            None => None,
        };
        let versions = VersionSet::recover(
            fs.clone(),
            &dir,
            opts.num_levels,
            tier.as_ref().map(|t| t.dir()),
        )?;
        let block_cache = (opts.block_cache_bytes > 0)
            .then(|| Arc::new(crate::cache::BlockCache::new(opts.block_cache_bytes)));
        let tables = Arc::new(
            TableCache::new(dir.clone(), fs.clone(), opts.max_open_files, block_cache)
                .with_direct_io(opts.direct_io)
                .with_tier(tier)
                .with_learned_index(opts.sst_learned_index),
        );
        let table_opts = TableOptions::from_options(&opts);
        let vlog = Arc::new(
            Vlog::new(&dir, fs.clone(), opts.direct_io)
                .with_mmap(opts.vlog_mmap)
                .with_value_cache(opts.value_cache_bytes()),
        );
        let rec = crate::recovery::recover(
            &dir,
            &fs,
            &opts,
            &tables,
            &table_opts,
            versions,
            &vlog.shared,
        )?;
        let (versions, mem, wal, recovery) = (rec.versions, rec.mem, rec.wal, rec.info);
        // Recovery verifies the L0 tier's tables: each is mapped and every block checked now
        // (a damaged one fails the open as corruption), and no read maps one later.
        if let Some(t) = tables.tier() {
            t.open_all(
                versions.current().levels[0]
                    .iter()
                    .filter(|f| f.tier)
                    .map(|f| f.number),
            )?;
        }
        *vlog.head.lock() = rec.vlog_head;
        let vlog_files = Arc::new(rec.vlog_files);
        let last_seq = versions.last_sequence;
        // The commit log is chosen here, once.
        let commit_log = if opts.separation() {
            DbLog::Vlog {
                vlog: vlog.clone(),
                threshold: opts.log_threshold(),
                group_unsynced: opts.vlog_group_unsynced,
            }
        } else {
            DbLog::Wal(Mutex::new(wal))
        };
        let sv = Arc::new(SuperVersion {
            mem: mem.clone(),
            imms: Vec::new(),
            version: versions.current(),
            vlog_files: vlog_files.clone(),
        });
        let inner = Arc::new(DbInner {
            dir,
            fs,
            table_opts,
            tables,
            state: Mutex::new(DbState {
                versions,
                mem,
                imms: Vec::new(),
                flushing: false,
                busy: Busy::default(),
                running_compactions: 0,
                pending_outputs: HashSet::new(),
                manual_compaction: false,
                vlog_files,
                gc: crate::vlog::gc::GcState {
                    // Counts for the replayed log were not made at its flush.
                    needs_verify: recovery.vlog_frames > 0,
                    ..Default::default()
                },
            }),
            bg_cv: Condvar::new(),
            done_cv: Condvar::new(),
            commit: CommitPipeline::new(commit_log, last_seq),
            mem_vlog_start: AtomicU64::new(0),
            vlog,
            gc_cv: Condvar::new(),
            gc_lock: Mutex::new(()),
            super_version: arc_swap::ArcSwap::new(sv),
            install_lock: Mutex::new(()),
            bg_error: Mutex::new(None),
            has_bg_error: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
            counters: Counters::default(),
            snapshots: Arc::new(Mutex::new(BTreeMap::new())),
            recovery,
            opts,
            _lock: lock,
        });
        {
            let mut st = inner.state.lock();
            inner.install_super_version(&mut st);
            let obsolete = inner.collect_obsolete(&st);
            drop(st);
            inner.delete_files(obsolete);
        }
        let mut threads = (0..inner.opts.background_threads)
            .map(|i| {
                let inner = inner.clone();
                std::thread::Builder::new()
                    .name(format!("strata-bg-{i}"))
                    .spawn(move || inner.background_loop())
                    .map_err(|e| Error::io("spawn", "background thread", e))
            })
            .collect::<Result<Vec<_>>>()?;
        if inner.opts.gc_interval_ms > 0 {
            let gc = inner.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("strata-gc".into())
                    .spawn(move || gc.gc_loop())
                    .map_err(|e| Error::io("spawn", "GC thread", e))?,
            );
        }
        Ok(Db {
            inner,
            threads: Mutex::new(threads),
        })
    }

    /// Writes `key = value` (not synced).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(&WriteOptions::default(), key, value)
    }

    pub fn put_opt(&self, wo: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        // Sized for its one record: growing from empty reallocated once per put (profiled).
        let mut b = WriteBatch::with_capacity(key.len() + value.len() + 11);
        b.put(key, value);
        self.write(wo, b)
    }

    /// Deletes `key` (not synced).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    pub fn delete_opt(&self, wo: &WriteOptions, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::with_capacity(key.len() + 6);
        b.delete(key);
        self.write(wo, b)
    }

    /// Applies `batch` atomically: after a crash either all of it or none is visible.
    pub fn write(&self, wo: &WriteOptions, batch: WriteBatch) -> Result<()> {
        batch.validate()?;
        if batch.is_empty() {
            return Ok(());
        }
        self.inner.write(wo, Some(batch), false)
    }

    /// The newest value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    pub fn get_opt(&self, ro: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(ro, key)
    }

    /// Looks up many keys at once, stage by stage over the batch (see `multi_get.rs`).
    /// Results are in request order; a failed read fails only the keys that needed it.
    pub fn multi_get(&self, ro: &ReadOptions, keys: &[&[u8]]) -> Vec<Result<Option<Vec<u8>>>> {
        self.inner.multi_get(ro, keys)
    }

    /// Looks up many batches of keys in one call, each batch against its own consistent
    /// snapshot (taken when the batch is started), with at most `max_reads_in_flight` block
    /// reads outstanding at any time. Unlike a loop of [`Db::multi_get`], the reads of the
    /// next batch start while the current one's last reads are still on the device, so the
    /// device queue does not drain at every batch's end (see `docs/batched-reads.md`).
    /// Results per batch, in request order; a failed read fails only the keys that needed it.
    pub fn multi_get_batches(
        &self,
        ro: &ReadOptions,
        batches: &[&[&[u8]]],
        max_reads_in_flight: usize,
    ) -> Vec<Vec<Result<Option<Vec<u8>>>>> {
        self.inner
            .multi_get_batches(ro, batches, max_reads_in_flight)
    }

    /// An iterator over the database as of `ro.snapshot` (or now).
    pub fn iter(&self, ro: &ReadOptions) -> Result<DbIterator> {
        let (sv, seq) = self.inner.read_view(ro);
        // An iterator lives long: it owns its super version rather than hold the load's guard.
        let sv = arc_swap::Guard::into_inner(sv);
        let params = crate::sst::ReadParams {
            verify_checksums: ro.verify_checksums,
            fill_cache: ro.fill_cache,
            readahead: 0,
        };
        let merged = merged_iter(&self.inner.tables, &sv, params)?;
        let source = crate::iter::db_iter::ValueSource {
            vlog: self.inner.vlog.clone(),
            files: sv.vlog_files.clone(),
            prefetch: self.inner.opts.vlog_prefetch,
            io_backend: self.inner.opts.io_backend,
            background: self.inner.opts.vlog_prefetch_background,
        };
        let keep: Box<dyn std::any::Any + Send> = Box::new((sv, ro.snapshot.clone()));
        Ok(DbIterator::new(
            merged,
            seq,
            ro.lower_bound.clone(),
            ro.upper_bound.clone(),
            keep,
        )
        .with_values(source))
    }

    /// A consistent view of the current state; compaction keeps what it can see.
    pub fn snapshot(&self) -> Snapshot {
        let mut r = self.inner.snapshots.lock();
        let seq = self.inner.visible_seq();
        *r.entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            _guard: Arc::new(SnapshotGuard {
                seq,
                registry: self.inner.snapshots.clone(),
            }),
        }
    }

    /// Turns the memtable into a table and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_and_wait()
    }

    /// Compacts every table overlapping `[start, end]` (None = unbounded) level by level
    /// down to the last level, and waits.
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        self.inner.compact_range(start, end)
    }

    /// Waits until no flush or compaction is pending or running.
    pub fn wait_idle(&self) -> Result<()> {
        let inner = &self.inner;
        let shape = Shape::from_options(&inner.opts);
        let mut st = inner.state.lock();
        loop {
            inner.check_bg_error()?;
            let idle = st.imms.is_empty()
                && !st.flushing
                && st.running_compactions == 0
                && compaction::picker::pick(
                    &st.versions.current(),
                    &shape,
                    &st.busy,
                    &st.versions.compact_pointers,
                )
                .is_none();
            if idle {
                return Ok(());
            }
            inner.done_cv.wait_for(&mut st, DONE_RECHECK);
        }
    }

    /// Where the newest value of `key` lives in the value log; `None` if the key is absent,
    /// deleted, or its value is stored inline in the tree.
    pub fn value_location(&self, key: &[u8]) -> Result<Option<crate::vlog::ValuePointer>> {
        let (sv, seq) = self.inner.read_view(&ReadOptions::default());
        let p = crate::get::params(&ReadOptions::default());
        match self.inner.get_entry(&sv, key, seq, p)? {
            Some(crate::get::Found::Pointer(raw)) => {
                crate::vlog::ValuePointer::decode_or_corrupt(&raw, "<lsm value pointer>").map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Numbers of the value-log files the database knows (the readers' set), so a test can
    /// compare them with the files in the directory and find orphans.
    #[doc(hidden)]
    pub fn vlog_file_numbers(&self) -> Vec<u64> {
        self.inner.state.lock().vlog_files.keys().copied().collect()
    }

    /// Runs value-log garbage collection now and waits: every sealed value-log file whose
    /// garbage is at least `Options::gc_garbage_ratio` of its size is collected (live values
    /// rewritten to the head, then the file removed once no snapshot can read it).
    pub fn gc(&self) -> Result<GcReport> {
        self.gc_opt(self.inner.opts.gc_garbage_ratio)
    }

    /// Like [`Db::gc`] with another garbage ratio (0 collects every sealed file that is below
    /// the durable head).
    pub fn gc_opt(&self, min_garbage_ratio: f64) -> Result<GcReport> {
        self.inner.gc_manual(min_garbage_ratio)
    }

    /// Figures about the instance.
    pub fn stats(&self) -> Stats {
        crate::stats_report::collect(&self.inner)
    }

    /// Verifies every checksum of the database at `path` without modifying it.
    pub fn check(path: impl AsRef<Path>, opts: Options) -> Result<CheckReport> {
        crate::check::check(path.as_ref(), opts)
    }

    /// Writes a copy of the database as of one moment into the new directory `dest` (which
    /// must not exist), usable as a backup: opened, it holds every write acknowledged before
    /// the call and none made after it returned. Tables and sealed value-log files are hard
    /// links where the file system allows. Writes wait while the live log is copied
    /// (`docs/design.md` §7.5). On error `dest` may hold a partial copy: remove it.
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<()> {
        self.inner.checkpoint(dest.as_ref())
    }

    /// What the last open recovered from the WALs.
    pub fn recovery_info(&self) -> RecoveryInfo {
        self.inner.recovery.clone()
    }

    /// Stops background work, syncs the WAL and releases the directory lock.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        // Writes made without the log live only in memtables: flush them, so that a clean
        // close keeps them (a crash does not). A failure is reported after the shutdown.
        let flushed = if self.inner.shutting_down.load(Ordering::Acquire)
            || self.inner.has_bg_error.load(Ordering::Acquire)
        {
            Ok(())
        } else {
            self.inner.flush_unlogged()
        };
        self.inner.shutting_down.store(true, Ordering::Release);
        {
            let _st = self.inner.state.lock();
            self.inner.bg_cv.notify_all();
            self.inner.done_cv.notify_all();
            self.inner.gc_cv.notify_all();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // Sync the log even after a background error: the writes it holds were acknowledged
        // and a failed flush does not make them less durable. Then report the error, so
        // that `close` never says Ok for a database that failed.
        let synced = self.inner.commit.log().seal();
        if let Some(e) = self.inner.bg_error.lock().as_ref() {
            return Err(Error::Poisoned(e.to_string()));
        }
        flushed.and(synced)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// A merged iterator over every memtable and table of `sv`.
fn merged_iter(
    tables: &Arc<TableCache>,
    sv: &SuperVersion,
    params: crate::sst::ReadParams,
) -> Result<Box<MergingIterator>> {
    let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(sv.mem.iter())];
    for m in &sv.imms {
        children.push(Box::new(m.iter()));
    }
    children.extend(crate::iter::table_iters(tables, &sv.version, params)?);
    Ok(Box::new(MergingIterator::new(children)))
}

#[cfg(test)]
mod read_view_tests {
    //! A reader paused between taking its super version and its sequence number (the
    //! window widened on purpose) must still never meet a pointer into a value-log file its
    //! view lacks, while writers rotate 1 KiB value-log files under it.
    use super::*;
    use crate::io::MemFs;
    use crate::state::read_view_pause::PAUSE_MICROS;

    #[test]
    fn a_paused_reader_keeps_a_consistent_view_across_rotations() {
        let opts = Options {
            fs: Arc::new(MemFs::new()),
            sep_threshold_bytes: 16,
            vlog_file_bytes: 1 << 10,
            gc_interval_ms: 0,
            ..Options::default()
        };
        let db = Arc::new(Db::open("/db", opts).unwrap());
        for i in 0..4u8 {
            db.put(&[i], &[0u8; 100]).unwrap();
        }
        PAUSE_MICROS.store(200, Ordering::Relaxed);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    db.put(&[(n % 4) as u8], &[n as u8; 100]).unwrap();
                    n += 1;
                }
                n
            })
        };
        let start = std::time::Instant::now();
        let mut reads = 0u32;
        while start.elapsed() < std::time::Duration::from_secs(1) {
            for i in 0..4u8 {
                let v = db.get(&[i]);
                assert!(matches!(&v, Ok(Some(v)) if v.len() == 100), "{v:?}");
                reads += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        PAUSE_MICROS.store(0, Ordering::Relaxed);
        let writes = writer.join().unwrap();
        assert!(
            writes > 100 && reads > 100,
            "{writes} writes, {reads} reads"
        );
        assert!(db.stats().vlog_files > 3);
    }
}
