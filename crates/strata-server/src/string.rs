//! The string type (Redis's t_string.c, as Kvrocks' `types/redis_string.cc`), with no
//! protocol in it. A string is its metadata record alone: type string, size = the value's
//! length, the value inline (`docs/format/redis-keys.md`, "Strings"), so every write of one
//! key is one record put through the command's transaction.
//!
//! Reads and read-modify-writes of one key go through a handle ([`Str::open`] for a read,
//! counting a keyspace hit or miss; [`Str::open_write`] without): GET, STRLEN, GETRANGE,
//! APPEND, SETRANGE, the INCR family, GETDEL, GETEX's expiry, GETBIT and SETBIT. A
//! read-modify-write keeps the key's expiry and incarnation. SET and the multi-key commands
//! are functions ([`set`], [`set_nx`], [`mget`], [`mset`], [`msetnx`]): a plain SET reads
//! nothing (a blind write), so there is no handle to open first.
//!
//! Failures are [`StringError`]s, which become Redis's error replies (`CmdError::from`);
//! arguments are parsed, and events and effects made, by `cmd/strings.rs` and `cmd/bits.rs`.
//!
//! Layer: store and types.

use crate::error::{CmdError, ERR_NOT_FLOAT, ERR_NOT_INT, ERR_WRONGTYPE};
use crate::long_double::{self, Parsed};
use crate::protocol::parse::parse_i64;
use crate::store::TypeError;
use crate::store::{now_ms, Meta, RType, Tx};
use std::collections::HashMap;
use strata_engine::Result;

/// Redis's reply when a value would grow past `proto-max-bulk-len`.
pub const ERR_TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// Why a string command failed.
#[derive(Debug)]
pub enum StringError {
    /// The key holds another type (Redis's WRONGTYPE).
    WrongType,
    /// The stored value is not a 64-bit integer (INCR and kin).
    NotInteger,
    /// The sum leaves the 64-bit range.
    Overflow,
    /// The stored value or INCRBYFLOAT's increment is not a float.
    NotFloat,
    /// INCRBYFLOAT's sum is NaN or infinite.
    NotFinite,
    /// The value would grow past `proto-max-bulk-len`.
    TooBig,
    Store(strata_engine::Error),
}

impl From<strata_engine::Error> for StringError {
    fn from(e: strata_engine::Error) -> Self {
        StringError::Store(e)
    }
}

impl From<TypeError> for StringError {
    fn from(e: TypeError) -> Self {
        match e {
            TypeError::WrongType => StringError::WrongType,
            TypeError::Store(e) => StringError::Store(e),
        }
    }
}

impl From<StringError> for CmdError {
    fn from(e: StringError) -> Self {
        let text = match e {
            StringError::WrongType => ERR_WRONGTYPE,
            StringError::NotInteger => ERR_NOT_INT,
            StringError::Overflow => "ERR increment or decrement would overflow",
            StringError::NotFloat => ERR_NOT_FLOAT,
            StringError::NotFinite => "ERR increment would produce NaN or Infinity",
            StringError::TooBig => ERR_TOO_BIG,
            StringError::Store(e) => return CmdError::Store(e),
        };
        CmdError::reply(text)
    }
}

/// `TooBig` when a value of `len` bytes would exceed `max_len` (`proto-max-bulk-len`).
pub fn check_len(len: u64, max_len: u64) -> std::result::Result<(), StringError> {
    if len > max_len {
        return Err(StringError::TooBig);
    }
    Ok(())
}

/// The metadata record of a new string (a fresh incarnation); `expire_ms` 0: no expiry.
pub fn new_meta(tx: &Tx<'_>, value: Vec<u8>, expire_ms: u64) -> Meta {
    Meta::string(tx.next_version(), value, expire_ms)
}

/// Bit `bit` of `v` (bit 0 is the most significant bit of the first byte); bits past the
/// end are 0.
pub fn bit_at(v: &[u8], bit: u64) -> bool {
    let byte = (bit >> 3) as usize;
    byte < v.len() && v[byte] & (0x80 >> (bit & 7)) != 0
}

/// GETRANGE's bytes of `v` for `start..=end` (negative: from the end), Redis's way: a
/// negative range with `start > end` is empty, then both ends are clamped into the value.
pub fn range(v: &[u8], start: i64, end: i64) -> &[u8] {
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        return &[];
    }
    let start = if start < 0 { start + len } else { start }.max(0);
    let end = if end < 0 { end + len } else { end }.max(0).min(len - 1);
    if start > end || len == 0 {
        return &[];
    }
    &v[start as usize..=end as usize]
}

