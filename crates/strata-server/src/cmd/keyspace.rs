//! Keyspace commands (Redis's db.c and expire.c): DEL, UNLINK, EXISTS, TYPE, the EXPIRE
//! family, TTL, PTTL, PERSIST, KEYS.

use super::flag::*;
use super::{Args, CmdError, CmdResult, Ctx, Spec};
use crate::glob;
use crate::store::{now_ms, Meta};

macro_rules! key_cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $since:literal, $summary:literal, $h:expr) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: $keys,
            group: "generic",
            since: $since,
            summary: $summary,
            handler: $h,
            subcommands: &[],
        }
    };
}

pub static COMMANDS: &[Spec] = &[
    key_cmd!(
        "del",
        -2,
        WRITE,
        (1, -1, 1),
        "1.0.0",
        "Deletes one or more keys.",
        del
    ),
    key_cmd!(
        "unlink",
        -2,
        WRITE | FAST,
        (1, -1, 1),
        "4.0.0",
        "Asynchronously deletes one or more keys.",
        del
    ),
    key_cmd!(
        "exists",
        -2,
        READONLY | FAST,
        (1, -1, 1),
        "1.0.0",
        "Determines whether one or more keys exist.",
        exists
    ),
    key_cmd!(
        "type",
        2,
        READONLY | FAST,
        (1, 1, 1),
        "1.0.0",
        "Determines the type of value stored at a key.",
        type_
    ),
    key_cmd!(
        "expire",
        -3,
        WRITE | FAST,
        (1, 1, 1),
        "1.0.0",
        "Sets the expiration time of a key in seconds.",
        expire
    ),
    key_cmd!(
        "pexpire",
        -3,
        WRITE | FAST,
        (1, 1, 1),
        "2.6.0",
        "Sets the expiration time of a key in milliseconds.",
        pexpire
    ),
    key_cmd!(
        "expireat",
        -3,
        WRITE | FAST,
        (1, 1, 1),
        "1.2.0",
        "Sets the expiration time of a key to a Unix timestamp.",
        expireat
    ),
    key_cmd!(
        "pexpireat",
        -3,
        WRITE | FAST,
        (1, 1, 1),
        "2.6.0",
        "Sets the expiration time of a key to a Unix milliseconds timestamp.",
        pexpireat
    ),
    key_cmd!(
        "ttl",
        2,
        READONLY | FAST,
        (1, 1, 1),
        "1.0.0",
        "Returns the expiration time in seconds of a key.",
        ttl
    ),
    key_cmd!(
        "pttl",
        2,
        READONLY | FAST,
        (1, 1, 1),
        "2.6.0",
        "Returns the expiration time in milliseconds of a key.",
        pttl
    ),
    key_cmd!(
        "persist",
        2,
        WRITE | FAST,
        (1, 1, 1),
        "2.2.0",
        "Removes the expiration time of a key.",
        persist
    ),
    key_cmd!(
        "keys",
        2,
        READONLY,
        (0, 0, 0),
        "1.0.0",
        "Returns all key names that match a pattern.",
        keys
    ),
];

/// DEL and UNLINK (UNLINK frees memory in the background in Redis; here both just write
/// deletes, in one atomic batch).
fn del(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let mut keys: Vec<&[u8]> = args.rest().iter().map(|k| &k[..]).collect();
    keys.sort_unstable();
    keys.dedup();
    let (db, store) = (ctx.conn.db, &ctx.shared.store);
    let _g = store.lock(db, &keys);
    let mut ops = Vec::new();
    for k in keys {
        if store.get(db, k)?.is_some() {
            ops.push((k, None));
        }
    }
    if !ops.is_empty() {
        store.write_many(db, &ops)?;
    }
    ctx.reply.int(ops.len() as i64);
    Ok(())
}

fn exists(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let (db, store) = (ctx.conn.db, &ctx.shared.store);
    let mut n = 0;
    for k in args.rest() {
        let _g = store.lock(db, &[k]);
        if store.lookup_read(db, k)?.is_some() {
            n += 1;
        }
    }
    ctx.reply.int(n);
    Ok(())
}

fn type_(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let (db, store) = (ctx.conn.db, &ctx.shared.store);
    let _g = store.lock(db, &[&key]);
    let m = store.get(db, &key)?;
    ctx.reply.simple(m.map_or("none", |m| m.rtype.name()));
    Ok(())
}

