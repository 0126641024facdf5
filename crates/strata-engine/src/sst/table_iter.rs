//! The two-level iterator over a table: a position in the in-memory index, and a
//! [`BlockIter`] over the data block it points at. Blocks come through the block cache; the
//! block iterator (and its key buffer) is reused from block to block.

use super::block::BlockIter;
use super::reader::{ReadParams, Table};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use std::sync::Arc;

/// Iterates over every entry of a table, forward and backward.
pub struct TableIter {
    table: Arc<Table>,
    params: ReadParams,
    /// Index entry of the loaded block (meaningful when `data` is `Some`).
    block_idx: usize,
    data: Option<BlockIter>,
    err: Option<Error>,
    /// Readahead buffer (compaction): bytes of the file from `ra_offset`. Blocks that miss
    /// the cache are cut from it, so a sequential pass costs one read per `readahead` bytes
    /// instead of one per block (RoF's 2 MiB compaction readahead). `RandomAccessFile::
    /// readahead` alone would be only a hint that the real file system may ignore.
    ra_buf: Vec<u8>,
    ra_offset: u64,
}

impl TableIter {
    pub(crate) fn new(table: Arc<Table>, params: ReadParams) -> Self {
        TableIter {
            table,
            params,
            block_idx: 0,
            data: None,
            err: None,
            ra_buf: Vec::new(),
            ra_offset: 0,
        }
    }

    /// The table iterated over.
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Positions the block iterator on data block `i` (unpositioned within it). False on
    /// error (kept in `self.err`).
    fn load(&mut self, i: usize) -> bool {
        if let Some(d) = &mut self.data {
            if self.block_idx == i && d.status().is_ok() {
                return true;
            }
        }
        let h = self.table.index().handle(i);
        let block = match self.table.cached_block(h) {
            Some(b) => Ok(b),
            None if self.params.readahead > 0 => self.read_ahead(h),
            None => self.table.read_block(h, self.params),
        };
        match block {
            Ok(b) => {
                match &mut self.data {
                    Some(d) => d.reset(b),
                    None => self.data = Some(BlockIter::new(b)),
                }
                self.block_idx = i;
                true
            }
            Err(e) => {
                self.set_error(e);
                false
            }
        }
    }

    /// Reads block `h` through the readahead buffer, refilling it from `h` when `h` is not
    /// inside it.
    fn read_ahead(&mut self, h: super::BlockHandle) -> Result<Arc<super::Block>> {
        let (offset, len) = self.table.block_read_range(h);
        let end = offset + len as u64;
        let buf_end = self.ra_offset + self.ra_buf.len() as u64;
        if offset < self.ra_offset || end > buf_end {
            // Never read past the data blocks' end (the filter and index follow them).
            let limit = self.table.data_end().max(end);
            let want = (self.params.readahead as u64)
                .max(len as u64)
                .min(limit - offset);
            self.table.file().readahead(offset, want);
            self.ra_buf.resize(want as usize, 0);
            if let Err(e) = self.table.file().read_at(offset, &mut self.ra_buf) {
                self.ra_buf.clear();
                return Err(e);
            }
            self.ra_offset = offset;
        }
        let start = (offset - self.ra_offset) as usize;
        let raw = self.ra_buf[start..start + len].to_vec();
        self.table.decode_block(h, raw, self.params)
    }

    fn set_error(&mut self, e: Error) {
        if self.err.is_none() {
            self.err = Some(e);
        }
        if let Some(d) = &mut self.data {
            d.invalidate();
        }
    }

    fn invalidate(&mut self) {
        if let Some(d) = &mut self.data {
            d.invalidate();
        }
    }

    /// Whether the block iterator is positioned; otherwise records its error, if any.
    fn block_valid(&mut self) -> Option<bool> {
        let d = self.data.as_mut()?;
        if d.valid() {
            return Some(true);
        }
        if let Err(e) = d.status() {
            self.set_error(e);
            return None;
        }
        Some(false)
    }

    /// Moves forward over exhausted (or empty) blocks.
    fn skip_forward(&mut self) {
        while self.block_valid() == Some(false) {
            let next = self.block_idx + 1;
            if next >= self.table.index().len() || !self.load(next) {
                return self.invalidate();
            }
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
    }

    /// Moves backward over exhausted (or empty) blocks.
    fn skip_backward(&mut self) {
        while self.block_valid() == Some(false) {
            if self.block_idx == 0 || !self.load(self.block_idx - 1) {
                return self.invalidate();
            }
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
    }

    fn stopped(&mut self) -> bool {
        if self.err.is_some() {
            self.invalidate();
            return true;
        }
        false
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.err.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        if self.stopped() {
            return;
        }
        if self.table.index().is_empty() {
            return self.invalidate();
        }
        if self.load(0) {
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
            self.skip_forward();
        }
    }

    fn seek_to_last(&mut self) {
        if self.stopped() {
            return;
        }
        let n = self.table.index().len();
        if n == 0 {
            return self.invalidate();
        }
        if self.load(n - 1) {
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
            self.skip_backward();
        }
    }

    fn seek(&mut self, target: &[u8]) {
        if self.stopped() {
            return;
        }
        let Some(i) = self.table.find_block_index(target) else {
            return self.invalidate();
        };
        if self.load(i) {
            if let Some(d) = &mut self.data {
                d.seek(target);
            }
            self.skip_forward();
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.value(),
            None => &[],
        }
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
