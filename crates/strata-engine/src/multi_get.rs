//! Batched point lookups (ToplingDB's MultiGet, pipelined): each key walks memtables, every
//! L0 table newest first and each deeper level until it is answered; a key whose block
//! misses the cache waits for one read of that block (keys wanting the same block share it)
//! and goes on from there when the block arrives. The reads of all keys in flight form one
//! [`ReadStream`] run by [`io::read_stream`] (`Options::io_backend`, see `io/batch.rs`): on
//! io_uring a block read is submitted as soon as an earlier one completes, so a caller that
//! hands over many batches at once ([`DbInner::multi_get_batches`]) keeps the device queue
//! full instead of draining it at the end of every batch. Value-log records are read last,
//! batch by batch. A key whose read fails gets that error, the others go on; a fully cached
//! batch submits nothing. See `docs/design.md` §5.4 and `docs/batched-reads.md`.
//!
//! Each batch is a consistent snapshot: it takes its own read view when it is admitted (the
//! stream admits the next batch when it has no read ready to submit) and every key of it
//! reads that view. Index and filter blocks are held in memory by each open table
//! (`Table::open`), so they cost a read only when the table cache misses.

use crate::error::Result;
use crate::get::{entry_for, lookup_memtables, params, Found};
use crate::io::{self, IoBackend, ReadRequest, ReadStream, StreamRead};
use crate::key::{self, SeqNo};
use crate::memtable::MemLookup;
use crate::options::ReadOptions;
use crate::sst::{Block, BlockHandle, ReadParams, Table};
use crate::state::{DbInner, SuperVersion};
use crate::stats::Counters;
use crate::version::{FileMeta, Version};
use crate::vlog::ValuePointer;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

type KeyResult = Result<Option<Vec<u8>>>;

/// One stage: the tables a pending key may be in at this depth.
enum Stage<'a> {
    L0(&'a Arc<FileMeta>),
    Level(&'a [Arc<FileMeta>]),
}

impl<'a> Stage<'a> {
    /// Stage `s` of `v`: its L0 tables one by one, newest first, then each deeper level.
    fn of(v: &'a Version, s: usize) -> Stage<'a> {
        let l0 = &v.levels[0];
        if s < l0.len() {
            Stage::L0(&l0[s])
        } else {
            Stage::Level(&v.levels[s - l0.len() + 1])
        }
    }

    fn count(v: &Version) -> usize {
        v.levels[0].len() + v.levels.len().saturating_sub(1)
    }

    fn file_for(&self, user_key: &[u8], seek: &[u8]) -> Option<&'a FileMeta> {
        match *self {
            Stage::L0(f) => (key::user_key(&f.smallest) <= user_key
                && user_key <= key::user_key(&f.largest))
            .then_some(&**f),
            Stage::Level(files) => Version::find_file(files, seek).map(|i| &*files[i]),
        }
    }
}

/// What searching one block for one key gave.
enum Outcome {
    Done(KeyResult),
    /// An encoded value pointer, resolved by the last stage.
    Pointer(Vec<u8>),
    NotHere,
}

fn search(t: &Table, block: &Arc<Block>, user_key: &[u8], seek: &[u8]) -> Outcome {
    match block.get(seek, |k, v| entry_for(t, user_key, k, v)) {
        Ok(Some(Ok(Some(Found::Value(v))))) => Outcome::Done(Ok(Some(v))),
        Ok(Some(Ok(Some(Found::Pointer(p))))) => Outcome::Pointer(p),
        Ok(Some(Ok(Some(Found::Deleted)))) => Outcome::Done(Ok(None)),
        Ok(Some(Ok(None))) | Ok(None) => Outcome::NotHere,
        Ok(Some(Err(e))) | Err(e) => Outcome::Done(Err(e)),
    }
}

/// What one stage says about one key.
enum Step {
    Answer(Outcome),
    /// Not in this stage: try the next.
    Next,
    /// The key's block in table `number` is not cached: it must be read.
    Read(u64, Arc<Table>, BlockHandle),
}

/// Looks `user_key` up in stage `s` of `v` as far as memory allows.
fn probe(db: &DbInner, v: &Version, s: usize, user_key: &[u8], seek: &[u8], seq: SeqNo) -> Step {
    let Some(f) = Stage::of(v, s).file_for(user_key, seek) else {
        return Step::Next;
    };
    if f.tier {
        // A mapped L0 tier table: read in place, nothing to batch.
        return match db
            .tables
            .tier_table(f.number)
            .and_then(|t| Ok(t.get(user_key, seq)?.map(crate::get::tier_found)))
        {
            Ok(None) => Step::Next,
            Ok(Some(Found::Value(v))) => Step::Answer(Outcome::Done(Ok(Some(v)))),
            Ok(Some(Found::Pointer(p))) => Step::Answer(Outcome::Pointer(p)),
            Ok(Some(Found::Deleted)) => Step::Answer(Outcome::Done(Ok(None))),
            Err(e) => Step::Answer(Outcome::Done(Err(e))),
        };
    }
    let t = match db.tables.get_for(f) {
        Ok(t) => t,
        Err(e) => return Step::Answer(Outcome::Done(Err(e))),
    };
    if !db.filter_may_contain(&t, user_key) {
        return Step::Next;
    }
    let Some(h) = t.find_block(seek) else {
        return Step::Next;
    };
    match t.cached_block(h) {
        Some(b) => match search(&t, &b, user_key, seek) {
            Outcome::NotHere => Step::Next,
            o => Step::Answer(o),
        },
        None => Step::Read(f.number, t, h),
    }
}

/// One batch of keys: its own read view, taken when it was admitted.
struct Batch<'k> {
    keys: &'k [&'k [u8]],
    sv: Arc<SuperVersion>,
    seq: SeqNo,
    seeks: Vec<Vec<u8>>,
    results: Vec<Option<KeyResult>>,
    pointers: Vec<(usize, Vec<u8>)>,
}

