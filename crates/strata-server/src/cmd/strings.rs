//! String commands (Redis's t_string.c): GET, SET and its variants, GETEX, MGET, MSET,
//! MSETNX, APPEND, STRLEN, the INCR family, GETRANGE (and its old name SUBSTR), SETRANGE,
//! LCS. Values live inline in the key's metadata
//! record; read-modify-write commands hold their key's stripe lock (see `store.rs`).
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_FLOAT, ERR_NOT_INT, ERR_SYNTAX};
use super::table::traits::{BLIND_WRITE, SNAPSHOT_READ};
use super::{cmd, cmd_with, Args, CmdError, CmdResult, Ctx, Entry, ERR_WRONGTYPE};
use crate::long_double::{self, Parsed};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::store::{now_ms, Meta, RType};
use bytes::Bytes;

pub static COMMANDS: &[Entry] = &[
    cmd("get", get),
    cmd("set", set),
    cmd("setnx", setnx),
    cmd("setex", setex),
    cmd("psetex", psetex),
    cmd("getset", getset),
    cmd("getdel", getdel),
    cmd("getex", getex),
    cmd_with("mget", mget, SNAPSHOT_READ),
    cmd_with("mset", mset, BLIND_WRITE),
    cmd("msetnx", msetnx),
    cmd("append", append),
    cmd("strlen", strlen),
    cmd("incr", incr),
    cmd("decr", decr),
    cmd("incrby", incrby),
    cmd("decrby", decrby),
    cmd("incrbyfloat", incrbyfloat),
    cmd("getrange", getrange),
    cmd("substr", getrange),
    cmd("setrange", setrange),
    cmd("lcs", lcs),
];

const ERR_TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// The live string at `key`: `WRONGTYPE` for other types.
pub(super) fn read_string(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Meta>, CmdError> {
    match ctx.tx.lookup_read(ctx.conn.db, key)? {
        Some(m) if m.rtype != RType::String => Err(CmdError::reply(ERR_WRONGTYPE)),
        m => Ok(m),
    }
}

fn new_string(ctx: &Ctx<'_>, value: Vec<u8>, expire_ms: u64) -> Meta {
    Meta {
        rtype: RType::String,
        expire_ms,
        version: ctx.tx.next_version(),
        size: value.len() as u64,
        value,
    }
}

pub(super) fn check_len(ctx: &Ctx<'_>, len: u64) -> CmdResult {
    if len > ctx.shared.config.read().proto_max_bulk_len as u64 {
        return Err(CmdError::reply(ERR_TOO_BIG));
    }
    Ok(())
}

fn get(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let m = read_string(ctx, &key)?;
    ctx.reply.opt_bulk(m.as_ref().map(|m| &m.value[..]));
    Ok(())
}

/// How SET's value gets its expiry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ttl {
    /// Remove any expiry.
    Clear,
    /// KEEPTTL.
    Keep,
    /// Absolute Unix milliseconds.
    At(i64),
}

struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
    ttl: Ttl,
}

fn invalid_expire(cmd: &str) -> CmdError {
    CmdError::reply(format!("ERR invalid expire time in '{cmd}' command"))
}

/// Redis's `getExpireMillisecondsOrReply`: `n` in seconds or ms, relative or absolute, to
/// absolute ms; rejects values <= 0 and overflows.
fn expire_at_ms(n: i64, seconds: bool, relative: bool, cmd: &str) -> Result<i64, CmdError> {
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(invalid_expire(cmd));
    }
    let ms = if seconds { n * 1000 } else { n };
    if relative {
        let now = now_ms() as i64;
        if ms > i64::MAX - now {
            return Err(invalid_expire(cmd));
        }
        return Ok(ms + now);
    }
    Ok(ms)
}

