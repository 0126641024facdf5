//! The records of a sorted set and the walks over them (`docs/format/redis-keys.md`,
//! "Sorted sets"): two records per member,
//!
//! ```text
//! member record: sub_key(db, key, version, member)                 -> score (f64 bits, 8, BE)
//! score record:  sub_prefix(KIND_SCORE, ...) | score (8) | member  -> empty (0x01: score -0.0)
//! ```
//!
//! The score in a score record's key is order-preserving ([`encode_score`]): the score index
//! walks members in Redis's order (score, then member bytes). Range by score is a seek in it;
//! range by rank walks it from the nearer end (O(offset): a skiplist without span counts);
//! range by lex walks it too (Redis's BYLEX assumes equal scores: with them the walk seeks to
//! the lower bound; with mixed scores it follows score order, as Redis's listpack does). The
//! typed handle over them is `zset.rs`'s [`super::ZSet`].
//!
//! Layer: store and types.

use super::Entry;
use crate::keys::{prefix_end, sub_key, sub_prefix, KIND_SCORE, KIND_SUBKEY};
use crate::store::{Tx, Writes};
use std::cmp::Ordering;
use strata_engine::Result;

/// The order-preserving form of a score: byte order equals numeric order, -inf lowest and
/// +inf highest; -0.0 is encoded as 0.0 (Redis compares them equal). On-disk.
pub fn encode_score(s: f64) -> [u8; 8] {
    let s = if s == 0.0 { 0.0 } else { s };
    let b = s.to_bits();
    let b = if b >> 63 == 0 { b | (1 << 63) } else { !b };
    b.to_be_bytes()
}

/// The inverse of [`encode_score`] (0.0 for -0.0).
pub fn decode_score(b: [u8; 8]) -> f64 {
    let b = u64::from_be_bytes(b);
    let b = if b >> 63 == 1 { b & !(1 << 63) } else { !b };
    f64::from_bits(b)
}

/// One incarnation of a sorted set: where its records live.
#[derive(Clone, Copy)]
pub struct Loc<'a> {
    pub db: u8,
    pub key: &'a [u8],
    pub version: u64,
}

impl Loc<'_> {
    fn member_record(&self, member: &[u8]) -> Vec<u8> {
        sub_key(self.db, self.key, self.version, member)
    }

    fn score_prefix(&self) -> Vec<u8> {
        sub_prefix(KIND_SCORE, self.db, self.key, self.version)
    }

    fn score_record(&self, score: f64, member: &[u8]) -> Vec<u8> {
        let mut k = self.score_prefix();
        k.extend_from_slice(&encode_score(score));
        k.extend_from_slice(member);
        k
    }
}

fn score_of_value(v: &[u8]) -> f64 {
    v.try_into()
        .map(|b| f64::from_bits(u64::from_be_bytes(b)))
        .unwrap_or(0.0)
}

/// Score of `member`, if it is in the set.
pub fn score(store: &Tx<'_>, z: Loc<'_>, member: &[u8]) -> Result<Option<f64>> {
    Ok(store
        .get_member(&z.member_record(member))?
        .map(|v| score_of_value(&v)))
}

/// Scores of `members`, in order, in one batched read.
pub fn scores(store: &Tx<'_>, z: Loc<'_>, members: &[&[u8]]) -> Result<Vec<Option<f64>>> {
    let recs: Vec<Vec<u8>> = members.iter().map(|m| z.member_record(m)).collect();
    store
        .get_members(&recs)
        .into_iter()
        .map(|r| r.map(|v| v.map(|v| score_of_value(&v))))
        .collect()
}

/// Adds to `w` the records of `member` with score `new` (`old`: its current score, whose
/// score record goes).
pub fn put(w: &mut Writes, z: Loc<'_>, member: &[u8], old: Option<f64>, new: f64) {
    if let Some(o) = old {
        if encode_score(o) == encode_score(new) && o.is_sign_negative() == new.is_sign_negative() {
            return;
        }
        w.delete_member(z.db, z.key, &z.score_record(o, member));
    }
    w.put_member(
        z.db,
        z.key,
        &z.member_record(member),
        &new.to_bits().to_be_bytes(),
    );
    let neg_zero: &[u8] = if new == 0.0 && new.is_sign_negative() {
        &[1]
    } else {
        &[]
    };
    w.put_member(z.db, z.key, &z.score_record(new, member), neg_zero);
}

/// Adds to `w` the removal of `member` (score `score`).
pub fn remove(w: &mut Writes, z: Loc<'_>, member: &[u8], score: f64) {
    w.delete_member(z.db, z.key, &z.member_record(member));
    w.delete_member(z.db, z.key, &z.score_record(score, member));
}

