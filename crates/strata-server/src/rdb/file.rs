//! Reading whole RDB files (`docs/format/rdb.md` "Files"): the magic and version, the
//! opcodes between values (AUX, SELECTDB, RESIZEDB, EXPIRETIME, EXPIRETIME_MS, FREQ, IDLE,
//! FUNCTION2), the EOF opcode and the CRC-64 trailer, streamed from any [`Read`].
//!
//! **Bounded memory.** The file is never held whole: [`FileReader::next_item`] reads one item
//! (an aux field, a database switch, a function library, or one key with its value) and
//! keeps only that item. A value's bytes are gathered by walking its structure from the
//! stream (lengths and strings, [`FileReader::gather_value`]) and then decoded by the value
//! codec (`read.rs`), so one value, never more, is in memory at a time; a string is read in
//! chunks, so a length that lies costs only the bytes that are really there.
//!
//! **Checks.** Every byte before the trailer feeds the CRC-64, compared with the trailer
//! unless the trailer is zero (Redis's `rdbchecksum no`). An unknown version or value type
//! is refused with its number; module values and module aux data, which no module here can
//! read, are refused by name.

use super::{crc64, types, RdbError, Reader, Value, READ_MAX_VERSION};
use std::io::{ErrorKind, Read};

/// Opcodes between values (Redis's `RDB_OPCODE_*`). On-disk: do not renumber.
pub mod opcode {
    pub const FUNCTION2: u8 = 0xf5;
    /// Redis 7.0's release candidates' function format, which 7.0 GA refuses too.
    pub const FUNCTION_PRE_GA: u8 = 0xf6;
    pub const MODULE_AUX: u8 = 0xf7;
    pub const IDLE: u8 = 0xf8;
    pub const FREQ: u8 = 0xf9;
    pub const AUX: u8 = 0xfa;
    pub const RESIZEDB: u8 = 0xfb;
    pub const EXPIRETIME_MS: u8 = 0xfc;
    pub const EXPIRETIME: u8 = 0xfd;
    pub const SELECTDB: u8 = 0xfe;
    pub const EOF: u8 = 0xff;
}

/// The file's first five bytes; four ASCII digits of the version follow.
pub const MAGIC: &[u8; 5] = b"REDIS";

/// The first version whose files end with a CRC-64 (Redis 2.6).
const CHECKSUM_SINCE: u16 = 5;

/// Longest string accepted in a file (Redis's own limit on a string value, 512 MB).
pub const MAX_STRING_BYTES: u64 = 512 << 20;

/// Bytes read at a time for a long string: a length that lies is never allocated ahead.
const CHUNK_BYTES: usize = 64 << 10;

/// Why an RDB file does not load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    #[error("reading the RDB: {0}")]
    Io(String),
    #[error("not an RDB file (no REDIS magic)")]
    Magic,
    #[error("can't handle RDB format version {0}")]
    Version(u16),
    #[error("the RDB ends early, at byte {offset} (inside {what})")]
    Truncated { what: &'static str, offset: u64 },
    #[error("RDB checksum mismatch: the file says {expected:#018x}, its data gives {got:#018x}")]
    Checksum { expected: u64, got: u64 },
    #[error("unknown RDB value type {0}")]
    UnknownType(u8),
    #[error("RDB value type {0} ({1}) is not supported")]
    Unsupported(u8, &'static str),
    #[error("RDB {what} at byte {offset}: {reason}")]
    Corrupt {
        what: &'static str,
        offset: u64,
        reason: String,
    },
}

/// One thing a file holds, in file order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// An aux field (`redis-ver`, `repl-id`, `repl-offset`, ...).
    Aux(Vec<u8>, Vec<u8>),
    /// The keys after this are in database `n`.
    SelectDb(u64),
    /// The sizes the writer announced for the current database (a hint).
    ResizeDb {
        keys: u64,
        expires: u64,
    },
    /// A function library's code (FUNCTION LOAD's argument).
    Function(Vec<u8>),
    Key(Entry),
}

/// A key with its value and what the file says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub db: u64,
    pub key: Vec<u8>,
    pub value: Value,
    /// Absolute Unix time in milliseconds, if the key expires.
    pub expire_ms: Option<u64>,
    /// Seconds since the last access (written under an LRU policy).
    pub idle_secs: Option<u64>,
    /// The LFU counter (written under an LFU policy).
    pub freq: Option<u8>,
}

