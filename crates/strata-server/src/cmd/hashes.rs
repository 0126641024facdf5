//! Hash commands (Redis's t_hash.c): arguments, replies, notifications and effects. The
//! hash type itself (records, encodings, reads and writes through the command's
//! transaction) is `hash.rs`. A hash's records share its shard, so every command here runs
//! on one worker (or under the key's stripe), and its writes go out in one `Writes`.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_FLOAT, ERR_SYNTAX};
use super::members::{self, Emit};
use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::collection::Collection;
use crate::hash::{self, Hash};
use crate::long_double::{self, Parsed};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::protocol::reply::Proto;
use crate::store::RType;
use bytes::Bytes;

pub static COMMANDS: &[Entry] = &[
    cmd("hset", hset),
    cmd("hsetnx", hsetnx),
    cmd("hmset", hmset),
    cmd("hget", hget),
    cmd("hmget", hmget),
    cmd("hgetall", hgetall),
    cmd("hdel", hdel),
    cmd("hlen", hlen),
    cmd("hexists", hexists),
    cmd("hkeys", hkeys),
    cmd("hvals", hvals),
    cmd("hincrby", hincrby),
    cmd("hincrbyfloat", hincrbyfloat),
    cmd("hstrlen", hstrlen),
    cmd("hrandfield", hrandfield),
    cmd("hscan", hscan),
];

/// The listpack limits as set now (`hash-max-listpack-entries`, `-value`).
fn limits(ctx: &Ctx<'_>) -> hash::Limits {
    hash::Limits::of(&ctx.shared.limits)
}

/// HSET and HMSET: sets the pairs; returns the number of fields created.
fn set_pairs(ctx: &mut Ctx<'_>, key: &[u8], rest: &[Bytes]) -> Result<i64, CmdError> {
    let db = ctx.conn.db;
    let mut h = Hash::open_or_create(ctx.tx, db, key)?;
    let created = h.set(rest, limits(ctx))?;
    notify(ctx, Class::Hash, "hset", db, key);
    Ok(created as i64)
}

fn hset(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let rest = args.rest().to_vec();
    if rest.len() % 2 == 1 {
        return Err(CmdError::reply(
            "ERR wrong number of arguments for 'hset' command",
        ));
    }
    let n = set_pairs(ctx, &key, &rest)?;
    ctx.reply.int(n);
    Ok(())
}

fn hmset(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let rest = args.rest().to_vec();
    if rest.len() % 2 == 1 {
        return Err(CmdError::reply(
            "ERR wrong number of arguments for 'hmset' command",
        ));
    }
    set_pairs(ctx, &key, &rest)?;
    ctx.reply.ok();
    Ok(())
}

fn hsetnx(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let field = args.next_bytes()?;
    let value = args.next_bytes()?;
    let db = ctx.conn.db;
    let mut h = Hash::open_or_create(ctx.tx, db, &key)?;
    let set = h.set_nx(&field, &value, limits(ctx))?;
    if set {
        notify(ctx, Class::Hash, "hset", db, &key);
    }
    ctx.reply.int(i64::from(set));
    Ok(())
}

/// The value of `field` of the hash at `key` (counting a keyspace hit or miss).
fn field_value(ctx: &Ctx<'_>, key: &[u8], field: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    match Hash::open(ctx.tx, ctx.conn.db, key)? {
        Some(h) => Ok(h.get(field)?),
        None => Ok(None),
    }
}

fn hget(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let field = args.next_bytes()?;
    let v = field_value(ctx, &key, &field)?;
    ctx.reply.opt_bulk(v.as_deref());
    Ok(())
}

fn hmget(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let fields: Vec<Bytes> = args.rest().to_vec();
    let fs: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
    let values = match Hash::open(ctx.tx, ctx.conn.db, &key)? {
        Some(h) => h.get_many(&fs)?,
        None => vec![None; fields.len()],
    };
    ctx.reply.array(values.len());
    for v in &values {
        ctx.reply.opt_bulk(v.as_deref());
    }
    Ok(())
}

fn reply_whole(ctx: &mut Ctx<'_>, args: &mut Args, what: Emit) -> CmdResult {
    let key = args.next_bytes()?;
    match Hash::open(ctx.tx, ctx.conn.db, &key)? {
        Some(h) => members::reply_all(ctx, &key, h.meta(), what),
        None => {
            match what {
                Emit::Pairs => ctx.reply.map(0),
                _ => ctx.reply.array(0),
            }
            Ok(())
        }
    }
}

fn hgetall(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    reply_whole(ctx, args, Emit::Pairs)
}

fn hkeys(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    reply_whole(ctx, args, Emit::Keys)
}

fn hvals(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    reply_whole(ctx, args, Emit::Values)
}

