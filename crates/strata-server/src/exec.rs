//! Where a command runs: on the worker of the shard that owns its keys (p2KVS meets Redis),
//! or on the connection's thread.
//!
//! A command whose keys all live in one shard (every single-key command, and multi-key ones
//! whose keys share a shard: keys with one `{hash tag}` always do, since shards own slot
//! ranges) is queued to that shard's worker with `strata::Db::exec`. The connection goes on
//! parsing and queuing the rest of its pipeline; the worker runs consecutive commands of all
//! connections as one group (one engine write, at most one WAL sync, see `strata`'s
//! `exec.rs`); each reply comes back through a one-shot channel and the connection writes the
//! replies in request order. Reads on the worker see every earlier write of the shard, so a
//! connection's pipelined `SET k v` then `GET k` read their own write, with no locks.
//! When the connection has nothing in flight and the shard is idle (and writes are not
//! synced one by one), the command runs on the connection's own thread under the worker's
//! lock instead (`strata::Db::try_exec_here`, called from `conn.rs`): the same exclusion,
//! without the two thread switches of a hand-off, which on few cores cost more than the
//! command.
//!
//! Everything else (keys in several shards, commands without keys, commands that change the
//! connection, errors found before running: unknown command, arity, authentication) runs on
//! the connection's thread, after the connection's queued commands have answered, so a
//! connection's commands still take effect in its order. See `store.rs` for how the two kinds
//! exclude each other.

use crate::cmd::{dispatch, flag, lookup_argv, ConnState, Ctx};
use crate::keys::meta_key;
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::server::Shared;
use crate::store::{with_txn, OwnedKeyGuard};
use bytes::{Bytes, BytesMut};
use std::sync::Arc;
use strata::{ShardTxn, StrataEngine};
use tokio::sync::oneshot;

/// Where one request runs.
pub enum Route {
    /// On the connection's thread.
    Inline,
    /// On the worker of `shard`; `write`: the command may write (its keys' stripes are held
    /// while it is in flight); `reads`: the records the worker fetches for it, batched with
    /// the other commands of its group.
    Shard {
        shard: usize,
        write: bool,
        reads: Vec<Vec<u8>>,
    },
}

/// Commands with keys that still run inline: their meaning reaches beyond the keys the
/// command table names (COPY and MOVE name a destination database; the sorted-set *STORE
/// commands name only their destination, their sources follow a key count; WATCH registers
/// on the connection's thread).
const INLINE_ONLY: &[&str] = &[
    "copy",
    "move",
    "watch",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
];

/// Commands that usually write without reading their keys first: their records are not
/// fetched ahead (a read they do need, for an option such as SET's NX or GET, is made then).
const BLIND_WRITES: &[&str] = &["set", "setex", "psetex", "mset"];

/// Decides where `argv` runs for a client in `conn`'s state.
pub fn route(shared: &Shared, conn: &ConnState, argv: &[Bytes]) -> Route {
    let Some(spec) = lookup_argv(argv) else {
        return Route::Inline; // unknown command or wrong arity: the error is replied inline
    };
    if shared.scripts.busy() {
        return Route::Inline; // `-BUSY`, replied by the dispatch
    }
    // In MULTI, commands are queued on the connection's thread; WATCH takes its keys'
    // stripes there (`cmd/multi.rs`). Blocking commands run here too: a client that blocks
    // waits in its connection task, and registers under its keys' stripes (`blocking.rs`).
    if conn.multi.is_some()
        || spec.keys.0 <= 0
        || INLINE_ONLY.contains(&spec.name)
        || spec.flags & flag::BLOCKING != 0
    {
        return Route::Inline;
    }
    if spec.flags & flag::NO_AUTH == 0 && !conn.authenticated {
        let password = shared.config.read().requirepass.is_some();
        if password {
            return Route::Inline;
        }
    }
    let keys = command_keys(spec.keys, argv);
    let db = shared.store.db();
    let mut shard = None;
    let mut reads = Vec::with_capacity(keys.len());
    for k in &keys {
        let mk = meta_key(conn.db, k);
        let s = db.shard_of(&mk);
        match shard {
            None => shard = Some(s),
            Some(first) if first != s => return Route::Inline,
            Some(_) => {}
        }
        reads.push(mk);
    }
    if BLIND_WRITES.contains(&spec.name) {
        reads.clear();
    }
    match shard {
        Some(shard) => Route::Shard {
            shard,
            write: spec.flags & flag::WRITE != 0,
            reads,
        },
        None => Route::Inline,
    }
}

