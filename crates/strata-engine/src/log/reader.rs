//! [`LogReader`]: reads the records of a log file back, telling a torn tail (the normal
//! result of a crash) from corruption in the middle of the log (an error).

use super::format::{
    fragment_crc, parse_file_header, watermark_len, LogKind, BLOCK_SIZE, HEADER_SIZE, TYPE_FIRST,
    TYPE_FULL, TYPE_LAST, TYPE_MIDDLE, TYPE_ZERO,
};
use crate::error::{Error, Result};
use crate::io::RandomAccessFile;
use std::path::Path;
use std::sync::Arc;

enum State {
    /// The file-header record has not been read yet.
    Header,
    /// Reading records.
    Records,
    /// The end was reached (clean end or torn tail).
    Done,
    /// Corruption or an I/O error was returned; it is returned again.
    Failed(Error),
}

/// Reads a log file sequentially, one 32 KiB block at a time.
///
/// Recovery rule of format version 2 (`docs/format/wal.md` section 3): every record carries
/// its sync watermark, the offset through which the file was synced when it was written. A
/// damaged record (or a zero-filled hole where a header belongs) at offset `d` is an
/// unsynced tail, truncated there, unless a valid record after it carries a watermark above
/// `d`: then the damaged bytes had been synced and [`LogReader::read_record`] returns
/// [`Error::Corruption`] naming the file, `d`, and the record whose watermark proves it.
///
/// Recovery rule of version 1 (no watermarks): a damaged record (bad checksum, impossible length,
/// unknown fragment type, bad fragment sequence, header or payload cut off by the end of the
/// file) is a *torn tail* when no fragment that starts a record (FULL or FIRST) with a valid
/// checksum exists anywhere after the damage: [`LogReader::read_record`] then returns
/// `Ok(None)` and [`LogReader::truncated_tail`] tells where and why. If such a fragment does
/// exist, the damage is mid-log corruption and `read_record` returns
/// [`Error::Corruption`]. A zero-filled tail (preallocation, padding) is a clean end; a
/// zero-filled header followed by non-zero bytes is a hole left by out-of-order writeback of
/// unsynced pages, and ends the log like a torn tail.
pub struct LogReader {
    file: Arc<dyn RandomAccessFile>,
    file_len: u64,
    expected_kind: Option<LogKind>,
    kind: Option<LogKind>,
    /// Format version from the file header (0 until it is read).
    version: u16,
    /// Bytes of watermark opening each record (0 in version 1 and before the header).
    wm_len: usize,
    /// Bytes of the block starting at `block_start` (shorter than a block only at the end of
    /// the file).
    block: Vec<u8>,
    block_start: u64,
    /// Next byte to parse.
    pos: u64,
    state: State,
    truncated_tail: Option<(u64, String)>,
    /// Whether the last thing read was a sync mark (no record returned after it).
    last_was_mark: bool,
    /// Buffer for scanning ahead after damage.
    scratch: Vec<u8>,
}

impl LogReader {
    /// A reader of `file` accepting either log kind (see [`LogReader::kind`]).
    pub fn new(file: Arc<dyn RandomAccessFile>) -> Self {
        let file_len = file.size();
        LogReader {
            file,
            file_len,
            expected_kind: None,
            kind: None,
            version: 0,
            wm_len: 0,
            block: Vec::new(),
            block_start: u64::MAX,
            pos: 0,
            state: State::Header,
            truncated_tail: None,
            last_was_mark: false,
            scratch: Vec::new(),
        }
    }

    /// A reader that reports [`Error::Corruption`] unless the file header says `kind`.
    pub fn with_kind(file: Arc<dyn RandomAccessFile>, kind: LogKind) -> Self {
        let mut r = Self::new(file);
        r.expected_kind = Some(kind);
        r
    }

