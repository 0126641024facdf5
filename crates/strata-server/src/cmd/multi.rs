//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH (Redis's multi.c).
//!
//! After MULTI, `dispatch` checks each command as Redis's `processCommand` does (unknown
//! command, arity, authentication, commands not allowed in a transaction, MISCONF for writes)
//! and queues it, replying `+QUEUED`; a rejected command flags the transaction, and EXEC
//! then replies EXECABORT. While a client is in MULTI every command routes to its
//! connection's thread (`exec::route`), so queueing never happens on a shard worker.
//!
//! **EXEC is atomic.** It runs on the connection's thread: it takes the stripes of every key
//! of every queued command and of the watched keys (`Store::lock_for_exec`, ascending like
//! every other taker, so it cannot deadlock), or all stripes when a queued command touches
//! the keyspace without naming keys (FLUSHDB, KEYS, DBSIZE, SCAN, RANDOMKEY: a global
//! exclusive lock against writers) or names keys of other databases (COPY ... DB, MOVE).
//! Under them it checks the watched keys, then runs the commands in a front transaction
//! (`txn.rs`): their reads see the earlier commands' writes, their writes are buffered and
//! applied at the end with one write, atomic across shards. Readers never see part of it;
//! writers of its keys wait for the stripes. A command failing at run time replies its error
//! inside EXEC's array and the others still apply (Redis has no rollback); if the final
//! write fails, every reply becomes that failure.
//!
//! Layer: commands (above services; below execution).

use super::flag::*;
use super::table;
use super::table::traits::*;
use super::{cmd, cmd_with, dispatch, lookup_argv, Args, CmdError, CmdResult, Ctx, Entry};
use crate::protocol::parse::parse_i64;
use crate::protocol::reply::ReplyBuf;
use bytes::Bytes;
use std::sync::atomic::Ordering;

const ERR_EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// A client's open transaction.
#[derive(Clone, Default)]
pub struct MultiState {
    pub queued: Vec<Vec<Bytes>>,
    /// A command was rejected while queueing (Redis's `CLIENT_DIRTY_EXEC`).
    pub failed: bool,
}

pub static COMMANDS: &[Entry] = &[
    cmd_with("multi", multi, RUNS_IN_MULTI),
    cmd_with("exec", exec, RUNS_IN_MULTI),
    cmd_with("discard", discard, RUNS_IN_MULTI),
    cmd_with("watch", watch, RUNS_IN_MULTI | CONNECTION_THREAD),
    cmd("unwatch", unwatch),
];

/// Publishes the transaction's size for CLIENT LIST (`multi=`, `multi-mem=`, flag `x`).
fn publish(ctx: &Ctx<'_>) {
    let info = &ctx.conn.info;
    match &ctx.conn.multi {
        Some(m) => {
            info.multi.store(m.queued.len() as i64, Ordering::Relaxed);
            // Redis's `argv_len_sums`: argument bytes plus a pointer per argument.
            let mem: usize = m
                .queued
                .iter()
                .map(|a| a.iter().map(|x| x.len() + 8).sum::<usize>())
                .sum();
            info.multi_mem.store(mem, Ordering::Relaxed);
        }
        None => {
            info.multi.store(-1, Ordering::Relaxed);
            info.multi_mem.store(0, Ordering::Relaxed);
        }
    }
}

/// Queues `argv` in the open transaction (`+QUEUED`).
pub fn queue(ctx: &mut Ctx<'_>, argv: Vec<Bytes>) {
    if let Some(m) = &mut ctx.conn.multi {
        m.queued.push(argv);
    }
    publish(ctx);
    ctx.reply.simple("QUEUED");
}

/// A command refused before it ran (Redis's `rejectCommand`): flags an open transaction;
/// for EXEC itself, discards the transaction and says why.
pub fn reject(ctx: &mut Ctx<'_>, is_exec: bool, msg: &[u8]) {
    if is_exec {
        discard_transaction(ctx);
        let why = msg.strip_prefix(b"ERR ").unwrap_or(msg);
        let mut m = b"EXECABORT Transaction discarded because of: ".to_vec();
        m.extend_from_slice(why);
        return ctx.reply.error_bytes(&m);
    }
    if let Some(m) = &mut ctx.conn.multi {
        m.failed = true;
    }
    ctx.reply.error_bytes(msg);
}