/// What SETBIT did: the bit's old value, and whether the value was written (created, grown
/// or changed; Redis notifies only then).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitSet {
    pub was: bool,
    pub written: bool,
}

/// What GETEX did to the key's expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpiryChange {
    /// Nothing (PERSIST of a key without a TTL).
    None,
    /// A new expiry time was set.
    Set,
    /// The expiry was removed (PERSIST).
    Persisted,
    /// The time given had already passed: the key was deleted.
    Deleted,
}

/// The string at one key of database `db`, read and written through one transaction.
pub struct Str<'t> {
    tx: &'t Tx<'t>,
    db: u8,
    key: &'t [u8],
    /// The live string; `None` while the key is absent.
    meta: Option<Meta>,
}

impl<'t> Str<'t> {
    /// The string at `key` for a read or a read-modify-write (counting a keyspace hit or
    /// miss, as every string command reading its key here does): absent or a string,
    /// `WrongType` if the key holds another type.
    pub fn open(tx: &'t Tx<'t>, db: u8, key: &'t [u8]) -> std::result::Result<Str<'t>, TypeError> {
        let meta = tx.lookup_read_typed(db, key, RType::String)?;
        Ok(Str { tx, db, key, meta })
    }

    /// [`Str::open`] without counting a hit or miss (Redis's `lookupKeyWrite`: BITFIELD's
    /// writes).
    pub fn open_write(
        tx: &'t Tx<'t>,
        db: u8,
        key: &'t [u8],
    ) -> std::result::Result<Str<'t>, TypeError> {
        let meta = tx.get_typed(db, key, RType::String)?;
        Ok(Str { tx, db, key, meta })
    }

    /// The value; `None` if the key is absent.
    pub fn value(&self) -> Option<&[u8]> {
        self.meta.as_ref().map(|m| &m.value[..])
    }

    /// The value's length (STRLEN, APPEND's and SETRANGE's reply); 0 if absent.
    pub fn len(&self) -> u64 {
        self.value().map_or(0, |v| v.len() as u64)
    }

    /// Replaces the value, keeping an existing key's expiry and incarnation (a new key gets
    /// a fresh one, without expiry). BITFIELD's write of its computed value.
    pub fn write(&mut self, value: Vec<u8>) -> Result<()> {
        let m = match self.meta.take() {
            Some(mut m) => {
                m.size = value.len() as u64;
                m.value = value;
                m
            }
            None => new_meta(self.tx, value, 0),
        };
        let r = self.tx.put(self.db, self.key, &m);
        self.meta = Some(m);
        r
    }

    /// APPEND: the new length. `TooBig` past `max_len`, with nothing written.
    pub fn append(&mut self, tail: &[u8], max_len: u64) -> std::result::Result<u64, StringError> {
        let mut v = self.value().unwrap_or_default().to_vec();
        check_len((v.len() + tail.len()) as u64, max_len)?;
        v.extend_from_slice(tail);
        self.write(v)?;
        Ok(self.len())
    }

    /// SETRANGE: writes `patch` at byte `offset`, padding with zero bytes; the new length.
    /// An empty patch writes nothing (and creates no key). `TooBig` past `max_len`.
    pub fn set_range(
        &mut self,
        offset: u64,
        patch: &[u8],
        max_len: u64,
    ) -> std::result::Result<u64, StringError> {
        if patch.is_empty() {
            return Ok(self.len());
        }
        let end = offset
            .checked_add(patch.len() as u64)
            .ok_or(StringError::TooBig)?;
        check_len(end, max_len)?;
        let mut v = self.value().unwrap_or_default().to_vec();
        if (v.len() as u64) < end {
            v.resize(end as usize, 0);
        }
        v[offset as usize..end as usize].copy_from_slice(patch);
        self.write(v)?;
        Ok(self.len())
    }

    /// INCRBY (INCR, DECR, DECRBY): the new value; an absent key counts as 0.
    pub fn incr_by(&mut self, by: i64) -> std::result::Result<i64, StringError> {
        let cur = match self.value() {
            Some(v) => parse_i64(v).ok_or(StringError::NotInteger)?,
            None => 0,
        };
        let n = cur.checked_add(by).ok_or(StringError::Overflow)?;
        self.write(n.to_string().into_bytes())?;
        Ok(n)
    }

