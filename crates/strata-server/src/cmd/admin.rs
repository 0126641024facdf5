//! Introspection commands: SLOWLOG, MEMORY, OBJECT, LASTSAVE.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::{cmd, reply_help, Args, CmdError, CmdResult, Ctx, Entry};
use crate::protocol::parse::parse_i64;
use crate::store::{now_ms, Meta, RType};

pub static COMMANDS: &[Entry] = &[
    cmd("slowlog|get", slowlog_get),
    cmd("slowlog|len", slowlog_len),
    cmd("slowlog|reset", slowlog_reset),
    cmd("slowlog|help", slowlog_help),
    cmd("memory|usage", memory_usage),
    cmd("memory|help", memory_help),
    cmd("object|encoding", object_encoding),
    cmd("object|freq", object_freq),
    cmd("object|idletime", object_idletime),
    cmd("object|refcount", object_refcount),
    cmd("object|help", object_help),
    cmd("lastsave", lastsave),
];

fn slowlog_get(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    const ERR_COUNT: &str = "ERR count should be greater than or equal to -1";
    let count = match args.remaining() {
        0 => Some(10),
        1 => match parse_i64(&args.next_bytes()?) {
            Some(-1) => None,
            Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => return Err(CmdError::reply(ERR_COUNT)),
        },
        _ => {
            return Err(CmdError::reply(
                "ERR unknown subcommand or wrong number of arguments for 'get'. Try SLOWLOG \
                 HELP.",
            ))
        }
    };
    let entries = ctx.shared.slowlog.get(count);
    let r = &mut *ctx.reply;
    r.array(entries.len());
    for e in entries {
        r.array(6);
        r.int(e.id as i64);
        r.int(e.time as i64);
        r.int(e.micros as i64);
        r.array(e.argv.len());
        for a in &e.argv {
            r.bulk(a);
        }
        r.bulk(e.addr.as_bytes());
        r.bulk(&e.name);
    }
    Ok(())
}

fn slowlog_len(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.int(ctx.shared.slowlog.len() as i64);
    Ok(())
}

fn slowlog_reset(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.shared.slowlog.reset();
    ctx.reply.ok();
    Ok(())
}

fn slowlog_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

/// Bytes a string key costs beyond its key and value: Redis counts a dict entry, the key's
/// and value's object headers and allocator rounding; for the record here it is the
/// metadata header and the engine's per-entry overhead. An estimate, as Redis's is.
const KEY_OVERHEAD_BYTES: u64 = 48;

/// Estimated bytes `key` and its value take. Hashes and sets: the average of `samples`
/// member records (0: all) times their count, plus a per-member overhead, as Redis samples
/// nested values.
fn usage_of(ctx: &Ctx<'_>, key: &[u8], m: &Meta, samples: u64) -> Result<u64, CmdError> {
    let base = KEY_OVERHEAD_BYTES + key.len() as u64 + m.value.len() as u64;
    if !matches!(m.rtype, RType::Hash | RType::Set) || m.size == 0 {
        return Ok(base);
    }
    let (mut seen, mut bytes) = (0u64, 0u64);
    super::members::for_each(ctx.tx, ctx.conn.db, key, m, |k, v| {
        seen += 1;
        bytes += (k.len() + v.len()) as u64;
        samples == 0 || seen < samples
    })?;
    let avg = bytes.checked_div(seen).unwrap_or(0);
    Ok(base + m.size * (avg + MEMBER_OVERHEAD_BYTES))
}

/// Bytes a hash field or set member costs beyond its bytes (Redis: a listpack entry's
/// header, or a dict entry and its string headers; here: the record key's prefix).
const MEMBER_OVERHEAD_BYTES: u64 = 16;

fn memory_usage(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let mut samples = 5u64;
    while !args.is_done() {
        if args.eat("SAMPLES") && !args.is_done() {
            let n = args.next_i64()?;
            if n < 0 {
                return Err(CmdError::reply(ERR_SYNTAX));
            }
            samples = n as u64;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    let (db, store) = (ctx.conn.db, ctx.tx);
    match store.peek(db, &key)? {
        Some(m) => {
            let n = usage_of(ctx, &key, &m, samples)?;
            ctx.reply.int(n as i64)
        }
        None => ctx.reply.null(),
    }
    Ok(())
}

fn memory_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}

/// Redis's `tryObjectEncoding` test: at most 20 bytes, and the canonical decimal form of
/// an i64 (`string2l`: no sign but '-', no leading zeros, no "-0").
fn is_int_encoded(v: &[u8]) -> Option<i64> {
    if v.len() > 20 {
        return None;
    }
    let n = parse_i64(v)?;
    (n.to_string().as_bytes() == v).then_some(n)
}

/// Redis's `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`.
const EMBSTR_MAX_BYTES: usize = 44;

/// The encoding Redis would give a string value set by SET.
pub fn string_encoding(v: &[u8]) -> &'static str {
    if is_int_encoded(v).is_some() {
        "int"
    } else if v.len() <= EMBSTR_MAX_BYTES {
        "embstr"
    } else {
        "raw"
    }
}