/// A key waiting for a block: batch, key, and the stage the block belongs to.
#[derive(Clone, Copy)]
struct Waiter {
    batch: usize,
    key: usize,
    stage: usize,
}

/// A block read given out (or about to be) and the keys waiting for it.
struct BlockRead {
    number: u64,
    table: Arc<Table>,
    handle: BlockHandle,
    waiters: Vec<Waiter>,
}

/// The lookups of every admitted batch, as the stream of block reads they need.
struct Lookups<'a, 'k> {
    db: &'a DbInner,
    ro: &'a ReadOptions,
    p: ReadParams,
    input: &'k [&'k [&'k [u8]]],
    batches: Vec<Batch<'k>>,
    /// Block reads by tag; `None` once its result came back (the tag is then reused).
    reads: Vec<Option<BlockRead>>,
    free: Vec<usize>,
    /// Reads not yet back, by (table, block offset): a key wanting a block already asked
    /// for waits on that read rather than reading it again.
    by_block: HashMap<(u64, u64), usize>,
    /// Reads not given out yet.
    ready: VecDeque<usize>,
}

impl<'a, 'k> Lookups<'a, 'k> {
    /// Takes the next batch's read view, answers what its memtables hold and walks its other
    /// keys as far as the cache allows.
    fn admit(&mut self) {
        let b = self.batches.len();
        let keys = self.input[b];
        let c = &self.db.counters;
        Counters::add(&c.multi_gets, 1);
        Counters::add(&c.multi_get_keys, keys.len() as u64);
        let (sv, seq) = self.db.read_view(self.ro);
        let sv = arc_swap::Guard::into_inner(sv);
        let mut batch = Batch {
            keys,
            seq,
            seeks: vec![Vec::new(); keys.len()],
            results: vec![None; keys.len()],
            pointers: Vec::new(),
            sv,
        };
        let mut pending = Vec::with_capacity(keys.len());
        for (i, k) in keys.iter().enumerate() {
            match lookup_memtables(&batch.sv, k, seq) {
                MemLookup::Found(v) => batch.results[i] = Some(Ok(Some(v))),
                MemLookup::Pointer(v) => batch.pointers.push((i, v)),
                MemLookup::Deleted => batch.results[i] = Some(Ok(None)),
                MemLookup::Absent => {
                    batch.seeks[i] = key::seek_key(k, seq);
                    pending.push(i);
                }
            }
        }
        self.batches.push(batch);
        for key in pending {
            self.advance(Waiter {
                batch: b,
                key,
                stage: 0,
            });
        }
    }

