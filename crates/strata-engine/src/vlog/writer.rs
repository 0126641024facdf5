//! [`VlogWriter`]: appends commit groups to the head value-log file through a user-space
//! buffer (WiscKey 3.4.1) holding the bytes `[buf_start, position)` of the file, or, without
//! one (the default), straight to the file with each separated value written from the
//! caller's batch. When the buffer reaches the OS, how readers read still-buffered entries,
//! and why a failed write stops the writer: `docs/design.md` §8.2.

use super::format::{
    encode_entry, encode_entry_head, file_header, EntryKind, FrameHeader, ValuePointer,
    FORMAT_VERSION, FRAME_HEADER_LEN, MAX_FRAME_BODY,
};
use super::{HeadShared, VlogFile};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::io::{Fs, WritableFile};
use crate::key::ValueKind;
use smallvec::SmallVec;
use std::io::IoSlice;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Creates a new head value-log file at `path`: appended to through a shared mapping when
/// `mapped` (`Options::vlog_head_mmap`) and the file system can, else with `write` calls.
pub fn create_head_file(fs: &dyn Fs, path: &Path, mapped: bool) -> Result<Box<dyn WritableFile>> {
    crate::io::create_append_file(fs, path, mapped)
}

pub struct VlogWriter {
    file: Box<dyn WritableFile>,
    entry: Arc<VlogFile>,
    shared: Arc<HeadShared>,
    buf: Vec<u8>,
    buf_start: u64,
    buffer_bytes: usize,
    /// Bytes of the file known durable (the position at the last successful sync): the
    /// watermark each frame header carries (`docs/format/vlog.md` section 2).
    synced: u64,
    /// The position after the last sync mark ([`VlogWriter::seal`]).
    sealed_at: Option<u64>,
    failed: Option<Error>,
}

/// What appending one group produced.
pub struct Appended {
    /// Per batch record, in order: where its value went if it was separated.
    pub pointers: Vec<Option<ValuePointer>>,
    /// Bytes appended (frame header included).
    pub bytes: u64,
    /// Bytes of separated entries, which become live once the memtable is flushed.
    pub separated_bytes: u64,
}

impl VlogWriter {
    /// Starts the empty file `file` (registered as `entry`): the file header goes into the
    /// buffer.
    pub fn new(
        file: Box<dyn WritableFile>,
        entry: Arc<VlogFile>,
        shared: Arc<HeadShared>,
        buffer_bytes: usize,
    ) -> Self {
        let mut buf = Vec::with_capacity(buffer_bytes.min(4 << 20) + 4096);
        buf.extend_from_slice(&file_header(FORMAT_VERSION));
        shared.flushed.store(0, Ordering::Release);
        shared.number.store(entry.number, Ordering::Release);
        entry.size.store(buf.len() as u64, Ordering::Relaxed);
        VlogWriter {
            file,
            entry,
            shared,
            buf,
            buf_start: 0,
            buffer_bytes,
            synced: 0,
            sealed_at: None,
            failed: None,
        }
    }

    pub fn number(&self) -> u64 {
        self.entry.number
    }

    /// Offset where the next frame will start.
    pub fn position(&self) -> u64 {
        self.buf_start + self.buf.len() as u64
    }

