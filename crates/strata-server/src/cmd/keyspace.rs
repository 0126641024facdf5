//! Keyspace commands (Redis's db.c and expire.c): DEL, UNLINK, EXISTS, TYPE, the EXPIRE
//! family, TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST, KEYS, SCAN, RANDOMKEY, TOUCH,
//! RENAME, RENAMENX, COPY.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::table::traits::*;
use super::{cmd, cmd_with, Args, CmdError, CmdResult, Ctx, Entry};
use crate::cursor;
use crate::glob;
use crate::notify::{keyspace_event as notify, Class};
use crate::store::{now_ms, Meta, Writes};

pub static COMMANDS: &[Entry] = &[
    cmd("del", del),
    cmd("unlink", del),
    cmd("exists", exists),
    cmd("type", type_),
    cmd("expire", expire),
    cmd("pexpire", pexpire),
    cmd("expireat", expireat),
    cmd("pexpireat", pexpireat),
    cmd("ttl", ttl),
    cmd("pttl", pttl),
    cmd("persist", persist),
    cmd("keys", keys),
    cmd("expiretime", expiretime),
    cmd("pexpiretime", pexpiretime),
    cmd("touch", touch),
    cmd("randomkey", randomkey),
    cmd("scan", scan),
    cmd("rename", rename),
    cmd("renamenx", renamenx),
    cmd_with("copy", copy, CONNECTION_THREAD),
];

/// DEL and UNLINK (UNLINK frees memory in the background in Redis; here both just write
/// deletes, in one atomic batch).
fn del(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let given = args.rest();
    let mut keys: Vec<&[u8]> = given.iter().map(|k| &k[..]).collect();
    keys.sort_unstable();
    keys.dedup();
    let (db, store) = (ctx.conn.db, ctx.tx);
    let mut ops = Vec::new();
    for k in keys {
        if store.get(db, k)?.is_some() {
            ops.push((k, None));
        }
    }
    if !ops.is_empty() {
        store.write_many(db, &ops)?;
        // Events in the order the keys were given, each deleted key once.
        let mut left: std::collections::HashSet<&[u8]> = ops.iter().map(|(k, _)| *k).collect();
        for k in given {
            if left.remove(&k[..]) {
                notify(ctx, Class::Generic, "del", db, k);
            }
        }
    }
    ctx.reply.int(ops.len() as i64);
    Ok(())
}

fn exists(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    count_existing(ctx, args, false)
}

/// EXISTS and TOUCH: the number of keys that exist; TOUCH counts them as accessed.
fn count_existing(ctx: &mut Ctx<'_>, args: &mut Args, touch: bool) -> CmdResult {
    let (db, store) = (ctx.conn.db, ctx.tx);
    let mut n = 0;
    for k in args.rest() {
        let m = if touch {
            store.lookup_read(db, k)?
        } else {
            store.peek_read(db, k)?
        };
        if m.is_some() {
            n += 1;
        }
    }
    ctx.reply.int(n);
    Ok(())
}

