//! Sorted-set commands over several keys (Redis's `zunionInterDiffGenericCommand`): ZUNION,
//! ZINTER, ZDIFF, their *STORE forms and ZINTERCARD; and ZRANDMEMBER. Inputs may be sets
//! (members of score 1), as in Redis.
//!
//! Their keys usually live in several shards: they run on the connection's thread under the
//! stripes of all their keys (ZUNION, ZINTER, ZDIFF and ZINTERCARD have no table keys, so
//! the router keeps them inline; the *STORE forms are in `exec.rs`'s inline list), and the
//! *STORE forms write the destination with one `Writes`.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::zsets::{loc, reply_entries, store_result};
use super::{Args, CmdError, CmdResult, Ctx, ERR_WRONGTYPE};
use crate::collection::Collection;
use crate::protocol::reply::Proto;
use crate::store::{Meta, RType};
use crate::zset::{self, Aggregate, Entry, ZSet};
use bytes::Bytes;
use std::collections::HashMap;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

pub(super) fn zunion(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    setop(ctx, args, Op::Union, false, false, "zunion")
}

pub(super) fn zinter(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    setop(ctx, args, Op::Inter, false, false, "zinter")
}

pub(super) fn zdiff(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    setop(ctx, args, Op::Diff, false, false, "zdiff")
}

pub(super) fn zunionstore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    setop(ctx, args, Op::Union, true, false, "zunionstore")
}

pub(super) fn zinterstore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    setop(ctx, args, Op::Inter, true, false, "zinterstore")
}

pub(super) fn zdiffstore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    setop(ctx, args, Op::Diff, true, false, "zdiffstore")
}

pub(super) fn zintercard(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    setop(ctx, args, Op::Inter, false, true, "zintercard")
}

/// One input: its key, metadata (`None`: missing, an empty input) and weight.
struct Src {
    key: Bytes,
    meta: Option<Meta>,
    weight: f64,
}

impl Src {
    fn len(&self) -> u64 {
        self.meta.as_ref().map_or(0, |m| m.size)
    }
}

