//! The commit pipeline: how a write batch gets its sequence numbers, reaches the commit log
//! and becomes visible to readers (Pebble's `commitPipeline`). Protocol and invariants:
//! `docs/design.md` §4.1.
//!
//! [`CommitPipeline`] owns the state of committing: the writer queue, the commit log (the WAL
//! or the value log, chosen once at open: [`CommitLog`]), the allocation of sequence numbers
//! and the published (visible) sequence number. It reaches the rest of the engine only
//! through [`CommitEnv`] (the memtable, making room, the sticky error), so its tests run it
//! over a fake log and a fake memtable without a disk.
//!
//! Protocol (LevelDB's writer queue): every writer enqueues and waits until it is either
//! done (a leader committed it) or at the front (it is the leader). The leader takes the
//! writers behind it that may share its record, releases the queue, writes the group's one
//! record, syncs once if any member asked, applies the group to the memtable, publishes the
//! group's last sequence number, then answers the group and hands the queue to the next
//! writer. An exclusive turn ([`CommitPipeline::exclusive`]: memtable switches, GC
//! relocations, pauses) is a group of one whose leader runs a closure while no other commit
//! is in flight.

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::vlog::ValuePointer;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Largest group a leader assembles.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// What appending one record to the commit log produced.
#[derive(Default)]
pub(crate) struct Appended {
    /// Per batch record, in order: where its value went if the log separated it (value log
    /// only; empty otherwise).
    pub pointers: Vec<Option<ValuePointer>>,
    /// Bytes written to the WAL, for statistics.
    pub wal_bytes: u64,
    /// Bytes written to the value log, for statistics.
    pub vlog_bytes: u64,
}

/// The log a commit is made durable in. An error other than `InvalidArgument` leaves the
/// log in an unknown state and is made sticky by the pipeline; `InvalidArgument` means the
/// record was refused before anything reached the log.
pub(crate) trait CommitLog: Send + Sync {
    /// Appends `batch` (its sequence numbers set) as one record and hands it to the operating
    /// system. With `disable_wal`, only what the log must hold anyway is written.
    fn append(&self, batch: &WriteBatch, disable_wal: bool) -> Result<Appended>;
    /// Makes every record appended so far durable.
    fn sync(&self) -> Result<()>;
}

/// What the pipeline needs from the engine around it.
pub(crate) trait CommitEnv {
    /// The sticky error (or a closed database), if any: no commit starts after it.
    fn check_error(&self) -> Result<()>;
    /// Makes `e` sticky.
    fn set_error(&self, e: &Error);
    /// Makes room for a write: stalls, memtable switch, log rotation. Called with no other
    /// commit in flight.
    fn make_room(&self) -> Result<()>;
    /// Inserts `batch` (sequence numbers set) into the memtable.
    fn apply(&self, batch: &WriteBatch, appended: &Appended, disable_wal: bool) -> Result<()>;
    /// Statistics: a group of `writers` was committed; `synced` if the log was synced for it.
    fn committed(&self, writers: usize, synced: bool);
}

struct Writer {
    batch: Option<WriteBatch>,
    sync: bool,
    disable_wal: bool,
    /// Runs alone: the leader turn is handed to its own thread's closure.
    exclusive: bool,
    done: bool,
    result: Option<Result<()>>,
}

/// Commits write batches in sequence order; see the module docs.
pub(crate) struct CommitPipeline<L> {
    log: L,
    queue: Mutex<VecDeque<Arc<Mutex<Writer>>>>,
    cv: Condvar,
    /// The last sequence number readers may see; also the last one allocated, as one group
    /// at a time is in flight.
    visible: AtomicU64,
}

impl<L: CommitLog> CommitPipeline<L> {
    /// A pipeline over `log` whose last committed sequence number is `last_seq`.
    pub fn new(log: L, last_seq: SeqNo) -> Self {
        CommitPipeline {
            log,
            queue: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
            visible: AtomicU64::new(last_seq),
        }
    }

    pub fn log(&self) -> &L {
        &self.log
    }

    /// The last published sequence number: every write at or below it is in the memtable.
    pub fn visible_seq(&self) -> SeqNo {
        self.visible.load(Ordering::Acquire)
    }

    /// Commits `batch` (none: only a sync, if `sync`). Returns once it is visible and, with
    /// `sync`, durable.
    pub fn commit(
        &self,
        env: &impl CommitEnv,
        batch: Option<WriteBatch>,
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        let writer = Writer {
            batch,
            sync,
            disable_wal,
            exclusive: false,
            done: false,
            result: None,
        };
        match self.turn(env, writer)? {
            Turn::Done(r) => r,
            Turn::Leader(w, group) => {
                let r = self.commit_group(env, &group);
                self.finish(&w, &group, r)
            }
        }
    }

