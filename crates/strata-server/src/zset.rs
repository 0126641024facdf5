//! The sorted-set type (Redis's t_zset.c, as Kvrocks' `types/redis_zset.cc`): a typed handle
//! over the command's transaction ([`ZSet`]), with no protocol in it. A sorted set is a
//! metadata record (type zset, size = member count, value = one flags byte) and two records
//! per member, its member record and its score record (`zset/index.rs`,
//! `docs/format/redis-keys.md` "Sorted sets"). A sorted set's records share its shard, so
//! each method's writes are one `Writes`, applied through the transaction.
//!
//! **Encodings.** Redis keeps a small sorted set as a listpack and converts it to a
//! skiplist, never back, when it holds more than `zset-max-listpack-entries` members or a
//! member longer than `zset-max-listpack-value` is added (`zsetAdd`,
//! `zsetTypeMaybeConvert`); a set built from scratch (the STORE forms) is a listpack again
//! when it fits (`zsetConvertToListpackIfNeeded`). The handle applies the same rules
//! ([`Limits`]) to the flag OBJECT ENCODING reads. A listpack keeps scores as text, which
//! turns -0 into 0; a skiplist keeps -0.
//!
//! The records and the walks over them are `zset/index.rs`; Redis's parsing of scores is
//! `zset/float.rs`.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

mod float;
mod index;

pub use float::{parse_double, parse_score_bound, strtod};
pub use index::{
    by_rank, by_score, encode_score, members_from, put, score, scores, set_contains, set_members,
    Lex, LexRange, Loc, ScoreRange,
};

use crate::collection::{self, Collection, Handle};
use crate::store::{Meta, RType, Tx, Writes};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use strata_engine::Result;

/// A member and its score.
pub type Entry = (Vec<u8>, f64);

/// Flags byte of the metadata value: the set has Redis's skiplist encoding (it grew beyond
/// the listpack limits once; Redis never converts back).
const FLAG_SKIPLIST: u8 = 1;

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

/// OBJECT ENCODING of a sorted set.
pub fn encoding(m: &Meta) -> &'static str {
    if is_skiplist(m) {
        "skiplist"
    } else {
        "listpack"
    }
}

/// Redis's listpack limits (`zset-max-listpack-entries`, `zset-max-listpack-value`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub entries: u64,
    pub value: usize,
}

impl Limits {
    /// The limits as the server's tunables hold them now.
    pub fn of(limits: &crate::tuning::Limits) -> Limits {
        use crate::tuning::Limit;
        Limits {
            entries: limits.get(Limit::ZsetMaxListpackEntries),
            value: usize::try_from(limits.get(Limit::ZsetMaxListpackValue)).unwrap_or(usize::MAX),
        }
    }
}

/// A listpack keeps scores as text that turns -0 into 0; a skiplist keeps -0.
fn normalize(s: f64, listpack: bool) -> f64 {
    if listpack && s == 0.0 {
        0.0
    } else {
        s
    }
}

/// ZADD's options (Redis's `ZADD_IN_NX`, `_XX`, `_GT`, `_LT`, `_INCR`); the command checks
/// that they are compatible.
#[derive(Clone, Copy, Debug, Default)]
pub struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub incr: bool,
}

/// What ZADD did: members added, members whose score changed, members the options let
/// through (`processed`), and the score last computed for one of those (the reply of INCR).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Added {
    pub added: u64,
    pub updated: u64,
    pub processed: u64,
    pub score: f64,
}

impl Added {
    /// Whether anything was written.
    pub fn changed(&self) -> bool {
        self.added + self.updated > 0
    }
}

/// Why ZADD wrote nothing: an increment made a score NaN (`inf` + `-inf`), or the store
/// failed.
#[derive(Debug)]
pub enum AddError {
    NotANumber,
    Store(strata_engine::Error),
}

impl From<strata_engine::Error> for AddError {
    fn from(e: strata_engine::Error) -> Self {
        AddError::Store(e)
    }
}

impl From<AddError> for crate::error::CmdError {
    fn from(e: AddError) -> Self {
        match e {
            AddError::NotANumber => {
                crate::error::CmdError::reply("ERR resulting score is not a number (NaN)")
            }
            AddError::Store(e) => crate::error::CmdError::Store(e),
        }
    }
}

/// A range of members as the ZRANGE family names it: ranks (Redis's negative indexes from
/// the end), scores or a lexicographic range.
#[derive(Clone, Debug, PartialEq)]
pub enum Range {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// Ranks `start..=end` (negative: from the end) clamped to a set of `len` members; `None`
/// when empty.
pub fn clamp_ranks(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let mut start = if start < 0 {
        len.saturating_add(start)
    } else {
        start
    };
    let end = if end < 0 {
        len.saturating_add(end)
    } else {
        end
    };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    Some((start as u64, end.min(len - 1) as u64))
}

/// A sorted set of database `db`, read and written through one transaction: an existing
/// one ([`ZSet::open`], [`ZSet::open_write`]) or a new, empty one that exists once a member
/// is added ([`ZSet::open_or_create`]).
pub struct ZSet<'t> {
    h: Handle<'t>,
}

