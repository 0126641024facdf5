//! [`DbIter`]: one ordered iterator over every shard, merging the shards' iterators at one
//! multi-shard snapshot. Hash partitioning makes the shards' key sets disjoint, so the merge
//! never meets the same key twice: the current entry is the smallest (forward) or largest
//! (reverse) current key among the shards. Changing direction repositions the other shards
//! around the current key. System keys (`undo.rs`) are skipped.

use crate::engine::EngineIter;
use crate::undo::{is_system_key, SYS_END, SYS_PREFIX};
use std::marker::PhantomData;
use strata_engine::{Error, Result};

/// One shard's iterator, hiding the system range.
struct ShardIter<I> {
    it: I,
}

impl<I: EngineIter> ShardIter<I> {
    fn skip_forward(&mut self) {
        if self.it.valid() && is_system_key(self.it.key()) {
            self.it.seek(SYS_END);
        }
    }
    fn skip_backward(&mut self) {
        if self.it.valid() && is_system_key(self.it.key()) {
            self.it.seek(SYS_PREFIX);
            if self.it.valid() {
                self.it.prev();
            } else {
                self.it.seek_to_last();
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Forward,
    Reverse,
}

/// Ordered iterator over the whole database (see [`crate::ShardedDb::iter`]), moved with the
/// methods of [`EngineIter`] (`use strata::EngineIter`). Check [`EngineIter::status`] when it
/// becomes invalid: a shard's read error ends the iteration.
pub struct DbIter<'a, I> {
    shards: Vec<ShardIter<I>>,
    cur: Option<usize>,
    dir: Dir,
    err: Option<Error>,
    _db: PhantomData<&'a ()>,
}

impl<'a, I: EngineIter> DbIter<'a, I> {
    pub(crate) fn new(its: Vec<I>) -> Self {
        DbIter {
            shards: its.into_iter().map(|it| ShardIter { it }).collect(),
            cur: None,
            dir: Dir::Forward,
            err: None,
            _db: PhantomData,
        }
    }

    /// Picks the current shard; an error in any shard ends the iteration.
    fn settle(&mut self) {
        if self.err.is_none() {
            for s in &self.shards {
                if let Err(e) = s.it.status() {
                    self.err = Some(e);
                    break;
                }
            }
        }
        if self.err.is_some() {
            self.cur = None;
            return;
        }
        let mut best: Option<usize> = None;
        for (i, s) in self.shards.iter().enumerate() {
            if !s.it.valid() {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(b) => {
                    let better = match self.dir {
                        Dir::Forward => s.it.key() < self.shards[b].it.key(),
                        Dir::Reverse => s.it.key() > self.shards[b].it.key(),
                    };
                    Some(if better { i } else { b })
                }
            };
        }
        self.cur = best;
    }
}

impl<I: EngineIter> EngineIter for DbIter<'_, I> {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    /// The current key. Panics when not `valid()`.
    fn key(&self) -> &[u8] {
        let i = self.cur.expect("key() on an invalid iterator");
        self.shards[i].it.key()
    }

    /// The current value. Panics when not `valid()`.
    fn value(&self) -> &[u8] {
        let i = self.cur.expect("value() on an invalid iterator");
        self.shards[i].it.value()
    }

    /// The first error met, if any.
    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn seek_to_first(&mut self) {
        self.dir = Dir::Forward;
        for s in &mut self.shards {
            s.it.seek_to_first();
            s.skip_forward();
        }
        self.settle();
    }

    fn seek_to_last(&mut self) {
        self.dir = Dir::Reverse;
        for s in &mut self.shards {
            s.it.seek_to_last();
            s.skip_backward();
        }
        self.settle();
    }

    /// Moves to the first key >= `key`.
    fn seek(&mut self, key: &[u8]) {
        self.dir = Dir::Forward;
        for s in &mut self.shards {
            s.it.seek(key);
            s.skip_forward();
        }
        self.settle();
    }

    /// Moves to the last key <= `key`.
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.dir = Dir::Reverse;
        for s in &mut self.shards {
            s.it.seek_for_prev(key);
            s.skip_backward();
        }
        self.settle();
    }

    /// Moves to the next key. Panics when not `valid()`.
    fn next(&mut self) {
        let c = self.cur.expect("next() on an invalid iterator");
        if self.dir == Dir::Reverse {
            // Every other shard sits at or before its last key < current; move each to its
            // first key > current (keys are disjoint across shards, so seek lands past it).
            let key = self.key().to_vec();
            for (i, s) in self.shards.iter_mut().enumerate() {
                if i != c {
                    s.it.seek(&key);
                    s.skip_forward();
                }
            }
            self.dir = Dir::Forward;
        }
        let s = &mut self.shards[c];
        s.it.next();
        s.skip_forward();
        self.settle();
    }

    /// Moves to the previous key. Panics when not `valid()`.
    fn prev(&mut self) {
        let c = self.cur.expect("prev() on an invalid iterator");
        if self.dir == Dir::Forward {
            let key = self.key().to_vec();
            for (i, s) in self.shards.iter_mut().enumerate() {
                if i != c {
                    s.it.seek_for_prev(&key);
                    s.skip_backward();
                }
            }
            self.dir = Dir::Reverse;
        }
        let s = &mut self.shards[c];
        s.it.prev();
        s.skip_backward();
        self.settle();
    }
}

/// Collects `[start, end)` (or up to `limit` entries) from one shard's iterator, skipping
/// system keys. Runs on the shard's worker for `range` and parallel `scan`.
pub(crate) fn collect<I: EngineIter>(
    it: I,
    start: &[u8],
    limit: usize,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut s = ShardIter { it };
    s.it.seek(start);
    s.skip_forward();
    let mut out = Vec::new();
    while out.len() < limit && s.it.valid() {
        out.push((s.it.key().to_vec(), s.it.value().to_vec()));
        s.it.next();
        s.skip_forward();
    }
    s.it.status()?;
    Ok(out)
}