    /// Walks key `w` through the stages from `w.stage` until it is answered, needs a block
    /// read (it then waits for it), or has no stage left (it is absent).
    fn advance(&mut self, w: Waiter) {
        let batch = &mut self.batches[w.batch];
        let v = Arc::clone(&batch.sv.version);
        let (uk, seek) = (batch.keys[w.key], &batch.seeks[w.key]);
        for s in w.stage..Stage::count(&v) {
            match probe(self.db, &v, s, uk, seek, batch.seq) {
                Step::Next => continue,
                Step::Answer(Outcome::Done(r)) => batch.results[w.key] = Some(r),
                Step::Answer(Outcome::Pointer(p)) => batch.pointers.push((w.key, p)),
                Step::Answer(Outcome::NotHere) => unreachable!("probe turns NotHere into Next"),
                Step::Read(number, table, handle) => {
                    let w = Waiter { stage: s, ..w };
                    if let Some(&tag) = self.by_block.get(&(number, handle.offset)) {
                        if let Some(r) = &mut self.reads[tag] {
                            r.waiters.push(w);
                            return;
                        }
                    }
                    let read = Some(BlockRead {
                        number,
                        table,
                        handle,
                        waiters: vec![w],
                    });
                    let tag = match self.free.pop() {
                        Some(t) => {
                            self.reads[t] = read;
                            t
                        }
                        None => {
                            self.reads.push(read);
                            self.reads.len() - 1
                        }
                    };
                    self.by_block.insert((number, handle.offset), tag);
                    self.ready.push_back(tag);
                }
            }
            return;
        }
    }
}

impl ReadStream for Lookups<'_, '_> {
    fn next_read(&mut self) -> Option<(usize, StreamRead)> {
        loop {
            if let Some(tag) = self.ready.pop_front() {
                let r = self.reads[tag]
                    .as_ref()
                    .expect("a ready read is given out once");
                let (offset, len) = r.table.block_read_range(r.handle);
                let file = Arc::clone(r.table.file());
                return Some((tag, StreamRead { file, offset, len }));
            }
            if self.batches.len() == self.input.len() {
                return None;
            }
            self.admit();
        }
    }

