//! Set commands (Redis's t_set.c): arguments, replies, notifications and effects. The set
//! type itself (records, encodings, reads, writes and the multi-set operations through the
//! command's transaction) is `set.rs`.
//!
//! The multi-key commands (SMOVE, SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD)
//! may name keys of several shards: they then run on the connection's thread under the
//! stripe locks of all their keys (taken by the dispatcher), and their writes go
//! out as one `Writes`, atomic across shards.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::members::{self, Emit};
use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::collection::Collection;
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::set::{self, Moved, Set};
use crate::store::RType;
use crate::tuning::Limit;
use bytes::Bytes;

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

fn sadd(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let items = args.rest().to_vec();
    let db = ctx.conn.db;
    let mut s = Set::open_or_create(ctx.tx, db, &key)?;
    let added = s.add(&items, max_intset(ctx))?;
    if added > 0 {
        notify(ctx, Class::Set, "sadd", db, &key);
    }
    ctx.reply.int(added as i64);
    Ok(())
}

fn srem(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let items = args.rest().to_vec();
    let Some(mut s) = Set::open_write(ctx.tx, ctx.conn.db, &key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let removed = s.remove(&items)?;
    if removed > 0 {
        notify_removed(ctx, "srem", &key, s.len());
    }
    ctx.reply.int(removed as i64);
    Ok(())
}

fn smembers(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    match Set::open(ctx.tx, ctx.conn.db, &key)? {
        Some(s) => members::reply_all(ctx, &key, s.meta(), Emit::Members),
        None => {
            ctx.reply.set(0);
            Ok(())
        }
    }
}

/// Membership of each of `items` in the set at `key` (all false if it does not exist).
fn membership(ctx: &Ctx<'_>, key: &[u8], items: &[&[u8]]) -> Result<Vec<bool>, CmdError> {
    match Set::open(ctx.tx, ctx.conn.db, key)? {
        Some(s) => Ok(s.contains(items)?),
        None => Ok(vec![false; items.len()]),
    }
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
    let s = Set::open(ctx.tx, ctx.conn.db, &key)?;
    ctx.reply.int(s.map_or(0, |s| s.len() as i64));
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

fn spop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let count = match args.remaining() {
        0 => None,
        1 => Some(positive_count(&args.next_bytes()?)?),
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    let Some(mut s) = Set::open_write(ctx.tx, ctx.conn.db, &key)? else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.set(0),
        }
        return Ok(());
    };
    let Some(count) = count else {
        let got = s.pop_one()?;
        if let Some(x) = &got {
            notify_removed(ctx, "spop", &key, s.len());
            // The member drawn, not the draw (Redis 7.0's spopCommand).
            ctx.effects
                .rewrite(crate::effects::argv([&b"SREM"[..], &key, x]));
        }
        ctx.reply.opt_bulk(got.as_deref());
        return Ok(());
    };
    if count == 0 {
        ctx.reply.set(0);
        return Ok(());
    }
    if count >= s.len() {
        let all = s.pop_all()?;
        notify_removed(ctx, "spop", &key, 0);
        // The whole set: its deletion, DEL whatever `lazyfree-*` says (as Redis 7.0).
        ctx.effects
            .rewrite(crate::effects::argv([&b"DEL"[..], &key]));
        reply_set(ctx, all);
        return Ok(());
    }
    let popped = s.pop_some(count, max_intset(ctx))?;
    notify_removed(ctx, "spop", &key, s.len());
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
    let s = Set::open(ctx.tx, db, &key)?;
    let Some(count) = count else {
        let got = match &s {
            Some(s) => s.sample_distinct(1)?,
            None => Vec::new(),
        };
        ctx.reply.opt_bulk(got.first().map(|(x, _)| &x[..]));
        return Ok(());
    };
    let Some(s) = s.filter(|_| count != 0) else {
        ctx.reply.array(0);
        return Ok(());
    };
    let n = count.unsigned_abs();
    if count < 0 {
        ctx.reply.array(n as usize);
        let reply = &mut *ctx.reply;
        s.sample_repeating(n, |x| reply.bulk(x))?;
        return Ok(());
    }
    let picked: Vec<Vec<u8>> = if n >= s.len() {
        let mut all = s.members()?;
        if !members::is_hashtable(s.meta()) {
            members::sort_intset(&mut all);
        }
        all
    } else {
        s.sample_distinct(n as usize)?
            .into_iter()
            .map(|(x, _)| x)
            .collect()
    };
    ctx.reply.array(picked.len());
    for x in &picked {
        ctx.reply.bulk(x);
    }
    Ok(())
}

fn smove(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let src = args.next_bytes()?;
    let dst = args.next_bytes()?;
    let item = args.next_bytes()?;
    let db = ctx.conn.db;
    let moved = set::move_member(ctx.tx, db, (&src, &dst), &item, max_intset(ctx))?;
    match moved {
        Moved::NotInSource => ctx.reply.int(0),
        Moved::Same => ctx.reply.int(1),
        Moved::Done { src_left, added } => {
            notify_removed(ctx, "srem", &src, src_left);
            if added {
                notify(ctx, Class::Set, "sadd", db, &dst);
            }
            ctx.reply.int(1);
        }
    }
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

/// The members of `op` over the sets at `keys`, every key type-checked first, as Redis
/// does (`None`: absent).
fn combine(ctx: &Ctx<'_>, keys: &[Bytes], op: Op) -> Result<Vec<Vec<u8>>, CmdError> {
    let sets = keys
        .iter()
        .map(|k| Set::open(ctx.tx, ctx.conn.db, k))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(match op {
        Op::Inter => set::inter(&sets, 0)?,
        Op::Union => set::union(&sets)?,
        Op::Diff => set::diff(&sets)?,
    })
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
    let v = combine(ctx, &keys, op)?;
    let deleted = set::store(ctx.tx, db, &dst, &v, max_intset(ctx))?;
    if !v.is_empty() {
        notify(ctx, Class::Set, op.store_event(), db, &dst);
    } else if deleted {
        notify(ctx, Class::Generic, "del", db, &dst);
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
    let sets = keys
        .iter()
        .map(|k| Set::open(ctx.tx, ctx.conn.db, k))
        .collect::<Result<Vec<_>, _>>()?;
    let n = set::inter(&sets, limit)?.len();
    ctx.reply.int(n as i64);
    Ok(())
}

fn sscan(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    members::scan(ctx, args, RType::Set)
}
