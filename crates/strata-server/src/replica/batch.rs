//! The stream's single-shard requests applied in runs: the complete requests already read
//! from the master, as many as a run takes ([`MAX_RUN`], [`MAX_RUN_BYTES`]), run on the link
//! thread holding each shard they reach (`strata::HeldShards`, design §11.4), with one
//! engine write per shard for the whole run, as a client's pipelined run in `conn.rs`.
//! Applied one by one through the front, each request cost an engine write (a WAL `writev`)
//! of its own.
//!
//! **What a run takes** ([`Item::route`]): a request whose keys are all in one shard and
//! that routes to a shard (`exec::route`), not a script. Everything else (MULTI and what it
//! queues, EXEC, SELECT, FLUSHALL, keyless commands, keys in several shards, PING,
//! REPLCONF) ends the run before it and is applied alone, as before, by the link.
//!
//! **Where a run stops early** ([`apply_run`]): at a shard it cannot take without waiting
//! (a client's command runs there), at a key whose stripe a client holds, at a database map
//! changed since the routing, and at a request whose reply is an error. What it ran is
//! committed; the link applies the next request alone and starts a new run after it, so
//! the order of the stream is kept.
//!
//! **Position** (`position.rs`): each shard the run wrote gets, in its write, the record of
//! the offset after the run's last request, with `parts` = the number of shards the run
//! wrote. The shards are written one after another: a crash between two leaves fewer
//! records at the largest offset than `parts`, which `position::resume` refuses. A run
//! holds no SELECT, so the selected database is the one before it.
//!
//! **A failing request** (an error reply) is rolled back to the savepoint before it, the
//! requests before it are committed with the position after the last of them, and the error
//! goes back to the link, which stops replication: nothing after it is applied.
//!
//! Layer: replication (the link thread's apply).

use crate::cmd::table::Keys;
use crate::cmd::{dispatch_found, ConnState, Ctx, Found};
use crate::exec::{self, Route};
use crate::position::{Kind, Position};
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::server::Shared;
use bytes::Bytes;
use smallvec::SmallVec;
use std::collections::VecDeque;

/// Most requests in one run. A run holds its shards until it ends, and a client's read of
/// one of them waits meanwhile: a few hundred SETs are a millisecond or less, and an engine
/// write per few hundred requests is already a small part of their cost.
pub const MAX_RUN: usize = 256;
/// Most stream bytes in one run (a run's writes are buffered in its shards' transactions
/// until it ends).
pub const MAX_RUN_BYTES: u64 = 4 << 20;

/// A request of the stream that a run can take.
pub struct Item {
    argv: Vec<Bytes>,
    found: Found,
    shard: usize,
    write: bool,
    keys: Keys,
    /// The stream bytes it covers (`stream.rs`).
    pub bytes: u64,
}

impl Item {
    /// `argv` as a run's request, if it routes to one shard for the master's client in its
    /// state now (after every request before it); otherwise `argv` back.
    pub fn route(
        shared: &Shared,
        conn: &ConnState,
        argv: Vec<Bytes>,
        bytes: u64,
    ) -> Result<Item, Vec<Bytes>> {
        let (found, route) = exec::route(shared, conn, &argv);
        let script =
            matches!(found, Found::Command(s, _) if s.has_trait(crate::cmd::table::traits::SCRIPT));
        match route {
            Route::Shard {
                shard, write, keys, ..
            } if !script => Ok(Item {
                argv,
                found,
                shard,
                write,
                keys,
                bytes,
            }),
            _ => Err(argv),
        }
    }

    /// The request's arguments.
    pub fn into_argv(self) -> Vec<Bytes> {
        self.argv
    }
}

/// What a run did: how many of the queued requests it applied (from the front, removed from
/// the queue) and the stream bytes they cover; `failed`: the reason replication stops (the
/// request after those applied failed, or a shard's write did).
pub struct Ran {
    pub applied: usize,
    pub bytes: u64,
    pub failed: Option<String>,
}

