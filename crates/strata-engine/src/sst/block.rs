//! Reads one block written by [`super::block_builder::BlockBuilder`].
//!
//! A [`Block`] owns its uncompressed bytes and is shared (`Arc`) between the block cache and
//! iterators. Construction checks the restart array; every entry decode is bounds-checked, so
//! no byte sequence can make a block panic: bad bytes turn into [`Error::Corruption`] naming
//! the file and offset. Specification: `docs/format/sstable.md`.

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::varint;
use std::cell::Cell;
use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

/// A decoded block: entries, then the restart array.
pub struct Block {
    data: Vec<u8>,
    /// Start of the restart array, i.e. the end of the entries.
    restarts_off: usize,
    num_restarts: usize,
    file: Arc<Path>,
    file_offset: u64,
    compressed: bool,
}

/// A decoding failure inside a block: byte position and what was wrong.
#[derive(Clone, Copy, Debug)]
struct Bad {
    pos: usize,
    reason: &'static str,
}

/// One decoded entry header.
#[derive(Clone, Copy)]
struct Entry {
    shared: usize,
    key_off: usize,
    key_end: usize,
    val_end: usize,
}

thread_local! {
    /// Key buffer of [`Block::get`], so that point reads do not allocate.
    static GET_KEY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl Block {
    /// Wraps `data` (uncompressed block bytes) read from `file_offset` of `file`. Fails with
    /// [`Error::Corruption`] unless the restart array is in bounds, starts at 0, is strictly
    /// increasing and points inside the entries.
    pub fn new(
        data: Vec<u8>,
        file: Arc<Path>,
        file_offset: u64,
        compressed: bool,
    ) -> Result<Block> {
        let mut block = Block {
            data,
            restarts_off: 0,
            num_restarts: 0,
            file,
            file_offset,
            compressed,
        };
        let len = block.data.len();
        if len < 4 {
            return Err(block.corruption(Bad {
                pos: 0,
                reason: "block shorter than its restart count",
            }));
        }
        let n = block.u32_at(len - 4) as usize;
        let array = n.checked_mul(4).and_then(|a| a.checked_add(4));
        match array {
            Some(a) if n > 0 && a <= len => block.restarts_off = len - a,
            _ => {
                return Err(block.corruption(Bad {
                    pos: len - 4,
                    reason: "restart count does not fit in the block",
                }))
            }
        }
        block.num_restarts = n;
        let mut prev = 0usize;
        for i in 0..n {
            let r = block.restart(i);
            let ok = if i == 0 {
                r == 0
            } else {
                r > prev && r < block.restarts_off
            };
            if !ok || (r >= block.restarts_off && block.restarts_off > 0) {
                return Err(block.corruption(Bad {
                    pos: block.restarts_off + 4 * i,
                    reason: "restart offset out of order or out of bounds",
                }));
            }
            prev = r;
        }
        Ok(block)
    }

    /// An iterator over this block's entries.
    pub fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter::new(Arc::clone(self))
    }

    /// Finds the first entry whose internal key is `>= seek_ikey` and returns `f(key, value)`;
    /// `None` if every key of the block is smaller.
    pub fn get<R>(
        self: &Arc<Self>,
        seek_ikey: &[u8],
        f: impl FnOnce(&[u8], &[u8]) -> R,
    ) -> Result<Option<R>> {
        let mut key = GET_KEY.with(Cell::take);
        key.clear();
        let found = self.find_restart(seek_ikey).and_then(|r| {
            let mut p = self.restart(r);
            while p < self.restarts_off {
                let e = self.decode_entry(p)?;
                self.read_key(&e, &mut key)?;
                if compare_internal(&key, seek_ikey) != Ordering::Less {
                    return Ok(Some((e.key_end, e.val_end)));
                }
                p = e.val_end;
            }
            Ok(None)
        });
        let out = match found {
            Ok(Some((vs, ve))) => Ok(Some(f(&key, &self.data[vs..ve]))),
            Ok(None) => Ok(None),
            Err(b) => Err(self.corruption(b)),
        };
        if key.capacity() <= 4096 {
            GET_KEY.with(|c| c.set(key));
        }
        out
    }

    /// Bytes of the block (uncompressed, restart array included).
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// Offset of the block in its file.
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }

    #[inline]
    fn u32_at(&self, p: usize) -> u32 {
        let d = &self.data;
        u32::from_le_bytes([d[p], d[p + 1], d[p + 2], d[p + 3]])
    }

    /// Offset of restart point `i`; `i < num_restarts`, validated at construction.
    #[inline]
    fn restart(&self, i: usize) -> usize {
        self.u32_at(self.restarts_off + 4 * i) as usize
    }

    /// Decodes the header of the entry at `p`.
    #[inline]
    fn decode_entry(&self, p: usize) -> Result<Entry, Bad> {
        let limit = self.restarts_off;
        let rest = match self.data[..limit].get(p..) {
            Some(r) if !r.is_empty() => r,
            _ => {
                return Err(Bad {
                    pos: p,
                    reason: "entry offset beyond the entries",
                })
            }
        };
        let (shared, non_shared, value_len, header) =
            if rest.len() >= 3 && (rest[0] | rest[1] | rest[2]) < 0x80 {
                (rest[0] as usize, rest[1] as usize, rest[2] as usize, 3)
            } else {
                let mut s = rest;
                let a = varint::get_u32(&mut s);
                let b = varint::get_u32(&mut s);
                let c = varint::get_u32(&mut s);
                match (a, b, c) {
                    (Some(a), Some(b), Some(c)) => {
                        (a as usize, b as usize, c as usize, rest.len() - s.len())
                    }
                    _ => {
                        return Err(Bad {
                            pos: p,
                            reason: "truncated entry header",
                        })
                    }
                }
            };
        let key_off = p + header;
        let key_end = key_off.checked_add(non_shared);
        let val_end = key_end.and_then(|k| k.checked_add(value_len));
        match (key_end, val_end) {
            (Some(key_end), Some(val_end)) if val_end <= limit => Ok(Entry {
                shared,
                key_off,
                key_end,
                val_end,
            }),
            _ => Err(Bad {
                pos: p,
                reason: "entry runs past the end of the block",
            }),
        }
    }

    /// Rebuilds the key of `e` in `key`, which holds the previous key.
    #[inline]
    fn read_key(&self, e: &Entry, key: &mut Vec<u8>) -> Result<(), Bad> {
        if e.shared > key.len() {
            return Err(Bad {
                pos: e.key_off,
                reason: "entry shares more bytes than the previous key has",
            });
        }
        key.truncate(e.shared);
        key.extend_from_slice(&self.data[e.key_off..e.key_end]);
        Ok(())
    }

    /// The whole key stored at restart point `i`.
    #[inline]
    fn restart_key(&self, i: usize) -> Result<&[u8], Bad> {
        let p = self.restart(i);
        let e = self.decode_entry(p)?;
        if e.shared != 0 {
            return Err(Bad {
                pos: p,
                reason: "entry at a restart point shares a prefix",
            });
        }
        Ok(&self.data[e.key_off..e.key_end])
    }

    /// The last restart point whose key is `< target` (0 if none): binary search, no
    /// allocation.
    fn find_restart(&self, target: &[u8]) -> Result<usize, Bad> {
        let (mut lo, mut hi) = (0, self.num_restarts - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if compare_internal(self.restart_key(mid)?, target) == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Ok(lo)
    }

    fn corruption(&self, b: Bad) -> Error {
        if self.compressed {
            Error::corruption(
                self.file.to_path_buf(),
                self.file_offset,
                format!("{} (byte {} of the decompressed block)", b.reason, b.pos),
            )
        } else {
            Error::corruption(
                self.file.to_path_buf(),
                self.file_offset + b.pos as u64,
                b.reason,
            )
        }
    }
}

