//! Sorted sets over the store, with no protocol in it (`docs/format/redis-keys.md`, "Sorted
//! sets"). A sorted set is its metadata record (`RType::ZSet`, size = member count, value =
//! one flags byte) plus two records per member:
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
//! the lower bound; with mixed scores it follows score order, as Redis's listpack does).
//!
//! Layer: store and types (above configuration; no services, commands or execution).

use crate::keys::{prefix_end, sub_key, sub_prefix, KIND_SCORE, KIND_SUBKEY};
use crate::store::{Meta, Tx, Writes};
use std::cmp::Ordering;
use strata_engine::Result;

/// A member and its score.
pub type Entry = (Vec<u8>, f64);

/// Flags byte of the metadata value: the set has Redis's skiplist encoding (it grew beyond
/// the listpack limits once; Redis never converts back).
const FLAG_SKIPLIST: u8 = 1;

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

/// Whether `m` (a sorted set's metadata) has the skiplist encoding.
pub fn is_skiplist(m: &Meta) -> bool {
    m.value.first().is_some_and(|f| f & FLAG_SKIPLIST != 0)
}

pub fn set_skiplist(m: &mut Meta) {
    if m.value.is_empty() {
        m.value.push(0);
    }
    m.value[0] |= FLAG_SKIPLIST;
}

/// Redis's listpack limits (`zset-max-listpack-entries`, `zset-max-listpack-value`).
#[derive(Clone, Copy)]
pub struct Limits {
    pub entries: u64,
    pub value: usize,
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

/// Redis's `zunionInterAggregate` modes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    pub fn apply(self, target: &mut f64, v: f64) {
        match self {
            Aggregate::Sum => {
                *target += v;
                // inf + -inf: Redis keeps the convention 0.
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if v < *target {
                    *target = v;
                }
            }
            Aggregate::Max => {
                if v > *target {
                    *target = v;
                }
            }
        }
    }
}

/// Redis's order of a sorted set: score, then member bytes.
pub fn cmp_entries(a: &Entry, b: &Entry) -> Ordering {
    a.1.partial_cmp(&b.1)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.0.cmp(&b.0))
}

/// C's `strtod` over the start of `s`: the value, the bytes read (0: no number) and whether
/// it over- or underflowed (`ERANGE`). Leading white space is skipped as C does.
pub fn strtod(s: &[u8]) -> (f64, usize, bool) {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let start = i;
    let neg = matches!(s.get(i), Some(b'-'));
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let sign = if neg { -1.0 } else { 1.0 };
    let rest = &s[i..];
    let lower: Vec<u8> = rest
        .iter()
        .take(8)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if lower.starts_with(b"infinity") {
        return (sign * f64::INFINITY, i + 8, false);
    }
    if lower.starts_with(b"inf") {
        return (sign * f64::INFINITY, i + 3, false);
    }
    if lower.starts_with(b"nan") {
        let mut n = i + 3;
        if s.get(n) == Some(&b'(') {
            if let Some(close) = s[n..].iter().position(|&c| c == b')') {
                if s[n + 1..n + close]
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    n += close + 1;
                }
            }
        }
        return (f64::NAN, n, false);
    }
    if lower.starts_with(b"0x") {
        if let Some((v, n)) = hex_float(&rest[2..]) {
            let v = sign * v;
            let erange = v.is_infinite() || (v == 0.0 && n.1);
            return (v, i + 2 + n.0, erange);
        }
    }
    // Decimal: digits [. digits] [e [sign] digits].
    let digits = |from: usize| s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int = digits(i);
    let mut j = i + int;
    let mut frac = 0;
    if s.get(j) == Some(&b'.') {
        frac = digits(j + 1);
        if int + frac > 0 {
            j += 1 + frac;
        }
    }
    if int + frac == 0 {
        return (0.0, 0, false);
    }
    if matches!(s.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(s.get(k), Some(b'-' | b'+')) {
            k += 1;
        }
        let e = digits(k);
        if e > 0 {
            j = k + e;
        }
    }
    let text = std::str::from_utf8(&s[start..j]).unwrap_or("0");
    let v: f64 = text.parse().unwrap_or(0.0);
    let nonzero = s[i..j]
        .iter()
        .take_while(|c| !matches!(c, b'e' | b'E'))
        .any(|c| (b'1'..=b'9').contains(c));
    let erange = v.is_infinite() || (v == 0.0 && nonzero);
    (v, j, erange)
}