impl<'t> Collection<'t> for ZSet<'t> {
    const TYPE: RType = RType::ZSet;

    fn from_handle(h: Handle<'t>) -> Self {
        ZSet { h }
    }

    /// A sorted set's metadata has no flags byte until it becomes a skiplist.
    fn fresh_meta(tx: &Tx<'_>) -> Meta {
        Meta::collection(RType::ZSet, tx.next_version())
    }
}

impl<'t> ZSet<'t> {
    /// The number of members.
    pub fn len(&self) -> u64 {
        self.h.meta.size
    }

    /// The sorted set's metadata record.
    pub fn meta(&self) -> &Meta {
        &self.h.meta
    }

    /// Where the records of this incarnation live.
    pub fn loc(&self) -> Loc<'t> {
        Loc {
            db: self.h.db,
            key: self.h.key,
            version: self.h.meta.version,
        }
    }

    /// The score of `member`, if it is in the set.
    pub fn score(&self, member: &[u8]) -> Result<Option<f64>> {
        if !self.h.existed {
            return Ok(None);
        }
        index::score(self.h.tx, self.loc(), member)
    }

    /// The scores of `members`, in order (one batched read).
    pub fn scores(&self, members: &[&[u8]]) -> Result<Vec<Option<f64>>> {
        if !self.h.existed {
            return Ok(vec![None; members.len()]);
        }
        index::scores(self.h.tx, self.loc(), members)
    }

    /// The 0-based rank of `member` from the lowest score (`reverse`: from the highest), if
    /// it is in the set.
    pub fn rank(&self, member: &[u8], reverse: bool) -> Result<Option<u64>> {
        match self.score(member)? {
            Some(s) => Ok(Some(index::rank(
                self.h.tx,
                self.loc(),
                member,
                s,
                reverse,
            )?)),
            None => Ok(None),
        }
    }

    /// Every member in Redis's order (score, then member bytes).
    pub fn all(&self) -> Result<Vec<Entry>> {
        self.by_rank(false, 0, u64::MAX)
    }

    /// The members in order (descending when `reverse`) from the `skip`-th on, at most
    /// `limit` of them.
    pub fn by_rank(&self, reverse: bool, skip: u64, limit: u64) -> Result<Vec<Entry>> {
        if !self.h.existed {
            return Ok(Vec::new());
        }
        index::by_rank(self.h.tx, self.loc(), reverse, skip, limit)
    }

    /// The members of `range`, in order (descending when `reverse`), skipping `offset` and
    /// taking at most `limit` of a score or lex range (Redis: a negative offset yields
    /// nothing, a negative limit means no limit; a rank range ignores both).
    pub fn range(
        &self,
        range: &Range,
        reverse: bool,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Entry>> {
        if !self.h.existed {
            return Ok(Vec::new());
        }
        let (tx, z, size) = (self.h.tx, self.loc(), self.h.meta.size);
        let limit = u64::try_from(limit).unwrap_or(u64::MAX);
        Ok(match range {
            Range::Rank(start, end) => match clamp_ranks(*start, *end, size) {
                Some((s, e)) => index::rank_range(tx, z, size, s, e, reverse)?,
                None => Vec::new(),
            },
            _ if offset < 0 || (offset > 0 && offset as u64 >= size) => Vec::new(),
            Range::Score(r) => index::by_score(tx, z, r, reverse, offset as u64, limit)?,
            Range::Lex(r) => index::by_lex(tx, z, r, reverse, offset as u64, limit)?,
        })
    }

    /// Members from `from` on (inclusive; empty: from the first) in member byte order, at
    /// most `count`, and the member after them (ZSCAN's pages).
    pub fn members_from(&self, from: &[u8], count: usize) -> Result<(Vec<Entry>, Option<Vec<u8>>)> {
        if !self.h.existed {
            return Ok((Vec::new(), None));
        }
        index::members_from(self.h.tx, self.loc(), from, count)
    }

    /// ZADD (and ZINCRBY, ZADD with INCR): adds or updates the members of `pairs` (score,
    /// member) as `flags` allow, a repeated member seeing the score its earlier pair gave
    /// it. Nothing is written when an increment gives NaN.
    pub fn add<B: AsRef<[u8]>>(
        &mut self,
        pairs: &[(f64, B)],
        flags: AddFlags,
        limits: Limits,
    ) -> std::result::Result<Added, AddError> {
        let members: Vec<&[u8]> = pairs.iter().map(|(_, m)| m.as_ref()).collect();
        let found = self.scores(&members)?;
        // Current scores, as this command changes them (a member may appear twice).
        let mut cur: HashMap<&[u8], Option<f64>> = HashMap::new();
        for (m, s) in members.iter().zip(found) {
            cur.entry(m).or_insert(s);
        }
        let z = self.loc();
        let mut meta = self.h.meta.clone();
        let mut w = Writes::new();
        let mut out = Added::default();
        for (score, member) in pairs {
            let member = member.as_ref();
            match cur[member] {
                Some(c) => {
                    if flags.nx {
                        continue;
                    }
                    let mut s = *score;
                    if flags.incr {
                        s += c;
                        if s.is_nan() {
                            return Err(AddError::NotANumber);
                        }
                    }
                    if (flags.lt && s >= c) || (flags.gt && s <= c) {
                        continue;
                    }
                    out.processed += 1;
                    // The reply shows the score computed; a listpack stores -0 as 0.
                    out.score = s;
                    let s = normalize(s, !is_skiplist(&meta));
                    if s != c {
                        index::put(&mut w, z, member, Some(c), s);
                        cur.insert(member, Some(s));
                        out.updated += 1;
                    }
                }
                None if !flags.xx => {
                    if !is_skiplist(&meta)
                        && (meta.size + 1 > limits.entries || member.len() > limits.value)
                    {
                        set_skiplist(&mut meta);
                    }
                    out.score = *score;
                    let s = normalize(*score, !is_skiplist(&meta));
                    index::put(&mut w, z, member, None, s);
                    cur.insert(member, Some(s));
                    meta.size += 1;
                    out.added += 1;
                    out.processed += 1;
                }
                None => {}
            }
        }
        if !w.is_empty() {
            w.meta(self.h.db, self.h.key, Some(&meta));
            self.h.tx.apply(w)?;
            self.h.meta = meta;
            self.h.existed = true;
        }
        Ok(out)
    }

    /// Removes the records of `gone` (members of the set, each once) and writes the
    /// metadata, deleting the set with its last member.
    fn remove_entries(&mut self, gone: &[Entry]) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        let z = self.loc();
        let mut w = Writes::new();
        for (m, s) in gone {
            index::remove(&mut w, z, m, *s);
        }
        self.h.meta.size = self.h.meta.size.saturating_sub(gone.len() as u64);
        collection::put_meta(&mut w, self.h.db, self.h.key, &self.h.meta);
        self.h.tx.apply(w)?;
        self.h.existed = self.h.meta.size > 0;
        Ok(())
    }

    /// ZREM: removes the `members` that are in the set (each counted once); how many.
    pub fn remove<B: AsRef<[u8]>>(&mut self, members: &[B]) -> Result<u64> {
        let ms: Vec<&[u8]> = members.iter().map(AsRef::as_ref).collect();
        let scores = self.scores(&ms)?;
        let mut seen = HashSet::new();
        let mut gone = Vec::new();
        for (m, s) in ms.iter().zip(scores) {
            if let Some(s) = s {
                if seen.insert(*m) {
                    gone.push((m.to_vec(), s));
                }
            }
        }
        self.remove_entries(&gone)?;
        Ok(gone.len() as u64)
    }

    /// ZPOPMIN (`max`: ZPOPMAX): removes and returns up to `count` members with the lowest
    /// (highest) scores, in that order.
    pub fn pop(&mut self, max: bool, count: u64) -> Result<Vec<Entry>> {
        let out = self.by_rank(max, 0, count)?;
        self.remove_entries(&out)?;
        Ok(out)
    }

    /// ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX: removes the members of `range`;
    /// how many.
    pub fn remove_range(&mut self, range: &Range) -> Result<u64> {
        let gone = self.range(range, false, 0, -1)?;
        self.remove_entries(&gone)?;
        Ok(gone.len() as u64)
    }
}

