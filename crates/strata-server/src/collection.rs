//! What hashes and sets share (the types layer, no protocol): their member records (one
//! per field or member under `keys::sub_key`, `docs/format/redis-keys.md` "Hashes" and
//! "Sets"), the encoding flag OBJECT ENCODING reads, whole-collection reads and random
//! sampling (HRANDFIELD, SRANDMEMBER, SPOP). The typed handles over them are `hash.rs` and
//! `set.rs`; the commands' replies and cursors are `cmd/members.rs`.
//!
//! Layer: store and types.

use crate::keys::{meta_key, prefix_end, sub_key, sub_prefix, KIND_SUBKEY};
use crate::protocol::parse::parse_i64;
pub use crate::store::TypeError;
use crate::store::{Meta, RType, Tx};
use std::collections::BTreeMap;
use strata_engine::Result;

/// A member and its value (a hash field's value; empty for set members).
pub type Member = (Vec<u8>, Vec<u8>);

/// Bit of the first byte of a hash's or set's metadata extras: the collection has reached
/// Redis's `hashtable` encoding (clear: `listpack` for hashes, `intset` for sets). Redis
/// never converts back, so neither does the flag.
pub const FLAG_HASHTABLE: u8 = 1;

/// The metadata extras of a new hash or set: one flags byte.
pub fn new_extras() -> Vec<u8> {
    vec![0]
}

pub fn is_hashtable(m: &Meta) -> bool {
    m.value.first().is_some_and(|b| b & FLAG_HASHTABLE != 0)
}

pub fn mark_hashtable(m: &mut Meta) {
    if m.value.is_empty() {
        m.value.push(0);
    }
    m.value[0] |= FLAG_HASHTABLE;
}

/// OBJECT ENCODING of a hash or set (`None` for other types).
pub fn encoding(m: &Meta) -> Option<&'static str> {
    let big = is_hashtable(m);
    match m.rtype {
        RType::Hash => Some(if big { "hashtable" } else { "listpack" }),
        RType::Set => Some(if big { "hashtable" } else { "intset" }),
        _ => None,
    }
}

/// Puts `m` into `w`, or deletes the key when it has no members left (empty collections
/// do not exist).
pub fn put_meta(w: &mut crate::store::Writes, db: u8, key: &[u8], m: &Meta) {
    w.meta(db, key, (m.size > 0).then_some(m));
}

/// Whether a set member is one an intset holds (Redis's `isSdsRepresentableAsLongLong`).
pub fn is_int_member(m: &[u8]) -> bool {
    parse_i64(m).is_some()
}

/// The prefix of the member records of `m`, the collection at `key` of database `db`.
pub fn prefix(db: u8, key: &[u8], m: &Meta) -> Vec<u8> {
    sub_prefix(KIND_SUBKEY, db, key, m.version)
}

/// The member record of `member` of collection `key` (incarnation `m.version`).
pub fn record(db: u8, key: &[u8], m: &Meta, member: &[u8]) -> Vec<u8> {
    sub_key(db, key, m.version, member)
}

/// Calls `f(member, value)` for every member of collection `key`, in member byte order,
/// until it returns false.
pub fn for_each(
    store: &Tx<'_>,
    db: u8,
    key: &[u8],
    m: &Meta,
    mut f: impl FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    let p = prefix(db, key, m);
    store.scan_prefix(&p, false, |k, v| f(&k[p.len()..], v))?;
    Ok(())
}

/// Every member of collection `key` with its value, in member byte order.
pub fn load(store: &Tx<'_>, db: u8, key: &[u8], m: &Meta) -> Result<Vec<Member>> {
    let mut out = Vec::with_capacity(m.size.min(1 << 16) as usize);
    for_each(store, db, key, m, |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })?;
    Ok(out)
}

/// Which existing members among `members` (a batched read of their records).
pub fn exist(
    store: &Tx<'_>,
    db: u8,
    key: &[u8],
    m: &Meta,
    members: &[&[u8]],
) -> Result<Vec<Option<Vec<u8>>>> {
    let recs: Vec<Vec<u8>> = members.iter().map(|f| record(db, key, m, f)).collect();
    let mut out = Vec::with_capacity(recs.len());
    for r in store.get_members(&recs) {
        out.push(r?);
    }
    Ok(out)
}