/// The keys of `argv` as its command's table entry names them (none for an unknown command).
pub fn keys_of(argv: &[Bytes]) -> Vec<&[u8]> {
    command_keys(lookup_argv(argv).map_or((0, 0, 0), |s| s.keys), argv)
}

/// The keys of a request by the command table's `(first, last, step)` (argv positions; a
/// negative `last` counts from the end).
pub fn command_keys(keys: (i32, i32, i32), argv: &[Bytes]) -> Vec<&[u8]> {
    let (first, last, step) = keys;
    let argc = argv.len() as i64;
    let first = i64::from(first);
    let last = if last < 0 {
        argc + i64::from(last)
    } else {
        i64::from(last)
    };
    let step = i64::from(step.max(1));
    let mut out = Vec::new();
    let mut i = first;
    while i >= 1 && i <= last && i < argc {
        out.push(&argv[i as usize][..]);
        i += step;
    }
    out
}

/// Queues `argv` to `shard`'s worker, which fetches `reads` ahead. The reply (in `proto`) arrives on the returned channel
/// once the command's group is written; `guard` (the stripes of a writing command's keys) is
/// released then.
pub fn submit(
    shared: &Arc<Shared>,
    conn: &ConnState,
    proto: Proto,
    argv: Vec<Bytes>,
    shard: usize,
    reads: Vec<Vec<u8>>,
    guard: Option<OwnedKeyGuard>,
) -> oneshot::Receiver<BytesMut> {
    let (tx, rx) = oneshot::channel();
    let run_shared = shared.clone();
    let mut conn = conn.clone();
    let run = move |txn: strata::Result<&mut ShardTxn<StrataEngine>>| {
        let txn = match txn {
            Ok(t) => t,
            Err(e) => {
                let _ = tx.send(failed_reply(&run_shared, proto, &e));
                drop(guard);
                return None;
            }
        };
        let mut reply = ReplyBuf::with_capacity(proto, 64);
        with_txn(txn, || {
            let mut ctx = Ctx {
                shared: &run_shared,
                conn: &mut conn,
                reply: &mut reply,
            };
            dispatch(&mut ctx, argv);
        });
        // Clients blocked on keys this command wrote, served by it: they get their replies
        // once the group's write is applied, as the command does.
        let wakes = crate::blocking::take_wakes();
        // The group writes (and, under `appendfsync always`, syncs) if anything in it wrote.
        let synced = txn.has_writes() && run_shared.store.sync_writes();
        Some(Box::new(move |written: strata::Result<()>| {
            drop(guard);
            wakes.deliver(&run_shared, written.as_ref().map(|_| ()));
            let out = match written {
                Ok(()) => {
                    if synced {
                        run_shared.store.note_sync();
                    }
                    reply.take()
                }
                Err(e) => failed_reply(&run_shared, proto, &e),
            };
            let _ = tx.send(out);
        }) as Box<dyn FnOnce(strata::Result<()>) + Send>)
    };
    shared.store.db().exec_reading(shard, reads, run);
    rx
}

/// The reply to a command whose write failed (or that could not run): Redis's MISCONF once
/// the database refuses writes (`cmd::misconf`), else the error.
pub fn failed_reply(shared: &Shared, proto: Proto, e: &strata::Error) -> BytesMut {
    match crate::cmd::misconf(shared) {
        Some(m) => {
            let mut r = ReplyBuf::with_capacity(proto, 64);
            r.error(&m);
            r.take()
        }
        None => error_reply(proto, e),
    }
}

/// The reply to a command whose write failed (or that could not run).
pub fn error_reply(proto: Proto, e: &strata::Error) -> BytesMut {
    let mut r = ReplyBuf::with_capacity(proto, 64);
    r.error(&format!("ERR {e}"));
    r.take()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(parts: &[&str]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::from(p.to_string())).collect()
    }

    #[test]
    fn keys_by_table_positions() {
        let a = argv(&["mset", "a", "1", "b", "2"]);
        assert_eq!(command_keys((1, -1, 2), &a), vec![&b"a"[..], b"b"]);
        let a = argv(&["get", "k"]);
        assert_eq!(command_keys((1, 1, 1), &a), vec![&b"k"[..]]);
        let a = argv(&["del", "a", "b", "c"]);
        assert_eq!(command_keys((1, -1, 1), &a).len(), 3);
        let a = argv(&["object", "encoding", "k"]);
        assert_eq!(command_keys((2, 2, 1), &a), vec![&b"k"[..]]);
        assert!(command_keys((0, 0, 0), &a).is_empty());
    }
}
