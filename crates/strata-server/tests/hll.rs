//! The HyperLogLog commands over TCP: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST with
//! Redis 7.0.15's replies, bytes and error texts (the bytes below were read from
//! redis-server 7.0.15 with GET), a value carried across a restart, and
//! `hll-sparse-max-bytes`.

mod common;

use common::{start, Client, V};

fn int(n: i64) -> V {
    V::Int(n)
}

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

/// `HYLL`, sparse, the cache marked stale.
const STALE_SPARSE: &[u8] = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80";

fn bulk(c: &mut Client, args: &[&str]) -> Vec<u8> {
    match c.q(args) {
        V::Bulk(b) => b,
        other => panic!("{args:?}: {other:?}"),
    }
}

#[test]
fn pfadd_and_pfcount_hold_redis_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    // Creating the key is a change, even without elements.
    assert_eq!(c.q(&["PFADD", "h"]), int(1));
    assert_eq!(
        bulk(&mut c, &["GET", "h"]),
        [STALE_SPARSE, b"\x7f\xff"].concat()
    );
    assert_eq!(c.q(&["PFADD", "h"]), int(0));
    assert_eq!(c.q(&["PFADD", "h", "a", "b", "c"]), int(1));
    assert_eq!(c.q(&["PFADD", "h", "a", "b"]), int(0));
    let redis_abc: &[u8] = b"\x60\xf3\x80\x50\xb1\x84\x4b\xfb\x80\x42\x5a";
    assert_eq!(
        bulk(&mut c, &["GET", "h"]),
        [STALE_SPARSE, redis_abc].concat()
    );
    assert_eq!(
        c.q(&["PFDEBUG", "DECODE", "h"]),
        V::bulk("Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603")
    );
    // PFCOUNT stores the count in the header and clears the stale bit.
    assert_eq!(c.q(&["PFCOUNT", "h"]), int(3));
    let mut cached = b"HYLL\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00".to_vec();
    cached.extend_from_slice(redis_abc);
    assert_eq!(bulk(&mut c, &["GET", "h"]), cached);
    assert_eq!(c.q(&["PFCOUNT", "nokey"]), int(0));
    assert_eq!(c.q(&["EXISTS", "nokey"]), int(0));
    // Several keys: the union, written nowhere.
    assert_eq!(c.q(&["PFADD", "g", "c", "d"]), int(1));
    assert_eq!(c.q(&["PFCOUNT", "h", "g", "nokey"]), int(4));
    assert_eq!(bulk(&mut c, &["GET", "h"]), cached);
    // An expiry is kept by PFADD.
    assert_eq!(c.q(&["EXPIRE", "h", "100"]), int(1));
    assert_eq!(c.q(&["PFADD", "h", "z"]), int(1));
    assert_eq!(c.q(&["TTL", "h"]), int(100));
}

#[test]
fn pfmerge_and_pfdebug() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["PFADD", "a", "1", "2", "3"]), int(1));
    assert_eq!(c.q(&["PFADD", "b", "3", "4"]), int(1));
    assert_eq!(c.q(&["PFMERGE", "m", "a", "b", "nokey"]), V::ok());
    assert_eq!(c.q(&["PFCOUNT", "m"]), int(4));
    // The destination's own registers take part.
    assert_eq!(c.q(&["PFMERGE", "m", "nokey"]), V::ok());
    assert_eq!(c.q(&["PFCOUNT", "m"]), int(4));
    // A merge of nothing creates an empty HyperLogLog.
    assert_eq!(c.q(&["PFMERGE", "e"]), V::ok());
    assert_eq!(
        bulk(&mut c, &["GET", "e"]),
        [STALE_SPARSE, b"\x7f\xff"].concat()
    );
    assert_eq!(
        c.q(&["PFDEBUG", "ENCODING", "m"]),
        V::Simple("sparse".into())
    );
    assert_eq!(c.q(&["PFDEBUG", "TODENSE", "m"]), int(1));
    assert_eq!(c.q(&["PFDEBUG", "todense", "m"]), int(0));
    assert_eq!(
        c.q(&["PFDEBUG", "encoding", "m"]),
        V::Simple("dense".into())
    );
    assert_eq!(c.q(&["STRLEN", "m"]), int(12304));
    assert_eq!(c.q(&["PFCOUNT", "m"]), int(4));
    assert_eq!(
        c.q(&["PFDEBUG", "DECODE", "m"]),
        V::err("ERR HLL encoding is not sparse")
    );
    // A dense source makes the destination dense.
    assert_eq!(c.q(&["PFMERGE", "d", "a", "m"]), V::ok());
    assert_eq!(
        c.q(&["PFDEBUG", "ENCODING", "d"]),
        V::Simple("dense".into())
    );
    // GETREG converts a sparse value and lists the registers.
    let V::Array(regs) = c.q(&["PFDEBUG", "GETREG", "a"]) else {
        panic!("GETREG reply");
    };
    assert_eq!(regs.len(), 16384);
    let set = regs.iter().filter(|r| **r != int(0)).count();
    assert_eq!(set, 3);
    assert_eq!(
        c.q(&["PFDEBUG", "ENCODING", "a"]),
        V::Simple("dense".into())
    );
    // Errors: the key first, then its value, then the subcommand.
    assert_eq!(
        c.q(&["PFDEBUG", "nope", "nokey"]),
        V::err("ERR The specified key does not exist")
    );
    assert_eq!(
        c.q(&["PFDEBUG", "nope", "a"]),
        V::err("ERR Unknown PFDEBUG subcommand 'nope'")
    );
    assert_eq!(
        c.q(&["PFDEBUG", "ENCODING"]),
        V::err("ERR wrong number of arguments for 'pfdebug' command")
    );
    assert_eq!(c.q(&["PFSELFTEST"]), V::ok());
}

