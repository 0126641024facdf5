//! Set commands (Redis's t_set.c). A set is a metadata record (type set, size = number of
//! members, one flags byte: `members::FLAG_HASHTABLE`) and one member record per member
//! with an empty value (`docs/format/redis-keys.md`, "Sets").
//!
//! The multi-key commands (SMOVE, SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD)
//! may name keys of several shards: they then run on the connection's thread under the
//! stripe locks of all their keys (taken by the dispatcher), and their writes go
//! out as one `Writes`, atomic across shards.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::members::{self, Emit};
use super::{cmd, lookup_typed, Args, CmdError, CmdResult, Ctx, Entry, ERR_WRONGTYPE};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::store::{Meta, RType, Writes};
use crate::tuning::Limit;
use bytes::Bytes;
use std::collections::BTreeSet;

pub static COMMANDS: &[Entry] = &[
    cmd("sadd", sadd),
    cmd("srem", srem),
    cmd("smembers", smembers),
    cmd("sismember", sismember),
    cmd("smismember", smismember),
    cmd("scard", scard),
    cmd("spop", spop),
    cmd("srandmember", srandmember),
    cmd("smove", smove),
    cmd("sinter", sinter),
    cmd("sunion", sunion),
    cmd("sdiff", sdiff),
    cmd("sinterstore", sinterstore),
    cmd("sunionstore", sunionstore),
    cmd("sdiffstore", sdiffstore),
    cmd("sintercard", sintercard),
    cmd("sscan", sscan),
];

/// `set-max-intset-entries`.
fn max_intset(ctx: &Ctx<'_>) -> u64 {
    ctx.shared.limits.get(Limit::SetMaxIntsetEntries)
}

/// The flags of a set built from scratch with `members` (Redis's `setTypeCreate` then
/// `setTypeAdd`s): an intset while every member is an integer and there are at most
/// `set-max-intset-entries`, else a hashtable.
fn fresh_set(ctx: &Ctx<'_>, members: &[Vec<u8>]) -> Meta {
    let mut m = members::create(ctx, RType::Set);
    m.size = members.len() as u64;
    if m.size > max_intset(ctx) || !members.iter().all(|x| members::is_int_member(x)) {
        members::mark_hashtable(&mut m);
    }
    m
}

/// After members were added to `m`: Redis's conversions of an intset.
fn convert_after_add(ctx: &Ctx<'_>, m: &mut Meta, added: &[&[u8]]) {
    if m.size > max_intset(ctx) || !added.iter().all(|x| members::is_int_member(x)) {
        members::mark_hashtable(m);
    }
}

fn distinct(items: &[Bytes]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = items.iter().map(|b| &b[..]).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn sadd(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let items = args.rest().to_vec();
    let db = ctx.conn.db;
    let old = members::lookup_write(ctx, &key, RType::Set)?;
    let existed = old.is_some();
    let mut m = old.unwrap_or_else(|| members::create(ctx, RType::Set));
    let candidates = distinct(&items);
    let store = ctx.tx;
    let new: Vec<&[u8]> = if existed {
        let found = members::exist(store, db, &key, &m, &candidates)?;
        candidates
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(c, _)| *c)
            .collect()
    } else {
        candidates
    };
    if !new.is_empty() {
        let mut w = Writes::new();
        for x in &new {
            w.put_member(db, &key, &members::record(db, &key, &m, x), b"");
        }
        m.size += new.len() as u64;
        convert_after_add(ctx, &mut m, &new);
        w.meta(db, &key, Some(&m));
        store.apply(w)?;
        notify(ctx, Class::Set, "sadd", db, &key);
    }
    ctx.reply.int(new.len() as i64);
    Ok(())
}

fn srem(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let items = args.rest().to_vec();
    let db = ctx.conn.db;
    let Some(mut m) = members::lookup_write(ctx, &key, RType::Set)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let candidates = distinct(&items);
    let store = ctx.tx;
    let found = members::exist(store, db, &key, &m, &candidates)?;
    let mut w = Writes::new();
    let mut removed = 0u64;
    for (x, f) in candidates.iter().zip(&found) {
        if f.is_some() {
            w.delete_member(db, &key, &members::record(db, &key, &m, x));
            removed += 1;
        }
    }
    if removed > 0 {
        m.size = m.size.saturating_sub(removed);
        members::put_meta(&mut w, db, &key, &m);
        store.apply(w)?;
        notify_removed(ctx, "srem", &key, m.size);
    }
    ctx.reply.int(removed as i64);
    Ok(())
}