    /// INCRBYFLOAT, in long double as Redis computes it (`long_double.rs`): the new value
    /// as Redis prints it. Redis's order of checks: the stored value, then the increment
    /// `by` (unparsed, as given).
    pub fn incr_by_float(&mut self, by: &[u8]) -> std::result::Result<String, StringError> {
        let cur = long_double::parse(self.value().unwrap_or(b"0")).ok_or(StringError::NotFloat)?;
        let by = long_double::parse(by).ok_or(StringError::NotFloat)?;
        let sum = match (cur, by) {
            (Parsed::Finite(a), Parsed::Finite(b)) => a.add(b),
            _ => None,
        };
        let out = sum.ok_or(StringError::NotFinite)?.to_human();
        self.write(out.clone().into_bytes())?;
        Ok(out)
    }

    /// GETBIT.
    pub fn get_bit(&self, offset: u64) -> bool {
        self.value().is_some_and(|v| bit_at(v, offset))
    }

    /// SETBIT. A missing key is created (zeros) even when the bit written is 0, as Redis's
    /// `lookupStringForBitCommand` does; a value that neither grows nor changes is not
    /// written. `TooBig` when the value would grow past `max_len`.
    pub fn set_bit(
        &mut self,
        offset: u64,
        on: bool,
        max_len: u64,
    ) -> std::result::Result<BitSet, StringError> {
        let byte = (offset >> 3) as usize;
        let mask = 0x80u8 >> (offset & 7);
        let was = self.get_bit(offset);
        let mut v = match self.value() {
            Some(v) if was == on && byte < v.len() => {
                return Ok(BitSet {
                    was,
                    written: false,
                })
            }
            Some(v) => v.to_vec(),
            None => Vec::new(),
        };
        if v.len() <= byte {
            check_len(byte as u64 + 1, max_len)?;
            v.resize(byte + 1, 0);
        }
        if on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        self.write(v)?;
        Ok(BitSet { was, written: true })
    }

    /// GETDEL: deletes the key if it exists; its value.
    pub fn delete(&mut self) -> Result<Option<Vec<u8>>> {
        let Some(m) = self.meta.take() else {
            return Ok(None);
        };
        self.tx.delete(self.db, self.key)?;
        Ok(Some(m.value))
    }

    /// GETEX's change of an existing key's expiry: to Unix milliseconds `at` (a time
    /// already passed deletes the key), or removed (`None`, PERSIST). An absent key is
    /// left alone.
    pub fn change_expiry(&mut self, at: Option<u64>) -> Result<ExpiryChange> {
        let Some(m) = self.meta.as_mut() else {
            return Ok(ExpiryChange::None);
        };
        let change = match at {
            Some(at) if at <= now_ms() => {
                self.meta = None;
                self.tx.delete(self.db, self.key)?;
                return Ok(ExpiryChange::Deleted);
            }
            Some(at) => {
                m.expire_ms = at;
                ExpiryChange::Set
            }
            None if m.expire_ms != 0 => {
                m.expire_ms = 0;
                ExpiryChange::Persisted
            }
            None => return Ok(ExpiryChange::None),
        };
        self.tx.put(self.db, self.key, m)?;
        Ok(change)
    }
}

/// How SET's value gets its expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// Remove any expiry.
    Clear,
    /// KEEPTTL.
    Keep,
    /// Absolute Unix milliseconds.
    At(i64),
}

/// SET's options (the command checks they are compatible).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetOptions {
    pub nx: bool,
    pub xx: bool,
    pub get: bool,
    pub ttl: Ttl,
}

impl SetOptions {
    /// A plain SET: no condition, no GET, any expiry removed.
    pub const PLAIN: SetOptions = SetOptions {
        nx: false,
        xx: false,
        get: false,
        ttl: Ttl::Clear,
    };

    /// Whether the expiry time given has already passed.
    pub fn ttl_passed(&self) -> bool {
        matches!(self.ttl, Ttl::At(ms) if ms <= now_ms() as i64)
    }
}

/// What [`set`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetOutcome {
    /// Whether it wrote (false: NX or XX refused).
    pub written: bool,
    /// The old value, with GET.
    pub old: Option<Vec<u8>>,
    /// The expiry time given had already passed, so the key was deleted instead.
    pub expired: bool,
}

