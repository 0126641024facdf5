//! The engine's shared state: [`DbInner`] (what every part of the engine reaches through an
//! `Arc`), [`DbState`] (what the state mutex guards), [`SuperVersion`] (a reader's view), the
//! commit log the engine gives the commit pipeline ([`DbLog`]), and the small methods on them
//! that every side uses (background errors, read views, snapshots). The operations live
//! beside what they do: the public API and `open` in `db.rs`, writes in `write.rs`, reads in
//! `get.rs` and `multi_get.rs`, background work in `jobs/`.

use crate::batch::WriteBatch;
use crate::commit::{Appended, CommitLog, CommitPipeline};
use crate::compaction::Busy;
use crate::error::{Error, Result};
use crate::io::{FileLock, Fs};
use crate::key::SeqNo;
use crate::log::LogWriter;
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions};
use crate::recovery::RecoveryInfo;
use crate::sst::TableOptions;
use crate::stats::Counters;
use crate::table_cache::TableCache;
use crate::version::{Version, VersionSet};
use crate::vlog::{Vlog, VlogFileSet};
use arc_swap::{ArcSwap, Guard};
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

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
    /// What readers read through. Swapped whole by [`DbInner::install_super_version`];
    /// loading it takes no lock and, on the fast path, touches no counter another thread
    /// writes (arc-swap's per-thread debt slots instead of the `Arc`'s shared count), so
    /// readers and writers on many cores do not bounce one cache line per operation.
    pub super_version: ArcSwap<SuperVersion>,
    /// Held around each install of a super version and by a reader that lost the race of
    /// [`DbInner::read_view`] twice. A leaf: nothing is taken while it is held.
    pub install_lock: Mutex<()>,
    pub bg_error: Mutex<Option<Error>>,
    pub has_bg_error: AtomicBool,
    pub shutting_down: AtomicBool,
    pub counters: Counters,
    pub snapshots: Arc<Mutex<BTreeMap<SeqNo, usize>>>,
    pub recovery: RecoveryInfo,
    pub(crate) _lock: Box<dyn FileLock>,
}

/// Keeps a snapshot's sequence registered while any clone of it lives.
pub(crate) struct SnapshotGuard {
    pub(crate) seq: SeqNo,
    pub(crate) registry: Arc<Mutex<BTreeMap<SeqNo, usize>>>,
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

/// The engine's commit log, chosen once at open: the WAL, or with key-value separation the
/// value log, whose frames recovery replays instead (`docs/design.md` §8).
pub(crate) enum DbLog {
    /// The WAL writer; `None` once closed.
    Wal(Mutex<Option<LogWriter>>),
    /// The value log's head writer (shared with readers of still-buffered values).
    /// `group_unsynced`: `Options::vlog_group_unsynced`.
    Vlog {
        vlog: Arc<Vlog>,
        threshold: usize,
        group_unsynced: bool,
    },
}

impl CommitLog for DbLog {
    fn append(&self, batches: &[WriteBatch], disable_wal: bool) -> Result<Appended> {
        match self {
            DbLog::Wal(wal) => {
                if disable_wal {
                    return Ok(Appended::default());
                }
                // One record: a group's batches are merged (the WAL writer copies the record
                // into its buffer anyway).
                let merged;
                let record = match batches {
                    [one] => one,
                    [first, rest @ ..] => {
                        let mut all = first.clone();
                        rest.iter().for_each(|b| all.append(b));
                        merged = all;
                        &merged
                    }
                    [] => return Ok(Appended::default()),
                };
                let mut wal = wal.lock();
                let w = wal.as_mut().ok_or(Error::Closed)?;
                w.add_record(record.data())?;
                w.flush()?;
                Ok(Appended {
                    pointers: Vec::new(),
                    wal_bytes: record.size_bytes() as u64,
                    vlog_bytes: 0,
                })
            }
            DbLog::Vlog {
                vlog, threshold, ..
            } => {
                let Some(first) = batches.first() else {
                    return Ok(Appended::default());
                };
                // With `disable_wal` only a group with separated values is written, as a
                // frame recovery does not replay.
                if disable_wal
                    && !batches
                        .iter()
                        .flat_map(WriteBatch::iter)
                        .any(|r| r.is_ok_and(|r| r.value.is_some_and(|v| v.len() >= *threshold)))
                {
                    return Ok(Appended::default());
                }
                let mut head = vlog.head.lock();
                let w = head.as_mut().ok_or(Error::Closed)?;
                let a = w.append_group(batches, first.seq(), *threshold, !disable_wal)?;
                Ok(Appended {
                    pointers: a.pointers,
                    wal_bytes: 0,
                    vlog_bytes: a.bytes,
                })
            }
        }
    }

