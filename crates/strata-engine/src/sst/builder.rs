//! Writes a table: data blocks, filter block, index block, footer.
//!
//! Layout and every byte of it: `docs/format/sstable.md`. The reader is
//! [`super::reader::Table`].

use super::block_builder::BlockBuilder;
use super::filter::FilterBuilder;
use super::format::{self, BlockHandle, Footer, BLOCK_TRAILER_LEN};
use crate::error::{Error, Result};
use crate::io::WritableFile;
use crate::key::{self, compare_internal, TRAILER_LEN};
use crate::options::{Compression, Options};
use std::cmp::Ordering;

/// How tables are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// Uncompressed size at which a data block is closed.
    pub block_size: usize,
    /// Keys between restart points in data blocks.
    pub restart_interval: usize,
    /// Compression of data and index blocks.
    pub compression: Compression,
    /// Whether to build a filter over user keys.
    pub filter: bool,
    /// Page-aligned data blocks (`Options::block_align`): a block is closed before an entry
    /// would push it and its trailer past `block_size`, and is placed so that it spans no
    /// more 4 KiB pages than it must (zero padding before it).
    pub block_align: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            compression: Compression::None,
            filter: true,
            block_align: false,
        }
    }
}

impl TableOptions {
    /// The table options of a database's options.
    pub fn from_options(o: &Options) -> Self {
        TableOptions {
            block_size: o.block_size_bytes,
            restart_interval: o.block_restart_interval,
            compression: o.compression,
            filter: o.filter,
            block_align: o.block_align(),
        }
    }
}

/// What a finished table holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSummary {
    /// Bytes of the file.
    pub file_size: u64,
    /// Entries (values and tombstones).
    pub num_entries: u64,
    /// Smallest internal key (empty for an empty table).
    pub smallest: Vec<u8>,
    /// Largest internal key (empty for an empty table).
    pub largest: Vec<u8>,
}

/// Entries larger than this cannot be stored: block offsets are u32.
const MAX_ENTRY_BYTES: usize = u32::MAX as usize / 2;

/// Bytes an entry adds to a block beyond its key and value, at most: three varint lengths
/// and a restart offset.
const MAX_ENTRY_OVERHEAD: usize = 3 * 5 + 4;

/// The page that aligned blocks fit in: the unit of a direct read and of the page cache.
pub const BLOCK_ALIGN: u64 = 4096;

/// Zero padding before aligned blocks (at most one page less a byte is ever needed).
static PADDING: [u8; BLOCK_ALIGN as usize] = [0; BLOCK_ALIGN as usize];

/// Pages of `BLOCK_ALIGN` bytes that `[offset, offset + len)` touches.
fn pages_spanned(offset: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (offset + len - 1) / BLOCK_ALIGN - offset / BLOCK_ALIGN + 1
}

/// Where a block of `len` stored bytes (trailer included) should start at or after `offset`
/// when blocks are aligned: `offset` itself, unless starting at the next page boundary
/// makes the block touch fewer pages.
pub fn aligned_start(offset: u64, len: u64) -> u64 {
    let next = offset.div_ceil(BLOCK_ALIGN) * BLOCK_ALIGN;
    if pages_spanned(next, len) < pages_spanned(offset, len) {
        next
    } else {
        offset
    }
}

/// Writes one table. Entries must be added in strictly increasing internal-key order.
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    opts: TableOptions,
    data: BlockBuilder,
    index: BlockBuilder,
    filter: Option<FilterBuilder>,
    /// Bytes written to the file so far.
    offset: u64,
    num_entries: u64,
    smallest: Vec<u8>,
    last_key: Vec<u8>,
    scratch: Vec<u8>,
    handle_buf: Vec<u8>,
}

impl TableBuilder {
    /// Starts a table in `file`, which should be empty.
    pub fn new(file: Box<dyn WritableFile>, opts: TableOptions) -> Self {
        TableBuilder {
            offset: file.size(),
            file,
            data: BlockBuilder::new(opts.restart_interval),
            // Restart interval 1: every index key is whole (it is decoded once, at open).
            index: BlockBuilder::new(1),
            filter: opts.filter.then(FilterBuilder::default),
            opts,
            num_entries: 0,
            smallest: Vec::new(),
            last_key: Vec::new(),
            scratch: Vec::new(),
            handle_buf: Vec::new(),
        }
    }

