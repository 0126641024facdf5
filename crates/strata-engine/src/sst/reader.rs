//! Reads a table written by [`super::builder::TableBuilder`].
//!
//! Open reads and verifies the footer, the filter block and the index block and keeps them in
//! memory; data blocks are read on demand through the shared [`BlockCache`]. Every corruption
//! error names the file and the offset. Specification: `docs/format/sstable.md`.

use super::block::Block;
use super::filter::Filter;
use super::format::{self, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN};
use super::index::Index;
use super::learned::LearnedIndex;
use super::table_iter::TableIter;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::io::RandomAccessFile;
use crate::iter::InternalIterator;
use crate::key::{self, compare_internal};
use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

/// How a read treats blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadParams {
    /// Check the CRC of every block read from the file (cached blocks were checked when read).
    pub verify_checksums: bool,
    /// Put blocks read from the file into the block cache.
    pub fill_cache: bool,
    /// Iterators: hint the file to read this many bytes ahead when they move into a region
    /// not hinted yet (compaction). 0 = no hints.
    pub readahead: usize,
}

impl Default for ReadParams {
    fn default() -> Self {
        ReadParams {
            verify_checksums: true,
            fill_cache: true,
            readahead: 0,
        }
    }
}

/// What [`Table::verify`] checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyStats {
    /// Data blocks read.
    pub blocks: u64,
    /// Entries read.
    pub entries: u64,
}

/// An open table: footer, index and filter in memory.
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: Arc<Path>,
    file_number: u64,
    size: u64,
    cache: Option<Arc<BlockCache>>,
    index: Index,
    filter: Filter,
    data_end: u64,
    num_entries: u64,
    /// The learned index over `index` (`Options::sst_learned_index`), built after the table
    /// has served enough lookups; `None` when the option was off at open.
    learned: Option<LearnedIndex>,
}

