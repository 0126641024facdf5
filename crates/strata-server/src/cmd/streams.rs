//! Stream commands (Redis's t_stream.c): XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM and
//! XSETID here; XREAD and XREADGROUP in `stream_read.rs`, the consumer-group commands in
//! `stream_groups.rs`, XINFO in `stream_info.rs`. The type without protocol is
//! `crate::stream`; its records are drawn in `docs/format/redis-keys.md`, "Streams".
//! Every command holds its keys' stripe locks from its read to its write.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::{
    cmd, lookup_typed, stream_groups, stream_info, stream_read, Args, CmdError, CmdResult, Ctx,
    Entry, ERR_WRONGTYPE,
};
use crate::notify::Class;
use crate::protocol::parse::parse_i64;
use crate::protocol::reply::ReplyBuf;
use crate::store::{now_ms, RType, Writes};
use crate::stream::{corrupt, parse_id, Stream, StreamId, Trim};
use crate::tuning::Limit;

pub static COMMANDS: &[Entry] = &[
    cmd("xadd", xadd),
    cmd("xrange", xrange),
    cmd("xrevrange", xrevrange),
    cmd("xlen", xlen),
    cmd("xdel", xdel),
    cmd("xtrim", xtrim),
    cmd("xsetid", xsetid),
    cmd("xread", stream_read::xread),
    cmd("xreadgroup", stream_read::xreadgroup),
    cmd("xgroup|create", stream_groups::create),
    cmd("xgroup|setid", stream_groups::setid),
    cmd("xgroup|destroy", stream_groups::destroy),
    cmd("xgroup|createconsumer", stream_groups::createconsumer),
    cmd("xgroup|delconsumer", stream_groups::delconsumer),
    cmd("xgroup|help", stream_groups::help),
    cmd("xack", stream_groups::xack),
    cmd("xpending", stream_groups::xpending),
    cmd("xclaim", stream_groups::xclaim),
    cmd("xautoclaim", stream_groups::xautoclaim),
    cmd("xinfo|stream", stream_info::stream),
    cmd("xinfo|groups", stream_info::groups),
    cmd("xinfo|consumers", stream_info::consumers),
    cmd("xinfo|help", stream_info::help),
];

pub(super) const ERR_INVALID_ID: &str =
    "ERR Invalid stream ID specified as stream command argument";

/// Redis's `streamParseIDOrReply` (`-` and `+` allowed).
pub(super) fn id_arg(b: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    parse_id(b, missing_seq, false, false)
        .map(|p| p.id)
        .ok_or_else(|| CmdError::reply(ERR_INVALID_ID))
}

/// Redis's `streamParseStrictIDOrReply` (no `-` or `+`).
pub(super) fn strict_id_arg(b: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    parse_id(b, missing_seq, true, false)
        .map(|p| p.id)
        .ok_or_else(|| CmdError::reply(ERR_INVALID_ID))
}

pub(super) fn int_arg(b: &[u8]) -> Result<i64, CmdError> {
    parse_i64(b).ok_or_else(|| CmdError::reply(ERR_NOT_INT))
}