fn smembers(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    match lookup_typed(ctx, &key, RType::Set)? {
        Some(m) => members::reply_all(ctx, &key, &m, Emit::Members),
        None => {
            ctx.reply.set(0);
            Ok(())
        }
    }
}

/// Membership of each of `items` in the set at `key` (all false if it does not exist).
fn membership(ctx: &Ctx<'_>, key: &[u8], items: &[&[u8]]) -> Result<Vec<bool>, CmdError> {
    let Some(m) = lookup_typed(ctx, key, RType::Set)? else {
        return Ok(vec![false; items.len()]);
    };
    let db = ctx.conn.db;
    Ok(members::exist(ctx.tx, db, key, &m, items)?
        .iter()
        .map(Option::is_some)
        .collect())
}

fn sismember(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let item = args.next_bytes()?;
    let found = membership(ctx, &key, &[&item])?;
    ctx.reply.int(i64::from(found[0]));
    Ok(())
}

fn smismember(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let items = args.rest().to_vec();
    let refs: Vec<&[u8]> = items.iter().map(|b| &b[..]).collect();
    let found = membership(ctx, &key, &refs)?;
    ctx.reply.array(found.len());
    for f in found {
        ctx.reply.int(i64::from(f));
    }
    Ok(())
}

fn scard(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let m = lookup_typed(ctx, &key, RType::Set)?;
    ctx.reply.int(m.map_or(0, |m| m.size as i64));
    Ok(())
}

/// Replies `v` as a set, in intset order when Redis would hold it as an intset.
fn reply_set(ctx: &mut Ctx<'_>, mut v: Vec<Vec<u8>>) {
    if v.len() as u64 <= max_intset(ctx) && v.iter().all(|x| members::is_int_member(x)) {
        members::sort_intset(&mut v);
    }
    ctx.reply.set(v.len());
    for x in &v {
        ctx.reply.bulk(x);
    }
}

/// SPOP's count: Redis's `getPositiveLongFromObjectOrReply`.
fn positive_count(b: &[u8]) -> Result<u64, CmdError> {
    match parse_i64(b) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(CmdError::reply(
            "ERR value is out of range, must be positive",
        )),
    }
}

/// Redis's SPOP with a count: the whole set when the count covers it; otherwise, when
/// fewer than four fifths would remain (`SPOP_MOVE_STRATEGY_MUL`), Redis rebuilds the set
/// from the remaining members, which recomputes its encoding.
const SPOP_MOVE_STRATEGY_MUL: u64 = 5;