/// Walks the score index of `z` over store keys `[lo, hi)` (descending when `reverse`),
/// calling `f(member, score)` until it returns false.
fn walk(
    store: &Tx<'_>,
    lo: &[u8],
    hi: &[u8],
    plen: usize,
    reverse: bool,
    mut f: impl FnMut(&[u8], f64) -> bool,
) -> Result<()> {
    if lo >= hi {
        return Ok(());
    }
    store.scan_range(lo, hi, reverse, |k, v| {
        let Some(s) = k.get(plen..plen + 8) else {
            return true;
        };
        let mut score = decode_score(s.try_into().unwrap_or([0; 8]));
        if v == [1] {
            score = -0.0;
        }
        f(&k[plen + 8..], score)
    })
}

/// Every member in order (descending when `reverse`), from the `skip`-th on, at most
/// `limit` of them.
pub fn by_rank(
    store: &Tx<'_>,
    z: Loc<'_>,
    reverse: bool,
    skip: u64,
    limit: u64,
) -> Result<Vec<Entry>> {
    let p = z.score_prefix();
    let mut out = Vec::new();
    let mut seen = 0u64;
    if limit == 0 {
        return Ok(out);
    }
    walk(store, &p, &prefix_end(&p), p.len(), reverse, |m, s| {
        seen += 1;
        if seen > skip {
            out.push((m.to_vec(), s));
        }
        (out.len() as u64) < limit
    })?;
    Ok(out)
}

/// Ranks `start..=end` (0-based, already clamped to the set's `size`), in ascending rank
/// order when `!reverse` (descending ranks otherwise); walks from the nearer end.
pub fn rank_range(
    store: &Tx<'_>,
    z: Loc<'_>,
    size: u64,
    start: u64,
    end: u64,
    reverse: bool,
) -> Result<Vec<Entry>> {
    let n = end - start + 1;
    if start <= size - 1 - end {
        return by_rank(store, z, reverse, start, n);
    }
    let mut v = by_rank(store, z, !reverse, size - 1 - end, n)?;
    v.reverse();
    Ok(v)
}

/// The 0-based rank of `member` (score `score`) from the low end (`reverse`: from the high
/// end). O(rank): counts the score records before it.
pub fn rank(store: &Tx<'_>, z: Loc<'_>, member: &[u8], score: f64, reverse: bool) -> Result<u64> {
    let p = z.score_prefix();
    let at = z.score_record(score, member);
    // Below it: the records before its own; above it: from the first key after it.
    let (lo, hi) = if reverse {
        ([&at[..], &[0]].concat(), prefix_end(&p))
    } else {
        (p.clone(), at)
    };
    let mut n = 0u64;
    walk(store, &lo, &hi, p.len(), false, |_, _| {
        n += 1;
        true
    })?;
    Ok(n)
}

/// A score bound: the value and whether it is exclusive (`(`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub minex: bool,
    pub max: f64,
    pub maxex: bool,
}

impl ScoreRange {
    /// Redis's `zslIsInRange` emptiness test.
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }
}

/// The members with scores in `r`, in order (descending when `reverse`), after skipping
/// `offset` of them, at most `limit`. A seek in the score index.
pub fn by_score(
    store: &Tx<'_>,
    z: Loc<'_>,
    r: &ScoreRange,
    reverse: bool,
    offset: u64,
    limit: u64,
) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    if r.is_empty() || limit == 0 {
        return Ok(out);
    }
    let p = z.score_prefix();
    let with = |s: f64| {
        let mut k = p.clone();
        k.extend_from_slice(&encode_score(s));
        k
    };
    let lo = if r.minex {
        prefix_end(&with(r.min))
    } else {
        with(r.min)
    };
    let hi = if r.maxex {
        with(r.max)
    } else {
        prefix_end(&with(r.max))
    };
    let mut seen = 0u64;
    walk(store, &lo, &hi, p.len(), reverse, |m, s| {
        seen += 1;
        if seen > offset {
            out.push((m.to_vec(), s));
        }
        (out.len() as u64) < limit
    })?;
    Ok(out)
}

/// A lexicographic bound (`-`, `+`, `[member`, `(member`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lex {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

/// `[min, max]` lexicographic range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    pub min: Lex,
    pub max: Lex,
}