/// Applies requests from the front of `queue` as one run (see the module comment): the
/// stream `replid` from offset `from`.
pub fn apply_run(
    shared: &Shared,
    conn: &mut ConnState,
    queue: &mut VecDeque<Item>,
    replid: &str,
    from: u64,
) -> Ran {
    let store = &shared.store;
    let db = store.db();
    let mut held = db.hold_shards();
    let mut shards: SmallVec<[usize; 4]> = SmallVec::new();
    let mut guards = Vec::new();
    let mut wakes = Vec::new();
    let mut reply = ReplyBuf::with_capacity(Proto::Resp2, 256);
    let mut ran = Ran {
        applied: 0,
        bytes: 0,
        failed: None,
    };
    while let Some(item) = queue.front() {
        let Some(txn) = held.txn(item.shard) else {
            break;
        };
        if item.write {
            match store.try_lock_owned(conn.db, &exec::key_args(&item.argv, &item.keys)) {
                Some(g) => guards.push(g),
                None => break,
            }
        }
        if store.dbs.physical(conn.selected) != conn.db {
            break;
        }
        let Some(item) = queue.pop_front() else {
            break;
        };
        if !shards.contains(&item.shard) {
            shards.push(item.shard);
        }
        let head: SmallVec<[Bytes; 4]> = item.argv.iter().take(4).cloned().collect();
        let save = txn.savepoint();
        let woken = store.with_shard_txn(txn, |tx| {
            let mut ctx = Ctx::new(shared, tx, &mut *conn, &mut reply);
            dispatch_found(&mut ctx, item.argv, item.found);
            std::mem::take(&mut ctx.wakes)
        });
        let out = reply.take();
        if let Some(reason) = failure(&head, &out) {
            txn.rollback_to(save);
            ran.failed = Some(reason);
            break;
        }
        wakes.push((item.shard, woken));
        ran.applied += 1;
        ran.bytes += item.bytes;
    }
    // The position after the run, in each shard it wrote.
    let wrote: SmallVec<[usize; 4]> = shards
        .iter()
        .copied()
        .filter(|&s| held.txn(s).is_some_and(|t| t.has_writes()))
        .collect();
    if !wrote.is_empty() {
        let pos = Position {
            kind: Kind::Following,
            replid: replid.to_string(),
            offset: from + ran.bytes,
            db: conn.selected,
        };
        for &s in &wrote {
            let (k, v) = crate::position::part_record(db, s, &pos, wrote.len());
            let put = held.txn(s).map(|t| t.put_owned(k, v));
            if let Some(Err(e)) = put {
                // Nothing is written: the run is dropped with `held`.
                ran.applied = 0;
                ran.bytes = 0;
                ran.failed = Some(format!("storing the replication position: {e}"));
                return ran;
            }
        }
    }
    let committed = held.commit();
    drop(guards);
    if !wrote.is_empty() && store.sync_writes() {
        store.note_sync();
    }
    let outcome = |shard: usize| {
        committed
            .iter()
            .find(|(s, _)| *s == shard)
            .map_or(Ok(()), |(_, r)| r.as_ref().map(|_| ()))
    };
    if let Some(e) = committed.iter().find_map(|(_, r)| r.as_ref().err()) {
        // The database refuses writes from now on (a failed write is sticky); the offset
        // stays before the run, and its bytes go to no replica of this server.
        ran.applied = 0;
        ran.bytes = 0;
        ran.failed = Some(format!("writing the master's stream failed here: {e}"));
    }
    for (shard, w) in wakes {
        w.deliver(shared, outcome(shard));
    }
    ran
}