fn hdel(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let fields: Vec<Bytes> = args.rest().to_vec();
    let db = ctx.conn.db;
    let Some(mut h) = Hash::open_write(ctx.tx, db, &key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let deleted = h.del(&fields)?;
    if deleted > 0 {
        notify(ctx, Class::Hash, "hdel", db, &key);
        if h.len() == 0 {
            notify(ctx, Class::Generic, "del", db, &key);
        }
    }
    ctx.reply.int(deleted as i64);
    Ok(())
}

fn hlen(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let h = Hash::open(ctx.tx, ctx.conn.db, &key)?;
    ctx.reply.int(h.map_or(0, |h| h.len() as i64));
    Ok(())
}

fn hexists(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let field = args.next_bytes()?;
    let v = field_value(ctx, &key, &field)?;
    ctx.reply.int(i64::from(v.is_some()));
    Ok(())
}

fn hstrlen(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let field = args.next_bytes()?;
    let v = field_value(ctx, &key, &field)?;
    ctx.reply.int(v.map_or(0, |v| v.len() as i64));
    Ok(())
}

/// Read-modify-write of one field (HINCRBY, HINCRBYFLOAT): `f` gets the field's value, if
/// any, and returns the new one. Creates the hash if needed.
fn modify_field(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    field: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, CmdError>,
) -> Result<Vec<u8>, CmdError> {
    let mut h = Hash::open_or_create(ctx.tx, ctx.conn.db, key)?;
    h.modify(field, limits(ctx), f)
}

fn hincrby(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let field = args.next_bytes()?;
    let by = args.next_i64()?;
    let mut result = 0i64;
    modify_field(ctx, &key, &field, |cur| {
        let cur = match cur {
            Some(v) => {
                parse_i64(v).ok_or_else(|| CmdError::reply("ERR hash value is not an integer"))?
            }
            None => 0,
        };
        result = cur
            .checked_add(by)
            .ok_or_else(|| CmdError::reply("ERR increment or decrement would overflow"))?;
        Ok(result.to_string().into_bytes())
    })?;
    notify(ctx, Class::Hash, "hincrby", ctx.conn.db, &key);
    ctx.reply.int(result);
    Ok(())
}

/// HINCRBYFLOAT computes in long double, as INCRBYFLOAT (`long_double.rs`), in Redis's
/// order of checks: the increment, the key's type, the field's value, the sum.
fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let field = args.next_bytes()?;
    let by = match long_double::parse(&args.next_bytes()?) {
        Some(Parsed::Finite(b)) => b,
        Some(Parsed::Infinite) => return Err(CmdError::reply("ERR value is NaN or Infinity")),
        None => return Err(CmdError::reply(ERR_NOT_FLOAT)),
    };
    let new = modify_field(ctx, &key, &field, |cur| {
        let cur = match cur {
            Some(v) => long_double::parse(v)
                .ok_or_else(|| CmdError::reply("ERR hash value is not a float"))?,
            None => long_double::parse(b"0").ok_or_else(|| CmdError::reply(ERR_NOT_FLOAT))?,
        };
        let sum = match cur {
            Parsed::Finite(a) => a.add(by),
            Parsed::Infinite => None,
        };
        let sum =
            sum.ok_or_else(|| CmdError::reply("ERR increment would produce NaN or Infinity"))?;
        Ok(sum.to_human().into_bytes())
    })?;
    notify(ctx, Class::Hash, "hincrbyfloat", ctx.conn.db, &key);
    // The result, not the increment (Redis 7.0's hincrbyfloatCommand).
    ctx.effects
        .rewrite(crate::effects::argv([&b"HSET"[..], &key, &field, &new]));
    ctx.reply.bulk(&new);
    Ok(())
}

fn hrandfield(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let db = ctx.conn.db;
    if args.is_done() {
        let Some(h) = Hash::open(ctx.tx, db, &key)? else {
            ctx.reply.null();
            return Ok(());
        };
        let got = h.sample_distinct(1)?;
        ctx.reply.opt_bulk(got.first().map(|(k, _)| &k[..]));
        return Ok(());
    }
    let count = members::parse_count(&args.next_bytes()?)?;
    let mut with_values = false;
    if args.remaining() > 1 {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    if !args.is_done() {
        if !args.eat("WITHVALUES") {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        with_values = true;
        if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
            return Err(CmdError::reply("ERR value is out of range"));
        }
    }
    let h = Hash::open(ctx.tx, db, &key)?;
    let Some(h) = h.filter(|_| count != 0) else {
        ctx.reply.array(0);
        return Ok(());
    };
    let resp3 = ctx.reply.proto == Proto::Resp3;
    let n = count.unsigned_abs();
    let header = |reply: &mut crate::protocol::reply::ReplyBuf, len: u64| {
        reply.array(if with_values && !resp3 { 2 * len } else { len } as usize);
    };
    let reply = &mut *ctx.reply;
    let emit = |reply: &mut crate::protocol::reply::ReplyBuf, k: &[u8], v: &[u8]| {
        if with_values && resp3 {
            reply.array(2);
        }
        reply.bulk(k);
        if with_values {
            reply.bulk(v);
        }
    };
    if count < 0 {
        header(reply, n);
        h.sample_repeating(n, |k, v| emit(reply, k, v))?;
        return Ok(());
    }
    let picked = if n >= h.len() {
        h.all()?
    } else {
        h.sample_distinct(n as usize)?
    };
    header(reply, picked.len() as u64);
    for (k, v) in &picked {
        emit(reply, k, v);
    }
    Ok(())
}

fn hscan(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    members::scan(ctx, args, RType::Hash)
}