    /// The next record as (offset of its first fragment header, payload); `Ok(None)` at the
    /// end of the log, whether clean or torn (see [`LogReader::truncated_tail`]). After an
    /// error every further call returns the same error.
    pub fn read_record(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        loop {
            match &self.state {
                State::Done => return Ok(None),
                State::Failed(e) => return Err(e.clone()),
                State::Header => match self.next_checked()? {
                    None => return Ok(None),
                    Some((offset, payload)) => {
                        let r = self.check_file_header(offset, &payload);
                        if let Err(e) = &r {
                            self.state = State::Failed(e.clone());
                        }
                        r?;
                        self.state = State::Records;
                    }
                },
                State::Records => return self.next_checked(),
            }
        }
    }

    /// Where the log was cut off and why, if it ended in a torn tail. `None` for a clean
    /// end (or before the end is reached). The offset is that of the first fragment of the
    /// damaged record: every byte before it belongs to complete records.
    pub fn truncated_tail(&self) -> Option<(u64, String)> {
        self.truncated_tail.clone()
    }

    /// Whether the records read end with a **sync mark** (`docs/format/wal.md` section 1):
    /// meaningful once [`LogReader::read_record`] returned `Ok(None)` with no torn tail. A
    /// switched or cleanly closed version-2 WAL ends so; the WAL that was live when the
    /// process died does not, and nor does a switched WAL cut at a record boundary.
    pub fn sealed(&self) -> bool {
        self.last_was_mark
    }

    /// The log kind named by the file header, once it has been read.
    pub fn kind(&self) -> Option<LogKind> {
        self.kind
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The log format version named by the file header, once it has been read.
    pub fn version(&self) -> Option<u16> {
        (self.version != 0).then_some(self.version)
    }

    /// The file's length when the reader was made.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    fn check_file_header(&mut self, offset: u64, payload: &[u8]) -> Result<()> {
        let bad = |reason: String| Err(Error::corruption(self.file.path(), offset, reason));
        if offset != 0 {
            return bad("log file does not start with a file header record".into());
        }
        let (kind, version) = match parse_file_header(payload) {
            Ok(k) => k,
            Err(reason) => return bad(reason),
        };
        if let Some(want) = self.expected_kind {
            if kind != want {
                return bad(format!("log file holds a {kind:?} log, expected {want:?}"));
            }
        }
        self.kind = Some(kind);
        self.version = version;
        self.wm_len = watermark_len(version);
        Ok(())
    }

    /// [`Self::next_raw`] plus the end-of-log state transitions.
    fn next_checked(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        let r = self.next_raw();
        match &r {
            Ok(None) => self.state = State::Done,
            Err(e) => self.state = State::Failed(e.clone()),
            Ok(Some(_)) => {}
        }
        r
    }

