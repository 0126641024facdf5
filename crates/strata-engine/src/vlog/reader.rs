//! [`FrameReader`]: reads the frames of a value-log file in order, for recovery, GC and
//! `check`. The recovery rule is the WAL's (`docs/format/wal.md` section 3, restated for
//! frames in `docs/format/vlog.md`):
//!
//! - a zero-filled tail or the end of the file at a frame boundary is a clean end;
//! - a zero-filled frame header followed by non-zero bytes is a **hole** (unsynced writes
//!   that reached the disk out of order) and ends the log like a torn tail;
//! - a damaged frame (bad header, cut-off body, any bad entry, wrong entry count) with no
//!   valid frame anywhere after it is a **torn tail**: the frames before it are the log,
//!   [`FrameReader::truncated_tail`] reports where it was cut;
//! - a damaged frame followed by a valid frame is **corruption** ([`Error::Corruption`]):
//!   valid data after damage cannot be an unsynced tail.

use super::format::{
    check_file_header, decode_entry, Entry, FrameHeader, FILE_HEADER_LEN, FRAME_HEADER_LEN,
};
use crate::error::{Error, Result};
use crate::io::RandomAccessFile;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes read from the file at a time.
const CHUNK: usize = 1 << 20;

/// One frame: its header, and its body as read.
pub struct Frame {
    /// File offset of the frame header.
    pub offset: u64,
    pub header: FrameHeader,
    body: Vec<u8>,
}

impl Frame {
    /// File offset of the first entry.
    pub fn body_offset(&self) -> u64 {
        self.offset + FRAME_HEADER_LEN as u64
    }

    /// The entries with their file offsets. The reader verified every one.
    pub fn entries(&self) -> impl Iterator<Item = (u64, Entry<'_>)> + '_ {
        let base = self.body_offset();
        let mut at = 0usize;
        std::iter::from_fn(move || {
            if at >= self.body.len() {
                return None;
            }
            let e = decode_entry(&self.body[at..]).ok()?;
            let off = base + at as u64;
            at += e.len;
            Some((off, e))
        })
    }

    /// Bytes of the frame, header included.
    pub fn len(&self) -> u64 {
        (FRAME_HEADER_LEN + self.body.len()) as u64
    }

    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }
}

/// Checks that `body` holds exactly `count` valid entries.
fn check_body(body: &[u8], count: u32) -> std::result::Result<(), &'static str> {
    let mut at = 0usize;
    let mut n = 0u32;
    while at < body.len() {
        let e = decode_entry(&body[at..])?;
        at += e.len;
        n += 1;
        if n > count {
            return Err("frame holds more entries than its header says");
        }
    }
    if n != count {
        return Err("frame holds fewer entries than its header says");
    }
    Ok(())
}

/// Sequential reader of one value-log file.
pub struct FrameReader {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    end: u64,
    pos: u64,
    /// Bytes `[buf_start, buf_start + buf.len())` of the file.
    buf: Vec<u8>,
    buf_start: u64,
    torn: Option<(u64, String)>,
    done: bool,
    bytes_read: u64,
}

impl FrameReader {
    /// Reads `file` (of `size` bytes) from offset `start` (0 = the beginning: the file header
    /// is checked first; otherwise `start` must be a frame boundary).
    pub fn new(file: Arc<dyn RandomAccessFile>, path: &Path, size: u64, start: u64) -> Self {
        FrameReader {
            file,
            path: path.to_path_buf(),
            end: size,
            pos: start,
            buf: Vec::new(),
            buf_start: start,
            torn: None,
            done: false,
            bytes_read: 0,
        }
    }

    /// Where a torn tail was cut, and why; `None` if the log ended cleanly.
    pub fn truncated_tail(&self) -> Option<(u64, String)> {
        self.torn.clone()
    }