/// Sorts the members of an intset-encoded set as Redis keeps them: ascending integers.
pub fn sort_intset(members: &mut [Vec<u8>]) {
    members.sort_by_key(|m| parse_i64(m).unwrap_or(0));
}

// ---- random choice ------------------------------------------------------------------

use crate::random::{below as rand_below, next_u64 as rand_u64};

/// Collections up to this many members are loaded whole to draw from (exactly uniform, as
/// Redis's small encodings are); larger ones are sampled by seeking to random positions in
/// the member order (cheap, but a member after a wide gap between neighbours is likelier
/// than one in a dense run — Redis's hashtable is not uniform either: it picks a random
/// bucket first). Loading is O(members + tombstones) per draw: at 4,096, the last 4,096
/// pops of a drained set ran at 1,200/s (each walked up to 12,000 records), so that
/// `redis-benchmark -t spop -n 1000000` averaged 2,900/s; at 128 it ran at 55,400/s
/// (`docs/benchmarks.md`).
const LOAD_TO_SAMPLE_MAX: u64 = 128;

/// Draws members of a large collection by seeking to random positions between its first
/// and last member. Members usually share a long prefix and an alphabet
/// (`element:000000123456`): positions drawn over all byte strings would almost all fall
/// before or after them, so every draw would take the first member — and SPOP, deleting it
/// each time, would pile its tombstones where the next seek must step over them all (61
/// pops/s). So a position is the first and last member's shared prefix, then a byte between
/// theirs at the first difference, then bytes drawn from the range of byte values their
/// remaining bytes use: for keys over one alphabet (digits, hex, letters) each member is then
/// about equally likely (the member after a gap in the set is likelier, as with any seek).
struct RandomSeek {
    /// The member records' prefix and its end.
    p: Vec<u8>,
    end: Vec<u8>,
    /// The first and last member (record keys minus `p`) and their shared prefix length.
    first: Member,
    last: Member,
    shared: usize,
    /// The byte values at the first difference (first's, or 0 if it ends there; last's),
    /// and the range of byte values after it; the length of the positions drawn.
    head: (u8, u8),
    alphabet: (u8, u8),
    len: usize,
}

/// How many bytes after the shared prefix a drawn position has, at most.
const DRAW_BYTES: usize = 16;

impl RandomSeek {
    /// `None` when the collection has no member.
    fn new(store: &Tx<'_>, db: u8, key: &[u8], m: &Meta) -> Result<Option<RandomSeek>> {
        let p = prefix(db, key, m);
        let end = prefix_end(&p);
        let mut ends = [None, None];
        for (i, reverse) in [false, true].into_iter().enumerate() {
            store.scan_range(&p, &end, reverse, |k, v| {
                ends[i] = Some((k[p.len()..].to_vec(), v.to_vec()));
                false
            })?;
        }
        let [Some(first), Some(last)] = ends else {
            return Ok(None);
        };
        let shared = first
            .0
            .iter()
            .zip(&last.0)
            .take_while(|(a, b)| a == b)
            .count();
        let (fs, ls) = (&first.0[shared..], &last.0[shared..]);
        let head = (
            fs.first().copied().unwrap_or(0),
            ls.first().copied().unwrap_or(0),
        );
        let rest = fs.iter().skip(1).chain(ls.iter().skip(1));
        let alphabet = match (rest.clone().min(), rest.max()) {
            (Some(&lo), Some(&hi)) => (lo, hi),
            _ => (0, 255),
        };
        let len = fs.len().max(ls.len()).clamp(1, DRAW_BYTES);
        Ok(Some(RandomSeek {
            p,
            end,
            first,
            last,
            shared,
            head,
            alphabet,
            len,
        }))
    }

    /// The first member at or after a random position between the first and the last.
    fn draw(&self, store: &Tx<'_>) -> Result<Member> {
        if self.first.0 == self.last.0 {
            return Ok(self.first.clone());
        }
        let byte = |(lo, hi): (u8, u8)| lo + (rand_u64() % (u64::from(hi - lo) + 1)) as u8;
        let mut from = self.p.clone();
        from.extend_from_slice(&self.first.0[..self.shared]);
        from.push(byte(self.head));
        for _ in 1..self.len {
            from.push(byte(self.alphabet));
        }
        let mut found = None;
        store.scan_range(&from, &self.end, false, |k, v| {
            found = Some((k[self.p.len()..].to_vec(), v.to_vec()));
            false
        })?;
        Ok(found.unwrap_or_else(|| self.last.clone()))
    }
}

