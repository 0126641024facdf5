//! Coordination shared by the user threads and the workers: health, the snapshot gate, the
//! write epoch, the transaction log, and the bookkeeping of cross-shard batches.
//!
//! A cross-shard batch gets its GSN and is enqueued on every shard in GSN order (the enqueue
//! lock); the part that finishes last aborts the GSN and answers the caller ([`Part::finish`]),
//! or hands the batch to its worker, which commits it with the other batches its group
//! finished and then answers ([`commit_batches`]); every worker that applied a part waits for
//! the commit before its next request.
//! A snapshot ([`Coord::snapshot_barrier`]) closes the gate, waits for cross-shard batches in
//! flight, and takes the epoch lock in write mode, so the shards' snapshots are one cut. The
//! protocol, why it cannot deadlock, and what a crash leaves: `docs/design.md` §11.5, §12.

use crate::batch::Op;
use crate::reply::Reply;
use crate::txlog::TxLog;
use parking_lot::{Condvar, Mutex, RwLock, RwLockWriteGuard};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use strata_engine::{Error, Result};

/// Whether the database can still serve requests. Failures are sticky until the database is
/// reopened, at two levels:
///
/// * **writes** ([`Health::fail_writes`]): an engine write failed (a log append or sync, a
///   poisoned engine) or a commit record could not be made durable. Every later write fails;
///   reads go on, since every shard still shows exactly the writes it applied and no
///   cross-shard batch is half applied (a failed write is not applied; a batch whose commit
///   failed has all of its parts applied);
/// * **everything** ([`Health::fail`]): a worker panicked, or a cross-shard batch was
///   aborted, which may leave some of its parts applied until recovery rolls them back:
///   reads would see half a batch, so they fail too.
#[derive(Default)]
pub(crate) struct Health {
    failed: AtomicBool,
    reads_failed: AtomicBool,
    error: Mutex<Option<Error>>,
}

impl Health {
    /// Fails every later request, reads included.
    pub(crate) fn fail(&self, e: Error) {
        self.fail_writes(e);
        self.reads_failed.store(true, Ordering::Release);
    }

    /// Fails every later write; reads go on.
    pub(crate) fn fail_writes(&self, e: Error) {
        let mut g = self.error.lock();
        if g.is_none() {
            *g = Some(match e {
                Error::Poisoned(_) => e,
                other => Error::Poisoned(other.to_string()),
            });
        }
        self.failed.store(true, Ordering::Release);
    }

    /// Whether a read may run.
    #[inline]
    pub(crate) fn check_reads(&self) -> Result<()> {
        if !self.reads_failed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.check()
    }

    /// Whether a write may run (any failure refuses it).
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(self
            .error
            .lock()
            .clone()
            .unwrap_or_else(|| Error::Poisoned("a shard worker failed".to_string())))
    }
}

#[derive(Default)]
struct GateState {
    inflight: usize,
    snapshots_waiting: usize,
}

/// Keeps snapshots and half-applied cross-shard batches apart.
#[derive(Default)]
pub(crate) struct Gate {
    st: Mutex<GateState>,
    cv: Condvar,
}

impl Gate {
    /// A cross-shard batch starts (before its first part is queued).
    pub(crate) fn enter(&self) {
        let mut st = self.st.lock();
        while st.snapshots_waiting > 0 {
            self.cv.wait(&mut st);
        }
        st.inflight += 1;
    }

    /// Every part of a cross-shard batch is applied (or failed).
    pub(crate) fn exit(&self) {
        let mut st = self.st.lock();
        st.inflight -= 1;
        if st.inflight == 0 {
            self.cv.notify_all();
        }
    }
}

/// Held while the shards' snapshots are taken.
pub(crate) struct SnapshotBarrier<'a> {
    gate: &'a Gate,
    _epoch: RwLockWriteGuard<'a, ()>,
}

impl Drop for SnapshotBarrier<'_> {
    fn drop(&mut self) {
        let mut st = self.gate.st.lock();
        st.snapshots_waiting -= 1;
        self.gate.cv.notify_all();
    }
}

