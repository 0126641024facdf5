//! Code run on a shard's worker ([`crate::ShardedDb::exec`]): the p2KVS worker executing a
//! caller's read-modify-write instead of a plain put or get, so that the worker alone reads
//! and writes its shard while it runs, and consecutive executions share one engine write.
//!
//! A worker merges consecutive queued executions into a *group* (up to `max_batch`, as it
//! merges writes): it runs each closure in queue order against one [`ShardTxn`], whose reads
//! see the engine plus the writes of the earlier closures of the group, and whose writes are
//! buffered; then it applies the group's writes as one engine write batch (synced once if any
//! closure asked for sync), and only then runs the closures' completions with the outcome of
//! that write. A closure therefore never waits on I/O of other closures' writes, and no
//! completion reports success for a write that did not happen. The keys the closures declare
//! they will read are fetched first, for the whole group, with one engine `multi_get` (so
//! consecutive point reads of many callers become one batched read, with real I/O
//! concurrency when they miss the caches). See `docs/design.md` §11.2.

use crate::batch::Op;
use crate::engine::{Engine, EngineBatch, EngineIter};
use crate::reply::Callback;
use crate::undo::{check_user_key, check_value};
use std::collections::HashMap;
use std::sync::Arc;
use strata_engine::Result;

/// Writes a group keeps before it indexes them by key: up to this many, a lookup compares
/// the keys of the group's writes, newest first, which costs less than hashing the key for
/// a map (a pipeline's or a worker group's handful of commands per shard).
const SCAN_WRITES: usize = 16;

/// The shard as a closure run by [`crate::ShardedDb::exec`] sees it.
pub struct ShardTxn<E: Engine> {
    shard: usize,
    engine: Arc<E>,
    /// Where the latest buffered write of each key this group wrote is in `ops` (the value
    /// is kept once, in `ops`); built only once the group has more than [`SCAN_WRITES`]
    /// writes, empty before (a lookup then scans `ops`).
    overlay: HashMap<Vec<u8>, usize>,
    /// Values read for the group before its closures ran (their declared reads, fetched with
    /// one engine `multi_get`); below the overlay.
    prefetched: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// The group's writes, in order.
    ops: Vec<Op>,
    sync: bool,
}

impl<E: Engine> ShardTxn<E> {
    pub(crate) fn new(shard: usize, engine: Arc<E>) -> Self {
        ShardTxn {
            shard,
            engine,
            overlay: HashMap::new(),
            prefetched: HashMap::new(),
            ops: Vec::new(),
            sync: false,
        }
    }

