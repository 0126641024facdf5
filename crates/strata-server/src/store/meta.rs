//! A key's metadata record (its type, expiry, incarnation and size; a string's value), the
//! type check every typed handle opens a key with ([`Meta::of_type`], [`TypeError`]), and
//! the writes of one command ([`Writes`]). Record layout: `docs/format/redis-keys.md`.
//!
//! Layer: store and types.

use crate::keys::meta_key;
use strata::WriteBatch;

/// Fixed part of a metadata value: type, expiry, version, size.
pub(super) const META_HEADER_BYTES: usize = 1 + 8 + 8 + 8;

/// A key's type. On-disk: do not renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RType {
    String = 0,
    Hash = 1,
    List = 2,
    Set = 3,
    ZSet = 4,
    Stream = 5,
}

impl RType {
    fn from_byte(b: u8) -> Option<RType> {
        match b {
            0 => Some(RType::String),
            1 => Some(RType::Hash),
            2 => Some(RType::List),
            3 => Some(RType::Set),
            4 => Some(RType::ZSet),
            5 => Some(RType::Stream),
            _ => None,
        }
    }

    /// The name TYPE replies with.
    pub fn name(self) -> &'static str {
        match self {
            RType::String => "string",
            RType::Hash => "hash",
            RType::List => "list",
            RType::Set => "set",
            RType::ZSet => "zset",
            RType::Stream => "stream",
        }
    }

    /// Whether the type keeps its members in member records (everything but strings).
    pub fn is_collection(self) -> bool {
        self != RType::String
    }
}

/// A key's metadata record (for strings, with the value inline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub rtype: RType,
    /// Absolute expiry in Unix milliseconds; 0: none.
    pub expire_ms: u64,
    /// Distinguishes this incarnation of the key from earlier ones (subkeys of collections
    /// live under it, so deleting a collection needs only its metadata record deleted).
    pub version: u64,
    /// Strings: the value's length; collections: their element count.
    pub size: u64,
    /// Strings: the value; collections: their type's own fields (lists: head and tail
    /// indexes), empty for types that have none.
    pub value: Vec<u8>,
}

/// A hash, set or sorted set is rewritten under a new version once it has this many deleted
/// members more than twice its live ones ([`super::Tx::rewrite_if_sparse`]).
pub(super) const REWRITE_SLACK: u64 = 64;

/// The fixed header of a metadata record ([`Meta::peek`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaHeader {
    pub rtype: RType,
    pub expire_ms: u64,
    pub version: u64,
}

impl MetaHeader {
    /// Whether the key is expired at Unix milliseconds `now_ms` (as [`Meta::expired_at`]).
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.expire_ms != 0 && self.expire_ms <= now_ms
    }
}

impl Meta {
    /// Whether this type keeps a deleted-member count in its extras (the member-keyed
    /// collections; a list's deletes are at its ends, which its indexes skip).
    pub(super) fn counts_dead(&self) -> bool {
        matches!(self.rtype, RType::Hash | RType::Set | RType::ZSet)
    }

    /// Members deleted from this incarnation of a hash, set or sorted set: their records are
    /// tombstones that a seek into the members must step over (extras bytes 1..9, big-endian;
    /// absent: 0).
    pub fn dead_members(&self) -> u64 {
        match self.value.get(1..9) {
            Some(b) if self.counts_dead() => u64::from_be_bytes(b.try_into().unwrap_or([0; 8])),
            _ => 0,
        }
    }

    pub fn set_dead_members(&mut self, n: u64) {
        if !self.counts_dead() {
            return;
        }
        if self.value.is_empty() {
            self.value.push(0);
        }
        self.value.resize(9, 0);
        self.value[1..9].copy_from_slice(&n.to_be_bytes());
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(META_HEADER_BYTES + self.value.len());
        v.push(self.rtype as u8);
        v.extend_from_slice(&self.expire_ms.to_be_bytes());
        v.extend_from_slice(&self.version.to_be_bytes());
        v.extend_from_slice(&self.size.to_be_bytes());
        v.extend_from_slice(&self.value);
        v
    }

    /// `None` for bytes that are not a metadata record of a known type.
    pub fn decode(b: &[u8]) -> Option<Meta> {
        let h = Meta::peek(b)?;
        Some(Meta {
            rtype: h.rtype,
            expire_ms: h.expire_ms,
            version: h.version,
            size: u64::from_be_bytes(b[17..25].try_into().ok()?),
            value: b[META_HEADER_BYTES..].to_vec(),
        })
    }

    /// The header of an encoded record: its type, expiry (Unix ms, 0: none) and
    /// incarnation, without copying its value out (the compaction filter asks this of every
    /// metadata record it passes).
    pub fn peek(b: &[u8]) -> Option<MetaHeader> {
        if b.len() < META_HEADER_BYTES {
            return None;
        }
        let u = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(MetaHeader {
            rtype: RType::from_byte(b[0])?,
            expire_ms: u(1),
            version: u(9),
        })
    }

