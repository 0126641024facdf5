//! [`FrameReader`]: reads the frames of a value-log file in order, for recovery, GC and
//! `check`. The recovery rule is the WAL's (`docs/format/wal.md` section 3, restated for
//! frames in `docs/format/vlog.md`):
//!
//! - a zero-filled tail or the end of the file at a frame boundary is a clean end;
//! - a damaged frame (bad header, cut-off body, any bad entry, wrong entry count), or a
//!   zero-filled frame header followed by non-zero bytes (a hole), at offset `d`:
//!   - format 2: **corruption** ([`Error::Corruption`]) if a valid frame after it carries a
//!     sync watermark above `d` (the damaged bytes had been synced); otherwise a **torn
//!     tail**: the frames before it are the log, [`FrameReader::truncated_tail`] reports
//!     where it was cut;
//!   - format 1 (no watermarks): a hole is a torn tail; damage is corruption if any valid
//!     frame follows it, else a torn tail.

use super::format::{
    check_file_header, decode_entry, frame_header_len, Entry, FrameHeader, FILE_HEADER_LEN,
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
    /// Bytes of the header (by the file's format version).
    header_len: usize,
    body: Vec<u8>,
}

impl Frame {
    /// File offset of the first entry.
    pub fn body_offset(&self) -> u64 {
        self.offset + self.header_len as u64
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
        (self.header_len + self.body.len()) as u64
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
    /// Where reading starts; the file header is checked first whatever it is.
    start: u64,
    /// Format version from the file header (0 until it is read).
    version: u16,
    /// Bytes of a frame header in this file's version.
    header_len: usize,
    /// Whether the last frame returned was a sync mark (the file is sealed if it ends there).
    last_was_mark: bool,
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
            start,
            version: 0,
            header_len: frame_header_len(0),
            last_was_mark: false,
        }
    }

    /// The file's format version, once its header has been read.
    pub fn version(&self) -> Option<u16> {
        (self.version != 0).then_some(self.version)
    }

    /// Where a torn tail was cut, and why; `None` if the log ended cleanly.
    pub fn truncated_tail(&self) -> Option<(u64, String)> {
        self.torn.clone()
    }

    /// Whether the frames read end with a **sync mark** (`docs/format/vlog.md` section 2):
    /// meaningful once [`FrameReader::next_frame`] returned `Ok(None)` with no torn tail. A
    /// rotated or cleanly closed format-2 file ends so; a file that was the head when the
    /// process died does not, and nor does a rotated file cut at a frame boundary.
    pub fn sealed(&self) -> bool {
        self.last_was_mark
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
        let hl = self.header_len;
        if !self.fill(at, hl)? {
            return Ok(Err("frame header cut off by the end of the file"));
        }
        let h = match FrameHeader::decode(self.slice(at, hl), hl) {
            Ok(h) => h,
            Err(r) => return Ok(Err(r)),
        };
        if h.watermark > at {
            // The writer only knows bytes before the frame synced.
            return Ok(Err("frame watermark lies beyond the frame itself"));
        }
        let body_at = at + hl as u64;
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
            header_len: hl,
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
        let hl = self.header_len;
        Ok(self.fill(at, hl)? && self.slice(at, hl).iter().all(|b| *b == 0))
    }

    /// The first valid frame after `at` that proves damage at `at` hit synced bytes, as
    /// (offset, watermark): in format 2 one whose watermark lies above `at` (frames with a
    /// lower one were written before any sync covered `at` and are skipped whole); in
    /// format 1, which has no watermarks, any valid frame (reported with watermark 0).
    fn synced_frame_after(&mut self, at: u64) -> Result<Option<(u64, u64)>> {
        let hl = self.header_len;
        let mut p = at + 1;
        while p + hl as u64 <= self.end {
            self.fill(p, hl)?;
            let h = self.slice(p, hl);
            // Cheap rejections before the checksum.
            if (h[4] == 1 || h[4] == 2) && h[5..8] == [0, 0, 0] {
                if let Ok(Ok(f)) = self.frame_at(p) {
                    if self.version < super::format::FORMAT_VERSION || f.header.watermark > at {
                        return Ok(Some((p, f.header.watermark)));
                    }
                    p += f.len();
                    continue;
                }
            }
            p += 1;
        }
        Ok(None)
    }

    fn check_header(&mut self) -> Result<bool> {
        if self.end < FILE_HEADER_LEN as u64 {
            // A header torn by a crash: the file never held a synced frame.
            self.torn = Some((0, "file header cut off".into()));
            return Ok(false);
        }
        self.fill(0, FILE_HEADER_LEN)?;
        let h = self.slice(0, FILE_HEADER_LEN).to_vec();
        match check_file_header(&h, &self.path) {
            Ok(v) => {
                self.version = v;
                self.header_len = frame_header_len(v);
            }
            Err(e) => {
                if self.start <= FILE_HEADER_LEN as u64
                    && (self.end == FILE_HEADER_LEN as u64 || self.zero_from(0)?)
                {
                    self.torn = Some((0, e.to_string()));
                    return Ok(false);
                }
                return Err(e);
            }
        }
        self.pos = self.start.max(FILE_HEADER_LEN as u64);
        Ok(true)
    }

    /// The next frame; `Ok(None)` at the end of the log (clean or torn).
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        if self.done {
            return Ok(None);
        }
        if self.version == 0 && !self.check_header()? {
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
                self.last_was_mark = f.header.is_sync_mark();
                Ok(Some(f))
            }
            Err(reason) => {
                self.done = true;
                if self.zero_from(at)? {
                    return Ok(None);
                }
                // The writer never writes a zero frame header: a hole, bytes that never
                // reached the disk while later ones did (unsynced pages are written back in
                // any order).
                let hole = self.zero_header_at(at)?;
                let reason = if hole {
                    "zero-filled hole where a frame header belongs, followed by writes that \
                     reached the disk out of order"
                } else {
                    reason
                };
                if hole && self.version < super::format::FORMAT_VERSION {
                    // Format 1 cannot tell whether the hole was synced: the log ends here.
                    self.torn = Some((at, reason.to_string()));
                    return Ok(None);
                }
                match self.synced_frame_after(at)? {
                    Some((next, _)) if self.version < super::format::FORMAT_VERSION => {
                        Err(Error::corruption(
                            &self.path,
                            at,
                            format!("{reason}, followed by a valid frame at offset {next}"),
                        ))
                    }
                    Some((next, wm)) => Err(Error::corruption(
                        &self.path,
                        at,
                        format!(
                            "{reason}; the frame at offset {next} was written when this file \
                             was synced through offset {wm}, so the damaged bytes had been \
                             synced (expected intact frames up to offset {wm})"
                        ),
                    )),
                    None => {
                        self.torn = Some((at, reason.to_string()));
                        Ok(None)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::*;
    use super::*;
    use crate::io::{Fs, MemFs};

    /// A frame in format 2 (`wm` = the watermark) or, with `wm` `None`, format 1.
    fn frame(first_seq: u64, entries: &[(&[u8], &[u8])], wm: Option<u64>) -> Vec<u8> {
        let mut body = Vec::new();
        for (k, v) in entries {
            encode_entry(&mut body, EntryKind::Separated, k, v);
        }
        let h = FrameHeader {
            kind: FRAME_REPLAY,
            count: entries.len() as u32,
            body_len: body.len() as u32,
            first_seq,
            watermark: wm.unwrap_or(0),
        };
        let mut out = match wm {
            Some(_) => h.encode().to_vec(),
            None => h.encode_v1().to_vec(),
        };
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

    /// Three frames; in format 2 the third carries a watermark through the end of the
    /// second (a sync happened between them) when `synced_before_last`. Returns the file and
    /// the offsets of frames 2 and 3.
    fn three_frames(v2: bool, synced_before_last: bool) -> (Vec<u8>, usize, usize) {
        let version = if v2 {
            FORMAT_VERSION
        } else {
            FORMAT_VERSION_NO_WATERMARK
        };
        let mut file = file_header(version).to_vec();
        let wm = |w: u64| v2.then_some(w);
        file.extend(frame(1, &[(b"a", b"1"), (b"b", b"2")], wm(0)));
        let f2_at = file.len();
        file.extend(frame(3, &[(b"c", b"3")], wm(0)));
        let f3_at = file.len();
        let w3 = if synced_before_last { f3_at as u64 } else { 0 };
        file.extend(frame(4, &[(b"d", b"4")], wm(w3)));
        (file, f2_at, f3_at)
    }

    #[test]
    fn torn_tail_clean_end_and_bad_headers_in_both_formats() {
        for v2 in [false, true] {
            let (file, _, last_at) = three_frames(v2, true);
            assert_eq!(read_all(&file).unwrap(), (vec![1, 3, 4], None));
            // Every cut inside the last frame is a torn tail.
            for cut in last_at + 1..file.len() {
                let (seqs, torn) = read_all(&file[..cut]).unwrap();
                assert_eq!(seqs, vec![1, 3]);
                assert_eq!(torn.unwrap().0, last_at as u64);
            }
            // Zero tail is a clean end.
            let mut z = file.clone();
            z.extend([0u8; 100]);
            assert_eq!(read_all(&z).unwrap(), (vec![1, 3, 4], None));
            // Damage in the last frame is a torn tail.
            let mut d = file.clone();
            let n = d.len();
            d[n - 1] ^= 1;
            assert_eq!(read_all(&d).unwrap().0, vec![1, 3]);
            // A bad file header on a file with data is corruption; an empty file is empty.
            let mut h = file.clone();
            h[0] ^= 1;
            assert!(read_all(&h).unwrap_err().is_corruption());
            assert_eq!(read_all(&[]).unwrap().0, Vec::<u64>::new());
            assert_eq!(read_all(&file[..10]).unwrap().0, Vec::<u64>::new());
        }
    }

    /// Whether `data`'s frames, read to a clean end, end with a sync mark.
    fn sealed(data: &[u8]) -> bool {
        let fs = MemFs::new();
        let p = Path::new("/f.vlog");
        fs.write_all_synced(p, data).unwrap();
        let mut r = FrameReader::new(fs.open(p).unwrap(), p, data.len() as u64, 0);
        while r.next_frame().unwrap().is_some() {}
        assert_eq!(r.truncated_tail(), None);
        r.sealed()
    }

    /// A rotated (or closed) file ends with a sync mark and reads as sealed; cut at a frame
    /// boundary, or with a frame after the mark, it does not (recovery refuses such a file
    /// when a later one holds frames: `docs/format/vlog.md` section 6).
    #[test]
    fn sealed_only_when_the_frames_end_with_a_sync_mark() {
        let (mut file, _, last_at) = three_frames(true, true);
        assert!(!sealed(&file));
        let mark_at = file.len();
        file.extend(FrameHeader::sync_mark(mark_at as u64).encode());
        assert!(sealed(&file));
        assert!(!sealed(&file[..mark_at]));
        assert!(!sealed(&file[..last_at]));
        let mut after = file.clone();
        after.extend(frame(9, &[(b"e", b"5")], Some(mark_at as u64)));
        assert!(!sealed(&after));
        // A zero-filled tail after the mark is still a clean, sealed end.
        file.extend([0u8; 40]);
        assert!(sealed(&file));
    }

    /// Format 1: damage followed by a valid frame is corruption, a hole ends the log.
    #[test]
    fn format_1_rule() {
        let (file, f2_at, f3_at) = three_frames(false, false);
        for i in f2_at..f3_at {
            let mut d = file.clone();
            d[i] ^= 0x40;
            let e = read_all(&d).unwrap_err();
            assert!(e.is_corruption(), "{e}");
        }
        let mut hole = file.clone();
        hole[f2_at..f3_at].fill(0);
        let (seqs, torn) = read_all(&hole).unwrap();
        assert_eq!(seqs, vec![1]);
        let (at, reason) = torn.unwrap();
        assert_eq!(at, f2_at as u64);
        assert!(reason.contains("hole"), "{reason}");
    }

    /// Format 2: damage (flipped bits, a hole, garbage) that no later watermark covers is an
    /// unsynced tail; damage below a later frame's watermark is corruption naming the
    /// damaged frame's offset.
    #[test]
    fn format_2_watermark_rule() {
        for synced in [false, true] {
            let (file, f2_at, f3_at) = three_frames(true, synced);
            let mut cases = Vec::new();
            for i in f2_at..f3_at {
                let mut d = file.clone();
                d[i] ^= 0x40;
                cases.push(d);
            }
            for b in [0u8, 0x5a] {
                let mut d = file.clone();
                d[f2_at..f3_at].fill(b);
                cases.push(d);
            }
            for d in cases {
                match read_all(&d) {
                    Ok((seqs, torn)) => {
                        assert!(!synced, "damage below a watermark was read as a tail");
                        assert_eq!(seqs, vec![1]);
                        assert_eq!(torn.unwrap().0, f2_at as u64);
                    }
                    Err(Error::Corruption { offset, reason, .. }) => {
                        assert!(synced, "unsynced damage refused: {reason}");
                        assert_eq!(offset, f2_at as u64);
                        assert!(reason.contains("synced through"), "{reason}");
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }
}
