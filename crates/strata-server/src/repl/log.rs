//! The replication log: the master's backlog on SSD (format: `docs/format/repl-log.md`).
//!
//! The bytes of the replication stream (RESP), appended in order and addressed by stream
//! offset: byte `n` of the log is the `n`-th byte ever appended (offsets are 0-based here;
//! Redis's PSYNC offsets are these plus one). Segment files `dir/<20-digit first offset>.log`
//! hold records of up to [`RECORD_MAX`] bytes, each with its length and CRC32C.
//!
//! **Protocol between threads.** Everything lives behind one mutex (`Inner`). `append`
//! adds bytes to the in-memory tail (no I/O on the command path) and wakes the readers;
//! `flush` (the background thread in `repl/mod.rs`, and `append` itself once the tail
//! passes [`TAIL_MAX`], so the tail is bounded) writes the tail as records, rolls segments
//! past `segment_bytes` and deletes the oldest while the log is over its size bound, except
//! a segment holding a pinned offset (a feeder's position, a full sync's cut). Readers copy
//! from the tail under the mutex, and read flushed records outside it (records never change
//! once written; a segment they read is pinned by their own position). The log is not
//! synced: the engine's WAL makes the data durable, and the log only serves replicas.

use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The first bytes of a segment file.
pub const MAGIC: &[u8; 8] = b"STRPLOG\0";
/// The format version written after the magic.
pub const VERSION: u32 = 1;
/// Header: magic, version, reserved (0), first offset.
const HEADER_BYTES: u64 = 24;
/// Record header: payload length, CRC32C of the payload (both little-endian u32).
const RECORD_HEADER: u64 = 8;
/// The largest record payload written.
pub const RECORD_MAX: usize = 1 << 20;
/// The in-memory tail is flushed by the appender itself past this size.
const TAIL_MAX: usize = 64 << 20;

/// Why a read found nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The offset was pruned: the reader needs a full sync.
    Gone,
    /// The offset is past the end of the log.
    Beyond,
    /// A segment could not be read or failed its checksum.
    Io(String),
}

/// One record in a segment: its first stream offset, where it sits and its payload length.
#[derive(Clone, Copy, Debug)]
struct Record {
    offset: u64,
    pos: u64,
    len: u32,
}

struct Segment {
    start: u64,
    end: u64,
    path: PathBuf,
    file_len: u64,
    records: Vec<Record>,
}

struct Inner {
    segments: VecDeque<Segment>,
    /// The open file of the last segment.
    file: Option<File>,
    /// The oldest offset still held.
    first: u64,
    /// Bytes up to here are in segment files.
    flushed: u64,
    /// Bytes `flushed..flushed + tail.len()`, not yet written.
    tail: Vec<u8>,
    limit_bytes: u64,
    pins: BTreeMap<u64, u64>,
    next_pin: u64,
}

impl Inner {
    fn end(&self) -> u64 {
        self.flushed + self.tail.len() as u64
    }
}

/// The replication log (see the module documentation).
pub struct ReplLog {
    dir: PathBuf,
    segment_bytes: u64,
    inner: Mutex<Inner>,
    /// Woken on every append (feeders wait on it).
    pub appended: tokio::sync::Notify,
}

fn segment_path(dir: &Path, start: u64) -> PathBuf {
    dir.join(format!("{start:020}.log"))
}

