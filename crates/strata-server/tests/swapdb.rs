//! SWAPDB over TCP (design §13.19): data follows the swap for every client, across a
//! restart; a blocked BLPOP is served when the swap brings its key; WATCH aborts; MOVE and
//! COPY name logical databases; notifications name logical databases; concurrent writers
//! on both databases lose nothing and land in the database they selected.

mod common;

use common::{start, Client, V};
use std::time::Duration;

fn ok() -> V {
    V::ok()
}

#[test]
fn data_follows_the_swap_for_every_client_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut a = Client::connect(s.local_addr());
    let mut b = Client::connect(s.local_addr());
    assert_eq!(a.q(&["SET", "k", "in0"]), ok());
    assert_eq!(b.q(&["SELECT", "1"]), ok());
    assert_eq!(b.q(&["SET", "k", "in1"]), ok());
    assert_eq!(b.q(&["HSET", "h", "f", "v"]), V::Int(1));
    assert_eq!(a.q(&["SWAPDB", "0", "1"]), ok());
    // Both connections keep their selection and see the other data.
    assert_eq!(a.q(&["GET", "k"]), V::bulk("in1"));
    assert_eq!(a.q(&["HGET", "h", "f"]), V::bulk("v"));
    assert_eq!(b.q(&["GET", "k"]), V::bulk("in0"));
    assert_eq!(b.q(&["EXISTS", "h"]), V::Int(0));
    let V::Bulk(info) = a.q(&["INFO", "keyspace"]) else {
        panic!("INFO reply")
    };
    let info = String::from_utf8(info).unwrap();
    assert!(info.contains("db0:keys=2,"), "{info}");
    assert!(info.contains("db1:keys=1,"), "{info}");
    let V::Bulk(list) = b.q(&["CLIENT", "INFO"]) else {
        panic!("CLIENT INFO reply")
    };
    assert!(String::from_utf8(list).unwrap().contains(" db=1 "));
    drop((a, b));
    s.shutdown().unwrap();

    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["GET", "k"]), V::bulk("in1"));
    assert_eq!(c.q(&["SELECT", "1"]), ok());
    assert_eq!(c.q(&["GET", "k"]), V::bulk("in0"));
    drop(c);
    s.shutdown().unwrap();
}

#[test]
fn a_blocked_client_is_served_by_the_database_the_swap_brings() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let mut blocked = Client::connect(s.local_addr());
    assert_eq!(c.q(&["RPUSH", "l", "x", "y"]), V::Int(2));
    assert_eq!(blocked.q(&["SELECT", "1"]), ok());
    blocked.send(&common::encode(&[b"BLPOP", b"l", b"0"]));
    // Wait until it is blocked.
    for _ in 0..2000 {
        let V::Bulk(info) = c.q(&["INFO", "clients"]) else {
            panic!("INFO reply")
        };
        if String::from_utf8_lossy(&info).contains("blocked_clients:1") {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(c.q(&["SWAPDB", "0", "1"]), ok());
    assert_eq!(blocked.read(), V::Array(vec![V::bulk("l"), V::bulk("x")]));
    // The rest of the list is in logical database 1 now.
    assert_eq!(blocked.q(&["LRANGE", "l", "0", "-1"]), V::arr(&["y"]));
    assert_eq!(c.q(&["EXISTS", "l"]), V::Int(0));
    // A client blocked on a key that the swap does not bring stays blocked; it is served
    // by a push to its logical database, now in the other physical one.
    assert_eq!(c.q(&["SELECT", "2"]), ok());
    blocked.send(&common::encode(&[b"BLPOP", b"m", b"0"]));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(c.q(&["SWAPDB", "1", "2"]), ok());
    assert_eq!(c.q(&["RPUSH", "m", "z"]), V::Int(1)); // logical 2: not the waiter's
    assert_eq!(c.q(&["SELECT", "1"]), ok());
    assert_eq!(c.q(&["RPUSH", "m", "w"]), V::Int(1));
    assert_eq!(blocked.read(), V::Array(vec![V::bulk("m"), V::bulk("w")]));
    drop((c, blocked));
    s.shutdown().unwrap();
}

#[test]
fn watch_is_aborted_by_a_swap() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let mut other = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "w", "1"]), ok());
    assert_eq!(c.q(&["WATCH", "w"]), ok());
    assert_eq!(other.q(&["SWAPDB", "0", "1"]), ok());
    assert_eq!(c.q(&["MULTI"]), ok());
    assert_eq!(c.q(&["SET", "x", "1"]), V::Simple("QUEUED".into()));
    assert_eq!(c.q(&["EXEC"]), V::NilArray);
    // A watched key that exists in neither database is not touched (as Redis).
    assert_eq!(c.q(&["WATCH", "nothing"]), ok());
    assert_eq!(other.q(&["SWAPDB", "0", "1"]), ok());
    assert_eq!(c.q(&["MULTI"]), ok());
    assert_eq!(c.q(&["GET", "w"]), V::Simple("QUEUED".into()));
    assert_eq!(c.q(&["EXEC"]), V::Array(vec![V::bulk("1")]));
    drop((c, other));
    s.shutdown().unwrap();
}