/// Redis's `expireGenericCommand`: `basetime` is added to the argument (now for relative
/// forms, 0 for the AT forms); `cmd` names the command in errors.
fn expire_generic(
    ctx: &mut Ctx<'_>,
    args: &mut Args,
    basetime_ms: i64,
    seconds: bool,
    cmd: &str,
) -> CmdResult {
    let key = args.next_bytes()?;
    let when_arg = args.next_bytes()?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    while !args.is_done() {
        let opt = args.next_bytes()?;
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                let mut msg = b"ERR Unsupported option ".to_vec();
                msg.extend_from_slice(super::cstr(&opt, usize::MAX));
                return Err(CmdError::reply_bytes(msg));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::reply(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CmdError::reply(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let mut when = crate::protocol::parse::parse_i64(&when_arg)
        .ok_or_else(|| CmdError::reply(super::args::ERR_NOT_INT))?;
    let invalid = || CmdError::reply(format!("ERR invalid expire time in '{cmd}' command"));
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return Err(invalid());
        }
        when *= 1000;
    }
    if when > i64::MAX - basetime_ms {
        return Err(invalid());
    }
    when += basetime_ms;

    let (db, store) = (ctx.conn.db, &ctx.shared.store);
    let _g = store.lock(db, &[&key]);
    let Some(mut m) = store.get(db, &key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    // Current expiry; none counts as infinite for GT and LT.
    let cur = (m.expire_ms != 0).then_some(m.expire_ms as i64);
    let refused = (nx && cur.is_some())
        || (xx && cur.is_none())
        || (gt && cur.is_none_or(|c| when <= c))
        || (lt && cur.is_some_and(|c| when >= c));
    if refused {
        ctx.reply.int(0);
        return Ok(());
    }
    if when <= now_ms() as i64 {
        store.delete(db, &key)?;
    } else {
        m.expire_ms = when as u64;
        store.put(db, &key, &m)?;
    }
    ctx.reply.int(1);
    Ok(())
}

fn expire(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    expire_generic(ctx, args, now_ms() as i64, true, "expire")
}

fn pexpire(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    expire_generic(ctx, args, now_ms() as i64, false, "pexpire")
}

fn expireat(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    expire_generic(ctx, args, 0, true, "expireat")
}

fn pexpireat(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    expire_generic(ctx, args, 0, false, "pexpireat")
}

/// TTL in ms: -2 for a missing key, -1 for a key without expiry.
fn ttl_ms(ctx: &mut Ctx<'_>, args: &mut Args) -> Result<(Option<Meta>, i64), CmdError> {
    let key = args.next_bytes()?;
    let (db, store) = (ctx.conn.db, &ctx.shared.store);
    let _g = store.lock(db, &[&key]);
    let m = store.lookup_read(db, &key)?;
    let t = match &m {
        None => -2,
        Some(m) if m.expire_ms == 0 => -1,
        Some(m) => (m.expire_ms as i64 - now_ms() as i64).max(0),
    };
    Ok((m, t))
}

fn ttl(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let (m, t) = ttl_ms(ctx, args)?;
    let out = match m {
        Some(m) if m.expire_ms != 0 => (t + 500) / 1000,
        _ => t,
    };
    ctx.reply.int(out);
    Ok(())
}

fn pttl(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let (_, t) = ttl_ms(ctx, args)?;
    ctx.reply.int(t);
    Ok(())
}

fn persist(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let (db, store) = (ctx.conn.db, &ctx.shared.store);
    let _g = store.lock(db, &[&key]);
    match store.get(db, &key)? {
        Some(mut m) if m.expire_ms != 0 => {
            m.expire_ms = 0;
            store.put(db, &key, &m)?;
            ctx.reply.int(1);
        }
        _ => ctx.reply.int(0),
    }
    Ok(())
}

/// KEYS: scans the whole database (as Redis does); the order is the store's (slot, then
/// key), not Redis's hash-table order, which no client may rely on.
fn keys(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let pattern = args.next_bytes()?;
    let all = &pattern[..] == b"*";
    let mut out: Vec<Vec<u8>> = Vec::new();
    ctx.shared.store.scan_db(ctx.conn.db, |k, _| {
        if all || glob::matches(&pattern, k, false) {
            out.push(k.to_vec());
        }
    })?;
    ctx.reply.array(out.len());
    for k in out {
        ctx.reply.bulk(&k);
    }
    Ok(())
}