/// The stream at `key` for a read (a keyspace hit or miss is counted).
pub(super) fn read_stream(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Stream>, CmdError> {
    match lookup_typed(ctx, key, RType::Stream)? {
        None => Ok(None),
        Some(m) => Stream::from_meta(ctx.conn.db, key, m)
            .map(Some)
            .ok_or_else(|| CmdError::Store(corrupt(key))),
    }
}

/// The stream at `key` for a write.
pub(super) fn write_stream(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Stream>, CmdError> {
    match ctx.tx.get(ctx.conn.db, key)? {
        None => Ok(None),
        Some(m) if m.rtype != RType::Stream => Err(CmdError::reply(ERR_WRONGTYPE)),
        Some(m) => Stream::from_meta(ctx.conn.db, key, m)
            .map(Some)
            .ok_or_else(|| CmdError::Store(corrupt(key))),
    }
}

pub(super) fn reply_id(r: &mut ReplyBuf, id: StreamId) {
    r.bulk(id.to_string().as_bytes());
}

/// An entry as Redis replies it: its ID and its fields and values, flat.
pub(super) fn reply_entry(r: &mut ReplyBuf, id: StreamId, fields: &[(Vec<u8>, Vec<u8>)]) {
    r.array(2);
    reply_id(r, id);
    r.array(fields.len() * 2);
    for (f, v) in fields {
        r.bulk(f);
        r.bulk(v);
    }
}

/// `stream-node-max-entries`: entries per node of Redis's layout, which `~` trims whole.
pub(super) fn node_max(ctx: &Ctx<'_>) -> u64 {
    ctx.shared.limits.get(Limit::StreamNodeMaxEntries)
}

/// A trimming request of XADD or XTRIM.
#[derive(Default)]
struct TrimArgs {
    rule: Option<Trim>,
    approx: bool,
    limit: u64,
    no_mkstream: bool,
    /// XADD: the ID given (`None`: `*`) and whether its sequence was (`ms-*`: not).
    id: Option<(StreamId, bool)>,
}

/// Redis's `streamParseAddOrTrimArgsOrReply` from `args[i..]`: the options, and for XADD
/// the position of the ID.
fn parse_trim(
    ctx: &Ctx<'_>,
    a: &[bytes::Bytes],
    mut i: usize,
    xadd: bool,
) -> Result<(TrimArgs, usize), CmdError> {
    let mut t = TrimArgs::default();
    let mut limit_given = false;
    const BOTH: &str =
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = &a[i];
        if xadd && &opt[..] == b"*" {
            break;
        } else if opt.eq_ignore_ascii_case(b"maxlen") && more > 0 {
            if t.rule.is_some() {
                return Err(CmdError::reply(BOTH));
            }
            t.approx = false;
            if more >= 2 && (&a[i + 1][..] == b"~" || &a[i + 1][..] == b"=") {
                t.approx = &a[i + 1][..] == b"~";
                i += 1;
            }
            let n = int_arg(&a[i + 1])?;
            if n < 0 {
                return Err(CmdError::reply("ERR The MAXLEN argument must be >= 0."));
            }
            t.rule = Some(Trim::MaxLen(n as u64));
            i += 2;
        } else if opt.eq_ignore_ascii_case(b"minid") && more > 0 {
            if t.rule.is_some() {
                return Err(CmdError::reply(BOTH));
            }
            t.approx = false;
            if more >= 2 && (&a[i + 1][..] == b"~" || &a[i + 1][..] == b"=") {
                t.approx = &a[i + 1][..] == b"~";
                i += 1;
            }
            t.rule = Some(Trim::MinId(strict_id_arg(&a[i + 1], 0)?));
            i += 2;
        } else if opt.eq_ignore_ascii_case(b"limit") && more > 0 {
            let n = int_arg(&a[i + 1])?;
            if n < 0 {
                return Err(CmdError::reply("ERR The LIMIT argument must be >= 0."));
            }
            t.limit = n as u64;
            limit_given = true;
            i += 2;
        } else if xadd && opt.eq_ignore_ascii_case(b"nomkstream") {
            t.no_mkstream = true;
            i += 1;
        } else if xadd {
            let p = parse_id(opt, 0, true, true).ok_or_else(|| CmdError::reply(ERR_INVALID_ID))?;
            t.id = Some((p.id, p.seq_given));
            break;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    if t.limit > 0 && t.rule.is_none() {
        return Err(CmdError::reply(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.rule.is_none() {
        return Err(CmdError::reply(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !t.approx {
            return Err(CmdError::reply(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        let l = 100u64.saturating_mul(node_max(ctx));
        t.limit = if l == 0 || l > 10_000 { 10_000 } else { l };
    } else {
        t.limit = 0;
    }
    Ok((t, i))
}

/// The ID XADD gives its entry (Redis's `streamAppendItem`): `None` when it is not above
/// the stream's last ID.
fn next_id(last: StreamId, given: Option<(StreamId, bool)>) -> Option<StreamId> {
    let id = match given {
        Some((id, true)) => id,
        Some((id, false)) if id.ms == last.ms => {
            if last.seq == u64::MAX {
                return None;
            }
            StreamId::new(last.ms, last.seq + 1)
        }
        Some((id, false)) => id,
        None => {
            let ms = now_ms();
            if ms > last.ms {
                StreamId::new(ms, 0)
            } else {
                last.incr()?
            }
        }
    };
    (id > last).then_some(id)
}

fn xadd(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let key = &a[0];
    let (t, idpos) = parse_trim(ctx, &a, 1, true)?;
    let fields = &a[(idpos + 1).min(a.len())..];
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return Err(CmdError::reply(
            "ERR wrong number of arguments for 'xadd' command",
        ));
    }
    if matches!(t.id, Some((id, true)) if id.is_zero()) {
        return Err(CmdError::reply(
            "ERR The ID specified in XADD must be greater than 0-0",
        ));
    }
    let (store, db) = (ctx.tx, ctx.conn.db);
    let mut s = match write_stream(ctx, key)? {
        Some(s) => s,
        None if t.no_mkstream => {
            ctx.reply.null();
            return Ok(());
        }
        None => Stream::create(db, key, store.next_version()),
    };
    if s.info.last_id == StreamId::MAX {
        return Err(CmdError::reply(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = next_id(s.info.last_id, t.id).ok_or_else(|| {
        CmdError::reply(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        )
    })?;
    let pairs: Vec<(&[u8], &[u8])> = fields.chunks(2).map(|p| (&p[0][..], &p[1][..])).collect();
    let mut w = Writes::new();
    s.add(store, &mut w, id, &pairs, node_max(ctx))?;
    s.put_meta(&mut w);
    store.apply(w)?;
    crate::notify::keyspace_event(ctx, Class::Stream, "xadd", db, key);
    if let Some(rule) = t.rule {
        let mut w = Writes::new();
        if s.trim(store, &mut w, rule, t.approx, t.limit)? > 0 {
            s.put_meta(&mut w);
            store.apply(w)?;
            crate::notify::keyspace_event(ctx, Class::Stream, "xtrim", db, key);
        }
    }
    let name = args.argv()[0].clone();
    ctx.effects
        .rewrite(xadd_effect(&name, &a, idpos, &t, id, &s));
    reply_id(ctx.reply, id);
    Ok(())
}

/// What an XADD propagates (Redis 7.0's xaddCommand): the command as called with the ID it
/// generated in place of `*` (or `ms-*`), and after a `~` trim, `=` and the threshold that
/// reproduces its result (the length left, or the first ID left: `streamRewriteTrimArgument`).
/// `a`: the arguments after the command `name` (as called).
fn xadd_effect(
    name: &[u8],
    a: &[bytes::Bytes],
    idpos: usize,
    t: &TrimArgs,
    id: StreamId,
    s: &Stream,
) -> crate::effects::Argv {
    let mut argv = crate::effects::argv([name]);
    argv.extend(a.iter().map(|x| x.to_vec()));
    if !matches!(t.id, Some((_, true))) {
        argv[idpos + 1] = id.to_string().into_bytes();
    }
    if t.approx {
        let found = (2..idpos + 1).find(|&i| {
            argv[i].eq_ignore_ascii_case(b"MAXLEN") || argv[i].eq_ignore_ascii_case(b"MINID")
        });
        if let Some(i) = found.filter(|&i| argv.get(i + 1).is_some_and(|x| x == b"~")) {
            argv[i + 1] = b"=".to_vec();
            argv[i + 2] = if argv[i].eq_ignore_ascii_case(b"MAXLEN") {
                s.len().to_string().into_bytes()
            } else {
                s.info.first_id.to_string().into_bytes()
            };
        }
    }
    argv
}

/// XRANGE and XREVRANGE (Redis's `xrangeGenericCommand`).
fn range_generic(ctx: &mut Ctx<'_>, args: &mut Args, rev: bool) -> CmdResult {
    let a = args.rest().to_vec();
    let key = &a[0];
    let (start_arg, end_arg) = if rev { (&a[2], &a[1]) } else { (&a[1], &a[2]) };
    // Each bound is parsed and moved past before the next is read, as Redis does.
    let (mut start, startex) = interval_id(start_arg, 0)?;
    if startex {
        start = start
            .incr()
            .ok_or_else(|| CmdError::reply("ERR invalid start ID for the interval"))?;
    }
    let (mut end, endex) = interval_id(end_arg, u64::MAX)?;
    if endex {
        end = end
            .decr()
            .ok_or_else(|| CmdError::reply("ERR invalid end ID for the interval"))?;
    }
    let mut count: Option<u64> = None;
    let mut j = 3;
    while j < a.len() {
        if a[j].eq_ignore_ascii_case(b"count") && j + 1 < a.len() {
            count = Some(int_arg(&a[j + 1])?.max(0) as u64);
            j += 2;
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    let Some(s) = read_stream(ctx, key)? else {
        ctx.reply.array(0);
        return Ok(());
    };
    if count == Some(0) {
        ctx.reply.null_array();
        return Ok(());
    }
    let entries = s.collect(ctx.tx, start, end, rev, count.unwrap_or(0) as usize)?;
    ctx.reply.array(entries.len());
    for (id, f) in &entries {
        reply_entry(ctx.reply, *id, f);
    }
    Ok(())
}

/// Redis's `streamParseIntervalIDOrReply`: an ID, `(`-prefixed for an exclusive bound.
fn interval_id(b: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if b.len() > 1 && b[0] == b'(' {
        Ok((strict_id_arg(&b[1..], missing_seq)?, true))
    } else {
        Ok((id_arg(b, missing_seq)?, false))
    }
}

fn xrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    range_generic(ctx, args, false)
}

fn xrevrange(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    range_generic(ctx, args, true)
}

fn xlen(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let n = read_stream(ctx, &key)?.map_or(0, |s| s.len());
    ctx.reply.int(n as i64);
    Ok(())
}

fn xdel(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let raw = args.rest().to_vec();
    let (store, db) = (ctx.tx, ctx.conn.db);
    let Some(mut s) = write_stream(ctx, &key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let mut ids = raw
        .iter()
        .map(|b| strict_id_arg(b, 0))
        .collect::<Result<Vec<_>, _>>()?;
    ids.sort_unstable();
    ids.dedup();
    let mut w = Writes::new();
    let n = s.delete(store, &mut w, &ids, true)?;
    if n > 0 {
        s.put_meta(&mut w);
        store.apply(w)?;
        crate::notify::keyspace_event(ctx, Class::Stream, "xdel", db, &key);
    }
    ctx.reply.int(n as i64);
    Ok(())
}

fn xtrim(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let key = &a[0];
    let (t, _) = parse_trim(ctx, &a, 1, false)?;
    let (store, db) = (ctx.tx, ctx.conn.db);
    let Some(mut s) = write_stream(ctx, key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let Some(rule) = t.rule else {
        return Err(CmdError::reply(ERR_SYNTAX));
    };
    let mut w = Writes::new();
    let n = s.trim(store, &mut w, rule, t.approx, t.limit)?;
    if n > 0 {
        s.put_meta(&mut w);
        store.apply(w)?;
        crate::notify::keyspace_event(ctx, Class::Stream, "xtrim", db, key);
    }
    ctx.reply.int(n as i64);
    Ok(())
}

fn xsetid(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.rest().to_vec();
    let key = &a[0];
    let id = strict_id_arg(&a[1], 0)?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 2;
    while i < a.len() {
        let more = i + 1 < a.len();
        if a[i].eq_ignore_ascii_case(b"entriesadded") && more {
            let n = int_arg(&a[i + 1])?;
            if n < 0 {
                return Err(CmdError::reply("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if a[i].eq_ignore_ascii_case(b"maxdeletedid") && more {
            max_deleted = strict_id_arg(&a[i + 1], 0)?;
            if id < max_deleted {
                return Err(CmdError::reply(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        i += 2;
    }
    let (store, db) = (ctx.tx, ctx.conn.db);
    let Some(mut s) = write_stream(ctx, key)? else {
        return Err(CmdError::reply("ERR no such key"));
    };
    if !s.is_empty() {
        let top = s.collect(store, StreamId::MIN, StreamId::MAX, true, 1)?;
        if top.first().is_some_and(|(top, _)| id < *top) {
            return Err(CmdError::reply(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added.is_some_and(|n| s.len() > n) {
            return Err(CmdError::reply(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    // Redis 7.0.15 does not compare the ID with the stream's own largest deleted ID.
    s.info.last_id = id;
    if let Some(n) = entries_added {
        s.info.entries_added = n;
    }
    if !max_deleted.is_zero() {
        s.info.max_deleted = max_deleted;
    }
    let mut w = Writes::new();
    s.put_meta(&mut w);
    store.apply(w)?;
    crate::notify::keyspace_event(ctx, Class::Stream, "xsetid", db, key);
    ctx.reply.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xadd_ids_follow_the_last_one() {
        let last = StreamId::new(5, 3);
        assert_eq!(
            next_id(last, Some((StreamId::new(5, 4), true))),
            Some(StreamId::new(5, 4))
        );
        assert_eq!(next_id(last, Some((StreamId::new(5, 3), true))), None);
        assert_eq!(
            next_id(last, Some((StreamId::new(5, 0), false))),
            Some(StreamId::new(5, 4))
        );
        assert_eq!(
            next_id(last, Some((StreamId::new(6, 0), false))),
            Some(StreamId::new(6, 0))
        );
        assert_eq!(next_id(last, Some((StreamId::new(4, 0), false))), None);
        assert_eq!(
            next_id(
                StreamId::new(5, u64::MAX),
                Some((StreamId::new(5, 0), false))
            ),
            None
        );
        assert_eq!(
            next_id(StreamId::MIN, Some((StreamId::new(0, 0), false))),
            Some(StreamId::new(0, 1))
        );
        let auto = next_id(StreamId::MIN, None).unwrap();
        assert!(auto.ms > 0 && auto.seq == 0);
        let future = StreamId::new(u64::MAX - 1, u64::MAX);
        assert_eq!(next_id(future, None), Some(StreamId::new(u64::MAX, 0)));
    }
}
