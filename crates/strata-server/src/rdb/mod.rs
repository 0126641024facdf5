//! Redis's RDB value codec, with no protocol and no store in it: what DUMP and RESTORE
//! carry, and what a replica's full sync and cluster MIGRATE read and write
//! (`docs/format/rdb.md`).
//!
//! - `crc64.rs`: the CRC-64 of DUMP payloads and RDB files;
//! - `lzf.rs`: LZF, the compression of long RDB strings;
//! - `packed.rs`: ziplist, listpack, intset and zipmap, the packed encodings inside strings;
//! - `read.rs`: lengths, strings and every value encoding Redis 2.x to 7.4 writes (module
//!   values and 7.4's hashes with field expiries excepted), into a [`Value`];
//! - `stream.rs`: streams with their consumer groups, read in Redis 5's, 7.0's and 7.2's
//!   forms and written in Redis 5's;
//! - `write.rs`: a [`Value`] in RDB 9 encodings, which every Redis from 5.0 to 7.4 loads;
//! - `file.rs`: whole RDB files (header, opcodes, trailer), streamed one item at a time;
//! - `dataset.rs`: a whole RDB file of an engine snapshot (full sync, `strata export-rdb`),
//!   written one key at a time; `export.rs`: that file from a stopped server's database.
//!
//! [`dump_payload`] and [`parse_payload`] frame a value as DUMP does: type byte, value, the
//! RDB version (2 bytes, LE) and the CRC-64 of everything before it (8 bytes, LE).
//!
//! Layer: store and types (above configuration; no services, commands or execution).

pub mod crc64;
pub(crate) mod dataset;
pub mod export;
pub mod file;
pub mod lzf;
pub mod packed;
pub mod read;
pub mod stream;
pub mod write;

#[cfg(test)]
mod dataset_tests;
#[cfg(test)]
mod file_fixtures;
#[cfg(test)]
mod file_tests;
#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
pub(crate) mod tests;

pub use dataset::{DatasetError, DatasetStats, DbCount};
pub use read::Reader;

/// A hash's field and value.
pub type Pair = (Vec<u8>, Vec<u8>);

/// One Redis value, as Strata's store holds it: collections are lists of their elements
/// (hashes and sets without duplicates, sorted sets without NaN scores), a stream its
/// nodes and groups.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<Pair>),
    Stream(Box<stream::StreamValue>),
}

/// Value type bytes (Redis's `RDB_TYPE_*`). On-disk: do not renumber.
pub mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// Redis 7.4's hashes with field expiries (22, 23: release-candidate forms).
    pub const HASH_METADATA: u8 = 24;
    pub const HASH_LISTPACK_EX: u8 = 25;
}

/// The RDB version DUMP payloads are written with: 9 (Redis 5.0), so that every Redis
/// from 5.0 on accepts them (a Redis refuses payloads newer than its own RDB version).
pub const WRITE_VERSION: u16 = 9;

/// The newest payload version read: 12 (Redis 7.4). Redis 7.0.15 itself accepts up to its
/// own version, 10; Strata reads the encodings of 7.2 (11) and 7.4 (12) too.
pub const READ_MAX_VERSION: u16 = 12;

/// At most this many elements are reserved before they are read: a count is already no
/// more than the bytes left, but an element's in-memory form is larger than its one byte
/// minimum, so a lying count must not reserve gigabytes. Larger collections grow as read.
const PREALLOC_MAX: usize = 1 << 16;

/// Bytes after the value in a DUMP payload: version (2) and CRC-64 (8).
const FOOTER_BYTES: usize = 10;

/// Why a payload or an RDB value does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RdbError {
    #[error("payload shorter than its footer")]
    NoFooter,
    #[error("RDB version {0} is newer than {READ_MAX_VERSION}")]
    Version(u16),
    #[error("checksum mismatch: payload says {expected:#018x}, data gives {got:#018x}")]
    Checksum { expected: u64, got: u64 },
    #[error("data ends inside {what} at byte {offset}")]
    Truncated { what: &'static str, offset: usize },
    #[error("unknown value type {0}")]
    UnknownType(u8),
    #[error("value type {0} ({1}) is not supported")]
    Unsupported(u8, &'static str),
    #[error("corrupt {what}: {reason}")]
    Corrupt { what: &'static str, reason: String },
}

/// The DUMP payload of `v`.
pub fn dump_payload(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write::value(&mut out, v);
    out.extend_from_slice(&WRITE_VERSION.to_le_bytes());
    let crc = crc64::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a DUMP payload's footer (version at most [`READ_MAX_VERSION`], CRC-64) and
/// returns its body (type byte and value) and version. RESTORE replies "DUMP payload
/// version or checksum are wrong" to any error here.
pub fn check_payload(p: &[u8]) -> Result<(&[u8], u16), RdbError> {
    if p.len() < FOOTER_BYTES {
        return Err(RdbError::NoFooter);
    }
    let (body, footer) = p.split_at(p.len() - FOOTER_BYTES);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > READ_MAX_VERSION {
        return Err(RdbError::Version(version));
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&footer[2..]);
    let expected = u64::from_le_bytes(crc);
    let got = crc64::crc64(&p[..p.len() - 8]);
    if expected != got {
        return Err(RdbError::Checksum { expected, got });
    }
    Ok((body, version))
}

/// The value a payload's body (from [`check_payload`]) holds: its type byte, the value,
/// and nothing after it.
pub fn parse_body(body: &[u8]) -> Result<Value, RdbError> {
    let mut r = Reader::new(body);
    let t = r.u8("value type")?;
    let v = r.object(t)?;
    if r.remaining() != 0 {
        return Err(RdbError::Corrupt {
            what: "payload",
            reason: format!("{} bytes after the value", r.remaining()),
        });
    }
    Ok(v)
}

/// The value of a DUMP payload, footer checked.
pub fn parse_payload(p: &[u8]) -> Result<Value, RdbError> {
    parse_body(check_payload(p)?.0)
}
