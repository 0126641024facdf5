//! [`Db`]: one LSM-tree instance.
//!
//! Concurrency (`docs/design.md` §3): `state` (a mutex) owns the version set, the memtables
//! and the background bookkeeping and is never held for table I/O; writers go through the
//! group-commit queue (`write.rs`); readers take the super version and the sequence number
//! together (`docs/design.md` §5.1) and never take `state`; background threads flush and
//! compact, one GC thread collects the value log (`vlog/gc.rs`); an I/O error in a log, a
//! flush or a compaction poisons every later write until reopen.

use crate::batch::WriteBatch;
use crate::commit::{CommitLog, CommitPipeline};
use crate::compaction::filter::{FilterReads, FilterReason, FilterStats};
use crate::compaction::{self, Busy, CompactionPlan, JobEnv, Shape};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::io::{FileLock, Fs};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{SeqNo, ValueKind};
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, Snapshot, WriteOptions};
use crate::sst::TableOptions;
use crate::stats::Counters;
use crate::table_cache::TableCache;
use crate::version::{Version, VersionEdit, VersionSet};
use crate::vlog::{Vlog, VlogFileSet};
use crate::write::DbLog;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub use crate::check::CheckReport;
pub use crate::iter::DbIterator;
pub use crate::stats_report::Stats;
pub use crate::vlog::gc::GcReport;

/// What readers need: memtables and tables at one moment.
pub(crate) struct SuperVersion {
    pub mem: Arc<MemTable>,
    /// Newest first.
    pub imms: Vec<Arc<MemTable>>,
    pub version: Arc<Version>,
    /// Value-log files pointers may lead into.
    pub vlog_files: Arc<VlogFileSet>,
}

pub(crate) struct DbState {
    pub versions: VersionSet,
    pub mem: Arc<MemTable>,
    /// Oldest first.
    pub imms: Vec<Arc<MemTable>>,
    pub flushing: bool,
    pub busy: Busy,
    pub running_compactions: usize,
    pub pending_outputs: HashSet<u64>,
    pub manual_compaction: bool,
    /// Value-log files readers may need (copy-on-write, published in the super version).
    pub vlog_files: Arc<VlogFileSet>,
    pub gc: crate::vlog::gc::GcState,
}

pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub opts: Options,
    pub fs: Arc<dyn Fs>,
    pub table_opts: TableOptions,
    pub tables: Arc<TableCache>,
    pub state: Mutex<DbState>,
    pub bg_cv: Condvar,
    pub done_cv: Condvar,
    /// The commit pipeline and the commit log it owns (`commit.rs`).
    pub commit: CommitPipeline<DbLog>,
    /// `HeadShared::appended` when the current memtable started (written in the commit
    /// pipeline's exclusive turn, read by every writer's room check).
    pub mem_vlog_start: AtomicU64,
    pub vlog: Arc<Vlog>,
    pub gc_cv: Condvar,
    pub gc_lock: Mutex<()>,
    pub super_version: RwLock<Arc<SuperVersion>>,
    pub bg_error: Mutex<Option<Error>>,
    pub has_bg_error: AtomicBool,
    pub shutting_down: AtomicBool,
    pub counters: Counters,
    pub snapshots: Arc<Mutex<BTreeMap<SeqNo, usize>>>,
    pub recovery: RecoveryInfo,
    _lock: Box<dyn FileLock>,
}

/// What the last open found in the WALs.
#[derive(Clone, Debug, Default)]
pub struct RecoveryInfo {
    pub wal_files: u64,
    pub wal_records: u64,
    /// Value-log files read from the durable head on.
    pub vlog_files: u64,
    /// Value-log frames (commit groups) replayed.
    pub vlog_frames: u64,
    /// A torn log tail (WAL or value log) that was dropped: (file, offset, reason).
    pub truncated_tail: Option<(PathBuf, u64, String)>,
}

/// Keeps a snapshot's sequence registered while any clone of it lives.
pub(crate) struct SnapshotGuard {
    seq: SeqNo,
    registry: Arc<Mutex<BTreeMap<SeqNo, usize>>>,
}