impl Table {
    /// Opens the table in `file`. Verifies the footer (magic, checksum, version, handles in
    /// bounds), the filter block and the index block (checksums, structure, contiguous data
    /// blocks) before returning.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        file_number: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Arc<Table>> {
        Table::open_with(file, file_number, cache, false)
    }

    /// [`Table::open`], and with `learned_index` finds data blocks through a learned index
    /// once the table has served enough lookups (`sst/learned.rs`).
    pub fn open_with(
        file: Arc<dyn RandomAccessFile>,
        file_number: u64,
        cache: Option<Arc<BlockCache>>,
        learned_index: bool,
    ) -> Result<Arc<Table>> {
        let path: Arc<Path> = Arc::from(file.path());
        let size = file.size();
        let corrupt = |offset: u64, reason: String| Error::corruption(&*path, offset, reason);
        if size < FOOTER_LEN as u64 {
            return Err(corrupt(
                0,
                format!("file of {size} bytes is shorter than a table footer"),
            ));
        }
        let footer_off = size - FOOTER_LEN as u64;
        let mut fb = [0u8; FOOTER_LEN];
        file.read_at(footer_off, &mut fb)?;
        let footer = Footer::decode(&fb, &path, footer_off)?;
        // Layout: data blocks | filter block | index block | footer, with no gaps (but for
        // padding before data blocks in version 2, checked by the index).
        if footer.filter.end_with_trailer() != Some(footer.index.offset) {
            return Err(corrupt(
                footer_off,
                format!(
                    "filter block {:?} does not end where the index block starts",
                    footer.filter
                ),
            ));
        }
        if footer.index.end_with_trailer() != Some(footer_off) {
            return Err(corrupt(
                footer_off,
                format!(
                    "index block {:?} does not end at the footer ({footer_off})",
                    footer.index
                ),
            ));
        }
        let verify = ReadParams::default();
        let raw = read_raw(&*file, footer.filter)?;
        let (filter_bytes, _) = format::decode_block_contents(raw, footer.filter, &path, true)?;
        let filter = Filter::decode(filter_bytes, &path, footer.filter.offset)?;
        let raw = read_raw(&*file, footer.index)?;
        let index_block = decode(raw, footer.index, &path, verify)?;
        let index = Index::decode(
            index_block,
            footer.filter.offset,
            footer.aligned,
            &path,
            footer.index.offset,
        )?;
        if index.is_empty() != (footer.num_entries == 0) {
            return Err(corrupt(
                footer_off + 32,
                format!(
                    "{} entries in {} data blocks",
                    footer.num_entries,
                    index.len()
                ),
            ));
        }
        Ok(Arc::new(Table {
            file,
            path,
            file_number,
            size,
            cache,
            index,
            filter,
            num_entries: footer.num_entries,
            data_end: footer.filter.offset,
            learned: learned_index.then(LearnedIndex::new),
        }))
    }

    /// Offset where the data blocks end (the filter block starts).
    pub fn data_end(&self) -> u64 {
        self.data_end
    }

    /// False only if no key of the table has this user key.
    #[inline]
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.may_contain(user_key)
    }

    /// Calls `f(ikey, value)` on the first entry whose internal key is `>= seek_ikey`; `None`
    /// if the table has none. The caller checks the user key.
    pub fn get<R>(
        &self,
        seek_ikey: &[u8],
        p: ReadParams,
        f: impl FnOnce(&[u8], &[u8]) -> R,
    ) -> Result<Option<R>> {
        let Some(h) = self.find_block(seek_ikey) else {
            return Ok(None);
        };
        let block = self.load_block(h, p)?;
        match block.get(seek_ikey, f)? {
            Some(r) => Ok(Some(r)),
            None => Err(Error::corruption(
                &*self.path,
                h.offset,
                "data block ends before its index key",
            )),
        }
    }

    /// A two-level iterator over the whole table.
    pub fn iter(self: &Arc<Self>, p: ReadParams) -> TableIter {
        TableIter::new(Arc::clone(self), p)
    }

    /// The data block that holds the first entry `>= seek_ikey`, from the in-memory index.
    #[inline]
    pub fn find_block(&self, seek_ikey: &[u8]) -> Option<BlockHandle> {
        self.find_block_index(seek_ikey)
            .map(|i| self.index.handle(i))
    }

    /// The number of the block [`Table::find_block`] returns: from the learned index when
    /// the table has one, else by binary search over the index (the same answer either way).
    #[inline]
    pub(crate) fn find_block_index(&self, seek_ikey: &[u8]) -> Option<usize> {
        if let Some(found) = self
            .learned
            .as_ref()
            .and_then(|l| l.find(&self.index, seek_ikey))
        {
            return found;
        }
        self.index.find(seek_ikey)
    }

    /// Builds the learned index now instead of after enough lookups, and without timing it
    /// against the binary search (benchmarks and tests). True if the table has one: it was
    /// opened with the learned index on and has at least `sst::learned::MIN_BLOCKS` blocks.
    #[doc(hidden)]
    pub fn build_learned_index(&self) -> bool {
        self.learned
            .as_ref()
            .is_some_and(|l| l.build(&self.index).is_some())
    }

    /// Whether the learned index has been built.
    #[doc(hidden)]
    pub fn has_learned_index(&self) -> bool {
        self.learned.as_ref().is_some_and(|l| l.model().is_some())
    }

    /// Whether the table decided on its learned index: built and kept, measured slower and
    /// dropped, or too small.
    #[doc(hidden)]
    pub fn learned_index_decided(&self) -> bool {
        self.learned.as_ref().is_some_and(|l| l.decided())
    }

    /// Segments per level of the learned index, bottom first (empty if it is not built).
    #[doc(hidden)]
    pub fn learned_index_levels(&self) -> Vec<usize> {
        self.learned
            .as_ref()
            .and_then(|l| l.model())
            .map_or_else(Vec::new, |m| m.level_sizes())
    }

    /// The block at `h`, if the block cache has it.
    #[inline]
    pub fn cached_block(&self, h: BlockHandle) -> Option<Arc<Block>> {
        self.cache.as_ref()?.get(self.file_number, h.offset)
    }

    /// Where to read block `h` from: offset and length, trailer included.
    #[inline]
    pub fn block_read_range(&self, h: BlockHandle) -> (u64, usize) {
        (h.offset, h.size as usize + BLOCK_TRAILER_LEN)
    }

    /// The table's file.
    pub fn file(&self) -> &Arc<dyn RandomAccessFile> {
        &self.file
    }

    /// Turns the bytes read from [`Table::block_read_range`] into a block: checks the CRC (if
    /// `p.verify_checksums`), decompresses, and caches it (if `p.fill_cache`).
    pub fn decode_block(&self, h: BlockHandle, raw: Vec<u8>, p: ReadParams) -> Result<Arc<Block>> {
        let block = decode(raw, h, &self.path, p)?;
        if p.fill_cache {
            if let Some(c) = &self.cache {
                c.insert(self.file_number, h.offset, Arc::clone(&block));
            }
        }
        Ok(block)
    }

    /// The block at `h`, from the cache or the file.
    pub(crate) fn load_block(&self, h: BlockHandle, p: ReadParams) -> Result<Arc<Block>> {
        match self.cached_block(h) {
            Some(b) => Ok(b),
            None => self.read_block(h, p),
        }
    }

    /// The block at `h`, from the file (no cache probe; filled per `p.fill_cache`).
    pub(crate) fn read_block(&self, h: BlockHandle, p: ReadParams) -> Result<Arc<Block>> {
        let raw = read_raw(&*self.file, h)?;
        self.decode_block(h, raw, p)
    }

    /// Reads every data block, checking its CRC, its structure, that every key is a valid
    /// internal key in strictly increasing order across the whole table, that each block ends
    /// with its index key, that the filter knows every user key, and that the entry count
    /// matches the footer. Bypasses the cache.
    pub fn verify(&self) -> Result<VerifyStats> {
        let p = ReadParams {
            verify_checksums: true,
            fill_cache: false,
            readahead: 0,
        };
        let mut stats = VerifyStats::default();
        let mut prev: Vec<u8> = Vec::new();
        let mut prev_end = 0u64;
        for i in 0..self.index.len() {
            let h = self.index.handle(i);
            let corrupt = |reason: String| Error::corruption(&*self.path, h.offset, reason);
            // Padding before an aligned block (the index checked its extent) must be zeros:
            // no checksum covers it, so this is where a flip in it is noticed.
            if h.offset > prev_end {
                let mut gap = vec![0u8; (h.offset - prev_end) as usize];
                self.file.read_at(prev_end, &mut gap)?;
                if let Some(at) = gap.iter().position(|&b| b != 0) {
                    return Err(Error::corruption(
                        &*self.path,
                        prev_end + at as u64,
                        format!("nonzero byte in the padding before data block {i}"),
                    ));
                }
            }
            prev_end = h.end_with_trailer().unwrap_or(h.offset);
            let block = decode(read_raw(&*self.file, h)?, h, &self.path, p)?;
            let mut it = block.iter();
            it.seek_to_first();
            if !it.valid() {
                it.status()?;
                return Err(corrupt(format!("data block {i} is empty")));
            }
            while it.valid() {
                let k = it.key();
                let Some(parsed) = key::parse_internal_key(k) else {
                    return Err(corrupt(format!(
                        "entry {} is not an internal key",
                        stats.entries
                    )));
                };
                if stats.entries > 0 && compare_internal(&prev, k) != Ordering::Less {
                    return Err(corrupt(format!(
                        "entry {} is not after the previous one",
                        stats.entries
                    )));
                }
                if !self.filter.may_contain(parsed.user_key) {
                    return Err(corrupt(format!(
                        "filter block misses the user key of entry {}",
                        stats.entries
                    )));
                }
                prev.clear();
                prev.extend_from_slice(k);
                stats.entries += 1;
                it.next();
            }
            it.status()?;
            if prev != self.index.key(i) {
                return Err(corrupt(format!(
                    "data block {i} does not end with its index key"
                )));
            }
            stats.blocks += 1;
        }
        if stats.entries != self.num_entries {
            return Err(Error::corruption(
                &*self.path,
                self.size - FOOTER_LEN as u64 + 32,
                format!(
                    "footer says {} entries, the blocks hold {}",
                    self.num_entries, stats.entries
                ),
            ));
        }
        Ok(stats)
    }

    /// Whether the table has a filter (tables built without one answer every probe "may
    /// contain").
    pub fn has_filter(&self) -> bool {
        self.filter.is_present()
    }

    /// Entries in the table (from the footer).
    pub fn num_entries(&self) -> u64 {
        self.num_entries
    }

    /// The table's file number (block cache key).
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// Bytes of the file.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Number of data blocks.
    pub fn num_blocks(&self) -> usize {
        self.index.len()
    }

    /// Bytes of index, filter and learned index held in memory.
    pub fn memory_bytes(&self) -> usize {
        self.index.memory_bytes()
            + self.filter.memory_bytes()
            + self.learned.as_ref().map_or(0, LearnedIndex::memory_bytes)
    }

    pub(crate) fn index(&self) -> &Index {
        &self.index
    }
}

