//! The in-memory form of a table's index block.
//!
//! On disk the index is a block (restart interval 1) with one entry per data block: key = the
//! last internal key of the block, value = its [`BlockHandle`]. At open it is decoded once into
//! flat arrays, checked (keys strictly increasing, blocks contiguous from offset 0 to the
//! filter block), and then searched without decoding anything. Specification:
//! `docs/format/sstable.md`.

use super::block::Block;
use super::builder::BLOCK_ALIGN;
use super::format::BlockHandle;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

/// Decoded index: the last key and the handle of every data block, in order.
pub struct Index {
    keys: Vec<u8>,
    /// `keys[key_ends[i - 1]..key_ends[i]]` is the key of block `i`.
    key_ends: Vec<usize>,
    handles: Vec<BlockHandle>,
}

impl Index {
    /// Decodes and checks an index block. `data_end` is where the data blocks must end (the
    /// filter block's offset). `offset` is the index block's file offset, for errors. With
    /// `aligned` (format version 2) a block may start after a gap of padding, but only at a
    /// page boundary and less than a page after the previous block's end.
    pub fn decode(
        block: Arc<Block>,
        data_end: u64,
        aligned: bool,
        path: &Path,
        offset: u64,
    ) -> Result<Index> {
        let corrupt =
            |reason: String| Error::corruption(path, offset, format!("index block: {reason}"));
        let mut idx = Index {
            keys: Vec::new(),
            key_ends: Vec::new(),
            handles: Vec::new(),
        };
        let mut expected_offset = 0u64;
        let mut it = block.iter();
        it.seek_to_first();
        while it.valid() {
            let mut v = it.value();
            let h = BlockHandle::decode_from(&mut v)
                .filter(|_| v.is_empty())
                .ok_or_else(|| corrupt(format!("bad block handle in entry {}", idx.len())))?;
            let padded = aligned
                && h.offset > expected_offset
                && h.offset % BLOCK_ALIGN == 0
                && h.offset - expected_offset < BLOCK_ALIGN;
            if h.offset != expected_offset && !padded {
                return Err(corrupt(format!(
                    "block {} at offset {}, expected {expected_offset}",
                    idx.len(),
                    h.offset
                )));
            }
            expected_offset = h
                .end_with_trailer()
                .filter(|&e| e <= data_end)
                .ok_or_else(|| corrupt(format!("block {} ends past the data", idx.len())))?;
            if !idx.is_empty()
                && compare_internal(idx.key(idx.len() - 1), it.key()) != Ordering::Less
            {
                return Err(corrupt(format!("key of block {} out of order", idx.len())));
            }
            idx.keys.extend_from_slice(it.key());
            idx.key_ends.push(idx.keys.len());
            idx.handles.push(h);
            it.next();
        }
        it.status()?;
        if expected_offset != data_end {
            return Err(corrupt(format!(
                "data blocks end at {expected_offset}, the filter block starts at {data_end}"
            )));
        }
        Ok(idx)
    }

    /// Number of data blocks.
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Whether the table has no data block.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Last internal key of block `i`.
    #[inline]
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.key_ends[i - 1] };
        &self.keys[start..self.key_ends[i]]
    }

    /// Handle of block `i`.
    #[inline]
    pub fn handle(&self, i: usize) -> BlockHandle {
        self.handles[i]
    }

    /// The first block whose last key is `>= target`: the only block that can hold the first
    /// entry `>= target`. `None` if every key of the table is smaller.
    #[inline]
    pub fn find(&self, target: &[u8]) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if compare_internal(self.key(mid), target) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < self.len()).then_some(lo)
    }

    /// Bytes held in memory.
    pub fn memory_bytes(&self) -> usize {
        self.keys.capacity()
            + self.key_ends.capacity() * std::mem::size_of::<usize>()
            + self.handles.capacity() * std::mem::size_of::<BlockHandle>()
    }
}