/// Whether EXEC would run a queued write (MISCONF refuses it then).
pub fn queued_writes(ctx: &Ctx<'_>) -> bool {
    ctx.conn.multi.as_ref().is_some_and(|m| {
        m.queued
            .iter()
            .any(|a| lookup_argv(a).is_some_and(|s| s.flags & WRITE != 0))
    })
}

/// Forgets the client's watched keys and their modified flag.
fn unwatch_all(ctx: &Ctx<'_>) {
    ctx.tx.watches.unwatch_all(ctx.conn.id);
    ctx.conn.info.watch_dirty.store(false, Ordering::SeqCst);
}

/// Redis's `discardTransaction`: closes the transaction and forgets the watched keys
/// (DISCARD, EXEC, RESET).
pub fn discard_transaction(ctx: &mut Ctx<'_>) {
    ctx.conn.multi = None;
    unwatch_all(ctx);
    publish(ctx);
}

fn multi(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    if ctx.conn.multi.is_some() {
        return Err(CmdError::reply("ERR MULTI calls can not be nested"));
    }
    ctx.conn.multi = Some(MultiState::default());
    publish(ctx);
    ctx.reply.ok();
    Ok(())
}

fn discard(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    if ctx.conn.multi.is_none() {
        return Err(CmdError::reply("ERR DISCARD without MULTI"));
    }
    discard_transaction(ctx);
    ctx.reply.ok();
    Ok(())
}

fn watch(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if ctx.conn.multi.is_some() {
        return Err(CmdError::reply("ERR WATCH inside MULTI is not allowed"));
    }
    let mut keys = Vec::with_capacity(args.remaining());
    while !args.is_done() {
        keys.push(args.next_bytes()?);
    }
    let store = ctx.tx;
    let db = ctx.conn.db;
    // Under the keys' stripes: a write in flight finishes first, later ones see the watch.
    for k in &keys {
        let expired = store.is_expired(db, k)?;
        store
            .watches
            .watch(ctx.conn.id, &ctx.conn.info.watch_dirty, db, k, expired);
    }
    ctx.reply.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    unwatch_all(ctx);
    ctx.reply.ok();
    Ok(())
}

/// The `(database, key)`s EXEC locks: the watched keys and the keys of the queued commands
/// (in the database each runs in, following SELECTs), found from each command's key specs;
/// `None` for every stripe, when a command touches the keyspace beyond the keys its specs
/// can name: no key specs at all (FLUSHDB, KEYS, SCAN), specs that are incomplete or whose
/// keys live in the data (SORT BY), another database (COPY ... DB, MOVE), or arguments the
/// specs cannot parse.
fn lock_plan<'a>(
    first_db: u8,
    databases: usize,
    physical: impl Fn(u8) -> u8,
    queued: &'a [Vec<Bytes>],
    watched: &'a [(u8, Vec<u8>, bool)],
) -> Option<Vec<(u8, &'a [u8])>> {
    let mut db = first_db;
    let mut keys: Vec<(u8, &[u8])> = watched.iter().map(|(d, k, _)| (*d, &k[..])).collect();
    for argv in queued {
        let Some(spec) = lookup_argv(argv) else {
            continue;
        };
        if spec.name == "select" {
            match parse_i64(&argv[1]) {
                Some(n) if n >= 0 && (n as u64) < databases as u64 => db = physical(n as u8),
                _ => {}
            }
            continue;
        }
        let keyspace = spec.has(WRITE | READONLY);
        if !spec.has_keys() {
            if keyspace {
                return None;
            }
            continue;
        }
        if !spec.names_all_keys() {
            return None;
        }
        let found = table::keys(spec, argv)?;
        keys.extend(found.iter().map(|k| (db, &argv[k.pos][..])));
    }
    Some(keys)
}