/// `count` distinct random members (`count < m.size`), in random order.
pub fn sample_distinct(
    store: &Tx<'_>,
    db: u8,
    key: &[u8],
    m: &Meta,
    count: usize,
) -> Result<Vec<Member>> {
    if m.size > LOAD_TO_SAMPLE_MAX && (count as u64).saturating_mul(4) < m.size {
        let mut got: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut tries = 0usize;
        if let Some(seek) = RandomSeek::new(store, db, key, m)? {
            while got.len() < count && tries < count.saturating_mul(16) {
                tries += 1;
                let (k, v) = seek.draw(store)?;
                got.insert(k, v);
            }
        }
        if got.len() == count {
            let mut v: Vec<_> = got.into_iter().collect();
            shuffle(&mut v);
            return Ok(v);
        }
    }
    let mut all = load(store, db, key, m)?;
    let count = count.min(all.len());
    // Partial Fisher-Yates: the first `count` become a uniform random choice.
    for i in 0..count {
        let j = i + rand_below(all.len() - i);
        all.swap(i, j);
    }
    all.truncate(count);
    Ok(all)
}

fn shuffle<T>(v: &mut [T]) {
    for i in (1..v.len()).rev() {
        v.swap(i, rand_below(i + 1));
    }
}

/// Draws `count` members with repetition and passes each to `f` (HRANDFIELD and
/// SRANDMEMBER with a negative count); `m.size > 0`.
pub fn sample_repeating(
    store: &Tx<'_>,
    db: u8,
    key: &[u8],
    m: &Meta,
    count: u64,
    mut f: impl FnMut(&[u8], &[u8]),
) -> Result<()> {
    if m.size <= LOAD_TO_SAMPLE_MAX {
        let all = load(store, db, key, m)?;
        if all.is_empty() {
            return Ok(());
        }
        for _ in 0..count {
            let (k, v) = &all[rand_below(all.len())];
            f(k, v);
        }
        return Ok(());
    }
    if let Some(seek) = RandomSeek::new(store, db, key, m)? {
        for _ in 0..count {
            let (k, v) = seek.draw(store)?;
            f(&k, &v);
        }
    }
    Ok(())
}

/// What the cursor table names a member iteration by (`cursor.rs`): the collection's
/// metadata key and version, so a cursor of one collection never resumes another.
pub fn scan_owner(db: u8, key: &[u8], m: &Meta) -> Vec<u8> {
    let mut owner = meta_key(db, key);
    owner.extend_from_slice(&m.version.to_be_bytes());
    owner
}

/// The live metadata of `key` for a read: `None` if absent, `WrongType` if it is not of
/// type `t`; counts a keyspace hit or miss (Redis's `lookupKeyRead`).
pub fn lookup_read(
    tx: &Tx<'_>,
    db: u8,
    key: &[u8],
    t: RType,
) -> std::result::Result<Option<Meta>, TypeError> {
    tx.lookup_read_typed(db, key, t)
}

/// The live metadata of collection `key` for a write: `None` if absent, `WrongType` if
/// it is not of type `t` (Redis's `lookupKeyWrite` + `checkType`: no keyspace hit or
/// miss). A collection thinned out by deletes is first rewritten ([`Tx::rewrite_if_sparse`]).
pub fn lookup_write(
    tx: &Tx<'_>,
    db: u8,
    key: &[u8],
    t: RType,
) -> std::result::Result<Option<Meta>, TypeError> {
    match tx.get_typed(db, key, t)? {
        Some(m) => Ok(Some(tx.rewrite_if_sparse(db, key, m)?)),
        None => Ok(None),
    }
}

/// What a typed handle of a hash, set or sorted set holds: the key of database `db` read
/// and written through transaction `tx`, its metadata record, and whether the key exists
/// (false for a new collection until its first member is written).
pub struct Handle<'t> {
    pub tx: &'t Tx<'t>,
    pub db: u8,
    pub key: &'t [u8],
    pub meta: Meta,
    pub existed: bool,
}