/// Reads block `h` and its trailer. Handles come from the verified footer and index, so the
/// range is inside the file.
fn read_raw(file: &dyn RandomAccessFile, h: BlockHandle) -> Result<Vec<u8>> {
    let len = usize::try_from(h.size)
        .ok()
        .and_then(|s| s.checked_add(BLOCK_TRAILER_LEN))
        .filter(|_| h.end_with_trailer().is_some_and(|e| e <= file.size()))
        .ok_or_else(|| {
            Error::corruption(
                file.path(),
                h.offset,
                format!("block {h:?} is outside the file"),
            )
        })?;
    let mut buf = vec![0u8; len];
    file.read_at(h.offset, &mut buf)?;
    Ok(buf)
}

/// Trailer check, decompression and restart-array check of a block read from `h`.
fn decode(raw: Vec<u8>, h: BlockHandle, path: &Arc<Path>, p: ReadParams) -> Result<Arc<Block>> {
    let (data, compressed) = format::decode_block_contents(raw, h, path, p.verify_checksums)?;
    Ok(Arc::new(Block::new(
        data,
        Arc::clone(path),
        h.offset,
        compressed,
    )?))
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("file_number", &self.file_number)
            .field("size", &self.size)
            .field("num_entries", &self.num_entries)
            .field("blocks", &self.index.len())
            .finish()
    }
}
