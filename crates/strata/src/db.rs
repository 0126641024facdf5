//! [`ShardedDb`]: the public database. Routing, queues, direct reads and snapshots:
//! `docs/design.md` §11; the cross-shard protocol: §12 and `coord.rs`.

use crate::batch::{Op, WriteBatch};
use crate::coord::{Coord, Cross, Part};
use crate::engine::{Engine, EngineBatch, EngineIter, PartsInDoubt};
use crate::exec::{Exec, ShardTxn};
use crate::held::HeldShards;
use crate::iter::{collect, DbIter};
use crate::meta::{shard_dir, ShardMeta};
use crate::options::{default_shards, IterOptions, Options, ScanMode, WriteOptions};
use crate::recovery::RecoveryReport;
use crate::reply::{Callback, Pending, Reply};
use crate::request::{Request, Values, WriteOps};
use crate::routing::Routing;
use crate::stats::{BatchStats, ShardCounters};
use crate::txlog::{self, TxLog};
use crate::undo::{check_user_key, check_value};
use crate::worker::{in_worker, Worker};
use crossbeam_channel::{bounded, Sender};
use parking_lot::RwLock;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use strata_engine::io::{FileLock, Fs};
use strata_engine::{Error, Result};

/// Entries returned by `range` and `scan`.
pub type KvPairs = Vec<(Vec<u8>, Vec<u8>)>;

struct ShardHandle<E: Engine> {
    tx: Option<Sender<Request<E>>>,
    thread: Option<JoinHandle<()>>,
    /// Write requests queued or being applied (see `Options::direct_reads`).
    pending_writes: Arc<AtomicUsize>,
    /// The shard's latch: the worker holds it exclusively while it handles a request (see
    /// `exec_here_or_queued`), direct writers shared (`Options::direct_writes`).
    shard_lock: Arc<RwLock<()>>,
}

/// A database partitioned over `shards` engine instances by key hash, each owned by one
/// worker thread (p2KVS). Every method takes `&self`; share it between threads with `Arc` or
/// scoped threads.
///
/// Methods must not be called from inside a completion callback (callbacks run on a worker
/// thread, which must not wait on itself); such calls fail with
/// [`Error::InvalidArgument`].
pub struct ShardedDb<E: Engine> {
    root: PathBuf,
    shards: Vec<ShardHandle<E>>,
    engines: Vec<Arc<E>>,
    counters: Vec<Arc<ShardCounters>>,
    coord: Arc<Coord>,
    recovery: RecoveryReport,
    routing: Routing,
    direct_reads: bool,
    direct_writes: bool,
    /// The file system of the front's own files (`SHARDS`, `TXLOG`).
    fs: Arc<dyn Fs>,
    _lock: Box<dyn FileLock>,
}

/// Every key and value of `batch` within the limits.
fn check_batch(batch: &WriteBatch) -> Result<()> {
    for op in &batch.ops {
        match op {
            Op::Put(k, v) => check_user_key(k).and_then(|()| check_value(v))?,
            Op::Delete(k) => check_user_key(k)?,
        }
    }
    Ok(())
}

fn from_worker() -> Error {
    Error::InvalidArgument(
        "a Strata database was called from a completion callback, which runs on a shard \
         worker and must not wait on one: hand the work to another thread"
            .to_string(),
    )
}