fn exec(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let Some(m) = ctx.conn.multi.clone() else {
        return Err(CmdError::reply("ERR EXEC without MULTI"));
    };
    if m.failed {
        discard_transaction(ctx);
        return Err(CmdError::reply(ERR_EXECABORT));
    }
    let shared = ctx.shared;
    let store = ctx.tx;
    let watched = store.watches.keys_of(ctx.conn.id);
    let databases = shared.config.read().databases;
    // The map may change until the stripes are held (SWAPDB holds them all while it
    // changes it): plan again if the client's database moved meanwhile.
    let locks = loop {
        ctx.conn.db = store.dbs.physical(ctx.conn.selected);
        let physical = |n| store.dbs.physical(n);
        let plan = lock_plan(ctx.conn.db, databases, physical, &m.queued, &watched);
        let locks = store.lock_for_exec(plan.as_deref());
        if store.dbs.physical(ctx.conn.selected) == ctx.conn.db {
            break locks;
        }
    };
    // Under the stripes of the watched keys, nobody can modify them until the commands ran.
    let mut dirty = ctx.conn.info.watch_dirty.load(Ordering::SeqCst);
    for (db, k, expired_when_watched) in &watched {
        if dirty {
            break;
        }
        // Redis 7.0: a watched key that expired since WATCH aborts EXEC even if nothing
        // deleted it yet.
        dirty = !expired_when_watched && store.is_expired(*db, k)?;
    }
    if dirty {
        drop(locks);
        discard_transaction(ctx);
        ctx.reply.null_array();
        return Ok(());
    }
    // As Redis: unwatch before running, so the transaction's own writes do not matter;
    // CLIENT LIST shows the transaction (`multi=`, flag `x`) until EXEC returns.
    unwatch_all(ctx);
    let count = m.queued.len();
    ctx.reply.array(count);
    let mut inner = ReplyBuf::new(ctx.reply.proto);
    ctx.conn.in_exec = true;
    let conn = &mut *ctx.conn;
    // The transaction's effects go to the replication log before its stripes are released
    // (`repl/sequencer.rs`), as one MULTI/EXEC unit.
    let effects = std::cell::RefCell::new(None);
    let ((), written) = store.run_exec_then(
        locks,
        |tx| {
            conn.multi = None;
            for argv in m.queued {
                let mut c = Ctx::new(shared, tx, &mut *conn, &mut inner);
                dispatch(&mut c, argv);
            }
            *effects.borrow_mut() = conn.repl_pending.take();
            ((), true)
        },
        |w| {
            if let (Ok(()), Some(unit)) = (w, effects.borrow_mut().take()) {
                // As Redis 7.0: MULTI/EXEC around more than one effect.
                shared.master.append_unit(&unit, unit.len() > 1);
            }
        },
    );
    ctx.conn.in_exec = false;
    ctx.conn.multi = None;
    publish(ctx);
    match written {
        Ok(()) => ctx.reply.raw(&inner.take()),
        Err(e) => {
            let failed = crate::exec::failed_reply(shared, inner.proto, &e);
            for _ in 0..count {
                ctx.reply.raw(&failed);
            }
        }
    }
    // HELLO inside the transaction changed the protocol of what follows.
    ctx.reply.proto = inner.proto;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<Bytes> {
        s.split(' ').map(|p| Bytes::from(p.to_string())).collect()
    }

    #[test]
    fn lock_plan_follows_select_and_falls_back_to_all() {
        let watched = vec![(3, b"w".to_vec(), false)];
        let q = vec![
            argv("set a 1"),
            argv("select 2"),
            argv("mset b 1 c 2"),
            argv("select 99"),
            argv("ping"),
            argv("get d"),
        ];
        let plan = lock_plan(0, 16, |d| d, &q, &watched).unwrap();
        assert_eq!(
            plan,
            vec![(3, &b"w"[..]), (0, b"a"), (2, b"b"), (2, b"c"), (2, b"d")]
        );
        for all in [
            "flushdb",
            "dbsize",
            "keys *",
            "scan 0",
            "copy a b db 1",
            "zunionstore d x a",
        ] {
            let q = vec![argv("set a 1"), argv(all)];
            assert_eq!(lock_plan(0, 16, |d| d, &q, &[]), None, "{all}");
        }
    }

    #[test]
    fn lock_plan_finds_keys_after_a_count() {
        let q = vec![
            argv("zunionstore d 2 a b weights 1 2"),
            argv("lmpop 1 l left"),
        ];
        let plan = lock_plan(0, 16, |d| d, &q, &[]).unwrap();
        assert_eq!(plan, vec![(0, &b"d"[..]), (0, b"a"), (0, b"b"), (0, b"l")]);
    }
}
