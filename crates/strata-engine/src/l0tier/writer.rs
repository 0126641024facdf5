//! Writes an L0 table (`docs/format/l0-tier.md`) in one pass over sorted entries.
//!
//! Entry blocks stream to the file as they fill; the inline bitmaps, the block offsets and
//! the checkpoint keys (for the index) stay in memory and are appended at
//! [`L0TableWriter::finish`], which then writes the super block over the zeros reserved for
//! it at offset 0 and syncs the file and its directory. Until then the super block is zero,
//! which no reader accepts, so a table cut short by a crash is refused rather than misread.
//! A writer that fails or is dropped unfinished leaves its file behind for the caller to
//! delete (as a flush deletes a table it did not log).
//!
//! Files are written through `std::fs`, not [`crate::io::Fs`]: readers map them, and a
//! mapping needs a real file (the in-memory and fault-injecting file systems cannot back one).

use super::format::{
    block_crc, pieces, put_pointer, SuperBlock, BLOCK_CRC_LEN, ENTRIES_PER_BLOCK,
    ENTRIES_PER_CHECKPOINT, ENTRIES_PER_META, META_BITMAP_LEN, SUPER_LEN,
};
use super::{stored_form, L0Value, L0ValueRef};
use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key, user_key};
use crate::log::mask_crc;
use crate::pgm::{key_to_u64, shared_prefix_len, Pgm};
use crate::varint;
use std::cmp::Ordering;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// How an L0 table is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L0TableOptions {
    /// A value given together with its log location ([`L0Value::Logged`]) is stored inline
    /// when shorter than this, otherwise as the pointer. Default 32 (the seed's choice):
    /// larger keeps more reads off the log but makes the table, which the tier holds in
    /// fast memory, bigger. Recorded in the super block (informational; readers do not
    /// need it).
    pub inline_threshold_bytes: usize,
    /// Error bound of the learned index, in checkpoints (16 entries each). Default 4: a
    /// lookup searches at most 2 * 4 + 2 checkpoint keys. Smaller makes the index bigger.
    /// Stored in the index.
    pub pgm_epsilon: usize,
}

impl Default for L0TableOptions {
    fn default() -> Self {
        L0TableOptions {
            inline_threshold_bytes: 32,
            pgm_epsilon: 4,
        }
    }
}

/// What [`L0TableWriter::finish`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L0TableMeta {
    pub file_number: u64,
    /// Bytes of the file.
    pub file_size: u64,
    /// Entries (values, pointers and tombstones).
    pub entries: u64,
    /// Smallest internal key as stored (empty for an empty table).
    pub smallest: Vec<u8>,
    /// Largest internal key as stored (empty for an empty table).
    pub largest: Vec<u8>,
    /// Entries whose value is stored as a pointer into a log.
    pub pointer_entries: u64,
}

/// Writes one L0 table; entries must be added in strictly increasing internal-key order.
pub struct L0TableWriter {
    path: PathBuf,
    out: BufWriter<File>,
    opts: L0TableOptions,
    file_number: u64,
    /// Bytes written so far (the offset of the next block).
    offset: u64,
    entries: u64,
    pointer_entries: u64,
    block: Vec<u8>,
    block_offsets: Vec<u64>,
    /// Inline bits of all entries so far, one bit each (bit `i % 8` of byte `i / 8`).
    bitmap: Vec<u8>,
    /// User keys of the checkpoints (every 16th entry), for the index.
    checkpoint_keys: Vec<Vec<u8>>,
    smallest: Vec<u8>,
    last_key: Vec<u8>,
    scratch: Vec<u8>,
}

impl L0TableWriter {
    /// Creates (truncating) the table file at `path`.
    pub fn create(path: &Path, file_number: u64, opts: L0TableOptions) -> Result<Self> {
        if opts.inline_threshold_bytes > u32::MAX as usize || opts.pgm_epsilon == 0 {
            return Err(Error::InvalidArgument(format!(
                "L0 table options {opts:?}: the inline threshold must fit in 32 bits and the \
                 index error bound must be at least 1"
            )));
        }
        let file = File::create(path).map_err(|e| Error::io("create", path, e))?;
        let mut out = BufWriter::with_capacity(64 << 10, file);
        out.write_all(&[0u8; SUPER_LEN])
            .map_err(|e| Error::io("write", path, e))?;
        Ok(L0TableWriter {
            path: path.to_path_buf(),
            out,
            opts,
            file_number,
            offset: SUPER_LEN as u64,
            entries: 0,
            pointer_entries: 0,
            block: Vec::new(),
            block_offsets: Vec::new(),
            bitmap: Vec::new(),
            checkpoint_keys: Vec::new(),
            smallest: Vec::new(),
            last_key: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes the file will have if finished now, roughly (for size-based cuts).
    pub fn estimated_size(&self) -> u64 {
        self.offset + self.block.len() as u64 + self.bitmap.len() as u64
    }

    /// Adds the entry `internal_key` → `value`. Keys must strictly increase in internal-key
    /// order; see [`L0Value`] for which values go with which key kinds.
    pub fn add(&mut self, internal_key: &[u8], value: L0Value<'_>) -> Result<()> {
        let parsed = parse_internal_key(internal_key).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "L0 table entry key of {} bytes is not an internal key",
                internal_key.len()
            ))
        })?;
        if self.entries > 0 && compare_internal(&self.last_key, internal_key) != Ordering::Less {
            return Err(Error::InvalidArgument(
                "L0 table entries must be added in strictly increasing internal-key order".into(),
            ));
        }
        let (kind, stored) = stored_form(parsed.kind, value, self.opts.inline_threshold_bytes)
            .map_err(|why| Error::InvalidArgument(format!("L0 table entry: {why}")))?;
        // The key as stored: the kind may have become Pointer.
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        crate::key::encode_internal_key(&mut key, parsed.user_key, parsed.seq, kind);