    fn next_raw(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        // A multi-fragment record being assembled: (offset of its FIRST fragment, payload).
        let mut partial: Option<(u64, Vec<u8>)> = None;
        loop {
            let in_block = (self.pos % BLOCK_SIZE as u64) as usize;
            let room = BLOCK_SIZE - in_block;
            if room < HEADER_SIZE + self.wm_len {
                // Block trailer: skipped whatever it holds. (A version-2 record starts only
                // where its header and watermark fit; MIDDLE and LAST fragments start blocks.)
                self.pos += room as u64;
                continue;
            }
            if self.pos >= self.file_len {
                return match partial {
                    None => Ok(None),
                    Some((start, _)) => {
                        self.torn(start, "end of file inside a multi-fragment record")
                    }
                };
            }
            self.load_block(self.pos - in_block as u64)?;
            let frag = self.pos;
            let rec_start = partial.as_ref().map_or(frag, |p| p.0);
            let avail = self.block.len() - in_block;
            let hdr = &self.block[in_block..in_block + avail.min(HEADER_SIZE)];

            if hdr.iter().all(|&b| b == 0) {
                if self.all_zero_from(frag)? {
                    return match partial {
                        None => Ok(None),
                        Some((start, _)) => {
                            self.torn(start, "multi-fragment record cut off by a zero-filled tail")
                        }
                    };
                }
                // The writer never writes a zero header outside a block trailer: this is a
                // hole, bytes that never reached the disk while later ones did (the page
                // cache writes unsynced pages back in any order). Version 1 cannot tell
                // whether those bytes had been synced and ends the log here; version 2 asks
                // the watermarks of the records after it, like for any damage.
                const HOLE: &str = "zero-filled hole where a fragment header belongs, followed \
                                    by writes that reached the disk out of order";
                if self.wm_len == 0 {
                    return self.torn(rec_start, HOLE);
                }
                return self.damage(rec_start, frag + 1, HOLE);
            }
            if avail < HEADER_SIZE {
                return self.damage(
                    rec_start,
                    frag + 1,
                    "fragment header cut off by end of file",
                );
            }
            let crc = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            let len = u16::from_le_bytes([hdr[4], hdr[5]]) as usize;
            let kind = hdr[6];
            if !(TYPE_FULL..=TYPE_LAST).contains(&kind) {
                let reason = if kind == TYPE_ZERO {
                    "reserved fragment type 0 in a non-zero header".to_string()
                } else {
                    format!("unknown fragment type {kind}")
                };
                return self.damage(rec_start, frag + 1, &reason);
            }
            if in_block + HEADER_SIZE + len > BLOCK_SIZE {
                let reason = format!("fragment length {len} overruns its block");
                return self.damage(rec_start, frag + 1, &reason);
            }
            if HEADER_SIZE + len > avail {
                return self.damage(
                    rec_start,
                    frag + 1,
                    "fragment payload cut off by end of file",
                );
            }
            let payload_at = in_block + HEADER_SIZE;
            let payload = &self.block[payload_at..payload_at + len];
            if fragment_crc(kind, payload) != crc {
                return self.damage(rec_start, frag + 1, "fragment checksum mismatch");
            }
            if partial.is_none() && (kind == TYPE_FULL || kind == TYPE_FIRST) {
                if let Err(reason) = check_watermark(payload, self.wm_len, frag) {
                    return self.damage(rec_start, frag + 1, &reason);
                }
            }
            let wm = if partial.is_none() { self.wm_len } else { 0 };
            let payload = &payload[wm..];
            match (kind, &mut partial) {
                (TYPE_FULL, None) if wm > 0 && payload.is_empty() => {
                    // A sync mark (format 2): only a watermark, no record to return.
                    self.pos += (HEADER_SIZE + len) as u64;
                    self.last_was_mark = true;
                    continue;
                }
                (TYPE_FULL, None) => {
                    let rec = payload.to_vec();
                    self.pos += (HEADER_SIZE + len) as u64;
                    self.last_was_mark = false;
                    return Ok(Some((frag, rec)));
                }
                (TYPE_FIRST, None) => partial = Some((frag, payload.to_vec())),
                (TYPE_MIDDLE, Some((_, buf))) => buf.extend_from_slice(payload),
                (TYPE_LAST, Some((_, buf))) => {
                    buf.extend_from_slice(payload);
                    self.pos += (HEADER_SIZE + len) as u64;
                    self.last_was_mark = false;
                    return Ok(partial.take());
                }
                (TYPE_FULL | TYPE_FIRST, Some((start, _))) => {
                    // The fragment at `frag` is itself a valid later record: never a torn tail.
                    let start = *start;
                    return self.damage(
                        start,
                        frag,
                        "multi-fragment record lacks its LAST fragment",
                    );
                }
                _ => {
                    let reason = format!(
                        "{} fragment without a FIRST fragment",
                        if kind == TYPE_MIDDLE {
                            "MIDDLE"
                        } else {
                            "LAST"
                        }
                    );
                    return self.damage(frag, frag + 1, &reason);
                }
            }
            self.pos += (HEADER_SIZE + len) as u64;
        }
    }