fn parse_set_opts(args: &mut Args) -> Result<SetOpts, CmdError> {
    let mut o = SetOpts {
        nx: false,
        xx: false,
        get: false,
        ttl: Ttl::Clear,
    };
    // (value, seconds, relative) of an expiry option; parsed after the syntax is checked, as
    // Redis does.
    let mut expire: Option<(Bytes, bool, bool)> = None;
    let mut kind: Option<String> = None;
    while let Some(opt) = args.next_keyword() {
        let has_next = !args.is_done();
        match opt.as_str() {
            "NX" if !o.xx => o.nx = true,
            "XX" if !o.nx => o.xx = true,
            "GET" => o.get = true,
            "KEEPTTL" if expire.is_none() => o.ttl = Ttl::Keep,
            "EX" | "PX" | "EXAT" | "PXAT"
                if o.ttl != Ttl::Keep && has_next && kind.as_deref().is_none_or(|k| k == opt) =>
            {
                let v = args.next_bytes()?;
                let seconds = opt.starts_with('E');
                let relative = !opt.ends_with("AT");
                expire = Some((v, seconds, relative));
                kind = Some(opt);
            }
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
    }
    if let Some((v, seconds, relative)) = expire {
        let n = parse_i64(&v).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?;
        o.ttl = Ttl::At(expire_at_ms(n, seconds, relative, "set")?);
    }
    Ok(o)
}

/// What a SET that wrote propagates (Redis 7.0's `setGenericCommand`): with an expiry
/// option, `SET k v PXAT <ms>` alone (NX, XX and GET dropped); else the command as called
/// without its GET. A time already past also propagates the key's deletion, which this
/// server makes at once (Redis at its next lookup or expiry cycle).
fn propagate_set(ctx: &mut Ctx<'_>, argv: &[Bytes], key: &[u8], value: &[u8], o: &SetOpts) {
    if let Ttl::At(ms) = o.ttl {
        let ms = crate::effects::ms_arg(ms);
        ctx.effects
            .rewrite(crate::effects::argv([b"SET", key, value, b"PXAT", &ms[..]]));
        if ms_past(o) {
            ctx.effects.dirty();
            let unlink = ctx.lazyfree("lazyfree-lazy-expire");
            let db = ctx.conn.selected;
            ctx.effects.also(db, crate::effects::deletion(key, unlink));
        }
    } else if o.get {
        let kept = argv
            .iter()
            .enumerate()
            .filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"GET"));
        ctx.effects.rewrite(kept.map(|(_, a)| a.to_vec()).collect());
    }
}

/// Whether SET's expiry time has already passed.
fn ms_past(o: &SetOpts) -> bool {
    matches!(o.ttl, Ttl::At(ms) if ms <= now_ms() as i64)
}