/// A collection type's typed handle (`Hash`, `Set`, `ZSet`): how one is opened, written
/// once here for the three (`Hash::open(tx, db, key)?` with this trait in scope).
pub trait Collection<'t>: Sized {
    /// The type the handle opens; another one is `TypeError::WrongType`.
    const TYPE: RType;

    /// The handle over `h`.
    fn from_handle(h: Handle<'t>) -> Self;

    /// The metadata of a new, empty collection of the type.
    fn fresh_meta(tx: &Tx<'_>) -> Meta {
        create(tx, Self::TYPE)
    }

    /// The collection at `key` for a read (counting a keyspace hit or miss, [`lookup_read`]):
    /// `None` if absent, `WrongType` if the key holds another type.
    fn open(tx: &'t Tx<'t>, db: u8, key: &'t [u8]) -> std::result::Result<Option<Self>, TypeError> {
        let m = lookup_read(tx, db, key, Self::TYPE)?;
        Ok(m.map(|meta| Self::from_handle(Handle::new(tx, db, key, meta, true))))
    }

    /// The collection at `key` for a write (no hit or miss; thinned out by deletes, first
    /// rewritten: [`lookup_write`]): `None` if absent, `WrongType` if the key holds another
    /// type.
    fn open_write(
        tx: &'t Tx<'t>,
        db: u8,
        key: &'t [u8],
    ) -> std::result::Result<Option<Self>, TypeError> {
        let m = lookup_write(tx, db, key, Self::TYPE)?;
        Ok(m.map(|meta| Self::from_handle(Handle::new(tx, db, key, meta, true))))
    }

    /// [`Collection::open_write`], or a new, empty collection if the key is absent (it
    /// exists once a member is written).
    fn open_or_create(
        tx: &'t Tx<'t>,
        db: u8,
        key: &'t [u8],
    ) -> std::result::Result<Self, TypeError> {
        let meta = match lookup_write(tx, db, key, Self::TYPE)? {
            Some(m) => return Ok(Self::from_handle(Handle::new(tx, db, key, m, true))),
            None => Self::fresh_meta(tx),
        };
        Ok(Self::from_handle(Handle::new(tx, db, key, meta, false)))
    }
}

impl<'t> Handle<'t> {
    fn new(tx: &'t Tx<'t>, db: u8, key: &'t [u8], meta: Meta, existed: bool) -> Handle<'t> {
        Handle {
            tx,
            db,
            key,
            meta,
            existed,
        }
    }
}

/// A new, empty hash or set (the caller adds members and sets `size`).
pub fn create(tx: &Tx<'_>, t: RType) -> Meta {
    let mut m = Meta::collection(t, tx.next_version());
    m.value = new_extras();
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_encodings() {
        let mut m = Meta::collection(RType::Set, 1);
        m.value = new_extras();
        assert_eq!(encoding(&m), Some("intset"));
        mark_hashtable(&mut m);
        assert_eq!(encoding(&m), Some("hashtable"));
        assert_eq!(m.value, vec![FLAG_HASHTABLE]);
        let mut h = Meta::collection(RType::Hash, 1);
        assert_eq!(encoding(&h), Some("listpack"), "no extras: compact");
        mark_hashtable(&mut h);
        assert_eq!(encoding(&h), Some("hashtable"));
    }

    #[test]
    fn intset_members_and_order() {
        assert!(is_int_member(b"-12"));
        for bad in [
            &b"01"[..],
            b"+1",
            b"-0",
            b"1.0",
            b" 1",
            b"",
            b"9223372036854775808",
        ] {
            assert!(!is_int_member(bad), "{bad:?}");
        }
        let mut v: Vec<Vec<u8>> = [&b"10"[..], b"9", b"-3", b"100"]
            .iter()
            .map(|s| s.to_vec())
            .collect();
        sort_intset(&mut v);
        assert_eq!(
            v,
            vec![
                b"-3".to_vec(),
                b"9".to_vec(),
                b"10".to_vec(),
                b"100".to_vec()
            ]
        );
    }
}
