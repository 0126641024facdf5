//! [`WriteBatch`]: a group of puts and deletes applied atomically.
//!
//! The batch's byte representation is also the WAL record payload (`docs/format/wal.md`):
//!
//! ```text
//! rep := seq: u64 LE | count: u32 LE | record*
//! record := kind: u8 (1 = put, 0 = delete) | key_len: varint32 | key | [value_len: varint32 | value]
//! ```
//! Keeping one representation means a batch is encoded once, when the user builds it, and the
//! group-commit leader only concatenates.

use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};
use crate::varint;

/// Header bytes: sequence number and record count.
pub const HEADER_LEN: usize = 12;

/// Largest key accepted (keys are held in memory whole many times over).
pub const MAX_KEY_LEN: usize = 64 << 10;
/// Largest value accepted in one record.
pub const MAX_VALUE_LEN: usize = 256 << 20;

/// An atomic group of writes.
#[derive(Clone, Debug)]
pub struct WriteBatch {
    rep: Vec<u8>,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0u8; HEADER_LEN],
        }
    }

    /// An empty batch with room for about `bytes` of records without growing (RocksDB's
    /// `reserved_bytes`): a record takes its key and value plus up to 11 bytes.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER_LEN + bytes);
        rep.resize(HEADER_LEN, 0);
        WriteBatch { rep }
    }

    /// Adds a put. Panics never; an oversized key or value is reported when the batch is
    /// written (see [`WriteBatch::validate`]).
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.rep.push(ValueKind::Value as u8);
        varint::put_len_prefixed(&mut self.rep, key);
        varint::put_len_prefixed(&mut self.rep, value);
        self.set_count(self.count() + 1);
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) {
        self.rep.push(ValueKind::Delete as u8);
        varint::put_len_prefixed(&mut self.rep, key);
        self.set_count(self.count() + 1);
    }

    /// Number of records.
    pub fn count(&self) -> u32 {
        u32::from_le_bytes(self.rep[8..12].try_into().unwrap())
    }

    /// True when the batch has no records.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Removes every record.
    pub fn clear(&mut self) {
        self.rep.truncate(HEADER_LEN);
        self.rep[..HEADER_LEN].fill(0);
    }

    /// Bytes of the encoded batch.
    pub fn size_bytes(&self) -> usize {
        self.rep.len()
    }

    /// User bytes (keys plus values) in the batch.
    pub fn user_bytes(&self) -> u64 {
        self.iter()
            .filter_map(|r| r.ok())
            .map(|r| (r.key.len() + r.value.map_or(0, |v| v.len())) as u64)
            .sum()
    }

    pub(crate) fn set_count(&mut self, n: u32) {
        self.rep[8..12].copy_from_slice(&n.to_le_bytes());
    }

    /// The first sequence number of the batch (set at commit).
    pub fn seq(&self) -> SeqNo {
        u64::from_le_bytes(self.rep[0..8].try_into().unwrap())
    }

    pub(crate) fn set_seq(&mut self, seq: SeqNo) {
        self.rep[0..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// The encoded representation (WAL payload).
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Rebuilds a batch from its representation, checking every record. Errors name `file`
    /// and `offset` (where the payload was read from).
    pub fn from_data(data: Vec<u8>, file: &std::path::Path, offset: u64) -> Result<WriteBatch> {
        if data.len() < HEADER_LEN {
            return Err(Error::corruption(
                file,
                offset,
                "write batch shorter than header",
            ));
        }
        let b = WriteBatch { rep: data };
        let mut n = 0u32;
        for r in b.iter() {
            r.map_err(|e| Error::corruption(file, offset, e))?;
            n += 1;
        }
        if n != b.count() {
            return Err(Error::corruption(
                file,
                offset,
                format!("write batch says {} records, holds {n}", b.count()),
            ));
        }
        Ok(b)
    }

    /// Appends every record of `other` (used by the group-commit leader).
    pub(crate) fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[HEADER_LEN..]);
        self.set_count(self.count() + other.count());
    }

    /// Checks limits on keys and values.
    pub fn validate(&self) -> Result<()> {
        for r in self.iter() {
            let r = r.map_err(Error::InvalidArgument)?;
            if r.key.len() > MAX_KEY_LEN {
                return Err(Error::InvalidArgument(format!(
                    "key of {} bytes exceeds the limit of {MAX_KEY_LEN}",
                    r.key.len()
                )));
            }
            if let Some(v) = r.value {
                if v.len() > MAX_VALUE_LEN {
                    return Err(Error::InvalidArgument(format!(
                        "value of {} bytes exceeds the limit of {MAX_VALUE_LEN}",
                        v.len()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Iterates the records. A malformed record yields `Err(reason)` and ends the iteration.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            data: &self.rep[HEADER_LEN..],
            failed: false,
        }
    }
}

/// One record of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRecord<'a> {
    pub kind: ValueKind,
    pub key: &'a [u8],
    /// `None` for deletes.
    pub value: Option<&'a [u8]>,
}

/// Iterator over a batch's records.
pub struct BatchIter<'a> {
    data: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = std::result::Result<BatchRecord<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.data.is_empty() || self.failed {
            return None;
        }
        let r = self.parse();
        if r.is_err() {
            self.failed = true;
        }
        Some(r)
    }
}

impl<'a> BatchIter<'a> {
    fn parse(&mut self) -> std::result::Result<BatchRecord<'a>, String> {
        let kind = ValueKind::from_u8(self.data[0])
            .ok_or_else(|| format!("unknown record kind {}", self.data[0]))?;
        let mut rest = &self.data[1..];
        let key = varint::get_len_prefixed(&mut rest).ok_or("truncated key")?;
        let value = match kind {
            ValueKind::Value => Some(varint::get_len_prefixed(&mut rest).ok_or("truncated value")?),
            ValueKind::Delete => None,
            ValueKind::Pointer => return Err("pointer record in a write batch".into()),
        };
        self.data = rest;
        Ok(BatchRecord { kind, key, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        b.delete(b"b");
        b.put(b"", b"");
        b.set_seq(77);
        let c = WriteBatch::from_data(b.data().to_vec(), Path::new("x"), 0).unwrap();
        assert_eq!(c.seq(), 77);
        assert_eq!(c.count(), 3);
        let recs: Vec<_> = c.iter().map(|r| r.unwrap()).collect();
        assert_eq!(recs[0].key, b"a");
        assert_eq!(recs[0].value, Some(&b"1"[..]));
        assert_eq!(recs[1].kind, ValueKind::Delete);
        assert_eq!(recs[1].value, None);
    }

    #[test]
    fn truncated_and_miscounted_batches_are_corruption() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        let d = b.data().to_vec();
        for cut in HEADER_LEN + 1..d.len() {
            let e = WriteBatch::from_data(d[..cut].to_vec(), Path::new("x"), 0).unwrap_err();
            assert!(e.is_corruption(), "{e}");
        }
        let mut d2 = d.clone();
        d2[8] = 5;
        assert!(WriteBatch::from_data(d2, Path::new("x"), 0).is_err());
    }
}
