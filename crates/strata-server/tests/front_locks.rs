//! Commands on the connection's thread hold their keys' stripes, taken by the dispatcher from
//! the key specs (`cmd::run_locked`, `docs/design.md` §13.2): two clients racing
//! read-modify-writes of the same keys in different shards never see or leave half of each
//! other's effects.

mod common;

use common::{start, Client, V};
use std::thread;
use strata_server::keys::hash_slot;

/// `n` key names starting with `prefix` that live in the first shard of two (`first`) or in
/// the second (slots are split in halves between the test server's two shards).
fn keys_in(prefix: &str, first: bool, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|k| (hash_slot(k.as_bytes()) < 8192) == first)
        .take(n)
        .collect()
}

fn int(v: V) -> i64 {
    match v {
        V::Int(n) => n,
        v => panic!("not an integer: {v:?}"),
    }
}

#[test]
fn racing_smoves_between_shards_keep_every_member_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let (a, b) = (
        keys_in("sa", true, 1).remove(0),
        keys_in("sb", false, 1).remove(0),
    );
    let mut c = Client::connect(addr);
    for m in 0..20 {
        c.q(&["SADD", &a, &format!("m{m}")]);
    }
    // Two movers in opposite directions over the same members, and a writer adding to the
    // source through its worker meanwhile.
    let movers: Vec<_> = [(a.clone(), b.clone()), (b.clone(), a.clone())]
        .into_iter()
        .map(|(from, to)| {
            thread::spawn(move || {
                let mut c = Client::connect(addr);
                for i in 0..600 {
                    let m = format!("m{}", i % 20);
                    assert!(matches!(c.q(&["SMOVE", &from, &to, &m]), V::Int(0 | 1)));
                }
            })
        })
        .collect();
    let adder = {
        let a = a.clone();
        thread::spawn(move || {
            let mut c = Client::connect(addr);
            for i in 0..300 {
                assert_eq!(c.q(&["SADD", &a, &format!("n{i}")]), V::Int(1));
            }
        })
    };
    for t in movers {
        t.join().unwrap();
    }
    adder.join().unwrap();
    let total = int(c.q(&["SCARD", &a])) + int(c.q(&["SCARD", &b]));
    assert_eq!(total, 320, "a member was lost or doubled");
    assert_eq!(c.q(&["SINTERCARD", "2", &a, &b]), V::Int(0));
    s.shutdown().unwrap();
}

#[test]
fn racing_renames_across_shards_leave_one_key() {
    // RENAMENX reads both keys and writes both: two of them racing over the same keys must
    // not both read the source and each leave a copy (which no later RENAMENX removes).
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut names = keys_in("r", true, 2);
    names.extend(keys_in("r", false, 2));
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["SET", &names[0], "v"]), V::ok());
    let renamers: Vec<_> = (0..4)
        .map(|t| {
            let names = names.clone();
            thread::spawn(move || {
                let mut c = Client::connect(addr);
                for i in 0..1500 {
                    let from = &names[(i + t) % 4];
                    let to = &names[(i * 3 + t + 1) % 4];
                    match c.q(&["RENAMENX", from, to]) {
                        V::Int(0 | 1) => {}
                        V::Err(e) => assert_eq!(e, "ERR no such key"),
                        v => panic!("RENAMENX replied {v:?}"),
                    }
                }
            })
        })
        .collect();
    for t in renamers {
        t.join().unwrap();
    }
    let mut left = 0;
    for k in &names {
        match c.q(&["GET", k]) {
            V::Bulk(v) => {
                assert_eq!(v, b"v");
                left += 1;
            }
            V::NilBulk => {}
            v => panic!("GET replied {v:?}"),
        }
    }
    assert_eq!(left, 1, "RENAMENXs copied or lost the key");
    s.shutdown().unwrap();
}

#[test]
fn zunionstore_never_sees_half_a_move_between_shards() {
    // One client moves members between two sorted sets of different shards in a
    // transaction; another unions them: every union holds every member.
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let (x, y) = (
        keys_in("zx", true, 1).remove(0),
        keys_in("zy", false, 1).remove(0),
    );
    let dst = keys_in("zd", true, 1).remove(0);
    let mut c = Client::connect(addr);
    for m in 0..10 {
        c.q(&["ZADD", &x, "1", &format!("m{m}")]);
    }
    let mover = {
        let (x, y) = (x.clone(), y.clone());
        thread::spawn(move || {
            let mut c = Client::connect(addr);
            for i in 0..300 {
                let m = format!("m{}", i % 10);
                let (from, to) = if (i / 10) % 2 == 0 {
                    (&x, &y)
                } else {
                    (&y, &x)
                };
                assert_eq!(c.q(&["MULTI"]), V::ok());
                c.q(&["ZREM", from, &m]);
                c.q(&["ZADD", to, "1", &m]);
                assert!(matches!(c.q(&["EXEC"]), V::Array(_)));
            }
        })
    };
    let union = thread::spawn(move || {
        let mut c = Client::connect(addr);
        for _ in 0..300 {
            assert_eq!(c.q(&["ZUNIONSTORE", &dst, "2", &x, &y]), V::Int(10));
        }
    });
    mover.join().unwrap();
    union.join().unwrap();
    s.shutdown().unwrap();
}

#[test]
fn sort_by_pattern_keys_runs_again_under_their_stripes() {
    // SORT's BY and GET keys come from the data: the command asks the dispatcher for their
    // stripes and runs again; the reply is as if it had held them from the start.
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut c = Client::connect(addr);
    for (id, w) in [("1", "30"), ("2", "10"), ("3", "20")] {
        c.q(&["RPUSH", "ids", id]);
        c.q(&["SET", &format!("w_{id}"), w]);
        c.q(&["SET", &format!("name_{id}"), &format!("n{id}")]);
    }
    assert_eq!(
        c.q(&["SORT", "ids", "BY", "w_*", "GET", "name_*"]),
        V::arr(&["n2", "n3", "n1"])
    );
    assert_eq!(
        c.q(&["SORT", "ids", "BY", "w_*", "STORE", "out"]),
        V::Int(3)
    );
    assert_eq!(c.q(&["LRANGE", "out", "0", "-1"]), V::arr(&["2", "3", "1"]));
    s.shutdown().unwrap();
}