    /// Runs `f` while no other commit is in flight: every write acknowledged before is
    /// visible and handed to the log, and none starts until `f` returns. If `f` returns a
    /// batch, it is committed (not synced) before any other write.
    pub fn exclusive<T>(
        &self,
        env: &impl CommitEnv,
        f: impl FnOnce() -> Result<(T, Option<WriteBatch>)>,
    ) -> Result<T> {
        let writer = Writer {
            batch: None,
            sync: false,
            disable_wal: false,
            exclusive: true,
            done: false,
            result: None,
        };
        let (w, group) = match self.turn(env, writer)? {
            Turn::Leader(w, group) => (w, group),
            Turn::Done(_) => unreachable!("an exclusive writer is never a follower"),
        };
        let mut out = None;
        let r = f().and_then(|(t, batch)| {
            out = Some(t);
            match batch {
                Some(b) if !b.is_empty() => self.write_and_apply(env, b, false, false),
                _ => Ok(()),
            }
        });
        self.finish(&w, &group, r)?;
        Ok(out.expect("the closure returned Ok"))
    }

    /// Enqueues `writer` and waits until a leader answered it or it leads a group.
    fn turn(&self, env: &impl CommitEnv, writer: Writer) -> Result<Turn> {
        env.check_error()?;
        let w = Arc::new(Mutex::new(writer));
        let mut q = self.queue.lock();
        q.push_back(w.clone());
        loop {
            {
                let mut g = w.lock();
                if g.done {
                    return Ok(Turn::Done(g.result.take().unwrap_or(Ok(()))));
                }
            }
            if Arc::ptr_eq(q.front().expect("queue holds us"), &w) {
                break;
            }
            self.cv.wait(&mut q);
        }
        let group = pick_group(&q);
        Ok(Turn::Leader(w, group))
    }

    /// Answers the group with `r`, removes it from the queue and wakes the waiters.
    fn finish(
        &self,
        w: &Arc<Mutex<Writer>>,
        group: &[Arc<Mutex<Writer>>],
        r: Result<()>,
    ) -> Result<()> {
        let mut q = self.queue.lock();
        for g in group {
            let front = q.pop_front().expect("group is at the front");
            debug_assert!(Arc::ptr_eq(&front, g));
            let mut g = g.lock();
            g.done = true;
            g.result = Some(r.clone());
        }
        self.cv.notify_all();
        drop(q);
        let result = w.lock().result.take().unwrap_or(Ok(()));
        result
    }

    /// The leader's work for a group of ordinary writers.
    fn commit_group(&self, env: &impl CommitEnv, group: &[Arc<Mutex<Writer>>]) -> Result<()> {
        env.check_error()?;
        env.make_room()?;
        let mut batch: Option<WriteBatch> = None;
        let mut sync = false;
        let disable_wal = group[0].lock().disable_wal;
        for g in group {
            let mut g = g.lock();
            sync |= g.sync;
            if let Some(b) = g.batch.take() {
                match batch.as_mut() {
                    Some(all) => all.append(&b),
                    None => batch = Some(b),
                }
            }
        }
        let r = match batch {
            Some(b) => self.write_and_apply(env, b, sync, disable_wal),
            None if sync => self.sync_log(env),
            None => Ok(()),
        };
        if r.is_ok() {
            env.committed(group.len(), sync);
        }
        r
    }

    /// Gives `batch` the next sequence numbers, logs it (syncing if asked), applies it and
    /// publishes it. Called by the leader only.
    fn write_and_apply(
        &self,
        env: &impl CommitEnv,
        mut batch: WriteBatch,
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        let first_seq = self.visible.load(Ordering::Relaxed) + 1;
        batch.set_seq(first_seq);
        let appended = match self.log.append(&batch, disable_wal) {
            Ok(a) => a,
            // Nothing reached the log: the batch is refused, the log stays usable.
            Err(e @ Error::InvalidArgument(_)) => return Err(e),
            Err(e) => {
                env.set_error(&e);
                return Err(e);
            }
        };
        if sync {
            self.sync_log(env)?;
        }
        env.apply(&batch, &appended, disable_wal)?;
        self.visible
            .store(first_seq + u64::from(batch.count()) - 1, Ordering::Release);
        Ok(())
    }

    /// Syncs the log; a failure is sticky.
    fn sync_log(&self, env: &impl CommitEnv) -> Result<()> {
        self.log.sync().inspect_err(|e| env.set_error(e))
    }
}

enum Turn {
    Done(Result<()>),
    /// This thread leads `group` (itself first).
    Leader(Arc<Mutex<Writer>>, Vec<Arc<Mutex<Writer>>>),
}

/// The writers at the front of the queue that the leader (the first) writes together.
fn pick_group(q: &VecDeque<Arc<Mutex<Writer>>>) -> Vec<Arc<Mutex<Writer>>> {
    let first = q.front().expect("leader").clone();
    let (sync, disable_wal, alone, mut size) = {
        let f = first.lock();
        (
            f.sync,
            f.disable_wal,
            f.exclusive,
            f.batch.as_ref().map_or(0, |b| b.size_bytes()),
        )
    };
    let mut group = vec![first];
    if alone {
        return group;
    }
    // Small leaders do not wait behind a huge group (LevelDB's 128 KiB rule).
    let max = if size <= 128 << 10 {
        size + (128 << 10)
    } else {
        MAX_GROUP_BYTES
    };
    for w in q.iter().skip(1) {
        let g = w.lock();
        if g.exclusive || (g.sync && !sync) || g.disable_wal != disable_wal {
            break;
        }
        let n = g.batch.as_ref().map_or(0, |b| b.size_bytes());
        if size + n > max {
            break;
        }
        size += n;
        drop(g);
        group.push(w.clone());
    }
    group
}

#[cfg(test)]
mod tests;
