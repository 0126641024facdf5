//! The commit pipeline: how a write batch gets its sequence numbers, reaches the commit log
//! and becomes visible to readers (Pebble's `commitPipeline`, RocksDB's concurrent memtable
//! writes). Protocol, and why it keeps the log a prefix of the history: `docs/design.md`
//! §4.1.
//!
//! [`CommitPipeline`] owns the state of committing: the commit log (the WAL or the value log,
//! chosen once at open: [`CommitLog`]), the allocation of sequence numbers, the published
//! (visible) sequence number and the queue of writers waiting for a group leader. It reaches
//! the rest of the engine only through [`CommitEnv`] (the memtable, making room, the sticky
//! error), so its tests run it over a fake log and a fake memtable without a disk.
//!
//! Protocol, for one record:
//! 1. **Reserve and append** under the reservation lock (short: a copy into the log's buffer
//!    and its hand-off to the OS): take the next sequence numbers, append the record, push
//!    its publication slot. Records therefore enter the log in sequence order.
//! 2. **Apply** to the memtable without any lock of ours, concurrently with other writers
//!    (the memtable is a lock-free skiplist).
//! 3. **Publish** in sequence order (`publish.rs`): a writer waits only for the batches
//!    reserved before its own, and returns once its batch is visible.
//!
//! Who runs the steps depends on the log ([`CommitLog::groups_unsynced`]). Over the WAL, and
//! over the value log for a batch too small to hold a separated value, an unsynced writer
//! does all three itself: no hand-off, no leader. Synced writers, and over the value log
//! unsynced writers of separated values, go through the **writer queue**: a writer that finds no group
//! running leads at once (a lone writer pays no hand-off); one that finds a group running
//! queues, and the next leader takes the queued writers with its own settings (sync,
//! `disable_wal`; up to a size bound) into one record of the group's batches, appended with
//! one call (and synced, for a synced group).
//! The leader hands the lead to the next queued writer as soon as its record is appended (and
//! synced), so the next group's append overlaps this group's apply; it then applies and
//! publishes the group and answers exactly its members (each waiter has its own condition
//! variable).
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
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::Arc;

mod publish;

/// Largest record a group's leader assembles.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// The batches of one group, in the order their records enter the log (one inline: a lone
/// writer allocates no list).
type Batches = SmallVec<[WriteBatch; 1]>;

