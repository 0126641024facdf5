//! The fixed pieces of the L0 table format shared by the writer and the reader: the super
//! block, entry-block checksums, the value pointer, the meta-block size.
//!
//! Specification: `docs/format/l0-tier.md`. Every constant here is on-disk: do not change
//! one without bumping [`FORMAT_VERSION`].

use crate::error::{Error, Result};
use crate::log::{mask_crc, unmask_crc};
use crate::vlog::ValuePointer;
use std::path::Path;

/// The first 8 bytes of every L0 table.
pub const MAGIC: [u8; 8] = *b"STRATL0T";
/// The format version this build writes and the only one it reads.
pub const FORMAT_VERSION: u16 = 1;
/// Table type of a table of entries (the only type so far). On-disk: do not renumber; 0 is
/// reserved so that a zeroed super block is never valid.
pub const TABLE_TYPE_ENTRIES: u8 = 1;
/// Bytes of the super block; entry blocks start right after it.
pub const SUPER_LEN: usize = 72;
/// Entries per entry block (the last block may hold fewer).
pub const ENTRIES_PER_BLOCK: u64 = 8;
/// Entries per checkpoint group: the first entry of a group stores its whole key, the others
/// only what differs from the previous key. A group is two entry blocks.
pub const ENTRIES_PER_CHECKPOINT: u64 = 16;
/// Entries whose inline bits one meta block holds.
pub const ENTRIES_PER_META: u64 = 1024;
/// Bytes of a meta block's bitmap.
pub const META_BITMAP_LEN: usize = (ENTRIES_PER_META / 8) as usize;
/// Bytes of a meta block: the bitmap and its masked crc32c.
pub const META_BLOCK_LEN: usize = META_BITMAP_LEN + 4;
/// Bytes of a stored value pointer: log file number (u64), offset (u64), length (u32).
pub const POINTER_LEN: usize = 20;
/// Bytes of the checksum that opens every entry block.
pub const BLOCK_CRC_LEN: usize = 4;

/// The decoded super block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SuperBlock {
    pub inline_threshold: u32,
    pub file_number: u64,
    pub entries: u64,
    pub meta_offset: u64,
    pub block_table_offset: u64,
    pub index_offset: u64,
    pub file_len: u64,
}

impl SuperBlock {
    pub fn encode(&self) -> [u8; SUPER_LEN] {
        let mut b = [0u8; SUPER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[10] = TABLE_TYPE_ENTRIES;
        b[12..16].copy_from_slice(&self.inline_threshold.to_le_bytes());
        b[16..24].copy_from_slice(&self.file_number.to_le_bytes());
        b[24..32].copy_from_slice(&self.entries.to_le_bytes());
        b[32..40].copy_from_slice(&self.meta_offset.to_le_bytes());
        b[40..48].copy_from_slice(&self.block_table_offset.to_le_bytes());
        b[48..56].copy_from_slice(&self.index_offset.to_le_bytes());
        b[56..64].copy_from_slice(&self.file_len.to_le_bytes());
        let crc = mask_crc(crc32c::crc32c(&b[..SUPER_LEN - 4]));
        b[SUPER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a super block: magic, checksum, version, type, reserved bytes.
    /// Section bounds are checked by the reader, which knows the file's length.
    pub fn decode(b: &[u8], path: &Path) -> Result<SuperBlock> {
        let corrupt = |offset: u64, reason: String| Error::corruption(path, offset, reason);
        if b.len() < SUPER_LEN {
            return Err(corrupt(
                0,
                format!("file of {} bytes is shorter than a super block", b.len()),
            ));
        }
        if b[0..8] != MAGIC {
            return Err(corrupt(0, "bad magic: not an L0 table".into()));
        }
        let stored = unmask_crc(le_u32(&b[SUPER_LEN - 4..]));
        let actual = crc32c::crc32c(&b[..SUPER_LEN - 4]);
        if stored != actual {
            return Err(corrupt(
                (SUPER_LEN - 4) as u64,
                format!("super block checksum mismatch: stored {stored:#x}, computed {actual:#x}"),
            ));
        }
        let version = u16::from_le_bytes([b[8], b[9]]);
        if version != FORMAT_VERSION {
            return Err(Error::NotSupported(format!(
                "L0 table {} has format version {version}; this build reads {FORMAT_VERSION}",
                path.display()
            )));
        }
        if b[10] != TABLE_TYPE_ENTRIES || b[11] != 0 || le_u32(&b[64..68]) != 0 {
            return Err(corrupt(
                10,
                "unknown table type or nonzero reserved bytes".into(),
            ));
        }
        Ok(SuperBlock {
            inline_threshold: le_u32(&b[12..16]),
            file_number: le_u64(&b[16..24]),
            entries: le_u64(&b[24..32]),
            meta_offset: le_u64(&b[32..40]),
            block_table_offset: le_u64(&b[40..48]),
            index_offset: le_u64(&b[48..56]),
            file_len: le_u64(&b[56..64]),
        })
    }
}

/// The masked crc32c stored at the start of an entry block: over the block's entry bytes.
pub fn block_crc(entry_bytes: &[u8]) -> u32 {
    mask_crc(crc32c::crc32c(entry_bytes))
}

/// Appends a value pointer in its fixed 20-byte form.
pub fn put_pointer(out: &mut Vec<u8>, p: &ValuePointer) {
    out.extend_from_slice(&p.file.to_le_bytes());
    out.extend_from_slice(&p.offset.to_le_bytes());
    out.extend_from_slice(&p.len.to_le_bytes());
}

/// Reads a value pointer from exactly [`POINTER_LEN`] bytes.
pub fn get_pointer(b: &[u8]) -> ValuePointer {
    ValuePointer {
        file: le_u64(&b[0..8]),
        offset: le_u64(&b[8..16]),
        len: le_u32(&b[16..20]),
    }
}

/// Little-endian u32 of the first 4 bytes of `b` (callers slice exactly).
pub fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

/// Little-endian u64 of the first 8 bytes of `b` (callers slice exactly).
pub fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// Number of `per`-sized pieces `n` items need.
pub fn pieces(n: u64, per: u64) -> u64 {
    n.div_ceil(per)
}