#[test]
fn bad_values_get_redis_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "s", "not an hll at all"]), V::ok());
    assert_eq!(c.q(&["RPUSH", "l", "x"]), int(1));
    for cmd in [
        &["PFADD", "s", "x"][..],
        &["PFCOUNT", "s"],
        &["PFCOUNT", "s", "nokey"],
        &["PFMERGE", "d", "s"],
        &["PFDEBUG", "ENCODING", "s"],
    ] {
        assert_eq!(c.q(cmd), V::err(NOT_HLL), "{cmd:?}");
    }
    assert_eq!(
        c.q(&["PFADD", "l", "x"]),
        V::err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    // Sparse opcodes covering too few registers: valid header, corrupt body.
    let short: Vec<u8> = [STALE_SPARSE, b"\x7f\xfe"].concat();
    assert_eq!(c.qb(&[b"SET", b"bad", &short]), V::ok());
    assert_eq!(c.q(&["PFCOUNT", "bad"]), V::err(CORRUPT));
    // Keys are checked in order.
    assert_eq!(c.q(&["PFCOUNT", "bad", "s"]), V::err(CORRUPT));
    assert_eq!(c.q(&["PFCOUNT", "s", "bad"]), V::err(NOT_HLL));
    assert_eq!(c.q(&["PFCOUNT", "bad", "nokey"]), V::err(CORRUPT));
    assert_eq!(c.q(&["PFMERGE", "d", "bad"]), V::err(CORRUPT));
    assert_eq!(c.q(&["PFDEBUG", "TODENSE", "bad"]), V::err(CORRUPT));
    assert_eq!(c.q(&["EXISTS", "d"]), int(0));
    // A dense value must have the dense length.
    let mut dense = b"HYLL\x00".to_vec();
    dense.resize(100, 0);
    assert_eq!(c.qb(&[b"SET", b"dn", &dense]), V::ok());
    assert_eq!(c.q(&["PFCOUNT", "dn"]), V::err(NOT_HLL));
}

#[test]
fn sparse_limit_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let value;
    {
        let s = start(dir.path(), &[]);
        let mut c = Client::connect(s.local_addr());
        assert_eq!(
            c.q(&["CONFIG", "GET", "hll-sparse-max-bytes"]),
            V::arr(&["hll-sparse-max-bytes", "3000"])
        );
        let elements: Vec<String> = (0..300).map(|i| format!("e{i}")).collect();
        let mut cmd = vec!["PFADD", "h"];
        cmd.extend(elements.iter().map(String::as_str));
        assert_eq!(c.q(&cmd), int(1));
        assert_eq!(
            c.q(&["PFDEBUG", "ENCODING", "h"]),
            V::Simple("sparse".into())
        );
        // Under a lower limit the next growth makes it dense.
        assert_eq!(
            c.q(&["CONFIG", "SET", "hll-sparse-max-bytes", "100"]),
            V::ok()
        );
        assert_eq!(c.q(&["PFADD", "h", "one-more", "and-another"]), int(1));
        assert_eq!(
            c.q(&["PFDEBUG", "ENCODING", "h"]),
            V::Simple("dense".into())
        );
        assert_eq!(c.q(&["PFCOUNT", "h"]), int(304));
        value = bulk(&mut c, &["GET", "h"]);
        s.shutdown().unwrap();
    }
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(bulk(&mut c, &["GET", "h"]), value);
    assert_eq!(c.q(&["PFCOUNT", "h"]), int(304));
    assert_eq!(c.q(&["PFADD", "h", "e1"]), int(0));
}

#[test]
fn concurrent_pfcount_loses_no_register() {
    // PFCOUNT writes its cached count: it holds the key like a write (MAY_REPLICATE), so a
    // PFADD or a cross-shard PFMERGE beside it is not lost when it stores the value it read.
    // (The race is narrow: this check did not catch its absence in four runs.)
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut c = Client::connect(addr);
    // Sources on both shards (two shards, eight keys), so the merges run across shards.
    let sources: Vec<String> = (0..8).map(|i| format!("src{i}")).collect();
    for (i, k) in sources.iter().enumerate() {
        assert_eq!(c.q(&["PFADD", k, &format!("s{i}")]), int(1));
    }
    let n = 1000;
    let adder = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        for i in 0..n {
            c.q(&["PFADD", "h", &format!("e{i}")]);
        }
    });
    let counter = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        for _ in 0..n {
            assert!(matches!(c.q(&["PFCOUNT", "h"]), V::Int(_)));
        }
    });
    let merger = std::thread::spawn({
        let sources = sources.clone();
        move || {
            let mut c = Client::connect(addr);
            for i in 0..n / 4 {
                let src = &sources[i % sources.len()];
                assert_eq!(c.q(&["PFMERGE", "h", src]), V::ok());
            }
        }
    });
    for t in [adder, counter, merger] {
        t.join().unwrap();
    }
    let mut cmd = vec!["PFADD".to_string(), "want".to_string()];
    cmd.extend((0..n).map(|i| format!("e{i}")));
    cmd.extend((0..8).map(|i| format!("s{i}")));
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    assert_eq!(c.q(&cmd), int(1));
    assert_eq!(
        c.q(&["PFDEBUG", "GETREG", "h"]),
        c.q(&["PFDEBUG", "GETREG", "want"])
    );
}
