//! The blocking sorted-set pops (Redis's t_zset.c `blockingGenericZpopCommand`): BZPOPMIN,
//! BZPOPMAX and BZMPOP, over the pop of `zsets.rs` and the registry of `blocking.rs`, as
//! the blocking list pops of `lists.rs` (`docs/design.md` §13.8).
//!
//! A client that finds every key absent blocks on them all; the first write to one of them
//! that leaves a sorted set there (ZADD, ZINCRBY, a *STORE destination, RENAME, ..., also
//! inside an EXEC, served after it) pops for the first client blocked on it. A key holding
//! another type is WRONGTYPE when the command runs, and is skipped while it waits (a list
//! pushed to a key a BZPOPMIN waits on serves the list waiters only). In an EXEC, as in
//! Redis, the commands do not block: they reply a null array at once.
//!
//! Layer: commands (above services; below execution).

use super::zsets::{parse_mpop, pop, pop_first, reply_popped};
use super::{Args, CmdError, CmdResult, Ctx};
use crate::blocking::{parse_timeout, Attempt, ServeFn, Served};
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::store::{RType, Tx};
use bytes::Bytes;
use std::time::Duration;

/// The non-blocking pop a served sorted-set pop propagates as (Redis 7.0): `ZPOPMIN k` /
/// `ZPOPMAX k`, or with the number popped (`counted`: ZMPOP, BZMPOP).
pub(super) fn zpop_effect(
    key: &[u8],
    max: bool,
    popped: usize,
    counted: bool,
) -> crate::effects::Argv {
    let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
    let mut argv = crate::effects::argv([name, key]);
    if counted {
        argv.push(popped.to_string().into_bytes());
    }
    argv
}

/// The serve function of a client blocked in BZPOPMIN, BZPOPMAX (`!nested`) or BZMPOP.
fn pop_serve(max: bool, count: u64, nested: bool, proto: Proto) -> ServeFn {
    Box::new(
        move |store: &Tx<'_>, db: u8, key: &[u8], _extra_here: bool| {
            match store.get(db, key)? {
                None => return Ok(Attempt::Empty),
                Some(m) if m.rtype != RType::ZSet => return Ok(Attempt::Skip),
                Some(_) => {}
            }
            // A sorted set exists only while it has members: the pop finds at least one.
            let popped = pop(store, db, key, max, count)?.unwrap_or_default();
            if popped.is_empty() {
                return Ok(Attempt::Empty);
            }
            let effect = zpop_effect(key, max, popped.len(), nested);
            crate::effects::push_pending([(store.dbs.logical(db), effect)]);
            let mut r = ReplyBuf::with_capacity(proto, 64);
            reply_popped(&mut r, key, &popped, nested);
            Ok(Attempt::Served(Served {
                reply: r.take(),
                then: None,
            }))
        },
    )
}

/// BZPOPMIN, BZPOPMAX and BZMPOP on parsed arguments: pops from the first existing key, or
/// blocks on them all.
fn bzpop_generic(
    ctx: &mut Ctx<'_>,
    keys: &[Bytes],
    max: bool,
    count: u64,
    nested: bool,
    timeout: Option<Duration>,
) -> CmdResult {
    let (store, db) = (ctx.tx, ctx.conn.db);
    if let Some((k, popped)) = pop_first(store, db, keys, max, count)? {
        ctx.effects
            .rewrite(zpop_effect(&k, max, popped.len(), nested));
        reply_popped(ctx.reply, &k, &popped, nested);
        return Ok(());
    }
    // Redis's `CLIENT_DENY_BLOCKING` (MULTI/EXEC): as a timeout, even with timeout 0.
    if ctx.conn.in_exec {
        ctx.reply.null_array();
        return Ok(());
    }
    let serve = pop_serve(max, count, nested, ctx.reply.proto);
    let none: &[Bytes] = &[];
    let wait = ctx.shared.blocked.block(
        store,
        ctx.conn.id,
        ctx.reply.proto,
        db,
        keys,
        none,
        timeout,
        serve,
    );
    ctx.blocked = Some(wait);
    Ok(())
}

/// BZPOPMIN and BZPOPMAX: `key [key ...] timeout` (the timeout is checked first).
fn bzpop(ctx: &mut Ctx<'_>, args: &mut Args, max: bool) -> CmdResult {
    let rest = args.rest().to_vec();
    let (timeout, keys) = rest
        .split_last()
        .ok_or_else(|| CmdError::reply(super::args::ERR_SYNTAX))?;
    let timeout = parse_timeout(timeout)?;
    bzpop_generic(ctx, keys, max, 1, false, timeout)
}

pub(super) fn bzpopmin(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    bzpop(ctx, args, false)
}

pub(super) fn bzpopmax(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    bzpop(ctx, args, true)
}

/// BZMPOP: `timeout numkeys key [key ...] MIN|MAX [COUNT count]`; as Redis, the arguments
/// after the timeout are checked before it.
pub(super) fn bzmpop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let timeout = args.next_bytes()?;
    let all: Vec<Bytes> = args.rest().to_vec();
    let (keys, max, count) = parse_mpop(&all)?;
    let timeout = parse_timeout(&timeout)?;
    bzpop_generic(ctx, keys, max, count, true, timeout)
}