/// SET and its variants. Replies OK (or the old value with GET), or null when NX/XX fails.
/// `argv`: the command as called, for what it propagates.
fn set_generic(
    ctx: &mut Ctx<'_>,
    argv: &[Bytes],
    key: &[u8],
    value: Bytes,
    o: &SetOpts,
) -> CmdResult {
    let db = ctx.conn.db;
    let store = ctx.tx;
    // A plain SET (no NX, XX, GET or KEEPTTL) is a blind write: reading the old record would
    // cost a lookup, on SSD possibly a random read, for nothing (Redis's lookup is in RAM).
    let needs_old = o.get || o.nx || o.xx || matches!(o.ttl, Ttl::Keep);
    let old = if o.get {
        let old = read_string(ctx, key)?;
        if old.is_some() {
            // Redis looks the key up twice, to read it and to overwrite it.
            store.access.touch(db, key, now_ms());
        }
        old
    } else if needs_old {
        store.get(db, key)?
    } else {
        store.access.touch_tracked(db, key, now_ms());
        None
    };
    let found = old.is_some();
    if (o.nx && found) || (o.xx && !found) {
        if o.get {
            ctx.reply.opt_bulk(old.as_ref().map(|m| &m.value[..]));
        } else {
            ctx.reply.null();
        }
        return Ok(());
    }
    propagate_set(ctx, argv, key, &value, o);
    let store = ctx.tx;
    let expire_ms = match o.ttl {
        Ttl::Clear => 0,
        Ttl::Keep => old.as_ref().map_or(0, |m| m.expire_ms),
        Ttl::At(ms) => ms as u64,
    };
    let expired = expire_ms != 0 && expire_ms <= now_ms();
    if expired {
        // Already expired (EXAT/PXAT in the past): the key is deleted, as Redis does.
        if found || !needs_old {
            store.delete(db, key)?;
        }
    } else {
        store.put(db, key, &new_string(ctx, value.to_vec(), expire_ms))?;
    }
    // Redis sets the key, then its expiry: `set`, then `expire`; a time already past is
    // then expired (Redis deletes it as soon as it is looked at: `expired`).
    notify(ctx, Class::String, "set", db, key);
    if matches!(o.ttl, Ttl::At(_)) {
        notify(ctx, Class::Generic, "expire", db, key);
    }
    if expired {
        notify(ctx, Class::Expired, "expired", db, key);
    }
    if o.get {
        ctx.reply.opt_bulk(old.as_ref().map(|m| &m.value[..]));
    } else {
        ctx.reply.ok();
    }
    Ok(())
}

fn set(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let value = args.next_bytes()?;
    let o = parse_set_opts(args)?;
    set_generic(ctx, args.argv(), &key, value, &o)
}

fn setnx(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let value = args.next_bytes()?;
    let db = ctx.conn.db;
    let store = ctx.tx;
    if store.get(db, &key)?.is_some() {
        ctx.reply.int(0);
    } else {
        store.put(db, &key, &new_string(ctx, value.to_vec(), 0))?;
        notify(ctx, Class::String, "set", db, &key);
        ctx.reply.int(1);
    }
    Ok(())
}

fn setex_generic(ctx: &mut Ctx<'_>, args: &mut Args, seconds: bool, cmd: &str) -> CmdResult {
    let key = args.next_bytes()?;
    let n = args.next_i64()?;
    let value = args.next_bytes()?;
    let at = expire_at_ms(n, seconds, true, cmd)?;
    let o = SetOpts {
        nx: false,
        xx: false,
        get: false,
        ttl: Ttl::At(at),
    };
    set_generic(ctx, args.argv(), &key, value, &o)
}

fn setex(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    setex_generic(ctx, args, true, "setex")
}

fn psetex(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    setex_generic(ctx, args, false, "psetex")
}

fn getset(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let value = args.next_bytes()?;
    let o = SetOpts {
        nx: false,
        xx: false,
        get: true,
        ttl: Ttl::Clear,
    };
    set_generic(ctx, &[], &key, value.clone(), &o)?;
    // Propagated as the SET it is (Redis 7.0's getsetCommand).
    ctx.effects
        .rewrite(crate::effects::argv([&b"SET"[..], &key, &value]));
    Ok(())
}

fn getdel(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let db = ctx.conn.db;
    let m = read_string(ctx, &key)?;
    if m.is_some() {
        ctx.tx.delete(db, &key)?;
        notify(ctx, Class::Generic, "del", db, &key);
        let unlink = ctx.lazyfree("lazyfree-lazy-user-del");
        ctx.effects.rewrite(crate::effects::deletion(&key, unlink));
    }
    ctx.reply.opt_bulk(m.as_ref().map(|m| &m.value[..]));
    Ok(())
}

fn mget(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let keys: Vec<&[u8]> = args.rest().iter().map(|k| &k[..]).collect();
    let metas = ctx.tx.multi_get(ctx.conn.db, &keys)?;
    ctx.reply.array(metas.len());
    for m in metas {
        match m {
            Some(m) if m.rtype == RType::String => ctx.reply.bulk(&m.value),
            _ => ctx.reply.null(),
        }
    }
    Ok(())
}