fn io_err(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl ReplLog {
    /// Opens the log in `dir` (created if missing), recovering what a previous run left:
    /// each segment is read record by record and cut at the first torn or corrupt record
    /// (the segments after it are deleted: nothing follows a cut). An empty log starts at
    /// `start`. `limit_bytes` is `repl-backlog-size`; segments roll at `segment_bytes`.
    pub fn open(
        dir: &Path,
        start: u64,
        limit_bytes: u64,
        segment_bytes: u64,
    ) -> std::io::Result<ReplLog> {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        let mut starts: Vec<u64> = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
            let name = e?.file_name().to_string_lossy().into_owned();
            if let Some(n) = name.strip_suffix(".log").and_then(|n| n.parse().ok()) {
                starts.push(n);
            }
        }
        starts.sort_unstable();
        let mut segments: VecDeque<Segment> = VecDeque::new();
        let mut cut = false;
        for s in starts {
            let path = segment_path(dir, s);
            let contiguous = segments.back().is_none_or(|p| p.end == s);
            if cut || !contiguous {
                std::fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
                continue;
            }
            match recover_segment(&path, s)? {
                Some((seg, whole)) => {
                    cut = !whole;
                    segments.push_back(seg);
                }
                None => {
                    std::fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
                    cut = true;
                }
            }
        }
        let (first, flushed) = match (segments.front(), segments.back()) {
            (Some(f), Some(l)) => (f.start, l.end),
            _ => (start, start),
        };
        let log = ReplLog {
            dir: dir.to_path_buf(),
            segment_bytes: segment_bytes.max(HEADER_BYTES + 1),
            inner: Mutex::new(Inner {
                segments,
                file: None,
                first,
                flushed,
                tail: Vec::new(),
                limit_bytes,
                pins: BTreeMap::new(),
                next_pin: 0,
            }),
            appended: tokio::sync::Notify::new(),
        };
        Ok(log)
    }

    /// Opens an empty log at `start` in `dir`, deleting the segments a previous run left.
    pub fn create(
        dir: &Path,
        start: u64,
        limit_bytes: u64,
        segment_bytes: u64,
    ) -> std::io::Result<ReplLog> {
        if dir.exists() {
            for e in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
                let path = e?.path();
                if path.extension().is_some_and(|x| x == "log") {
                    std::fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
                }
            }
        }
        ReplLog::open(dir, start, limit_bytes, segment_bytes)
    }

    /// The offset after the last byte appended (Redis's `master_repl_offset`).
    pub fn end(&self) -> u64 {
        self.inner.lock().end()
    }

    /// The oldest offset still readable.
    pub fn first(&self) -> u64 {
        self.inner.lock().first
    }

    /// `(first, end)` together.
    pub fn bounds(&self) -> (u64, u64) {
        let g = self.inner.lock();
        (g.first, g.end())
    }

    /// A new `repl-backlog-size`: older segments go at the next prune.
    pub fn set_limit(&self, limit_bytes: u64) {
        self.inner.lock().limit_bytes = limit_bytes;
    }

    /// Appends `bytes`; returns the end offset after them.
    pub fn append(&self, bytes: &[u8]) -> u64 {
        let (end, over) = {
            let mut g = self.inner.lock();
            g.tail.extend_from_slice(bytes);
            (g.end(), g.tail.len() > TAIL_MAX)
        };
        if over {
            if let Err(e) = self.flush() {
                eprintln!("strata-server: replication log: {e}");
            }
        }
        self.appended.notify_waiters();
        end
    }

    /// Pins `offset`: no segment holding it (or anything after it) is deleted until the pin
    /// moves or goes. Returns the pin's id.
    pub fn pin(&self, offset: u64) -> u64 {
        let mut g = self.inner.lock();
        let id = g.next_pin;
        g.next_pin += 1;
        g.pins.insert(id, offset);
        id
    }

    /// Moves pin `id` to `offset`.
    pub fn move_pin(&self, id: u64, offset: u64) {
        if let Some(p) = self.inner.lock().pins.get_mut(&id) {
            *p = offset;
        }
    }

    pub fn unpin(&self, id: u64) {
        self.inner.lock().pins.remove(&id);
    }

    /// Up to `max` bytes from `offset` (fewer at a record's or the tail's end; none at the
    /// end of the log).
    pub fn read(&self, offset: u64, max: usize) -> Result<Vec<u8>, ReadError> {
        let (path, rec) = {
            let g = self.inner.lock();
            if offset < g.first {
                return Err(ReadError::Gone);
            }
            if offset > g.end() {
                return Err(ReadError::Beyond);
            }
            if offset >= g.flushed {
                let from = (offset - g.flushed) as usize;
                let to = g.tail.len().min(from + max);
                return Ok(g.tail[from..to].to_vec());
            }
            let seg = g
                .segments
                .iter()
                .rev()
                .find(|s| s.start <= offset)
                .ok_or(ReadError::Gone)?;
            let i = seg.records.partition_point(|r| r.offset <= offset);
            let rec = *seg
                .records
                .get(i.wrapping_sub(1))
                .ok_or_else(|| ReadError::Io("no record holds the offset".into()))?;
            (seg.path.clone(), rec)
        };
        let payload = match read_record(&path, rec) {
            Ok(p) => p,
            // Pruned since the lock was released.
            Err(_) if offset < self.first() => return Err(ReadError::Gone),
            Err(e) => return Err(ReadError::Io(e.to_string())),
        };
        let from = (offset - rec.offset) as usize;
        let to = payload.len().min(from + max);
        Ok(payload[from..to].to_vec())
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes the tail and syncs the segments and the directory (a clean shutdown: the log
    /// then survives a machine crash too).
    pub fn sync(&self) -> std::io::Result<()> {
        self.flush()?;
        let g = self.inner.lock();
        for s in &g.segments {
            File::open(&s.path)
                .and_then(|f| f.sync_all())
                .map_err(|e| io_err(&s.path, e))?;
        }
        File::open(&self.dir)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_err(&self.dir, e))
    }

    /// Writes the in-memory tail to the segment files, rolls and prunes.
    pub fn flush(&self) -> std::io::Result<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        while !g.tail.is_empty() {
            let need_new = match g.segments.back() {
                None => true,
                Some(s) => s.file_len >= self.segment_bytes,
            };
            if need_new || g.file.is_none() {
                let start = g.flushed;
                if need_new {
                    let path = segment_path(&self.dir, start);
                    let mut f = File::create(&path).map_err(|e| io_err(&path, e))?;
                    let mut h = Vec::with_capacity(HEADER_BYTES as usize);
                    h.extend_from_slice(MAGIC);
                    h.extend_from_slice(&VERSION.to_le_bytes());
                    h.extend_from_slice(&0u32.to_le_bytes());
                    h.extend_from_slice(&start.to_le_bytes());
                    f.write_all(&h).map_err(|e| io_err(&path, e))?;
                    g.segments.push_back(Segment {
                        start,
                        end: start,
                        path,
                        file_len: HEADER_BYTES,
                        records: Vec::new(),
                    });
                    g.file = Some(f);
                } else if let Some(s) = g.segments.back() {
                    let f = OpenOptions::new()
                        .append(true)
                        .open(&s.path)
                        .map_err(|e| io_err(&s.path, e))?;
                    g.file = Some(f);
                }
            }
            let n = g.tail.len().min(RECORD_MAX);
            let (Some(file), Some(seg)) = (g.file.as_mut(), g.segments.back_mut()) else {
                break;
            };
            let payload = &g.tail[..n];
            let mut rec = Vec::with_capacity(RECORD_HEADER as usize + n);
            rec.extend_from_slice(&(n as u32).to_le_bytes());
            rec.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
            rec.extend_from_slice(payload);
            if let Err(e) = file.write_all(&rec) {
                // A partial record is cut at the next open; the next flush starts a segment.
                g.file = None;
                seg.file_len = u64::MAX;
                return Err(io_err(&seg.path, e));
            }
            seg.records.push(Record {
                offset: seg.end,
                pos: seg.file_len,
                len: n as u32,
            });
            seg.file_len += rec.len() as u64;
            seg.end += n as u64;
            g.flushed += n as u64;
            g.tail.drain(..n);
        }
        prune(g);
        Ok(())
    }
}

