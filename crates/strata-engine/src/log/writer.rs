//! [`LogWriter`]: appends records to a log file (WAL or MANIFEST).

use super::format::{
    encode_header_parts, file_header, watermark_len, LogKind, BLOCK_SIZE, FORMAT_VERSION,
    HEADER_SIZE, TYPE_FIRST, TYPE_FULL, TYPE_LAST, TYPE_MIDDLE, WATERMARK_LEN,
};
use crate::error::{Error, Result};
use crate::io::WritableFile;
use std::path::Path;

const ZEROS: [u8; HEADER_SIZE + WATERMARK_LEN] = [0; HEADER_SIZE + WATERMARK_LEN];

/// Appends records to a fresh log file.
///
/// Each record is assembled (fragment headers, payload, block trailers) into a reused buffer
/// that is handed to the file once per block's worth of bytes, so a small record costs one
/// `append` and no allocation. Nothing is durable until [`LogWriter::sync`].
///
/// Every record opens with its **sync watermark** (format version 2): the file offset through
/// which the last successful [`LogWriter::sync`] made the file durable. Recovery uses it to
/// tell damage in bytes that were never synced (an unsynced tail, truncated) from damage in
/// synced bytes (corruption, refused): `docs/format/wal.md` section 3. The value is the
/// writer's own state, so it costs no system call.
///
/// After any failed append, flush or sync the writer refuses further work and repeats the
/// first error: how much of the failed write reached the file is unknown, so appending more
/// could leave a hole in the middle of the log.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    /// Bytes already used in the current block.
    block_offset: usize,
    /// Format version written (and so whether records carry a watermark).
    version: u16,
    /// Bytes of the file known durable: the file's size at the last successful sync.
    synced: u64,
    /// The file's size after the last sync mark ([`LogWriter::seal`]).
    sealed_at: Option<u64>,
    /// Reused assembly buffer; never grows much beyond two blocks.
    buf: Vec<u8>,
    failed: Option<Error>,
}

impl LogWriter {
    /// Starts a log in the empty file `file`, writing its file-header record. The log kind
    /// recorded in the header comes from the file name (`MANIFEST-*` is a manifest, anything
    /// else a WAL); use [`LogWriter::with_kind`] to state it explicitly.
    pub fn new(file: Box<dyn WritableFile>) -> Result<Self> {
        let kind = LogKind::for_path(file.path());
        Self::with_kind(file, kind)
    }

    /// Starts a log of kind `kind` in the empty file `file`, writing its file-header record
    /// (not flushed).
    pub fn with_kind(file: Box<dyn WritableFile>, kind: LogKind) -> Result<Self> {
        Self::with_format(file, kind, FORMAT_VERSION)
    }

    /// Starts a log in format `version` (1: records without a watermark, as builds before
    /// version 2 wrote them; kept so tests and fixtures can write the old format).
    pub fn with_format(file: Box<dyn WritableFile>, kind: LogKind, version: u16) -> Result<Self> {
        if file.size() != 0 {
            return Err(Error::InvalidArgument(format!(
                "log file {} is not empty ({} bytes)",
                file.path().display(),
                file.size()
            )));
        }
        let mut w = LogWriter {
            file,
            block_offset: 0,
            version,
            synced: 0,
            sealed_at: None,
            buf: Vec::with_capacity(2 * BLOCK_SIZE),
            failed: None,
        };
        // The file header carries no watermark: the version it states decides that.
        w.append_fragments(&[], &file_header(kind, version))?;
        Ok(w)
    }

    /// Appends one record. The bytes may sit in user-space buffers until
    /// [`LogWriter::flush`] and are durable only after [`LogWriter::sync`].
    pub fn add_record(&mut self, data: &[u8]) -> Result<()> {
        let watermark = self.synced.to_le_bytes();
        let prefix = &watermark[..watermark_len(self.version)];
        self.append_fragments(prefix, data)
    }

    /// Writes `prefix` then `data` as one record. The prefix (the watermark) always lies
    /// whole in the record's first fragment: a record starts only where the block has room
    /// for a header and the prefix, and a shorter end of block is trailer.
    fn append_fragments(&mut self, prefix: &[u8], data: &[u8]) -> Result<()> {
        self.check()?;
        self.buf.clear();
        let mut left = data;
        let mut first = true;
        loop {
            let pre = if first { prefix } else { &[] };
            let room = BLOCK_SIZE - self.block_offset;
            if room < HEADER_SIZE + pre.len() {
                // Not even a header (and the watermark) fits: zero-fill the block's trailer.
                self.buf.extend_from_slice(&ZEROS[..room]);
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - HEADER_SIZE - pre.len();
            let n = left.len().min(avail);
            let last = n == left.len();
            let kind = match (first, last) {
                (true, true) => TYPE_FULL,
                (true, false) => TYPE_FIRST,
                (false, false) => TYPE_MIDDLE,
                (false, true) => TYPE_LAST,
            };
            let (payload, rest) = left.split_at(n);
            self.buf
                .extend_from_slice(&encode_header_parts(kind, pre, payload));
            self.buf.extend_from_slice(pre);
            self.buf.extend_from_slice(payload);
            self.block_offset += HEADER_SIZE + pre.len() + n;
            left = rest;
            first = false;
            if last {
                break;
            }
            if self.buf.len() >= BLOCK_SIZE {
                self.write_buf()?;
            }
        }
        self.write_buf()
    }

    /// Hands buffered bytes to the operating system (not durable).
    pub fn flush(&mut self) -> Result<()> {
        self.check()?;
        let r = self.file.flush();
        self.note(r)
    }

    /// Makes every record added so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.check()?;
        let r = self.file.sync();
        if r.is_ok() {
            self.synced = self.file.size();
        }
        self.note(r)
    }

    /// Syncs, then (format 2) appends a **sync mark** — a record with no data, whose
    /// watermark covers every record before it — and syncs again. Called at a clean close:
    /// without it the last records before the final sync would have no later watermark
    /// covering them, and damage to them would read as an unsynced tail. Does nothing more
    /// when nothing was appended since the last mark.
    pub fn seal(&mut self) -> Result<()> {
        self.sync()?;
        if watermark_len(self.version) == 0 || self.sealed_at == Some(self.file.size()) {
            return Ok(());
        }
        self.add_record(&[])?;
        self.flush()?;
        // A mapped log (`Options::wal_mmap`) gives back its zero-filled reserve; the sync
        // below makes the length durable with the seal.
        let r = self.file.trim();
        self.note(r)?;
        self.sync()?;
        self.sealed_at = Some(self.file.size());
        Ok(())
    }

    /// The watermark the next record will carry: bytes known durable.
    pub fn synced_size(&self) -> u64 {
        self.synced
    }

    /// Bytes written to the file so far, file header included.
    pub fn size(&self) -> u64 {
        self.file.size()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    fn write_buf(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let r = self.file.append(&self.buf);
        self.buf.clear();
        self.note(r)
    }

    fn check(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn note(&mut self, r: Result<()>) -> Result<()> {
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }
}