/// SET with its options (SETEX, PSETEX and GETSET are SETs too). With GET the old value is
/// read as a read (a keyspace hit or miss; WRONGTYPE if it is not a string); NX, XX and
/// KEEPTTL read it without; a plain SET reads nothing: reading the old record would cost a
/// lookup, on SSD possibly a random read, for nothing (Redis's lookup is in RAM). An expiry
/// time already passed deletes the key instead (Redis deletes it at its next lookup).
pub fn set(
    tx: &Tx<'_>,
    db: u8,
    key: &[u8],
    value: &[u8],
    o: &SetOptions,
) -> std::result::Result<SetOutcome, TypeError> {
    let needs_old = o.get || o.nx || o.xx || matches!(o.ttl, Ttl::Keep);
    let old = if o.get {
        let old = tx.lookup_read_typed(db, key, RType::String)?;
        if old.is_some() {
            // Redis looks the key up twice, to read it and to overwrite it.
            tx.access.touch(db, key, now_ms());
        }
        old
    } else if needs_old {
        tx.get(db, key)?
    } else {
        tx.access.touch_tracked(db, key, now_ms());
        None
    };
    let found = old.is_some();
    let old_value = |old: Option<Meta>| old.filter(|_| o.get).map(|m| m.value);
    if (o.nx && found) || (o.xx && !found) {
        return Ok(SetOutcome {
            written: false,
            old: old_value(old),
            expired: false,
        });
    }
    let expire_ms = match o.ttl {
        Ttl::Clear => 0,
        Ttl::Keep => old.as_ref().map_or(0, |m| m.expire_ms),
        Ttl::At(ms) => ms as u64,
    };
    let expired = expire_ms != 0 && expire_ms <= now_ms();
    if expired {
        if found || !needs_old {
            tx.delete(db, key)?;
        }
    } else {
        tx.put(db, key, &new_meta(tx, value.to_vec(), expire_ms))?;
    }
    Ok(SetOutcome {
        written: true,
        old: old_value(old),
        expired,
    })
}

/// SETNX: sets `key` only if it does not exist (as any type); whether it did.
pub fn set_nx(tx: &Tx<'_>, db: u8, key: &[u8], value: &[u8]) -> Result<bool> {
    if tx.get(db, key)?.is_some() {
        return Ok(false);
    }
    tx.put(db, key, &new_meta(tx, value.to_vec(), 0))?;
    Ok(true)
}

/// MGET: the values of `keys` in one batched read; a key of another type reads as absent.
pub fn mget(tx: &Tx<'_>, db: u8, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
    Ok(tx
        .multi_get(db, keys)?
        .into_iter()
        .map(|m| m.filter(|m| m.rtype == RType::String).map(|m| m.value))
        .collect())
}

/// MSET's and MSETNX's key-value pairs (`flat`: key, value, key, value, ...; an even
/// count) as new strings, in first-appearance order; the last value of a key given twice
/// wins. Found through a map: an MSET may carry half a million pairs, and a linear search
/// per pair would be quadratic.
fn string_pairs<'a, B: AsRef<[u8]>>(tx: &Tx<'_>, flat: &'a [B]) -> Vec<(&'a [u8], Meta)> {
    let mut pairs: Vec<(&[u8], Meta)> = Vec::with_capacity(flat.len() / 2);
    let mut at: HashMap<&[u8], usize> = HashMap::new();
    for kv in flat.chunks_exact(2) {
        let (k, v) = (kv[0].as_ref(), kv[1].as_ref());
        let m = new_meta(tx, v.to_vec(), 0);
        match at.get(k) {
            Some(&i) => pairs[i].1 = m,
            None => {
                at.insert(k, pairs.len());
                pairs.push((k, m));
            }
        }
    }
    pairs
}

/// MSET: sets every pair of `flat` (key, value, ...; an even count) in one atomic write,
/// without reading (a blind write: an existing key's access is counted as Redis's
/// `setKey` does).
pub fn mset<B: AsRef<[u8]>>(tx: &Tx<'_>, db: u8, flat: &[B]) -> Result<()> {
    let pairs = string_pairs(tx, flat);
    let now = now_ms();
    for (k, _) in &pairs {
        tx.access.touch_tracked(db, k, now);
    }
    let ops: Vec<(&[u8], Option<&Meta>)> = pairs.iter().map(|(k, m)| (*k, Some(m))).collect();
    tx.write_many(db, &ops)
}

