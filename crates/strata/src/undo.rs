//! System keys and undo records of cross-shard batches. Spec: `docs/format/shards.md`.
//!
//! Every shard reserves the keys that start with [`SYS_PREFIX`]; user keys with that prefix are
//! rejected ([`check_user_key`]) and iterators skip the range. A cross-shard batch with global
//! sequence number `gsn` writes, in each shard it touches and in the same engine write as its
//! part, the key `UNDO_PREFIX ++ gsn (u64 BE)` whose value is an undo record: the before-image
//! of every key of the part.
//!
//! ```text
//! undo record := version: u8 (1) | gsn: u64 LE | count: u32 LE | entry*count | crc32c: u32 LE
//! entry       := key_len: u32 LE | key | present: u8 (0 | 1) | [value_len: u32 LE | value]
//! ```
//! The crc covers every byte before it. `present = 0` means the key did not exist.

use strata_engine::{Error, Result};

/// Prefix of every system key. Sorts after nearly every user key.
pub const SYS_PREFIX: &[u8] = b"\xff\xff\xff\xffstrata\x00";
/// First key after the system range (`SYS_PREFIX` with its last byte incremented).
pub const SYS_END: &[u8] = b"\xff\xff\xff\xffstrata\x01";
/// Prefix of undo records.
pub const UNDO_PREFIX: &[u8] = b"\xff\xff\xff\xffstrata\x00undo/";
/// First key after the undo records.
pub const UNDO_END: &[u8] = b"\xff\xff\xff\xffstrata\x00undo0";

const UNDO_VERSION: u8 = 1;

/// Whether `key` is in the reserved system range.
#[inline]
pub fn is_system_key(key: &[u8]) -> bool {
    key.starts_with(SYS_PREFIX)
}

/// Rejects keys the user may not write (reserved prefix, too long).
pub fn check_user_key(key: &[u8]) -> Result<()> {
    if is_system_key(key) {
        return Err(Error::InvalidArgument(
            "keys starting with the reserved prefix ff ff ff ff 's' 't' 'r' 'a' 't' 'a' 00 \
             belong to Strata's cross-shard transaction records"
                .to_string(),
        ));
    }
    if key.len() > strata_engine::batch::MAX_KEY_LEN {
        return Err(Error::InvalidArgument(format!(
            "key of {} bytes exceeds the limit of {}",
            key.len(),
            strata_engine::batch::MAX_KEY_LEN
        )));
    }
    Ok(())
}

/// Rejects values over the engine's limit.
pub fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > strata_engine::batch::MAX_VALUE_LEN {
        return Err(Error::InvalidArgument(format!(
            "value of {} bytes exceeds the limit of {}",
            value.len(),
            strata_engine::batch::MAX_VALUE_LEN
        )));
    }
    Ok(())
}

/// The undo key of `gsn`.
pub fn undo_key(gsn: u64) -> Vec<u8> {
    let mut k = UNDO_PREFIX.to_vec();
    k.extend_from_slice(&gsn.to_be_bytes());
    k
}

/// The GSN an undo key names, if `key` is one.
pub fn parse_undo_key(key: &[u8]) -> Option<u64> {
    let rest = key.strip_prefix(UNDO_PREFIX)?;
    Some(u64::from_be_bytes(rest.try_into().ok()?))
}

/// Before-images of one cross-shard batch part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoRecord {
    pub gsn: u64,
    /// (key, value before the part; `None` if absent). Each key once.
    pub before: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl UndoRecord {
    pub fn encode(&self) -> Vec<u8> {
        let size: usize = self
            .before
            .iter()
            .map(|(k, v)| 9 + k.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum();
        let mut b = Vec::with_capacity(17 + size);
        b.push(UNDO_VERSION);
        b.extend_from_slice(&self.gsn.to_le_bytes());
        b.extend_from_slice(&(self.before.len() as u32).to_le_bytes());
        for (k, v) in &self.before {
            b.extend_from_slice(&(k.len() as u32).to_le_bytes());
            b.extend_from_slice(k);
            match v {
                None => b.push(0),
                Some(v) => {
                    b.push(1);
                    b.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    b.extend_from_slice(v);
                }
            }
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes an undo record read from shard directory `file` (for error messages).
    pub fn decode(data: &[u8], file: &std::path::Path) -> Result<UndoRecord> {
        let bad =
            |off: usize, r: &str| Error::corruption(file, off as u64, format!("undo record: {r}"));
        if data.len() < 17 {
            return Err(bad(0, "too short"));
        }
        let body = &data[..data.len() - 4];
        let stored = u32::from_le_bytes(data[data.len() - 4..].try_into().expect("4 bytes"));
        if crc32c::crc32c(body) != stored {
            return Err(bad(body.len(), "checksum mismatch"));
        }
        if body[0] != UNDO_VERSION {
            return Err(bad(0, &format!("unsupported version {}", body[0])));
        }
        let gsn = u64::from_le_bytes(body[1..9].try_into().expect("8 bytes"));
        let count = u32::from_le_bytes(body[9..13].try_into().expect("4 bytes")) as usize;
        let mut pos = 13;
        let take = |pos: &mut usize, n: usize| -> Result<&[u8]> {
            if body.len() - *pos < n {
                return Err(bad(*pos, "entry runs past the end"));
            }
            let s = &body[*pos..*pos + n];
            *pos += n;
            Ok(s)
        };
        let mut before = Vec::with_capacity(count.min(1 << 16));
        for _ in 0..count {
            let kl = u32::from_le_bytes(take(&mut pos, 4)?.try_into().expect("4 bytes")) as usize;
            let k = take(&mut pos, kl)?.to_vec();
            let v = match take(&mut pos, 1)?[0] {
                0 => None,
                1 => {
                    let vl = u32::from_le_bytes(take(&mut pos, 4)?.try_into().expect("4 bytes"))
                        as usize;
                    Some(take(&mut pos, vl)?.to_vec())
                }
                f => return Err(bad(pos - 1, &format!("bad presence flag {f}"))),
            };
            before.push((k, v));
        }
        if pos != body.len() {
            return Err(bad(pos, "trailing bytes after the last entry"));
        }
        Ok(UndoRecord { gsn, before })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_consistent() {
        assert!(SYS_PREFIX < SYS_END);
        assert!(UNDO_PREFIX.starts_with(SYS_PREFIX));
        assert!(UNDO_END.starts_with(SYS_PREFIX));
        assert!(undo_key(0).as_slice() >= UNDO_PREFIX);
        assert!(undo_key(u64::MAX).as_slice() < UNDO_END);
        assert!(undo_key(5) < undo_key(6));
        assert_eq!(parse_undo_key(&undo_key(77)), Some(77));
        assert!(check_user_key(&undo_key(1)).is_err());
        assert!(check_user_key(b"\xff\xff\xff\xff").is_ok());
        assert!(check_user_key(b"\xff\xff\xff\xffstrata\x01").is_ok());
    }

    #[test]
    fn undo_round_trip_and_corruption() {
        let r = UndoRecord {
            gsn: 42,
            before: vec![
                (b"a".to_vec(), None),
                (b"bb".to_vec(), Some(b"old".to_vec())),
            ],
        };
        let e = r.encode();
        let p = std::path::Path::new("x");
        assert_eq!(UndoRecord::decode(&e, p).unwrap(), r);
        for i in 0..e.len() {
            let mut c = e.clone();
            c[i] ^= 1;
            assert!(UndoRecord::decode(&c, p).is_err(), "flip at {i} accepted");
        }
    }
}
