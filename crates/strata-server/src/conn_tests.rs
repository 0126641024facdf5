//! A connection's pipeline run in place (`conn.rs` `run_in_place`): one engine write per
//! shard for the commands of one read, in Redis's order and with Redis's replies.

use crate::keys::meta_key;
use crate::test_server::{Reply, TestServer};
use std::sync::Arc;
use strata_engine::io::{FaultFs, FaultKind, FaultOp, FaultRule, Fs, MemFs};

/// `n` keys of each of the two shards, interleaved: shard 0's, shard 1's, shard 0's, ...
fn keys_of_both_shards(t: &TestServer, n: usize) -> Vec<String> {
    let db = t.shared().store.db();
    let mut of = [Vec::new(), Vec::new()];
    for i in 0.. {
        let k = format!("key:{i}");
        let s = db.shard_of(&meta_key(0, k.as_bytes()));
        if of[s].len() < n {
            of[s].push(k);
        }
        if of.iter().all(|v| v.len() == n) {
            break;
        }
    }
    let [a, b] = of;
    a.into_iter().zip(b).flat_map(|(x, y)| [x, y]).collect()
}

/// The engine writes of every shard so far.
fn engine_writes(t: &TestServer) -> u64 {
    let db = t.shared().store.db();
    (0..db.shard_count())
        .map(|i| db.engine(i).db().stats().writes)
        .sum()
}

/// The RESP encoding of the commands, to send as one read.
fn pipeline(cmds: &[Vec<String>]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in cmds {
        out.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
        for a in c {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    out
}

fn cmd(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| p.to_string()).collect()
}

#[test]
fn a_pipeline_over_two_shards_is_one_engine_write_per_shard() {
    let t = TestServer::in_memory();
    let mut c = t.conn();
    let keys = keys_of_both_shards(&t, 10);
    let before = engine_writes(&t);
    let sets: Vec<_> = keys.iter().map(|k| cmd(&["SET", k, "v"])).collect();
    c.send_raw(&pipeline(&sets));
    for _ in &sets {
        assert_eq!(c.recv().to_string(), "+OK");
    }
    // Twenty SETs alternating between the shards: one write per shard, not one per SET.
    assert_eq!(engine_writes(&t) - before, 2);
    for k in &keys {
        assert_eq!(c.q(&format!("GET {k}")), "\"v\"");
    }
}

#[test]
fn each_command_of_a_pipeline_sees_the_ones_before_it() {
    let t = TestServer::in_memory();
    let mut c = t.conn();
    let k = keys_of_both_shards(&t, 1);
    let (a, b) = (k[0].as_str(), k[1].as_str());
    let cmds = [
        cmd(&["SET", a, "1"]),
        cmd(&["SET", b, "10"]),
        cmd(&["INCR", a]),
        cmd(&["INCRBY", b, "5"]),
        cmd(&["GET", a]),
        cmd(&["GET", b]),
        cmd(&["APPEND", a, "x"]),
        cmd(&["GET", a]),
        cmd(&["INCR", a]),
        cmd(&["DEL", b]),
        cmd(&["EXISTS", b]),
        cmd(&["RPUSH", b, "p", "q"]),
        cmd(&["GET", b]),
        // Keys of both shards: runs on the connection's thread, after the run before it
        // is written, and the run after it sees it.
        cmd(&["MSET", a, "7", b, "8"]),
        cmd(&["INCR", a]),
        cmd(&["GET", b]),
    ];
    c.send_raw(&pipeline(&cmds));
    let got: Vec<String> = cmds.iter().map(|_| c.recv().to_string()).collect();
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value";
    let err_int = "-ERR value is not an integer or out of range";
    assert_eq!(
        got,
        [
            "+OK", "+OK", ":2", ":15", "\"2\"", "\"15\"", ":2", "\"2x\"", err_int, ":1", ":0",
            ":2", wrongtype, "+OK", ":8", "\"8\""
        ]
    );
}

#[test]
fn a_failed_engine_write_fails_the_pipeline_s_commands_and_acknowledges_none() {
    let fs = FaultFs::new(Arc::new(MemFs::new()));
    let t = TestServer::with_fs(Arc::new(fs.clone()) as Arc<dyn Fs>, &[]);
    let mut c = t.conn();
    let keys = keys_of_both_shards(&t, 3);
    for k in &keys {
        assert_eq!(c.q(&format!("SET {k} old")), "+OK");
    }
    // Every append to a log fails from now on.
    fs.add_rule(
        FaultRule::new(FaultOp::Write, 1, FaultKind::Eio)
            .path_contains(".log")
            .persistent(),
    );
    let mut cmds = Vec::new();
    for k in &keys {
        cmds.push(cmd(&["SET", k, "new"]));
        cmds.push(cmd(&["GET", k]));
    }
    c.send_raw(&pipeline(&cmds));
    for (i, _) in cmds.iter().enumerate() {
        let r = c.recv();
        assert!(
            matches!(&r, Reply::Error(e) if e.starts_with("MISCONF")),
            "reply {i}: {r}"
        );
    }
    // Nothing was applied; reads go on.
    for k in &keys {
        assert_eq!(c.q(&format!("GET {k}")), "\"old\"");
    }
    drop(c);
    assert!(
        t.close_reporting().is_err(),
        "the failure is reported at close"
    );
}