    /// [`Meta::decode`] of a record read into a vector of its own: the value keeps its
    /// bytes (moved down over the header, no copy into a new allocation).
    pub fn decode_owned(mut b: Vec<u8>) -> Option<Meta> {
        let mut m = Meta::decode(b.get(..META_HEADER_BYTES)?)?;
        b.drain(..META_HEADER_BYTES);
        m.value = b;
        Some(m)
    }

    /// Whether the key is expired at Unix milliseconds `now_ms` (due at its millisecond).
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.expire_ms != 0 && self.expire_ms <= now_ms
    }

    /// The absolute expiry in Unix milliseconds, if the key has one.
    pub fn expiry(&self) -> Option<u64> {
        (self.expire_ms != 0).then_some(self.expire_ms)
    }

    /// This record if it is of type `t`; `WrongType` otherwise (Redis's `checkType`).
    pub fn of_type(self, t: RType) -> Result<Meta, TypeError> {
        if self.rtype == t {
            Ok(self)
        } else {
            Err(TypeError::WrongType)
        }
    }

    /// The record of string `value`, incarnation `version`, expiring at `expire_ms` (0:
    /// never).
    pub fn string(version: u64, value: Vec<u8>, expire_ms: u64) -> Meta {
        Meta {
            rtype: RType::String,
            expire_ms,
            version,
            size: value.len() as u64,
            value,
        }
    }

    /// The metadata of a new, empty collection of type `rtype` with incarnation `version`
    /// (the caller sets `size` and `value` as it adds members).
    pub fn collection(rtype: RType, version: u64) -> Meta {
        Meta {
            rtype,
            expire_ms: 0,
            version,
            size: 0,
            value: Vec::new(),
        }
    }
}

/// Why a typed handle could not open a key: it holds another type (Redis's WRONGTYPE), or
/// the store failed.
#[derive(Debug)]
pub enum TypeError {
    WrongType,
    Store(strata_engine::Error),
}

impl From<strata_engine::Error> for TypeError {
    fn from(e: strata_engine::Error) -> Self {
        TypeError::Store(e)
    }
}

impl From<TypeError> for crate::error::CmdError {
    fn from(e: TypeError) -> Self {
        match e {
            TypeError::WrongType => crate::error::CmdError::reply(crate::error::ERR_WRONGTYPE),
            TypeError::Store(e) => crate::error::CmdError::Store(e),
        }
    }
}

/// The writes of one command, applied atomically by [`super::Tx::apply`]: metadata records (with
/// the expiry index kept in step) and member records, each naming the Redis key it belongs
/// to so that the store knows which keys the command modified (WATCH, blocked clients).
#[derive(Default)]
pub struct Writes {
    pub(super) batch: WriteBatch,
    pub(super) metas: Vec<(u8, Vec<u8>, Option<Meta>)>,
    pub(super) touched: Vec<(u8, Vec<u8>)>,
    /// Member records deleted, per collection (consecutive deletes of one key counted once).
    pub(super) deleted: Vec<(u8, Vec<u8>, u64)>,
}

impl Writes {
    pub fn new() -> Writes {
        Writes::default()
    }

    /// Writes (`Some`) or deletes (`None`) the metadata record of `key`.
    pub fn meta(&mut self, db: u8, key: &[u8], meta: Option<&Meta>) -> &mut Self {
        let mk = meta_key(db, key);
        match meta {
            Some(m) => self.batch.put(&mk, &m.encode()),
            None => self.batch.delete(&mk),
        };
        self.metas.push((db, key.to_vec(), meta.cloned()));
        self
    }

    /// Writes member record `record` (a full store key from `keys::sub_key` or
    /// `keys::sub_prefix`) of collection `key`.
    pub fn put_member(&mut self, db: u8, key: &[u8], record: &[u8], value: &[u8]) -> &mut Self {
        self.batch.put(record, value);
        self.touch(db, key);
        self
    }

    /// Deletes member record `record` of collection `key`.
    pub fn delete_member(&mut self, db: u8, key: &[u8], record: &[u8]) -> &mut Self {
        self.batch.delete(record);
        self.touch(db, key);
        match self.deleted.last_mut() {
            Some((d, k, n)) if *d == db && k == key => *n += 1,
            _ => self.deleted.push((db, key.to_vec(), 1)),
        }
        self
    }

    fn touch(&mut self, db: u8, key: &[u8]) {
        if self
            .touched
            .last()
            .is_none_or(|(d, k)| *d != db || k != key)
        {
            self.touched.push((db, key.to_vec()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }
}

/// A metadata record that could not be decoded: data corruption, reported to the client.
pub(super) fn corrupt(key: &[u8]) -> strata_engine::Error {
    strata_engine::Error::Corruption {
        file: "<redis metadata record>".into(),
        offset: 0,
        reason: format!(
            "the record of key {:?} does not decode",
            String::from_utf8_lossy(key)
        ),
    }
}

#[cfg(test)]
#[path = "meta_tests.rs"]
mod tests;
