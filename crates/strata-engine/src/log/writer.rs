//! [`LogWriter`]: appends records to a log file (WAL or MANIFEST).

use super::format::{
    encode_header, file_header, LogKind, BLOCK_SIZE, HEADER_SIZE, TYPE_FIRST, TYPE_FULL, TYPE_LAST,
    TYPE_MIDDLE,
};
use crate::error::{Error, Result};
use crate::io::WritableFile;
use std::path::Path;

const ZEROS: [u8; HEADER_SIZE] = [0; HEADER_SIZE];

/// Appends records to a fresh log file.
///
/// Each record is assembled (fragment headers, payload, block trailers) into a reused buffer
/// that is handed to the file once per block's worth of bytes, so a small record costs one
/// `append` and no allocation. Nothing is durable until [`LogWriter::sync`].
///
/// After any failed append, flush or sync the writer refuses further work and repeats the
/// first error: how much of the failed write reached the file is unknown, so appending more
/// could leave a hole in the middle of the log.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    /// Bytes already used in the current block.
    block_offset: usize,
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
            buf: Vec::with_capacity(2 * BLOCK_SIZE),
            failed: None,
        };
        w.add_record(&file_header(kind))?;
        Ok(w)
    }

    /// Appends one record. The bytes may sit in user-space buffers until
    /// [`LogWriter::flush`] and are durable only after [`LogWriter::sync`].
    pub fn add_record(&mut self, data: &[u8]) -> Result<()> {
        self.check()?;
        self.buf.clear();
        let mut left = data;
        let mut first = true;
        loop {
            let room = BLOCK_SIZE - self.block_offset;
            if room < HEADER_SIZE {
                // Not even a header fits: zero-fill the block's trailer.
                self.buf.extend_from_slice(&ZEROS[..room]);
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let n = left.len().min(avail);
            let last = n == left.len();
            let kind = match (first, last) {
                (true, true) => TYPE_FULL,
                (true, false) => TYPE_FIRST,
                (false, false) => TYPE_MIDDLE,
                (false, true) => TYPE_LAST,
            };
            let (payload, rest) = left.split_at(n);
            self.buf.extend_from_slice(&encode_header(kind, payload));
            self.buf.extend_from_slice(payload);
            self.block_offset += HEADER_SIZE + n;
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
        self.note(r)
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
