//! The shard worker: the only thread that writes its engine instance.
//!
//! Opportunistic batching (p2KVS Algorithm 1): consecutive writes become one engine write
//! batch (synced if any asked for sync), consecutive reads one `multi_get`, up to `max_batch`;
//! the first request of another type is carried over, so requests run in queue order; the
//! worker never waits for more to arrive. Cross-shard parts and jobs (ranges, scans, flushes)
//! run alone. An engine write error or a panic marks the database failed, after which every
//! request is answered with that error. See `docs/design.md` §11.2 and, for parts, §12.1.

use crate::coord::{Coord, Part};
use crate::engine::{Engine, EngineBatch};
use crate::exec::ShardTxn;
use crate::reply::Reply;
use crate::request::{Class, Request, Values};
use crate::stats::ShardCounters;
use crate::undo::{undo_key, UndoRecord};
use crossbeam_channel::Receiver;
use parking_lot::RwLock;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use strata_engine::{Error, Result};

thread_local! {
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
    /// The worker's shard and coordination state, for [`note_panic`].
    static CURRENT: RefCell<Option<(usize, Arc<Coord>)>> = const { RefCell::new(None) };
}

/// Whether the current thread is a shard worker (completion callbacks run there).
/// What a caught panic said.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

pub(crate) fn in_worker() -> bool {
    IN_WORKER.with(|c| c.get())
}

/// Called when a reply is dropped while its thread unwinds: if that thread is a worker, the
/// database is marked failed before the caller hears of the error, so a caller that sees the
/// error also sees `health()` fail.
pub(crate) fn note_panic() {
    let _ = CURRENT.try_with(|c| {
        if let Some((id, coord)) = &*c.borrow() {
            coord
                .health
                .fail(Error::Poisoned(format!("shard {id} worker panicked")));
        }
    });
}

pub(crate) struct Worker<E: Engine> {
    pub id: usize,
    pub engine: Arc<E>,
    pub coord: Arc<Coord>,
    pub rx: Receiver<Request<E>>,
    pub max_batch: usize,
    pub stats: Arc<ShardCounters>,
    pub core: Option<core_affinity::CoreId>,
    /// The first request of the next batch, taken while assembling the previous one.
    pub carry: Option<Request<E>>,
    /// Undo records of committed cross-shard batches, deleted with the next engine write.
    pub gc: Vec<Vec<u8>>,
    /// Write requests queued or being applied; decremented once a write is visible.
    pub pending_writes: Arc<AtomicUsize>,
    /// The shard's latch: held exclusively while the worker handles a request (for a
    /// cross-shard part, until it commits); a caller holding it exclusively may run an
    /// execution on its own thread ([`crate::ShardedDb::exec_here_or_queued`]); callers
    /// writing the shard on their own threads hold it shared (`Options::direct_writes`).
    pub shard_lock: Arc<RwLock<()>>,
    /// Raised while parts applied here may be rolled back (the compaction filter waits).
    pub in_doubt: Arc<crate::engine::PartsInDoubt>,
}

impl<E: Engine> Worker<E> {
    pub(crate) fn run(mut self) {
        IN_WORKER.with(|c| c.set(true));
        CURRENT.with(|c| *c.borrow_mut() = Some((self.id, self.coord.clone())));
        if let Some(core) = self.core {
            core_affinity::set_for_current(core);
        }
        loop {
            let req = match self.carry.take() {
                Some(r) => r,
                None => match self.rx.recv() {
                    Ok(r) => r,
                    Err(_) => break, // Closed and drained.
                },
            };
            let lock = self.shard_lock.clone();
            let r = {
                let _held = lock.write();
                catch_unwind(AssertUnwindSafe(|| self.handle(req)))
            };
            if let Err(panic) = r {
                self.coord.health.fail(Error::Poisoned(format!(
                    "shard {} worker panicked: {}",
                    self.id,
                    panic_message(&*panic)
                )));
            }
        }
        if !self.gc.is_empty() && self.coord.health.check().is_ok() {
            let mut b = E::Batch::default();
            for k in self.gc.drain(..) {
                b.delete(&k);
            }
            // Best effort: a leftover undo record of a committed batch is removed at the next
            // open.
            let _ = self.engine.write(b, false);
        }
    }

    fn fail(&self, e: &Error) -> Error {
        let e = Error::Poisoned(format!("shard {} failed: {e}", self.id));
        self.coord.health.fail_writes(e.clone());
        e
    }