impl Drop for SnapshotGuard {
    fn drop(&mut self) {
        let mut r = self.registry.lock();
        if let Some(c) = r.get_mut(&self.seq) {
            *c -= 1;
            if *c == 0 {
                r.remove(&self.seq);
            }
        }
    }
}

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
            create_dir_durably(&fs, &dir)?;
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
        let vlog = Arc::new(Vlog::new(&dir, fs.clone(), opts.direct_io).with_mmap(opts.vlog_mmap));
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
                threshold: opts.sep_threshold_bytes,
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
            super_version: RwLock::new(sv),
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
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(wo, b)
    }

    /// Deletes `key` (not synced).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    pub fn delete_opt(&self, wo: &WriteOptions, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
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

    /// An iterator over the database as of `ro.snapshot` (or now).
    pub fn iter(&self, ro: &ReadOptions) -> Result<DbIterator> {
        let (sv, seq) = self.inner.read_view(ro);
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
        let synced = self.inner.commit.log().sync();
        if let Some(e) = self.inner.bg_error.lock().as_ref() {
            return Err(Error::Poisoned(e.to_string()));
        }
        flushed.and(synced)
    }
}

/// Waiters on `done_cv` re-check their condition at least this often. `set_bg_error` wakes
/// them without holding `state` (some of its callers hold it, others do not), so a waiter
/// that checked the error flag just before it was set could miss that wake-up; with the
/// background threads then idle, nothing else would wake it (seen as a hung `flush` in the
/// concurrent crash test under load).
const DONE_RECHECK: std::time::Duration = std::time::Duration::from_millis(100);

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl DbInner {
    /// Freezes the memtable and waits until every frozen memtable is flushed.
    pub(crate) fn flush_and_wait(&self) -> Result<()> {
        self.write(&WriteOptions::default(), None, true)?;
        let mut st = self.state.lock();
        loop {
            self.check_bg_error()?;
            if st.imms.is_empty() {
                return Ok(());
            }
            self.done_cv.wait_for(&mut st, DONE_RECHECK);
        }
    }

    /// Makes the writes no log replays (`WriteOptions::disable_wal`) durable by flushing
    /// the memtables that hold them, and waits. Called before GC records a file obsolete
    /// (GC let such a write decide that an older value was garbage, so the write must
    /// outlive a crash), and by a clean close.
    pub(crate) fn flush_unlogged(&self) -> Result<()> {
        let sv = self.super_version.read().clone();
        let targets: Vec<Arc<MemTable>> = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .filter(|m| m.has_unlogged())
            .cloned()
            .collect();
        if targets.is_empty() {
            return Ok(());
        }
        if sv.mem.has_unlogged() {
            self.write(&WriteOptions::default(), None, true)?;
        }
        let mut st = self.state.lock();
        loop {
            self.check_bg_error()?;
            let pending = std::iter::once(&st.mem)
                .chain(st.imms.iter())
                .any(|m| targets.iter().any(|t| Arc::ptr_eq(m, t)));
            if !pending {
                return Ok(());
            }
            self.done_cv.wait_for(&mut st, DONE_RECHECK);
        }
    }

    pub(crate) fn check_bg_error(&self) -> Result<()> {
        if self.has_bg_error.load(Ordering::Acquire) {
            if let Some(e) = &*self.bg_error.lock() {
                return Err(Error::Poisoned(e.to_string()));
            }
        }
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Makes `e` sticky: no write is accepted after it.
    pub(crate) fn set_bg_error(&self, e: &Error) {
        let mut g = self.bg_error.lock();
        if g.is_none() {
            *g = Some(e.clone());
        }
        self.has_bg_error.store(true, Ordering::Release);
        self.done_cv.notify_all();
    }

    /// A reader's view: the super version and the sequence number to read at, taken together
    /// under the super version's read lock. A new super version (a new memtable, a new
    /// value-log file) is installed under the write lock before any write that depends on it
    /// is applied, so every write at or below the sequence taken here is reachable through
    /// the super version taken with it: its memtable is listed and the value-log file its
    /// pointer names is in the file set. Taken apart, a reader could hold the file set of
    /// before a rotation and a sequence of after it, and see a pointer into a file its set
    /// lacks. A file leaves the set only when GC retires it, which waits for every snapshot
    /// older than the rewrites, so a snapshot's sequence is covered too.
    pub(crate) fn read_view(&self, ro: &ReadOptions) -> (Arc<SuperVersion>, SeqNo) {
        let sv = self.super_version.read();
        #[cfg(test)]
        read_view_tests::pause();
        let seq = self.read_seq(ro);
        (sv.clone(), seq)
    }

    pub(crate) fn read_seq(&self, ro: &ReadOptions) -> SeqNo {
        match &ro.snapshot {
            Some(s) => s.seq,
            None => self.visible_seq(),
        }
    }

    /// Publishes the current memtables and version to readers. Call with `state` held.
    pub(crate) fn install_super_version(&self, st: &mut DbState) {
        let sv = Arc::new(SuperVersion {
            mem: st.mem.clone(),
            imms: st.imms.iter().rev().cloned().collect(),
            version: st.versions.hand_out(),
            vlog_files: st.vlog_files.clone(),
        });
        *self.super_version.write() = sv;
    }

    /// The smallest sequence number any reader may still read at.
    pub(crate) fn smallest_snapshot(&self) -> SeqNo {
        let r = self.snapshots.lock();
        r.keys()
            .next()
            .copied()
            .unwrap_or_else(|| self.visible_seq())
    }

    /// Files of the directory that nothing needs any more. Call with `state` held.
    pub(crate) fn collect_obsolete(&self, st: &DbState) -> Vec<(FileKind, u64)> {
        let Ok(names) = self.fs.list(&self.dir) else {
            return Vec::new();
        };
        let live = st.versions.live_tables();
        let min_wal = st
            .imms
            .first()
            .map_or(st.mem.wal_number(), |m| m.wal_number())
            .min(st.versions.log_number);
        // The L0 tier's directory holds only its tables.
        let tier_names = self
            .tables
            .tier()
            .and_then(|t| t.on_disk().ok())
            .unwrap_or_default();
        names
            .iter()
            .filter_map(|n| filename::parse(n))
            .filter(|(kind, _)| *kind != FileKind::L0Table)
            .chain(tier_names.into_iter().map(|n| (FileKind::L0Table, n)))
            .filter(|(kind, n)| match kind {
                FileKind::Table | FileKind::L0Table => {
                    !live.contains(n) && !st.pending_outputs.contains(n)
                }
                FileKind::Wal => *n < min_wal,
                FileKind::Manifest => *n != st.versions.manifest_number(),
                FileKind::Temp => !st.pending_outputs.contains(n),
                // Value-log files are GC's (`vlog/gc.rs`).
                FileKind::Current | FileKind::Lock | FileKind::Vlog => false,
            })
            .collect()
    }

    pub(crate) fn delete_files(&self, files: Vec<(FileKind, u64)>) {
        for (kind, n) in files {
            let path = match kind {
                FileKind::Table => {
                    self.tables.evict(n);
                    filename::table(&self.dir, n)
                }
                FileKind::Wal => filename::wal(&self.dir, n),
                FileKind::Manifest => filename::manifest(&self.dir, n),
                FileKind::Temp => filename::temp(&self.dir, n),
                FileKind::L0Table => {
                    if let Some(t) = self.tables.tier() {
                        t.remove(n);
                    }
                    continue;
                }
                _ => continue,
            };
            // A file that cannot be removed is retried at the next cleanup.
            let _ = self.fs.remove(&path);
        }
    }

    fn job_env<'a>(
        &'a self,
        version: &'a Version,
        new_file_number: &'a (dyn Fn() -> u64 + Sync),
        use_filter: bool,
    ) -> JobEnv<'a> {
        JobEnv {
            dir: &self.dir,
            fs: &self.fs,
            tables: &self.tables,
            table_opts: self.table_opts,
            target_file_size: self.opts.target_file_size_bytes,
            readahead: self.opts.compaction_readahead_bytes,
            verify_checksums: self.opts.paranoid_checks,
            smallest_snapshot: self.smallest_snapshot(),
            version,
            new_file_number,
            shutting_down: &self.shutting_down,
            filter: self.job_filter(use_filter),
        }
    }

    fn allocate_output(&self) -> u64 {
        let mut st = self.state.lock();
        let n = st.versions.new_file_number();
        st.pending_outputs.insert(n);
        n
    }

    /// Background thread: flushes first, then compactions, until shutdown.
    fn background_loop(self: Arc<Self>) {
        let shape = Shape::from_options(&self.opts);
        let max_compactions = self.opts.background_threads.saturating_sub(1).max(1);
        loop {
            let mut st = self.state.lock();
            let task = loop {
                if self.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                if !self.has_bg_error.load(Ordering::Acquire) {
                    if !st.flushing && !st.imms.is_empty() {
                        st.flushing = true;
                        break None;
                    }
                    if !st.manual_compaction && st.running_compactions < max_compactions {
                        let v = st.versions.current();
                        if let Some(p) = compaction::picker::pick(
                            &v,
                            &shape,
                            &st.busy,
                            &st.versions.compact_pointers,
                        ) {
                            self.mark_busy(&mut st, &p);
                            break Some((p, v));
                        }
                    }
                }
                self.bg_cv.wait(&mut st);
            };
            drop(st);
            let r = match task {
                None => self.flush_one(),
                Some((plan, v)) => self.compact(&plan, v),
            };
            if let Err(e) = r {
                if !matches!(e, Error::Closed) {
                    self.set_bg_error(&e);
                }
            }
            let _st = self.state.lock();
            self.done_cv.notify_all();
            self.bg_cv.notify_all();
        }
    }

    fn mark_busy(&self, st: &mut DbState, p: &CompactionPlan) {
        for f in p.inputs.iter().chain(&p.next_inputs) {
            st.busy.files.insert(f.number);
        }
        let (lo, hi) = p.range();
        st.busy.ranges.push((p.output_level, lo, hi));
        st.running_compactions += 1;
    }

    fn unmark_busy(&self, st: &mut DbState, p: &CompactionPlan) {
        for f in p.inputs.iter().chain(&p.next_inputs) {
            st.busy.files.remove(&f.number);
        }
        let (lo, hi) = p.range();
        if let Some(i) = st
            .busy
            .ranges
            .iter()
            .position(|(l, a, b)| *l == p.output_level && *a == lo && *b == hi)
        {
            st.busy.ranges.remove(i);
        }
        st.running_compactions -= 1;
    }

    /// Flushes the oldest immutable memtable to an L0 table. `state.flushing` is set.
    fn flush_one(&self) -> Result<()> {
        let imm = {
            let st = self.state.lock();
            st.imms.first().cloned()
        };
        let Some(imm) = imm else {
            self.state.lock().flushing = false;
            return Ok(());
        };
        let mut use_filter = self.opts.compaction_filter.is_some();
        let (mut st, _snapshots, meta, mut garbage, filtered) = loop {
            let version = self.state.lock().versions.hand_out();
            let result = self
                .write_l0_table(&imm, &version, use_filter)
                .and_then(|(m, f)| Ok((m, f, self.flush_garbage(&imm, &version)?)))
                .and_then(|r| self.sync_if_filtered(&r.1).map(|()| r));
            drop(version);
            let mut st = self.state.lock();
            let (meta, filtered, garbage) = match result {
                Ok(r) => r,
                Err(e) => {
                    st.flushing = false;
                    return Err(e);
                }
            };
            match self.snapshots_allow(&filtered) {
                Some(guard) => break (st, guard, meta, garbage, filtered),
                None => {
                    // A snapshot taken while the flush ran could read what the filter
                    // removed: write the memtable again without the filter.
                    if let Some(m) = &meta {
                        st.pending_outputs.remove(&m.number);
                        self.delete_files(vec![(m.kind(), m.number)]);
                    }
                    Counters::add(&self.counters.filter_retries, 1);
                    use_filter = false;
                }
            }
        };
        st.flushing = false;
        // The filter removed pointers of this memtable, whose bytes the edit adds as live.
        for (file, bytes) in &filtered.removed_pointers {
            match garbage.iter_mut().find(|(f, _)| f == file) {
                Some((_, b)) => *b += bytes,
                None => garbage.push((*file, *bytes)),
            }
        }
        Counters::add(&self.counters.filter_removed, filtered.removed);
        Counters::add(&self.counters.filter_value_reads, filtered.value_reads);
        let mut edit = VersionEdit {
            vlog_garbage: garbage,
            ..VersionEdit::default()
        };
        let bytes = meta.as_ref().map_or(0, |m| m.size);
        if meta.as_ref().is_some_and(|m| m.tier) {
            Counters::add(&self.counters.l0_tier_flushes, 1);
        }
        if let Some(m) = meta {
            st.pending_outputs.remove(&m.number);
            edit.new_files.push((0, m));
        }
        let next = st.imms.get(1).unwrap_or(&st.mem);
        edit.log_number = Some(next.wal_number());
        if let Some(head) = next.vlog_start() {
            edit.vlog_head = Some(head);
        }
        edit.vlog_live_added = imm.vlog_refs();
        let found_garbage = !edit.vlog_garbage.is_empty();
        st.versions.last_sequence = st.versions.last_sequence.max(self.visible_seq());
        st.versions.log_and_apply(edit)?;
        st.imms.remove(0);
        self.install_super_version(&mut st);
        drop(_snapshots);
        if found_garbage {
            self.gc_cv.notify_all();
        }
        Counters::add(&self.counters.flush_bytes, bytes);
        Counters::add(&self.counters.flushes, 1);
        let obsolete = self.collect_obsolete(&st);
        drop(st);
        self.delete_files(obsolete);
        Ok(())
    }

    /// The largest registered snapshot, if any.
    fn largest_snapshot(&self) -> Option<SeqNo> {
        self.snapshots.lock().keys().next_back().copied()
    }

    /// The compaction filter a job started now uses (`use_filter`: a retry runs without).
    fn job_filter(&self, use_filter: bool) -> Option<compaction::job::JobFilter<'_>> {
        let filter = self
            .opts
            .compaction_filter
            .as_deref()
            .filter(|_| use_filter)?;
        Some(compaction::job::JobFilter {
            filter,
            reads: self,
            largest_snapshot: self.largest_snapshot(),
        })
    }

    /// The filter may have decided from reads of the database (`FilterContext::get`): every
    /// logged write it could have seen is made durable before its removals are installed,
    /// so no crash can keep a removal and lose the write that justified it.
    fn sync_if_filtered(&self, f: &FilterStats) -> Result<()> {
        if f.removed == 0 {
            return Ok(());
        }
        self.sync_logs()
    }

    /// Called with `state` held, before installing a job whose filter removed records:
    /// `None` if a snapshot registered since the job started could read one of them (every
    /// snapshot at or above the smallest removed sequence number; those registered when the
    /// job started were all below every removed record). Otherwise the snapshot registry's
    /// guard, held until the new super version is installed, so that no snapshot is taken
    /// in between that would read the old tables first and the filtered ones after.
    fn snapshots_allow(
        &self,
        f: &FilterStats,
    ) -> Option<Option<parking_lot::MutexGuard<'_, BTreeMap<SeqNo, usize>>>> {
        let Some(min) = f.min_removed_seq else {
            return Some(None);
        };
        let g = self.snapshots.lock();
        if g.range(min..).next().is_some() {
            return None;
        }
        Some(Some(g))
    }

    /// Value-log garbage that flushing `mem` reveals (`docs/design.md` §6.2):
    /// every separated value that a newer version of its key in `mem` shadows, whether that
    /// value is in `mem` itself or is the key's newest entry in the tables of `version`.
    /// A value that a live snapshot can still see is not counted (GC's verification scans
    /// find it later).
    fn flush_garbage(&self, mem: &Arc<MemTable>, version: &Version) -> Result<Vec<(u64, u64)>> {
        let tree_has_pointers = {
            let st = self.state.lock();
            if st.vlog_files.is_empty() {
                return Ok(Vec::new());
            }
            st.versions.vlog.live.values().any(|n| *n > 0)
        };
        let snaps: Vec<SeqNo> = self.snapshots.lock().keys().copied().collect();
        let skipped = std::cell::Cell::new(false);
        let visible_to_snapshot = |old: SeqNo, new: SeqNo| {
            let v = snaps.iter().any(|s| *s >= old && *s < new);
            skipped.set(skipped.get() | v);
            v
        };
        let mut garbage: std::collections::BTreeMap<u64, u64> = Default::default();
        let mut count = |raw: &[u8]| {
            if let Some(p) = crate::vlog::ValuePointer::decode(raw) {
                *garbage.entry(p.file).or_insert(0) += u64::from(p.len);
            }
        };
        let mut it = mem.iter();
        it.seek_to_first();
        // (user key, sequence of its oldest version seen so far in `mem`)
        let mut current: Option<(Vec<u8>, SeqNo)> = None;
        let tree_check = |key: &[u8], oldest: SeqNo, count: &mut dyn FnMut(&[u8])| {
            if !tree_has_pointers {
                return Ok(());
            }
            if let Some((seq, ValueKind::Pointer, raw)) = self.table_entry(version, key)? {
                if !visible_to_snapshot(seq, oldest) {
                    count(&raw);
                }
            }
            Ok::<(), Error>(())
        };
        while it.valid() {
            let Some(p) = crate::key::parse_internal_key(it.key()) else {
                return Err(Error::corruption("<memtable>", 0, "malformed internal key"));
            };
            match &mut current {
                Some((k, newer)) if k.as_slice() == p.user_key => {
                    if p.kind == ValueKind::Pointer && !visible_to_snapshot(p.seq, *newer) {
                        count(it.value());
                    }
                    *newer = p.seq;
                }
                _ => {
                    if let Some((k, oldest)) = current.take() {
                        tree_check(&k, oldest, &mut count)?;
                    }
                    current = Some((p.user_key.to_vec(), p.seq));
                }
            }
            it.next();
        }
        if let Some((k, oldest)) = current.take() {
            tree_check(&k, oldest, &mut count)?;
        }
        if skipped.get() {
            self.state.lock().gc.needs_verify = true;
        }
        Ok(garbage.into_iter().collect())
    }

    /// Writes a memtable as a table (synced, directory synced). `None` if it is empty. With
    /// the filter, the newest entry of each key it removes is written as a tombstone (older
    /// versions may live in deeper levels; `docs/design.md` §6.4).
    fn write_l0_table(
        &self,
        mem: &Arc<MemTable>,
        version: &Version,
        use_filter: bool,
    ) -> Result<(Option<crate::version::FileMeta>, FilterStats)> {
        if mem.is_empty() {
            return Ok((None, FilterStats::default()));
        }
        let alloc = || self.allocate_output();
        let env = self.job_env(version, &alloc, use_filter);
        let mut filter = env.filter.map(|f| f.run(FilterReason::Flush, 0));
        let mut out = compaction::job::OutputWriter::for_flush(&env);
        let mut it = mem.iter();
        it.seek_to_first();
        let r = (|| {
            let mut current: Vec<u8> = Vec::new();
            let mut first = true;
            let mut tombstone = Vec::new();
            while it.valid() {
                if let Some(f) = filter.as_mut() {
                    let p = crate::key::parse_internal_key(it.key()).ok_or_else(|| {
                        Error::corruption("<memtable>", 0, "malformed internal key")
                    })?;
                    let newest = first || p.user_key != current.as_slice();
                    first = false;
                    if newest {
                        current.clear();
                        current.extend_from_slice(p.user_key);
                        if f.eligible(p.seq, p.kind)
                            && f.removes(p.user_key, p.seq, p.kind, it.value())
                        {
                            tombstone.clear();
                            crate::key::encode_internal_key(
                                &mut tombstone,
                                p.user_key,
                                p.seq,
                                ValueKind::Delete,
                            );
                            out.add(&tombstone, &[])?;
                            it.next();
                            continue;
                        }
                    }
                }
                out.add(it.key(), it.value())?;
                it.next();
            }
            Ok(())
        })();
        if let Err(e) = r {
            out.abandon();
            return Err(e);
        }
        let mut o = out.finish()?;
        Ok((o.files.pop(), filter.map(|f| f.stats).unwrap_or_default()))
    }

    /// Runs one planned compaction and installs its result.
    /// Takes the version the plan was made from by value: it is dropped before obsolete
    /// files are collected, or this job's own inputs would look live.
    fn compact(&self, plan: &CompactionPlan, v: Arc<Version>) -> Result<()> {
        let mut use_filter = self.opts.compaction_filter.is_some();
        let (mut st, _snapshots, out) = loop {
            let result = if plan.trivial_move {
                Ok(compaction::JobOutput {
                    files: plan.inputs.iter().map(|f| (**f).clone()).collect(),
                    ..Default::default()
                })
            } else {
                let alloc = || self.allocate_output();
                let env = self.job_env(&v, &alloc, use_filter);
                compaction::job::run(plan, &env)
                    .and_then(|o| self.sync_if_filtered(&o.filter).map(|()| o))
            };
            let mut st = self.state.lock();
            let out = match result {
                Ok(out) => out,
                Err(e) => {
                    // On error the job removed its outputs; their numbers stay reserved,
                    // harmlessly.
                    self.unmark_busy(&mut st, plan);
                    return Err(e);
                }
            };
            match self.snapshots_allow(&out.filter) {
                Some(guard) => break (st, guard, out),
                None => {
                    // A snapshot taken while the job ran could read what the filter removed:
                    // run it again without the filter.
                    for f in &out.files {
                        st.pending_outputs.remove(&f.number);
                        let _ = self.fs.remove(&filename::table(&self.dir, f.number));
                    }
                    Counters::add(&self.counters.filter_retries, 1);
                    use_filter = false;
                }
            }
        };
        // The job's version goes before obsolete files are collected.
        drop(v);
        self.unmark_busy(&mut st, plan);
        Counters::add(&self.counters.filter_removed, out.filter.removed);
        Counters::add(&self.counters.filter_value_reads, out.filter.value_reads);
        if !out.filter.removed_pointers.is_empty() {
            // Whether a flush already counted those pointers as garbage is not known here:
            // verification scans measure them (§9.5).
            st.gc.needs_verify = true;
        }
        let mut edit = VersionEdit::default();
        for f in &plan.inputs {
            edit.deleted_files.push((plan.level as u32, f.number));
        }
        for f in &plan.next_inputs {
            edit.deleted_files
                .push((plan.output_level as u32, f.number));
        }
        for f in &out.files {
            st.pending_outputs.remove(&f.number);
            edit.new_files.push((plan.output_level as u32, f.clone()));
        }
        if plan.level > 0 {
            // The largest internal key of the level's inputs (the MANIFEST stores internal
            // keys); the next size-triggered pick starts after it.
            if let Some(hi) = plan
                .inputs
                .iter()
                .map(|f| &f.largest)
                .max_by(|a, b| crate::key::compare_internal(a, b))
            {
                edit.compact_pointers.push((plan.level as u32, hi.clone()));
            }
        }
        st.versions.last_sequence = st.versions.last_sequence.max(self.visible_seq());
        st.versions.log_and_apply(edit)?;
        self.install_super_version(&mut st);
        drop(_snapshots);
        if plan.trivial_move {
            Counters::add(&self.counters.trivial_moves, 1);
        } else {
            Counters::add(&self.counters.compactions, 1);
            Counters::add(&self.counters.compaction_bytes_read, out.bytes_read);
            Counters::add(&self.counters.compaction_bytes_written, out.bytes_written);
        }
        let obsolete = self.collect_obsolete(&st);
        drop(st);
        self.delete_files(obsolete);
        Ok(())
    }

    /// Manual compaction: pauses automatic picking, waits for running compactions, then
    /// compacts `[start, end]` level by level in the caller's thread.
    fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        {
            let mut st = self.state.lock();
            while st.manual_compaction || st.running_compactions > 0 {
                self.check_bg_error()?;
                self.done_cv.wait_for(&mut st, DONE_RECHECK);
            }
            st.manual_compaction = true;
        }
        let r = self.compact_range_levels(start, end);
        let mut st = self.state.lock();
        st.manual_compaction = false;
        self.bg_cv.notify_all();
        self.done_cv.notify_all();
        r
    }

    fn compact_range_levels(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let levels = self.opts.num_levels;
        let filter = self.opts.compaction_filter.is_some();
        for level in 0..levels {
            self.check_bg_error()?;
            let (plan, v) = {
                let mut st = self.state.lock();
                let v = st.versions.current();
                let plan = if level + 1 < levels {
                    compaction::picker::manual(&v, level, start, end)
                } else if filter {
                    // Everything in the range is in the last level now: rewrite it there so
                    // that the filter sees the records that only moved down.
                    compaction::picker::manual_bottommost(&v, start, end)
                } else {
                    None
                };
                let Some(plan) = plan else {
                    continue;
                };
                self.mark_busy(&mut st, &plan);
                (plan, v)
            };
            if let Err(e) = self.compact(&plan, v) {
                if !matches!(e, Error::Closed) {
                    self.set_bg_error(&e);
                }
                return Err(e);
            }
        }
        Ok(())
    }
}