#[test]
fn move_copy_and_notifications_name_logical_databases() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--notify-keyspace-events", "KEA"]);
    let mut c = Client::connect(s.local_addr());
    let mut sub = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SWAPDB", "0", "3"]), ok());
    sub.q(&["PSUBSCRIBE", "__key*__:*"]);
    assert_eq!(c.q(&["SET", "a", "1"]), ok());
    assert_eq!(c.q(&["MOVE", "a", "3"]), V::Int(1));
    assert_eq!(c.q(&["SELECT", "3"]), ok());
    assert_eq!(c.q(&["COPY", "a", "b", "DB", "0"]), V::Int(1));
    let mut chans = Vec::new();
    while chans.len() < 8 {
        match sub.read() {
            V::Array(v) if v.len() == 4 => chans.push(v[2].clone()),
            other => panic!("not a pmessage: {other:?}"),
        }
    }
    let want = [
        "__keyspace@0__:a",
        "__keyevent@0__:set",
        "__keyspace@0__:a",
        "__keyevent@0__:move_from",
        "__keyspace@3__:a",
        "__keyevent@3__:move_to",
        "__keyspace@0__:b",
        "__keyevent@0__:copy_to",
    ];
    for (got, want) in chans.iter().zip(want) {
        assert_eq!(got, &V::bulk(want));
    }
    assert_eq!(c.q(&["SELECT", "0"]), ok());
    assert_eq!(c.q(&["GET", "b"]), V::bulk("1"));
    drop((c, sub));
    s.shutdown().unwrap();
}

#[test]
fn concurrent_writers_lose_nothing_and_land_in_their_database() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut swapper = Client::connect(addr);
    // A marker naming each physical database: it moves with the data.
    for (db, marker) in [("0", "p0"), ("1", "p1")] {
        assert_eq!(swapper.q(&["SELECT", db]), V::ok());
        assert_eq!(swapper.q(&["SET", "marker", marker]), V::ok());
    }
    const N: usize = 200;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                assert_eq!(c.q(&["SELECT", &w.to_string()]), V::ok());
                let mut seen = Vec::new();
                for i in 0..N {
                    let (list, key) = (format!("list{w}"), format!("w{w}:{i}"));
                    // A plain write, queued to a shard or run in place.
                    assert_eq!(c.q(&["SET", &key, "1"]), V::ok());
                    // The marker and a push, atomic together: the push lands in the
                    // database whose marker the client saw.
                    assert_eq!(c.q(&["MULTI"]), V::ok());
                    c.q(&["GET", "marker"]);
                    c.q(&["RPUSH", &list, &i.to_string()]);
                    let V::Array(r) = c.q(&["EXEC"]) else {
                        panic!("EXEC reply")
                    };
                    seen.push(r[0].clone());
                }
                seen
            })
        })
        .collect();
    let mut swaps = 0;
    while !writers.iter().all(|w| w.is_finished()) {
        assert_eq!(swapper.q(&["SWAPDB", "0", "1"]), V::ok());
        swaps += 1;
    }
    let seen: Vec<Vec<V>> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(swaps > 0);
    let mut lists = std::collections::HashMap::new();
    let mut plain = vec![vec![0; N]; 2];
    for db in ["0", "1"] {
        assert_eq!(swapper.q(&["SELECT", db]), V::ok());
        let V::Bulk(marker) = swapper.q(&["GET", "marker"]) else {
            panic!("marker lost")
        };
        for (w, counts) in plain.iter_mut().enumerate() {
            let V::Array(items) = swapper.q(&["LRANGE", &format!("list{w}"), "0", "-1"]) else {
                panic!("LRANGE reply")
            };
            lists.insert((marker.clone(), w), items);
            for (i, n) in counts.iter_mut().enumerate() {
                if swapper.q(&["EXISTS", &format!("w{w}:{i}")]) == V::Int(1) {
                    *n += 1;
                }
            }
        }
    }
    for (w, seen) in seen.iter().enumerate() {
        // Every plain write is in exactly one database.
        assert!(
            plain[w].iter().all(|&n| n == 1),
            "writer {w}: {:?}",
            plain[w]
        );
        // Every push is in the database whose marker its transaction read, in order.
        for marker in ["p0", "p1"] {
            let want: Vec<V> = (0..N)
                .filter(|&i| seen[i] == V::bulk(marker))
                .map(|i| V::bulk(&i.to_string()))
                .collect();
            let got = &lists[&(marker.as_bytes().to_vec(), w)];
            assert_eq!(got, &want, "writer {w} in {marker} after {swaps} swaps");
        }
    }
    drop(swapper);
    s.shutdown().unwrap();
}