/// What appending one record to the commit log produced.
#[derive(Default)]
pub(crate) struct Appended {
    /// Per batch record, over the record's batches in order: where its value went if the log
    /// separated it (value log only; empty otherwise).
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
    /// Appends `batches` (not empty; sequence numbers set and consecutive, in order) as one
    /// record and hands it to the operating system. With `disable_wal`, only what the log
    /// must hold anyway is written. Called under the reservation lock, so records enter the
    /// log in sequence order.
    fn append(&self, batches: &[WriteBatch], disable_wal: bool) -> Result<Appended>;
    /// Makes every record appended before the call durable.
    fn sync(&self) -> Result<()>;
    /// Whether the unsynced writer of `batch` shares an append through the writer queue
    /// rather than appending its own record. Sharing saves every member but the leader its
    /// append (a system call, and the kernel's work on the partly written page it leaves)
    /// and costs each a hand-off (a wake-up), so it pays for large records and was measured
    /// to lose for small ones (the WAL's; `docs/benchmarks.md`, "The commit pipeline:
    /// unsynced writers without hand-off"): the log decides per batch.
    fn groups_unsynced(&self, batch: &WriteBatch) -> bool;
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
    /// Inserts `batch` (sequence numbers set) into the memtable; `pointers` are its records'
    /// places in the value log (empty: every record inline). Called concurrently by many
    /// writers, never with an exclusive turn running.
    fn apply(
        &self,
        batch: &WriteBatch,
        pointers: &[Option<ValuePointer>],
        disable_wal: bool,
    ) -> Result<()>;
    /// Statistics: a group of `writers` was committed as one record that wrote `appended`;
    /// `synced` if the log was synced for it.
    fn committed(&self, writers: usize, synced: bool, appended: &Appended);
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

/// A writer waiting in the queue.
struct Waiter {
    batch: Mutex<Option<WriteBatch>>,
    size: usize,
    sync: bool,
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
struct WriterQueue {
    /// Writers not yet taken into a group, in arrival order.
    waiters: VecDeque<Arc<Waiter>>,
    /// A leader holds the lead (from taking its group until its record is appended and
    /// synced, when it names the next leader). With no leader the queue is empty.
    leading: bool,
}

/// Commits write batches in sequence order; see the module docs.
pub(crate) struct CommitPipeline<L> {
    log: L,
    reserve: Mutex<Reserve>,
    /// Reservations waiting for an exclusive turn to end.
    gate: Condvar,
    publisher: Publisher,
    queue: Mutex<WriterQueue>,
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
            queue: Mutex::new(WriterQueue::default()),
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
        let batch = batch.filter(|b| !b.is_empty());
        if !sync && batch.is_none() {
            return Ok(());
        }
        if sync || batch.as_ref().is_some_and(|b| self.log.groups_unsynced(b)) {
            return self.commit_grouped(env, batch, sync, disable_wal);
        }
        let Some(batch) = batch else {
            return Ok(());
        };
        self.make_room_if_needed(env)?;
        let mut batches: Batches = smallvec::smallvec![batch];
        let (appended, slot) = self.reserve(env, &mut batches, disable_wal, false)?;
        let r = env.apply(&batches[0], &appended.pointers, disable_wal);
        self.publisher.publish(&slot);
        if r.is_ok() {
            env.committed(1, false, &appended);
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
            if let Some(b) = batch.filter(|b| !b.is_empty()) {
                let mut batches: Batches = smallvec::smallvec![b];
                let (appended, slot) = self.reserve(env, &mut batches, false, true)?;
                let r = env.apply(&batches[0], &appended.pointers, false);
                self.publisher.publish(&slot);
                r?;
                env.committed(1, false, &appended);
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

    /// Step 1: under the reservation lock, gives `batches` the next sequence numbers (in
    /// order, consecutive), appends them to the log as one record and pushes its publication
    /// slot. `holder`: called by the exclusive turn itself, which passes the gate. A failed
    /// append takes no sequence number, and (unless the log refused the record untouched) is
    /// sticky.
    fn reserve(
        &self,
        env: &impl CommitEnv,
        batches: &mut [WriteBatch],
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
        let mut next = r.last_seq + 1;
        for b in batches.iter_mut() {
            b.set_seq(next);
            next += u64::from(b.count());
        }
        let appended = match self.log.append(batches, disable_wal) {
            Ok(a) => a,
            // Nothing reached the log: the record is refused, the log stays usable.
            Err(e @ Error::InvalidArgument(_)) => return Err(e),
            Err(e) => {
                r.log_failed = Some(e.clone());
                env.set_error(&e);
                return Err(e);
            }
        };
        r.last_seq = next - 1;
        let slot = self.publisher.push(r.last_seq);
        Ok((appended, slot))
    }

    /// A write through the writer queue: leads at once if no group is running, else queues
    /// and is either answered by a leader or named the next leader.
    fn commit_grouped(
        &self,
        env: &impl CommitEnv,
        batch: Option<WriteBatch>,
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        {
            let mut q = self.queue.lock();
            if !q.leading {
                // Nobody leads, so nobody is queued: a group of this writer alone, with no
                // waiter to allocate and nobody to wake.
                debug_assert!(q.waiters.is_empty());
                q.leading = true;
                drop(q);
                let batches: Batches = batch.into_iter().collect();
                return self.run_group(env, batches, 1, sync, disable_wal);
            }
        }
        let me = Arc::new(Waiter {
            size: batch.as_ref().map_or(0, |b| b.size_bytes()),
            batch: Mutex::new(batch),
            sync,
            disable_wal,
            state: Mutex::new(WaitState::Waiting),
            cv: Condvar::new(),
        });
        {
            let mut q = self.queue.lock();
            q.waiters.push_back(me.clone());
            if !q.leading {
                // The leader handed off between our two looks at the queue.
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
        // Leader: take the group (itself first).
        let group = {
            let mut q = self.queue.lock();
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
                // Same settings only: a failed sync fails exactly the synced writers.
                if w.sync != sync || w.disable_wal != disable_wal || size + w.size > max {
                    break;
                }
                size += w.size;
                group.push(q.waiters.pop_front().expect("front exists"));
            }
            group
        };
        // The batches are moved out of the waiters, not copied: the log writes each from
        // where it is.
        let batches: Batches = group.iter().filter_map(|w| w.batch.lock().take()).collect();
        let r = self.run_group(env, batches, group.len(), sync, disable_wal);
        for w in &group[1..] {
            *w.state.lock() = WaitState::Done(r.clone());
            w.cv.notify_one();
        }
        r
    }

    /// Names the next leader (the front of the queue, woken alone), or records that nobody
    /// leads.
    fn hand_off_lead(&self) {
        let mut q = self.queue.lock();
        match q.waiters.front() {
            Some(next) => {
                *next.state.lock() = WaitState::Lead;
                next.cv.notify_one();
            }
            None => q.leading = false,
        }
    }

    /// The leader's work: one record for the group's `batches` (of `writers` writers), one
    /// sync if `sync`, then, with the lead handed on, apply and publish. The caller answers
    /// the other writers of the group.
    fn run_group(
        &self,
        env: &impl CommitEnv,
        mut batches: Batches,
        writers: usize,
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        // Holds the lead until the record is appended and synced (or the group failed before
        // that), so records and syncs keep the queue's order.
        type Logged = Option<(Appended, Arc<Slot>, Result<()>)>;
        let logged = (|| -> Result<Logged> {
            env.check_error()?;
            self.make_room_if_needed(env)?;
            batches.retain(|b| !b.is_empty());
            if batches.is_empty() {
                // Only a sync: it covers every record appended so far, so every write
                // acknowledged before this call.
                if sync {
                    self.sync_log(env)?;
                }
                return Ok(None);
            }
            let (appended, slot) = self.reserve(env, &mut batches, disable_wal, false)?;
            // Nothing is visible before it is durable: the sync comes before the apply. A
            // failed sync still publishes the (unapplied) slot, so that batches reserved after
            // it are not held forever; the error is sticky, and the group's writers get it.
            let synced = if sync { self.sync_log(env) } else { Ok(()) };
            Ok(Some((appended, slot, synced)))
        })();
        self.hand_off_lead();
        let (appended, slot, synced) = match logged? {
            Some(l) => l,
            None => {
                env.committed(writers, sync, &Appended::default());
                return Ok(());
            }
        };
        let r = synced.and_then(|()| {
            let mut at = 0;
            for b in &batches {
                let n = b.count() as usize;
                let pointers = appended.pointers.get(at..at + n).unwrap_or(&[]);
                env.apply(b, pointers, disable_wal)?;
                at += n;
            }
            Ok(())
        });
        self.publisher.publish(&slot);
        if r.is_ok() {
            env.committed(writers, sync, &appended);
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