/// What [`replace`] did to its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replaced {
    /// A new sorted set is there.
    Written,
    /// The result was empty and the key, which existed, is gone.
    Deleted,
    /// The result was empty and there was no key.
    Nothing,
}

/// The STORE forms (ZUNIONSTORE, ZRANGESTORE, GEOSEARCHSTORE, ...): writes `entries` (in
/// Redis's order, distinct members) as a new incarnation of `key`, whatever the key held,
/// or deletes the key when there are none. A result that fits the listpack limits gets the
/// listpack encoding (Redis's `zsetConvertToListpackIfNeeded`).
pub fn replace(
    tx: &Tx<'_>,
    db: u8,
    key: &[u8],
    entries: &[Entry],
    limits: Limits,
) -> Result<Replaced> {
    let mut w = Writes::new();
    if entries.is_empty() {
        if tx.get(db, key)?.is_none() {
            return Ok(Replaced::Nothing);
        }
        w.meta(db, key, None);
        tx.apply(w)?;
        return Ok(Replaced::Deleted);
    }
    let mut m = Meta::collection(RType::ZSet, tx.next_version());
    let listpack = entries.len() as u64 <= limits.entries
        && entries.iter().all(|(e, _)| e.len() <= limits.value);
    if !listpack {
        set_skiplist(&mut m);
    }
    let z = Loc {
        db,
        key,
        version: m.version,
    };
    for (e, s) in entries {
        index::put(&mut w, z, e, None, normalize(*s, listpack));
    }
    m.size = entries.len() as u64;
    w.meta(db, key, Some(&m));
    tx.apply(w)?;
    Ok(Replaced::Written)
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

#[cfg(test)]
mod tests;