/// Why a request whose arguments start with `head` and whose reply is `out` stops
/// replication (an error reply, or an EXEC's array holding one); `None` if it applied.
pub fn failure(head: &[Bytes], out: &[u8]) -> Option<String> {
    if out.first() != Some(&b'-') && !super::reply::exec_error(out) {
        return None;
    }
    let shown = head
        .iter()
        .take(4)
        .map(|a| String::from_utf8_lossy(&a[..a.len().min(64)]).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let text = String::from_utf8_lossy(&out[..out.len().min(256)]);
    Some(format!(
        "the master's command '{shown}' failed here: {}",
        text.trim_end()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::meta_key_head;
    use crate::test_server::TestServer;
    use std::sync::Arc;

    const REPLID: &str = "0123456789abcdef0123456789abcdef01234567";

    fn argv(v: &[&str]) -> Vec<Bytes> {
        v.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    /// A key of each of the harness's two shards.
    fn key_in(shared: &Shared, shard: usize) -> String {
        let db = shared.store.db();
        (0..1000)
            .map(|i| format!("key{i}"))
            .find(|k| db.shard_of(&meta_key_head(0, k.as_bytes())) == shard)
            .expect("a key of the shard")
    }

    fn master_conn(shared: &Arc<Shared>) -> ConnState {
        let info = shared.register_client("master".into(), String::new(), -1, false);
        let mut conn = shared.new_conn(info);
        conn.master = true;
        conn.authenticated = true;
        conn
    }

    #[test]
    fn only_single_shard_requests_join_a_run() {
        let t = TestServer::in_memory();
        let shared = t.shared().clone();
        let mut conn = master_conn(&shared);
        let (a, b) = (key_in(&shared, 0), key_in(&shared, 1));
        let takes = |conn: &ConnState, v: &[&str]| Item::route(&shared, conn, argv(v), 1).is_ok();
        assert!(takes(&conn, &["SET", &a, "1"]));
        assert!(takes(&conn, &["RPUSH", &b, "x", "y"]));
        assert!(takes(&conn, &["MSET", &a, "1", &a, "2"]));
        assert!(!takes(&conn, &["MSET", &a, "1", &b, "2"]));
        for other in [
            &["MULTI"][..],
            &["EXEC"],
            &["SELECT", "1"],
            &["FLUSHALL"],
            &["PING"],
            &["EVAL", "return 1", "1", "k"],
        ] {
            assert!(!takes(&conn, other), "{other:?}");
        }
        // Inside MULTI nothing does: the master's client queues it.
        let mut reply = ReplyBuf::with_capacity(Proto::Resp2, 64);
        let tx = shared.store.front();
        let mut ctx = Ctx::new(&shared, &tx, &mut conn, &mut reply);
        crate::cmd::dispatch(&mut ctx, argv(&["MULTI"]));
        assert!(!takes(&conn, &["SET", &a, "1"]));
    }

    /// One run over both shards: every request before the failing one applied, the failing
    /// one rolled back, the rest left queued; each shard written carries the position after
    /// the last applied request, with `parts` 2.
    #[test]
    fn a_run_stops_at_a_failing_request_with_the_position_before_it() {
        let mut t = TestServer::in_memory();
        let shared = t.shared().clone();
        let mut conn = master_conn(&shared);
        let (a, b) = (key_in(&shared, 0), key_in(&shared, 1));
        let reqs: Vec<(Vec<&str>, u64)> = vec![
            (vec!["SET", &a, "1"], 10),
            (vec!["RPUSH", &b, "x"], 20),
            (vec!["INCR", &a], 30),
            (vec!["LPUSH", &a, "oops"], 40),
            (vec!["SET", &b, "never"], 50),
        ];
        let mut queue: VecDeque<Item> = reqs
            .iter()
            .map(|(v, n)| Item::route(&shared, &conn, argv(v), *n).expect("routed"))
            .collect();
        let ran = apply_run(&shared, &mut conn, &mut queue, REPLID, 1000);
        assert_eq!((ran.applied, ran.bytes), (3, 60));
        let reason = ran.failed.expect("the LPUSH fails");
        assert!(
            reason.contains(&format!("LPUSH {a} oops")) && reason.contains("WRONGTYPE"),
            "{reason}"
        );
        assert_eq!(queue.len(), 1);
        assert_eq!(t.q(&format!("GET {a}")), "\"2\"");
        assert_eq!(t.q(&format!("LRANGE {b} 0 -1")), "[\"x\"]");
        let db = shared.store.db();
        let want = Position {
            kind: Kind::Following,
            replid: REPLID.into(),
            offset: 1060,
            db: 0,
        };
        for s in 0..2 {
            let v = db
                .get(&crate::position::record_key(s, 2))
                .unwrap()
                .expect("a record in each shard written");
            assert_eq!(Position::decode(&v), Ok((want.clone(), 2)), "shard {s}");
        }
        assert_eq!(crate::position::resume(db), Ok(Some(want)));
        // A run of requests that write nothing stores no position.
        let mut queue: VecDeque<Item> = [vec!["GET", a.as_str()], vec!["DEL", "missing"]]
            .iter()
            .map(|v| Item::route(&shared, &conn, argv(v), 5).expect("routed"))
            .collect();
        let ran = apply_run(&shared, &mut conn, &mut queue, REPLID, 2000);
        assert_eq!((ran.applied, ran.bytes, ran.failed), (2, 10, None));
        assert_eq!(
            crate::position::resume(db).unwrap().map(|p| p.offset),
            Some(1060)
        );
    }
}
