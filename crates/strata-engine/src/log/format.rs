//! On-disk constants of the record log, shared by [`super::LogWriter`] and
//! [`super::LogReader`]. The byte layout is specified in `docs/format/wal.md`.

use std::path::Path;

/// Size of one block of a log file. Fragments never cross a block boundary.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Bytes of a fragment header: `masked crc32c: u32 LE | length: u16 LE | type: u8`.
pub const HEADER_SIZE: usize = 7;

/// Fragment types. On-disk: do not renumber. 0 is reserved (zero padding / preallocation).
pub(crate) const TYPE_ZERO: u8 = 0;
pub(crate) const TYPE_FULL: u8 = 1;
pub(crate) const TYPE_FIRST: u8 = 2;
pub(crate) const TYPE_MIDDLE: u8 = 3;
pub(crate) const TYPE_LAST: u8 = 4;

/// Magic number opening the file-header record of every log file.
pub const FILE_MAGIC: [u8; 8] = *b"STRATLOG";

/// The log format version this build writes: every record after the file header opens with
/// its sync watermark ([`WATERMARK_LEN`] bytes). Version 1 (no watermark) is still read.
pub const FORMAT_VERSION: u16 = 2;

/// The first format version, without watermarks: read, never written by the engine.
pub const FORMAT_VERSION_NO_WATERMARK: u16 = 1;

/// Bytes of the sync watermark that opens every record of a version-2 log: the offset through
/// which the file was known synced when the record was written (u64 LE).
pub const WATERMARK_LEN: usize = 8;

/// Payload bytes of the file-header record:
/// `magic: [u8; 8] | version: u16 LE | kind: u8 | reserved: u8 (0)`.
pub const FILE_HEADER_LEN: usize = 12;

/// What a log file holds; stored in the file-header record. On-disk: do not renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LogKind {
    /// A write-ahead log (`NNNNNN.log`): each record is a `WriteBatch` representation.
    Wal = 1,
    /// A MANIFEST (`MANIFEST-NNNNNN`): each record is one encoded `VersionEdit`.
    Manifest = 2,
}

impl LogKind {
    /// Decodes a kind byte; `None` for unknown kinds.
    pub fn from_u8(b: u8) -> Option<LogKind> {
        match b {
            1 => Some(LogKind::Wal),
            2 => Some(LogKind::Manifest),
            _ => None,
        }
    }

    /// The kind implied by a file name: `MANIFEST-*` is a manifest, anything else a WAL.
    pub fn for_path(path: &Path) -> LogKind {
        let is_manifest = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("MANIFEST-"));
        if is_manifest {
            LogKind::Manifest
        } else {
            LogKind::Wal
        }
    }
}

/// Encodes the payload of the file-header record of a log in format `version`.
pub(crate) fn file_header(kind: LogKind, version: u16) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(&FILE_MAGIC);
    h[8..10].copy_from_slice(&version.to_le_bytes());
    h[10] = kind as u8;
    h
}

/// Bytes of the watermark that opens each record of a log in format `version`.
pub(crate) fn watermark_len(version: u16) -> usize {
    if version >= FORMAT_VERSION {
        WATERMARK_LEN
    } else {
        0
    }
}

/// Parses the payload of a file-header record into (kind, format version); `Err(reason)` if
/// it is not one this build reads.
pub(crate) fn parse_file_header(payload: &[u8]) -> Result<(LogKind, u16), String> {
    if payload.len() != FILE_HEADER_LEN || payload[..8] != FILE_MAGIC {
        return Err("missing or bad log file header (not a Strata log file)".into());
    }
    let version = u16::from_le_bytes([payload[8], payload[9]]);
    if version != FORMAT_VERSION && version != FORMAT_VERSION_NO_WATERMARK {
        return Err(format!(
            "unsupported log format version {version} (this build reads \
             {FORMAT_VERSION_NO_WATERMARK} and {FORMAT_VERSION})"
        ));
    }
    if payload[11] != 0 {
        return Err(format!(
            "non-zero reserved byte {} in log file header",
            payload[11]
        ));
    }
    let kind =
        LogKind::from_u8(payload[10]).ok_or_else(|| format!("unknown log kind {}", payload[10]))?;
    Ok((kind, version))
}

const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a crc so that a crc computed over data that itself contains crcs stays well mixed
/// (LevelDB's rule: rotate right by 15, add a constant).
#[inline]
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask_crc`].
#[inline]
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The masked checksum stored in a fragment header: crc32c over the type byte, then the payload.
#[inline]
pub(crate) fn fragment_crc(kind: u8, payload: &[u8]) -> u32 {
    mask_crc(crc32c::crc32c_append(crc32c::crc32c(&[kind]), payload))
}

/// Builds a fragment header on the stack.
#[cfg(test)]
pub(crate) fn encode_header(kind: u8, payload: &[u8]) -> [u8; HEADER_SIZE] {
    encode_header_parts(kind, &[], payload)
}

/// Builds the header of a fragment whose payload is `prefix` then `payload` (a record's
/// watermark then its first bytes), without joining them.
#[inline]
pub(crate) fn encode_header_parts(kind: u8, prefix: &[u8], payload: &[u8]) -> [u8; HEADER_SIZE] {
    let len = prefix.len() + payload.len();
    debug_assert!(len <= BLOCK_SIZE - HEADER_SIZE);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[kind]), prefix);
    let crc = mask_crc(crc32c::crc32c_append(crc, payload));
    let mut h = [0u8; HEADER_SIZE];
    h[..4].copy_from_slice(&crc.to_le_bytes());
    h[4..6].copy_from_slice(&(len as u16).to_le_bytes());
    h[6] = kind;
    h
}
