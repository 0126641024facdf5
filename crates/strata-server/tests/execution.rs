//! Commands on shard workers (`exec.rs`): atomic read-modify-writes from many connections
//! without lost updates, a connection reading its own pipelined writes, single-shard and
//! cross-shard commands excluding each other, and replies in request order.

mod common;

use common::{encode, start, Client, V};
use std::thread;

#[test]
fn concurrent_incr_and_append_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            thread::spawn(move || {
                let mut c = Client::connect(addr);
                // Pipelined: 200 INCRs of one key, 200 APPENDs of another, in one write.
                let mut batch = Vec::new();
                for _ in 0..200 {
                    batch.extend(encode(&[b"INCR", b"counter"]));
                    batch.extend(encode(&[b"APPEND", b"log", format!("{t}").as_bytes()]));
                }
                c.send(&batch);
                let mut last = 0;
                for _ in 0..200 {
                    match c.read() {
                        V::Int(n) => {
                            assert!(n > last, "INCR went from {last} to {n}");
                            last = n;
                        }
                        v => panic!("INCR replied {v:?}"),
                    }
                    assert!(matches!(c.read(), V::Int(_)));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["GET", "counter"]), V::bulk("1200"));
    assert_eq!(c.q(&["STRLEN", "log"]), V::Int(1200));
    s.shutdown().unwrap();
}

#[test]
fn a_pipeline_reads_its_own_writes_across_shards() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let mut batch = Vec::new();
    for i in 0..300 {
        let k = format!("key:{i}");
        batch.extend(encode(&[b"SET", k.as_bytes(), b"a"]));
        batch.extend(encode(&[b"APPEND", k.as_bytes(), b"b"]));
        batch.extend(encode(&[b"GET", k.as_bytes()]));
        // Keys in (most likely) different shards: runs on the connection, after the rest.
        batch.extend(encode(&[b"MGET", k.as_bytes(), b"key:0"]));
        batch.extend(encode(&[b"DEL", k.as_bytes()]));
        batch.extend(encode(&[b"EXISTS", k.as_bytes()]));
    }
    c.send(&batch);
    for i in 0..300 {
        assert_eq!(c.read(), V::ok(), "SET {i}");
        assert_eq!(c.read(), V::Int(2), "APPEND {i}");
        assert_eq!(c.read(), V::bulk("ab"), "GET {i}");
        let first = if i == 0 { V::bulk("ab") } else { V::NilBulk };
        match c.read() {
            V::Array(v) => {
                assert_eq!(v[0], V::bulk("ab"), "MGET {i}");
                assert_eq!(v[1], first, "MGET {i}");
            }
            v => panic!("MGET replied {v:?}"),
        }
        assert_eq!(c.read(), V::Int(1), "DEL {i}");
        assert_eq!(c.read(), V::Int(0), "EXISTS {i}");
    }
    assert_eq!(c.q(&["DBSIZE"]), V::Int(0));
    s.shutdown().unwrap();
}

#[test]
fn cross_shard_msetnx_and_single_shard_setnx_exclude_each_other() {
    // Each round, one client races MSETNX over keys in several shards against SETNX of one
    // of them: exactly one may win, whatever the interleaving.
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    for round in 0..100 {
        let keys: Vec<String> = (0..4).map(|i| format!("r{round}:{i}")).collect();
        let ks = keys.clone();
        let a = thread::spawn(move || {
            let mut c = Client::connect(addr);
            let mut args = vec!["MSETNX"];
            for k in &ks {
                args.push(k);
                args.push("m");
            }
            c.q(&args)
        });
        let k3 = keys[3].clone();
        let b = thread::spawn(move || {
            let mut c = Client::connect(addr);
            c.q(&["SETNX", &k3, "s"])
        });
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        let mut c = Client::connect(addr);
        let v3 = c.q(&["GET", &keys[3]]);
        match (ra, rb) {
            (V::Int(1), V::Int(0)) => {
                assert_eq!(v3, V::bulk("m"));
                assert_eq!(c.q(&["EXISTS", &keys[0], &keys[1], &keys[2]]), V::Int(3));
            }
            (V::Int(0), V::Int(1)) => {
                assert_eq!(v3, V::bulk("s"));
                assert_eq!(c.q(&["EXISTS", &keys[0], &keys[1], &keys[2]]), V::Int(0));
            }
            other => panic!("round {round}: both or neither won: {other:?}"),
        }
    }
    s.shutdown().unwrap();
}

#[test]
fn a_pipelined_run_of_one_shard_answers_in_order() {
    // Keys with one hash tag share a slot, so a whole pipeline runs on one shard: in place
    // as one run (one engine write) when the shard is idle, queued otherwise.
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let mut batch = Vec::new();
    for i in 0..500 {
        batch.extend(encode(&[b"INCR", b"{t}n"]));
        batch.extend(encode(&[b"APPEND", b"{t}log", b"x"]));
        batch.extend(encode(&[b"MGET", b"{t}n", b"{t}log"]));
        if i % 50 == 0 {
            // An inline command in the middle ends a run; what follows starts another.
            batch.extend(encode(&[b"DBSIZE"]));
        }
    }
    c.send(&batch);
    for i in 0..500i64 {
        assert_eq!(c.read(), V::Int(i + 1), "INCR {i}");
        assert_eq!(c.read(), V::Int(i + 1), "APPEND {i}");
        match c.read() {
            V::Array(v) => {
                assert_eq!(v[0], V::bulk(&(i + 1).to_string()), "MGET {i}");
                assert_eq!(v[1], V::Bulk(vec![b'x'; i as usize + 1]), "MGET {i}");
            }
            v => panic!("MGET replied {v:?}"),
        }
        if i % 50 == 0 {
            assert_eq!(c.read(), V::Int(2), "DBSIZE {i}");
        }
    }
    s.shutdown().unwrap();
}