impl<E: Engine> ShardedDb<E> {
    /// Opens (creating if needed) the sharded database in directory `path`. Recovers every
    /// shard, then rolls back the parts of cross-shard batches that never committed.
    pub fn open(path: impl AsRef<Path>, opts: Options<E::Config>) -> Result<Self> {
        opts.validate()?;
        let root = path.as_ref().to_path_buf();
        let fs = E::fs(&opts.engine);
        refuse_foreign_dir(&*fs, &root)?;
        // Durably: a new root whose entry is not synced into its parent vanishes in a power
        // loss with every write acknowledged in it (found by the crash test's scattered mode).
        strata_engine::io::create_dir_durably(&fs, &root)?;
        let lock = fs.lock(&root.join("LOCK"))?;
        let meta = match ShardMeta::load(&*fs, &root)? {
            Some(m) => {
                if m.engine != E::NAME {
                    return Err(Error::InvalidArgument(format!(
                        "{} holds a sharded database of engine {:?}, opened as {:?}",
                        root.display(),
                        m.engine,
                        E::NAME
                    )));
                }
                if let Some(r) = opts.routing {
                    if r != m.routing {
                        return Err(Error::InvalidArgument(format!(
                            "{} was created with routing {:?} (persisted in its SHARDS file) \
                             but the options ask for {r:?}: keys would be routed to the wrong \
                             shards. Open with that routing or leave it unset",
                            root.display(),
                            m.routing
                        )));
                    }
                }
                if let Some(n) = opts.shards {
                    if n != m.shards {
                        return Err(Error::InvalidArgument(format!(
                            "{} was created with {} shards (persisted in its SHARDS file) but \
                             the options ask for {n}: keys would be routed to the wrong shards. \
                             Open with shards = {} or leave shards unset",
                            root.display(),
                            m.shards,
                            m.shards
                        )));
                    }
                }
                m
            }
            None => {
                if fs.exists(&shard_dir(&root, 0))? {
                    return Err(Error::corruption(
                        root.join(crate::meta::FILE),
                        0,
                        "shard directories exist but the SHARDS file is missing",
                    ));
                }
                let m = ShardMeta::new(
                    opts.shards.unwrap_or_else(default_shards),
                    opts.routing.unwrap_or_default(),
                    E::NAME,
                );
                m.store(&*fs, &root)?;
                m
            }
        };
        let committed = txlog::recover(&*fs, &root)?;
        let in_doubt: Vec<Arc<PartsInDoubt>> =
            (0..meta.shards).map(|_| PartsInDoubt::opening()).collect();
        let engines = open_engines::<E>(&root, &opts.engine, &in_doubt)?;
        let recovery = crate::recovery::recover(&engines, committed, &root)?;
        if opts.hot_bytes > 0 {
            for e in &engines {
                e.set_hot_bytes(opts.hot_bytes / engines.len() as u64);
            }
        }
        // Every uncommitted part is rolled back: compaction filters may decide again.
        for p in &in_doubt {
            p.lower(1);
        }
        let txlog = TxLog::create(fs.clone(), &root, recovery.max_gsn)?;
        let coord = Arc::new(Coord::new(txlog));
        let cores = if opts.pin_workers {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut shards = Vec::with_capacity(meta.shards);
        let mut counters = Vec::with_capacity(meta.shards);
        for (id, engine) in engines.iter().enumerate() {
            let (tx, rx) = bounded(opts.queue_depth);
            let stats = Arc::new(ShardCounters::new(opts.max_batch));
            let pending_writes = Arc::new(AtomicUsize::new(0));
            let shard_lock = Arc::new(RwLock::new(()));
            counters.push(stats.clone());
            let worker = Worker {
                id,
                engine: engine.clone(),
                coord: coord.clone(),
                rx,
                max_batch: opts.max_batch,
                stats,
                core: (!cores.is_empty()).then(|| cores[id % cores.len()]),
                carry: None,
                gc: Vec::new(),
                pending_writes: pending_writes.clone(),
                shard_lock: shard_lock.clone(),
                in_doubt: in_doubt[id].clone(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("strata-shard-{id}"))
                .spawn(move || worker.run())
                .map_err(|e| Error::io("spawn shard worker", &root, e))?;
            shards.push(ShardHandle {
                tx: Some(tx),
                thread: Some(thread),
                pending_writes,
                shard_lock,
            });
        }
        Ok(ShardedDb {
            root,
            shards,
            engines,
            counters,
            coord,
            recovery,
            routing: meta.routing,
            direct_reads: opts.direct_reads,
            direct_writes: opts.direct_writes,
            fs,
            _lock: lock,
        })
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.engines.len()
    }

    /// The shard that owns `key` (see `routing.rs`).
    pub fn shard_of(&self, key: &[u8]) -> usize {
        self.routing.shard_of(key, self.engines.len())
    }

    /// How this database routes keys (persisted when it was created).
    pub fn routing(&self) -> Routing {
        self.routing
    }

    /// The engine instance of shard `i` (for statistics and tools; writing to it directly
    /// bypasses the worker and the routing).
    pub fn engine(&self, i: usize) -> &E {
        &self.engines[i]
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// What the last open rolled back and cleaned.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// `Ok` while every worker is healthy; after a worker failure (write error, panic, failed
    /// commit) the error that stopped the database: every write fails until it is reopened.
    /// After a failed engine write or commit, reads go on; after a panic or an aborted
    /// cross-shard batch they fail too (`coord.rs`, `Health`).
    pub fn health(&self) -> Result<()> {
        self.coord.health.check()
    }

    /// Batch-size statistics summed over the shards.
    pub fn batch_stats(&self) -> BatchStats {
        let mut s = BatchStats::default();
        for c in &self.counters {
            s.add(&c.snapshot());
        }
        s
    }

    /// Batch-size statistics of each shard.
    pub fn shard_batch_stats(&self) -> Vec<BatchStats> {
        self.counters.iter().map(|c| c.snapshot()).collect()
    }

    /// Sets the hot tier's total capacity (split evenly over the shards; 0: off), live:
    /// shrinking evicts at once.
    pub fn set_hot_bytes(&self, total: u64) {
        for (e, shard) in self.engines.iter().zip(&self.shards) {
            // Under the latch, so that every write in flight on the shard sees the tier in
            // one state (`hot.rs`). A worker thread holds its own shard's latch already.
            let _latch = (!in_worker()).then(|| shard.shard_lock.write());
            e.set_hot_bytes(total / self.engines.len() as u64);
        }
    }

    /// The hot tier's counters summed over the shards; `None` if it was never switched on
    /// (or the engine has none).
    pub fn hot_stats(&self) -> Option<crate::HotStats> {
        let mut total: Option<crate::HotStats> = None;
        for e in &self.engines {
            if let Some(s) = e.hot_stats() {
                total.get_or_insert_with(Default::default).add(&s);
            }
        }
        total
    }

    /// The engines' memory by part, summed over the shards.
    pub fn engine_memory(&self) -> crate::EngineMemory {
        let mut total = crate::EngineMemory::default();
        for e in &self.engines {
            total.add(&e.memory());
        }
        total
    }

    /// Every committed cross-shard batch has a GSN at or below this one.
    pub fn committed_gsn(&self) -> u64 {
        self.coord.txlog.committed()
    }

    fn enqueue(&self, shard: usize, req: Request<E>) {
        let pending = &self.shards[shard].pending_writes;
        let write = req.is_write();
        let failed = |req: Request<E>, e: Error| {
            if write {
                pending.fetch_sub(1, Ordering::Release);
            }
            req.fail(e)
        };
        if write {
            pending.fetch_add(1, Ordering::AcqRel);
        }
        if in_worker() {
            return failed(req, from_worker());
        }
        let healthy = if req.needs_writes() {
            self.coord.health.check()
        } else {
            self.coord.health.check_reads()
        };
        if let Err(e) = healthy {
            return failed(req, e);
        }
        match self.shards[shard].tx.as_ref() {
            Some(tx) => {
                if let Err(crossbeam_channel::SendError(req)) = tx.send(req) {
                    failed(req, Error::Closed);
                }
            }
            None => failed(req, Error::Closed),
        }
    }

    /// Whether a read of shard `s` may run in the calling thread: direct reads are on, the
    /// database is healthy, and no write is queued or being applied in the shard, so the
    /// engine already shows every write this caller issued (per-key order holds).
    fn direct(&self, s: usize) -> bool {
        self.direct_reads
            && !in_worker()
            && self.shards[s].pending_writes.load(Ordering::Acquire) == 0
            && self.coord.health.check().is_ok()
    }

    // ---- writes -----------------------------------------------------------------------

    /// Writes shard `s` in the calling thread, `fill` adding the operations to the batch:
    /// `None`, without calling `fill`, if the write must be queued instead (direct writes
    /// are off, this is a worker thread, or a write is queued or being applied in the shard,
    /// which this one must not overtake). Holds the shard's latch shared, so it never runs
    /// while the worker applies a cross-shard part (until that part commits: a rollback
    /// restores before-images, and must not erase this write) or runs executions (which
    /// read, then write, the shard alone). A failure fails the database as a worker's
    /// would.
    fn write_here(
        &self,
        s: usize,
        wo: &WriteOptions,
        fill: impl FnOnce(&mut E::Batch),
    ) -> Option<Result<()>> {
        if !self.direct_writes
            || in_worker()
            || self.shards[s].pending_writes.load(Ordering::Acquire) != 0
        {
            return None;
        }
        let _latch = self.shards[s].shard_lock.read();
        // After the latch: a part that failed released it, and this write must not land
        // after an aborted batch.
        if let Err(e) = self.coord.health.check() {
            return Some(Err(e));
        }
        let mut batch = E::Batch::default();
        fill(&mut batch);
        let r = {
            let _epoch = self.coord.epoch.read();
            catch_unwind(AssertUnwindSafe(|| self.engines[s].write(batch, wo.sync)))
        };
        self.counters[s].record_direct_write();
        Some(match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                // As a worker's failed write: later writes are refused, reads go on (§11.2).
                let e = Error::Poisoned(format!("shard {s} failed: {e}"));
                self.coord.health.fail_writes(e.clone());
                Err(e)
            }
            Err(panic) => {
                let e = Error::Poisoned(format!(
                    "shard {s} write panicked: {}",
                    crate::worker::panic_message(&*panic)
                ));
                self.coord.health.fail(e.clone());
                Err(e)
            }
        })
    }

    fn submit_write(&self, s: usize, wo: &WriteOptions, ops: WriteOps, reply: Reply<()>) {
        self.enqueue(
            s,
            Request::Write {
                ops,
                sync: wo.sync,
                reply,
            },
        );
    }

    fn submit_put(&self, wo: &WriteOptions, key: &[u8], value: &[u8], reply: Reply<()>) {
        if let Err(e) = check_user_key(key).and_then(|()| check_value(value)) {
            return reply.send(Err(e));
        }
        self.submit_write(self.shard_of(key), wo, WriteOps::put(key, value), reply)
    }

    fn submit_delete(&self, wo: &WriteOptions, key: &[u8], reply: Reply<()>) {
        if let Err(e) = check_user_key(key) {
            return reply.send(Err(e));
        }
        self.submit_write(
            self.shard_of(key),
            wo,
            WriteOps::Delete(key.to_vec()),
            reply,
        )
    }

    fn submit_batch(&self, wo: &WriteOptions, batch: WriteBatch, reply: Reply<()>) {
        if let Err(e) = check_batch(&batch) {
            return reply.send(Err(e));
        }
        if batch.ops.is_empty() {
            return reply.send(Ok(()));
        }
        let n = self.engines.len();
        let mut parts: Vec<Vec<Op>> = vec![Vec::new(); n];
        for op in batch.ops {
            parts[self.routing.shard_of(op.key(), n)].push(op);
        }
        let touched: Vec<usize> = (0..n).filter(|&s| !parts[s].is_empty()).collect();
        if touched.len() == 1 {
            let s = touched[0];
            let ops = std::mem::take(&mut parts[s]);
            return self.enqueue(
                s,
                Request::Write {
                    ops: WriteOps::Batch(ops),
                    sync: wo.sync,
                    reply,
                },
            );
        }
        if in_worker() {
            return reply.send(Err(from_worker()));
        }
        if let Err(e) = self.coord.health.check() {
            return reply.send(Err(e));
        }
        self.coord.gate.enter();
        let _order = self.coord.enqueue.lock();
        let gsn = self.coord.txlog.assign();
        let cross = Cross::new(gsn, touched.len(), reply, self.coord.clone());
        for s in touched {
            let ops = std::mem::take(&mut parts[s]);
            self.enqueue(s, Request::Part(Part::new(cross.clone(), ops)));
        }
    }

    /// Writes `key = value` (not synced).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(&WriteOptions::default(), key, value)
    }

