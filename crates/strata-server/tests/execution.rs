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
fn concurrent_cross_shard_msets_stay_whole() {
    // MSET takes its stripes shared, so concurrent MSETs of the same keys run side by side:
    // every shard must still apply them in one order (no key from one MSET beside a key
    // from another), as every reader sees and as the final state shows.
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let keys: Vec<String> = (0..8).map(|i| format!("whole:{i}")).collect();
    let mut c = Client::connect(addr);
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let keys = keys.clone();
            thread::spawn(move || {
                let mut c = Client::connect(addr);
                for i in 0..150 {
                    let v = format!("{t}-{i}");
                    let mut args = vec!["MSET"];
                    for k in &keys {
                        args.push(k);
                        args.push(&v);
                    }
                    assert_eq!(c.q(&args), V::Simple("OK".into()));
                }
            })
        })
        .collect();
    let check = |c: &mut Client| {
        let mut args = vec!["MGET"];
        args.extend(keys.iter().map(|k| k.as_str()));
        match c.q(&args) {
            V::Array(vs) => {
                assert!(vs.windows(2).all(|w| w[0] == w[1]), "torn MSET: {vs:?}");
            }
            v => panic!("MGET replied {v:?}"),
        }
    };
    while !writers.iter().all(|w| w.is_finished()) {
        check(&mut c);
    }
    for w in writers {
        w.join().unwrap();
    }
    check(&mut c);
    // They ran as cross-shard batches (the keys span both shards).
    let info = match c.q(&["INFO", "strata"]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        v => panic!("INFO replied {v:?}"),
    };
    let parts: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("strata_cross_shard_parts:"))
        .expect("strata_cross_shard_parts in INFO")
        .trim()
        .parse()
        .unwrap();
    assert!(parts >= 2 * 600, "{parts} cross-shard parts");
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

#[test]
fn many_clients_pushing_one_list_lose_and_reorder_nothing() {
    // Single-shard writes to one key share its stripe and join one group write; the worker
    // still runs them one at a time, so every push lands, each client's in its order.
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            thread::spawn(move || {
                let mut c = Client::connect(addr);
                for chunk in 0..10 {
                    let mut batch = Vec::new();
                    for i in 0..30 {
                        let e = format!("{t}:{}", chunk * 30 + i);
                        batch.extend(encode(&[b"RPUSH", b"list", e.as_bytes()]));
                    }
                    c.send(&batch);
                    for _ in 0..30 {
                        assert!(matches!(c.read(), V::Int(_)));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = Client::connect(addr);
    let V::Array(all) = c.q(&["LRANGE", "list", "0", "-1"]) else {
        panic!("LRANGE did not reply an array");
    };
    assert_eq!(all.len(), 1800);
    let mut next = [0usize; 6];
    for v in all {
        let V::Bulk(b) = v else {
            panic!("element {v:?}")
        };
        let e = String::from_utf8(b).unwrap();
        let (t, i) = e.split_once(':').unwrap();
        let (t, i): (usize, usize) = (t.parse().unwrap(), i.parse().unwrap());
        assert_eq!(i, next[t], "client {t}'s pushes out of order");
        next[t] += 1;
    }
    s.shutdown().unwrap();
}

#[test]
fn cross_shard_moves_lose_no_concurrent_push() {
    // LMOVE between keys of different shards runs on the connection, reading and rewriting
    // the source's metadata under its exclusive stripe; pushes to the source queued to its
    // worker hold the stripe shared until written. If the two overlapped, a push would be
    // lost (or an element doubled) by the move's rewrite of the list's indexes.
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let pushers: Vec<_> = (0..4)
        .map(|t| {
            thread::spawn(move || {
                let mut c = Client::connect(addr);
                for i in 0..400 {
                    let e = format!("{t}:{i}");
                    assert!(matches!(c.q(&["LPUSH", "src", &e]), V::Int(_)));
                }
            })
        })
        .collect();
    let mover = thread::spawn(move || {
        let mut c = Client::connect(addr);
        let mut moved = 0;
        for i in 0..600 {
            // Eight destinations: with several shards most are not the source's.
            let dst = format!("dst{}", i % 8);
            if let V::Bulk(_) = c.q(&["LMOVE", "src", &dst, "RIGHT", "LEFT"]) {
                moved += 1;
            }
        }
        moved
    });
    for t in pushers {
        t.join().unwrap();
    }
    let moved = mover.join().unwrap();
    let mut c = Client::connect(addr);
    let mut total = 0;
    let mut seen = std::collections::HashSet::new();
    for k in std::iter::once("src".to_string()).chain((0..8).map(|i| format!("dst{i}"))) {
        let V::Array(all) = c.q(&["LRANGE", &k, "0", "-1"]) else {
            panic!("LRANGE {k}");
        };
        for v in all {
            let V::Bulk(b) = v else {
                panic!("element {v:?}")
            };
            assert!(seen.insert(b), "an element is in two places");
            total += 1;
        }
    }
    assert_eq!(total, 1600, "{moved} moved");
    s.shutdown().unwrap();
}
