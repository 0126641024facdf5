//! The commit pipeline: how a write batch gets its sequence numbers, reaches the commit log
//! and becomes visible to readers (Pebble's `commitPipeline`, RocksDB's concurrent memtable
//! writes). Protocol, and why it keeps the log a prefix of the history: `docs/design.md`
//! §4.1.
//!
//! [`CommitPipeline`] owns the state of committing: the commit log (the WAL or the value log,
//! chosen once at open: [`CommitLog`]), the allocation of sequence numbers, the published
//! (visible) sequence number and the queue of synced writers. It reaches the rest of the
//! engine only through [`CommitEnv`] (the memtable, making room, the sticky error), so its
//! tests run it over a fake log and a fake memtable without a disk.
//!
//! Protocol, for one batch:
//! 1. **Reserve and append** under the reservation lock (short: a copy into the log's buffer
//!    and its hand-off to the OS): take the next sequence numbers, append the batch's one
//!    record, push its publication slot. Records therefore enter the log in sequence order.
//! 2. **Apply** to the memtable without any lock of ours, concurrently with other writers
//!    (the memtable is a lock-free skiplist).
//! 3. **Publish** in sequence order (`publish.rs`): a writer waits only for the batches
//!    reserved before its own, and returns once its batch is visible.
//!
//! An unsynced writer does all three itself: no hand-off, no leader. Synced writers queue
//! behind a leader, which merges their batches into one record, runs the three steps for it
//! with one sync between append and apply, then answers exactly its group and hands the
//! lead to the next queued synced writer (each waiter has its own condition variable).
//!
//! Rare paths run in an **exclusive turn** ([`CommitPipeline::exclusive`]): new reservations
//! wait at the gate, the turn waits until every reserved batch is published, then runs its
//! closure (a memtable switch, a stall, a log rotation, GC relocations, a checkpoint's pause)
//! with no other commit in flight.

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::vlog::ValuePointer;
use parking_lot::{Condvar, Mutex};
use publish::{Publisher, Slot};
use std::collections::VecDeque;
use std::sync::Arc;

mod publish;

/// Largest record a synced group's leader assembles.
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
    /// system. With `disable_wal`, only what the log must hold anyway is written. Called
    /// under the reservation lock, so records enter the log in sequence order.
    fn append(&self, batch: &WriteBatch, disable_wal: bool) -> Result<Appended>;
    /// Makes every record appended before the call durable.
    fn sync(&self) -> Result<()>;
}

/// What the pipeline needs from the engine around it.
pub(crate) trait CommitEnv {
    /// The sticky error (or a closed database), if any: no commit starts after it.
    fn check_error(&self) -> Result<()>;
    /// Makes `e` sticky.
    fn set_error(&self, e: &Error);
    /// Called before every commit, with nothing held: applies the slowdown (a short sleep of
    /// this writer alone) and answers whether [`CommitEnv::make_room`] must run (a full
    /// memtable or log file). Cheap: no lock.
    fn before_write(&self) -> bool;
    /// Makes room for a write: stalls, memtable switch, log rotation. Called in an exclusive
    /// turn: no other commit in flight.
    fn make_room(&self) -> Result<()>;
    /// Inserts `batch` (sequence numbers set) into the memtable. Called concurrently by many
    /// writers, never with an exclusive turn running.
    fn apply(&self, batch: &WriteBatch, appended: &Appended, disable_wal: bool) -> Result<()>;
    /// Statistics: a group of `writers` was committed; `synced` if the log was synced for it.
    fn committed(&self, writers: usize, synced: bool);
}

/// The reservation state, behind the reservation lock.
struct Reserve {
    /// The last sequence number given out.
    last_seq: SeqNo,
    /// An exclusive turn holds the gate: no reservation but its own.
    exclusive: bool,
    /// The first failed append or sync: the log's state is unknown, so nothing is appended
    /// behind it (also made sticky in the environment, which refuses writes before they
    /// get here; this catches those already past that check).
    log_failed: Option<Error>,
}

/// A synced writer waiting in the queue.
struct SyncWaiter {
    batch: Mutex<Option<WriteBatch>>,
    size: usize,
    disable_wal: bool,
    state: Mutex<WaitState>,
    cv: Condvar,
}

enum WaitState {
    Waiting,
    /// Lead the next group.
    Lead,
    Done(Result<()>),
}

#[derive(Default)]
struct SyncQueue {
    /// Synced writers not yet taken into a group, in arrival order.
    waiters: VecDeque<Arc<SyncWaiter>>,
    /// A leader is running a group (the next leader is named when it ends).
    leading: bool,
}