impl FilterReads for DbInner {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        DbInner::get(self, &ReadOptions::default(), key)
    }

    fn resolve(&self, key: &[u8], pointer: &[u8]) -> Result<Vec<u8>> {
        let ptr = crate::vlog::ValuePointer::decode_or_corrupt(pointer, "<lsm value pointer>")?;
        let files = self.super_version.read().vlog_files.clone();
        self.vlog.read(&files, key, &ptr)
    }
}

/// A merged iterator over every memtable and table of `sv`.
/// Creates `dir` and its missing ancestors, then syncs the parent of each one created: a new
/// directory's entry is durable only once its parent is synced, and a database whose
/// directory vanishes in a crash loses every write it acknowledged as synced.
fn create_dir_durably(fs: &Arc<dyn crate::io::Fs>, dir: &Path) -> Result<()> {
    let mut created = Vec::new();
    let mut p = Some(dir);
    while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
        if fs.exists(d)? {
            break;
        }
        created.push(d.to_path_buf());
        p = d.parent();
    }
    fs.create_dir_all(dir)?;
    for d in &created {
        let parent = d
            .parent()
            .filter(|q| !q.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs.sync_dir(parent)?;
    }
    Ok(())
}

fn merged_iter(
    tables: &Arc<TableCache>,
    sv: &SuperVersion,
    params: crate::sst::ReadParams,
) -> Result<Box<MergingIterator>> {
    let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(sv.mem.iter())];
    for m in &sv.imms {
        children.push(Box::new(m.iter()));
    }
    children.extend(table_iters(tables, &sv.version, params)?);
    Ok(Box::new(MergingIterator::new(children)))
}

/// One iterator per L0 table and one per deeper non-empty level of `version`, newest first:
/// the tables' part of a merged view.
pub(crate) fn table_iters(
    tables: &Arc<TableCache>,
    version: &Version,
    params: crate::sst::ReadParams,
) -> Result<Vec<Box<dyn InternalIterator>>> {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    for f in &version.levels[0] {
        children.push(tables.iter(f, params)?);
    }
    for files in version.levels.iter().skip(1) {
        if !files.is_empty() {
            children.push(Box::new(crate::iter::LevelIterator::new(
                files.clone(),
                tables.clone(),
                params,
            )));
        }
    }
    Ok(children)
}

#[cfg(test)]
mod read_view_tests {
    //! A reader paused between taking its super version and its sequence number (the
    //! window widened on purpose) must still never meet a pointer into a value-log file its
    //! view lacks, while writers rotate 1 KiB value-log files under it.
    use super::*;
    use crate::io::MemFs;
    use std::sync::atomic::AtomicU64;

    static PAUSE_MICROS: AtomicU64 = AtomicU64::new(0);

    pub(super) fn pause() {
        let us = PAUSE_MICROS.load(Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
    }

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