    /// A damaged record starting at `rec_start`: in version 2, corruption if a valid record
    /// at or after `scan_from` carries a watermark above `rec_start` (the damaged bytes had
    /// been synced), else a torn tail; in version 1, corruption if any valid record start
    /// exists at or after `scan_from`.
    fn damage(
        &mut self,
        rec_start: u64,
        scan_from: u64,
        reason: &str,
    ) -> Result<Option<(u64, Vec<u8>)>> {
        if self.kind.is_none() {
            return self.damaged_file_header(rec_start, scan_from, reason);
        }
        if self.wm_len > 0 {
            return match self.find_synced_past(rec_start, scan_from)? {
                Some((next, wm)) => Err(Error::corruption(
                    self.file.path(),
                    rec_start,
                    format!(
                        "{reason}; the record at offset {next} was written when this file was \
                         synced through offset {wm}, so the damaged bytes had been synced \
                         (expected intact records up to offset {wm})"
                    ),
                )),
                None => self.torn(rec_start, reason),
            };
        }
        match self.find_record_start(scan_from)? {
            Some(next) => Err(Error::corruption(
                self.file.path(),
                rec_start,
                format!(
                    "{reason}; a valid record follows at offset {next}, so this is not a torn tail"
                ),
            )),
            None => self.torn(rec_start, reason),
        }
    }

    /// Damage to the file-header record, whose version is then unknown. The writer syncs
    /// nothing before the header, so any sync covers it: a later valid record start whose
    /// payload opens with a non-zero watermark (or is too short for one) means the header had
    /// been synced, or the file is version 1 (where those bytes are a batch's sequence
    /// number, practically never 0): corruption. Records written before any sync carry
    /// watermark 0: then the whole file was unsynced, an empty log.
    fn damaged_file_header(
        &mut self,
        rec_start: u64,
        scan_from: u64,
        reason: &str,
    ) -> Result<Option<(u64, Vec<u8>)>> {
        let synced_after = self.scan_blocks(scan_from, |start, blk, first| {
            (first..blk.len())
                .find(|&p| {
                    record_start_at(blk, p, 0).is_some_and(|(len, _)| {
                        let payload = &blk[p + HEADER_SIZE..p + HEADER_SIZE + len];
                        len < 8 || payload[..8].iter().any(|&b| b != 0)
                    })
                })
                .map(|p| start + p as u64)
        })?;
        match synced_after {
            Some(next) => Err(Error::corruption(
                self.file.path(),
                rec_start,
                format!(
                    "{reason} in the log file header; the record at offset {next} was written \
                     after a sync covered it (or the file is in format 1)"
                ),
            )),
            None => self.torn(rec_start, reason),
        }
    }

    fn torn(&mut self, rec_start: u64, reason: &str) -> Result<Option<(u64, Vec<u8>)>> {
        self.truncated_tail = Some((rec_start, reason.to_string()));
        Ok(None)
    }

    /// Makes `self.block` hold the block starting at `start` (< file length).
    fn load_block(&mut self, start: u64) -> Result<()> {
        if self.block_start != start {
            self.block_start = u64::MAX;
            read_block(&*self.file, self.file_len, start, &mut self.block)?;
            self.block_start = start;
        }
        Ok(())
    }

    /// Calls `f` with every block from the one holding `from` to the end of the file, and the
    /// index in that block to start at, until `f` returns `Some`.
    fn scan_blocks<T>(
        &mut self,
        from: u64,
        mut f: impl FnMut(u64, &[u8], usize) -> Option<T>,
    ) -> Result<Option<T>> {
        let bs = BLOCK_SIZE as u64;
        let mut start = from - from % bs;
        let mut first = (from % bs) as usize;
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut found = None;
        while start < self.file_len {
            let blk: &[u8] = if start == self.block_start {
                &self.block
            } else {
                if let Err(e) = read_block(&*self.file, self.file_len, start, &mut scratch) {
                    self.scratch = scratch;
                    return Err(e);
                }
                &scratch
            };
            found = f(start, blk, first);
            if found.is_some() {
                break;
            }
            start += bs;
            first = 0;
        }
        self.scratch = scratch;
        Ok(found)
    }