    fn handle(&mut self, first: Request<E>) {
        let healthy = if first.needs_writes() {
            self.coord.health.check()
        } else {
            self.coord.health.check_reads()
        };
        if let Err(e) = healthy {
            if first.is_write() {
                self.pending_writes.fetch_sub(1, Ordering::Release);
            }
            first.fail(e);
            return;
        }
        match first.class() {
            Class::Write => self.write_group(first),
            Class::Read => self.read_group(first),
            Class::Exec => self.exec_group(first),
            Class::Alone => match first {
                Request::Part(p) => self.part(p),
                Request::Job(f) => {
                    self.stats.record_scan();
                    f(Ok(&*self.engine))
                }
                _ => unreachable!("class Alone"),
            },
        }
    }

    /// Takes the next queued request if it has class `class`; carries it over otherwise.
    fn next_of(&mut self, class: Class) -> Option<Request<E>> {
        match self.rx.try_recv() {
            Ok(r) if r.class() == class => Some(r),
            Ok(r) => {
                self.carry = Some(r);
                None
            }
            Err(_) => None,
        }
    }

    fn write_group(&mut self, first: Request<E>) {
        let mut batch = E::Batch::default();
        let mut replies: Vec<Reply<()>> = Vec::new();
        let mut sync = false;
        let mut next = Some(first);
        while let Some(req) = next.take() {
            if let Request::Write {
                ops,
                sync: s,
                reply,
            } = req
            {
                ops.add_to(&mut batch);
                sync |= s;
                replies.push(reply);
            }
            if replies.len() < self.max_batch {
                next = self.next_of(Class::Write);
            }
        }
        for k in self.gc.drain(..) {
            batch.delete(&k);
        }
        let r = {
            let _epoch = self.coord.epoch.read();
            self.engine.write(batch, sync)
        };
        self.pending_writes
            .fetch_sub(replies.len(), Ordering::Release);
        self.stats.record_write(replies.len());
        let r = r.map_err(|e| self.fail(&e));
        for reply in replies {
            reply.send(r.clone());
        }
    }

    /// Runs consecutive executions against one transaction, applies their writes as one
    /// engine write, then runs their completions (`exec.rs`).
    fn exec_group(&mut self, first: Request<E>) {
        let mut group = Vec::new();
        let mut next = Some(first);
        while let Some(req) = next.take() {
            if let Request::Exec(x) = req {
                group.push(x);
            }
            // Once writes fail, each execution runs alone: a reading one must not share a
            // group (and its outcome) with a writing one that is refused.
            if group.len() < self.max_batch && self.coord.health.check().is_ok() {
                next = self.next_of(Class::Exec);
            }
        }
        let count = group.len();
        let mut txn = ShardTxn::new(self.id, self.engine.clone());
        let reads: Vec<Vec<u8>> = group
            .iter_mut()
            .flat_map(|x| std::mem::take(&mut x.reads))
            .collect();
        if !reads.is_empty() {
            self.stats.record_read(count, reads.len());
            txn.prefetch(reads);
        }
        // Replies, not bare callbacks: a completion dropped by a panic still hears an error.
        let mut done: Vec<Reply<()>> = Vec::new();
        for x in group {
            if let Some(cb) = (x.f)(Ok(&mut txn)) {
                done.push(Reply::callback(cb));
            }
        }
        let r = if !txn.has_writes() {
            Ok(())
        } else if let Err(e) = self.coord.health.check() {
            // Writes failed earlier: this group's writes are not applied.
            Err(e)
        } else {
            let (batch, sync) = txn.into_batch(std::mem::take(&mut self.gc));
            let _epoch = self.coord.epoch.read();
            self.engine.write(batch, sync).map_err(|e| self.fail(&e))
        };
        self.pending_writes.fetch_sub(count, Ordering::Release);
        self.stats.record_write(count);
        for reply in done {
            reply.send(r.clone());
        }
    }