    fn read_done(&mut self, tag: usize, raw: Result<Vec<u8>>) {
        let Some(r) = self.reads.get_mut(tag).and_then(Option::take) else {
            debug_assert!(false, "a result for block read {tag}, which is not out");
            return;
        };
        self.free.push(tag);
        self.by_block.remove(&(r.number, r.handle.offset));
        let block = raw.and_then(|raw| r.table.decode_block(r.handle, raw, self.p));
        for w in r.waiters {
            let batch = &mut self.batches[w.batch];
            match &block {
                // Corruption or a failed read: this key's answer, never data.
                Err(e) => batch.results[w.key] = Some(Err(e.clone())),
                Ok(b) => {
                    let (uk, seek) = (batch.keys[w.key], &batch.seeks[w.key]);
                    match search(&r.table, b, uk, seek) {
                        Outcome::Done(res) => batch.results[w.key] = Some(res),
                        Outcome::Pointer(p) => batch.pointers.push((w.key, p)),
                        Outcome::NotHere => self.advance(Waiter {
                            stage: w.stage + 1,
                            ..w
                        }),
                    }
                }
            }
        }
    }
}

impl DbInner {
    /// Reads many ranges at once on the configured backend, counting the batch in the stats.
    /// Results in request order, one per request. The hook for every batched stage: data
    /// blocks here, value-log records with key-value separation.
    pub(crate) fn read_batch(&self, reqs: &[ReadRequest<'_>]) -> Vec<Result<Vec<u8>>> {
        let (out, ran) = io::read_batch(self.opts.io_backend, &*self.fs, reqs);
        let c = &self.counters;
        let batches = match ran {
            IoBackend::Uring => &c.read_batches_uring,
            IoBackend::Threads => &c.read_batches_threads,
            IoBackend::Auto | IoBackend::Sync => &c.read_batches_sync,
        };
        Counters::add(batches, 1);
        Counters::add(&c.batched_reads, reqs.len() as u64);
        out
    }

    /// Last stage: every value pointer found is read from the value log in one batch.
    fn resolve_pointers(
        &self,
        sv: &SuperVersion,
        keys: &[&[u8]],
        pointers: Vec<(usize, Vec<u8>)>,
        results: &mut [Option<KeyResult>],
    ) {
        let mut reqs = Vec::with_capacity(pointers.len());
        let mut idx = Vec::with_capacity(pointers.len());
        for (i, raw) in pointers {
            match ValuePointer::decode_or_corrupt(&raw, "<lsm value pointer>") {
                Ok(ptr) => {
                    reqs.push((keys[i], ptr));
                    idx.push(i);
                }
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        if reqs.is_empty() {
            return;
        }
        for (i, r) in idx.into_iter().zip(
            self.vlog
                .read_many(&sv.vlog_files, &reqs, false, |r| self.read_batch(r)),
        ) {
            results[i] = Some(r.map(Some));
        }
    }

    pub(crate) fn multi_get(&self, ro: &ReadOptions, keys: &[&[u8]]) -> Vec<KeyResult> {
        // One batch: every block it misses is asked for at once (the ring feeds in what
        // exceeds its entries as reads complete).
        let mut out = self.multi_get_batches(ro, &[keys], usize::MAX);
        out.pop().unwrap_or_default()
    }

    /// Looks up every batch, each against its own snapshot, keeping at most
    /// `max_reads_in_flight` block reads in flight across batch boundaries: the next batch
    /// is started whenever no read of the earlier ones is ready to go, so the device queue
    /// stays full until the last batch. Results per batch, in request order.
    pub(crate) fn multi_get_batches(
        &self,
        ro: &ReadOptions,
        batches: &[&[&[u8]]],
        max_reads_in_flight: usize,
    ) -> Vec<Vec<KeyResult>> {
        let mut l = Lookups {
            db: self,
            ro,
            p: params(ro),
            input: batches,
            batches: Vec::with_capacity(batches.len()),
            reads: Vec::new(),
            free: Vec::new(),
            by_block: HashMap::new(),
            ready: VecDeque::new(),
        };
        let ran = io::read_stream(self.opts.io_backend, &*self.fs, &mut l, max_reads_in_flight);
        let c = &self.counters;
        Counters::add(&c.read_batches_uring, ran.uring_batches);
        Counters::add(&c.read_batches_threads, ran.thread_batches);
        Counters::add(&c.read_batches_sync, ran.sync_batches);
        Counters::add(&c.batched_reads, ran.reads);
        debug_assert_eq!(l.batches.len(), batches.len(), "every batch admitted");
        debug_assert!(l.reads.iter().all(Option::is_none), "every read answered");
        l.batches
            .into_iter()
            .map(|mut b| {
                let pointers = std::mem::take(&mut b.pointers);
                self.resolve_pointers(&b.sv, b.keys, pointers, &mut b.results);
                b.results
                    .into_iter()
                    .map(|r| r.unwrap_or(Ok(None)))
                    .collect()
            })
            .collect()
    }
}
