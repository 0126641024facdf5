//! The record log shared by the WAL and the MANIFEST (LevelDB's log format plus a file
//! header; byte layout in `docs/format/wal.md`).
//!
//! A log file is a sequence of [`BLOCK_SIZE`] blocks. A record is split into fragments that
//! never cross a block boundary, each with a 7-byte header
//! `masked crc32c (u32 LE) | length (u16 LE) | type (u8)`; a block's last < 7 bytes are
//! zero-filled. The first record of every file is a file header (magic, format version, log
//! kind), written by [`LogWriter`] and checked by [`LogReader`]; it is not returned as a
//! record.

mod format;
mod reader;
mod writer;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod watermark_tests;

pub use format::{
    mask_crc, unmask_crc, LogKind, BLOCK_SIZE, FILE_HEADER_LEN, FILE_MAGIC, FORMAT_VERSION,
    FORMAT_VERSION_NO_WATERMARK, HEADER_SIZE, WATERMARK_LEN,
};
pub use reader::LogReader;
pub use writer::LogWriter;