    fn read_group(&mut self, first: Request<E>) {
        let mut reqs = vec![first];
        while reqs.len() < self.max_batch {
            match self.next_of(Class::Read) {
                Some(r) => reqs.push(r),
                None => break,
            }
        }
        // A lone get skips the batched path.
        if reqs.len() == 1 && matches!(reqs[0], Request::Get { .. }) {
            if let Some(Request::Get { key, reply }) = reqs.pop() {
                self.stats.record_read(1, 1);
                reply.send(self.engine.get(None, &key));
                return;
            }
        }
        let mut keys: Vec<&[u8]> = Vec::new();
        for r in &reqs {
            match r {
                Request::Get { key, .. } => keys.push(key),
                Request::MultiGet { keys: ks, .. } => keys.extend(ks.iter().map(|k| &k[..])),
                _ => unreachable!("class Read"),
            }
        }
        let n = keys.len();
        let values = self.engine.multi_get(None, &keys);
        drop(keys);
        self.stats.record_read(reqs.len(), n);
        let mut values = values.into_iter();
        let mut missing = || {
            Err(Error::Poisoned(
                "engine multi_get returned fewer results than keys".to_string(),
            ))
        };
        for r in reqs {
            match r {
                Request::Get { reply, .. } => {
                    reply.send(values.next().unwrap_or_else(&mut missing))
                }
                Request::MultiGet { keys, reply } => {
                    let v: Values = (0..keys.len())
                        .map(|_| values.next().unwrap_or_else(&mut missing))
                        .collect();
                    reply.send(Ok(v));
                }
                _ => unreachable!("class Read"),
            }
        }
    }

    /// Applies one part of a cross-shard batch with its undo record, merged with the parts
    /// queued right behind it into one synced engine write, then waits until the last of
    /// them commits (why: `docs/design.md` §12.1, rule 4).
    fn part(&mut self, first: Part) {
        let mut parts = vec![first];
        while parts.len() < self.max_batch {
            match self.rx.try_recv() {
                Ok(Request::Part(p)) => parts.push(p),
                Ok(other) => {
                    self.carry = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        // Raised before the parts are visible, lowered once their commit is durable; on an
        // error the database is failed and stays raised (`PartsInDoubt`).
        self.in_doubt.raise(parts.len());
        let n = parts.len();
        let r = self.apply_parts(&parts);
        self.pending_writes
            .fetch_sub(parts.len(), Ordering::Release);
        let ok = r.is_ok();
        let r = r.map_err(|e| self.fail(&e));
        // Parts reach every queue in GSN order, so the last one has the highest GSN; commits
        // are durable in GSN order, so once it commits they all have.
        let last = parts.last().map_or(0, |p| p.cross.gsn);
        let gsns: Vec<u64> = parts.iter().map(|p| p.cross.gsn).collect();
        self.stats.record_cross_parts(parts.len());
        let finished: Vec<_> = parts
            .into_iter()
            .filter_map(|mut p| p.finish(r.clone()))
            .collect();
        crate::coord::commit_batches(&self.coord, finished);
        if !ok {
            return;
        }
        match self.coord.txlog.wait_committed(last) {
            Ok(()) => {
                self.in_doubt.lower(n);
                self.gc.extend(gsns.into_iter().map(undo_key))
            }
            Err(e) => {
                self.fail(&e);
            }
        }
    }

    /// Applies `parts` (ascending GSNs) with their undo records in one synced engine write.
    /// Each undo record holds the before-image of its part's keys as the parts before it in
    /// the group left them, so that rolling back newest first restores the state before the
    /// oldest (§12.3).
    fn apply_parts(&mut self, parts: &[Part]) -> Result<()> {
        let mut overlay: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
        let mut batch = E::Batch::default();
        for p in parts {
            let mut seen = HashSet::new();
            let keys: Vec<&[u8]> = p
                .ops
                .iter()
                .map(|op| op.key())
                .filter(|k| seen.insert(*k))
                .collect();
            let unknown: Vec<&[u8]> = keys
                .iter()
                .copied()
                .filter(|k| !overlay.contains_key(*k))
                .collect();
            let mut read = self.engine.multi_get(None, &unknown).into_iter();
            let mut undo = UndoRecord {
                gsn: p.cross.gsn,
                before: Vec::with_capacity(keys.len()),
            };
            for k in &keys {
                let v = match overlay.get(*k) {
                    Some(v) => v.clone(),
                    None => read.next().ok_or_else(|| {
                        Error::Poisoned(
                            "engine multi_get returned fewer results than keys".to_string(),
                        )
                    })??,
                };
                undo.before.push((k.to_vec(), v));
            }
            for op in &p.ops {
                match op {
                    crate::batch::Op::Put(k, v) => {
                        batch.put(k, v);
                        overlay.insert(k.clone(), Some(v.clone()));
                    }
                    crate::batch::Op::Delete(k) => {
                        batch.delete(k);
                        overlay.insert(k.clone(), None);
                    }
                }
            }
            batch.put(&undo_key(p.cross.gsn), &undo.encode());
        }
        for k in self.gc.drain(..) {
            batch.delete(&k);
        }
        let _epoch = self.coord.epoch.read();
        self.engine.write(batch, true)
    }
}
