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
//!
//! Layer: execution (above commands; below connection and server).

use crate::cmd::table::{self, key_flag, traits, Keys};
use crate::cmd::{dispatch_found, find_command, flag, ConnState, Ctx, Found, Spec};
use crate::keys::{meta_key, meta_key_head};
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::server::Shared;
use crate::store::OwnedKeyGuard;
use bytes::{Bytes, BytesMut};
use std::sync::Arc;
use strata::{ShardTxn, StrataEngine};
use tokio::sync::oneshot;

/// Where one request runs.
pub enum Route {
    /// On the connection's thread.
    Inline,
    /// On the worker of `shard`; `write`: the command may write (its keys' stripes are held
    /// while it is in flight); `keys`: its keys' positions in the request; `reads`: the
    /// records the worker fetches for it, batched with the other commands of its group.
    Shard {
        shard: usize,
        write: bool,
        keys: Keys,
        reads: Vec<Vec<u8>>,
    },
}

/// Looks `argv` up in the command table (once: the result goes on to `dispatch_found`) and
/// decides where it runs for a client in `conn`'s state. Everything the decision needs is
/// in the command's table entry: its flags, its key specs and Strata's execution traits.
pub fn route(shared: &Shared, conn: &ConnState, argv: &[Bytes]) -> (Found, Route) {
    let found = find_command(argv);
    let Found::Command(spec, _) = found else {
        return (found, Route::Inline); // unknown command: the error is replied inline
    };
    if shared.scripts.busy() {
        return (found, Route::Inline); // `-BUSY`, replied by the dispatch
    }
    (found, route_spec(shared, conn, spec, argv))
}

fn route_spec(shared: &Shared, conn: &ConnState, spec: &'static Spec, argv: &[Bytes]) -> Route {
    // In MULTI, commands are queued on the connection's thread; WATCH takes its keys'
    // stripes there (`cmd/multi.rs`). Blocking commands run here too: a client that blocks
    // waits in its connection task, and registers under its keys' stripes (`blocking.rs`).
    // Commands whose keys follow a count or a keyword find them by parsing, and take their
    // stripes here.
    // A script runs on the worker of the shard of its declared keys when it is known to
    // keep to them (`cmd/scripting.rs`); when a run finds otherwise it asks to be run again
    // here (`Ctx::rerun_inline`).
    let script = spec.has_trait(traits::SCRIPT);
    if conn.multi.is_some()
        || !spec.arity_ok(argv.len())
        || spec.has(flag::BLOCKING)
        || (spec.has(flag::MOVABLE_KEYS) && !script)
        || spec.has_trait(traits::CONNECTION_THREAD)
        || (script && !crate::cmd::scripting::may_run_on_shard(shared, spec, argv))
    {
        return Route::Inline;
    }
    if !spec.has(flag::NO_AUTH) && !conn.authenticated && shared.acl.auth_required() {
        return Route::Inline;
    }
    let Some(keys) = table::keys(spec, argv).filter(|k| !k.is_empty()) else {
        return Route::Inline;
    };
    let db = shared.store.db();
    let mut shard = None;
    let mut reads = Vec::new();
    for k in &keys {
        // The shard is found from the record key's head (database, slot), built on the
        // stack: a key that is not fetched ahead costs no allocation.
        let s = db.shard_of(&meta_key_head(conn.db, &argv[k.pos]));
        match shard {
            None => shard = Some(s),
            Some(first) if first != s => return Route::Inline,
            Some(_) => {}
        }
        // A key the command overwrites without reading it is not fetched ahead (a read it
        // does need, for an option such as SET's NX, is made then).
        if k.flags & key_flag::OW == 0 {
            reads.push(meta_key(conn.db, &argv[k.pos]));
        }
    }
    // A read-only command may still write its keys (PFCOUNT caches the count it computed):
    // its key specs say so (RW), and it holds its stripes as a writer does.
    let write = spec.has(flag::WRITE)
        || keys
            .iter()
            .any(|k| k.flags & (key_flag::RW | key_flag::OW | key_flag::RM) != 0);
    match shard {
        Some(shard) => Route::Shard {
            shard,
            write,
            keys,
            reads,
        },
        None => Route::Inline,
    }
}

/// The arguments at `keys`' positions (inline for up to four keys: no allocation).
pub fn key_args<'a>(argv: &'a [Bytes], keys: &Keys) -> smallvec::SmallVec<[&'a [u8]; 4]> {
    keys.iter().map(|k| &argv[k.pos][..]).collect()
}