    /// Whether every byte from `from` to the end of the file is zero.
    fn all_zero_from(&mut self, from: u64) -> Result<bool> {
        let nonzero = self.scan_blocks(from, |_, blk, first| {
            blk.get(first..)
                .is_some_and(|s| s.iter().any(|&b| b != 0))
                .then_some(())
        })?;
        Ok(nonzero.is_none())
    }

    /// Offset of the first fragment at or after `from` that starts a record (FULL or FIRST)
    /// and whose header is consistent and checksum correct.
    fn find_record_start(&mut self, from: u64) -> Result<Option<u64>> {
        self.scan_blocks(from, |start, blk, first| {
            (first..blk.len())
                .find(|&p| record_start_at(blk, p, 0).is_some())
                .map(|p| start + p as u64)
        })
    }

    /// The first valid record start at or after `from` whose watermark lies above `damaged`
    /// (and at or below its own offset, as every watermark the writer writes does), as
    /// (offset, watermark). Records with a lower watermark were written before any sync
    /// covered `damaged` and are skipped whole.
    fn find_synced_past(&mut self, damaged: u64, from: u64) -> Result<Option<(u64, u64)>> {
        let wm_len = self.wm_len;
        self.scan_blocks(from, |start, blk, first| {
            let mut p = first;
            while p < blk.len() {
                let Some((len, wm)) = record_start_at(blk, p, wm_len) else {
                    p += 1;
                    continue;
                };
                let at = start + p as u64;
                if wm > at {
                    // No writer writes this: not a record (or itself damaged).
                    p += 1;
                } else if wm > damaged {
                    return Some((at, wm));
                } else {
                    p += HEADER_SIZE + len;
                }
            }
            None
        })
    }
}

/// Reads the block at `start` (clipped to the end of the file) into `buf`.
fn read_block(
    file: &dyn RandomAccessFile,
    file_len: u64,
    start: u64,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let len = (file_len - start).min(BLOCK_SIZE as u64) as usize;
    buf.resize(len, 0);
    file.read_at(start, buf)
}

/// If `blk[p..]` begins a FULL or FIRST fragment that fits in the block, checks out and holds
/// a `wm_len`-byte watermark: its payload length and watermark (0 without one).
fn record_start_at(blk: &[u8], p: usize, wm_len: usize) -> Option<(usize, u64)> {
    let h = blk.get(p..p + HEADER_SIZE)?;
    let kind = h[6];
    if kind != TYPE_FULL && kind != TYPE_FIRST {
        return None;
    }
    let len = u16::from_le_bytes([h[4], h[5]]) as usize;
    let payload = blk.get(p + HEADER_SIZE..p + HEADER_SIZE + len)?;
    if len < wm_len || fragment_crc(kind, payload) != u32::from_le_bytes([h[0], h[1], h[2], h[3]]) {
        return None;
    }
    Some((len, read_watermark(payload, wm_len)))
}

/// The watermark opening a record-start fragment's payload (0 when `wm_len` is 0).
fn read_watermark(payload: &[u8], wm_len: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..wm_len].copy_from_slice(&payload[..wm_len]);
    u64::from_le_bytes(b)
}

/// Checks the watermark of a record starting at `at` with first-fragment `payload`: present,
/// and no later than the record itself (the writer only knows bytes before it synced).
fn check_watermark(payload: &[u8], wm_len: usize, at: u64) -> std::result::Result<(), String> {
    if payload.len() < wm_len {
        return Err(format!(
            "record-start fragment of {} bytes is shorter than its {wm_len}-byte watermark",
            payload.len()
        ));
    }
    let wm = read_watermark(payload, wm_len);
    if wm > at {
        return Err(format!(
            "record at offset {at} claims the file was synced through offset {wm}, beyond itself"
        ));
    }
    Ok(())
}