/// MSET's and MSETNX's key-value pairs as new strings, in first-appearance order; the last
/// value of a key given twice wins. Found through a map: an MSET may carry half a million
/// pairs, and a linear search per pair would be quadratic.
fn string_pairs<'a>(ctx: &Ctx<'_>, rest: &'a [Bytes]) -> Vec<(&'a [u8], Meta)> {
    let mut pairs: Vec<(&[u8], Meta)> = Vec::with_capacity(rest.len() / 2);
    let mut at: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for kv in rest.chunks(2) {
        let m = new_string(ctx, kv[1].to_vec(), 0);
        match at.get(&kv[0][..]) {
            Some(&i) => pairs[i].1 = m,
            None => {
                at.insert(&kv[0][..], pairs.len());
                pairs.push((&kv[0][..], m));
            }
        }
    }
    pairs
}

fn mset(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest = args.rest();
    if !rest.len().is_multiple_of(2) {
        return Err(CmdError::reply(
            "ERR wrong number of arguments for 'mset' command",
        ));
    }
    let pairs = string_pairs(ctx, rest);
    let keys: Vec<&[u8]> = pairs.iter().map(|(k, _)| *k).collect();
    // Blind writes: an existing key's access is counted as Redis's `setKey` does.
    let now = now_ms();
    for k in &keys {
        ctx.tx.access.touch_tracked(ctx.conn.db, k, now);
    }
    let ops: Vec<(&[u8], Option<&Meta>)> = pairs.iter().map(|(k, m)| (*k, Some(m))).collect();
    ctx.tx.write_many(ctx.conn.db, &ops)?;
    // One event per pair given, a repeated key included, as Redis.
    for kv in rest.chunks(2) {
        notify(ctx, Class::String, "set", ctx.conn.db, &kv[0]);
    }
    ctx.reply.ok();
    Ok(())
}

/// Read-modify-write of one string under its stripe lock: `f` gets the current string (if
/// any) and returns the new value, or `None` to leave the key alone. Expiry and version of an
/// existing key are kept.
pub(super) fn modify(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&Ctx<'_>, Option<&Meta>) -> Result<Option<Vec<u8>>, CmdError>,
) -> Result<Option<Meta>, CmdError> {
    let db = ctx.conn.db;
    let store = ctx.tx;
    let old = read_string(ctx, key)?;
    let Some(value) = f(ctx, old.as_ref())? else {
        return Ok(old);
    };
    let m = match old {
        Some(mut m) => {
            m.size = value.len() as u64;
            m.value = value;
            m
        }
        None => new_string(ctx, value, 0),
    };
    store.put(db, key, &m)?;
    Ok(Some(m))
}

fn append(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let tail = args.next_bytes()?;
    let m = modify(ctx, &key, |ctx, old| {
        let mut v = old.map(|m| m.value.clone()).unwrap_or_default();
        check_len(ctx, (v.len() + tail.len()) as u64)?;
        v.extend_from_slice(&tail);
        Ok(Some(v))
    })?;
    notify(ctx, Class::String, "append", ctx.conn.db, &key);
    ctx.reply.int(m.map_or(0, |m| m.value.len() as i64));
    Ok(())
}

fn strlen(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let m = read_string(ctx, &key)?;
    ctx.reply.int(m.map_or(0, |m| m.value.len() as i64));
    Ok(())
}

fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> CmdResult {
    let mut result = 0;
    modify(ctx, key, |_, old| {
        let cur = match old {
            Some(m) => parse_i64(&m.value).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?,
            None => 0,
        };
        result = cur
            .checked_add(by)
            .ok_or_else(|| CmdError::reply("ERR increment or decrement would overflow"))?;
        Ok(Some(result.to_string().into_bytes()))
    })?;
    notify(ctx, Class::String, "incrby", ctx.conn.db, key);
    ctx.reply.int(result);
    Ok(())
}