    /// Appends an entry; `ikey` must sort after every key added before.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        debug_assert!(
            self.num_entries == 0 || compare_internal(&self.last_key, ikey) == Ordering::Less,
            "table keys out of order"
        );
        if ikey.len() < TRAILER_LEN {
            return Err(Error::InvalidArgument(format!(
                "internal key of {} bytes is shorter than its trailer",
                ikey.len()
            )));
        }
        if ikey.len() + value.len() > MAX_ENTRY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "entry of {} bytes is too large for a table block",
                ikey.len() + value.len()
            )));
        }
        if let Some(f) = &mut self.filter {
            let uk = key::user_key(ikey);
            if self.num_entries == 0 || key::user_key(&self.last_key) != uk {
                f.add(uk);
            }
        }
        if self.num_entries == 0 {
            self.smallest.extend_from_slice(ikey);
        }
        // A huge entry must not push a block past the u32 offsets: close the block first.
        // Aligned blocks close before they would outgrow `block_size` (their page budget).
        if !self.data.is_empty() {
            let next = self.data.estimated_size() + ikey.len() + value.len();
            if next > MAX_ENTRY_BYTES
                || (self.opts.block_align
                    && next + MAX_ENTRY_OVERHEAD + BLOCK_TRAILER_LEN > self.opts.block_size)
            {
                self.flush_data_block()?;
            }
        }
        self.data.add(ikey, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.num_entries += 1;
        if self.data.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Estimated file size so far, the open data block included.
    pub fn file_size(&self) -> u64 {
        let pending = if self.data.is_empty() {
            0
        } else {
            self.data.estimated_size() + BLOCK_TRAILER_LEN
        };
        self.offset + pending as u64
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.num_entries
    }

    /// Writes the open data block and its index entry.
    fn flush_data_block(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let raw = self.data.finish();
        let h = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.scratch,
            raw,
            self.opts.compression,
            Some(&self.last_key),
            self.opts.block_align,
        )?;
        self.data.reset();
        self.handle_buf.clear();
        h.encode_to(&mut self.handle_buf);
        self.index.add(&self.last_key, &self.handle_buf);
        Ok(())
    }

    /// Writes the last data block, the filter and index blocks and the footer, then syncs the
    /// file.
    pub fn finish(mut self) -> Result<TableSummary> {
        self.flush_data_block()?;
        let mut filter_bytes = Vec::new();
        match &mut self.filter {
            Some(f) => f.finish(&mut filter_bytes),
            None => filter_bytes.push(super::filter::FILTER_NONE),
        }
        let filter = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.scratch,
            &filter_bytes,
            Compression::None,
            None,
            false,
        )?;
        let index_raw = self.index.finish();
        let index = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.scratch,
            index_raw,
            self.opts.compression,
            None,
            false,
        )?;
        let footer = Footer {
            filter,
            index,
            num_entries: self.num_entries,
            aligned: self.opts.block_align,
        };
        self.file.append(&footer.encode())?;
        self.offset += format::FOOTER_LEN as u64;
        self.file.sync()?;
        debug_assert_eq!(self.offset, self.file.size());
        Ok(TableSummary {
            file_size: self.offset,
            num_entries: self.num_entries,
            smallest: self.smallest,
            largest: self.last_key,
        })
    }
}

/// Compresses and appends one block and its trailer; returns its handle. In debug builds the
/// stored bytes are first decoded back as the reader will (`expect_last`: the data block's
/// last key). With `align`, zero padding first moves the block to the next page boundary
/// when that saves it a page ([`aligned_start`]); readers find blocks only through their
/// handles, so they never see the padding.
fn write_block(
    file: &mut dyn WritableFile,
    offset: &mut u64,
    scratch: &mut Vec<u8>,
    raw: &[u8],
    compression: Compression,
    expect_last: Option<&[u8]>,
    align: bool,
) -> Result<BlockHandle> {
    let (block_type, stored) = format::compress_block(raw, compression, scratch);
    if align {
        let start = aligned_start(*offset, (stored.len() + BLOCK_TRAILER_LEN) as u64);
        if start > *offset {
            file.append(&PADDING[..(start - *offset) as usize])?;
            *offset = start;
        }
    }
    let crc = format::block_crc(stored, block_type);
    let mut trailer = [0u8; BLOCK_TRAILER_LEN];
    trailer[0] = block_type;
    trailer[1..].copy_from_slice(&crc.to_le_bytes());
    let h = BlockHandle {
        offset: *offset,
        size: stored.len() as u64,
    };
    if cfg!(debug_assertions) {
        debug_check_block(raw, stored, &trailer, h, expect_last);
    }
    file.append(stored)?;
    file.append(&trailer)?;
    *offset += (stored.len() + BLOCK_TRAILER_LEN) as u64;
    Ok(h)
}

/// Pair assertion: what the builder is about to write reads back as what it built.
fn debug_check_block(
    raw: &[u8],
    stored: &[u8],
    trailer: &[u8; BLOCK_TRAILER_LEN],
    h: BlockHandle,
    expect_last: Option<&[u8]>,
) {
    use crate::iter::InternalIterator;
    let mut on_disk = stored.to_vec();
    on_disk.extend_from_slice(trailer);
    let path = std::path::Path::new("<builder self-check>");
    let (contents, _) = format::decode_block_contents(on_disk, h, path, true)
        .expect("block written by the builder does not decode");
    assert_eq!(contents, raw, "block does not decompress to what was built");
    if let Some(last) = expect_last {
        let block = super::block::Block::new(contents, std::sync::Arc::from(path), h.offset, false)
            .expect("built block has a bad restart array");
        let mut it = std::sync::Arc::new(block).iter();
        it.seek_to_first();
        assert!(it.valid(), "built block has no readable first entry");
        it.seek_to_last();
        assert!(
            it.valid() && it.key() == last,
            "built block's last key differs"
        );
    }
}