/// Commits write batches in sequence order; see the module docs.
pub(crate) struct CommitPipeline<L> {
    log: L,
    reserve: Mutex<Reserve>,
    /// Reservations waiting for an exclusive turn to end.
    gate: Condvar,
    publisher: Publisher,
    sync_queue: Mutex<SyncQueue>,
}

impl<L: CommitLog> CommitPipeline<L> {
    /// A pipeline over `log` whose last committed sequence number is `last_seq`.
    pub fn new(log: L, last_seq: SeqNo) -> Self {
        CommitPipeline {
            log,
            reserve: Mutex::new(Reserve {
                last_seq,
                exclusive: false,
                log_failed: None,
            }),
            gate: Condvar::new(),
            publisher: Publisher::new(last_seq),
            sync_queue: Mutex::new(SyncQueue::default()),
        }
    }

    pub fn log(&self) -> &L {
        &self.log
    }

    /// The last published sequence number: every write at or below it is in the memtable.
    pub fn visible_seq(&self) -> SeqNo {
        self.publisher.visible()
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
        env.check_error()?;
        if sync {
            return self.commit_synced(env, batch, disable_wal);
        }
        let Some(mut batch) = batch.filter(|b| !b.is_empty()) else {
            return Ok(());
        };
        self.make_room_if_needed(env)?;
        let (appended, slot) = self.reserve(env, &mut batch, disable_wal, false)?;
        let r = env.apply(&batch, &appended, disable_wal);
        self.publisher.publish(&slot);
        if r.is_ok() {
            env.committed(1, false);
        }
        r
    }

    /// Runs `f` while no other commit is in flight: every write acknowledged before is
    /// visible and handed to the log, and none starts until `f` returns. If `f` returns a
    /// batch, it is committed (not synced) before any other write.
    pub fn exclusive<T>(
        &self,
        env: &impl CommitEnv,
        f: impl FnOnce() -> Result<(T, Option<WriteBatch>)>,
    ) -> Result<T> {
        env.check_error()?;
        {
            let mut r = self.reserve.lock();
            while r.exclusive {
                self.gate.wait(&mut r);
            }
            r.exclusive = true;
        }
        // Opens the gate again however the turn ends (a panic must not stop every writer).
        let _open = OpenGate(self);
        self.publisher.wait_drained();
        f().and_then(|(t, batch)| {
            if let Some(mut b) = batch.filter(|b| !b.is_empty()) {
                let (appended, slot) = self.reserve(env, &mut b, false, true)?;
                let r = env.apply(&b, &appended, false);
                self.publisher.publish(&slot);
                r?;
                env.committed(1, false);
            }
            Ok(t)
        })
    }

    /// Takes the next sequence number for entries that reach the tree without the log (an
    /// ingestion's tables, `ingest.rs`) and publishes it at once, in an exclusive turn: every
    /// write committed before it has a smaller number, every write after it a larger one.
    /// Nothing is appended; the number is persisted by the MANIFEST edit that installs the
    /// entries (a crash before it leaves no entry carrying the number, so reusing it is
    /// harmless).
    pub fn reserve_seq(&self, env: &impl CommitEnv) -> Result<SeqNo> {
        self.exclusive(env, || {
            let (seq, slot) = {
                let mut r = self.reserve.lock();
                if let Some(e) = &r.log_failed {
                    return Err(Error::Poisoned(e.to_string()));
                }
                r.last_seq += 1;
                (r.last_seq, self.publisher.push(r.last_seq))
            };
            self.publisher.publish(&slot);
            Ok((seq, None))
        })
    }

    /// Runs the environment's room-making in an exclusive turn when it asks for it.
    fn make_room_if_needed(&self, env: &impl CommitEnv) -> Result<()> {
        if env.before_write() {
            self.exclusive(env, || env.make_room().map(|()| ((), None)))?;
        }
        Ok(())
    }

    /// Step 1: under the reservation lock, gives `batch` the next sequence numbers, appends
    /// its record to the log and pushes its publication slot. `holder`: called by the
    /// exclusive turn itself, which passes the gate. A failed append takes no sequence
    /// number, and (unless the log refused the batch untouched) is sticky.
    fn reserve(
        &self,
        env: &impl CommitEnv,
        batch: &mut WriteBatch,
        disable_wal: bool,
        holder: bool,
    ) -> Result<(Appended, Arc<Slot>)> {
        let mut r = self.reserve.lock();
        while r.exclusive && !holder {
            self.gate.wait(&mut r);
        }
        if let Some(e) = &r.log_failed {
            return Err(Error::Poisoned(e.to_string()));
        }
        let first_seq = r.last_seq + 1;
        batch.set_seq(first_seq);
        let appended = match self.log.append(batch, disable_wal) {
            Ok(a) => a,
            // Nothing reached the log: the batch is refused, the log stays usable.
            Err(e @ Error::InvalidArgument(_)) => return Err(e),
            Err(e) => {
                r.log_failed = Some(e.clone());
                env.set_error(&e);
                return Err(e);
            }
        };
        r.last_seq = first_seq + u64::from(batch.count()) - 1;
        let slot = self.publisher.push(r.last_seq);
        Ok((appended, slot))
    }