/// A hex float's value after "0x": `((value, (bytes read, nonzero digits)))`, `None` if no
/// hex digit follows (then C reads only the "0").
fn hex_float(s: &[u8]) -> Option<(f64, (usize, bool))> {
    let mut mant: u64 = 0;
    let mut exp: i64 = 0;
    let mut any = false;
    let mut nonzero = false;
    let mut i = 0;
    let mut seen_dot = false;
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !seen_dot {
            seen_dot = true;
            i += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else {
            break;
        };
        any = true;
        nonzero |= d != 0;
        if mant >> 59 == 0 {
            mant = mant * 16 + u64::from(d);
            if seen_dot {
                exp -= 4;
            }
        } else if !seen_dot {
            exp += 4;
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        let mut k = i + 1;
        let neg = s.get(k) == Some(&b'-');
        if matches!(s.get(k), Some(b'-' | b'+')) {
            k += 1;
        }
        let n = s[k..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n > 0 {
            let e: i64 = s[k..k + n]
                .iter()
                .fold(0i64, |a, &c| (a * 10 + i64::from(c - b'0')).min(1 << 20));
            exp += if neg { -e } else { e };
            i = k + n;
        }
    }
    let v = (mant as f64) * 2f64.powi(exp.clamp(-2000, 2000) as i32);
    Some((v, (i, nonzero)))
}

/// Redis's `getDoubleFromObject`: the whole argument is a number (no leading space), not
/// NaN, neither overflowing nor underflowing to zero.
pub fn parse_double(s: &[u8]) -> Option<f64> {
    if s.is_empty() || matches!(s[0], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        return None;
    }
    let (v, n, erange) = strtod(s);
    if n != s.len() || v.is_nan() || (erange && (v.is_infinite() || v == 0.0)) {
        return None;
    }
    Some(v)
}

/// Redis's `zslParseRange` for one bound: `(` for exclusive, then what `strtod` reads, up
/// to the end or a NUL byte; not NaN.
pub fn parse_score_bound(s: &[u8]) -> Option<(f64, bool)> {
    let (body, ex) = match s.first() {
        Some(b'(') => (&s[1..], true),
        _ => (s, false),
    };
    let (v, n, _) = strtod(body);
    if (n < body.len() && body[n] != 0) || v.is_nan() {
        return None;
    }
    Some((v, ex))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

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
    fn doubles_parse_as_redis() {
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"0x10"), Some(16.0));
        assert_eq!(parse_double(b"0x1p3"), Some(8.0));
        assert_eq!(parse_double(b"1e3"), Some(1000.0));
        assert_eq!(parse_double(b".5"), Some(0.5));
        assert_eq!(parse_double(b"5."), Some(5.0));
        assert_eq!(parse_double(b"4.9e-324"), Some(5e-324));
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"nan",
            b"1e999",
            b"1e-400",
            b"abc",
            b"1\0",
            b"e5",
            b".",
        ] {
            assert_eq!(
                parse_double(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_double(b"1e"), None);
        assert_eq!(strtod(b"1e"), (1.0, 1, false));
        assert_eq!(strtod(b"0x"), (0.0, 1, false));
    }

    #[test]
    fn bounds_parse_as_redis() {
        assert_eq!(parse_score_bound(b"(1.5"), Some((1.5, true)));
        assert_eq!(parse_score_bound(b"-inf"), Some((f64::NEG_INFINITY, false)));
        assert_eq!(parse_score_bound(b""), Some((0.0, false)));
        assert_eq!(parse_score_bound(b"("), Some((0.0, true)));
        assert_eq!(parse_score_bound(b" 1"), Some((1.0, false)));
        assert_eq!(parse_score_bound(b"1e999"), Some((f64::INFINITY, false)));
        assert_eq!(parse_score_bound(b"1\0x"), Some((1.0, false)));
        assert_eq!(parse_score_bound(b"1 "), None);
        assert_eq!(parse_score_bound(b"nan"), None);
        assert_eq!(parse_score_bound(b"x"), None);
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
    fn aggregate_keeps_redis_conventions() {
        let mut t = f64::INFINITY;
        Aggregate::Sum.apply(&mut t, f64::NEG_INFINITY);
        assert_eq!(t, 0.0);
        let mut t = 1.0;
        Aggregate::Min.apply(&mut t, f64::NAN);
        assert_eq!(t, 1.0);
        Aggregate::Max.apply(&mut t, 3.0);
        assert_eq!(t, 3.0);
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
