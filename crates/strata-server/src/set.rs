//! The set type (Redis's t_set.c, as Kvrocks' `types/redis_set.cc`): a typed handle over the
//! command's transaction, and the multi-set operations, with no protocol in them. A set is
//! a metadata record (type set, size = number of members, one flags byte:
//! `collection::FLAG_HASHTABLE`) and one member record per member with an empty value
//! (`docs/format/redis-keys.md`, "Sets").
//!
//! **Encodings.** Redis keeps a set of integers as an intset while it holds at most
//! `set-max-intset-entries` members, and converts it to a hashtable, never back, when a
//! member that is not an integer is added or it grows past the limit (`setTypeAdd`,
//! `setTypeMaybeConvert`). A set built from scratch (the STORE forms, SPOP's rebuild) has
//! its encoding decided again ([`fresh_meta`]).
//!
//! Layer: store and types.

use crate::collection::{self, Collection, Handle, Member, TypeError};
use crate::store::{Meta, RType, Tx, Writes};
use std::collections::BTreeSet;
use strata_engine::Result;

/// A set of database `db`, read and written through one transaction.
pub struct Set<'t> {
    h: Handle<'t>,
}

/// The metadata of a set built from scratch with `members` (Redis's `setTypeCreate` then
/// `setTypeAdd`s): an intset while every member is an integer and there are at most
/// `max_intset`, else a hashtable.
pub fn fresh_meta(tx: &Tx<'_>, members: &[Vec<u8>], max_intset: u64) -> Meta {
    let mut m = collection::create(tx, RType::Set);
    m.size = members.len() as u64;
    if m.size > max_intset || !members.iter().all(|x| collection::is_int_member(x)) {
        collection::mark_hashtable(&mut m);
    }
    m
}

/// After members were added to `m`: Redis's conversions of an intset.
fn convert_after_add(m: &mut Meta, added: &[&[u8]], max_intset: u64) {
    if m.size > max_intset || !added.iter().all(|x| collection::is_int_member(x)) {
        collection::mark_hashtable(m);
    }
}

fn distinct<B: AsRef<[u8]>>(items: &[B]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = items.iter().map(AsRef::as_ref).collect();
    v.sort_unstable();
    v.dedup();
    v
}

impl<'t> Collection<'t> for Set<'t> {
    const TYPE: RType = RType::Set;

    fn from_handle(h: Handle<'t>) -> Self {
        Set { h }
    }
}

impl<'t> Set<'t> {
    /// The number of members.
    pub fn len(&self) -> u64 {
        self.h.meta.size
    }

    /// The set's metadata record.
    pub fn meta(&self) -> &Meta {
        &self.h.meta
    }

    fn record(&self, member: &[u8]) -> Vec<u8> {
        collection::record(self.h.db, self.h.key, &self.h.meta, member)
    }

    /// Whether each of `members` is in the set (one batched read).
    pub fn contains(&self, members: &[&[u8]]) -> Result<Vec<bool>> {
        if !self.h.existed {
            return Ok(vec![false; members.len()]);
        }
        Ok(
            collection::exist(self.h.tx, self.h.db, self.h.key, &self.h.meta, members)?
                .iter()
                .map(Option::is_some)
                .collect(),
        )
    }

    /// Calls `f(member)` for every member, in member byte order, until it returns false.
    pub fn for_each(&self, mut f: impl FnMut(&[u8]) -> bool) -> Result<()> {
        collection::for_each(self.h.tx, self.h.db, self.h.key, &self.h.meta, |x, _| f(x))
    }

    /// Every member, in member byte order.
    pub fn members(&self) -> Result<Vec<Vec<u8>>> {
        Ok(
            collection::load(self.h.tx, self.h.db, self.h.key, &self.h.meta)?
                .into_iter()
                .map(|(x, _)| x)
                .collect(),
        )
    }

