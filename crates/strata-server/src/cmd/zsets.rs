//! Sorted-set commands (Redis's t_zset.c) over the typed handle of `zset.rs`: ZADD, ZINCRBY,
//! ZREM, ZCARD, ZCOUNT, ZLEXCOUNT, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, the ZRANGE family
//! (ZRANGE, ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX,
//! ZRANGESTORE), ZPOPMIN, ZPOPMAX, ZMPOP, ZREMRANGEBYRANK/SCORE/LEX, ZSCAN. The multi-key
//! set operations and ZRANDMEMBER are in `zsetops.rs`, the blocking pops (BZPOPMIN,
//! BZPOPMAX, BZMPOP) in `zblocking.rs`.
//!
//! The sorted set itself is the typed handle of `zset.rs` over the command's transaction
//! (under its keys' stripes; on a worker they are held for it): this module parses the
//! arguments, replies and sends the keyspace events.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::{cmd, zblocking, zsetops, Args, CmdError, CmdResult, Ctx};
use crate::collection;
use crate::collection::Collection;
use crate::notify::Class;
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::store::{Meta, RType, Tx};
use crate::zset::{
    self, AddFlags, Entry, Lex, LexRange, Limits, Loc, Range, Replaced, ScoreRange, ZSet,
};
use bytes::Bytes;

pub static COMMANDS: &[super::Entry] = &[
    cmd("zadd", zadd),
    cmd("zincrby", zincrby),
    cmd("zrem", zrem),
    cmd("zcard", zcard),
    cmd("zcount", zcount),
    cmd("zlexcount", zlexcount),
    cmd("zscore", zscore),
    cmd("zmscore", zmscore),
    cmd("zrank", zrank),
    cmd("zrevrank", zrevrank),
    cmd("zrange", zrange),
    cmd("zrevrange", zrevrange),
    cmd("zrangebyscore", zrangebyscore),
    cmd("zrevrangebyscore", zrevrangebyscore),
    cmd("zrangebylex", zrangebylex),
    cmd("zrevrangebylex", zrevrangebylex),
    cmd("zrangestore", zrangestore),
    cmd("zpopmin", zpopmin),
    cmd("zpopmax", zpopmax),
    cmd("zmpop", zmpop),
    cmd("bzpopmin", zblocking::bzpopmin),
    cmd("bzpopmax", zblocking::bzpopmax),
    cmd("bzmpop", zblocking::bzmpop),
    cmd("zremrangebyrank", zremrangebyrank),
    cmd("zremrangebyscore", zremrangebyscore),
    cmd("zremrangebylex", zremrangebylex),
    cmd("zscan", zscan),
    cmd("zunion", zsetops::zunion),
    cmd("zinter", zsetops::zinter),
    cmd("zdiff", zsetops::zdiff),
    cmd("zunionstore", zsetops::zunionstore),
    cmd("zinterstore", zsetops::zinterstore),
    cmd("zdiffstore", zsetops::zdiffstore),
    cmd("zintercard", zsetops::zintercard),
    cmd("zrandmember", zsetops::zrandmember),
];

pub(super) const ERR_NOT_FLOAT_SCORE: &str = "ERR value is not a valid float";
const ERR_RANGE_FLOAT: &str = "ERR min or max is not a float";
const ERR_RANGE_LEX: &str = "ERR min or max not valid string range item";

/// The listpack limits in force (`zset-max-listpack-entries` / `-value`).
pub(super) fn limits(ctx: &Ctx<'_>) -> Limits {
    Limits::of(&ctx.shared.limits)
}

/// The metadata of the sorted set at `key` (`read`: counting a keyspace hit or miss, as
/// Redis's `lookupKeyRead`; else first rewritten if thinned out by deletes); `WRONGTYPE`
/// for other types. For the commands that read records through [`loc`] (ZUNION and its
/// kin, GEO); the others open a [`ZSet`].
pub(super) fn lookup(ctx: &Ctx<'_>, key: &[u8], read: bool) -> Result<Option<Meta>, CmdError> {
    let (tx, db) = (ctx.tx, ctx.conn.db);
    Ok(if read {
        collection::lookup_read(tx, db, key, RType::ZSet)?
    } else {
        collection::lookup_write(tx, db, key, RType::ZSet)?
    })
}