fn incr(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    incr_by(ctx, &key, 1)
}

fn decr(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    incr_by(ctx, &key, -1)
}

fn incrby(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let by = args.next_i64()?;
    incr_by(ctx, &key, by)
}

fn decrby(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let by = args.next_i64()?;
    if by == i64::MIN {
        return Err(CmdError::reply("ERR decrement would overflow"));
    }
    incr_by(ctx, &key, -by)
}

/// INCRBYFLOAT computes in long double as Redis does (see `long_double.rs`); the order of
/// checks is Redis's: the key's type, its value, then the increment.
fn incrbyfloat(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let by = args.next_bytes()?;
    let mut out = String::new();
    modify(ctx, &key, |_, old| {
        let not_float = || CmdError::reply(ERR_NOT_FLOAT);
        let cur = match old {
            Some(m) => long_double::parse(&m.value).ok_or_else(not_float)?,
            None => long_double::parse(b"0").ok_or_else(not_float)?,
        };
        let by = long_double::parse(&by).ok_or_else(not_float)?;
        let sum = match (cur, by) {
            (Parsed::Finite(a), Parsed::Finite(b)) => a.add(b),
            _ => None,
        };
        let Some(sum) = sum else {
            return Err(CmdError::reply(
                "ERR increment would produce NaN or Infinity",
            ));
        };
        out = sum.to_human();
        Ok(Some(out.clone().into_bytes()))
    })?;
    notify(ctx, Class::String, "incrbyfloat", ctx.conn.db, &key);
    // The result, not the increment: replicas must not redo the float arithmetic.
    ctx.effects.rewrite(crate::effects::argv([
        &b"SET"[..],
        &key,
        out.as_bytes(),
        b"KEEPTTL",
    ]));
    ctx.reply.bulk(out.as_bytes());
    Ok(())
}

fn getrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let mut start = args.next_i64()?;
    let mut end = args.next_i64()?;
    let Some(m) = read_string(ctx, &key)? else {
        ctx.reply.bulk(b"");
        return Ok(());
    };
    let len = m.value.len() as i64;
    if start < 0 && end < 0 && start > end {
        ctx.reply.bulk(b"");
        return Ok(());
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        ctx.reply.bulk(b"");
    } else {
        ctx.reply.bulk(&m.value[start as usize..=end as usize]);
    }
    Ok(())
}

fn setrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let offset = args.next_i64()?;
    let patch = args.next_bytes()?;
    if offset < 0 {
        return Err(CmdError::reply("ERR offset is out of range"));
    }
    let offset = offset as u64;
    let m = modify(ctx, &key, |ctx, old| {
        if patch.is_empty() {
            return Ok(None); // nothing to write; the reply is the current length
        }
        let end = offset
            .checked_add(patch.len() as u64)
            .ok_or_else(|| CmdError::reply(ERR_TOO_BIG))?;
        check_len(ctx, end)?;
        let mut v = old.map(|m| m.value.clone()).unwrap_or_default();
        if (v.len() as u64) < end {
            v.resize(end as usize, 0);
        }
        v[offset as usize..end as usize].copy_from_slice(&patch);
        Ok(Some(v))
    })?;
    if !patch.is_empty() {
        notify(ctx, Class::String, "setrange", ctx.conn.db, &key);
    }
    ctx.reply.int(m.map_or(0, |m| m.value.len() as i64));
    Ok(())
}

