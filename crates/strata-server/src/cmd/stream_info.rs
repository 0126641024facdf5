//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS, XINFO HELP (Redis 7.0's
//! `xinfoCommand`, with 7.0.15's fields). Maps in RESP3, flat arrays in RESP2, through the
//! reply builder.
//!
//! `radix-tree-keys` is the number of nodes of Redis's layout that Strata mirrors (see
//! `crate::stream`); `radix-tree-nodes` is an estimate, as the radix tree's inner nodes do
//! not exist here.
//!
//! Layer: commands (above services; below execution).

use super::streams::{int_arg, reply_entry, reply_id, write_stream};
use super::{cstr, reply_help, Args, CmdError, CmdResult, Ctx};
use crate::protocol::reply::ReplyBuf;
use crate::store::{now_ms, Tx};
use crate::stream::{Stream, StreamId};

fn subcommand_syntax(args: &Args) -> CmdError {
    let sub = args.sent(1).map_or(&b""[..], |b| &b[..]);
    CmdError::reply_bytes(
        [
            &b"ERR unknown subcommand or wrong number of arguments for '"[..],
            cstr(sub, 128),
            b"'. Try XINFO HELP.",
        ]
        .concat(),
    )
}

/// The stream at `key`, or Redis's `no such key`.
fn existing(ctx: &Ctx<'_>, key: &[u8]) -> Result<Stream, CmdError> {
    // XINFO looks keys up for writing in Redis (no keyspace hit or miss counted).
    write_stream(ctx, key)?.ok_or_else(|| CmdError::reply("ERR no such key"))
}

/// How many nodes of Redis's layout the stream has (entries that start one).
fn node_count(store: &Tx<'_>, s: &Stream) -> Result<u64, CmdError> {
    let prefix = s.record(crate::stream::TAG_ENTRY, &[]);
    let mut n = 0;
    let mut bad = false;
    store.scan_prefix(&prefix, false, |_, v| {
        match crate::stream::decode_entry(v) {
            Some((start, _)) => n += u64::from(start),
            None => bad = true,
        }
        !bad
    })?;
    if bad {
        return Err(CmdError::Store(crate::stream::corrupt(&s.key)));
    }
    Ok(n)
}

pub(super) fn stream(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let key = &a[0];
    let mut full = None;
    if a.len() > 1 {
        if !a[1].eq_ignore_ascii_case(b"full") {
            return Err(subcommand_syntax(args));
        }
        let mut count = 10i64;
        if a.len() == 4 && a[2].eq_ignore_ascii_case(b"count") {
            count = int_arg(&a[3])?;
            if count < 0 {
                count = 10;
            }
        } else if a.len() != 2 {
            return Err(subcommand_syntax(args));
        }
        full = Some(count as usize);
    }
    let store = ctx.tx;
    let s = existing(ctx, key)?;
    let keys = node_count(store, &s)?;
    let r = &mut *ctx.reply;
    r.map(if full.is_some() { 9 } else { 10 });
    r.bulk(b"length");
    r.int(s.len() as i64);
    r.bulk(b"radix-tree-keys");
    r.int(keys as i64);
    r.bulk(b"radix-tree-nodes");
    r.int(keys as i64 + 1);
    r.bulk(b"last-generated-id");
    reply_id(r, s.info.last_id);
    r.bulk(b"max-deleted-entry-id");
    reply_id(r, s.info.max_deleted);
    r.bulk(b"entries-added");
    r.int(s.info.entries_added as i64);
    r.bulk(b"recorded-first-entry-id");
    reply_id(r, s.info.first_id);
    let groups = s.groups(store)?;
    let Some(count) = full else {
        r.bulk(b"groups");
        r.int(groups.len() as i64);
        for (name, rev) in [(&b"first-entry"[..], false), (b"last-entry", true)] {
            r.bulk(name);
            match s
                .collect(store, StreamId::MIN, StreamId::MAX, rev, 1)?
                .first()
            {
                Some((id, f)) => reply_entry(r, *id, f),
                None => r.null(),
            }
        }
        return Ok(());
    };
    r.bulk(b"entries");
    let entries = s.collect(store, StreamId::MIN, StreamId::MAX, false, count)?;
    r.array(entries.len());
    for (id, f) in &entries {
        reply_entry(r, *id, f);
    }
    r.bulk(b"groups");
    r.array(groups.len());
    for (name, g) in &groups {
        full_group(store, &s, name, g, count, r)?;
    }
    Ok(())
}