fn spop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let count = match args.remaining() {
        0 => None,
        1 => Some(positive_count(&args.next_bytes()?)?),
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    let db = ctx.conn.db;
    let Some(mut m) = members::lookup_write(ctx, &key, RType::Set)? else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.set(0),
        }
        return Ok(());
    };
    let store = ctx.tx;
    let Some(count) = count else {
        let got = members::sample_distinct(store, db, &key, &m, 1)?;
        let mut w = Writes::new();
        if let Some((x, _)) = got.first() {
            w.delete_member(db, &key, &members::record(db, &key, &m, x));
            m.size -= 1;
            members::put_meta(&mut w, db, &key, &m);
            store.apply(w)?;
            notify_removed(ctx, "spop", &key, m.size);
            // The member drawn, not the draw (Redis 7.0's spopCommand).
            ctx.effects
                .rewrite(crate::effects::argv([&b"SREM"[..], &key, x]));
        }
        ctx.reply.opt_bulk(got.first().map(|(x, _)| &x[..]));
        return Ok(());
    };
    if count == 0 {
        ctx.reply.set(0);
        return Ok(());
    }
    let mut w = Writes::new();
    if count >= m.size {
        let all: Vec<Vec<u8>> = members::load(store, db, &key, &m)?
            .into_iter()
            .map(|(x, _)| x)
            .collect();
        w.meta(db, &key, None);
        store.apply(w)?;
        notify_removed(ctx, "spop", &key, 0);
        // The whole set: its deletion, DEL whatever `lazyfree-*` says (as Redis 7.0).
        ctx.effects
            .rewrite(crate::effects::argv([&b"DEL"[..], &key]));
        reply_set(ctx, all);
        return Ok(());
    }
    let popped: Vec<Vec<u8>> = if count * SPOP_MOVE_STRATEGY_MUL > m.size {
        // Redis keeps the remaining members in a rebuilt set: choose those.
        let all = members::load(store, db, &key, &m)?;
        let keep = members::sample_distinct(store, db, &key, &m, (m.size - count) as usize)?;
        let kept: BTreeSet<&[u8]> = keep.iter().map(|(x, _)| &x[..]).collect();
        let rebuilt: Vec<Vec<u8>> = keep.iter().map(|(x, _)| x.clone()).collect();
        let fresh = fresh_set(ctx, &rebuilt);
        // The encoding is decided again; the count of deleted members carries on.
        let dead = m.dead_members();
        m.value = fresh.value;
        m.set_dead_members(dead);
        all.into_iter()
            .map(|(x, _)| x)
            .filter(|x| !kept.contains(&x[..]))
            .collect()
    } else {
        members::sample_distinct(store, db, &key, &m, count as usize)?
            .into_iter()
            .map(|(x, _)| x)
            .collect()
    };
    for x in &popped {
        w.delete_member(db, &key, &members::record(db, &key, &m, x));
    }
    m.size -= popped.len() as u64;
    members::put_meta(&mut w, db, &key, &m);
    store.apply(w)?;
    notify_removed(ctx, "spop", &key, m.size);
    // One SREM per member, in the order drawn, instead of the command (Redis 7.0's
    // spopWithCountCommand; the group is then wrapped in MULTI/EXEC).
    ctx.effects.prevent();
    let sdb = ctx.conn.selected;
    for x in &popped {
        ctx.effects
            .also(sdb, crate::effects::argv([&b"SREM"[..], &key, x]));
    }
    // Redis replies the popped members in the order it drew them: random.
    ctx.reply.set(popped.len());
    for x in &popped {
        ctx.reply.bulk(x);
    }
    Ok(())
}