    pub fn put_opt(&self, wo: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        check_user_key(key).and_then(|()| check_value(value))?;
        let s = self.shard_of(key);
        if let Some(r) = self.write_here(s, wo, |b| b.put(key, value)) {
            return r;
        }
        let (reply, pending) = Reply::slot();
        self.submit_write(s, wo, WriteOps::put(key, value), reply);
        pending.wait()
    }

    /// Deletes `key` (not synced).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    pub fn delete_opt(&self, wo: &WriteOptions, key: &[u8]) -> Result<()> {
        check_user_key(key)?;
        let s = self.shard_of(key);
        if let Some(r) = self.write_here(s, wo, |b| b.delete(key)) {
            return r;
        }
        let (reply, pending) = Reply::slot();
        self.submit_write(s, wo, WriteOps::Delete(key.to_vec()), reply);
        pending.wait()
    }

    /// Applies `batch` atomically. A batch whose keys span several shards gets a global
    /// sequence number and is always synced (`docs/design.md` §12).
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(&WriteOptions::default(), batch)
    }

    pub fn write_opt(&self, wo: &WriteOptions, batch: WriteBatch) -> Result<()> {
        if let Some(first) = batch.ops.first() {
            let s = self.shard_of(first.key());
            if batch.ops.iter().all(|op| self.shard_of(op.key()) == s) {
                check_batch(&batch)?;
                let direct = self.write_here(s, wo, |b| {
                    for op in &batch.ops {
                        match op {
                            Op::Put(k, v) => b.put(k, v),
                            Op::Delete(k) => b.delete(k),
                        }
                    }
                });
                if let Some(r) = direct {
                    return r;
                }
            }
        }
        let (reply, pending) = Reply::slot();
        self.submit_batch(wo, batch, reply);
        pending.wait()
    }

    /// Asynchronous put: returns once the request is queued (blocking only while the shard's
    /// queue is full); `callback` runs on the shard's worker thread with the result. Keep
    /// callbacks short; they must not call the database.
    pub fn put_async(
        &self,
        key: &[u8],
        value: &[u8],
        callback: impl FnOnce(Result<()>) + Send + 'static,
    ) {
        self.submit_put(
            &WriteOptions::default(),
            key,
            value,
            Reply::callback(Box::new(callback) as Callback<()>),
        )
    }

    /// Asynchronous put with write options (see [`ShardedDb::put_async`]).
    pub fn put_async_opt(
        &self,
        wo: &WriteOptions,
        key: &[u8],
        value: &[u8],
        callback: impl FnOnce(Result<()>) + Send + 'static,
    ) {
        self.submit_put(wo, key, value, Reply::callback(Box::new(callback)))
    }

    /// Asynchronous delete with a callback (see [`ShardedDb::put_async`]).
    pub fn delete_async(&self, key: &[u8], callback: impl FnOnce(Result<()>) + Send + 'static) {
        self.submit_delete(
            &WriteOptions::default(),
            key,
            Reply::callback(Box::new(callback)),
        )
    }

    /// Asynchronous batch with a callback (see [`ShardedDb::put_async`]).
    pub fn write_async(
        &self,
        wo: &WriteOptions,
        batch: WriteBatch,
        callback: impl FnOnce(Result<()>) + Send + 'static,
    ) {
        self.submit_batch(wo, batch, Reply::callback(Box::new(callback)))
    }

    /// Asynchronous put as a future (also `.wait()`-able).
    pub fn put_future(&self, wo: &WriteOptions, key: &[u8], value: &[u8]) -> Pending<()> {
        let (reply, pending) = Reply::slot();
        self.submit_put(wo, key, value, reply);
        pending
    }

    /// Asynchronous delete as a future.
    pub fn delete_future(&self, wo: &WriteOptions, key: &[u8]) -> Pending<()> {
        let (reply, pending) = Reply::slot();
        self.submit_delete(wo, key, reply);
        pending
    }

    /// Asynchronous batch as a future.
    pub fn write_future(&self, wo: &WriteOptions, batch: WriteBatch) -> Pending<()> {
        let (reply, pending) = Reply::slot();
        self.submit_batch(wo, batch, reply);
        pending
    }

    // ---- point reads ------------------------------------------------------------------

    /// Runs `f` on the worker of shard `shard` (see [`ShardedDb::shard_of`]) with the shard as
    /// a [`ShardTxn`]: its reads see the shard plus the writes of the executions merged into
    /// the same group before it, and its writes are applied with the group's one engine write
    /// (synced if any execution of the group called [`ShardTxn::sync`]). The completion `f`
    /// returns runs on the worker once that write is done, with its outcome. Executions queue
    /// in order with the shard's other requests, so while `f` runs nothing else reads or writes
    /// the shard: a read-modify-write in `f` is atomic. If the database failed or closed, `f`
    /// runs with the error instead (and so does its completion). `f` and its completion run
    /// on the worker: they must not block or call this database (see `docs/design.md` §11.2).
    pub fn exec(
        &self,
        shard: usize,
        f: impl FnOnce(Result<&mut ShardTxn<E>>) -> Option<Callback<()>> + Send + 'static,
    ) {
        self.exec_reading(shard, Vec::new(), f)
    }

    /// [`ShardedDb::exec_reading`], run on the calling thread when the shard is idle: no
    /// write queued or being applied, and its worker not handling a request (the caller then
    /// holds the worker's lock, so nothing else touches the shard while `f` runs, as on the
    /// worker). `f`'s writes are applied with one engine write on this thread (synced if `f`
    /// asked: that blocks the caller for the sync, so callers that sync should queue), then
    /// its completion runs here too. This saves the two thread switches of a hand-off when
    /// there is nothing to batch with (p2KVS's direct path, as `direct_reads` for reads);
    /// under load the shard is busy and executions queue and merge as usual.
    pub fn exec_here_or_queued(
        &self,
        shard: usize,
        reads: Vec<Vec<u8>>,
        f: impl FnOnce(Result<&mut ShardTxn<E>>) -> Option<Callback<()>> + Send + 'static,
    ) {
        let mut f = Some(f);
        let ran = self.try_exec_here(shard, |txn| match f.take() {
            Some(f) => f(Ok(txn)),
            None => None,
        });
        match ran {
            Some((done, r)) => {
                if let Some(done) = done {
                    done(r);
                }
            }
            None => {
                if let Some(f) = f {
                    self.exec_reading(shard, reads, f);
                }
            }
        }
    }

    /// Runs `f` on the calling thread if shard `shard` is idle (the conditions of
    /// [`ShardedDb::exec_here_or_queued`]) and returns what it returned with the outcome of
    /// its writes (applied with one engine write before this returns); `None`, without
    /// running `f`, if the shard is busy, the database failed, or this is a worker thread.
    /// `f` need not be `'static`: nothing is queued.
    pub fn try_exec_here<R>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut ShardTxn<E>) -> R,
    ) -> Option<(R, Result<()>)> {
        let mut held = self.hold_shards();
        let out = f(held.txn(shard)?);
        let r = held.commit().pop().map_or(Ok(()), |(_, r)| r);
        Some((out, r))
    }

    /// Shards held on the calling thread for several direct executions at once (a pipeline of
    /// commands of several shards: see [`HeldShards`]). Holds none yet.
    pub fn hold_shards(&self) -> HeldShards<'_, E> {
        HeldShards::new(self)
    }

    /// Takes shard `shard`'s latch exclusively if the shard is idle (no write queued or being
    /// applied, its worker not handling a request), the database healthy and this not a
    /// worker thread, with a transaction over it; `None` without waiting otherwise.
    pub(crate) fn try_latch(
        &self,
        shard: usize,
    ) -> Option<(parking_lot::RwLockWriteGuard<'_, ()>, ShardTxn<E>)> {
        if shard >= self.shards.len() || in_worker() || self.coord.health.check().is_err() {
            return None;
        }
        let held = self.shards[shard].shard_lock.try_write()?;
        if self.shards[shard].pending_writes.load(Ordering::Acquire) != 0 {
            return None;
        }
        Some((held, ShardTxn::new(shard, self.engines[shard].clone())))
    }

    /// The write epoch, held in read mode around the engine writes of held shards (a
    /// snapshot waits for them: it sees all of them or none).
    pub(crate) fn write_epoch(&self) -> parking_lot::RwLockReadGuard<'_, ()> {
        self.coord.epoch.read()
    }

    /// Applies a held shard's transaction with one engine write (its latch held, the write
    /// epoch held by the caller). Refused once the database's writes failed; a failure fails
    /// them, as a worker's failed write does (later writes are refused, reads go on, §11.2).
    pub(crate) fn apply_held(&self, txn: ShardTxn<E>) -> Result<()> {
        if !txn.has_writes() {
            return Ok(());
        }
        self.coord.health.check()?;
        let shard = txn.shard();
        let (batch, sync) = txn.into_batch(Vec::new());
        self.engines[shard].write(batch, sync).map_err(|e| {
            let e = Error::Poisoned(format!("shard {shard} failed: {e}"));
            self.coord.health.fail_writes(e.clone());
            e
        })
    }

    /// [`ShardedDb::exec`] for a closure that will read `reads`: the worker fetches the
    /// declared reads of a whole group of executions with one engine `multi_get` before
    /// running them, so many callers' point reads become one batched read.
    pub fn exec_reading(
        &self,
        shard: usize,
        reads: Vec<Vec<u8>>,
        f: impl FnOnce(Result<&mut ShardTxn<E>>) -> Option<Callback<()>> + Send + 'static,
    ) {
        if shard >= self.shards.len() {
            let e = Error::InvalidArgument(format!(
                "shard {shard} does not exist (the database has {})",
                self.shards.len()
            ));
            if let Some(done) = f(Err(e.clone())) {
                done(Err(e));
            }
            return;
        }
        self.enqueue(
            shard,
            Request::Exec(Exec {
                f: Box::new(f),
                reads,
            }),
        );
    }

    fn submit_get(&self, key: &[u8], reply: Reply<Option<Vec<u8>>>) {
        if let Err(e) = check_user_key(key) {
            return reply.send(Err(e));
        }
        let s = self.shard_of(key);
        self.enqueue(
            s,
            Request::Get {
                key: key.to_vec(),
                reply,
            },
        );
    }

    /// The newest value of `key`, read by its shard's worker (merged with other queued reads),
    /// or in the calling thread with `Options::direct_reads` when the shard has no write
    /// pending.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let s = self.shard_of(key);
        if self.direct(s) {
            check_user_key(key)?;
            return self.engines[s].get(None, key);
        }
        let (reply, pending) = Reply::slot();
        self.submit_get(key, reply);
        pending.wait()
    }

    /// Asynchronous get with a callback (runs on the worker thread).
    pub fn get_async(
        &self,
        key: &[u8],
        callback: impl FnOnce(Result<Option<Vec<u8>>>) + Send + 'static,
    ) {
        self.submit_get(key, Reply::callback(Box::new(callback)))
    }

    /// Asynchronous get as a future.
    pub fn get_future(&self, key: &[u8]) -> Pending<Option<Vec<u8>>> {
        let (reply, pending) = Reply::slot();
        self.submit_get(key, reply);
        pending
    }

    /// Looks up many keys: split by shard, each shard's share read by its worker in one batched
    /// read, all shards in parallel. Results in request order.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Vec<u8>>>> {
        let mut out: Vec<Result<Option<Vec<u8>>>> = (0..keys.len()).map(|_| Ok(None)).collect();
        let plan = self.routing.split(keys, self.engines.len());
        let mut waits: Vec<(Vec<usize>, Pending<Values>)> = Vec::new();
        for (s, idx) in plan.into_iter().enumerate() {
            if idx.is_empty() {
                continue;
            }
            let mut ks = Vec::with_capacity(idx.len());
            let mut bad = None;
            for &i in &idx {
                let k = keys[i].as_ref();
                if let Err(e) = check_user_key(k) {
                    bad = Some(e);
                }
                ks.push(k.to_vec());
            }
            if let Some(e) = bad {
                for &i in &idx {
                    out[i] = Err(e.clone());
                }
                continue;
            }
            if self.direct(s) {
                let refs: Vec<&[u8]> = ks.iter().map(|k| &k[..]).collect();
                for (&i, v) in idx.iter().zip(self.engines[s].multi_get(None, &refs)) {
                    out[i] = v;
                }
                continue;
            }
            let (reply, pending) = Reply::slot();
            self.enqueue(s, Request::MultiGet { keys: ks, reply });
            waits.push((idx, pending));
        }
        for (idx, pending) in waits {
            match pending.wait() {
                Ok(values) => {
                    for (i, v) in idx.into_iter().zip(values) {
                        out[i] = v;
                    }
                }
                Err(e) => {
                    for i in idx {
                        out[i] = Err(e.clone());
                    }
                }
            }
        }
        out
    }

    // ---- snapshots, iterators, ranges ---------------------------------------------------

    /// A consistent view of every shard: every write acknowledged before the call is in it,
    /// and each cross-shard batch is in it entirely or not at all.
    pub fn snapshot(&self) -> Result<Snapshot<'_, E>> {
        if in_worker() {
            return Err(from_worker());
        }
        self.coord.health.check_reads()?;
        let _barrier = self.coord.snapshot_barrier();
        let snaps = self.engines.iter().map(|e| e.snapshot()).collect();
        Ok(Snapshot { db: self, snaps })
    }

    /// An ordered iterator over the whole database at a fresh snapshot.
    pub fn iter(&self) -> Result<DbIter<'_, E::Iter>> {
        self.snapshot()?.into_iter_opt(&IterOptions::default())
    }

    /// An ordered iterator within bounds at a fresh snapshot.
    pub fn iter_opt(&self, opts: &IterOptions) -> Result<DbIter<'_, E::Iter>> {
        self.snapshot()?.into_iter_opt(opts)
    }

    /// Every entry with `start <= key < end` (`end = None`: to the end), in key order, read at
    /// one snapshot by all shards' workers in parallel (p2KVS RANGE).
    pub fn range(&self, start: &[u8], end: Option<&[u8]>) -> Result<KvPairs> {
        self.snapshot()?.range(start, end)
    }

    /// The first `count` entries with `key >= start`, in key order, at one snapshot (p2KVS
    /// SCAN), either through the merged iterator or by parallel per-shard scans
    /// ([`ScanMode`]).
    pub fn scan(&self, start: &[u8], count: usize, mode: ScanMode) -> Result<KvPairs> {
        self.snapshot()?.scan(start, count, mode)
    }

    // ---- maintenance ------------------------------------------------------------------

    /// Writes a copy of the database as of one moment into the new directory `dest` (which
    /// must not exist): a backup that opens as a sharded database of its own. It holds every
    /// write acknowledged before the call, and each cross-shard batch entirely or not at all.
    /// Writes wait while the shards capture their state (`docs/design.md` §12.5). On error
    /// `dest` may hold a partial copy: remove it.
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<()> {
        if in_worker() {
            return Err(from_worker());
        }
        self.coord.health.check()?;
        let dest = dest.as_ref();
        if self.fs.exists(dest)? {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} already exists",
                dest.display()
            )));
        }
        let meta = ShardMeta::load(&*self.fs, &self.root)?.ok_or_else(|| {
            Error::corruption(self.root.join(crate::meta::FILE), 0, "SHARDS file is gone")
        })?;
        self.fs.create_dir_all(dest)?;
        meta.store(&*self.fs, dest)?;
        let committed = {
            // The cut of `snapshot`: no shard applies a write, no cross-shard batch is half
            // applied; a batch whose parts are all in but whose commit record is not yet
            // durable is rolled back when the checkpoint opens (its shards hold nothing
            // written after its parts, rule 4 of §12.1).
            let _barrier = self.coord.snapshot_barrier();
            let committed = self.coord.txlog.committed();
            std::thread::scope(|s| {
                let jobs: Vec<_> = self
                    .engines
                    .iter()
                    .enumerate()
                    .map(|(i, e)| s.spawn(move || e.checkpoint(&shard_dir(dest, i))))
                    .collect();
                jobs.into_iter().try_for_each(|j| {
                    j.join().unwrap_or_else(|_| {
                        Err(Error::Poisoned("shard checkpoint panicked".to_string()))
                    })
                })
            })?;
            committed
        };
        drop(TxLog::create(self.fs.clone(), dest, committed)?);
        self.fs.sync_dir(dest)?;
        if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.fs.sync_dir(parent)?;
        }
        Ok(())
    }

    /// Runs `f` on every shard's worker, in parallel, and waits for all.
    fn on_all_workers(&self, f: fn(&E) -> Result<()>) -> Result<()> {
        let mut waits = Vec::new();
        for s in 0..self.engines.len() {
            let (reply, pending) = Reply::slot();
            self.enqueue(
                s,
                Request::Job(Box::new(move |e: Result<&E>| reply.send(e.and_then(f)))),
            );
            waits.push(pending);
        }
        let mut r = Ok(());
        for w in waits {
            if let Err(e) = w.wait() {
                r = r.and(Err(e));
            }
        }
        r
    }

    /// Flushes every shard's memtable (after the requests queued before this call).
    pub fn flush(&self) -> Result<()> {
        self.on_all_workers(|e| e.flush())
    }

    /// Compacts every shard fully.
    pub fn compact(&self) -> Result<()> {
        self.on_all_workers(|e| e.compact())
    }

    /// Waits until no shard has background work pending.
    pub fn wait_idle(&self) -> Result<()> {
        for e in &self.engines {
            e.wait_idle()?;
        }
        Ok(())
    }

    /// Each shard's engine statistics.
    pub fn engine_stats(&self) -> Vec<String> {
        self.engines.iter().map(|e| e.stats()).collect()
    }

    fn stop_workers(&mut self) {
        for s in &mut self.shards {
            s.tx = None;
        }
        for s in &mut self.shards {
            if let Some(t) = s.thread.take() {
                let _ = t.join();
            }
        }
    }

    /// Finishes every queued request, stops the workers and closes every shard.
    pub fn close(mut self) -> Result<()> {
        self.stop_workers();
        let health = self.coord.health.check();
        let engines = std::mem::take(&mut self.engines);
        let mut r = Ok(());
        for e in engines {
            match Arc::try_unwrap(e) {
                Ok(e) => r = r.and(e.close()),
                Err(_) => {
                    r = r.and(Err(Error::InvalidArgument(
                        "an engine is still referenced at close".to_string(),
                    )))
                }
            }
        }
        health.and(r)
    }
}