/// A group's last-delivered-id, entries-read and lag fields (XINFO GROUPS and STREAM FULL).
fn group_progress(r: &mut ReplyBuf, s: &Stream, g: &crate::stream::Group) {
    r.bulk(b"last-delivered-id");
    reply_id(r, g.last_id);
    r.bulk(b"entries-read");
    match g.entries_read {
        Some(n) => r.int(n as i64),
        None => r.null(),
    }
    r.bulk(b"lag");
    match s.info.lag(s.len(), g) {
        Some(n) => r.int(n),
        None => r.null(),
    }
}

/// One group of XINFO STREAM FULL.
fn full_group(
    store: &Tx<'_>,
    s: &Stream,
    name: &[u8],
    g: &crate::stream::Group,
    count: usize,
    r: &mut ReplyBuf,
) -> CmdResult {
    r.map(7);
    r.bulk(b"name");
    r.bulk(name);
    group_progress(r, s, g);
    r.bulk(b"pel-count");
    r.int(s.pending_count(store, name)? as i64);
    r.bulk(b"pending");
    let mut pel = Vec::new();
    s.pel_range(store, name, StreamId::MIN, StreamId::MAX, false, |id, e| {
        pel.push((id, e));
        count == 0 || pel.len() < count
    })?;
    r.array(pel.len());
    for (id, e) in &pel {
        r.array(4);
        reply_id(r, *id);
        r.bulk(&e.consumer);
        r.int(e.delivery_ms as i64);
        r.int(e.deliveries as i64);
    }
    r.bulk(b"consumers");
    let consumers = s.consumers(store, name)?;
    r.array(consumers.len());
    for (c, info) in &consumers {
        r.map(4);
        r.bulk(b"name");
        r.bulk(c);
        r.bulk(b"seen-time");
        r.int(info.seen_ms as i64);
        r.bulk(b"pel-count");
        r.int(s.consumer_pending_count(store, name, c)? as i64);
        r.bulk(b"pending");
        let ids = s.consumer_pending(store, name, c, StreamId::MIN, StreamId::MAX, count)?;
        r.array(ids.len());
        for id in ids {
            let e = s.pel_get(store, name, id)?;
            r.array(3);
            reply_id(r, id);
            r.int(e.as_ref().map_or(0, |e| e.delivery_ms as i64));
            r.int(e.as_ref().map_or(0, |e| e.deliveries as i64));
        }
    }
    Ok(())
}

pub(super) fn groups(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let store = ctx.tx;
    let s = existing(ctx, &key)?;
    let groups = s.groups(store)?;
    let r = &mut *ctx.reply;
    r.array(groups.len());
    for (name, g) in &groups {
        r.map(6);
        r.bulk(b"name");
        r.bulk(name);
        r.bulk(b"consumers");
        r.int(s.consumers(store, name)?.len() as i64);
        r.bulk(b"pending");
        r.int(s.pending_count(store, name)? as i64);
        group_progress(r, &s, g);
    }
    Ok(())
}

pub(super) fn consumers(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let group = args.next_bytes()?;
    let store = ctx.tx;
    let s = existing(ctx, &key)?;
    if s.group(store, &group)?.is_none() {
        return Err(CmdError::reply_bytes(
            [
                &b"NOGROUP No such consumer group '"[..],
                &group,
                b"' for key name '",
                &key,
                b"'",
            ]
            .concat(),
        ));
    }
    let now = now_ms() as i64;
    let consumers = s.consumers(store, &group)?;
    let r = &mut *ctx.reply;
    r.array(consumers.len());
    for (c, info) in &consumers {
        r.map(3);
        r.bulk(b"name");
        r.bulk(c);
        r.bulk(b"pending");
        r.int(s.consumer_pending_count(store, &group, c)? as i64);
        r.bulk(b"idle");
        r.int((now - info.seen_ms as i64).max(0));
    }
    Ok(())
}

pub(super) fn help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
    Ok(())
}
