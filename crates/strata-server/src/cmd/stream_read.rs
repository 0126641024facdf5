//! XREAD and XREADGROUP (Redis's `xreadCommand`), blocking included: a client that finds
//! nothing to read blocks on its streams through `blocking.rs` (`docs/design.md` §13.8),
//! and any write to one of them (XADD, and every other write, which the serve function
//! below sorts out) offers it the stream again. Reads do not consume: every waiter on a
//! stream is offered it ([`Attempt::Skip`] when it has nothing for one), not only the
//! first. An XREADGROUP waiter whose stream is deleted or whose group is destroyed is
//! woken with Redis 7.0's errors.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::streams::{int_arg, read_stream, reply_entry, reply_id, strict_id_arg, write_stream};
use super::{Args, CmdError, CmdResult, Ctx};
use crate::blocking::{Attempt, ServeFn, Served};
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::store::{now_ms, RType, Tx, Writes};
use crate::stream::{Consumer, PelEntry, Stream, StreamId};
use bytes::Bytes;
use std::time::Duration;

/// What XREAD and XREADGROUP were asked.
struct ReadArgs {
    /// 0: no limit.
    count: usize,
    /// `None`: no BLOCK; `Some(None)`: BLOCK 0, for ever.
    block: Option<Option<Duration>>,
    group: Option<(Bytes, Bytes)>,
    noack: bool,
    keys: Vec<Bytes>,
    ids: Vec<Bytes>,
}