/// The key's metadata, or a null reply (Redis's `objectCommandLookupOrReply`).
fn object_lookup(ctx: &mut Ctx<'_>, args: &mut Args) -> Result<Option<Meta>, CmdError> {
    let key = args.next_bytes()?;
    let (db, store) = (ctx.conn.db, ctx.tx);
    let m = store.peek(db, &key)?;
    if m.is_none() {
        ctx.reply.null();
    }
    Ok(m)
}

/// OBJECT FREQ and IDLETIME: the key's access state, or a null reply.
fn object_access(
    ctx: &mut Ctx<'_>,
    args: &mut Args,
) -> Result<Option<crate::access::Access>, CmdError> {
    let key = args.next_bytes()?;
    let (db, store) = (ctx.conn.db, ctx.tx);
    if store.peek(db, &key)?.is_none() {
        ctx.reply.null();
        return Ok(None);
    }
    Ok(Some(store.access.get(db, &key, now_ms())))
}

fn object_encoding(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if let Some(m) = object_lookup(ctx, args)? {
        let enc = match m.rtype {
            // Redis 7.0's only list encoding.
            crate::store::RType::List => "quicklist",
            crate::store::RType::ZSet => crate::zset::encoding(&m),
            crate::store::RType::Stream => "stream",
            _ => super::members::encoding(&m).unwrap_or_else(|| string_encoding(&m.value)),
        };
        ctx.reply.bulk(enc.as_bytes());
    }
    Ok(())
}

fn maxmemory_policy(ctx: &Ctx<'_>) -> String {
    ctx.shared
        .config
        .read()
        .get("maxmemory-policy")
        .unwrap_or_default()
}

/// OBJECT FREQ: Redis's error unless an LFU policy is set; with one, the key's logarithmic
/// access counter after the decay due now (`access.rs`).
fn object_freq(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if let Some(a) = object_access(ctx, args)? {
        if !maxmemory_policy(ctx).ends_with("-lfu") {
            return Err(CmdError::reply(
                "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
                 Please note that when switching between policies at runtime LRU and LFU data \
                 will take some time to adjust.",
            ));
        }
        ctx.reply.int(i64::from(a.freq));
    }
    Ok(())
}

/// OBJECT IDLETIME: seconds since the key's last access (`access.rs`); Redis's error under
/// an LFU policy.
fn object_idletime(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if let Some(a) = object_access(ctx, args)? {
        if maxmemory_policy(ctx).ends_with("-lfu") {
            return Err(CmdError::reply(
                "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note \
                 that when switching between policies at runtime LRU and LFU data will take \
                 some time to adjust.",
            ));
        }
        ctx.reply.int(a.idle_secs as i64);
    }
    Ok(())
}

/// OBJECT REFCOUNT as Redis reports it: its shared integers 0..9999 (used while no LRU/LFU
/// policy with a maxmemory is set) report `INT_MAX`, other values 1.
fn object_refcount(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if let Some(m) = object_lookup(ctx, args)? {
        let (maxmemory, policy) = {
            let c = ctx.shared.config.read();
            (
                c.get("maxmemory").unwrap_or_default(),
                c.get("maxmemory-policy").unwrap_or_default(),
            )
        };
        let shares = maxmemory == "0" || !(policy.contains("lru") || policy.contains("lfu"));
        let shared_int = is_int_encoded(&m.value).is_some_and(|n| (0..10000).contains(&n));
        ctx.reply.int(if shares && shared_int {
            i64::from(i32::MAX)
        } else {
            1
        });
    }
    Ok(())
}

fn object_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    );
    Ok(())
}

fn lastsave(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.int(ctx.shared.saves.last_save_unix() as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_follow_try_object_encoding() {
        assert_eq!(string_encoding(b"123"), "int");
        assert_eq!(string_encoding(b"-5"), "int");
        assert_eq!(string_encoding(b"9223372036854775807"), "int");
        assert_eq!(string_encoding(b"9223372036854775808"), "embstr");
        assert_eq!(string_encoding(b"0123"), "embstr");
        assert_eq!(string_encoding(b"-0"), "embstr");
        assert_eq!(string_encoding(b"+1"), "embstr");
        assert_eq!(string_encoding(b" 1"), "embstr");
        assert_eq!(string_encoding(&[b'a'; 44]), "embstr");
        assert_eq!(string_encoding(&[b'a'; 45]), "raw");
        assert_eq!(string_encoding(b""), "embstr");
    }
}
