//! Consumer-group commands (Redis's t_stream.c): XGROUP CREATE, SETID, DESTROY,
//! CREATECONSUMER, DELCONSUMER, HELP; XACK, XPENDING, XCLAIM, XAUTOCLAIM. A group's
//! pending entries are one record each (`crate::stream`), so an XACK or XCLAIM writes only
//! the entries it changes.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::streams::{
    id_arg, int_arg, read_stream, reply_entry, reply_id, strict_id_arg, write_stream,
};
use super::{reply_help, Args, CmdError, CmdResult, Ctx};
use crate::protocol::reply::ReplyBuf;
use crate::store::{now_ms, Tx, Writes};
use crate::stream::{Consumer, Group, PelEntry, Stream, StreamId};
use bytes::Bytes;
use std::collections::{BTreeMap, HashSet};

fn quoted(parts: &[&[u8]]) -> CmdError {
    CmdError::reply_bytes(parts.concat())
}

/// `NOGROUP No such key '<key>' or consumer group '<group>'` (XPENDING, XCLAIM, ...).
fn no_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    quoted(&[
        b"NOGROUP No such key '",
        key,
        b"' or consumer group '",
        group,
        b"'",
    ])
}

/// Redis's `addReplySubcommandSyntaxError` for XGROUP.
fn subcommand_syntax(args: &Args) -> CmdError {
    let sub = args.sent(1).map_or(&b""[..], |b| &b[..]);
    quoted(&[
        b"ERR unknown subcommand or wrong number of arguments for '",
        super::cstr(sub, 128),
        b"'. Try XGROUP HELP.",
    ])
}