/// A streaming reader of one RDB file: [`FileReader::open`] checks the header, then
/// [`FileReader::next_item`] returns items until the EOF opcode and a good trailer (`None`).
pub struct FileReader<R: Read> {
    src: R,
    version: u16,
    /// Bytes consumed so far.
    offset: u64,
    /// CRC-64 of the bytes consumed so far.
    crc: u64,
    /// The raw bytes of the value being read (`gather_*` append here).
    gathered: Vec<u8>,
    db: u64,
    done: bool,
}

impl<R: Read> FileReader<R> {
    /// Reads and checks the header (`REDIS` and a version from 1 to 12).
    pub fn open(src: R) -> Result<FileReader<R>, FileError> {
        let mut r = FileReader {
            src,
            version: 0,
            offset: 0,
            crc: 0,
            gathered: Vec::new(),
            db: 0,
            done: false,
        };
        let mut head = [0u8; 9];
        r.fill(&mut head, "header")?;
        if &head[..5] != MAGIC {
            return Err(FileError::Magic);
        }
        let digits = std::str::from_utf8(&head[5..])
            .ok()
            .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse::<u16>().ok())
            .ok_or(FileError::Magic)?;
        if digits == 0 || digits > READ_MAX_VERSION {
            return Err(FileError::Version(digits));
        }
        r.version = digits;
        Ok(r)
    }

    /// The file's format version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next item; `None` once the EOF opcode and the trailer have been read and checked.
    pub fn next_item(&mut self) -> Result<Option<Item>, FileError> {
        if self.done {
            return Ok(None);
        }
        let (mut expire_ms, mut idle_secs, mut freq) = (None, None, None);
        loop {
            let op = self.byte("opcode")?;
            match op {
                opcode::EOF => {
                    self.trailer()?;
                    self.done = true;
                    return Ok(None);
                }
                opcode::SELECTDB => {
                    self.db = self.length("database number")?;
                    return Ok(Some(Item::SelectDb(self.db)));
                }
                opcode::RESIZEDB => {
                    let keys = self.length("RESIZEDB")?;
                    let expires = self.length("RESIZEDB")?;
                    return Ok(Some(Item::ResizeDb { keys, expires }));
                }
                opcode::AUX => {
                    let k = self.string("aux field")?;
                    let v = self.string("aux value")?;
                    return Ok(Some(Item::Aux(k, v)));
                }
                opcode::FUNCTION2 => return Ok(Some(Item::Function(self.string("function")?))),
                opcode::FUNCTION_PRE_GA => {
                    return Err(self.corrupt(
                        "function",
                        "pre-release function format (Redis 7.0 release candidates) not supported",
                    ))
                }
                opcode::MODULE_AUX => {
                    return Err(FileError::Unsupported(
                        op,
                        "module aux data: no modules here",
                    ))
                }
                opcode::EXPIRETIME => {
                    let mut b = [0u8; 4];
                    self.fill(&mut b, "EXPIRETIME")?;
                    expire_ms = Some(u64::from(u32::from_le_bytes(b)) * 1000);
                }
                opcode::EXPIRETIME_MS => {
                    let mut b = [0u8; 8];
                    self.fill(&mut b, "EXPIRETIME_MS")?;
                    // A negative time (a key expired before 1970) is long expired.
                    expire_ms = Some(i64::from_le_bytes(b).max(1) as u64);
                }
                opcode::FREQ => freq = Some(self.byte("FREQ")?),
                opcode::IDLE => idle_secs = Some(self.length("IDLE")?),
                t => {
                    let key = self.string("key")?;
                    let at = self.offset;
                    let value = self.value(t).map_err(|e| match e {
                        FileError::Corrupt { what, reason, .. } => FileError::Corrupt {
                            what,
                            offset: at,
                            reason: format!("{reason} (key {:?})", String::from_utf8_lossy(&key)),
                        },
                        e => e,
                    })?;
                    return Ok(Some(Item::Key(Entry {
                        db: self.db,
                        key,
                        value,
                        expire_ms,
                        idle_secs,
                        freq,
                    })));
                }
            }
        }
    }

    /// The trailer after EOF: the CRC-64 of every byte before it (version 5 on), checked
    /// unless zero.
    fn trailer(&mut self) -> Result<(), FileError> {
        if self.version < CHECKSUM_SINCE {
            return Ok(());
        }
        let got = self.crc;
        let mut b = [0u8; 8];
        self.fill(&mut b, "checksum")?;
        let expected = u64::from_le_bytes(b);
        if expected != 0 && expected != got {
            return Err(FileError::Checksum { expected, got });
        }
        Ok(())
    }

    /// A value of type `t`: its bytes gathered from the stream, then decoded.
    fn value(&mut self, t: u8) -> Result<Value, FileError> {
        self.gathered.clear();
        self.gather_value(t)?;
        let buf = std::mem::take(&mut self.gathered);
        let r = Reader::new(&buf).object(t);
        self.gathered = buf;
        r.map_err(|e| self.codec_error(e))
    }

    /// Appends to `gathered` the bytes of a value of type `t`, following its structure.
    fn gather_value(&mut self, t: u8) -> Result<(), FileError> {
        use types::*;
        match t {
            STRING | HASH_ZIPMAP | LIST_ZIPLIST | SET_INTSET | SET_LISTPACK | ZSET_ZIPLIST
            | ZSET_LISTPACK | HASH_ZIPLIST | HASH_LISTPACK => self.gather_string("value"),
            LIST | SET | LIST_QUICKLIST => {
                for _ in 0..self.gather_length("length")? {
                    self.gather_string("element")?;
                }
                Ok(())
            }
            HASH => {
                for _ in 0..self.gather_length("hash length")? {
                    self.gather_string("hash field")?;
                    self.gather_string("hash value")?;
                }
                Ok(())
            }
            ZSET | ZSET_2 => {
                for _ in 0..self.gather_length("sorted set length")? {
                    self.gather_string("sorted set member")?;
                    if t == ZSET_2 {
                        self.gather_bytes(8, "score")?;
                    } else {
                        let n = self.gather_bytes(1, "score")?[0];
                        if n < 253 {
                            self.gather_bytes(usize::from(n), "score")?;
                        }
                    }
                }
                Ok(())
            }
            LIST_QUICKLIST_2 => {
                for _ in 0..self.gather_length("quicklist length")? {
                    self.gather_length("quicklist node container")?;
                    self.gather_string("quicklist node")?;
                }
                Ok(())
            }
            STREAM_LISTPACKS | STREAM_LISTPACKS_2 | STREAM_LISTPACKS_3 => self.gather_stream(t),
            MODULE | MODULE_2 => Err(FileError::Unsupported(t, "module value: no modules here")),
            22..=25 => Err(FileError::Unsupported(t, "hash with field expiries")),
            _ => Err(FileError::UnknownType(t)),
        }
    }

    /// Appends a stream's bytes (`rdb/stream.rs` reads them; `docs/format/rdb.md`
    /// "Streams"): its nodes, length and IDs, then each group with its PEL and consumers.
    fn gather_stream(&mut self, t: u8) -> Result<(), FileError> {
        use types::*;
        for _ in 0..self.gather_length("stream node count")? {
            self.gather_string("stream node key")?;
            self.gather_string("stream node")?;
        }
        self.gather_length("stream length")?;
        self.gather_id("stream last ID")?;
        if t != STREAM_LISTPACKS {
            self.gather_id("stream first ID")?;
            self.gather_id("stream max deleted ID")?;
            self.gather_length("stream entries added")?;
        }
        for _ in 0..self.gather_length("stream group count")? {
            self.gather_string("stream group name")?;
            self.gather_id("stream group last ID")?;
            if t != STREAM_LISTPACKS {
                self.gather_length("stream group entries read")?;
            }
            for _ in 0..self.gather_length("stream PEL size")? {
                self.gather_bytes(16 + 8, "stream PEL entry")?;
                self.gather_length("stream PEL delivery count")?;
            }
            for _ in 0..self.gather_length("stream consumer count")? {
                self.gather_string("stream consumer name")?;
                let times = if t == STREAM_LISTPACKS_3 { 16 } else { 8 };
                self.gather_bytes(times, "stream consumer times")?;
                for _ in 0..self.gather_length("stream consumer PEL size")? {
                    self.gather_bytes(16, "stream consumer PEL ID")?;
                }
            }
        }
        Ok(())
    }

    /// A stream ID as two lengths (milliseconds, sequence), appended to `gathered`.
    fn gather_id(&mut self, what: &'static str) -> Result<(), FileError> {
        self.gather_length(what)?;
        self.gather_length(what)?;
        Ok(())
    }

    /// Appends `n` bytes to `gathered` and returns them.
    fn gather_bytes(&mut self, n: usize, what: &'static str) -> Result<&[u8], FileError> {
        let start = self.gathered.len();
        let mut left = n;
        while left > 0 {
            let k = left.min(CHUNK_BYTES);
            let at = self.gathered.len();
            self.gathered.resize(at + k, 0);
            let mut chunk = std::mem::take(&mut self.gathered);
            let r = self.fill(&mut chunk[at..], what);
            self.gathered = chunk;
            r?;
            left -= k;
        }
        Ok(&self.gathered[start..])
    }

    /// A length prefix (or a string's special encoding), appended to `gathered`.
    fn gather_prefix(&mut self, what: &'static str) -> Result<Prefix, FileError> {
        let b = self.gather_bytes(1, what)?[0];
        Ok(match b >> 6 {
            0 => Prefix::Len(u64::from(b & 0x3f)),
            1 => Prefix::Len(u64::from(b & 0x3f) << 8 | u64::from(self.gather_bytes(1, what)?[0])),
            3 => Prefix::Encoded(b & 0x3f),
            _ => match b {
                0x80 => {
                    let s = self.gather_bytes(4, what)?;
                    Prefix::Len(u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]])))
                }
                0x81 => {
                    let s = self.gather_bytes(8, what)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(s);
                    Prefix::Len(u64::from_be_bytes(a))
                }
                _ => {
                    return Err(self.corrupt(what, format!("bad length prefix {b:#04x}")));
                }
            },
        })
    }

    fn gather_length(&mut self, what: &'static str) -> Result<u64, FileError> {
        match self.gather_prefix(what)? {
            Prefix::Len(n) => Ok(n),
            Prefix::Encoded(_) => Err(self.corrupt(what, "string encoding where a length belongs")),
        }
    }

    /// A string's bytes as stored (raw, integer or LZF), appended to `gathered`.
    fn gather_string(&mut self, what: &'static str) -> Result<(), FileError> {
        let n = match self.gather_prefix(what)? {
            Prefix::Len(n) => n,
            Prefix::Encoded(0) => 1,
            Prefix::Encoded(1) => 2,
            Prefix::Encoded(2) => 4,
            Prefix::Encoded(3) => {
                let clen = self.gather_length(what)?;
                let ulen = self.gather_length(what)?;
                if ulen > MAX_STRING_BYTES {
                    return Err(self.corrupt(what, format!("LZF string of {ulen} bytes")));
                }
                clen
            }
            Prefix::Encoded(e) => {
                return Err(self.corrupt(what, format!("unknown string encoding {e}")));
            }
        };
        if n > MAX_STRING_BYTES {
            return Err(self.corrupt(what, format!("string of {n} bytes")));
        }
        self.gather_bytes(n as usize, what)?;
        Ok(())
    }

    /// A whole string outside a value (a key, an aux field, a library), decoded.
    fn string(&mut self, what: &'static str) -> Result<Vec<u8>, FileError> {
        self.gathered.clear();
        self.gather_string(what)?;
        let r = Reader::new(&self.gathered).string(what);
        r.map_err(|e| self.codec_error(e))
    }

    fn length(&mut self, what: &'static str) -> Result<u64, FileError> {
        self.gathered.clear();
        self.gather_length(what)
    }

    fn byte(&mut self, what: &'static str) -> Result<u8, FileError> {
        let mut b = [0u8; 1];
        self.fill(&mut b, what)?;
        Ok(b[0])
    }

    /// Reads exactly `buf.len()` bytes, feeding the CRC (but for the trailer's own bytes,
    /// which are read after the CRC was taken).
    fn fill(&mut self, buf: &mut [u8], what: &'static str) -> Result<(), FileError> {
        match self.src.read_exact(buf) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                return Err(FileError::Truncated {
                    what,
                    offset: self.offset,
                })
            }
            Err(e) => return Err(FileError::Io(e.to_string())),
        }
        self.crc = crc64::update(self.crc, buf);
        self.offset += buf.len() as u64;
        Ok(())
    }

    fn corrupt(&self, what: &'static str, reason: impl Into<String>) -> FileError {
        FileError::Corrupt {
            what,
            offset: self.offset,
            reason: reason.into(),
        }
    }

    fn codec_error(&self, e: RdbError) -> FileError {
        match e {
            RdbError::UnknownType(t) => FileError::UnknownType(t),
            RdbError::Unsupported(t, what) => FileError::Unsupported(t, what),
            RdbError::Corrupt { what, reason } => self.corrupt(what, reason),
            e => self.corrupt("value", e.to_string()),
        }
    }
}

/// A length, or the special encoding a string starts with.
enum Prefix {
    Len(u64),
    Encoded(u8),
}