    /// Offset just after the last frame returned (where a torn tail starts).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Bytes read from the file so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Makes `[at, at + n)` available in `buf`; false if the file ends before.
    fn fill(&mut self, at: u64, n: usize) -> Result<bool> {
        let want_end = at + n as u64;
        if want_end > self.end {
            return Ok(false);
        }
        let have_end = self.buf_start + self.buf.len() as u64;
        if at >= self.buf_start && want_end <= have_end {
            return Ok(true);
        }
        // Drop what lies before `at`, then read up to a chunk past what is needed.
        if at >= self.buf_start && at <= have_end {
            self.buf.drain(..(at - self.buf_start) as usize);
        } else {
            self.buf.clear();
        }
        self.buf_start = at;
        let from = self.buf_start + self.buf.len() as u64;
        let to = (want_end.max(from + CHUNK as u64)).min(self.end);
        if to > from {
            let old = self.buf.len();
            self.buf.resize(old + (to - from) as usize, 0);
            self.file.read_at(from, &mut self.buf[old..])?;
            self.bytes_read += to - from;
        }
        Ok(true)
    }

    fn slice(&self, at: u64, n: usize) -> &[u8] {
        let s = (at - self.buf_start) as usize;
        &self.buf[s..s + n]
    }

    /// The frame at `at` if it is whole and valid.
    fn frame_at(&mut self, at: u64) -> Result<std::result::Result<Frame, &'static str>> {
        if !self.fill(at, FRAME_HEADER_LEN)? {
            return Ok(Err("frame header cut off by the end of the file"));
        }
        let h = match FrameHeader::decode(self.slice(at, FRAME_HEADER_LEN)) {
            Ok(h) => h,
            Err(r) => return Ok(Err(r)),
        };
        let body_at = at + FRAME_HEADER_LEN as u64;
        if !self.fill(body_at, h.body_len as usize)? {
            return Ok(Err("frame body cut off by the end of the file"));
        }
        let body = self.slice(body_at, h.body_len as usize);
        if let Err(r) = check_body(body, h.count) {
            return Ok(Err(r));
        }
        Ok(Ok(Frame {
            offset: at,
            header: h,
            body: body.to_vec(),
        }))
    }

    /// Whether every byte from `at` to the end of the file is zero.
    fn zero_from(&mut self, at: u64) -> Result<bool> {
        let mut p = at;
        while p < self.end {
            let n = ((self.end - p) as usize).min(CHUNK);
            self.fill(p, n)?;
            if self.slice(p, n).iter().any(|b| *b != 0) {
                return Ok(false);
            }
            p += n as u64;
        }
        Ok(true)
    }

    /// Whether the frame header at `at` is all zeros (and whole).
    fn zero_header_at(&mut self, at: u64) -> Result<bool> {
        Ok(self.fill(at, FRAME_HEADER_LEN)?
            && self.slice(at, FRAME_HEADER_LEN).iter().all(|b| *b == 0))
    }

    /// Whether a valid frame starts anywhere after `at`.
    fn valid_frame_after(&mut self, at: u64) -> Result<bool> {
        let mut p = at + 1;
        while p + FRAME_HEADER_LEN as u64 <= self.end {
            self.fill(p, FRAME_HEADER_LEN)?;
            let h = self.slice(p, FRAME_HEADER_LEN);
            // Cheap rejections before the checksum.
            if (h[4] == 1 || h[4] == 2) && h[5..8] == [0, 0, 0] {
                if let Ok(Ok(_)) = self.frame_at(p) {
                    return Ok(true);
                }
            }
            p += 1;
        }
        Ok(false)
    }

    fn check_header(&mut self) -> Result<bool> {
        if self.end < FILE_HEADER_LEN as u64 {
            // A header torn by a crash: the file never held a synced frame.
            self.torn = Some((0, "file header cut off".into()));
            return Ok(false);
        }
        self.fill(0, FILE_HEADER_LEN)?;
        let h = self.slice(0, FILE_HEADER_LEN).to_vec();
        if let Err(e) = check_file_header(&h, &self.path) {
            if self.end == FILE_HEADER_LEN as u64 || self.zero_from(0)? {
                self.torn = Some((0, e.to_string()));
                return Ok(false);
            }
            return Err(e);
        }
        self.pos = FILE_HEADER_LEN as u64;
        Ok(true)
    }

    /// The next frame; `Ok(None)` at the end of the log (clean or torn).
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        if self.done {
            return Ok(None);
        }
        if self.pos == 0 && !self.check_header()? {
            self.done = true;
            return Ok(None);
        }
        if self.pos >= self.end {
            self.done = true;
            return Ok(None);
        }
        let at = self.pos;
        match self.frame_at(at)? {
            Ok(f) => {
                self.pos = at + f.len();
                Ok(Some(f))
            }
            Err(reason) => {
                self.done = true;
                if self.zero_from(at)? {
                    return Ok(None);
                }
                if self.zero_header_at(at)? {
                    // The writer never writes a zero frame header: a hole, bytes that never
                    // reached the disk while later ones did (unsynced pages are written back
                    // in any order). Everything from here on was unsynced, so the log ends.
                    self.torn = Some((
                        at,
                        "zero-filled hole where a frame header belongs, followed by unsynced \
                         writes that reached the disk out of order"
                            .to_string(),
                    ));
                    return Ok(None);
                }
                if self.valid_frame_after(at)? {
                    return Err(Error::corruption(
                        &self.path,
                        at,
                        format!("{reason}, followed by valid frames"),
                    ));
                }
                self.torn = Some((at, reason.to_string()));
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::*;
    use super::*;
    use crate::io::{Fs, MemFs};

    fn frame(first_seq: u64, entries: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (k, v) in entries {
            encode_entry(&mut body, EntryKind::Separated, k, v);
        }
        let h = FrameHeader {
            kind: FRAME_REPLAY,
            count: entries.len() as u32,
            body_len: body.len() as u32,
            first_seq,
        };
        let mut out = h.encode().to_vec();
        out.extend(body);
        out
    }

    type Read = (Vec<u64>, Option<(u64, String)>);

    fn read_all(data: &[u8]) -> Result<Read> {
        let fs = MemFs::new();
        let p = Path::new("/f.vlog");
        fs.write_all_synced(p, data).unwrap();
        let f = fs.open(p).unwrap();
        let mut r = FrameReader::new(f, p, data.len() as u64, 0);
        let mut seqs = Vec::new();
        while let Some(fr) = r.next_frame()? {
            seqs.push(fr.header.first_seq);
            assert_eq!(fr.entries().count() as u32, fr.header.count);
        }
        Ok((seqs, r.truncated_tail()))
    }

    #[test]
    fn torn_tail_versus_corruption() {
        let mut file = file_header().to_vec();
        let f1 = frame(1, &[(b"a", b"1"), (b"b", b"2")]);
        let f2 = frame(3, &[(b"c", b"3")]);
        let f3 = frame(4, &[(b"d", b"4")]);
        file.extend(&f1);
        let f2_at = file.len();
        file.extend(&f2);
        file.extend(&f3);
        assert_eq!(read_all(&file).unwrap(), (vec![1, 3, 4], None));
        // Every cut inside the last frame is a torn tail.
        let last_at = file.len() - f3.len();
        for cut in last_at + 1..file.len() {
            let (seqs, torn) = read_all(&file[..cut]).unwrap();
            assert_eq!(seqs, vec![1, 3]);
            assert_eq!(torn.unwrap().0, last_at as u64);
        }
        // Zero tail is a clean end.
        let mut z = file.clone();
        z.extend([0u8; 100]);
        assert_eq!(read_all(&z).unwrap(), (vec![1, 3, 4], None));
        // Damage in the middle, with a valid frame after it, is corruption.
        for i in f2_at..f2_at + f2.len() {
            let mut d = file.clone();
            d[i] ^= 0x40;
            let e = read_all(&d).unwrap_err();
            assert!(e.is_corruption(), "{e}");
        }
        // Damage in the last frame is a torn tail.
        let mut d = file.clone();
        let n = d.len();
        d[n - 1] ^= 1;
        assert_eq!(read_all(&d).unwrap().0, vec![1, 3]);
        // A zero-filled frame followed by a valid one: a hole left by out-of-order writeback
        // of unsynced pages; the log ends at it.
        let mut hole = file.clone();
        hole[f2_at..f2_at + f2.len()].fill(0);
        let (seqs, torn) = read_all(&hole).unwrap();
        assert_eq!(seqs, vec![1]);
        let (at, reason) = torn.unwrap();
        assert_eq!(at, f2_at as u64);
        assert!(reason.contains("hole"), "{reason}");
        // A bad file header on a file with data is corruption; an empty file is an empty log.
        let mut h = file.clone();
        h[0] ^= 1;
        assert!(read_all(&h).unwrap_err().is_corruption());
        assert_eq!(read_all(&[]).unwrap().0, Vec::<u64>::new());
        assert_eq!(read_all(&file[..10]).unwrap().0, Vec::<u64>::new());
    }
}