fn type_(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let (db, store) = (ctx.conn.db, ctx.tx);
    let m = store.peek(db, &key)?;
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

    let (db, store) = (ctx.conn.db, ctx.tx);
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
    // A time already past deletes the key (Redis's `checkAlreadyExpired`, against the
    // command's start: a relative time is never past).
    let now = if basetime_ms != 0 {
        basetime_ms
    } else {
        now_ms() as i64
    };
    // Propagated as an absolute time (PEXPIREAT, the options kept), or as the deletion it
    // made (Redis 7.0's expireGenericCommand).
    let event = if when <= now {
        store.delete(db, &key)?;
        let unlink = ctx.lazyfree("lazyfree-lazy-expire");
        ctx.effects.rewrite(crate::effects::deletion(&key, unlink));
        "del"
    } else {
        m.expire_ms = when as u64;
        store.put(db, &key, &m)?;
        let mut argv: crate::effects::Argv = args.argv().iter().map(|a| a.to_vec()).collect();
        argv[0] = b"PEXPIREAT".to_vec();
        argv[2] = crate::effects::ms_arg(when);
        ctx.effects.rewrite(argv);
        "expire"
    };
    notify(ctx, Class::Generic, event, db, &key);
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
    let (db, store) = (ctx.conn.db, ctx.tx);
    let m = store.peek_read(db, &key)?;
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
    let (db, store) = (ctx.conn.db, ctx.tx);
    match store.get(db, &key)? {
        Some(mut m) if m.expire_ms != 0 => {
            m.expire_ms = 0;
            store.put(db, &key, &m)?;
            notify(ctx, Class::Generic, "persist", db, &key);
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
    ctx.tx.scan_db(ctx.conn.db, |k, _| {
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

/// EXPIRETIME and PEXPIRETIME (Redis's `ttlGenericCommand` with `output_abs`): -2 for a
/// missing key, -1 without expiry, else the absolute expiry (seconds rounded to nearest).
fn expiretime_generic(ctx: &mut Ctx<'_>, args: &mut Args, ms: bool) -> CmdResult {
    let key = args.next_bytes()?;
    let (db, store) = (ctx.conn.db, ctx.tx);
    let out = match store.peek_read(db, &key)? {
        None => -2,
        Some(m) if m.expire_ms == 0 => -1,
        Some(m) if ms => m.expire_ms as i64,
        // Redis adds 500 to a long long, which overflows near i64::MAX; the build of Redis
        // that is the specification replies as if it did not (the sum taken as unsigned).
        Some(m) => (m.expire_ms.saturating_add(500) / 1000) as i64,
    };
    ctx.reply.int(out);
    Ok(())
}

fn expiretime(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    expiretime_generic(ctx, args, false)
}

fn pexpiretime(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    expiretime_generic(ctx, args, true)
}

/// TOUCH: the number of the given keys that exist (repeats counted, as Redis). There is no
/// access time to update: no eviction policy reads one.
fn touch(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    count_existing(ctx, args, true)
}

fn randomkey(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let k = ctx.tx.random_key(ctx.conn.db)?;
    ctx.reply.opt_bulk(k.as_deref());
    Ok(())
}

fn rename(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    rename_generic(ctx, args, true)
}

/// RENAME and RENAMENX (Redis's `renameGenericCommand`): the value moves with its expiry;
/// the delete of the source and the write of the destination are one atomic batch, under
/// the stripes of both keys. A collection's member records hold its name, so they are
/// rewritten under the new one (O(members), where Redis's RENAME is O(1)).
fn rename_generic(ctx: &mut Ctx<'_>, args: &mut Args, nx: bool) -> CmdResult {
    let src = args.next_bytes()?;
    let dst = args.next_bytes()?;
    let (db, store) = (ctx.conn.db, ctx.tx);
    let Some(m) = store.get(db, &src)? else {
        return Err(CmdError::reply("ERR no such key"));
    };
    if src == dst {
        if nx {
            ctx.reply.int(0);
        } else {
            ctx.reply.ok();
        }
        return Ok(());
    }
    if nx && store.get(db, &dst)?.is_some() {
        ctx.reply.int(0);
        return Ok(());
    }
    // The destination is a new incarnation: its member records are rewritten under its
    // name, and a later RENAME back must not meet the members this name had before.
    let mut moved = m.clone();
    moved.version = store.next_version();
    let mut w = Writes::new();
    store.copy_members(&mut w, (db, &src), &m, (db, &dst), moved.version)?;
    w.meta(db, &src, None).meta(db, &dst, Some(&moved));
    let access = store.access.state(db, &src);
    store.apply(w)?;
    store.access.carry(db, &dst, access);
    notify(ctx, Class::Generic, "rename_from", db, &src);
    notify(ctx, Class::Generic, "rename_to", db, &dst);
    if nx {
        ctx.reply.int(1);
    } else {
        ctx.reply.ok();
    }
    Ok(())
}

/// COPY source destination [DB destination-db] [REPLACE] (Redis's `copyCommand`): the copy
/// is a new incarnation (a new version) with the source's value and expiry.
fn copy(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let src = args.next_bytes()?;
    let dst = args.next_bytes()?;
    let src_db = ctx.conn.db;
    let mut dst_db = src_db;
    let mut replace = false;
    while !args.is_done() {
        if args.eat("REPLACE") {
            replace = true;
        } else if args.remaining() >= 2 && args.eat("DB") {
            let n = args.next_i32()?;
            if ctx.shared.cluster.is_some() && n != 0 {
                return Err(CmdError::reply(
                    "ERR Copying to another database is not allowed in cluster mode",
                ));
            }
            if n < 0 || n as usize >= ctx.shared.config.read().databases {
                return Err(CmdError::reply("ERR DB index is out of range"));
            }
            dst_db = ctx.tx.dbs.physical(n as u8);
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    if src_db == dst_db && src == dst {
        return Err(CmdError::reply(
            "ERR source and destination objects are the same",
        ));
    }
    let store = ctx.tx;
    let Some(mut m) = store.get(src_db, &src)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    if !replace && store.get(dst_db, &dst)?.is_some() {
        ctx.reply.int(0);
        return Ok(());
    }
    let src_meta = m.clone();
    m.version = store.next_version();
    let mut w = Writes::new();
    store.copy_members(&mut w, (src_db, &src), &src_meta, (dst_db, &dst), m.version)?;
    w.meta(dst_db, &dst, Some(&m));
    store.apply(w)?;
    notify(ctx, Class::Generic, "copy_to", dst_db, &dst);
    ctx.reply.int(1);
    Ok(())
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]. COUNT keys are examined per
/// call (expired and filtered ones included: Redis too counts work, not results); the reply's
/// cursor is the position of the next key (`cursor.rs`).
fn scan(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let cursor =
        cursor::parse(&args.next_bytes()?).ok_or_else(|| CmdError::reply("ERR invalid cursor"))?;
    let mut count: usize = 10;
    let mut pattern: Option<bytes::Bytes> = None;
    let mut type_name: Option<bytes::Bytes> = None;
    while !args.is_done() {
        let more = args.remaining() >= 2;
        if more && args.eat("COUNT") {
            let n = args.next_i64()?;
            if n < 1 {
                return Err(CmdError::reply(ERR_SYNTAX));
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if more && args.eat("MATCH") {
            let p = args.next_bytes()?;
            pattern = (&p[..] != b"*").then_some(p);
        } else if more && args.eat("TYPE") {
            type_name = Some(args.next_bytes()?);
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    let db = ctx.conn.db;
    let (slot, bound) = ctx.shared.scan_bounds.resolve(db, cursor);
    let mut examined = 0usize;
    let mut prev: (u16, Vec<u8>) = (0, Vec::new());
    let mut next: Option<(u16, Vec<u8>)> = None;
    let mut out: Vec<Vec<u8>> = Vec::new();
    ctx.tx.scan_from(db, slot, &bound, |s, k, m| {
        if examined >= count {
            next = Some(cursor::between((prev.0, &prev.1), (s, k)));
            return false;
        }
        examined += 1;
        prev.0 = s;
        prev.1.clear();
        prev.1.extend_from_slice(k);
        let Some(m) = m else { return true };
        let type_ok = type_name
            .as_ref()
            .is_none_or(|t| t.eq_ignore_ascii_case(m.rtype.name().as_bytes()));
        let match_ok = pattern.as_ref().is_none_or(|p| glob::matches(p, k, false));
        if type_ok && match_ok {
            out.push(k.to_vec());
        }
        true
    })?;
    let next = next.map_or(0, |(s, b)| ctx.shared.scan_bounds.cursor(db, s, b));
    ctx.reply.array(2);
    ctx.reply.bulk(next.to_string().as_bytes());
    ctx.reply.array(out.len());
    for k in out {
        ctx.reply.bulk(&k);
    }
    Ok(())
}