impl Lex {
    /// Redis's `zslParseLexRangeItem`.
    pub fn parse(b: &[u8]) -> Option<Lex> {
        match b.first()? {
            b'+' if b.len() == 1 => Some(Lex::PosInf),
            b'-' if b.len() == 1 => Some(Lex::NegInf),
            b'(' => Some(Lex::Excl(b[1..].to_vec())),
            b'[' => Some(Lex::Incl(b[1..].to_vec())),
            _ => None,
        }
    }

    /// `v` against the bound's value, as Redis's `sdscmplex` (−∞ below and +∞ above all).
    fn cmp_value(&self, v: &[u8]) -> Ordering {
        match self {
            Lex::NegInf => Ordering::Greater,
            Lex::PosInf => Ordering::Less,
            Lex::Incl(b) | Lex::Excl(b) => v.cmp(b),
        }
    }

    fn exclusive(&self) -> bool {
        !matches!(self, Lex::Incl(_))
    }
}

impl LexRange {
    pub fn gte_min(&self, v: &[u8]) -> bool {
        match self.min.cmp_value(v) {
            Ordering::Greater => true,
            Ordering::Equal => !self.min.exclusive(),
            Ordering::Less => false,
        }
    }

    pub fn lte_max(&self, v: &[u8]) -> bool {
        match self.max.cmp_value(v) {
            Ordering::Less => true,
            Ordering::Equal => !self.max.exclusive(),
            Ordering::Greater => false,
        }
    }

    /// Redis's emptiness test: min above max, or equal with an exclusive end.
    pub fn is_empty(&self) -> bool {
        use Lex::*;
        let c = match (&self.min, &self.max) {
            (NegInf, NegInf) | (PosInf, PosInf) => Ordering::Equal,
            (NegInf, _) | (_, PosInf) => Ordering::Less,
            (PosInf, _) | (_, NegInf) => Ordering::Greater,
            (Incl(a) | Excl(a), Incl(b) | Excl(b)) => a.cmp(b),
        };
        c == Ordering::Greater
            || (c == Ordering::Equal && (self.min.exclusive() || self.max.exclusive()))
    }
}

/// The first (`last`: last) score record of `z`.
fn end_entry(store: &Tx<'_>, z: Loc<'_>, last: bool) -> Result<Option<Entry>> {
    let p = z.score_prefix();
    let mut e = None;
    walk(store, &p, &prefix_end(&p), p.len(), last, |m, s| {
        e = Some((m.to_vec(), s));
        false
    })?;
    Ok(e)
}

/// The members in lexicographic range `r`, as Redis's listpack finds them: walking the score
/// order (descending when `reverse`) to the first member inside the near bound, then taking
/// members while they are inside the far bound; after skipping `offset` of them, at most
/// `limit`. With equal scores (the case BYLEX is meant for) that is the lexicographic range,
/// and the walk starts with a seek to the near bound.
pub fn by_lex(
    store: &Tx<'_>,
    z: Loc<'_>,
    r: &LexRange,
    reverse: bool,
    offset: u64,
    limit: u64,
) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    if r.is_empty() || limit == 0 {
        return Ok(out);
    }
    let (Some(first), Some(last)) = (end_entry(store, z, false)?, end_entry(store, z, true)?)
    else {
        return Ok(out);
    };
    // Redis's zzlIsInLexRange: the last member must reach the minimum and the first the
    // maximum.
    if !r.gte_min(&last.0) || !r.lte_max(&first.0) {
        return Ok(out);
    }
    let p = z.score_prefix();
    let (mut lo, mut hi) = (p.clone(), prefix_end(&p));
    if encode_score(first.1) == encode_score(last.1) {
        let mut at = p.clone();
        at.extend_from_slice(&encode_score(first.1));
        if !reverse {
            if let Lex::Incl(b) | Lex::Excl(b) = &r.min {
                lo = [&at[..], b].concat();
            }
        } else {
            match &r.max {
                Lex::Incl(b) => hi = [&at[..], b, &[0]].concat(),
                Lex::Excl(b) => hi = [&at[..], b].concat(),
                _ => {}
            }
        }
    }
    let mut started = false;
    let mut seen = 0u64;
    walk(store, &lo, &hi, p.len(), reverse, |m, s| {
        let (near, far) = if reverse {
            (r.lte_max(m), r.gte_min(m))
        } else {
            (r.gte_min(m), r.lte_max(m))
        };
        if !started {
            if !near {
                return true;
            }
            started = true;
        }
        if !far {
            return false;
        }
        seen += 1;
        if seen > offset {
            out.push((m.to_vec(), s));
        }
        (out.len() as u64) < limit
    })?;
    Ok(out)
}