    /// The value log groups the unsynced writers of batches that can hold a separated value
    /// (at least the threshold's bytes; unless `vlog_group_unsynced` is off): without a
    /// user-space buffer each append is a `writev` (or a pass of page faults into the mapped
    /// head) whose cost a group shares. Smaller batches, and the WAL's, append alone, the
    /// path measured fastest for small records when the pipeline stopped handing unsynced
    /// writers to a leader (`docs/benchmarks.md`, "The commit pipeline: unsynced writers
    /// without hand-off").
    fn groups_unsynced(&self, batch: &WriteBatch) -> bool {
        match self {
            DbLog::Wal(_) => false,
            DbLog::Vlog {
                threshold,
                group_unsynced,
                ..
            } => *group_unsynced && batch.size_bytes() >= *threshold,
        }
    }

    fn sync(&self) -> Result<()> {
        match self {
            DbLog::Wal(wal) => match wal.lock().as_mut() {
                Some(w) => w.sync(),
                None => Ok(()),
            },
            DbLog::Vlog { vlog, .. } => vlog.sync(),
        }
    }
}

impl DbLog {
    /// Syncs the log and writes a sync mark after its last record (a clean close), so that
    /// damage anywhere in it reads as corruption at the next open, not as an unsynced tail.
    pub(crate) fn seal(&self) -> Result<()> {
        match self {
            DbLog::Wal(wal) => match wal.lock().as_mut() {
                Some(w) => w.seal(),
                None => Ok(()),
            },
            DbLog::Vlog { vlog, .. } => vlog.seal(),
        }
    }
}

/// Waiters on `done_cv` re-check their condition at least this often. `set_bg_error` wakes
/// them without holding `state` (some of its callers hold it, others do not), so a waiter
/// that checked the error flag just before it was set could miss that wake-up; with the
/// background threads then idle, nothing else would wake it (seen as a hung `flush` in the
/// concurrent crash test under load).
pub(crate) const DONE_RECHECK: std::time::Duration = std::time::Duration::from_millis(100);

impl DbInner {
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

    /// A reader's view: the super version and the sequence number to read at, such that the
    /// super version was the installed one when the sequence was read. A new super version
    /// (a new memtable, a new value-log file) is installed before any write that depends on
    /// it is applied, so every write at or below the sequence taken here is reachable through
    /// the super version taken with it: its memtable is listed and the value-log file its
    /// pointer names is in the file set. Taken apart, a reader could hold the file set of
    /// before a rotation and a sequence of after it, and see a pointer into a file its set
    /// lacks. A file leaves the set only when GC retires it, which waits for every snapshot
    /// older than the rewrites, so a snapshot's sequence is covered too.
    ///
    /// Without a lock, "installed when the sequence was read" is checked: the super version
    /// is loaded before and after reading the sequence, and the read is retried if they
    /// differ. Every install is a new allocation, and the first load holds it alive, so equal
    /// pointers mean no install happened in between. Installs are rare (a memtable switch, a
    /// flush, a compaction, a value-log rotation); a reader that loses the race twice takes
    /// `install_lock`, which every install holds, so it cannot be starved (and, the lock
    /// being a leaf, a caller may hold any other lock, `state` included).
    pub(crate) fn read_view(&self, ro: &ReadOptions) -> (Guard<Arc<SuperVersion>>, SeqNo) {
        for _ in 0..2 {
            let sv = self.super_version.load();
            #[cfg(test)]
            read_view_pause::pause();
            let seq = self.read_seq(ro);
            if Arc::ptr_eq(&sv, &self.super_version.load()) {
                return (sv, seq);
            }
        }
        let _installs = self.install_lock.lock();
        let sv = self.super_version.load();
        (sv, self.read_seq(ro))
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
        let _install = self.install_lock.lock();
        self.super_version.store(sv);
    }

    /// The smallest sequence number any reader may still read at.
    pub(crate) fn smallest_snapshot(&self) -> SeqNo {
        let r = self.snapshots.lock();
        r.keys()
            .next()
            .copied()
            .unwrap_or_else(|| self.visible_seq())
    }
}

#[cfg(test)]
pub(crate) mod read_view_pause {
    //! The pause `DbInner::read_view` takes between the super version and the sequence
    //! number in tests, widened by `db.rs`'s `read_view_tests`.
    use std::sync::atomic::{AtomicU64, Ordering};

    pub(crate) static PAUSE_MICROS: AtomicU64 = AtomicU64::new(0);

    pub(crate) fn pause() {
        let us = PAUSE_MICROS.load(Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
    }
}