    /// SADD: adds the members not in the set yet (each once); returns how many.
    pub fn add<B: AsRef<[u8]>>(&mut self, members: &[B], max_intset: u64) -> Result<u64> {
        let candidates = distinct(members);
        let new: Vec<&[u8]> = if self.h.existed {
            let found = self.contains(&candidates)?;
            candidates
                .into_iter()
                .zip(found)
                .filter(|(_, f)| !f)
                .map(|(c, _)| c)
                .collect()
        } else {
            candidates
        };
        if new.is_empty() {
            return Ok(0);
        }
        let mut w = Writes::new();
        for x in &new {
            w.put_member(self.h.db, self.h.key, &self.record(x), b"");
        }
        self.h.meta.size += new.len() as u64;
        convert_after_add(&mut self.h.meta, &new, max_intset);
        w.meta(self.h.db, self.h.key, Some(&self.h.meta));
        self.h.tx.apply(w)?;
        self.h.existed = true;
        Ok(new.len() as u64)
    }

    /// SREM: removes the members in the set (each once); returns how many. The set is
    /// deleted with its last member.
    pub fn remove<B: AsRef<[u8]>>(&mut self, members: &[B]) -> Result<u64> {
        if !self.h.existed {
            return Ok(0);
        }
        let candidates = distinct(members);
        let found = self.contains(&candidates)?;
        let gone: Vec<&[u8]> = candidates
            .into_iter()
            .zip(found)
            .filter(|(_, f)| *f)
            .map(|(c, _)| c)
            .collect();
        self.delete_refs(&gone)?;
        Ok(gone.len() as u64)
    }

    /// Deletes `members`, all in the set and distinct (nothing for none).
    fn delete_members(&mut self, members: &[Vec<u8>]) -> Result<()> {
        let refs: Vec<&[u8]> = members.iter().map(|x| &x[..]).collect();
        self.delete_refs(&refs)
    }

    fn delete_refs(&mut self, members: &[&[u8]]) -> Result<()> {
        if members.is_empty() {
            return Ok(());
        }
        let mut w = Writes::new();
        for x in members {
            w.delete_member(self.h.db, self.h.key, &self.record(x));
        }
        self.h.meta.size = self.h.meta.size.saturating_sub(members.len() as u64);
        collection::put_meta(&mut w, self.h.db, self.h.key, &self.h.meta);
        self.h.tx.apply(w)?;
        self.h.existed = self.h.meta.size > 0;
        Ok(())
    }

    /// SPOP without a count: a random member, removed (`None` for an empty set).
    pub fn pop_one(&mut self) -> Result<Option<Vec<u8>>> {
        if !self.h.existed {
            return Ok(None);
        }
        let got = self.sample_distinct(1)?;
        let Some((x, _)) = got.into_iter().next() else {
            return Ok(None);
        };
        self.delete_refs(&[&x])?;
        Ok(Some(x))
    }

    /// SPOP with a count of at least the set's size: every member, and the key deleted.
    pub fn pop_all(&mut self) -> Result<Vec<Vec<u8>>> {
        if !self.h.existed {
            return Ok(Vec::new());
        }
        let all = self.members()?;
        let mut w = Writes::new();
        w.meta(self.h.db, self.h.key, None);
        self.h.tx.apply(w)?;
        self.h.meta.size = 0;
        self.h.existed = false;
        Ok(all)
    }