/// The members of a set (`RType::Set`) as sorted-set entries of score 1 (ZUNION and its
/// kin accept sets).
pub fn set_members(store: &Tx<'_>, z: Loc<'_>) -> Result<Vec<Entry>> {
    let p = sub_prefix(KIND_SUBKEY, z.db, z.key, z.version);
    let mut out = Vec::new();
    store.scan_prefix(&p, false, |k, _| {
        out.push((k[p.len()..].to_vec(), 1.0));
        true
    })?;
    Ok(out)
}

/// Whether each of `members` is in set (`RType::Set`) `z`.
pub fn set_contains(store: &Tx<'_>, z: Loc<'_>, members: &[&[u8]]) -> Result<Vec<bool>> {
    let recs: Vec<Vec<u8>> = members.iter().map(|m| z.member_record(m)).collect();
    store
        .get_members(&recs)
        .into_iter()
        .map(|r| r.map(|v| v.is_some()))
        .collect()
}

/// Members after `after` (exclusive; `None`: from the first) in member order, at most
/// `count`, for ZSCAN: walks the member records.
pub fn members_from(
    store: &Tx<'_>,
    z: Loc<'_>,
    from: &[u8],
    count: usize,
) -> Result<(Vec<Entry>, Option<Vec<u8>>)> {
    let p = sub_prefix(KIND_SUBKEY, z.db, z.key, z.version);
    let lo = [&p[..], from].concat();
    let mut out = Vec::new();
    let mut next = None;
    store.scan_range(&lo, &prefix_end(&p), false, |k, v| {
        if out.len() == count {
            next = Some(k[p.len()..].to_vec());
            return false;
        }
        out.push((k[p.len()..].to_vec(), score_of_value(v)));
        true
    })?;
    Ok((out, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Meta, Store};

    #[test]
    fn score_encoding_orders_like_numbers() {
        let v = [
            f64::NEG_INFINITY,
            f64::MIN,
            -1e300,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            -5e-324,
            0.0,
            5e-324,
            f64::MIN_POSITIVE,
            1.0,
            1.5,
            1e300,
            f64::MAX,
            f64::INFINITY,
        ];
        for w in v.windows(2) {
            assert!(
                encode_score(w[0]) < encode_score(w[1]),
                "{} < {}",
                w[0],
                w[1]
            );
        }
        for x in v {
            assert_eq!(decode_score(encode_score(x)), x);
        }
        assert_eq!(encode_score(-0.0), encode_score(0.0));
        assert!(decode_score(encode_score(-0.0)).is_sign_positive());
    }

    #[test]
    fn lex_and_score_ranges_as_redis() {
        assert_eq!(Lex::parse(b"-"), Some(Lex::NegInf));
        assert_eq!(Lex::parse(b"+"), Some(Lex::PosInf));
        assert_eq!(Lex::parse(b"[a"), Some(Lex::Incl(b"a".to_vec())));
        assert_eq!(Lex::parse(b"("), Some(Lex::Excl(Vec::new())));
        assert_eq!(Lex::parse(b"--"), None);
        assert_eq!(Lex::parse(b""), None);
        assert_eq!(Lex::parse(b"a"), None);
        let r = |a: &[u8], b: &[u8]| LexRange {
            min: Lex::parse(a).unwrap(),
            max: Lex::parse(b).unwrap(),
        };
        assert!(r(b"-", b"-").is_empty() && r(b"+", b"+").is_empty());
        assert!(r(b"+", b"-").is_empty() && !r(b"-", b"+").is_empty());
        assert!(r(b"[a", b"(a").is_empty() && !r(b"[a", b"[a").is_empty());
        assert!(r(b"[b", b"[a").is_empty());
        let x = r(b"(a", b"[c");
        assert!(!x.gte_min(b"a") && x.gte_min(b"a\0") && x.lte_max(b"c") && !x.lte_max(b"c\0"));
        let s = ScoreRange {
            min: 1.0,
            minex: true,
            max: 1.0,
            maxex: false,
        };
        assert!(s.is_empty());
    }

    #[test]
    fn ranges_walk_the_score_index() {
        use crate::store::RType;
        let dir = tempfile::tempdir().unwrap();
        let db = strata::Db::open(
            dir.path(),
            strata::DbOptions {
                shards: Some(2),
                routing: Some(strata::Routing::Slot),
                ..Default::default()
            },
        )
        .unwrap();
        let store = Store::open(db, false).unwrap();
        let s = store.front();
        let mut m = Meta::collection(RType::ZSet, s.next_version());
        let z = Loc {
            db: 0,
            key: b"z",
            version: m.version,
        };
        let entries: Vec<Entry> = vec![
            (b"n".to_vec(), f64::NEG_INFINITY),
            (b"a".to_vec(), -1.5),
            (b"z0".to_vec(), -0.0),
            (b"b".to_vec(), 0.0),
            (b"c".to_vec(), 2.0),
            (b"d".to_vec(), 2.0),
            (b"p".to_vec(), f64::INFINITY),
        ];
        let mut w = Writes::new();
        for (e, sc) in &entries {
            put(&mut w, z, e, None, *sc);
            m.size += 1;
        }
        w.meta(0, b"z", Some(&m));
        s.apply(w).unwrap();
        let names = |v: Vec<Entry>| v.into_iter().map(|(m, _)| m).collect::<Vec<_>>();
        let order: Vec<&[u8]> = vec![b"n", b"a", b"b", b"z0", b"c", b"d", b"p"];
        assert_eq!(names(by_rank(&s, z, false, 0, u64::MAX).unwrap()), order);
        // -0.0 sorts with 0.0 (then by member) and keeps its sign.
        let all = by_rank(&s, z, false, 0, u64::MAX).unwrap();
        assert!(all[3].1 == 0.0 && all[3].1.is_sign_negative());
        assert_eq!(
            score(&s, z, b"z0").unwrap().map(f64::is_sign_negative),
            Some(true)
        );
        assert_eq!(
            names(rank_range(&s, z, 7, 5, 6, false).unwrap()),
            order[5..]
        );
        assert_eq!(
            names(rank_range(&s, z, 7, 0, 1, true).unwrap()),
            [b"p", b"d"]
        );
        assert_eq!(
            names(rank_range(&s, z, 7, 5, 6, true).unwrap()),
            [b"a", b"n"]
        );
        for (i, m) in order.iter().enumerate() {
            let sc = score(&s, z, m).unwrap().unwrap();
            assert_eq!(rank(&s, z, m, sc, false).unwrap(), i as u64);
            assert_eq!(rank(&s, z, m, sc, true).unwrap(), 6 - i as u64);
        }
        let r = |min: f64, minex, max: f64, maxex| ScoreRange {
            min,
            minex,
            max,
            maxex,
        };
        let by =
            |rg: ScoreRange, rev, off, lim| names(by_score(&s, z, &rg, rev, off, lim).unwrap());
        assert_eq!(
            by(r(0.0, false, 2.0, false), false, 0, 9),
            [&b"b"[..], b"z0", b"c", b"d"]
        );
        assert_eq!(
            by(r(0.0, true, 2.0, true), false, 0, 9),
            Vec::<Vec<u8>>::new()
        );
        assert_eq!(by(r(-0.0, false, 2.0, true), true, 1, 1), [b"b"]);
        let inf = f64::INFINITY;
        assert_eq!(by(r(-inf, false, inf, false), false, 0, 99).len(), 7);
        assert_eq!(by(r(-inf, true, inf, true), false, 0, 99).len(), 5);
        // BYLEX with mixed scores: Redis's listpack walk in score order.
        let lex = |a: &[u8], b: &[u8], rev| {
            let rg = LexRange {
                min: Lex::parse(a).unwrap(),
                max: Lex::parse(b).unwrap(),
            };
            names(by_lex(&s, z, &rg, rev, 0, u64::MAX).unwrap())
        };
        assert_eq!(
            lex(b"[b", b"+", false),
            order,
            "n (first by score) is above b"
        );
        assert_eq!(
            lex(b"-", b"[c", false),
            Vec::<Vec<u8>>::new(),
            "n > c ends the walk"
        );
        assert_eq!(lex(b"(a", b"+", true), [&b"p"[..], b"d", b"c", b"z0", b"b"]);
        // Members removed leave no score records behind.
        let mut w = Writes::new();
        remove(&mut w, z, b"z0", -0.0);
        put(&mut w, z, b"c", Some(2.0), -3.0);
        s.apply(w).unwrap();
        assert_eq!(
            names(by_rank(&s, z, false, 0, u64::MAX).unwrap()),
            [&b"n"[..], b"c", b"a", b"b", b"d", b"p"]
        );
        // A set's members read as score 1.
        let set = Loc {
            db: 0,
            key: b"s",
            version: s.next_version(),
        };
        let mut w = Writes::new();
        w.put_member(0, b"s", &sub_key(0, b"s", set.version, b"x"), b"");
        s.apply(w).unwrap();
        assert_eq!(set_members(&s, set).unwrap(), vec![(b"x".to_vec(), 1.0)]);
        assert_eq!(set_contains(&s, set, &[b"x", b"y"]).unwrap(), [true, false]);
        drop(s);
        store.into_db().close().unwrap();
    }
}