    /// A synced write: joins the queue, and either is answered by a leader or leads.
    fn commit_synced(
        &self,
        env: &impl CommitEnv,
        batch: Option<WriteBatch>,
        disable_wal: bool,
    ) -> Result<()> {
        let me = Arc::new(SyncWaiter {
            size: batch.as_ref().map_or(0, |b| b.size_bytes()),
            batch: Mutex::new(batch),
            disable_wal,
            state: Mutex::new(WaitState::Waiting),
            cv: Condvar::new(),
        });
        {
            let mut q = self.sync_queue.lock();
            q.waiters.push_back(me.clone());
            if !q.leading {
                q.leading = true;
                *me.state.lock() = WaitState::Lead;
            }
        }
        {
            let mut st = me.state.lock();
            loop {
                match std::mem::replace(&mut *st, WaitState::Waiting) {
                    WaitState::Waiting => me.cv.wait(&mut st),
                    WaitState::Lead => break,
                    WaitState::Done(r) => return r,
                }
            }
        }
        // Leader: take the group (itself first), run it outside the queue's lock.
        let group = {
            let mut q = self.sync_queue.lock();
            let first = q.waiters.pop_front().expect("the leader is queued");
            debug_assert!(Arc::ptr_eq(&first, &me));
            let max = if me.size <= 128 << 10 {
                // Small leaders do not wait behind a huge group (LevelDB's 128 KiB rule).
                me.size + (128 << 10)
            } else {
                MAX_GROUP_BYTES
            };
            let mut size = me.size;
            let mut group = vec![first];
            while let Some(w) = q.waiters.front() {
                if w.disable_wal != disable_wal || size + w.size > max {
                    break;
                }
                size += w.size;
                group.push(q.waiters.pop_front().expect("front exists"));
            }
            group
        };
        let r = self.run_synced_group(env, &group);
        // Hand the lead to the next queued writer, then answer the group: one wake-up each.
        {
            let mut q = self.sync_queue.lock();
            match q.waiters.front() {
                Some(next) => {
                    *next.state.lock() = WaitState::Lead;
                    next.cv.notify_one();
                }
                None => q.leading = false,
            }
        }
        for w in &group[1..] {
            *w.state.lock() = WaitState::Done(r.clone());
            w.cv.notify_one();
        }
        r
    }

    /// The leader's work: one record for the group, one sync, apply, publish.
    fn run_synced_group(&self, env: &impl CommitEnv, group: &[Arc<SyncWaiter>]) -> Result<()> {
        env.check_error()?;
        self.make_room_if_needed(env)?;
        let disable_wal = group[0].disable_wal;
        let mut batch: Option<WriteBatch> = None;
        for w in group {
            if let Some(b) = w.batch.lock().take() {
                match batch.as_mut() {
                    Some(all) => all.append(&b),
                    None => batch = Some(b),
                }
            }
        }
        let Some(mut batch) = batch.filter(|b| !b.is_empty()) else {
            // Only a sync: it covers every record appended so far, so every write
            // acknowledged before this call.
            self.sync_log(env)?;
            env.committed(group.len(), true);
            return Ok(());
        };
        let (appended, slot) = self.reserve(env, &mut batch, disable_wal, false)?;
        // Nothing is visible before it is durable: the sync comes before the apply. A failed
        // sync still publishes the (unapplied) slot, so that batches reserved after it are
        // not held forever; the error is sticky, and the group's writers get it.
        let r = self
            .sync_log(env)
            .and_then(|()| env.apply(&batch, &appended, disable_wal));
        self.publisher.publish(&slot);
        if r.is_ok() {
            env.committed(group.len(), true);
        }
        r
    }

    /// Syncs the log; a failure is sticky.
    fn sync_log(&self, env: &impl CommitEnv) -> Result<()> {
        self.log.sync().inspect_err(|e| {
            self.reserve
                .lock()
                .log_failed
                .get_or_insert_with(|| e.clone());
            env.set_error(e);
        })
    }
}

/// Ends an exclusive turn when dropped.
struct OpenGate<'a, L>(&'a CommitPipeline<L>);

impl<L> Drop for OpenGate<'_, L> {
    fn drop(&mut self) {
        self.0.reserve.lock().exclusive = false;
        // Rare: wake every reservation that waited at the gate.
        self.0.gate.notify_all();
    }
}

#[cfg(test)]
mod tests;
