//! SORT (`cmd/sort.rs`) and DUMP/RESTORE (`cmd/dump.rs`, `rdb/`) through the in-process
//! harness (`test_server.rs`): every reply, error text and payload is redis-server
//! 7.0.15's, recorded from it.

use crate::test_server::{Reply, TestServer};

#[test]
fn sort_by_patterns_get_store_and_errors() {
    TestServer::in_memory().check(
        r#"
            RPUSH l 3 1 2 => :3
            SORT l => ["1", "2", "3"]
            SORT l DESC LIMIT 0 2 => ["3", "2"]
            SORT l ALPHA => ["1", "2", "3"]
            RPUSH s b a c => :3
            SORT s => -ERR One or more scores can't be converted into double
            SORT s ALPHA => ["a", "b", "c"]
            SORT_RO s ALPHA DESC => ["c", "b", "a"]
            MSET w_a 3 w_b 1 w_c 2 o_a x o_b y o_c z => +OK
            SORT s ALPHA BY w_* GET # GET o_* => ["b", "y", "c", "z", "a", "x"]
            SORT s BY nosort GET o_* => ["y", "x", "z"]
            SORT s ALPHA STORE dst => :3
            LRANGE dst 0 -1 => ["a", "b", "c"]
            SORT nokey => []
            SORT s LIMIT 0 => -ERR syntax error
            SORT s FOO => -ERR syntax error
            SET str v => +OK
            SORT str => -WRONGTYPE Operation against a key holding the wrong kind of value
            SADD set 10 9 8 => :3
            SORT set => ["8", "9", "10"]
            ZADD z 3 a 1 b 2 c => :3
            SORT z ALPHA => ["a", "b", "c"]
            SORT z BY nosort => ["b", "c", "a"]
            HSET hh f 1 => :1
            SORT l BY hh->f => ["3", "1", "2"]
            SORT l GET # => ["1", "2", "3"]
            DUMP nokey => (nil)
            RESTORE k 0 x => -ERR DUMP payload version or checksum are wrong
            SET src v => +OK
            DEL src => :1
        "#,
    );
}

#[test]
fn redis_payloads_restore_and_values_round_trip() {
    let mut t = TestServer::in_memory();
    // DUMP of redis-server 7.0.15: a list [a, b, 1], a hash {f: v}, a zset {m: 1.5}.
    let payloads: [(&str, &[u8]); 3] = [
        (
            "l",
            b"\x12\x01\x02\x0f\x0f\x00\x00\x00\x03\x00\x81\x61\x02\x81\x62\x02\x01\x01\xff\x0a\x00\xe0\x1b\xab\x4a\x47\xce\x59\x22",
        ),
        (
            "h",
            b"\x10\x0d\x0d\x00\x00\x00\x02\x00\x81\x66\x02\x81\x76\x02\xff\x0a\x00\x20\xf1\x3d\x44\x23\x54\x08\x9d",
        ),
        (
            "z",
            b"\x11\x0f\x0f\x00\x00\x00\x02\x00\x81\x6d\x02\x83\x31\x2e\x35\x04\xff\x0a\x00\x49\xd9\x87\x60\x78\x25\x4e\x8a",
        ),
    ];
    for (key, payload) in payloads {
        let r = t.cmd_bytes(&[&b"RESTORE"[..], key.as_bytes(), b"0", payload]);
        assert_eq!(r.to_string(), "+OK", "{key}");
    }
    t.check(
        r#"
        LRANGE l 0 -1 => ["a", "b", "1"]
        HGETALL h => ["f", "v"]
        ZRANGE z 0 -1 WITHSCORES => ["m", "1.5"]
        RESTORE fresh 0 x => -ERR DUMP payload version or checksum are wrong
        "#,
    );
    let list = &payloads[0].1;
    assert_eq!(
        t.cmd_bytes(&[&b"RESTORE"[..], b"l", b"0", list])
            .to_string(),
        "-BUSYKEY Target key name already exists."
    );
    // What this server dumps restores to the same value, TTL included.
    t.check(
        r#"
        SADD s x y => :2
        EXPIRE s 100 => :1
        "#,
    );
    for (key, copy, read) in [
        ("l", "l2", "LRANGE l2 0 -1"),
        ("h", "h2", "HGETALL h2"),
        ("z", "z2", "ZRANGE z2 0 -1 WITHSCORES"),
        ("s", "s2", "SMEMBERS s2"),
    ] {
        let Reply::Bulk(payload) = t.cmd(&["DUMP", key]) else {
            panic!("DUMP {key} is not a bulk string");
        };
        let ttl = if key == "s" { "100000" } else { "0" };
        let r = t.cmd_bytes(&[&b"RESTORE"[..], copy.as_bytes(), ttl.as_bytes(), &payload]);
        assert_eq!(r.to_string(), "+OK", "{key}");
        let original = read.replace(copy, key);
        assert_eq!(
            t.cmd(&split(read)).sorted(),
            t.cmd(&split(&original)).sorted()
        );
    }
    assert_eq!(t.q("TTL s2"), ":100");
}

fn split(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}
