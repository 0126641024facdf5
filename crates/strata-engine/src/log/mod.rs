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

/// What recovery did with one log file (WAL, MANIFEST or value-log file): an entry of
/// `RecoveryInfo::logs`, so an operator can see what a crash cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecovery {
    /// The file.
    pub path: std::path::PathBuf,
    /// Records replayed: WAL batches, MANIFEST edits, or value-log frames.
    pub records: u64,
    /// The file's size when it was read.
    pub file_bytes: u64,
    /// Bytes dropped as an unsynced tail: from the tail's offset to the end of the file.
    pub truncated_bytes: u64,
    /// Where the unsynced tail began and why it was taken for one (`None`: a clean end).
    pub tail: Option<(u64, String)>,
}

impl LogRecovery {
    /// The entry for `path` of `file_bytes` bytes after `records` records and `tail`.
    pub fn new(
        path: &std::path::Path,
        records: u64,
        file_bytes: u64,
        tail: Option<(u64, String)>,
    ) -> Self {
        let truncated_bytes = tail
            .as_ref()
            .map_or(0, |(at, _)| file_bytes.saturating_sub(*at));
        LogRecovery {
            path: path.to_path_buf(),
            records,
            file_bytes,
            truncated_bytes,
            tail,
        }
    }
}

impl std::fmt::Display for LogRecovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} records replayed of {} bytes",
            self.path.display(),
            self.records,
            self.file_bytes
        )?;
        match &self.tail {
            Some((at, reason)) => write!(
                f,
                "; {} bytes of unsynced tail dropped from offset {at} ({reason})",
                self.truncated_bytes
            ),
            None => write!(f, "; clean end"),
        }
    }
}
