//! Hash commands (Redis's t_hash.c). A hash is a metadata record (type hash, size = number
//! of fields, one flags byte: `members::FLAG_HASHTABLE`) and one member record per field
//! whose value is the field's value (`docs/format/redis-keys.md`, "Hashes"). A hash's
//! records share its shard, so every command here runs on one worker (or under the key's
//! stripe), and its writes go out in one `Writes`.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_FLOAT, ERR_SYNTAX};
use super::members::{self, Emit};
use super::{cmd, lookup_typed, Args, CmdError, CmdResult, Ctx, Entry};
use crate::long_double::{self, Parsed};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::protocol::reply::Proto;
use crate::store::{Meta, RType, Writes};
use crate::tuning::Limit;
use bytes::Bytes;
use std::collections::HashMap;

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

/// The conversion limits of a listpack hash: `hash-max-listpack-entries` and
/// `hash-max-listpack-value`.
fn limits(ctx: &Ctx<'_>) -> (u64, u64) {
    (
        ctx.shared.limits.get(Limit::HashMaxListpackEntries),
        ctx.shared.limits.get(Limit::HashMaxListpackValue),
    )
}

/// Redis's `hashTypeSet`: a listpack hash becomes a hashtable when a field or value it
/// stores is longer than `hash-max-listpack-value`.
fn convert_for_args(ctx: &Ctx<'_>, m: &mut Meta, args: &[&[u8]]) {
    let (_, max_value) = limits(ctx);
    if args.iter().any(|a| a.len() as u64 > max_value) {
        members::mark_hashtable(m);
    }
}

/// After fields were added: a listpack hash with more than `hash-max-listpack-entries`
/// fields becomes a hashtable.
fn convert_for_size(ctx: &Ctx<'_>, m: &mut Meta) {
    let (max_entries, _) = limits(ctx);
    if m.size > max_entries {
        members::mark_hashtable(m);
    }
}

/// HSET and HMSET: sets the pairs; returns the number of fields created.
fn set_pairs(ctx: &mut Ctx<'_>, key: &[u8], rest: &[Bytes]) -> Result<i64, CmdError> {
    let db = ctx.conn.db;
    let old = members::lookup_write(ctx, key, RType::Hash)?;
    let existed = old.is_some();
    let mut m = old.unwrap_or_else(|| members::create(ctx, RType::Hash));
    let all: Vec<&[u8]> = rest.iter().map(|b| &b[..]).collect();
    convert_for_args(ctx, &mut m, &all);
    // Distinct fields in first-appearance order; the last value of a repeated field wins.
    let mut order: Vec<&[u8]> = Vec::with_capacity(rest.len() / 2);
    let mut value: HashMap<&[u8], &[u8]> = HashMap::with_capacity(rest.len() / 2);
    for pair in rest.chunks(2) {
        if value.insert(&pair[0][..], &pair[1][..]).is_none() {
            order.push(&pair[0][..]);
        }
    }
    let store = &ctx.shared.store;
    let created = if existed {
        members::exist(store, db, key, &m, &order)?
            .iter()
            .filter(|v| v.is_none())
            .count()
    } else {
        order.len()
    };
    let mut w = Writes::new();
    for f in &order {
        w.put_member(db, key, &members::record(db, key, &m, f), value[f]);
    }
    m.size += created as u64;
    convert_for_size(ctx, &mut m);
    w.meta(db, key, Some(&m));
    store.apply(w)?;
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
    let old = members::lookup_write(ctx, &key, RType::Hash)?;
    let existed = old.is_some();
    let mut m = old.unwrap_or_else(|| members::create(ctx, RType::Hash));
    let store = &ctx.shared.store;
    let present = existed
        && store
            .get_member(&members::record(db, &key, &m, &field))?
            .is_some();
    let mut w = Writes::new();
    if !present {
        w.put_member(db, &key, &members::record(db, &key, &m, &field), &value);
        m.size += 1;
        convert_for_args(ctx, &mut m, &[&field, &value]);
        convert_for_size(ctx, &mut m);
        w.meta(db, &key, Some(&m));
    }
    if !w.is_empty() {
        store.apply(w)?;
        notify(ctx, Class::Hash, "hset", db, &key);
    }
    ctx.reply.int(i64::from(!present));
    Ok(())
}