/// Deletes the oldest segments while the flushed log is over its bound, never the last
/// segment nor one holding a pinned offset.
fn prune(g: &mut Inner) {
    let min_pin = g.pins.values().copied().min().unwrap_or(u64::MAX);
    while g.segments.len() > 1 && g.flushed - g.first > g.limit_bytes {
        let Some(s) = g.segments.front() else { break };
        if s.end > min_pin {
            break;
        }
        if let Err(e) = std::fs::remove_file(&s.path) {
            eprintln!("strata-server: replication log: {}: {e}", s.path.display());
            break;
        }
        g.segments.pop_front();
        g.first = g.segments.front().map_or(g.flushed, |s| s.start);
    }
}

fn read_record(path: &Path, rec: Record) -> std::io::Result<Vec<u8>> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(rec.pos))?;
    let mut head = [0u8; RECORD_HEADER as usize];
    f.read_exact(&mut head)?;
    let mut payload = vec![0u8; rec.len as usize];
    f.read_exact(&mut payload)?;
    let (len, crc) = split_header(&head);
    if len != rec.len || crc32c::crc32c(&payload) != crc {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: record at {} fails its checksum",
                path.display(),
                rec.pos
            ),
        ));
    }
    Ok(payload)
}

fn split_header(h: &[u8; 8]) -> (u32, u32) {
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    (len, crc)
}

/// Reads a segment's records; truncates it after the last whole one. `None`: the header is
/// not a segment's of `start`. The flag: the segment was whole (nothing was cut).
fn recover_segment(path: &Path, start: u64) -> std::io::Result<Option<(Segment, bool)>> {
    let data = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let header_ok = data.len() >= HEADER_BYTES as usize
        && &data[..8] == MAGIC
        && data[8..12] == VERSION.to_le_bytes()
        && data[16..24] == start.to_le_bytes();
    if !header_ok {
        return Ok(None);
    }
    let mut pos = HEADER_BYTES as usize;
    let mut end = start;
    let mut records = Vec::new();
    while pos + RECORD_HEADER as usize <= data.len() {
        let mut h = [0u8; 8];
        h.copy_from_slice(&data[pos..pos + 8]);
        let (len, crc) = split_header(&h);
        let body = pos + 8;
        let Some(payload) = data.get(body..body + len as usize) else {
            break;
        };
        if len == 0 || len as usize > RECORD_MAX || crc32c::crc32c(payload) != crc {
            break;
        }
        records.push(Record {
            offset: end,
            pos: pos as u64,
            len,
        });
        end += u64::from(len);
        pos = body + len as usize;
    }
    let whole = pos == data.len();
    if !whole {
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        f.set_len(pos as u64).map_err(|e| io_err(path, e))?;
    }
    let seg = Segment {
        start,
        end,
        path: path.to_path_buf(),
        file_len: pos as u64,
        records,
    };
    Ok(Some((seg, whole)))
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