pub(super) fn loc<'a>(db: u8, key: &'a [u8], m: &Meta) -> Loc<'a> {
    Loc {
        db,
        key,
        version: m.version,
    }
}

fn resp3(ctx: &Ctx<'_>) -> bool {
    ctx.reply.proto == Proto::Resp3
}

/// Members, with their scores when `withscores` (flat in RESP2, pairs in RESP3).
pub(super) fn reply_entries(ctx: &mut Ctx<'_>, entries: &[Entry], withscores: bool) {
    let r3 = resp3(ctx);
    ctx.reply.array(if withscores && !r3 {
        entries.len() * 2
    } else {
        entries.len()
    });
    for (m, s) in entries {
        if withscores && r3 {
            ctx.reply.array(2);
        }
        ctx.reply.bulk(m);
        if withscores {
            ctx.reply.double(*s);
        }
    }
}

/// Writes `entries` (sorted, distinct members) as a new incarnation of `dst`, or deletes it
/// when there are none (the *STORE commands); replies with their number. Small results get
/// the listpack encoding, as Redis's `zsetConvertToListpackIfNeeded`.
/// `event` is the keyspace event of a non-empty result (the command's name: `zunionstore`,
/// `zrangestore`, ...); an existing destination an empty result deletes gets `del`.
pub(super) fn store_result(
    ctx: &mut Ctx<'_>,
    dst: &[u8],
    entries: &[Entry],
    event: &str,
) -> CmdResult {
    let db = ctx.conn.db;
    let tx = ctx.tx;
    match zset::replace(tx, db, dst, entries, limits(ctx))? {
        Replaced::Written => tx.notify.event(Class::ZSet, event, db, dst),
        Replaced::Deleted => tx.notify.event(Class::Generic, "del", db, dst),
        Replaced::Nothing => {}
    }
    ctx.reply.int(entries.len() as i64);
    Ok(())
}

// ---- ZADD, ZINCRBY ---------------------------------------------------------------------

pub(super) fn zadd(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zadd_generic(ctx, args, false)
}

fn zincrby(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zadd_generic(ctx, args, true)
}