fn setop(
    ctx: &mut Ctx<'_>,
    args: &mut Args,
    op: Op,
    store_mode: bool,
    card_only: bool,
    name: &str,
) -> CmdResult {
    let dst = if store_mode {
        Some(args.next_bytes()?)
    } else {
        None
    };
    let numkeys = args.next_i64()?;
    if numkeys < 1 {
        return Err(CmdError::reply(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    if numkeys as u64 > args.remaining() as u64 {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    let rest: Vec<Bytes> = args.rest().to_vec();
    let n = numkeys as usize;
    let (keys, opts) = rest.split_at(n);
    let db = ctx.conn.db;
    let store = ctx.tx;
    let mut locked: Vec<Bytes> = keys.to_vec();
    locked.extend(dst.clone());
    let mut srcs = Vec::with_capacity(n);
    for k in keys {
        let meta = store.lookup_read(db, k)?;
        if let Some(m) = &meta {
            if m.rtype != RType::ZSet && m.rtype != RType::Set {
                return Err(CmdError::reply(ERR_WRONGTYPE));
            }
        }
        srcs.push(Src {
            key: k.clone(),
            meta,
            weight: 1.0,
        });
    }
    let (mut aggregate, mut withscores, mut limit) = (Aggregate::Sum, false, 0u64);
    let mut j = 0;
    while j < opts.len() {
        let remaining = opts.len() - j;
        let o = opts[j].to_ascii_uppercase();
        if op != Op::Diff && !card_only && remaining > n && o == b"WEIGHTS" {
            for (i, s) in srcs.iter_mut().enumerate() {
                s.weight = zset::parse_double(&opts[j + 1 + i])
                    .ok_or_else(|| CmdError::reply("ERR weight value is not a float"))?;
            }
            j += 1 + n;
        } else if op != Op::Diff && !card_only && remaining >= 2 && o == b"AGGREGATE" {
            aggregate = match opts[j + 1].to_ascii_uppercase().as_slice() {
                b"SUM" => Aggregate::Sum,
                b"MIN" => Aggregate::Min,
                b"MAX" => Aggregate::Max,
                _ => return Err(CmdError::reply(ERR_SYNTAX)),
            };
            j += 2;
        } else if !store_mode && !card_only && o == b"WITHSCORES" {
            withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && o == b"LIMIT" {
            limit = crate::protocol::parse::parse_i64(&opts[j + 1])
                .filter(|l| *l >= 0)
                .ok_or_else(|| CmdError::reply("ERR LIMIT can't be negative"))?
                as u64;
            j += 2;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    if op != Op::Diff {
        // Smallest first, as Redis (its qsort keeps equal sizes in order).
        srcs.sort_by_key(Src::len);
    }
    let mut out = match op {
        Op::Union => union(ctx, &srcs, aggregate)?,
        Op::Inter => inter(ctx, &srcs, aggregate)?,
        Op::Diff => diff(ctx, &srcs)?,
    };
    if card_only {
        let n = out.len() as u64;
        ctx.reply
            .int(if limit > 0 { n.min(limit) } else { n } as i64);
        return Ok(());
    }
    out.sort_by(zset::cmp_entries);
    match dst {
        Some(d) => store_result(ctx, &d, &out, name),
        None => {
            reply_entries(ctx, &out, withscores);
            Ok(())
        }
    }
}

/// Every member and score of input `s` (sets: score 1).
fn load(ctx: &Ctx<'_>, s: &Src) -> Result<Vec<Entry>, CmdError> {
    let Some(m) = &s.meta else {
        return Ok(Vec::new());
    };
    let z = loc(ctx.conn.db, &s.key, m);
    Ok(if m.rtype == RType::Set {
        zset::set_members(ctx.tx, z)?
    } else {
        zset::by_rank(ctx.tx, z, false, 0, u64::MAX)?
    })
}

/// Scores of `members` in input `s` (sets: 1 for members), in one batched read.
fn find(ctx: &Ctx<'_>, s: &Src, members: &[&[u8]]) -> Result<Vec<Option<f64>>, CmdError> {
    let Some(m) = &s.meta else {
        return Ok(vec![None; members.len()]);
    };
    let z = loc(ctx.conn.db, &s.key, m);
    Ok(if m.rtype == RType::Set {
        zset::set_contains(ctx.tx, z, members)?
            .into_iter()
            .map(|b| b.then_some(1.0))
            .collect()
    } else {
        zset::scores(ctx.tx, z, members)?
    })
}

fn weighted(w: f64, s: f64) -> f64 {
    let v = w * s;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

fn union(ctx: &Ctx<'_>, srcs: &[Src], aggregate: Aggregate) -> Result<Vec<Entry>, CmdError> {
    let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
    for s in srcs {
        for (m, score) in load(ctx, s)? {
            let v = weighted(s.weight, score);
            match acc.get_mut(&m) {
                Some(t) => aggregate.apply(t, v),
                None => {
                    acc.insert(m, v);
                }
            }
        }
    }
    Ok(acc.into_iter().collect())
}

fn inter(ctx: &Ctx<'_>, srcs: &[Src], aggregate: Aggregate) -> Result<Vec<Entry>, CmdError> {
    if srcs[0].len() == 0 {
        return Ok(Vec::new());
    }
    let mut cand: Vec<Entry> = load(ctx, &srcs[0])?
        .into_iter()
        .map(|(m, s)| {
            let v = weighted(srcs[0].weight, s);
            (m, v)
        })
        .collect();
    // Each candidate's score: the first input's weighted score (NaN → 0), aggregated with
    // the others' weighted scores in input order, as Redis.
    for s in &srcs[1..] {
        let members: Vec<&[u8]> = cand.iter().map(|(m, _)| &m[..]).collect();
        let found = find(ctx, s, &members)?;
        cand = cand
            .into_iter()
            .zip(found)
            .filter_map(|((m, mut t), f)| {
                let f = f?;
                aggregate.apply(&mut t, f * s.weight);
                Some((m, t))
            })
            .collect();
        if cand.is_empty() {
            break;
        }
    }
    Ok(cand)
}

fn diff(ctx: &Ctx<'_>, srcs: &[Src]) -> Result<Vec<Entry>, CmdError> {
    let mut cand = load(ctx, &srcs[0])?;
    for s in &srcs[1..] {
        if cand.is_empty() {
            break;
        }
        let members: Vec<&[u8]> = cand.iter().map(|(m, _)| &m[..]).collect();
        let found = find(ctx, s, &members)?;
        cand = cand
            .into_iter()
            .zip(found)
            .filter(|(_, f)| f.is_none())
            .map(|(e, _)| e)
            .collect();
    }
    Ok(cand)
}

// ---- ZRANDMEMBER -----------------------------------------------------------------------

pub(super) fn zrandmember(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let (tx, db) = (ctx.tx, ctx.conn.db);
    if args.is_done() {
        let Some(z) = ZSet::open(tx, db, &key)? else {
            ctx.reply.null();
            return Ok(());
        };
        let r = crate::random::next_u64() % z.len();
        let e = z.by_rank(false, r, 1)?;
        ctx.reply.bulk(e.first().map_or(&[][..], |(m, _)| &m[..]));
        return Ok(());
    }
    let c = args.next_bytes()?;
    let count = crate::protocol::parse::parse_i64(&c)
        .ok_or_else(|| CmdError::reply(super::args::ERR_NOT_INT))?;
    if count == i64::MIN {
        return Err(CmdError::reply(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let mut withscores = false;
    if !args.is_done() {
        if args.remaining() > 1 || !args.eat("WITHSCORES") {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        withscores = true;
        if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
            return Err(CmdError::reply("ERR value is out of range"));
        }
    }
    let Some(z) = ZSet::open(tx, db, &key)? else {
        ctx.reply.array(0);
        return Ok(());
    };
    if count == 0 {
        ctx.reply.array(0);
        return Ok(());
    }
    let all = z.all()?;
    let rng = crate::random::next_u64;
    // Picks, as indexes into `all`: with repeats for a negative count (written as they are
    // drawn: the count is the client's, up to 2^63), distinct ones otherwise.
    let n = if count < 0 {
        count.unsigned_abs()
    } else {
        (count as u64).min(all.len() as u64)
    };
    let r3 = ctx.reply.proto == Proto::Resp3;
    let len = usize::try_from(n).unwrap_or(usize::MAX);
    ctx.reply.array(if withscores && !r3 {
        len.saturating_mul(2)
    } else {
        len
    });
    let emit = |ctx: &mut Ctx<'_>, (e, s): &Entry| {
        if withscores && r3 {
            ctx.reply.array(2);
        }
        ctx.reply.bulk(e);
        if withscores {
            ctx.reply.double(*s);
        }
    };
    if count < 0 {
        for _ in 0..n {
            emit(ctx, &all[(rng() % all.len() as u64) as usize]);
        }
    } else if n == all.len() as u64 {
        // The whole set; Redis walks its listpack from the tail.
        for e in all.iter().rev() {
            emit(ctx, e);
        }
    } else {
        // A partial Fisher-Yates shuffle: `n` distinct members.
        let mut idx: Vec<usize> = (0..all.len()).collect();
        for i in 0..n as usize {
            let j = i + (rng() % (idx.len() - i) as u64) as usize;
            idx.swap(i, j);
            emit(ctx, &all[idx[i]]);
        }
    }
    Ok(())
}