/// The stream and (unless `mkstream`) group an XGROUP subcommand works on: Redis checks the
/// key, then that the group exists for the subcommands that need it.
fn xgroup_target(
    ctx: &Ctx<'_>,
    key: &[u8],
    group: &[u8],
    need_group: bool,
    mkstream: bool,
) -> Result<(Option<Stream>, Option<Group>), CmdError> {
    let s = write_stream(ctx, key)?;
    if mkstream {
        return Ok((s, None));
    }
    let Some(s) = s else {
        return Err(CmdError::reply("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
    };
    let g = s.group(ctx.tx, group)?;
    if g.is_none() && need_group {
        return Err(quoted(&[
            b"NOGROUP No such consumer group '",
            group,
            b"' for key name '",
            key,
            b"'",
        ]));
    }
    Ok((Some(s), g))
}

/// The options after `<id>` of CREATE (MKSTREAM allowed) and SETID: (mkstream,
/// entries_read, -1 when not given).
fn group_options(args: &Args, a: &[Bytes], create: bool) -> Result<(bool, i64), CmdError> {
    let (mut mkstream, mut read) = (false, -1i64);
    let mut i = 3;
    while i < a.len() {
        if create && a[i].eq_ignore_ascii_case(b"mkstream") {
            mkstream = true;
            i += 1;
        } else if a[i].eq_ignore_ascii_case(b"entriesread") && i + 1 < a.len() {
            read = int_arg(&a[i + 1])?;
            if read < 0 && read != -1 {
                return Err(CmdError::reply(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            i += 2;
        } else {
            return Err(subcommand_syntax(args));
        }
    }
    Ok((mkstream, read))
}

fn entries_read(n: i64) -> Option<u64> {
    u64::try_from(n).ok()
}

/// The keyspace event of an XGROUP subcommand (Redis's names, class `t`).
fn event(ctx: &Ctx<'_>, name: &str, key: &[u8]) {
    let db = ctx.conn.db;
    crate::notify::keyspace_event(ctx, crate::notify::Class::Stream, name, db, key);
}

pub(super) fn create(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let (mkstream, read) = group_options(args, &a, true)?;
    if a.len() > 6 {
        return Err(subcommand_syntax(args));
    }
    let (key, name) = (&a[0], &a[1]);
    let (store, db) = (ctx.tx, ctx.conn.db);
    let (s, _) = xgroup_target(ctx, key, name, false, mkstream)?;
    let id = if &a[2][..] == b"$" {
        s.as_ref().map_or(StreamId::MIN, |s| s.info.last_id)
    } else {
        strict_id_arg(&a[2], 0)?
    };
    let mut w = Writes::new();
    let mut s = match s {
        Some(s) => s,
        None => {
            let mut s = Stream::create(db, key, store.next_version());
            s.put_meta(&mut w);
            s
        }
    };
    if s.group(store, name)?.is_some() {
        return Err(CmdError::reply(
            "BUSYGROUP Consumer Group name already exists",
        ));
    }
    s.put_group(
        &mut w,
        name,
        &Group {
            last_id: id,
            entries_read: entries_read(read),
        },
    );
    // The metadata is written again so that the key counts as modified (WATCH).
    s.put_meta(&mut w);
    store.apply(w)?;
    event(ctx, "xgroup-create", key);
    ctx.reply.ok();
    Ok(())
}

pub(super) fn setid(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    if a.len() != 3 && a.len() != 5 {
        return Err(subcommand_syntax(args));
    }
    let (_, read) = group_options(args, &a, false)?;
    let (key, name) = (&a[0], &a[1]);
    let store = ctx.tx;
    let (s, _) = xgroup_target(ctx, key, name, true, false)?;
    let Some(s) = s else {
        return Err(CmdError::reply(ERR_SYNTAX));
    };
    let id = if &a[2][..] == b"$" {
        s.info.last_id
    } else {
        id_arg(&a[2], 0)?
    };
    let mut w = Writes::new();
    s.put_group(
        &mut w,
        name,
        &Group {
            last_id: id,
            entries_read: entries_read(read),
        },
    );
    store.apply(w)?;
    event(ctx, "xgroup-setid", key);
    ctx.reply.ok();
    Ok(())
}

pub(super) fn destroy(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    if a.len() != 2 {
        return Err(subcommand_syntax(args));
    }
    let store = ctx.tx;
    let (s, g) = xgroup_target(ctx, &a[0], &a[1], false, false)?;
    let (Some(s), Some(_)) = (s, g) else {
        ctx.reply.int(0);
        return Ok(());
    };
    let mut w = Writes::new();
    s.delete_group(store, &mut w, &a[1])?;
    store.apply(w)?;
    event(ctx, "xgroup-destroy", &a[0]);
    ctx.reply.int(1);
    Ok(())
}

pub(super) fn createconsumer(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    if a.len() != 3 {
        return Err(subcommand_syntax(args));
    }
    let store = ctx.tx;
    let (s, _) = xgroup_target(ctx, &a[0], &a[1], true, false)?;
    let Some(s) = s else {
        return Err(CmdError::reply(ERR_SYNTAX));
    };
    if s.consumer(store, &a[1], &a[2])?.is_some() {
        ctx.reply.int(0);
        return Ok(());
    }
    let mut w = Writes::new();
    s.put_consumer(&mut w, &a[1], &a[2], &Consumer { seen_ms: now_ms() });
    store.apply(w)?;
    event(ctx, "xgroup-createconsumer", &a[0]);
    ctx.reply.int(1);
    Ok(())
}

pub(super) fn delconsumer(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    if a.len() != 3 {
        return Err(subcommand_syntax(args));
    }
    let store = ctx.tx;
    let (s, _) = xgroup_target(ctx, &a[0], &a[1], true, false)?;
    let Some(s) = s else {
        return Err(CmdError::reply(ERR_SYNTAX));
    };
    if s.consumer(store, &a[1], &a[2])?.is_none() {
        ctx.reply.int(0);
        return Ok(());
    }
    let mut w = Writes::new();
    let pending = s.delete_consumer(store, &mut w, &a[1], &a[2])?;
    store.apply(w)?;
    event(ctx, "xgroup-delconsumer", &a[0]);
    ctx.reply.int(pending as i64);
    Ok(())
}

pub(super) fn help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
    Ok(())
}

pub(super) fn xack(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let (key, g) = (&a[0], &a[1]);
    let store = ctx.tx;
    let s = read_stream(ctx, key)?;
    let Some(s) = s.filter(|s| s.group(store, g).ok().flatten().is_some()) else {
        ctx.reply.int(0);
        return Ok(());
    };
    let ids = a[2..]
        .iter()
        .map(|b| strict_id_arg(b, 0))
        .collect::<Result<Vec<_>, _>>()?;
    let mut w = Writes::new();
    let mut seen = HashSet::new();
    let mut acked = 0;
    for id in ids {
        if !seen.insert(id) {
            continue;
        }
        if let Some(e) = s.pel_get(store, g, id)? {
            s.pel_delete(&mut w, g, id, &e.consumer);
            acked += 1;
        }
    }
    store.apply(w)?;
    ctx.reply.int(acked);
    Ok(())
}

/// An exclusive-capable range bound of XPENDING and XAUTOCLAIM.
fn bound(b: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, CmdError> {
    let (id, ex) = if b.len() > 1 && b[0] == b'(' {
        (strict_id_arg(&b[1..], missing_seq)?, true)
    } else {
        (id_arg(b, missing_seq)?, false)
    };
    if !ex {
        return Ok(id);
    }
    let moved = if start { id.incr() } else { id.decr() };
    moved.ok_or_else(|| {
        CmdError::reply(if start {
            "ERR invalid start ID for the interval"
        } else {
            "ERR invalid end ID for the interval"
        })
    })
}

pub(super) fn xpending(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let (key, g) = (&a[0], &a[1]);
    let argc = a.len() + 1;
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    let mut range = None;
    if argc >= 6 {
        let mut at = 2;
        let mut minidle = 0;
        if a[2].eq_ignore_ascii_case(b"idle") {
            minidle = int_arg(&a[3])?;
            if argc < 8 {
                return Err(CmdError::reply(ERR_SYNTAX));
            }
            at += 2;
        }
        let count = int_arg(&a[at + 2])?.max(0) as u64;
        let start = bound(&a[at], 0, true)?;
        let end = bound(&a[at + 1], u64::MAX, false)?;
        let consumer = a.get(at + 3).cloned();
        range = Some((minidle, start, end, count, consumer));
    }
    let store = ctx.tx;
    let s = read_stream(ctx, key)?;
    let Some(s) = s.filter(|s| s.group(store, g).ok().flatten().is_some()) else {
        return Err(no_key_or_group(key, g));
    };
    let Some((minidle, start, end, mut count, consumer)) = range else {
        return pending_summary(store, &s, g, ctx.reply);
    };
    if let Some(c) = &consumer {
        if s.consumer(store, g, c)?.is_none() {
            ctx.reply.array(0);
            return Ok(());
        }
    }
    let now = now_ms();
    let mut rows: Vec<(StreamId, PelEntry)> = Vec::new();
    match &consumer {
        Some(c) => {
            for id in s.consumer_pending(store, g, c, start, end, 0)? {
                if count == 0 {
                    break;
                }
                if let Some(e) = s.pel_get(store, g, id)? {
                    if minidle == 0 || idle(now, &e) >= minidle {
                        rows.push((id, e));
                        count -= 1;
                    }
                }
            }
        }
        None => s.pel_range(store, g, start, end, false, |id, e| {
            if count == 0 {
                return false;
            }
            if minidle == 0 || idle(now, &e) >= minidle {
                rows.push((id, e));
                count -= 1;
            }
            true
        })?,
    }
    ctx.reply.array(rows.len());
    for (id, e) in rows {
        ctx.reply.array(4);
        reply_id(ctx.reply, id);
        ctx.reply.bulk(&e.consumer);
        ctx.reply.int(idle(now, &e).max(0));
        ctx.reply.int(e.deliveries as i64);
    }
    Ok(())
}

fn idle(now: u64, e: &PelEntry) -> i64 {
    now as i64 - e.delivery_ms as i64
}

/// XPENDING's summary: count, first and last ID, and the consumers with pending entries.
fn pending_summary(store: &Tx<'_>, s: &Stream, g: &[u8], r: &mut ReplyBuf) -> CmdResult {
    let mut n = 0i64;
    let (mut first, mut last) = (None, None);
    let mut per: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    s.pel_range(store, g, StreamId::MIN, StreamId::MAX, false, |id, e| {
        n += 1;
        first.get_or_insert(id);
        last = Some(id);
        *per.entry(e.consumer).or_default() += 1;
        true
    })?;
    r.array(4);
    r.int(n);
    match (first, last) {
        (Some(f), Some(l)) => {
            reply_id(r, f);
            reply_id(r, l);
            r.array(per.len());
            for (c, k) in per {
                r.array(2);
                r.bulk(&c);
                r.bulk(k.to_string().as_bytes());
            }
        }
        _ => {
            r.null();
            r.null();
            r.null_array();
        }
    }
    Ok(())
}

pub(super) fn xclaim(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let (key, g, c) = (&a[0], &a[1], &a[2]);
    let store = ctx.tx;
    let s = read_stream(ctx, key)?;
    let (Some(s), Some(mut group)) = (match s {
        Some(s) => {
            let gr = s.group(store, g)?;
            (Some(s), gr)
        }
        None => (None, None),
    }) else {
        return Err(no_key_or_group(key, g));
    };
    let minidle = crate::protocol::parse::parse_i64(&a[3])
        .ok_or_else(|| CmdError::reply("ERR Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut ids = Vec::new();
    let mut j = 4;
    while j < a.len() {
        match crate::stream::parse_id(&a[j], 0, true, false) {
            Some(p) => ids.push(p.id),
            None => break,
        }
        j += 1;
    }
    let now = now_ms() as i64;
    let (mut force, mut justid) = (false, false);
    let (mut delivery, mut retry): (Option<i64>, Option<i64>) = (None, None);
    let mut last_id = StreamId::MIN;
    let opt_int = |b: &[u8], what: &str| {
        crate::protocol::parse::parse_i64(b).ok_or_else(|| {
            CmdError::reply(format!("ERR Invalid {what} option argument for XCLAIM"))
        })
    };
    while j < a.len() {
        let more = j + 1 < a.len();
        let o = &a[j];
        if o.eq_ignore_ascii_case(b"force") {
            force = true;
        } else if o.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else if o.eq_ignore_ascii_case(b"idle") && more {
            j += 1;
            delivery = Some(now - opt_int(&a[j], "IDLE")?);
        } else if o.eq_ignore_ascii_case(b"time") && more {
            j += 1;
            delivery = Some(opt_int(&a[j], "TIME")?);
        } else if o.eq_ignore_ascii_case(b"retrycount") && more {
            j += 1;
            retry = Some(opt_int(&a[j], "RETRYCOUNT")?);
        } else if o.eq_ignore_ascii_case(b"lastid") && more {
            j += 1;
            last_id = strict_id_arg(&a[j], 0)?;
        } else {
            return Err(quoted(&[
                b"ERR Unrecognized XCLAIM option '",
                super::cstr(o, usize::MAX),
                b"'",
            ]));
        }
        j += 1;
    }
    let mut w = Writes::new();
    let moved_last = last_id > group.last_id;
    if moved_last {
        group.last_id = last_id;
        s.put_group(&mut w, g, &group);
    }
    // XCLAIM propagates an XCLAIM of each entry it claimed in the form that gives a
    // replica the same pending entry (Redis 7.0), never itself.
    ctx.effects.prevent();
    let mut effects = Vec::new();
    let at = match delivery {
        Some(t) if t >= 0 && t <= now => t,
        _ => now,
    } as u64;
    let mut body = ReplyBuf::with_capacity(ctx.reply.proto, 256);
    let mut n = 0;
    let (mut consumer_made, mut created) = (false, false);
    for id in ids {
        let pending = s.pel_get(store, g, id)?;
        let Some((_, fields)) = s.get_entry(store, id)? else {
            if let Some(e) = pending {
                s.pel_delete(&mut w, g, id, &e.consumer);
                // An XCLAIM of the deleted entry, as its old owner: a replica drops it
                // from the pending list the same way (Redis 7.0).
                effects.push(super::stream_read::xclaim_effect(
                    (&key[..], &g[..], &e.consumer[..]),
                    id,
                    &e,
                    group.last_id,
                ));
            }
            continue;
        };
        let (e, fresh) = match pending {
            Some(e) => (e, false),
            None if force => (
                PelEntry {
                    consumer: Vec::new(),
                    delivery_ms: now as u64,
                    deliveries: 1,
                },
                true,
            ),
            None => continue,
        };
        if !fresh && minidle > 0 && (now - e.delivery_ms as i64) < minidle {
            continue;
        }
        if !consumer_made {
            created = s.consumer(store, g, c)?.is_none();
            s.put_consumer(
                &mut w,
                g,
                c,
                &Consumer {
                    seen_ms: now as u64,
                },
            );
            consumer_made = true;
        }
        let deliveries = match retry {
            Some(r) => r as u64,
            None if !justid => e.deliveries + 1,
            None => e.deliveries,
        };
        let old = (!fresh).then_some(&e.consumer[..]);
        let claimed = PelEntry {
            consumer: c.to_vec(),
            delivery_ms: at,
            deliveries,
        };
        s.pel_put(&mut w, g, id, &claimed, old);
        effects.push(super::stream_read::xclaim_effect(
            (&key[..], &g[..], &c[..]),
            id,
            &claimed,
            group.last_id,
        ));
        if justid {
            reply_id(&mut body, id);
        } else {
            reply_entry(&mut body, id, &fields);
        }
        n += 1;
    }
    store.apply(w)?;
    if effects.is_empty() && moved_last {
        effects.push(super::stream_read::setid_effect(key, g, &group));
    }
    let sdb = ctx.conn.selected;
    for e in effects {
        ctx.effects.also(sdb, e);
    }
    if created {
        super::stream_read::consumer_created(store, ctx.conn.db, key);
    }
    ctx.reply.array(n);
    ctx.reply.raw(&body.take());
    Ok(())
}

pub(super) fn xautoclaim(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let (key, g, c) = (&a[0], &a[1], &a[2]);
    let minidle = crate::protocol::parse::parse_i64(&a[3])
        .ok_or_else(|| CmdError::reply("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = bound(&a[4], 0, true)?;
    let (mut count, mut justid) = (100i64, false);
    let mut j = 5;
    // Redis bounds COUNT so that count * 10 attempts and the deleted-ID buffer fit a long.
    let max_count = i64::MAX / 16;
    while j < a.len() {
        if a[j].eq_ignore_ascii_case(b"count") && j + 1 < a.len() {
            count = crate::protocol::parse::parse_i64(&a[j + 1])
                .filter(|n| (1..=max_count).contains(n))
                .ok_or_else(|| CmdError::reply("ERR COUNT must be > 0"))?;
            j += 1;
        } else if a[j].eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        j += 1;
    }
    let store = ctx.tx;
    let s = read_stream(ctx, key)?;
    let Some(s) = s.filter(|s| s.group(store, g).ok().flatten().is_some()) else {
        return Err(no_key_or_group(key, g));
    };
    let now = now_ms();
    let mut attempts = count.saturating_mul(10);
    // The pending entries examined, and the one after them (the cursor).
    let mut examined: Vec<(StreamId, PelEntry)> = Vec::new();
    let mut next = StreamId::MIN;
    let mut left = count;
    // In batches: a scan's callback must not read the store (the shard transaction is
    // busy with the scan), and the entries' existence is needed to count.
    let mut from = Some(start);
    'scan: while let Some(at) = from {
        let mut batch = Vec::new();
        s.pel_range(store, g, at, StreamId::MAX, false, |id, e| {
            batch.push((id, e));
            batch.len() < 256
        })?;
        if batch.is_empty() {
            break;
        }
        for (id, e) in batch {
            if attempts == 0 || left == 0 {
                next = id;
                break 'scan;
            }
            attempts -= 1;
            // Whether the entry still exists decides whether it counts towards COUNT.
            match s.get_entry(store, id)? {
                None => left -= 1,
                Some(_) if minidle == 0 || (now as i64 - e.delivery_ms as i64) >= minidle => {
                    left -= 1
                }
                Some(_) => {}
            }
            examined.push((id, e));
            from = id.incr();
        }
    }
    let mut w = Writes::new();
    let mut body = ReplyBuf::with_capacity(ctx.reply.proto, 256);
    let (mut n, mut deleted) = (0, Vec::new());
    // As XCLAIM: an XCLAIM per entry claimed, never itself (Redis 7.0).
    ctx.effects.prevent();
    let mut effects = Vec::new();
    let group_last = s.group(store, g)?.map_or(StreamId::MIN, |gr| gr.last_id);
    let (mut consumer_made, mut created) = (false, false);
    for (id, e) in examined {
        let Some((_, fields)) = s.get_entry(store, id)? else {
            s.pel_delete(&mut w, g, id, &e.consumer);
            // As XCLAIM: the deleted entry's XCLAIM as its old owner (Redis 7.0).
            effects.push(super::stream_read::xclaim_effect(
                (&key[..], &g[..], &e.consumer[..]),
                id,
                &e,
                group_last,
            ));
            deleted.push(id);
            continue;
        };
        if minidle > 0 && (now as i64 - e.delivery_ms as i64) < minidle {
            continue;
        }
        if !consumer_made {
            created = s.consumer(store, g, c)?.is_none();
            s.put_consumer(&mut w, g, c, &Consumer { seen_ms: now });
            consumer_made = true;
        }
        let deliveries = if justid {
            e.deliveries
        } else {
            e.deliveries + 1
        };
        let moved = PelEntry {
            consumer: c.to_vec(),
            delivery_ms: now,
            deliveries,
        };
        s.pel_put(&mut w, g, id, &moved, Some(&e.consumer));
        effects.push(super::stream_read::xclaim_effect(
            (&key[..], &g[..], &c[..]),
            id,
            &moved,
            group_last,
        ));
        if justid {
            reply_id(&mut body, id);
        } else {
            reply_entry(&mut body, id, &fields);
        }
        n += 1;
    }
    store.apply(w)?;
    let sdb = ctx.conn.selected;
    for e in effects {
        ctx.effects.also(sdb, e);
    }
    if created {
        super::stream_read::consumer_created(store, ctx.conn.db, key);
    }
    ctx.reply.array(3);
    reply_id(ctx.reply, next);
    ctx.reply.array(n);
    ctx.reply.raw(&body.take());
    ctx.reply.array(deleted.len());
    for id in deleted {
        reply_id(ctx.reply, id);
    }
    Ok(())
}