/// Redis's `getTimeoutFromObjectOrReply` in milliseconds.
fn block_ms(b: &[u8]) -> Result<Option<Duration>, CmdError> {
    let ms = crate::protocol::parse::parse_i64(b)
        .ok_or_else(|| CmdError::reply("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CmdError::reply("ERR timeout is negative"));
    }
    Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
}

fn parse(a: &[Bytes], group_cmd: bool) -> Result<ReadArgs, CmdError> {
    let mut r = ReadArgs {
        count: 0,
        block: None,
        group: None,
        noack: false,
        keys: Vec::new(),
        ids: Vec::new(),
    };
    let mut streams = None;
    let mut i = 0;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let o = &a[i];
        if o.eq_ignore_ascii_case(b"block") && more > 0 {
            i += 1;
            r.block = Some(block_ms(&a[i])?);
        } else if o.eq_ignore_ascii_case(b"count") && more > 0 {
            i += 1;
            r.count = int_arg(&a[i])?.max(0) as usize;
        } else if o.eq_ignore_ascii_case(b"streams") && more > 0 {
            let n = a.len() - i - 1;
            if !n.is_multiple_of(2) {
                // Redis 7.0.15's text, XREADGROUP's too (7.2 names the command and `>`).
                return Err(CmdError::reply(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' \
                     must be specified.",
                ));
            }
            streams = Some(i + 1);
            break;
        } else if o.eq_ignore_ascii_case(b"group") && more >= 2 {
            if !group_cmd {
                return Err(CmdError::reply(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((a[i + 1].clone(), a[i + 2].clone()));
            i += 2;
        } else if o.eq_ignore_ascii_case(b"noack") {
            if !group_cmd {
                return Err(CmdError::reply(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        i += 1;
    }
    let Some(first) = streams else {
        return Err(CmdError::reply(ERR_SYNTAX));
    };
    if group_cmd && r.group.is_none() {
        return Err(CmdError::reply("ERR Missing GROUP option for XREADGROUP"));
    }
    let n = (a.len() - first) / 2;
    r.keys = a[first..first + n].to_vec();
    r.ids = a[first + n..].to_vec();
    Ok(r)
}

/// Where a read starts: after an ID, or (XREADGROUP `>`) after the group's last delivery.
#[derive(Clone, Copy)]
enum Start {
    After(StreamId),
    New,
}

pub(super) fn xread(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let r = parse(&a, false)?;
    read_generic(ctx, r)
}

pub(super) fn xreadgroup(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let r = parse(&a, true)?;
    read_generic(ctx, r)
}

fn read_generic(ctx: &mut Ctx<'_>, r: ReadArgs) -> CmdResult {
    let (store, db) = (ctx.tx, ctx.conn.db);
    // The IDs, checked with the keys and groups in Redis's order.
    let mut froms = Vec::with_capacity(r.keys.len());
    for (key, idarg) in r.keys.iter().zip(&r.ids) {
        let s = read_stream(ctx, key)?;
        if let Some((g, _)) = &r.group {
            let found = match &s {
                Some(s) => s.group(store, g)?.is_some(),
                None => false,
            };
            if !found {
                let mut m = b"NOGROUP No such key '".to_vec();
                m.extend_from_slice(key);
                m.extend_from_slice(b"' or consumer group '");
                m.extend_from_slice(g);
                m.extend_from_slice(b"' in XREADGROUP with GROUP option");
                return Err(CmdError::reply_bytes(m));
            }
        }
        let from = match &idarg[..] {
            b"$" if r.group.is_some() => {
                return Err(CmdError::reply("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            b"$" => Start::After(s.as_ref().map_or(StreamId::MIN, |s| s.info.last_id)),
            b">" if r.group.is_none() => {
                return Err(CmdError::reply("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            b">" => Start::New,
            // Redis marks `>` with the largest ID: that ID given explicitly reads as `>`.
            other => match strict_id_arg(other, 0)? {
                StreamId::MAX if r.group.is_some() => Start::New,
                id => Start::After(id),
            },
        };
        froms.push(from);
    }
    // Serve what can be served now.
    let proto = ctx.reply.proto;
    let mut body = ReplyBuf::with_capacity(proto, 256);
    let mut served = 0;
    for (key, from) in r.keys.iter().zip(&froms) {
        let Some(mut s) = write_stream(ctx, key)? else {
            continue;
        };
        let done = match &r.group {
            Some((g, c)) => {
                let history = matches!(from, Start::After(_));
                let fresh = !history && has_new(store, &s, g)?;
                let mut w = Writes::new();
                let mut created = false;
                let mut effects = Vec::new();
                if history || fresh {
                    created = touch_consumer(store, &s, &mut w, g, c)?;
                    if created && r.noack {
                        effects.push(createconsumer_effect(key, g, c));
                    }
                    header(&mut body, key);
                    let who = (&key[..], &g[..], &c[..]);
                    serve_group(
                        store,
                        &mut s,
                        &mut w,
                        who,
                        *from,
                        r.count,
                        r.noack,
                        &mut body,
                        &mut effects,
                    )?;
                }
                store.apply(w)?;
                // XREADGROUP propagates what it delivered, never itself (Redis 7.0).
                ctx.effects.prevent();
                let sdb = ctx.conn.selected;
                for e in effects {
                    ctx.effects.also(sdb, e);
                }
                if created {
                    consumer_created(store, db, key);
                }
                history || fresh
            }
            None => {
                let Start::After(gt) = from else { continue };
                let last = s.collect(store, StreamId::MIN, StreamId::MAX, true, 1)?;
                if last.first().is_some_and(|(id, _)| id > gt) {
                    header(&mut body, key);
                    reply_range(store, &s, *gt, r.count, &mut body)?;
                    true
                } else {
                    false
                }
            }
        };
        served += usize::from(done);
    }
    if served > 0 {
        outer(ctx.reply, served);
        ctx.reply.raw(&body.take());
        return Ok(());
    }
    let Some(timeout) = r.block else {
        ctx.reply.null_array();
        return Ok(());
    };
    // Redis's `CLIENT_DENY_BLOCKING` (MULTI/EXEC): as a timeout, even with timeout 0.
    if ctx.conn.in_exec {
        ctx.reply.null_array();
        return Ok(());
    }
    let waits: Vec<(Bytes, Start)> = r.keys.iter().cloned().zip(froms).collect();
    let serve = waiter(proto, waits, r.group.clone(), r.count, r.noack);
    let none: &[Bytes] = &[];
    let wait =
        ctx.shared
            .blocked
            .block(store, ctx.conn.id, proto, db, &r.keys, none, timeout, serve);
    ctx.blocked = Some(wait);
    Ok(())
}

/// The reply's outer container: a map in RESP3, an array of pairs in RESP2.
fn outer(r: &mut ReplyBuf, n: usize) {
    match r.proto {
        Proto::Resp2 => r.array(n),
        _ => r.map(n),
    }
}

/// One stream's part of the reply: its name (then its entries).
fn header(r: &mut ReplyBuf, key: &[u8]) {
    if r.proto == Proto::Resp2 {
        r.array(2);
    }
    r.bulk(key);
}

/// Whether the stream holds entries after the group's last delivered ID (Redis compares
/// the last live entry's ID).
fn has_new(store: &Tx<'_>, s: &Stream, group: &[u8]) -> Result<bool, CmdError> {
    let Some(g) = s.group(store, group)? else {
        return Ok(false);
    };
    let last = s.collect(store, StreamId::MIN, StreamId::MAX, true, 1)?;
    Ok(last.first().is_some_and(|(id, _)| *id > g.last_id))
}

/// Creates consumer `c` of group `g` if needed and notes it was seen now: whether it was
/// created (Redis 7.0 then emits `xgroup-createconsumer`, once the write is applied here).
fn touch_consumer(
    store: &Tx<'_>,
    s: &Stream,
    w: &mut Writes,
    g: &[u8],
    c: &[u8],
) -> Result<bool, CmdError> {
    let created = s.consumer(store, g, c)?.is_none();
    s.put_consumer(w, g, c, &Consumer { seen_ms: now_ms() });
    Ok(created)
}

/// What a delivery to a consumer propagates (Redis 7.0's `streamPropagateXCLAIM`): `XCLAIM
/// key group consumer 0 id TIME <ms> RETRYCOUNT <n> FORCE JUSTID LASTID <group's last ID>`,
/// which gives a replica the same pending entry and group position.
pub(super) fn xclaim_effect(
    (key, g, c): (&[u8], &[u8], &[u8]),
    id: StreamId,
    e: &PelEntry,
    last_id: StreamId,
) -> crate::effects::Argv {
    let id = id.to_string();
    let ms = e.delivery_ms.to_string();
    let n = e.deliveries.to_string();
    let last = last_id.to_string();
    crate::effects::argv([
        &b"XCLAIM"[..],
        key,
        g,
        c,
        b"0",
        id.as_bytes(),
        b"TIME",
        ms.as_bytes(),
        b"RETRYCOUNT",
        n.as_bytes(),
        b"FORCE",
        b"JUSTID",
        b"LASTID",
        last.as_bytes(),
    ])
}

/// What a group's new position propagates (Redis 7.0's `streamPropagateGroupID`): `XGROUP
/// SETID key group <last ID> ENTRIESREAD <n>` (-1 when unknown).
pub(super) fn setid_effect(
    key: &[u8],
    g: &[u8],
    group: &crate::stream::Group,
) -> crate::effects::Argv {
    let last = group.last_id.to_string();
    let read = group.entries_read.map_or(-1, |n| n as i64).to_string();
    crate::effects::argv([
        &b"XGROUP"[..],
        b"SETID",
        key,
        g,
        last.as_bytes(),
        b"ENTRIESREAD",
        read.as_bytes(),
    ])
}

/// What the creation of a consumer by a NOACK read propagates (Redis 7.0's
/// `streamPropagateConsumerCreation`; other reads create it through their XCLAIMs).
fn createconsumer_effect(key: &[u8], g: &[u8], c: &[u8]) -> crate::effects::Argv {
    crate::effects::argv([&b"XGROUP"[..], b"CREATECONSUMER", key, g, c])
}

/// The keyspace event of a consumer a read or claim created (class `t`).
pub(super) fn consumer_created(store: &Tx<'_>, db: u8, key: &[u8]) {
    store.notify.event(
        crate::notify::Class::Stream,
        "xgroup-createconsumer",
        db,
        key,
    );
}

/// The entries after `gt` (up to `count`, 0: all), as an array.
fn reply_range(
    store: &Tx<'_>,
    s: &Stream,
    gt: StreamId,
    count: usize,
    r: &mut ReplyBuf,
) -> Result<(), CmdError> {
    let entries = match gt.incr() {
        Some(start) => s.collect(store, start, StreamId::MAX, false, count)?,
        None => Vec::new(),
    };
    r.array(entries.len());
    for (id, f) in &entries {
        reply_entry(r, *id, f);
    }
    Ok(())
}

/// Redis's `streamReplyWithRange` for a group: with `Start::New` the entries after the
/// group's last delivered ID, which join the pending list of consumer `c` (unless
/// `noack`) and advance the group; with `Start::After(id)` the consumer's own pending
/// entries after `id` (its history), delivered again. Adds to `effects` what a new
/// delivery propagates: an XCLAIM per entry, or with `noack` the group's new position (a
/// history read propagates nothing, as Redis 7.0).
#[allow(clippy::too_many_arguments)]
fn serve_group(
    store: &Tx<'_>,
    s: &mut Stream,
    w: &mut Writes,
    (key, g, c): (&[u8], &[u8], &[u8]),
    from: Start,
    count: usize,
    noack: bool,
    r: &mut ReplyBuf,
    effects: &mut Vec<crate::effects::Argv>,
) -> Result<(), CmdError> {
    let Some(mut group) = s.group(store, g)? else {
        r.array(0);
        return Ok(());
    };
    let now = now_ms();
    match from {
        Start::After(after) => {
            let ids = match after.incr() {
                Some(start) => s.consumer_pending(store, g, c, start, StreamId::MAX, count)?,
                None => Vec::new(),
            };
            r.array(ids.len());
            for id in ids {
                match s.get_entry(store, id)? {
                    Some((_, f)) => {
                        reply_entry(r, id, &f);
                        if let Some(mut e) = s.pel_get(store, g, id)? {
                            e.delivery_ms = now;
                            e.deliveries += 1;
                            s.pel_put(w, g, id, &e, None);
                        }
                    }
                    None => {
                        r.array(2);
                        reply_id(r, id);
                        r.null_array();
                    }
                }
            }
        }
        Start::New => {
            let start = group.last_id.incr();
            let entries = match start {
                Some(start) => s.collect(store, start, StreamId::MAX, false, count)?,
                None => Vec::new(),
            };
            r.array(entries.len());
            let (info, len) = (s.info, s.len());
            let mut advanced = false;
            for (id, f) in &entries {
                if *id > group.last_id {
                    match group.entries_read {
                        Some(n) if !info.has_tombstones(len, Some(*id), None) => {
                            group.entries_read = Some(n + 1)
                        }
                        _ if info.entries_added > 0 => {
                            group.entries_read = info.entries_up_to(len, *id)
                        }
                        _ => {}
                    }
                    group.last_id = *id;
                    advanced = true;
                }
                reply_entry(r, *id, f);
                if !noack {
                    let old = s.pel_get(store, g, *id)?;
                    let e = PelEntry {
                        consumer: c.to_vec(),
                        delivery_ms: now,
                        deliveries: 1,
                    };
                    s.pel_put(w, g, *id, &e, old.as_ref().map(|o| &o.consumer[..]));
                    effects.push(xclaim_effect((key, g, c), *id, &e, group.last_id));
                }
            }
            if noack && advanced {
                effects.push(setid_effect(key, g, &group));
            }
            s.put_group(w, g, &group);
        }
    }
    Ok(())
}

/// The serve function of a blocked XREAD or XREADGROUP.
fn waiter(
    proto: Proto,
    waits: Vec<(Bytes, Start)>,
    group: Option<(Bytes, Bytes)>,
    count: usize,
    noack: bool,
) -> ServeFn {
    Box::new(
        move |store: &Tx<'_>, db: u8, key: &[u8], _extra_here: bool| {
            let Some(from) = waits.iter().find(|(k, _)| &k[..] == key).map(|(_, f)| *f) else {
                return Ok(Attempt::Skip);
            };
            let s = match store.get(db, key)? {
                Some(m) if m.rtype == RType::Stream => Stream::from_meta(db, key, m),
                _ => None,
            };
            let Some(mut s) = s else {
                if group.is_some() {
                    return Err(CmdError::reply("UNBLOCKED the stream key no longer exists"));
                }
                return Ok(Attempt::Skip);
            };
            let mut r = ReplyBuf::with_capacity(proto, 256);
            match &group {
                Some((g, c)) => {
                    let Some(gr) = s.group(store, g)? else {
                        return Err(CmdError::reply(
                        "NOGROUP the consumer group this client was blocked on no longer exists",
                    ));
                    };
                    if s.info.last_id <= gr.last_id {
                        return Ok(Attempt::Skip);
                    }
                    outer(&mut r, 1);
                    header(&mut r, key);
                    let mut w = Writes::new();
                    let created = touch_consumer(store, &s, &mut w, g, c)?;
                    let mut effects = Vec::new();
                    if created && noack {
                        effects.push(createconsumer_effect(key, g, c));
                    }
                    serve_group(
                        store,
                        &mut s,
                        &mut w,
                        (key, g, c),
                        Start::New,
                        count,
                        noack,
                        &mut r,
                        &mut effects,
                    )?;
                    store.apply(w)?;
                    let ldb = store.dbs.logical(db);
                    let group_effects = effects.into_iter().map(|e| (ldb, e)).collect();
                    crate::effects::push_pending(crate::effects::wrap(group_effects));
                    if created {
                        consumer_created(store, db, key);
                    }
                }
                None => {
                    let Start::After(gt) = from else {
                        return Ok(Attempt::Skip);
                    };
                    if s.info.last_id <= gt {
                        return Ok(Attempt::Skip);
                    }
                    outer(&mut r, 1);
                    header(&mut r, key);
                    reply_range(store, &s, gt, count, &mut r)?;
                }
            }
            Ok(Attempt::Served(Served {
                reply: r.take(),
                then: None,
            }))
        },
    )
}
