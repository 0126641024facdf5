//! String commands (Redis's t_string.c): GET, SET and its variants, GETEX, MGET, MSET,
//! MSETNX, APPEND, STRLEN, the INCR family, GETRANGE (and its old name SUBSTR), SETRANGE,
//! LCS: their arguments, replies, keyspace events and effects. The string type itself
//! (reads and writes through the command's transaction, the error cases) is `string.rs`.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::table::traits::{BLIND_WRITE, SNAPSHOT_READ};
use super::{cmd, cmd_with, Args, CmdError, CmdResult, Ctx, Entry};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::store::now_ms;
use crate::store::TypeError;
use crate::string::{self, ExpiryChange, SetOptions, Str, Ttl};
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

/// `proto-max-bulk-len`: how long a string may grow (parsed when set).
pub(super) fn max_len(ctx: &Ctx<'_>) -> u64 {
    ctx.shared.config.read().proto_max_bulk_len as u64
}

fn get(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let s = Str::open(ctx.tx, ctx.conn.db, &key)?;
    ctx.reply.opt_bulk(s.value());
    Ok(())
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

fn parse_set_opts(args: &mut Args) -> Result<SetOptions, CmdError> {
    let mut o = SetOptions::PLAIN;
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
fn propagate_set(ctx: &mut Ctx<'_>, argv: &[Bytes], key: &[u8], value: &[u8], o: &SetOptions) {
    if let Ttl::At(ms) = o.ttl {
        let ms = crate::effects::ms_arg(ms);
        ctx.effects
            .rewrite(crate::effects::argv([b"SET", key, value, b"PXAT", &ms[..]]));
        if o.ttl_passed() {
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

/// SET and its variants. Replies OK (or the old value with GET), or null when NX/XX fails.
/// `argv`: the command as called, for what it propagates.
fn set_generic(
    ctx: &mut Ctx<'_>,
    argv: &[Bytes],
    key: &[u8],
    value: Bytes,
    o: &SetOptions,
) -> CmdResult {
    let db = ctx.conn.db;
    let done = string::set(ctx.tx, db, key, &value, o)?;
    if done.written {
        propagate_set(ctx, argv, key, &value, o);
        // Redis sets the key, then its expiry: `set`, then `expire`; a time already past is
        // then expired (Redis deletes it as soon as it is looked at: `expired`).
        notify(ctx, Class::String, "set", db, key);
        if matches!(o.ttl, Ttl::At(_)) {
            notify(ctx, Class::Generic, "expire", db, key);
        }
        if done.expired {
            notify(ctx, Class::Expired, "expired", db, key);
        }
    }
    if o.get {
        ctx.reply.opt_bulk(done.old.as_deref());
    } else if done.written {
        ctx.reply.ok();
    } else {
        ctx.reply.null();
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
    let set = string::set_nx(ctx.tx, db, &key, &value)?;
    if set {
        notify(ctx, Class::String, "set", db, &key);
    }
    ctx.reply.int(i64::from(set));
    Ok(())
}

fn setex_generic(ctx: &mut Ctx<'_>, args: &mut Args, seconds: bool, cmd: &str) -> CmdResult {
    let key = args.next_bytes()?;
    let n = args.next_i64()?;
    let value = args.next_bytes()?;
    let at = expire_at_ms(n, seconds, true, cmd)?;
    let o = SetOptions {
        ttl: Ttl::At(at),
        ..SetOptions::PLAIN
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
    let o = SetOptions {
        get: true,
        ..SetOptions::PLAIN
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
    let old = Str::open(ctx.tx, db, &key)?.delete()?;
    if old.is_some() {
        notify(ctx, Class::Generic, "del", db, &key);
        let unlink = ctx.lazyfree("lazyfree-lazy-user-del");
        ctx.effects.rewrite(crate::effects::deletion(&key, unlink));
    }
    ctx.reply.opt_bulk(old.as_deref());
    Ok(())
}

fn mget(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let keys: Vec<&[u8]> = args.rest().iter().map(|k| &k[..]).collect();
    let values = string::mget(ctx.tx, ctx.conn.db, &keys)?;
    ctx.reply.array(values.len());
    for v in values {
        ctx.reply.opt_bulk(v.as_deref());
    }
    Ok(())
}

/// MSET's and MSETNX's pairs: an even number of arguments after the name.
fn pairs<'a>(args: &'a mut Args, name: &str) -> Result<&'a [Bytes], CmdError> {
    let rest = args.rest();
    if !rest.len().is_multiple_of(2) {
        return Err(CmdError::reply(format!(
            "ERR wrong number of arguments for '{name}' command"
        )));
    }
    Ok(rest)
}

fn mset(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest = pairs(args, "mset")?;
    string::mset(ctx.tx, ctx.conn.db, rest)?;
    // One event per pair given, a repeated key included, as Redis.
    for kv in rest.chunks(2) {
        notify(ctx, Class::String, "set", ctx.conn.db, &kv[0]);
    }
    ctx.reply.ok();
    Ok(())
}

/// MSETNX: sets all the keys, or none when any of them exists (1 or 0).
fn msetnx(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest = pairs(args, "msetnx")?;
    let db = ctx.conn.db;
    let set = string::msetnx(ctx.tx, db, rest)?;
    if set {
        for kv in rest.chunks(2) {
            notify(ctx, Class::String, "set", db, &kv[0]);
        }
    }
    ctx.reply.int(i64::from(set));
    Ok(())
}

fn append(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let tail = args.next_bytes()?;
    let max = max_len(ctx);
    let len = Str::open(ctx.tx, ctx.conn.db, &key)?.append(&tail, max)?;
    notify(ctx, Class::String, "append", ctx.conn.db, &key);
    ctx.reply.int(len as i64);
    Ok(())
}

fn strlen(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let s = Str::open(ctx.tx, ctx.conn.db, &key)?;
    ctx.reply.int(s.len() as i64);
    Ok(())
}

fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> CmdResult {
    let n = Str::open(ctx.tx, ctx.conn.db, key)?.incr_by(by)?;
    notify(ctx, Class::String, "incrby", ctx.conn.db, key);
    ctx.reply.int(n);
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

/// INCRBYFLOAT: the increment is parsed by the type (after the key's type and value, as
/// Redis orders the checks).
fn incrbyfloat(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let by = args.next_bytes()?;
    let out = Str::open(ctx.tx, ctx.conn.db, &key)?.incr_by_float(&by)?;
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
    let start = args.next_i64()?;
    let end = args.next_i64()?;
    let s = Str::open(ctx.tx, ctx.conn.db, &key)?;
    ctx.reply
        .bulk(string::range(s.value().unwrap_or_default(), start, end));
    Ok(())
}

fn setrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let offset = args.next_i64()?;
    let patch = args.next_bytes()?;
    if offset < 0 {
        return Err(CmdError::reply("ERR offset is out of range"));
    }
    let max = max_len(ctx);
    let len = Str::open(ctx.tx, ctx.conn.db, &key)?.set_range(offset as u64, &patch, max)?;
    if !patch.is_empty() {
        notify(ctx, Class::String, "setrange", ctx.conn.db, &key);
    }
    ctx.reply.int(len as i64);
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
    let mut s = Str::open(ctx.tx, db, &key)?;
    let Some(value) = s.value().map(<[u8]>::to_vec) else {
        ctx.reply.null();
        return Ok(());
    };
    let at = match &expire {
        Some((opt, v)) => {
            let n = parse_i64(v).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?;
            let at = expire_at_ms(n, opt.starts_with('E'), !opt.ends_with("AT"), "getex")?;
            Some(at as u64)
        }
        None => None,
    };
    let change = match at {
        Some(_) => s.change_expiry(at)?,
        None if persist => s.change_expiry(None)?,
        None => ExpiryChange::None,
    };
    let event = match change {
        ExpiryChange::Deleted => {
            let unlink = ctx.lazyfree("lazyfree-lazy-expire");
            ctx.effects.rewrite(crate::effects::deletion(&key, unlink));
            Some("del")
        }
        ExpiryChange::Set => {
            let ms = crate::effects::ms_arg(at.unwrap_or_default() as i64);
            ctx.effects
                .rewrite(crate::effects::argv([&b"PEXPIREAT"[..], &key, &ms]));
            Some("expire")
        }
        ExpiryChange::Persisted => {
            ctx.effects
                .rewrite(crate::effects::argv([&b"PERSIST"[..], &key]));
            Some("persist")
        }
        ExpiryChange::None => None,
    };
    if let Some(event) = event {
        notify(ctx, Class::Generic, event, db, &key);
    }
    ctx.reply.bulk(&value);
    Ok(())
}

/// LCS's options.
struct LcsOpts {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: u64,
}

fn lcs(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let ka = args.next_bytes()?;
    let kb = args.next_bytes()?;
    let db = ctx.conn.db;
    let (a, b) = match string::lcs_values(ctx.tx, db, &ka, &kb) {
        Err(TypeError::WrongType) => {
            return Err(CmdError::reply(
                "ERR The specified keys must contain string values",
            ))
        }
        r => r?,
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
    if cells.saturating_mul(4) > max_len(ctx) {
        return Err(CmdError::reply(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let (seq, runs) = string::lcs(&a, &b);
    if o.len {
        ctx.reply.int(seq.len() as i64);
    } else if !o.idx {
        ctx.reply.bulk(&seq);
    } else {
        let runs: Vec<&string::Match> = runs
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