/// Iterates over one block. Holds a reusable key buffer: moving does not allocate once the
/// buffer has grown to the longest key.
pub struct BlockIter {
    block: Arc<Block>,
    key: Vec<u8>,
    /// Offset of the current entry.
    cur: usize,
    /// Offset just past the current entry.
    next: usize,
    val: (usize, usize),
    /// Restart region holding the current entry.
    restart_idx: usize,
    valid: bool,
    err: Option<Error>,
}

impl BlockIter {
    /// An unpositioned iterator over `block`.
    pub fn new(block: Arc<Block>) -> Self {
        BlockIter {
            block,
            key: Vec::new(),
            cur: 0,
            next: 0,
            val: (0, 0),
            restart_idx: 0,
            valid: false,
            err: None,
        }
    }

    /// Switches to another block, keeping the key buffer. Clears any error.
    pub fn reset(&mut self, block: Arc<Block>) {
        self.block = block;
        self.key.clear();
        self.valid = false;
        self.err = None;
    }

    /// The block being iterated.
    pub fn block(&self) -> &Arc<Block> {
        &self.block
    }

    /// Makes the iterator unpositioned.
    pub(crate) fn invalidate(&mut self) {
        self.valid = false;
    }

    fn fail(&mut self, b: Bad) {
        self.valid = false;
        if self.err.is_none() {
            self.err = Some(self.block.corruption(b));
        }
    }

    fn start_at_restart(&mut self, i: usize) {
        self.restart_idx = i;
        self.next = self.block.restart(i);
        self.key.clear();
        self.valid = false;
    }

    /// Decodes the entry at `self.next`. False at the end of the entries or on corruption.
    #[inline]
    fn step(&mut self) -> bool {
        let p = self.next;
        if p >= self.block.restarts_off {
            self.valid = false;
            return false;
        }
        let e = match self.block.decode_entry(p) {
            Ok(e) => e,
            Err(b) => {
                self.fail(b);
                return false;
            }
        };
        if let Err(b) = self.block.read_key(&e, &mut self.key) {
            self.fail(b);
            return false;
        }
        self.cur = p;
        self.next = e.val_end;
        self.val = (e.key_end, e.val_end);
        while self.restart_idx + 1 < self.block.num_restarts
            && self.block.restart(self.restart_idx + 1) <= p
        {
            self.restart_idx += 1;
        }
        self.valid = true;
        true
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) {
        if self.err.is_some() {
            self.valid = false;
            return;
        }
        self.start_at_restart(0);
        self.step();
    }