        let shared = if self.entries.is_multiple_of(ENTRIES_PER_CHECKPOINT) {
            self.checkpoint_keys.push(user_key(&key).to_vec());
            0
        } else {
            shared_prefix_len(&self.last_key, &key)
        };
        varint::put_u64(&mut self.block, shared as u64);
        varint::put_len_prefixed(&mut self.block, &key[shared..]);
        let inline = match stored {
            L0ValueRef::Inline(b) => {
                varint::put_len_prefixed(&mut self.block, b);
                true
            }
            L0ValueRef::Pointer(p) => {
                put_pointer(&mut self.block, &p);
                self.pointer_entries += 1;
                false
            }
        };
        let i = self.entries;
        if i.is_multiple_of(8) {
            self.bitmap.push(0);
        }
        if inline {
            self.bitmap[(i / 8) as usize] |= 1 << (i % 8);
        }
        if self.entries == 0 {
            self.smallest = key.clone();
        }
        self.scratch = std::mem::replace(&mut self.last_key, key);
        self.entries += 1;
        if self.entries.is_multiple_of(ENTRIES_PER_BLOCK) {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let crc = block_crc(&self.block);
        self.write(&crc.to_le_bytes())?;
        let block = std::mem::take(&mut self.block);
        self.block_offsets.push(self.offset - BLOCK_CRC_LEN as u64);
        self.write(&block)?;
        self.block = block;
        self.block.clear();
        Ok(())
    }

    fn write(&mut self, b: &[u8]) -> Result<()> {
        self.out
            .write_all(b)
            .map_err(|e| Error::io("write", &self.path, e))?;
        self.offset += b.len() as u64;
        Ok(())
    }

    /// Writes the meta blocks, the block offset table, the index and the super block, and
    /// makes the table durable (the file and its directory synced).
    pub fn finish(mut self) -> Result<L0TableMeta> {
        self.flush_block()?;
        debug_assert_eq!(
            self.block_offsets.len() as u64,
            pieces(self.entries, ENTRIES_PER_BLOCK)
        );
        let meta_offset = self.offset;
        // Meta blocks: the bitmap in 128-byte pieces, the last zero-padded, each checksummed.
        let nmeta = pieces(self.entries, ENTRIES_PER_META) as usize;
        self.bitmap.resize(nmeta * META_BITMAP_LEN, 0);
        let bitmap = std::mem::take(&mut self.bitmap);
        for piece in bitmap.chunks(META_BITMAP_LEN) {
            self.write(piece)?;
            self.write(&mask_crc(crc32c::crc32c(piece)).to_le_bytes())?;
        }
        let block_table_offset = self.offset;
        let mut table = Vec::with_capacity(self.block_offsets.len() * 8 + 4);
        for off in &self.block_offsets {
            table.extend_from_slice(&off.to_le_bytes());
        }
        table.extend_from_slice(&mask_crc(crc32c::crc32c(&table)).to_le_bytes());
        self.write(&table)?;
        let index_offset = self.offset;
        let index = self.encode_index();
        self.write(&index)?;
        let sb = SuperBlock {
            inline_threshold: self.opts.inline_threshold_bytes as u32,
            file_number: self.file_number,
            entries: self.entries,
            meta_offset,
            block_table_offset,
            index_offset,
            file_len: self.offset,
        };
        let path = self.path;
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::io("write", &path, e.into_error()))?;
        file.write_all_at(&sb.encode(), 0)
            .map_err(|e| Error::io("write super block", &path, e))?;
        file.sync_all().map_err(|e| Error::io("fsync", &path, e))?;
        sync_dir(&path)?;
        Ok(L0TableMeta {
            file_number: self.file_number,
            file_size: sb.file_len,
            entries: self.entries,
            smallest: self.smallest,
            largest: if self.entries == 0 {
                Vec::new()
            } else {
                self.last_key
            },
            pointer_entries: self.pointer_entries,
        })
    }

    /// The index section: the prefix every checkpoint user key shares, the PGM over the
    /// checkpoint user keys past that prefix, and a checksum.
    fn encode_index(&self) -> Vec<u8> {
        let ck = &self.checkpoint_keys;
        let prefix: &[u8] = match (ck.first(), ck.last()) {
            (Some(f), Some(l)) => &f[..shared_prefix_len(f, l)],
            _ => &[],
        };
        let mapped: Vec<u64> = ck.iter().map(|k| key_to_u64(k, prefix.len())).collect();
        let pgm = Pgm::build(&mapped, self.opts.pgm_epsilon);
        let mut out = Vec::new();
        varint::put_len_prefixed(&mut out, prefix);
        pgm.encode(&mut out);
        out.extend_from_slice(&mask_crc(crc32c::crc32c(&out)).to_le_bytes());
        out
    }
}

/// Syncs the directory holding `path`, so the file's creation survives a crash.
fn sync_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync directory", dir, e))
}