    /// SPOP with a count below the set's size: `count` random members, removed, in the
    /// order drawn. When fewer than four fifths would remain ([`SPOP_MOVE_STRATEGY_MUL`]),
    /// Redis rebuilds the set from the members it keeps, which decides its encoding again.
    pub fn pop_some(&mut self, count: u64, max_intset: u64) -> Result<Vec<Vec<u8>>> {
        debug_assert!(count < self.h.meta.size);
        let popped: Vec<Vec<u8>> = if count * SPOP_MOVE_STRATEGY_MUL > self.h.meta.size {
            let all = self.members()?;
            let keep = self.sample_distinct((self.h.meta.size - count) as usize)?;
            let kept: BTreeSet<&[u8]> = keep.iter().map(|(x, _)| &x[..]).collect();
            let rebuilt: Vec<Vec<u8>> = keep.iter().map(|(x, _)| x.clone()).collect();
            let fresh = fresh_meta(self.h.tx, &rebuilt, max_intset);
            // The encoding is decided again; the count of deleted members carries on.
            let dead = self.h.meta.dead_members();
            self.h.meta.value = fresh.value;
            self.h.meta.set_dead_members(dead);
            all.into_iter().filter(|x| !kept.contains(&x[..])).collect()
        } else {
            self.sample_distinct(count as usize)?
                .into_iter()
                .map(|(x, _)| x)
                .collect()
        };
        self.delete_members(&popped)?;
        Ok(popped)
    }

    /// `count` distinct random members (`count < len()`), in random order.
    pub fn sample_distinct(&self, count: usize) -> Result<Vec<Member>> {
        collection::sample_distinct(self.h.tx, self.h.db, self.h.key, &self.h.meta, count)
    }

    /// `count` random members with repetition, each passed to `f`.
    pub fn sample_repeating(&self, count: u64, mut f: impl FnMut(&[u8])) -> Result<()> {
        collection::sample_repeating(
            self.h.tx,
            self.h.db,
            self.h.key,
            &self.h.meta,
            count,
            |x, _| f(x),
        )
    }
}

/// Redis's `SPOP_MOVE_STRATEGY_MUL`: SPOP with a count rebuilds the set from the members
/// it keeps when the count times this exceeds the set's size (fewer than four fifths of
/// the members would remain).
pub const SPOP_MOVE_STRATEGY_MUL: u64 = 5;

/// What SMOVE did.
#[derive(Debug, PartialEq, Eq)]
pub enum Moved {
    /// The member is not in the source (or the source is absent): nothing written.
    NotInSource,
    /// Source and destination are one set holding the member: nothing written.
    Same,
    /// Moved: the members left in the source, and whether the destination gained it.
    Done { src_left: u64, added: bool },
}

/// SMOVE: moves `member` from set `src` to set `dst` in one write (atomic across shards),
/// every key type-checked first, as Redis does.
pub fn move_member(
    tx: &Tx<'_>,
    db: u8,
    (src, dst): (&[u8], &[u8]),
    member: &[u8],
    max_intset: u64,
) -> std::result::Result<Moved, TypeError> {
    let src_m = tx.get(db, src)?;
    let dst_m = tx.get(db, dst)?;
    let Some(mut src_m) = src_m else {
        return Ok(Moved::NotInSource);
    };
    if src_m.rtype != RType::Set || dst_m.as_ref().is_some_and(|m| m.rtype != RType::Set) {
        return Err(TypeError::WrongType);
    }
    let src_rec = collection::record(db, src, &src_m, member);
    let in_src = tx.get_member(&src_rec)?.is_some();
    if !in_src {
        return Ok(Moved::NotInSource);
    }
    if src == dst {
        return Ok(Moved::Same);
    }
    let mut w = Writes::new();
    w.delete_member(db, src, &src_rec);
    src_m.size -= 1;
    collection::put_meta(&mut w, db, src, &src_m);
    let mut dst_m = dst_m.unwrap_or_else(|| collection::create(tx, RType::Set));
    let dst_rec = collection::record(db, dst, &dst_m, member);
    let in_dst = dst_m.size > 0 && tx.get_member(&dst_rec)?.is_some();
    if !in_dst {
        w.put_member(db, dst, &dst_rec, b"");
        dst_m.size += 1;
        convert_after_add(&mut dst_m, &[member], max_intset);
        w.meta(db, dst, Some(&dst_m));
    }
    tx.apply(w)?;
    Ok(Moved::Done {
        src_left: src_m.size,
        added: !in_dst,
    })
}