    fn seek_to_last(&mut self) {
        if self.err.is_some() {
            self.valid = false;
            return;
        }
        self.start_at_restart(self.block.num_restarts - 1);
        while self.step() && self.next < self.block.restarts_off {}
    }

    fn seek(&mut self, target: &[u8]) {
        if self.err.is_some() {
            self.valid = false;
            return;
        }
        match self.block.find_restart(target) {
            Ok(r) => self.start_at_restart(r),
            Err(b) => return self.fail(b),
        }
        while self.step() {
            if compare_internal(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid);
        if self.valid {
            self.step();
        }
    }

    fn prev(&mut self) {
        debug_assert!(self.valid);
        if !self.valid {
            return;
        }
        let original = self.cur;
        let mut r = self.restart_idx;
        while self.block.restart(r) >= original {
            if r == 0 {
                self.valid = false;
                return;
            }
            r -= 1;
        }
        self.start_at_restart(r);
        loop {
            if !self.step() {
                if self.err.is_none() {
                    self.fail(Bad {
                        pos: original,
                        reason: "entry not reachable from its restart point",
                    });
                }
                return;
            }
            if self.next >= original {
                if self.next != original {
                    self.fail(Bad {
                        pos: self.cur,
                        reason: "entry overlaps the next one",
                    });
                }
                return;
            }
        }
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.valid);
        &self.key
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid);
        &self.block.data[self.val.0..self.val.1]
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use crate::sst::block_builder::BlockBuilder;

    fn ikey(i: u32) -> Vec<u8> {
        make_internal_key(format!("key{:06}", i * 2).as_bytes(), 9, ValueKind::Value)
    }

    fn build(n: u32, interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for i in 0..n {
            b.add(&ikey(i), format!("v{i}").as_bytes());
        }
        let data = b.finish().to_vec();
        Arc::new(Block::new(data, Arc::from(Path::new("mem")), 0, false).unwrap())
    }

    #[test]
    fn forward_backward_seek_get() {
        for interval in [1, 2, 3, 16] {
            for n in [0u32, 1, 2, 17, 100] {
                let block = build(n, interval);
                let mut it = block.iter();
                it.seek_to_first();
                let mut fwd = Vec::new();
                while it.valid() {
                    fwd.push((it.key().to_vec(), it.value().to_vec()));
                    it.next();
                }
                assert_eq!(fwd.len(), n as usize);
                let mut back = Vec::new();
                it.seek_to_last();
                while it.valid() {
                    back.push((it.key().to_vec(), it.value().to_vec()));
                    it.prev();
                }
                back.reverse();
                assert_eq!(fwd, back);
                it.status().unwrap();
                for i in 0..n {
                    it.seek(&ikey(i));
                    assert_eq!(it.key(), &ikey(i)[..]);
                    // Between keys: "key000001" sorts between 0 and 2.
                    let between = make_internal_key(
                        format!("key{:06}", i * 2 + 1).as_bytes(),
                        9,
                        ValueKind::Value,
                    );
                    it.seek(&between);
                    assert_eq!(it.valid(), i + 1 < n);
                    let got = block.get(&between, |k, _| k.to_vec()).unwrap();
                    assert_eq!(got, (i + 1 < n).then(|| ikey(i + 1)));
                    let v = block.get(&ikey(i), |_, v| v.to_vec()).unwrap();
                    assert_eq!(v, Some(format!("v{i}").into_bytes()));
                }
            }
        }
    }

    #[test]
    fn restart_array_is_validated() {
        let p: Arc<Path> = Arc::from(Path::new("mem"));
        for bad in [
            vec![],
            vec![1, 0, 0],
            vec![0, 0, 0, 0],
            vec![0xff, 0xff, 0xff, 0xff],
            vec![5, 0, 0, 0, 1, 0, 0, 0],
            vec![9, 9, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0],
        ] {
            let e = Block::new(bad, p.clone(), 100, false).err().unwrap();
            assert!(e.is_corruption());
        }
    }

    #[test]
    fn every_corrupt_block_is_an_error_never_a_panic() {
        let good = build(20, 4);
        let raw = good.data.clone();
        let p: Arc<Path> = Arc::from(Path::new("mem"));
        for i in 0..raw.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut d = raw.clone();
                d[i] ^= x;
                let Ok(b) = Block::new(d, p.clone(), 0, false) else {
                    continue;
                };
                let b = Arc::new(b);
                let mut it = b.iter();
                it.seek_to_first();
                while it.valid() {
                    it.next();
                }
                it.seek_to_last();
                let mut steps = 0;
                while it.valid() && steps < 100 {
                    it.prev();
                    steps += 1;
                }
                for k in 0..20 {
                    it.seek(&ikey(k));
                    let _ = b.get(&ikey(k), |_, _| ());
                }
            }
        }
    }
}