/// Redis's `zaddGenericCommand` (ZINCRBY is ZADD with INCR, its arguments going through the
/// same option loop).
fn zadd_generic(ctx: &mut Ctx<'_>, args: &mut Args, mut incr: bool) -> CmdResult {
    let key = args.next_bytes()?;
    let rest: Vec<Bytes> = args.rest().to_vec();
    let (mut nx, mut xx, mut ch, mut gt, mut lt) = (false, false, false, false, false);
    let mut i = 0;
    while i < rest.len() {
        match rest[i].to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"CH" => ch = true,
            b"INCR" => incr = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => break,
        }
        i += 1;
    }
    let elems = rest.len() - i;
    if elems == 0 || !elems.is_multiple_of(2) {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    if nx && xx {
        return Err(CmdError::reply(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(CmdError::reply(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && elems > 2 {
        return Err(CmdError::reply(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(elems / 2);
    for p in rest[i..].chunks(2) {
        let s = zset::parse_double(&p[0]).ok_or_else(|| CmdError::reply(ERR_NOT_FLOAT_SCORE))?;
        pairs.push((s, p[1].clone()));
    }
    let flags = AddFlags {
        nx,
        xx,
        gt,
        lt,
        incr,
    };
    let db = ctx.conn.db;
    let lim = limits(ctx);
    let tx = ctx.tx;
    let done = match ZSet::open_write(tx, db, &key)? {
        Some(mut z) => z.add(&pairs, flags, lim)?,
        // XX adds nothing: no new key either.
        None if xx => zset::Added::default(),
        None => ZSet::open_or_create(tx, db, &key)?.add(&pairs, flags, lim)?,
    };
    if done.changed() {
        let event = if incr { "zincr" } else { "zadd" };
        tx.notify.event(Class::ZSet, event, db, &key);
    }
    if incr {
        if done.processed > 0 {
            ctx.reply.double(done.score);
        } else {
            ctx.reply.null();
        }
    } else {
        let n = if ch {
            done.added + done.updated
        } else {
            done.added
        };
        ctx.reply.int(n as i64);
    }
    Ok(())
}

// ---- ZREM, reads -----------------------------------------------------------------------

fn zrem(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let members = args.rest();
    let (tx, db) = (ctx.tx, ctx.conn.db);
    let removed = match ZSet::open_write(tx, db, &key)? {
        Some(mut z) => {
            let n = z.remove(members)?;
            if n > 0 {
                notify_removed(tx, "zrem", db, &key, z.len());
            }
            n
        }
        None => 0,
    };
    ctx.reply.int(removed as i64);
    Ok(())
}

fn zcard(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let n = ZSet::open(ctx.tx, ctx.conn.db, &key)?.map_or(0, |z| z.len());
    ctx.reply.int(n as i64);
    Ok(())
}

fn zscore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let member = args.next_bytes()?;
    let s = match ZSet::open(ctx.tx, ctx.conn.db, &key)? {
        Some(z) => z.score(&member)?,
        None => None,
    };
    match s {
        Some(s) => ctx.reply.double(s),
        None => ctx.reply.null(),
    }
    Ok(())
}

fn zmscore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let ms: Vec<&[u8]> = args.rest().iter().map(|m| &m[..]).collect();
    let scores = match ZSet::open(ctx.tx, ctx.conn.db, &key)? {
        Some(z) => z.scores(&ms)?,
        None => vec![None; ms.len()],
    };
    ctx.reply.array(scores.len());
    for s in scores {
        match s {
            Some(s) => ctx.reply.double(s),
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

fn zrank(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    rank_generic(ctx, args, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    rank_generic(ctx, args, true)
}

fn rank_generic(ctx: &mut Ctx<'_>, args: &mut Args, reverse: bool) -> CmdResult {
    let key = args.next_bytes()?;
    let member = args.next_bytes()?;
    let rank = match ZSet::open(ctx.tx, ctx.conn.db, &key)? {
        Some(z) => z.rank(&member, reverse)?,
        None => None,
    };
    match rank {
        Some(r) => ctx.reply.int(r as i64),
        None => ctx.reply.null(),
    }
    Ok(())
}

/// Redis's `zslParseRange`.
fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
    let err = || CmdError::reply(ERR_RANGE_FLOAT);
    let (min, minex) = zset::parse_score_bound(min).ok_or_else(err)?;
    let (max, maxex) = zset::parse_score_bound(max).ok_or_else(err)?;
    Ok(ScoreRange {
        min,
        minex,
        max,
        maxex,
    })
}

/// Redis's `zslParseLexRange`.
fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, CmdError> {
    let err = || CmdError::reply(ERR_RANGE_LEX);
    Ok(LexRange {
        min: Lex::parse(min).ok_or_else(err)?,
        max: Lex::parse(max).ok_or_else(err)?,
    })
}

fn zcount(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    count_generic(ctx, args, false)
}

fn zlexcount(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    count_generic(ctx, args, true)
}

/// ZCOUNT (`lex` false: a score range) and ZLEXCOUNT (a lex range).
fn count_generic(ctx: &mut Ctx<'_>, args: &mut Args, lex: bool) -> CmdResult {
    let key = args.next_bytes()?;
    let (min, max) = (args.next_bytes()?, args.next_bytes()?);
    let range = if lex {
        Range::Lex(parse_lex_range(&min, &max)?)
    } else {
        Range::Score(parse_score_range(&min, &max)?)
    };
    let n = match ZSet::open(ctx.tx, ctx.conn.db, &key)? {
        Some(z) => z.range(&range, false, 0, -1)?.len(),
        None => 0,
    };
    ctx.reply.int(n as i64);
    Ok(())
}

// ---- the ZRANGE family -----------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

/// Redis's `zrangeGenericCommand`: arguments from `key` on (`dst` for ZRANGESTORE).
fn zrange_generic(
    ctx: &mut Ctx<'_>,
    args: &mut Args,
    dst: Option<Bytes>,
    mut rtype: RangeType,
    mut dir: Direction,
) -> CmdResult {
    let store_mode = dst.is_some();
    let key = args.next_bytes()?;
    let mut min = args.next_bytes()?;
    let mut max = args.next_bytes()?;
    let opts: Vec<Bytes> = args.rest().to_vec();
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = 0;
    while j < opts.len() {
        let left = opts.len() - j - 1;
        let o = opts[j].to_ascii_uppercase();
        match o.as_slice() {
            b"WITHSCORES" if !store_mode => withscores = true,
            b"LIMIT" if left >= 2 => {
                let n = |b: &Bytes| {
                    crate::protocol::parse::parse_i64(b).ok_or_else(|| CmdError::reply(ERR_NOT_INT))
                };
                offset = n(&opts[j + 1])?;
                limit = n(&opts[j + 2])?;
                j += 2;
            }
            b"REV" if dir == Direction::Auto => dir = Direction::Reverse,
            b"BYLEX" if rtype == RangeType::Auto => rtype = RangeType::Lex,
            b"BYSCORE" if rtype == RangeType::Auto => rtype = RangeType::Score,
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
        j += 1;
    }
    let reverse = dir == Direction::Reverse;
    if rtype == RangeType::Auto {
        rtype = RangeType::Rank;
    }
    if limit != -1 && rtype == RangeType::Rank {
        return Err(CmdError::reply(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && rtype == RangeType::Lex {
        return Err(CmdError::reply(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    if reverse && rtype != RangeType::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let range = match rtype {
        RangeType::Score => Range::Score(parse_score_range(&min, &max)?),
        RangeType::Lex => Range::Lex(parse_lex_range(&min, &max)?),
        _ => {
            let n = |b: &Bytes| {
                crate::protocol::parse::parse_i64(b).ok_or_else(|| CmdError::reply(ERR_NOT_INT))
            };
            Range::Rank(n(&min)?, n(&max)?)
        }
    };
    let entries = match ZSet::open(ctx.tx, ctx.conn.db, &key)? {
        Some(z) => z.range(&range, reverse, offset, limit)?,
        None => Vec::new(),
    };
    match dst {
        Some(d) => store_result(ctx, &d, &entries, "zrangestore"),
        None => {
            reply_entries(ctx, &entries, withscores);
            Ok(())
        }
    }
}

fn zrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zrange_generic(ctx, args, None, RangeType::Auto, Direction::Auto)
}

fn zrevrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zrange_generic(ctx, args, None, RangeType::Rank, Direction::Reverse)
}

fn zrangebyscore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zrange_generic(ctx, args, None, RangeType::Score, Direction::Forward)
}

fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zrange_generic(ctx, args, None, RangeType::Score, Direction::Reverse)
}

fn zrangebylex(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zrange_generic(ctx, args, None, RangeType::Lex, Direction::Forward)
}

fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zrange_generic(ctx, args, None, RangeType::Lex, Direction::Reverse)
}

fn zrangestore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let dst = args.next_bytes()?;
    zrange_generic(ctx, args, Some(dst), RangeType::Auto, Direction::Auto)
}

// ---- removal by range ------------------------------------------------------------------

fn zremrange_generic(ctx: &mut Ctx<'_>, args: &mut Args, rtype: RangeType) -> CmdResult {
    let key = args.next_bytes()?;
    let (min, max) = (args.next_bytes()?, args.next_bytes()?);
    let range = match rtype {
        RangeType::Score => Range::Score(parse_score_range(&min, &max)?),
        RangeType::Lex => Range::Lex(parse_lex_range(&min, &max)?),
        _ => {
            let n = |b: &Bytes| {
                crate::protocol::parse::parse_i64(b).ok_or_else(|| CmdError::reply(ERR_NOT_INT))
            };
            Range::Rank(n(&min)?, n(&max)?)
        }
    };
    let (tx, db) = (ctx.tx, ctx.conn.db);
    let Some(mut z) = ZSet::open_write(tx, db, &key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let gone = z.remove_range(&range)?;
    if gone > 0 {
        let event = match rtype {
            RangeType::Score => "zremrangebyscore",
            RangeType::Lex => "zremrangebylex",
            _ => "zremrangebyrank",
        };
        notify_removed(tx, event, db, &key, z.len());
    }
    ctx.reply.int(gone as i64);
    Ok(())
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zremrange_generic(ctx, args, RangeType::Rank)
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zremrange_generic(ctx, args, RangeType::Score)
}

fn zremrangebylex(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zremrange_generic(ctx, args, RangeType::Lex)
}

// ---- pops ------------------------------------------------------------------------------

/// Pops up to `count` members with the lowest (`max`: highest) scores from the sorted set
/// at `key` of database `db`, deleting it when it empties, in one atomic write; `None` if
/// there is no such key, `WRONGTYPE` if it holds another type. The caller holds the key's
/// stripe (or runs on its worker). The blocking pops (BZPOPMIN, BZPOPMAX, BZMPOP) call this
/// once a key is ready.
pub fn pop(
    store: &Tx<'_>,
    db: u8,
    key: &[u8],
    max: bool,
    count: u64,
) -> Result<Option<Vec<Entry>>, CmdError> {
    let Some(mut z) = ZSet::open_write(store, db, key)? else {
        return Ok(None);
    };
    let out = z.pop(max, count)?;
    if !out.is_empty() {
        let event = if max { "zpopmax" } else { "zpopmin" };
        notify_removed(store, event, db, key, z.len());
    }
    Ok(Some(out))
}

/// The events of members removed from sorted set `key` (`event`), and of the key's deletion
/// when `left` members remain.
fn notify_removed(store: &Tx<'_>, event: &str, db: u8, key: &[u8], left: u64) {
    store.notify.event(Class::ZSet, event, db, key);
    if left == 0 {
        store.notify.event(Class::Generic, "del", db, key);
    }
}

fn zpopmin(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zpop_generic(ctx, args, false)
}

fn zpopmax(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    zpop_generic(ctx, args, true)
}

fn zpop_generic(ctx: &mut Ctx<'_>, args: &mut Args, max: bool) -> CmdResult {
    let key = args.next_bytes()?;
    if args.remaining() > 1 {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    let count = if args.is_done() {
        None
    } else {
        let b = args.next_bytes()?;
        let n = crate::protocol::parse::parse_i64(&b)
            .filter(|n| *n >= 0)
            .ok_or_else(|| CmdError::reply("ERR value is out of range, must be positive"))?;
        Some(n as u64)
    };
    let db = ctx.conn.db;
    let popped = if count == Some(0) {
        // Still WRONGTYPE for another type.
        ZSet::open_write(ctx.tx, db, &key)?;
        Vec::new()
    } else {
        pop(ctx.tx, db, &key, max, count.unwrap_or(1))?.unwrap_or_default()
    };
    if count.is_some() && resp3(ctx) {
        reply_entries(ctx, &popped, true);
    } else {
        ctx.reply.array(popped.len() * 2);
        for (m, s) in &popped {
            ctx.reply.bulk(m);
            ctx.reply.double(*s);
        }
    }
    Ok(())
}

/// A positive count or numkeys (`getRangeLongFromObjectOrReply(1, LONG_MAX)` with `msg`).
fn positive(b: &[u8], msg: &str) -> Result<u64, CmdError> {
    crate::protocol::parse::parse_i64(b)
        .filter(|n| *n >= 1)
        .map(|n| n as u64)
        .ok_or_else(|| CmdError::reply(format!("ERR {msg}")))
}

/// ZMPOP's and BZMPOP's arguments from numkeys on (Redis's `zmpopGenericCommand` order):
/// the keys, MAX (else MIN) and the count.
pub(super) fn parse_mpop(all: &[Bytes]) -> Result<(&[Bytes], bool, u64), CmdError> {
    let numkeys = positive(&all[0], "numkeys should be greater than 0")?;
    let where_idx = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(1))
        .filter(|&i| i < all.len())
        .ok_or_else(|| CmdError::reply(ERR_SYNTAX))?;
    let max = match all[where_idx].to_ascii_uppercase().as_slice() {
        b"MIN" => false,
        b"MAX" => true,
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < all.len() {
        if count.is_none() && all[j].eq_ignore_ascii_case(b"COUNT") && j + 1 < all.len() {
            count = Some(positive(&all[j + 1], "count should be greater than 0")?);
            j += 2;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    Ok((&all[1..where_idx], max, count.unwrap_or(1)))
}

/// Pops from the first of `keys` (locked) that exists: its key and members. `WRONGTYPE`
/// for a key of another type met before it.
pub(super) fn pop_first(
    store: &Tx<'_>,
    db: u8,
    keys: &[Bytes],
    max: bool,
    count: u64,
) -> Result<Option<(Bytes, Vec<Entry>)>, CmdError> {
    for k in keys {
        if let Some(popped) = pop(store, db, k, max, count)? {
            return Ok(Some((k.clone(), popped)));
        }
    }
    Ok(None)
}

/// The reply of ZMPOP and BZMPOP, `[key, [[member, score], ...]]`; with `!nested` that of
/// BZPOPMIN and BZPOPMAX, `[key, member, score, ...]`.
pub(super) fn reply_popped(r: &mut ReplyBuf, key: &[u8], popped: &[Entry], nested: bool) {
    if nested {
        r.array(2);
        r.bulk(key);
        r.array(popped.len());
    } else {
        r.array(1 + popped.len() * 2);
        r.bulk(key);
    }
    for (m, s) in popped {
        if nested {
            r.array(2);
        }
        r.bulk(m);
        r.double(*s);
    }
}

fn zmpop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let all: Vec<Bytes> = args.rest().to_vec();
    let (keys, max, count) = parse_mpop(&all)?;
    let db = ctx.conn.db;
    let store = ctx.tx;
    match pop_first(store, db, keys, max, count)? {
        Some((k, popped)) => {
            let effect = super::zblocking::zpop_effect(&k, max, popped.len(), true);
            ctx.effects.rewrite(effect);
            reply_popped(ctx.reply, &k, &popped, true)
        }
        None => ctx.reply.null_array(),
    }
    Ok(())
}

// ---- ZSCAN -----------------------------------------------------------------------------

/// ZSCAN. A listpack-encoded set is returned whole with cursor 0, as Redis does; a larger
/// one in pages of COUNT members in member order, the cursor naming the next member
/// (`cursor.rs`), so that members present for the whole iteration are returned once.
fn zscan(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let cursor = crate::cursor::parse(&args.next_bytes()?)
        .ok_or_else(|| CmdError::reply("ERR invalid cursor"))?;
    let db = ctx.conn.db;
    let Some(z) = ZSet::open(ctx.tx, db, &key)? else {
        ctx.reply.array(2);
        ctx.reply.bulk(b"0");
        ctx.reply.array(0);
        return Ok(());
    };
    let (count, pattern) = super::members::scan_options(args)?;
    let (entries, next) = if zset::is_skiplist(z.meta()) {
        // Table entries are named by the set's incarnation, as HSCAN's and SSCAN's.
        let owner = super::members::scan_owner(db, &key, z.meta());
        let (_, bound) = ctx.shared.scan_bounds.resolve_for(&owner, cursor);
        let (entries, next) = z.members_from(&bound, count)?;
        let next = match (entries.last(), next) {
            (Some((last, _)), Some(n)) => {
                let (_, b) = crate::cursor::between((0, last), (0, &n));
                let slot = crate::keys::hash_slot(&key);
                ctx.shared.scan_bounds.cursor_for(owner, slot, b)
            }
            _ => 0,
        };
        (entries, next)
    } else {
        (z.all()?, 0)
    };
    let out: Vec<&Entry> = entries
        .iter()
        .filter(|(e, _)| {
            pattern
                .as_ref()
                .is_none_or(|p| crate::glob::matches(p, e, false))
        })
        .collect();
    ctx.reply.array(2);
    ctx.reply.bulk(next.to_string().as_bytes());
    ctx.reply.array(out.len() * 2);
    for (e, s) in out {
        ctx.reply.bulk(e);
        ctx.reply
            .bulk(crate::protocol::reply::format_double(*s).as_bytes());
    }
    Ok(())
}
