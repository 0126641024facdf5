//! [`LogReader`]: reads the records of a log file back, telling a torn tail (the normal
//! result of a crash) from corruption in the middle of the log (an error).

use super::format::{
    fragment_crc, parse_file_header, LogKind, BLOCK_SIZE, HEADER_SIZE, TYPE_FIRST, TYPE_FULL,
    TYPE_LAST, TYPE_MIDDLE, TYPE_ZERO,
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
/// Recovery rule (`docs/format/wal.md`): a damaged record (bad checksum, impossible length,
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
    /// Bytes of the block starting at `block_start` (shorter than a block only at the end of
    /// the file).
    block: Vec<u8>,
    block_start: u64,
    /// Next byte to parse.
    pos: u64,
    state: State,
    truncated_tail: Option<(u64, String)>,
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
            block: Vec::new(),
            block_start: u64::MAX,
            pos: 0,
            state: State::Header,
            truncated_tail: None,
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

    /// The log kind named by the file header, once it has been read.
    pub fn kind(&self) -> Option<LogKind> {
        self.kind
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    fn check_file_header(&mut self, offset: u64, payload: &[u8]) -> Result<()> {
        let bad = |reason: String| Err(Error::corruption(self.file.path(), offset, reason));
        if offset != 0 {
            return bad("log file does not start with a file header record".into());
        }
        let kind = match parse_file_header(payload) {
            Ok(k) => k,
            Err(reason) => return bad(reason),
        };
        if let Some(want) = self.expected_kind {
            if kind != want {
                return bad(format!("log file holds a {kind:?} log, expected {want:?}"));
            }
        }
        self.kind = Some(kind);
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
            if room < HEADER_SIZE {
                // Block trailer: skipped whatever it holds.
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
                // cache writes unsynced pages back in any order). Everything from here on
                // was unsynced (a sync covers every earlier byte), so the log ends here.
                return self.torn(
                    rec_start,
                    "zero-filled hole where a fragment header belongs, followed by unsynced \
                     writes that reached the disk out of order",
                );
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
            match (kind, &mut partial) {
                (TYPE_FULL, None) => {
                    let rec = payload.to_vec();
                    self.pos += (HEADER_SIZE + len) as u64;
                    return Ok(Some((frag, rec)));
                }
                (TYPE_FIRST, None) => partial = Some((frag, payload.to_vec())),
                (TYPE_MIDDLE, Some((_, buf))) => buf.extend_from_slice(payload),
                (TYPE_LAST, Some((_, buf))) => {
                    buf.extend_from_slice(payload);
                    self.pos += (HEADER_SIZE + len) as u64;
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

    /// A damaged record starting at `rec_start`: mid-log corruption if a valid record start
    /// exists at or after `scan_from`, else a torn tail.
    fn damage(
        &mut self,
        rec_start: u64,
        scan_from: u64,
        reason: &str,
    ) -> Result<Option<(u64, Vec<u8>)>> {
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
                .find(|&p| valid_record_start(blk, p))
                .map(|p| start + p as u64)
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

/// Whether `blk[p..]` begins a FULL or FIRST fragment that fits in the block and checks out.
fn valid_record_start(blk: &[u8], p: usize) -> bool {
    let Some(h) = blk.get(p..p + HEADER_SIZE) else {
        return false;
    };
    let kind = h[6];
    if kind != TYPE_FULL && kind != TYPE_FIRST {
        return false;
    }
    let len = u16::from_le_bytes([h[4], h[5]]) as usize;
    let Some(payload) = blk.get(p + HEADER_SIZE..p + HEADER_SIZE + len) else {
        return false;
    };
    fragment_crc(kind, payload) == u32::from_le_bytes([h[0], h[1], h[2], h[3]])
}
