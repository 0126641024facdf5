//! Batched point lookups, run stage by stage over the whole batch (ToplingDB's MultiGet).
//!
//! Stages: memtables; then every L0 table (newest first); then each deeper level. In a table
//! stage every pending key goes through file selection, the filter and the in-memory index;
//! blocks found in the block cache are searched at once, and every block that missed the
//! cache is gathered (one read per distinct block) and submitted together through
//! [`crate::io::Fs::read_batch`] — where an io_uring or thread-pool implementation overlaps
//! them — before the batch resumes. A key whose read fails gets that error; the others go on.
//! When everything is cached no read is submitted, so a cached batch costs about as much as a
//! loop of `get`. A last stage reads every value-log pointer found, again as one batch.

use crate::db::{DbInner, SuperVersion};
use crate::error::Result;
use crate::get::{entry_for, lookup_memtables, params, Found};
use crate::io::ReadRequest;
use crate::key;
use crate::memtable::MemLookup;
use crate::options::ReadOptions;
use crate::sst::{Block, BlockHandle, Table};
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

impl Stage<'_> {
    fn file_for(&self, user_key: &[u8], seek: &[u8]) -> Option<Arc<FileMeta>> {
        match self {
            Stage::L0(f) => (key::user_key(&f.smallest) <= user_key
                && user_key <= key::user_key(&f.largest))
            .then(|| (*f).clone()),
            Stage::Level(files) => Version::find_file(files, seek).map(|i| files[i].clone()),
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
        for (i, r) in idx
            .into_iter()
            .zip(self.vlog.read_many(&sv.vlog_files, &reqs))
        {
            results[i] = Some(r.map(Some));
        }
    }

    pub(crate) fn multi_get(&self, ro: &ReadOptions, keys: &[&[u8]]) -> Vec<KeyResult> {
        // Super version before sequence number: see `vlog/mod.rs`.
        let sv = self.super_version.read().clone();
        let seq = self.read_seq(ro);
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
        let seeks: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| {
                if pending.is_empty() {
                    Vec::new()
                } else {
                    key::seek_key(k, seq)
                }
            })
            .collect();
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
            for &i in &pending {
                let (uk, seek) = (keys[i], &seeks[i]);
                let Some(f) = stage.file_for(uk, seek) else {
                    next.push(i);
                    continue;
                };
                let t = match self.tables.get(f.number) {
                    Ok(t) => t,
                    Err(e) => {
                        results[i] = Some(Err(e));
                        continue;
                    }
                };
                if !self.filter_may_contain(&t, uk) {
                    next.push(i);
                    continue;
                }
                let Some(h) = t.find_block(seek) else {
                    next.push(i);
                    continue;
                };
                if let Some(b) = t.cached_block(h) {
                    match search(&t, &b, uk, seek) {
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
                            file: &**t.file(),
                            offset,
                            len,
                        }
                    })
                    .collect();
                let raws = self.fs.read_batch(&reqs);
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