/// Queues `argv` to `shard`'s worker, which fetches `reads` ahead. The reply (in `proto`) arrives on the returned channel
/// once the command's group is written; `guard` (the stripes of a writing command's keys) is
/// released then.
#[allow(clippy::too_many_arguments)]
pub fn submit(
    shared: &Arc<Shared>,
    conn: &ConnState,
    proto: Proto,
    argv: Vec<Bytes>,
    found: Found,
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
        // The database the client's selection names now: a read routed before a SWAPDB
        // and run after it reads the swapped one (nothing writes it while this worker
        // holds the shard); a write holds stripes, under which the map does not change.
        conn.db = run_shared.store.dbs.physical(conn.selected);
        // The sequencer (`repl/sequencer.rs`): held from here (the stripes are held since
        // the submission) until the completion appended, after the group's write.
        // A read (no stripes) writes nothing: it leaves the master's history file.
        let seq = if guard.is_some() {
            run_shared.master.seq.enter()
        } else {
            run_shared.master.seq.enter_quiet()
        };
        if seq.is_some() {
            conn.repl_pending = Some(Vec::new());
        }
        let mut reply = ReplyBuf::with_capacity(proto, 64);
        let (rerun_inline, wakes) = run_shared.store.with_shard_txn(txn, |tx| {
            let mut ctx = Ctx::new(&run_shared, tx, &mut conn, &mut reply);
            dispatch_found(&mut ctx, argv, found);
            (ctx.rerun_inline, std::mem::take(&mut ctx.wakes))
        });
        // A command that must run elsewhere replies nothing: the connection sees an empty
        // reply (a real one never is) and runs it again.
        if rerun_inline {
            reply.truncate(0);
        }
        // Clients blocked on keys this command wrote, served by it: they get their replies
        // once the group's write is applied, as the command does.
        // The group writes (and, under `appendfsync always`, syncs) if anything in it wrote.
        let synced = txn.has_writes() && run_shared.store.sync_writes();
        let unit = conn.repl_pending.take();
        Some(Box::new(move |written: strata::Result<()>| {
            // Completions run in group order after the group's write: the log gets the
            // group's effects in its order, before the worker starts the next group.
            if let (Ok(()), Some(unit)) = (&written, unit) {
                run_shared.master.append_unit(&unit, unit.len() > 1);
            }
            drop(seq);
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
/// the database refuses writes, else the error (`error.rs`).
pub fn failed_reply(shared: &Shared, proto: Proto, e: &strata::Error) -> BytesMut {
    crate::error::failed_reply(shared.store.db(), proto, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::lookup_argv;

    fn argv(parts: &[&str]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::from(p.to_string())).collect()
    }

    fn keys_of(parts: &[&str]) -> Vec<(String, u32)> {
        let a = argv(parts);
        let spec = lookup_argv(&a).expect("a command with its arity");
        table::keys(spec, &a)
            .expect("keys")
            .iter()
            .map(|k| (parts[k.pos].to_string(), k.flags))
            .collect()
    }

    #[test]
    fn keys_and_what_the_command_does_with_them() {
        use key_flag::*;
        let names = |v: Vec<(String, u32)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(names(keys_of(&["mset", "a", "1", "b", "2"])), ["a", "b"]);
        assert_eq!(names(keys_of(&["del", "a", "b", "c"])), ["a", "b", "c"]);
        assert_eq!(names(keys_of(&["object", "encoding", "k"])), ["k"]);
        assert_eq!(keys_of(&["get", "k"]), [("k".into(), RO | ACCESS)]);
        // SET overwrites blindly unless GET reads the old value.
        assert_eq!(keys_of(&["set", "k", "v"]), [("k".into(), OW | UPDATE)]);
        assert_eq!(
            keys_of(&["set", "k", "v", "nx", "get"]),
            [("k".into(), RW | ACCESS | UPDATE)]
        );
        // A count, then the keys (and a destination first).
        assert_eq!(
            names(keys_of(&[
                "zunionstore",
                "d",
                "2",
                "a",
                "b",
                "weights",
                "1",
                "2"
            ])),
            ["d", "a", "b"]
        );
        assert_eq!(
            names(keys_of(&["lmpop", "2", "a", "b", "left"])),
            ["a", "b"]
        );
        assert_eq!(
            names(keys_of(&["zinter", "2", "a", "b", "withscores"])),
            ["a", "b"]
        );
    }

    #[test]
    fn malformed_counts_name_no_keys() {
        for bad in [
            &["zunionstore", "d", "x", "a"][..],
            &["zunionstore", "d", "-1", "a"],
            &["zunionstore", "d", "3", "a"],
            &["lmpop", "0", "a", "left"],
        ] {
            let a = argv(bad);
            let spec = lookup_argv(&a).unwrap();
            assert!(table::keys(spec, &a).is_none(), "{bad:?}");
        }
    }
}