/// GETEX: the value, and the key's expiry changed (EX/PX/EXAT/PXAT) or removed (PERSIST).
/// The order of checks is Redis's: the options' syntax, the key (null when missing, its
/// type), then the expiry value.
fn getex(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let mut persist = false;
    // (option, value): the same option again replaces the value, another one is an error.
    let mut expire: Option<(String, Bytes)> = None;
    while let Some(opt) = args.next_keyword() {
        let has_next = !args.is_done();
        match opt.as_str() {
            "PERSIST" if expire.is_none() => persist = true,
            "EX" | "PX" | "EXAT" | "PXAT"
                if !persist && has_next && expire.as_ref().is_none_or(|(k, _)| *k == opt) =>
            {
                expire = Some((opt, args.next_bytes()?));
            }
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
    }
    let db = ctx.conn.db;
    let store = ctx.tx;
    let Some(mut m) = read_string(ctx, &key)? else {
        ctx.reply.null();
        return Ok(());
    };
    let expire = match &expire {
        Some((opt, v)) => {
            let n = parse_i64(v).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?;
            let at = expire_at_ms(n, opt.starts_with('E'), !opt.ends_with("AT"), "getex")?;
            Some(at as u64)
        }
        None => None,
    };
    let event = match expire {
        // EXAT/PXAT in the past: the key is deleted, after its value is read.
        Some(at) if at <= now_ms() => {
            store.delete(db, &key)?;
            let unlink = ctx.lazyfree("lazyfree-lazy-expire");
            ctx.effects.rewrite(crate::effects::deletion(&key, unlink));
            Some((Class::Generic, "del"))
        }
        Some(at) => {
            m.expire_ms = at;
            store.put(db, &key, &m)?;
            let ms = crate::effects::ms_arg(at as i64);
            ctx.effects
                .rewrite(crate::effects::argv([&b"PEXPIREAT"[..], &key, &ms]));
            Some((Class::Generic, "expire"))
        }
        None if persist && m.expire_ms != 0 => {
            m.expire_ms = 0;
            store.put(db, &key, &m)?;
            ctx.effects
                .rewrite(crate::effects::argv([&b"PERSIST"[..], &key]));
            Some((Class::Generic, "persist"))
        }
        None => None,
    };
    if let Some((class, event)) = event {
        notify(ctx, class, event, db, &key);
    }
    ctx.reply.bulk(&m.value);
    Ok(())
}

/// MSETNX: sets all the keys, or none when any of them exists (1 or 0). The check and the
/// writes happen under the stripe locks of all the keys, so they are one atomic step.
fn msetnx(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest = args.rest();
    if !rest.len().is_multiple_of(2) {
        return Err(CmdError::reply(
            "ERR wrong number of arguments for 'msetnx' command",
        ));
    }
    let pairs = string_pairs(ctx, rest);
    let keys: Vec<&[u8]> = pairs.iter().map(|(k, _)| *k).collect();
    let db = ctx.conn.db;
    let store = ctx.tx;
    for k in &keys {
        if store.get(db, k)?.is_some() {
            ctx.reply.int(0);
            return Ok(());
        }
    }
    let ops: Vec<(&[u8], Option<&Meta>)> = pairs.iter().map(|(k, m)| (*k, Some(m))).collect();
    store.write_many(db, &ops)?;
    for kv in rest.chunks(2) {
        notify(ctx, Class::String, "set", db, &kv[0]);
    }
    ctx.reply.int(1);
    Ok(())
}

/// LCS's options.
struct LcsOpts {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: u64,
}

/// One run of matching bytes: `a[a0..=a1]` equals `b[b0..=b1]`.
#[derive(Debug, PartialEq, Eq)]
struct Match {
    a0: usize,
    a1: usize,
    b0: usize,
    b1: usize,
}

/// The longest common subsequence of `a` and `b` by Redis's dynamic programme (a table of
/// (|a|+1)·(|b|+1) lengths, walked back from the end, preferring to step in `b` on ties),
/// so that the string and the ranges are the ones Redis picks: the subsequence and its
/// contiguous runs, last run first.
fn lcs_table(a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<Match>) {
    let w = b.len() + 1;
    let mut t = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let mut seq = Vec::with_capacity(t[a.len() * w + b.len()] as usize);
    let mut runs = Vec::new();
    let mut cur: Option<Match> = None;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            seq.push(a[i - 1]);
            match &mut cur {
                None => {
                    cur = Some(Match {
                        a0: i - 1,
                        a1: i - 1,
                        b0: j - 1,
                        b1: j - 1,
                    })
                }
                Some(r) if r.a0 == i && r.b0 == j => {
                    r.a0 -= 1;
                    r.b0 -= 1;
                }
                Some(_) => emit = true,
            }
            if cur.as_ref().is_some_and(|r| r.a0 == 0 || r.b0 == 0) {
                emit = true;
            }
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = cur.is_some();
        }
        if emit {
            runs.extend(cur.take());
        }
    }
    seq.reverse();
    (seq, runs)
}