fn srandmember(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let db = ctx.conn.db;
    let count = match args.remaining() {
        0 => None,
        1 => Some(members::parse_count(&args.next_bytes()?)?),
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    let m = lookup_typed(ctx, &key, RType::Set)?;
    let store = ctx.tx;
    let Some(count) = count else {
        let got = match m {
            Some(m) => members::sample_distinct(store, db, &key, &m, 1)?,
            None => Vec::new(),
        };
        ctx.reply.opt_bulk(got.first().map(|(x, _)| &x[..]));
        return Ok(());
    };
    let Some(m) = m.filter(|_| count != 0) else {
        ctx.reply.array(0);
        return Ok(());
    };
    let n = count.unsigned_abs();
    if count < 0 {
        ctx.reply.array(n as usize);
        let reply = &mut *ctx.reply;
        members::sample_repeating(store, db, &key, &m, n, |x, _| reply.bulk(x))?;
        return Ok(());
    }
    let mut picked: Vec<Vec<u8>> = if n >= m.size {
        let mut all: Vec<Vec<u8>> = members::load(store, db, &key, &m)?
            .into_iter()
            .map(|(x, _)| x)
            .collect();
        if !members::is_hashtable(&m) {
            members::sort_intset(&mut all);
        }
        all
    } else {
        members::sample_distinct(store, db, &key, &m, n as usize)?
            .into_iter()
            .map(|(x, _)| x)
            .collect()
    };
    ctx.reply.array(picked.len());
    for x in picked.drain(..) {
        ctx.reply.bulk(&x);
    }
    Ok(())
}

fn smove(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let src = args.next_bytes()?;
    let dst = args.next_bytes()?;
    let item = args.next_bytes()?;
    let db = ctx.conn.db;
    let store = ctx.tx;
    let src_m = store.get(db, &src)?;
    let dst_m = store.get(db, &dst)?;
    let Some(mut src_m) = src_m else {
        ctx.reply.int(0);
        return Ok(());
    };
    if src_m.rtype != RType::Set || dst_m.as_ref().is_some_and(|m| m.rtype != RType::Set) {
        return Err(CmdError::reply(ERR_WRONGTYPE));
    }
    let src_rec = members::record(db, &src, &src_m, &item);
    let in_src = store.get_member(&src_rec)?.is_some();
    if src == dst || !in_src {
        ctx.reply.int(i64::from(in_src));
        return Ok(());
    }
    let mut w = Writes::new();
    w.delete_member(db, &src, &src_rec);
    src_m.size -= 1;
    members::put_meta(&mut w, db, &src, &src_m);
    let mut dst_m = match dst_m {
        Some(m) => m,
        None => members::create(ctx, RType::Set),
    };
    let dst_rec = members::record(db, &dst, &dst_m, &item);
    let in_dst = dst_m.size > 0 && store.get_member(&dst_rec)?.is_some();
    if !in_dst {
        w.put_member(db, &dst, &dst_rec, b"");
        dst_m.size += 1;
        convert_after_add(ctx, &mut dst_m, &[&item]);
        w.meta(db, &dst, Some(&dst_m));
    }
    store.apply(w)?;
    notify_removed(ctx, "srem", &src, src_m.size);
    if !in_dst {
        notify(ctx, Class::Set, "sadd", db, &dst);
    }
    ctx.reply.int(1);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

impl Op {
    /// The event of the STORE form.
    fn store_event(self) -> &'static str {
        match self {
            Op::Inter => "sinterstore",
            Op::Union => "sunionstore",
            Op::Diff => "sdiffstore",
        }
    }
}

/// The events of members removed from set `key` (`event`), and of the key's deletion when
/// `left` members remain.
fn notify_removed(ctx: &Ctx<'_>, event: &str, key: &[u8], left: u64) {
    notify(ctx, Class::Set, event, ctx.conn.db, key);
    if left == 0 {
        notify(ctx, Class::Generic, "del", ctx.conn.db, key);
    }
}

/// The live sets at `keys` (`None`: absent), every key type-checked first, as Redis does.
fn lookup_sets(ctx: &Ctx<'_>, keys: &[Bytes]) -> Result<Vec<Option<Meta>>, CmdError> {
    keys.iter()
        .map(|k| lookup_typed(ctx, k, RType::Set))
        .collect()
}

/// Members are checked against other sets in batches of this many point reads.
const PROBE_BATCH: usize = 256;

/// The members of the intersection of `sets` (all present), up to `limit` (0: all): the
/// smallest set's members, probed in the others.
fn intersect(
    ctx: &Ctx<'_>,
    keys: &[Bytes],
    sets: &[Meta],
    limit: usize,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let db = ctx.conn.db;
    let store = ctx.tx;
    let mut order: Vec<usize> = (0..sets.len()).collect();
    order.sort_by_key(|&i| sets[i].size);
    let (first, others) = (order[0], &order[1..]);
    let mut out = Vec::new();
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(PROBE_BATCH);
    let mut err = None;
    let done = |out: &Vec<Vec<u8>>| limit != 0 && out.len() >= limit;
    let probe = |batch: &mut Vec<Vec<u8>>, out: &mut Vec<Vec<u8>>| -> Result<(), CmdError> {
        let mut alive = vec![true; batch.len()];
        for &o in others {
            let refs: Vec<&[u8]> = batch.iter().map(|x| &x[..]).collect();
            let found = members::exist(store, db, &keys[o], &sets[o], &refs)?;
            for (a, f) in alive.iter_mut().zip(&found) {
                *a &= f.is_some();
            }
        }
        for (x, a) in batch.drain(..).zip(alive) {
            if a && !done(out) {
                out.push(x);
            }
        }
        Ok(())
    };
    members::for_each(store, db, &keys[first], &sets[first], |x, _| {
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

/// The members of `op` over the sets at `keys`.
fn combine(ctx: &Ctx<'_>, keys: &[Bytes], op: Op) -> Result<Vec<Vec<u8>>, CmdError> {
    let sets = lookup_sets(ctx, keys)?;
    let db = ctx.conn.db;
    let store = ctx.tx;
    match op {
        Op::Inter => {
            if sets.iter().any(Option::is_none) {
                return Ok(Vec::new());
            }
            let sets: Vec<Meta> = sets.into_iter().flatten().collect();
            intersect(ctx, keys, &sets, 0)
        }
        Op::Union => {
            let mut all: BTreeSet<Vec<u8>> = BTreeSet::new();
            for (k, m) in keys.iter().zip(&sets) {
                if let Some(m) = m {
                    members::for_each(store, db, k, m, |x, _| {
                        if !all.contains(x) {
                            all.insert(x.to_vec());
                        }
                        true
                    })?;
                }
            }
            Ok(all.into_iter().collect())
        }
        Op::Diff => {
            let Some(first) = &sets[0] else {
                return Ok(Vec::new());
            };
            let mut left: Vec<Vec<u8>> = members::load(store, db, &keys[0], first)?
                .into_iter()
                .map(|(x, _)| x)
                .collect();
            for (k, m) in keys.iter().zip(&sets).skip(1) {
                let Some(m) = m else { continue };
                let mut keep = Vec::with_capacity(left.len());
                for chunk in left.chunks(PROBE_BATCH) {
                    let refs: Vec<&[u8]> = chunk.iter().map(|x| &x[..]).collect();
                    let found = members::exist(store, db, k, m, &refs)?;
                    for (x, f) in chunk.iter().zip(found) {
                        if f.is_none() {
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
    }
}

fn read_op(ctx: &mut Ctx<'_>, args: &mut Args, op: Op) -> CmdResult {
    let keys = args.rest().to_vec();
    let v = combine(ctx, &keys, op)?;
    reply_set(ctx, v);
    Ok(())
}

fn sinter(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    read_op(ctx, args, Op::Inter)
}

fn sunion(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    read_op(ctx, args, Op::Union)
}

fn sdiff(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    read_op(ctx, args, Op::Diff)
}

/// The STORE forms: the result replaces `dst` whatever it held (a new incarnation without a
/// TTL), or deletes it when empty. Replies the result's size.
fn store_op(ctx: &mut Ctx<'_>, args: &mut Args, op: Op) -> CmdResult {
    let dst = args.next_bytes()?;
    let keys = args.rest().to_vec();
    let db = ctx.conn.db;
    let mut all_keys = keys.clone();
    all_keys.push(dst.clone());
    let v = combine(ctx, &keys, op)?;
    let store = ctx.tx;
    let mut w = Writes::new();
    let event = if v.is_empty() {
        store
            .get(db, &dst)?
            .map(|_| w.meta(db, &dst, None))
            .map(|_| (Class::Generic, "del"))
    } else {
        let m = fresh_set(ctx, &v);
        for x in &v {
            w.put_member(db, &dst, &members::record(db, &dst, &m, x), b"");
        }
        w.meta(db, &dst, Some(&m));
        Some((Class::Set, op.store_event()))
    };
    store.apply(w)?;
    if let Some((class, event)) = event {
        notify(ctx, class, event, db, &dst);
    }
    ctx.reply.int(v.len() as i64);
    Ok(())
}

fn sinterstore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    store_op(ctx, args, Op::Inter)
}

fn sunionstore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    store_op(ctx, args, Op::Union)
}

fn sdiffstore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    store_op(ctx, args, Op::Diff)
}

fn sintercard(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let numkeys = parse_i64(&args.next_bytes()?)
        .filter(|&n| n >= 1)
        .ok_or_else(|| CmdError::reply("ERR numkeys should be greater than 0"))?;
    if numkeys as u64 > args.remaining() as u64 {
        return Err(CmdError::reply(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let rest = args.rest().to_vec();
    let (keys, opts) = rest.split_at(numkeys as usize);
    let mut limit = 0usize;
    let mut i = 0;
    while i < opts.len() {
        if opts[i].eq_ignore_ascii_case(b"LIMIT") && i + 1 < opts.len() {
            let n = parse_i64(&opts[i + 1])
                .filter(|&n| n >= 0)
                .ok_or_else(|| CmdError::reply("ERR LIMIT can't be negative"))?;
            limit = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    let sets = lookup_sets(ctx, keys)?;
    let n = if sets.iter().any(Option::is_none) {
        0
    } else {
        let sets: Vec<Meta> = sets.into_iter().flatten().collect();
        intersect(ctx, keys, &sets, limit)?.len()
    };
    ctx.reply.int(n as i64);
    Ok(())
}

fn sscan(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    members::scan(ctx, args, RType::Set)
}
