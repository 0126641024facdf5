//! Reading RDB: lengths, strings and value encodings (`docs/format/rdb.md`).
//!
//! Hostile input costs only what it holds: every length is checked against the bytes left
//! before anything is allocated (a collection of `n` elements needs at least `n` bytes, a
//! string of `n` bytes needs `n`; an LZF string's announced length is bounded by what its
//! compressed bytes can produce), and nothing recurses (a packed blob is one level inside
//! a string).

use super::{lzf, packed, types, Pair, RdbError, Value, PREALLOC_MAX};
use std::collections::HashSet;

/// A cursor over RDB bytes (a DUMP payload's body, or an RDB file's contents).
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// Length-prefix forms (the top two bits of the first byte).
const LEN_6BIT: u8 = 0;
const LEN_14BIT: u8 = 1;
const LEN_32BIT: u8 = 0x80;
const LEN_64BIT: u8 = 0x81;
const LEN_ENCODED: u8 = 3;
/// Special string encodings (the low six bits after `11`).
const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;
/// Quicklist 2 node containers.
const NODE_PLAIN: u64 = 1;
const NODE_PACKED: u64 = 2;

/// A length, or the special encoding a string starts with.
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Offset of the next byte.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], RdbError> {
        if n > self.remaining() {
            return Err(RdbError::Truncated {
                what,
                offset: self.pos,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, RdbError> {
        Ok(self.take(1, what)?[0])
    }

    fn len_or_encoding(&mut self, what: &'static str) -> Result<Len, RdbError> {
        let b = self.u8(what)?;
        Ok(match b >> 6 {
            LEN_6BIT => Len::Plain(u64::from(b & 0x3f)),
            LEN_14BIT => Len::Plain(u64::from(b & 0x3f) << 8 | u64::from(self.u8(what)?)),
            LEN_ENCODED => Len::Encoded(b & 0x3f),
            _ => match b {
                LEN_32BIT => Len::Plain(u64::from(u32::from_be_bytes(self.array(what)?))),
                LEN_64BIT => Len::Plain(u64::from_be_bytes(self.array(what)?)),
                _ => {
                    return Err(RdbError::Corrupt {
                        what,
                        reason: format!("bad length prefix {b:#04x} at {}", self.pos - 1),
                    })
                }
            },
        })
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], RdbError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    /// A length (6, 14, 32 or 64 bits); an encoded-string marker here is corruption.
    pub fn length(&mut self, what: &'static str) -> Result<u64, RdbError> {
        match self.len_or_encoding(what)? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(RdbError::Corrupt {
                what,
                reason: format!(
                    "string encoding where a length belongs, at {}",
                    self.pos - 1
                ),
            }),
        }
    }

    /// A count of things each taking at least one byte: refused if more than the bytes
    /// left, so that it can size an allocation.
    pub fn count(&mut self, what: &'static str) -> Result<usize, RdbError> {
        let at = self.pos;
        let n = self.length(what)?;
        if n > self.remaining() as u64 {
            return Err(RdbError::Corrupt {
                what,
                reason: format!(
                    "count {n} at {at} exceeds the {} bytes left",
                    self.remaining()
                ),
            });
        }
        Ok(n as usize)
    }

    /// A string: raw, an integer (8, 16 or 32 bits, as its decimal text) or LZF.
    pub fn string(&mut self, what: &'static str) -> Result<Vec<u8>, RdbError> {
        let at = self.pos;
        match self.len_or_encoding(what)? {
            Len::Plain(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                Ok(self.take(n, what)?.to_vec())
            }
            Len::Encoded(ENC_INT8) => Ok(i8::from_le_bytes(self.array(what)?).to_string().into()),
            Len::Encoded(ENC_INT16) => Ok(i16::from_le_bytes(self.array(what)?).to_string().into()),
            Len::Encoded(ENC_INT32) => Ok(i32::from_le_bytes(self.array(what)?).to_string().into()),
            Len::Encoded(ENC_LZF) => {
                let clen = self.length(what)?;
                let ulen = self.length(what)?;
                let clen = usize::try_from(clen).unwrap_or(usize::MAX);
                let ulen = usize::try_from(ulen).unwrap_or(usize::MAX);
                let c = self.take(clen, what)?;
                lzf::decompress(c, ulen).map_err(|e| RdbError::Corrupt {
                    what,
                    reason: format!("LZF string at {at}: {e}"),
                })
            }
            Len::Encoded(e) => Err(RdbError::Corrupt {
                what,
                reason: format!("unknown string encoding {e} at {at}"),
            }),
        }
    }

    /// A score of the old ZSET type: its text after a length byte (253 NaN, 254 +inf,
    /// 255 -inf).
    fn text_double(&mut self, what: &'static str) -> Result<f64, RdbError> {
        let n = self.u8(what)?;
        let v = match n {
            253 => f64::NAN,
            254 => f64::INFINITY,
            255 => f64::NEG_INFINITY,
            n => parse_score(self.take(usize::from(n), what)?, what)?,
        };
        Ok(v)
    }

    /// A score of ZSET_2: the IEEE 754 double, little-endian.
    fn binary_double(&mut self, what: &'static str) -> Result<f64, RdbError> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }

    /// A value of type `t` (the type byte already read).
    pub fn object(&mut self, t: u8) -> Result<Value, RdbError> {
        use types::*;
        let v = match t {
            STRING => Value::String(self.string("string")?),
            LIST => {
                let n = self.count("list length")?;
                let mut items = Vec::with_capacity(n.min(PREALLOC_MAX));
                for _ in 0..n {
                    items.push(self.string("list element")?);
                }
                Value::List(items)
            }
            SET => {
                let n = self.count("set length")?;
                let mut items = Vec::with_capacity(n.min(PREALLOC_MAX));
                for _ in 0..n {
                    items.push(self.string("set member")?);
                }
                Value::Set(items)
            }
            ZSET | ZSET_2 => {
                let n = self.count("sorted set length")?;
                let mut items = Vec::with_capacity(n.min(PREALLOC_MAX));
                for _ in 0..n {
                    let m = self.string("sorted set member")?;
                    let s = if t == ZSET {
                        self.text_double("score")?
                    } else {
                        self.binary_double("score")?
                    };
                    items.push((m, s));
                }
                Value::ZSet(items)
            }
            HASH => {
                let n = self.count("hash length")?;
                let mut items = Vec::with_capacity(n.min(PREALLOC_MAX));
                for _ in 0..n {
                    let f = self.string("hash field")?;
                    items.push((f, self.string("hash value")?));
                }
                Value::Hash(items)
            }
            HASH_ZIPMAP => Value::Hash(packed::zipmap(&self.string("zipmap")?)?),
            LIST_ZIPLIST => Value::List(packed::ziplist(&self.string("ziplist")?)?),
            SET_INTSET => Value::Set(packed::intset(&self.string("intset")?)?),
            SET_LISTPACK => Value::Set(packed::listpack(&self.string("listpack")?)?),
            ZSET_ZIPLIST | ZSET_LISTPACK => {
                let blob = self.string("sorted set blob")?;
                let flat = if t == ZSET_ZIPLIST {
                    packed::ziplist(&blob)?
                } else {
                    packed::listpack(&blob)?
                };
                let mut items = Vec::with_capacity(flat.len() / 2);
                for (m, s) in pairs(flat, "sorted set blob")? {
                    items.push((m, parse_score(&s, "sorted set blob")?));
                }
                Value::ZSet(items)
            }
            HASH_ZIPLIST | HASH_LISTPACK => {
                let blob = self.string("hash blob")?;
                let flat = if t == HASH_ZIPLIST {
                    packed::ziplist(&blob)?
                } else {
                    packed::listpack(&blob)?
                };
                Value::Hash(pairs(flat, "hash blob")?)
            }
            LIST_QUICKLIST | LIST_QUICKLIST_2 => Value::List(self.quicklist(t)?),
            STREAM_LISTPACKS | STREAM_LISTPACKS_2 | STREAM_LISTPACKS_3 => {
                Value::Stream(Box::new(super::stream::read(self, t)?))
            }
            MODULE | MODULE_2 => return Err(RdbError::Unsupported(t, "module value")),
            22..=25 => return Err(RdbError::Unsupported(t, "hash with field expiries")),
            _ => return Err(RdbError::UnknownType(t)),
        };
        check(v)
    }

    /// The elements of a quicklist: nodes of ziplists (`LIST_QUICKLIST`), or of listpacks
    /// and single plain elements (`LIST_QUICKLIST_2`). Empty nodes are skipped, as Redis
    /// does.
    fn quicklist(&mut self, t: u8) -> Result<Vec<Vec<u8>>, RdbError> {
        let nodes = self.count("quicklist length")?;
        let mut items = Vec::new();
        for _ in 0..nodes {
            let container = if t == types::LIST_QUICKLIST_2 {
                self.length("quicklist node container")?
            } else {
                NODE_PACKED
            };
            let blob = self.string("quicklist node")?;
            match container {
                NODE_PLAIN => items.push(blob),
                NODE_PACKED if t == types::LIST_QUICKLIST => items.extend(packed::ziplist(&blob)?),
                NODE_PACKED => items.extend(packed::listpack(&blob)?),
                c => {
                    return Err(RdbError::Corrupt {
                        what: "quicklist node",
                        reason: format!("unknown container {c}"),
                    })
                }
            }
        }
        Ok(items)
    }
}

fn corrupt(what: &'static str, reason: impl Into<String>) -> RdbError {
    RdbError::Corrupt {
        what,
        reason: reason.into(),
    }
}

/// A score's text (`%.17g`, "inf", "-inf"), as Redis's `strtod` reads it.
fn parse_score(s: &[u8], what: &'static str) -> Result<f64, RdbError> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .ok_or_else(|| {
            corrupt(
                what,
                format!("score {:?} is not a number", String::from_utf8_lossy(s)),
            )
        })
}

/// Consecutive elements as pairs (field, value or member, score).
fn pairs(flat: Vec<Vec<u8>>, what: &'static str) -> Result<Vec<Pair>, RdbError> {
    if !flat.len().is_multiple_of(2) {
        return Err(corrupt(what, "odd number of entries"));
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Ok(out)
}

/// What Redis refuses on load: an empty collection, duplicate members or fields, a NaN
/// score. (Strata's store could not hold them: its members are keyed by their bytes.)
fn check(v: Value) -> Result<Value, RdbError> {
    fn unique<'a>(what: &'static str, it: impl Iterator<Item = &'a [u8]>) -> Result<(), RdbError> {
        let mut seen = HashSet::new();
        for m in it {
            if !seen.insert(m) {
                return Err(corrupt(what, "duplicate member"));
            }
        }
        Ok(())
    }
    let empty = match &v {
        // A stream may be empty (XDEL of every entry, XGROUP CREATE MKSTREAM).
        Value::String(_) | Value::Stream(_) => false,
        Value::List(l) => l.is_empty(),
        Value::Set(s) => {
            unique("set", s.iter().map(|m| &m[..]))?;
            s.is_empty()
        }
        Value::Hash(h) => {
            unique("hash", h.iter().map(|(f, _)| &f[..]))?;
            h.is_empty()
        }
        Value::ZSet(z) => {
            unique("sorted set", z.iter().map(|(m, _)| &m[..]))?;
            if z.iter().any(|(_, s)| s.is_nan()) {
                return Err(corrupt("sorted set", "NaN score"));
            }
            z.is_empty()
        }
    };
    if empty {
        return Err(corrupt("collection", "empty"));
    }
    Ok(v)
}