impl<E: Engine> Drop for ShardedDb<E> {
    fn drop(&mut self) {
        self.stop_workers();
    }
}

fn open_engines<E: Engine>(
    root: &Path,
    cfg: &E::Config,
    in_doubt: &[Arc<PartsInDoubt>],
) -> Result<Vec<Arc<E>>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = in_doubt
            .iter()
            .enumerate()
            .map(|(i, p)| {
                s.spawn(move || {
                    let cfg = E::guard_filter(&E::shard_config(cfg, i)?, p.clone());
                    E::open(&shard_dir(root, i), &cfg).map(Arc::new)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Poisoned("engine open panicked".to_string())))
            })
            .collect()
    })
}

/// A consistent multi-shard view (see [`ShardedDb::snapshot`]). Reads through it run in the
/// calling thread (iterators) or on the workers (range, parallel scan).
pub struct Snapshot<'db, E: Engine> {
    db: &'db ShardedDb<E>,
    snaps: Vec<E::Snapshot>,
}

impl<'db, E: Engine> Snapshot<'db, E> {
    /// The value of `key` in this view.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_user_key(key)?;
        let s = self.db.shard_of(key);
        self.db.engines[s].get(Some(&self.snaps[s]), key)
    }

    /// Many keys in this view, in request order.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Vec<u8>>>> {
        let mut out: Vec<Result<Option<Vec<u8>>>> = (0..keys.len()).map(|_| Ok(None)).collect();
        for (s, idx) in self
            .db
            .routing
            .split(keys, self.db.engines.len())
            .into_iter()
            .enumerate()
        {
            if idx.is_empty() {
                continue;
            }
            let ks: Vec<&[u8]> = idx.iter().map(|&i| keys[i].as_ref()).collect();
            let vals = self.db.engines[s].multi_get(Some(&self.snaps[s]), &ks);
            for (i, v) in idx.into_iter().zip(vals) {
                out[i] = check_user_key(keys[i].as_ref()).and(v);
            }
        }
        out
    }

    /// An ordered iterator over this view.
    pub fn iter(&self) -> Result<DbIter<'db, E::Iter>> {
        self.iter_opt(&IterOptions::default())
    }

    /// An ordered iterator over this view, within bounds.
    pub fn iter_opt(&self, opts: &IterOptions) -> Result<DbIter<'db, E::Iter>> {
        let mut its = Vec::with_capacity(self.snaps.len());
        for (e, snap) in self.db.engines.iter().zip(&self.snaps) {
            its.push(e.iter(
                Some(snap),
                opts.lower_bound.as_deref(),
                opts.upper_bound.as_deref(),
            )?);
        }
        Ok(DbIter::new(its))
    }

    /// An ordered iterator over shard `shard`'s part of this view only (no merge with the
    /// other shards): for readers that take the view one shard at a time, such as a full
    /// sync shipping each shard's records as a run of its own.
    pub fn shard_iter(&self, shard: usize, opts: &IterOptions) -> Result<E::Iter> {
        let (Some(e), Some(snap)) = (self.db.engines.get(shard), self.snaps.get(shard)) else {
            return Err(strata_engine::Error::InvalidArgument(format!(
                "shard {shard} of {}",
                self.snaps.len()
            )));
        };
        e.iter(
            Some(snap),
            opts.lower_bound.as_deref(),
            opts.upper_bound.as_deref(),
        )
    }

    /// Number of shards this view spans.
    pub fn shard_count(&self) -> usize {
        self.snaps.len()
    }

    fn into_iter_opt(self, opts: &IterOptions) -> Result<DbIter<'db, E::Iter>> {
        self.iter_opt(opts)
    }

    /// Runs `[start, end)` up to `limit` entries on every shard's worker, in parallel, and
    /// merges the sorted results.
    fn parallel(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<KvPairs> {
        let mut waits = Vec::with_capacity(self.snaps.len());
        for (s, snap) in self.snaps.iter().enumerate() {
            let (reply, pending) = Reply::<KvPairs>::slot();
            let snap = snap.clone();
            let start = start.to_vec();
            let end = end.map(<[u8]>::to_vec);
            let job = move |e: Result<&E>| {
                let r = e.and_then(|e| {
                    let it = e.iter(Some(&snap), Some(&start), end.as_deref())?;
                    collect(it, &start, limit)
                });
                reply.send(r);
            };
            self.db.enqueue(s, Request::Job(Box::new(job)));
            waits.push(pending);
        }
        let mut all = Vec::new();
        for w in waits {
            all.extend(w.wait()?);
        }
        // Each shard's run is sorted and the key sets are disjoint: the stable sort merges runs.
        all.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(all)
    }

    /// See [`ShardedDb::range`].
    pub fn range(&self, start: &[u8], end: Option<&[u8]>) -> Result<KvPairs> {
        if let Some(end) = end {
            if end <= start {
                return Ok(Vec::new());
            }
        }
        self.parallel(start, end, usize::MAX)
    }

    /// See [`ShardedDb::scan`].
    pub fn scan(&self, start: &[u8], count: usize, mode: ScanMode) -> Result<KvPairs> {
        if count == 0 {
            return Ok(Vec::new());
        }
        match mode {
            ScanMode::Parallel => {
                let mut all = self.parallel(start, None, count)?;
                all.truncate(count);
                Ok(all)
            }
            ScanMode::Merged => {
                let mut it = self.iter()?;
                it.seek(start);
                let mut out = Vec::with_capacity(count.min(1 << 16));
                while it.valid() && out.len() < count {
                    out.push((it.key().to_vec(), it.value().to_vec()));
                    it.next();
                }
                it.status()?;
                Ok(out)
            }
        }
    }
}

/// A new sharded database is created only in a missing or empty directory: never inside a
/// single engine instance (a `CURRENT` file) or among files that are not a database's, which
/// it would mix its own with. Checked before anything is written (the lock file included).
fn refuse_foreign_dir(fs: &dyn strata_engine::io::Fs, root: &Path) -> Result<()> {
    if !fs.exists(root)? || fs.exists(&root.join(crate::meta::FILE))? {
        return Ok(());
    }
    let mut foreign: Vec<String> = fs.list(root)?.into_iter().filter(|n| n != "LOCK").collect();
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    let what = if foreign.iter().any(|n| n == "CURRENT") {
        "a single engine instance (a CURRENT file; open it with strata_engine::Db)"
    } else {
        "files that are not a Strata database"
    };
    Err(Error::InvalidArgument(format!(
        "{} holds {what}, not a sharded database ({}{}); a new sharded database needs a \
         missing or empty directory",
        root.display(),
        foreign
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
        if foreign.len() > 5 { ", ..." } else { "" }
    )))
}