/// State shared by the front and every worker.
pub(crate) struct Coord {
    pub health: Health,
    pub gate: Gate,
    /// Workers: read mode around engine writes. Snapshots: write mode.
    pub epoch: RwLock<()>,
    pub txlog: TxLog,
    /// Keeps cross-shard parts in GSN order on every queue.
    pub enqueue: Mutex<()>,
}

impl Coord {
    pub(crate) fn new(txlog: TxLog) -> Self {
        Coord {
            health: Health::default(),
            gate: Gate::default(),
            epoch: RwLock::new(()),
            txlog,
            enqueue: Mutex::new(()),
        }
    }

    /// Waits until no cross-shard batch is half applied and no write is being applied.
    pub(crate) fn snapshot_barrier(&self) -> SnapshotBarrier<'_> {
        {
            let mut st = self.gate.st.lock();
            st.snapshots_waiting += 1;
            while st.inflight > 0 {
                self.gate.cv.wait(&mut st);
            }
        }
        SnapshotBarrier {
            gate: &self.gate,
            _epoch: self.epoch.write(),
        }
    }
}

/// One cross-shard batch in flight.
pub(crate) struct Cross {
    pub gsn: u64,
    remaining: AtomicUsize,
    error: Mutex<Option<Error>>,
    reply: Mutex<Option<Reply<()>>>,
    coord: Arc<Coord>,
}

impl Cross {
    pub(crate) fn new(gsn: u64, parts: usize, reply: Reply<()>, coord: Arc<Coord>) -> Arc<Cross> {
        Arc::new(Cross {
            gsn,
            remaining: AtomicUsize::new(parts),
            error: Mutex::new(None),
            reply: Mutex::new(Some(reply)),
            coord,
        })
    }

    /// Answers the caller (once).
    fn answer(&self, outcome: Result<()>) {
        if let Some(reply) = self.reply.lock().take() {
            reply.send(outcome);
        }
    }
}

/// One shard's part of a cross-shard batch. Dropped unfinished (queue closed, worker died), it
/// finishes itself with an error, so the batch is aborted and its caller answered.
pub(crate) struct Part {
    pub cross: Arc<Cross>,
    pub ops: Vec<Op>,
    finished: bool,
}

impl Part {
    pub(crate) fn new(cross: Arc<Cross>, ops: Vec<Op>) -> Part {
        Part {
            cross,
            ops,
            finished: false,
        }
    }

    /// Records this part's outcome. The last part of the batch leaves the gate; if a part
    /// failed it aborts the batch and answers the caller; if every part succeeded it
    /// returns the batch, which the caller commits with [`commit_batches`] (together with
    /// the other batches its group finished: one wait for the transaction log, not one
    /// each).
    #[must_use = "a finished batch must be committed"]
    pub(crate) fn finish(&mut self, r: Result<()>) -> Option<Arc<Cross>> {
        if self.finished {
            return None;
        }
        self.finished = true;
        let c = &self.cross;
        if let Err(e) = r {
            c.error.lock().get_or_insert(e);
        }
        if c.remaining.fetch_sub(1, Ordering::AcqRel) != 1 {
            return None;
        }
        c.coord.gate.exit();
        let err = c.error.lock().take();
        match err {
            Some(e) => {
                c.coord.txlog.abort(c.gsn, &e);
                c.coord.health.fail(e.clone());
                c.answer(Err(e));
                None
            }
            None => Some(c.clone()),
        }
    }
}

/// Commits batches whose parts are all applied (ascending GSNs) and answers their callers:
/// every GSN is marked ready at once, then one wait covers the highest, since commits are
/// durable in GSN order.
pub(crate) fn commit_batches(coord: &Coord, batches: Vec<Arc<Cross>>) {
    if batches.is_empty() {
        return;
    }
    let gsns: Vec<u64> = batches.iter().map(|c| c.gsn).collect();
    let outcome = coord.txlog.commit_many(&gsns).inspect_err(|e| {
        coord.health.fail_writes(e.clone());
    });
    for c in batches {
        c.answer(outcome.clone());
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        if !self.finished {
            // An error never leaves a batch to commit.
            let _ = self.finish(Err(Error::Poisoned(format!(
                "part of cross-shard batch {} was dropped before it was applied",
                self.cross.gsn
            ))));
        }
    }
}
