//! Batched point lookups, run stage by stage over the whole batch (ToplingDB's MultiGet):
//! memtables, every L0 table newest first, each deeper level, then the value log. Every block
//! (and value-log record) that missed the cache is gathered and submitted together through
//! [`DbInner::read_batch`] (`Options::io_backend`, see `io/batch.rs`); a key whose read fails
//! gets that error, the others go on; a fully cached batch submits nothing. See
//! `docs/design.md` §5.4 and `docs/batched-reads.md`.
//!
//! Index and filter blocks are held in memory by each open table (`Table::open`), so they
//! cost a read only when the table cache misses; those opens happen one by one inside a stage
//! (with `max_open_files` above the number of tables they do not recur).

use crate::error::Result;
use crate::get::{entry_for, lookup_memtables, params, Found};
use crate::io::{self, IoBackend, ReadRequest};
use crate::key;
use crate::memtable::MemLookup;
use crate::options::ReadOptions;
use crate::sst::{Block, BlockHandle, Table};
use crate::state::{DbInner, SuperVersion};
use crate::stats::Counters;
use crate::version::{FileMeta, Version};
use crate::vlog::ValuePointer;
use std::collections::HashMap;
use std::sync::Arc;

type KeyResult = Result<Option<Vec<u8>>>;

/// One stage: the tables a pending key may be in at this depth.
enum Stage<'a> {
    L0(&'a Arc<FileMeta>),
    Level(&'a [Arc<FileMeta>]),
}

impl<'a> Stage<'a> {
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
        Counters::add(&self.counters.multi_gets, 1);
        Counters::add(&self.counters.multi_get_keys, keys.len() as u64);
        let (sv, seq) = self.read_view(ro);
        let p = params(ro);
        let mut results: Vec<Option<KeyResult>> = vec![None; keys.len()];
        let mut pointers: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut pending: Vec<usize> = Vec::with_capacity(keys.len());
        for (i, k) in keys.iter().enumerate() {
            match lookup_memtables(&sv, k, seq) {
                MemLookup::Found(v) => results[i] = Some(Ok(Some(v))),
                MemLookup::Pointer(v) => pointers.push((i, v)),
                MemLookup::Deleted => results[i] = Some(Ok(None)),
                MemLookup::Absent => pending.push(i),
            }
        }
        let mut seeks: Vec<Vec<u8>> = vec![Vec::new(); keys.len()];
        for &i in &pending {
            seeks[i] = key::seek_key(keys[i], seq);
        }
        let v = &sv.version;
        let stages = v.levels[0]
            .iter()
            .map(Stage::L0)
            .chain(v.levels.iter().skip(1).map(|f| Stage::Level(f)));
        for stage in stages {
            if pending.is_empty() {
                break;
            }
            let mut next = Vec::with_capacity(pending.len());
            // Distinct blocks to read, and which keys wait for each.
            let mut reads: Vec<(Arc<Table>, BlockHandle)> = Vec::new();
            let mut read_index: HashMap<(u64, u64), usize> = HashMap::new();
            let mut waiting: Vec<(usize, usize)> = Vec::new();
            // Tables of this stage already taken from the table cache: one lookup per table
            // per stage instead of one per key (an L0 stage has a single table).
            let mut open: Vec<(u64, Arc<Table>)> = Vec::new();
            for &i in &pending {
                let (uk, seek) = (keys[i], &seeks[i]);
                let Some(f) = stage.file_for(uk, seek) else {
                    next.push(i);
                    continue;
                };
                if f.tier {
                    // A mapped L0 tier table: read in place, nothing to batch.
                    match self
                        .tables
                        .tier_table(f.number)
                        .and_then(|t| Ok(t.get(uk, seq)?.map(crate::get::tier_found)))
                    {
                        Ok(None) => next.push(i),
                        Ok(Some(Found::Value(v))) => results[i] = Some(Ok(Some(v))),
                        Ok(Some(Found::Pointer(p))) => pointers.push((i, p)),
                        Ok(Some(Found::Deleted)) => results[i] = Some(Ok(None)),
                        Err(e) => results[i] = Some(Err(e)),
                    }
                    continue;
                }
                let ti = match open.iter().position(|(n, _)| *n == f.number) {
                    Some(ti) => ti,
                    None => match self.tables.get_for(f) {
                        Ok(t) => {
                            open.push((f.number, t));
                            open.len() - 1
                        }
                        Err(e) => {
                            results[i] = Some(Err(e));
                            continue;
                        }
                    },
                };
                let t = &open[ti].1;
                if !self.filter_may_contain(t, uk) {
                    next.push(i);
                    continue;
                }
                let Some(h) = t.find_block(seek) else {
                    next.push(i);
                    continue;
                };
                if let Some(b) = t.cached_block(h) {
                    match search(t, &b, uk, seek) {
                        Outcome::Done(r) => results[i] = Some(r),
                        Outcome::Pointer(v) => pointers.push((i, v)),
                        Outcome::NotHere => next.push(i),
                    }
                    continue;
                }
                let slot = *read_index.entry((f.number, h.offset)).or_insert_with(|| {
                    reads.push((t.clone(), h));
                    reads.len() - 1
                });
                waiting.push((i, slot));
            }
            if !reads.is_empty() {
                let reqs: Vec<ReadRequest<'_>> = reads
                    .iter()
                    .map(|(t, h)| {
                        let (offset, len) = t.block_read_range(*h);
                        ReadRequest {
                            file: t.file(),
                            offset,
                            len,
                        }
                    })
                    .collect();
                let raws = self.read_batch(&reqs);
                let blocks: Vec<Result<Arc<Block>>> = raws
                    .into_iter()
                    .zip(&reads)
                    .map(|(raw, (t, h))| raw.and_then(|r| t.decode_block(*h, r, p)))
                    .collect();
                for (i, slot) in waiting {
                    let (t, _) = &reads[slot];
                    match &blocks[slot] {
                        Err(e) => results[i] = Some(Err(e.clone())),
                        Ok(b) => match search(t, b, keys[i], &seeks[i]) {
                            Outcome::Done(r) => results[i] = Some(r),
                            Outcome::Pointer(v) => pointers.push((i, v)),
                            Outcome::NotHere => next.push(i),
                        },
                    }
                }
            }
            next.sort_unstable();
            pending = next;
        }
        self.resolve_pointers(&sv, keys, pointers, &mut results);
        results.into_iter().map(|r| r.unwrap_or(Ok(None))).collect()
    }
}