    /// Appends the records of `batches` (a commit group's, in order; sequence numbers from
    /// `first_seq`) as one frame. Puts of `threshold` bytes or more become separated entries.
    ///
    /// Without a buffer (`buffer_bytes` 0) the frame goes to the file at once, its separated
    /// values straight from the batches (one `writev`): only the heads, keys and small
    /// entries are assembled here, so a large value is copied once, into the page cache.
    pub fn append_group(
        &mut self,
        batches: &[WriteBatch],
        first_seq: u64,
        threshold: usize,
        replay: bool,
    ) -> Result<Appended> {
        self.check()?;
        let direct = self.buffer_bytes == 0;
        let frame_at = self.buf.len();
        let file_frame_at = self.position();
        self.buf.extend_from_slice(&[0u8; FRAME_HEADER_LEN]);
        let records: usize = batches.iter().map(|b| b.count() as usize).sum();
        let mut pointers = Vec::with_capacity(records);
        // Direct: the values left out of `buf`, each with the length of `buf` it follows.
        let mut values: SmallVec<[(usize, &[u8]); 4]> = SmallVec::new();
        let mut values_len = 0usize;
        let mut separated_bytes = 0u64;
        let mut count = 0u32;
        for r in batches.iter().flat_map(WriteBatch::iter) {
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    self.buf.truncate(frame_at);
                    return Err(Error::InvalidArgument(format!("malformed batch: {e}")));
                }
            };
            let value = r.value.unwrap_or_default();
            let kind = match r.kind {
                ValueKind::Delete => EntryKind::Delete,
                _ if value.len() >= threshold => EntryKind::Separated,
                _ => EntryKind::Inline,
            };
            let offset = self.position() + values_len as u64;
            let len = if direct && kind == EntryKind::Separated {
                let len = encode_entry_head(&mut self.buf, kind, r.key, value);
                self.buf.extend_from_slice(r.key);
                values.push((self.buf.len(), value));
                values_len += value.len();
                len
            } else {
                encode_entry(&mut self.buf, kind, r.key, value)
            };
            count += 1;
            pointers.push((kind == EntryKind::Separated).then(|| {
                separated_bytes += len as u64;
                ValuePointer {
                    file: self.entry.number,
                    offset,
                    len: len as u32,
                }
            }));
        }
        let body_len = self.buf.len() - frame_at - FRAME_HEADER_LEN + values_len;
        if body_len > MAX_FRAME_BODY
            || pointers
                .iter()
                .flatten()
                .any(|p| p.len as usize > MAX_FRAME_BODY)
        {
            self.buf.truncate(frame_at);
            return Err(Error::InvalidArgument(format!(
                "a commit group of {body_len} bytes exceeds the value log's frame limit"
            )));
        }
        let h = FrameHeader {
            kind: if replay {
                super::format::FRAME_REPLAY
            } else {
                super::format::FRAME_NO_REPLAY
            },
            count,
            body_len: body_len as u32,
            first_seq,
            watermark: self.synced,
        };
        self.buf[frame_at..frame_at + FRAME_HEADER_LEN].copy_from_slice(&h.encode());
        let end = self.position() + values_len as u64;
        let bytes = end - file_frame_at;
        self.entry.size.store(end, Ordering::Relaxed);
        self.shared.appended.fetch_add(bytes, Ordering::Relaxed);
        if direct {
            self.write_direct(&values)?;
        } else if self.buf.len() >= self.buffer_bytes {
            self.flush()?;
        }
        Ok(Appended {
            pointers,
            bytes,
            separated_bytes,
        })
    }

    /// Hands `buf` to the file with `values` in their places (each after the first `at`
    /// bytes of `buf`), in one call, straight from where they are (not copied through the
    /// file's buffer).
    fn write_direct(&mut self, values: &[(usize, &[u8])]) -> Result<()> {
        let written = self.buf.len() + values.iter().map(|(_, v)| v.len()).sum::<usize>();
        let r = {
            let mut parts: SmallVec<[IoSlice<'_>; 9]> =
                SmallVec::with_capacity(2 * values.len() + 1);
            let mut from = 0;
            for &(at, value) in values {
                parts.push(IoSlice::new(&self.buf[from..at]));
                parts.push(IoSlice::new(value));
                from = at;
            }
            parts.push(IoSlice::new(&self.buf[from..]));
            self.file.append_vectored_now(&parts)
        };
        if let Err(e) = r {
            self.failed = Some(e.clone());
            return Err(e);
        }
        self.buf_start += written as u64;
        self.buf.clear();
        self.shared.flushed.store(self.buf_start, Ordering::Release);
        Ok(())
    }

    /// The entry `ptr` if it is still in the buffer.
    pub fn read_buffered(&self, ptr: &ValuePointer) -> Option<Vec<u8>> {
        if ptr.file != self.entry.number || ptr.offset < self.buf_start {
            return None;
        }
        let s = (ptr.offset - self.buf_start) as usize;
        let e = s.checked_add(ptr.len as usize)?;
        self.buf.get(s..e).map(<[u8]>::to_vec)
    }

    /// Hands the buffer to the operating system.
    pub fn flush(&mut self) -> Result<()> {
        self.check()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        self.write_direct(&[])
    }

    /// Syncs, then appends a **sync mark** — a frame of no entries whose watermark covers
    /// every frame before it — and syncs again: at a clean close (see `LogWriter::seal`) and
    /// when the file is rotated (a rotated file must end with its mark, or recovery refuses
    /// it once a later file holds frames). Does nothing more when nothing was appended since
    /// the last mark.
    pub fn seal(&mut self) -> Result<()> {
        self.sync()?;
        if self.sealed_at == Some(self.position()) {
            return Ok(());
        }
        self.buf
            .extend_from_slice(&FrameHeader::sync_mark(self.synced).encode());
        let end = self.position();
        self.entry.size.store(end, Ordering::Relaxed);
        self.shared
            .appended
            .fetch_add(FRAME_HEADER_LEN as u64, Ordering::Relaxed);
        // A mapped head gives back its reserve, so that a sealed file ends at its mark.
        self.flush()?;
        if let Err(e) = self.file.trim() {
            self.failed = Some(e.clone());
            return Err(e);
        }
        self.sync()?;
        self.sealed_at = Some(self.position());
        Ok(())
    }

    /// Flushes and makes every appended byte durable.
    pub fn sync(&mut self) -> Result<()> {
        self.flush()?;
        if let Err(e) = self.file.sync() {
            self.failed = Some(e.clone());
            return Err(e);
        }
        self.synced = self.position();
        Ok(())
    }

    fn check(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