/// MSETNX: sets every pair of `flat`, or none when any of the keys exists (as any type);
/// whether it set them. The check and the writes are one step under the keys' stripes.
pub fn msetnx<B: AsRef<[u8]>>(tx: &Tx<'_>, db: u8, flat: &[B]) -> Result<bool> {
    let pairs = string_pairs(tx, flat);
    for (k, _) in &pairs {
        if tx.get(db, k)?.is_some() {
            return Ok(false);
        }
    }
    let ops: Vec<(&[u8], Option<&Meta>)> = pairs.iter().map(|(k, m)| (*k, Some(m))).collect();
    tx.write_many(db, &ops)?;
    Ok(true)
}

/// A start..=end range in a string of `len` bytes (in bits when `bits`), Redis's way:
/// negative indexes count from the end, then both are clamped into the string. Returns the
/// range in bits, or `None` when it is empty.
pub fn bit_range(len: usize, start: i64, end: i64, bits: bool) -> Option<(u64, u64)> {
    let total = if bits { len as i64 * 8 } else { len as i64 };
    let fix = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let start = fix(start);
    let end = fix(end).min(total - 1);
    if start > end {
        return None;
    }
    let (s, e) = (start as u64, end as u64);
    Some(if bits { (s, e) } else { (s * 8, e * 8 + 7) })
}

/// The number of 1 bits among bits `first..=last` of `v` (BITCOUNT; both inside `v`).
pub fn count_ones(v: &[u8], first: u64, last: u64) -> i64 {
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    let mut n: i64 = v[fb..=lb].iter().map(|b| i64::from(b.count_ones())).sum();
    // Take off the bits of the edge bytes that lie outside the range.
    n -= i64::from((v[fb] & !(0xffu8 >> (first & 7))).count_ones());
    n -= i64::from((v[lb] & (0x7fu8 >> (last & 7))).count_ones());
    n
}

/// The first bit equal to `bit` among bits `first..=last` of `v` (BITPOS).
pub fn find_bit(v: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    let skip = if bit { 0x00 } else { 0xff };
    let mut i = first;
    while i <= last {
        if i & 7 == 0 && i + 7 <= last && v[(i >> 3) as usize] == skip {
            i += 8;
            continue;
        }
        if bit_at(v, i) == bit {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// LCS's two values: an absent key reads as empty; `WrongType` if either key holds another
/// type (both are looked up first, each counting a hit or miss).
pub fn lcs_values(
    tx: &Tx<'_>,
    db: u8,
    a: &[u8],
    b: &[u8],
) -> std::result::Result<(Vec<u8>, Vec<u8>), TypeError> {
    let a = tx.lookup_read(db, a)?;
    let b = tx.lookup_read(db, b)?;
    if [&a, &b]
        .iter()
        .any(|m| m.as_ref().is_some_and(|m| m.rtype != RType::String))
    {
        return Err(TypeError::WrongType);
    }
    let value = |m: Option<Meta>| m.map(|m| m.value).unwrap_or_default();
    Ok((value(a), value(b)))
}

/// One run of matching bytes: `a[a0..=a1]` equals `b[b0..=b1]`.
#[derive(Debug, PartialEq, Eq)]
pub struct Match {
    pub a0: usize,
    pub a1: usize,
    pub b0: usize,
    pub b1: usize,
}

/// The longest common subsequence of `a` and `b` by Redis's dynamic programme (a table of
/// (|a|+1)·(|b|+1) lengths, walked back from the end, preferring to step in `b` on ties),
/// so that the string and the ranges are the ones Redis picks: the subsequence and its
/// contiguous runs, last run first.
pub fn lcs(a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<Match>) {
    let w = b.len() + 1;
    let mut t = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let mut seq = Vec::with_capacity(t[a.len() * w + b.len()] as usize);
    let mut runs = Vec::new();
    let mut cur: Option<Match> = None;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            seq.push(a[i - 1]);
            match &mut cur {
                None => {
                    cur = Some(Match {
                        a0: i - 1,
                        a1: i - 1,
                        b0: j - 1,
                        b1: j - 1,
                    })
                }
                Some(r) if r.a0 == i && r.b0 == j => {
                    r.a0 -= 1;
                    r.b0 -= 1;
                }
                Some(_) => emit = true,
            }
            if cur.as_ref().is_some_and(|r| r.a0 == 0 || r.b0 == 0) {
                emit = true;
            }
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = cur.is_some();
        }
        if emit {
            runs.extend(cur.take());
        }
    }
    seq.reverse();
    (seq, runs)
}

#[cfg(test)]
#[path = "string_tests.rs"]
mod tests;