    /// The shard this runs on.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// The value of `key`: this group's latest write of it, else the engine's.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.known(key) {
            Some(v) => Ok(v.map(<[u8]>::to_vec)),
            None => self.engine.get(None, key),
        }
    }

    /// What the group already knows of `key`: its own write, else a prefetched value
    /// (`Some(None)`: known absent).
    fn known(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        match self.latest(key) {
            Some(at) => Some(self.ops[at].value()),
            None => self.prefetched.get(key).map(Option::as_deref),
        }
    }

    /// Where the group's latest write of `key` is in `ops`.
    fn latest(&self, key: &[u8]) -> Option<usize> {
        if self.ops.len() <= SCAN_WRITES {
            self.ops.iter().rposition(|op| op.key() == key)
        } else {
            self.overlay.get(key).copied()
        }
    }

    /// Reads `keys` with one engine `multi_get` (io_uring on Strata's engine when they are
    /// not cached), before any closure of the group runs and writes. A key whose read failed
    /// is not kept: the closure's own read reports the error.
    pub(crate) fn prefetch(&mut self, keys: Vec<Vec<u8>>) {
        let mut keys = keys;
        keys.sort_unstable();
        keys.dedup();
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let values = self.engine.multi_get(None, &refs);
        drop(refs);
        for (k, v) in keys.into_iter().zip(values) {
            if let Ok(v) = v {
                self.prefetched.insert(k, v);
            }
        }
    }

    /// Values of `keys`, in order; keys this group did not write are read with one engine
    /// `multi_get`.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Vec<u8>>>> {
        let missing: Vec<&[u8]> = keys
            .iter()
            .map(|k| k.as_ref())
            .filter(|k| self.known(k).is_none())
            .collect();
        let mut from_engine = self.engine.multi_get(None, &missing).into_iter();
        keys.iter()
            .map(|k| match self.known(k.as_ref()) {
                Some(v) => Ok(v.map(<[u8]>::to_vec)),
                None => from_engine.next().unwrap_or_else(|| {
                    Err(strata_engine::Error::Poisoned(
                        "engine multi_get returned fewer results than keys".to_string(),
                    ))
                }),
            })
            .collect()
    }

    /// Visits the records of `[lower, upper)` in key order (descending when `reverse`) as
    /// this group sees them: the engine's, with the group's own writes over them (a key the
    /// group deleted is skipped), until `f` returns false. For the members of a collection,
    /// which live in one shard.
    pub fn scan(
        &self,
        lower: &[u8],
        upper: &[u8],
        reverse: bool,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        // Each key the group wrote in the range, once, with its latest write.
        let mut mine: Vec<(&[u8], Option<&[u8]>)> = self
            .ops
            .iter()
            .enumerate()
            .filter(|(at, op)| {
                let k = op.key();
                k >= lower && k < upper && self.latest(k) == Some(*at)
            })
            .map(|(_, op)| (op.key(), op.value()))
            .collect();
        mine.sort_unstable_by(|a, b| a.0.cmp(b.0));
        if reverse {
            mine.reverse();
        }
        let mut it = self.engine.iter(None, Some(lower), Some(upper))?;
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let mut mine = mine.into_iter().peekable();
        loop {
            // Which comes next in scan order: the group's write, the engine's record, or
            // both (the same key: the group's write hides the engine's record).
            let (take_mine, same) = match (it.valid(), mine.peek()) {
                (false, None) => break,
                (false, Some(_)) => (true, false),
                (true, None) => (false, false),
                (true, Some((m, _))) => {
                    let ord = m.cmp(&it.key());
                    let first = if reverse { ord.is_gt() } else { ord.is_lt() };
                    (first || ord.is_eq(), ord.is_eq())
                }
            };
            if take_mine {
                let Some((k, v)) = mine.next() else { break };
                if same {
                    if reverse {
                        it.prev();
                    } else {
                        it.next();
                    }
                }
                if let Some(v) = v {
                    if !f(k, v) {
                        break;
                    }
                }
            } else {
                if !f(it.key(), it.value()) {
                    break;
                }
                if reverse {
                    it.prev();
                } else {
                    it.next();
                }
            }
        }
        it.status()
    }

    /// Buffers a put; it reaches the engine with the group's write batch.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_owned(key.to_vec(), value.to_vec())
    }

    /// [`ShardTxn::put`] of a key and value the caller built for it (kept, not copied).
    pub fn put_owned(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        check_user_key(&key)?;
        check_value(&value)?;
        self.note(&key);
        self.ops.push(Op::Put(key, value));
        Ok(())
    }

    /// Buffers a delete.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        check_user_key(key)?;
        self.note(key);
        self.ops.push(Op::Delete(key.to_vec()));
        Ok(())
    }

    /// Points `key`'s overlay entry at the write about to be pushed (a key written again
    /// costs no new entry).
    fn note(&mut self, key: &[u8]) {
        let at = self.ops.len();
        if at < SCAN_WRITES {
            return; // still found by scanning
        }
        if at == SCAN_WRITES {
            self.index();
        }
        match self.overlay.get_mut(key) {
            Some(i) => *i = at,
            None => {
                self.overlay.insert(key.to_vec(), at);
            }
        }
    }

    /// Builds the overlay from the group's writes (a group past [`SCAN_WRITES`] writes).
    fn index(&mut self) {
        self.overlay.clear();
        for (at, op) in self.ops.iter().enumerate() {
            self.overlay.insert(op.key().to_vec(), at);
        }
    }

    /// A point in this group's writes that [`ShardTxn::rollback_to`] can return to.
    pub fn savepoint(&self) -> usize {
        self.ops.len()
    }

    /// Drops the writes buffered since `savepoint` (a closure that found it must not run
    /// here after all); the writes before it stay. Rebuilding the overlay walks the group's
    /// writes once: this is the rare path.
    pub fn rollback_to(&mut self, savepoint: usize) {
        if savepoint >= self.ops.len() {
            return;
        }
        self.ops.truncate(savepoint);
        self.overlay.clear();
        if self.ops.len() > SCAN_WRITES {
            self.index();
        }
    }

    /// Asks for the group's write to be synced to the WAL before any completion runs.
    pub fn sync(&mut self) {
        self.sync = true;
    }

    /// Moves the transaction out, leaving an empty one of the same shard in its place: for a
    /// closure that must hold it by value while it runs (in a thread-local, say). Assign it
    /// back before the closure returns, or its writes are lost.
    pub fn take(&mut self) -> ShardTxn<E> {
        let empty = ShardTxn::new(self.shard, self.engine.clone());
        std::mem::replace(self, empty)
    }

    /// Whether this group has buffered writes.
    pub fn has_writes(&self) -> bool {
        !self.ops.is_empty()
    }

    pub(crate) fn into_batch(self, extra_deletes: Vec<Vec<u8>>) -> (E::Batch, bool) {
        // Sized once: a record takes its key and value and a few bytes of lengths.
        let bytes = self
            .ops
            .iter()
            .map(|op| op.key().len() + op.value().map_or(0, <[u8]>::len) + 11)
            .sum::<usize>()
            + extra_deletes.iter().map(|k| k.len() + 6).sum::<usize>();
        let mut b = E::Batch::with_capacity(bytes);
        for op in &self.ops {
            match op {
                Op::Put(k, v) => b.put(k, v),
                Op::Delete(k) => b.delete(k),
            }
        }
        for k in &extra_deletes {
            b.delete(k);
        }
        (b, self.sync)
    }
}

/// An execution as queued: the closure and the keys it will read (fetched for the whole
/// group with one `multi_get` before the group's closures run).
pub(crate) struct Exec<E: Engine> {
    pub f: ExecFn<E>,
    pub reads: Vec<Vec<u8>>,
}

/// A closure run on a worker with the group's transaction (or, without running anything,
/// with the error that stopped the database). It returns the completion to run once the
/// group's writes are applied, with the outcome of that write.
pub type ExecFn<E> = Box<dyn FnOnce(Result<&mut ShardTxn<E>>) -> Option<Callback<()>> + Send>;