/// The value of `field` of the hash at `key` (counting a keyspace hit or miss).
fn field_value(ctx: &Ctx<'_>, key: &[u8], field: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let Some(m) = lookup_typed(ctx, key, RType::Hash)? else {
        return Ok(None);
    };
    let db = ctx.conn.db;
    Ok(ctx
        .shared
        .store
        .get_member(&members::record(db, key, &m, field))?)
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
    let db = ctx.conn.db;
    let values = match lookup_typed(ctx, &key, RType::Hash)? {
        Some(m) => {
            let fs: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
            members::exist(&ctx.shared.store, db, &key, &m, &fs)?
        }
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
    match lookup_typed(ctx, &key, RType::Hash)? {
        Some(m) => members::reply_all(ctx, &key, &m, what),
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
    let Some(mut m) = members::lookup_write(ctx, &key, RType::Hash)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let mut distinct: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let store = &ctx.shared.store;
    let found = members::exist(store, db, &key, &m, &distinct)?;
    let mut w = Writes::new();
    let mut deleted = 0u64;
    for (f, v) in distinct.iter().zip(&found) {
        if v.is_some() {
            w.delete_member(db, &key, &members::record(db, &key, &m, f));
            deleted += 1;
        }
    }
    if deleted > 0 {
        m.size = m.size.saturating_sub(deleted);
        members::put_meta(&mut w, db, &key, &m);
        store.apply(w)?;
        notify(ctx, Class::Hash, "hdel", db, &key);
        if m.size == 0 {
            notify(ctx, Class::Generic, "del", db, &key);
        }
    }
    ctx.reply.int(deleted as i64);
    Ok(())
}

fn hlen(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let m = lookup_typed(ctx, &key, RType::Hash)?;
    ctx.reply.int(m.map_or(0, |m| m.size as i64));
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
    let db = ctx.conn.db;
    let old = members::lookup_write(ctx, key, RType::Hash)?;
    let existed = old.is_some();
    let mut m = old.unwrap_or_else(|| members::create(ctx, RType::Hash));
    let store = &ctx.shared.store;
    let rec = members::record(db, key, &m, field);
    let cur = if existed {
        store.get_member(&rec)?
    } else {
        None
    };
    let new = f(cur.as_deref())?;
    let mut w = Writes::new();
    w.put_member(db, key, &rec, &new);
    let was = m.clone();
    if cur.is_none() {
        m.size += 1;
    }
    convert_for_args(ctx, &mut m, &[field, &new]);
    convert_for_size(ctx, &mut m);
    if m != was || !existed {
        w.meta(db, key, Some(&m));
    }
    store.apply(w)?;
    Ok(new)
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
        let Some(m) = lookup_typed(ctx, &key, RType::Hash)? else {
            ctx.reply.null();
            return Ok(());
        };
        let got = members::sample_distinct(&ctx.shared.store, db, &key, &m, 1)?;
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
    let m = lookup_typed(ctx, &key, RType::Hash)?;
    let Some(m) = m.filter(|_| count != 0) else {
        ctx.reply.array(0);
        return Ok(());
    };
    let resp3 = ctx.reply.proto == Proto::Resp3;
    let store = &ctx.shared.store;
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
        members::sample_repeating(store, db, &key, &m, n, |k, v| emit(reply, k, v))?;
        return Ok(());
    }
    let picked = if n >= m.size {
        members::load(store, db, &key, &m)?
    } else {
        members::sample_distinct(store, db, &key, &m, n as usize)?
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