/// The STORE forms: `members` replace `dst` whatever it held (a new incarnation without a
/// TTL), or delete it when empty. Returns whether an empty result deleted a key.
pub fn store(
    tx: &Tx<'_>,
    db: u8,
    dst: &[u8],
    members: &[Vec<u8>],
    max_intset: u64,
) -> Result<bool> {
    let mut w = Writes::new();
    let mut deleted = false;
    if members.is_empty() {
        deleted = tx.get(db, dst)?.is_some();
        if deleted {
            w.meta(db, dst, None);
        }
    } else {
        let m = fresh_meta(tx, members, max_intset);
        for x in members {
            w.put_member(db, dst, &collection::record(db, dst, &m, x), b"");
        }
        w.meta(db, dst, Some(&m));
    }
    tx.apply(w)?;
    Ok(deleted)
}

/// Members are checked against other sets in batches of this many point reads.
const PROBE_BATCH: usize = 256;

/// The members of the intersection of `sets`, up to `limit` (0: all): the smallest set's
/// members, probed in the others. Empty if any set is absent (an empty slice: none).
pub fn inter(sets: &[Option<Set<'_>>], limit: usize) -> Result<Vec<Vec<u8>>> {
    if sets.is_empty() || sets.iter().any(Option::is_none) {
        return Ok(Vec::new());
    }
    let sets: Vec<&Set<'_>> = sets.iter().flatten().collect();
    let mut order: Vec<usize> = (0..sets.len()).collect();
    order.sort_by_key(|&i| sets[i].len());
    let (first, others) = (order[0], &order[1..]);
    let mut out = Vec::new();
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(PROBE_BATCH);
    let mut err = None;
    let done = |out: &Vec<Vec<u8>>| limit != 0 && out.len() >= limit;
    let probe = |batch: &mut Vec<Vec<u8>>, out: &mut Vec<Vec<u8>>| -> Result<()> {
        let mut alive = vec![true; batch.len()];
        for &o in others {
            let refs: Vec<&[u8]> = batch.iter().map(|x| &x[..]).collect();
            for (a, f) in alive.iter_mut().zip(sets[o].contains(&refs)?) {
                *a &= f;
            }
        }
        for (x, a) in batch.drain(..).zip(alive) {
            if a && !done(out) {
                out.push(x);
            }
        }
        Ok(())
    };
    sets[first].for_each(|x| {
        batch.push(x.to_vec());
        if batch.len() >= PROBE_BATCH {
            if let Err(e) = probe(&mut batch, &mut out) {
                err = Some(e);
                return false;
            }
            return !done(&out);
        }
        true
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    if !done(&out) {
        probe(&mut batch, &mut out)?;
    }
    Ok(out)
}

/// The members of the union of `sets` (absent ones are empty), in member byte order.
pub fn union(sets: &[Option<Set<'_>>]) -> Result<Vec<Vec<u8>>> {
    let mut all: BTreeSet<Vec<u8>> = BTreeSet::new();
    for s in sets.iter().flatten() {
        s.for_each(|x| {
            if !all.contains(x) {
                all.insert(x.to_vec());
            }
            true
        })?;
    }
    Ok(all.into_iter().collect())
}

/// The members of the first of `sets` in none of the others (absent ones are empty).
pub fn diff(sets: &[Option<Set<'_>>]) -> Result<Vec<Vec<u8>>> {
    let Some(Some(first)) = sets.first() else {
        return Ok(Vec::new());
    };
    let mut left = first.members()?;
    for s in sets.iter().skip(1).flatten() {
        let mut keep = Vec::with_capacity(left.len());
        for chunk in left.chunks(PROBE_BATCH) {
            let refs: Vec<&[u8]> = chunk.iter().map(|x| &x[..]).collect();
            for (x, f) in chunk.iter().zip(s.contains(&refs)?) {
                if !f {
                    keep.push(x.clone());
                }
            }
        }
        left = keep;
        if left.is_empty() {
            break;
        }
    }
    Ok(left)
}

#[cfg(test)]
#[path = "set_tests.rs"]
mod tests;