fn lcs(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let ka = args.next_bytes()?;
    let kb = args.next_bytes()?;
    let db = ctx.conn.db;
    let (a, b) = {
        let store = ctx.tx;
        let a = store.lookup_read(db, &ka)?;
        let b = store.lookup_read(db, &kb)?;
        if [&a, &b]
            .iter()
            .any(|m| m.as_ref().is_some_and(|m| m.rtype != RType::String))
        {
            return Err(CmdError::reply(
                "ERR The specified keys must contain string values",
            ));
        }
        (
            a.map(|m| m.value).unwrap_or_default(),
            b.map(|m| m.value).unwrap_or_default(),
        )
    };
    let mut o = LcsOpts {
        len: false,
        idx: false,
        with_match_len: false,
        min_match_len: 0,
    };
    while let Some(opt) = args.next_keyword() {
        match opt.as_str() {
            "IDX" => o.idx = true,
            "LEN" => o.len = true,
            "WITHMATCHLEN" => o.with_match_len = true,
            "MINMATCHLEN" if !args.is_done() => o.min_match_len = args.next_i64()?.max(0) as u64,
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
    }
    if o.idx && o.len {
        return Err(CmdError::reply(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    if a.len() as u64 >= u64::from(u32::MAX - 1) || b.len() as u64 >= u64::from(u32::MAX - 1) {
        return Err(CmdError::reply("ERR String too long for LCS"));
    }
    // The table's size, bounded as Redis bounds it.
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells.saturating_mul(4) > ctx.shared.config.read().proto_max_bulk_len as u64 {
        return Err(CmdError::reply(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let (seq, runs) = lcs_table(&a, &b);
    if o.len {
        ctx.reply.int(seq.len() as i64);
    } else if !o.idx {
        ctx.reply.bulk(&seq);
    } else {
        let runs: Vec<&Match> = runs
            .iter()
            .filter(|r| (r.a1 - r.a0 + 1) as u64 >= o.min_match_len)
            .collect();
        ctx.reply.map(2);
        ctx.reply.bulk(b"matches");
        ctx.reply.array(runs.len());
        for r in runs {
            ctx.reply.array(if o.with_match_len { 3 } else { 2 });
            for (lo, hi) in [(r.a0, r.a1), (r.b0, r.b1)] {
                ctx.reply.array(2);
                ctx.reply.int(lo as i64);
                ctx.reply.int(hi as i64);
            }
            if o.with_match_len {
                ctx.reply.int((r.a1 - r.a0 + 1) as i64);
            }
        }
        ctx.reply.bulk(b"len");
        ctx.reply.int(seq.len() as i64);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcs_picks_redis_runs() {
        let (seq, runs) = lcs_table(b"ohmytext", b"mynewtext");
        assert_eq!(seq, b"mytext");
        let m = |a0, a1, b0, b1| Match { a0, a1, b0, b1 };
        assert_eq!(runs, vec![m(4, 7, 5, 8), m(2, 3, 0, 1)]);
        assert_eq!(lcs_table(b"", b"abc"), (vec![], vec![]));
        assert_eq!(lcs_table(b"abc", b"xyz").0, b"");
    }
}
