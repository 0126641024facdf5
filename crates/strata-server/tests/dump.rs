//! DUMP and RESTORE over TCP: round trips of every type and encoding class, payloads
//! captured from redis-server 7.0.15, TTLs and options, Redis 7.0's error texts, streams with
//! their groups (and the blocked readers a RESTORE wakes).

mod common;

use common::{start, Client, V};

fn int(n: i64) -> V {
    V::Int(n)
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn payload(c: &mut Client, key: &str) -> Vec<u8> {
    match c.q(&["DUMP", key]) {
        V::Bulk(p) => p,
        other => panic!("DUMP {key}: {other:?}"),
    }
}

fn restore(c: &mut Client, key: &str, p: &[u8], extra: &[&str]) -> V {
    let mut args: Vec<&[u8]> = vec![b"RESTORE", key.as_bytes(), b"0", p];
    args.extend(extra.iter().map(|s| s.as_bytes()));
    c.qb(&args)
}

/// Everything a client can see of `key`: type, encoding, contents (sorted where the order
/// is the server's).
fn snapshot(c: &mut Client, key: &str) -> Vec<V> {
    let t = c.q(&["TYPE", key]);
    let enc = c.q(&["OBJECT", "ENCODING", key]);
    let mut body = match &t {
        V::Simple(s) if s == "string" => vec![c.q(&["GET", key])],
        V::Simple(s) if s == "list" => vec![c.q(&["LRANGE", key, "0", "-1"])],
        V::Simple(s) if s == "hash" => vec![c.q(&["HGETALL", key])],
        V::Simple(s) if s == "set" => vec![c.q(&["SMEMBERS", key])],
        V::Simple(s) if s == "zset" => vec![c.q(&["ZRANGE", key, "0", "-1", "WITHSCORES"])],
        other => panic!("{key}: type {other:?}"),
    };
    if let Some(V::Array(items)) = body.first_mut() {
        if matches!(&t, V::Simple(s) if s == "set") {
            items.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        }
    }
    body.insert(0, enc);
    body.insert(0, t);
    body
}

#[test]
fn round_trips_every_type_and_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let long = "z".repeat(100);
    let many: Vec<String> = (0..600).map(|i| format!("m{i}")).collect();
    let many: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
    let setup: Vec<Vec<&str>> = vec![
        vec!["SET", "str", "hello"],
        vec!["SET", "int", "-12345"],
        vec!["SET", "long", &long],
        vec!["SET", "empty", ""],
        vec!["RPUSH", "list", "a", "", "3", &long],
        [&["RPUSH", "biglist"][..], &many].concat(),
        vec!["HSET", "hash", "f", "v", "n", "1"],
        vec!["HSET", "bighash", "f", &long],
        vec!["SADD", "intset", "1", "2", "-3"],
        vec!["SADD", "set", "a", "b", "1"],
        [&["SADD", "bigset"][..], &many].concat(),
        vec!["ZADD", "zset", "1", "a", "-2.5", "b", "inf", "c"],
        vec!["ZADD", "bigzset", "1", "a", "2", &long],
    ];
    for cmd in &setup {
        assert!(!matches!(c.q(cmd), V::Err(_)), "{cmd:?}");
    }
    for key in [
        "str", "int", "long", "empty", "list", "biglist", "hash", "bighash", "intset", "set",
        "bigset", "zset", "bigzset",
    ] {
        let p = payload(&mut c, key);
        let copy = format!("{key}:copy");
        assert_eq!(restore(&mut c, &copy, &p, &[]), V::ok(), "{key}");
        assert_eq!(snapshot(&mut c, key), snapshot(&mut c, &copy), "{key}");
        assert_eq!(c.q(&["TTL", &copy]), int(-1));
        // A payload of the copy is a payload of the same value.
        let p2 = payload(&mut c, &copy);
        assert_eq!(restore(&mut c, "again", &p2, &["REPLACE"]), V::ok());
        assert_eq!(snapshot(&mut c, key), snapshot(&mut c, "again"), "{key}");
    }
    assert_eq!(c.q(&["DUMP", "nosuchkey"]), V::NilBulk);
}

/// DUMP payloads captured from redis-server 7.0.15 (`scripts/rdb-fixtures.py`).
const REDIS_LIST_NODES: &str = "1203021717000000040082653003826531038265320382653303ff021717000000040082653403826535038265360382653703ff020f0f00000002008265380382653903ff0a00d5221c8045d1d255";
const REDIS_HASH_HASHTABLE: &str =
    "04050161c001046c6f6e67c30928017979e01b000179790163c0030162c0020164c0040a0007f9627cdaf06401";
const REDIS_SET_INTSET: &str = "0b120200000005000000fbff0100020003002c010a009ccf43292b19eebb";
const REDIS_ZSET_LISTPACK: &str =
    "1122220000000800816302dffd02816102010181620283322e350481640283696e6604ff0a00c54a2b13accba97f";

#[test]
fn restores_redis_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(restore(&mut c, "l", &hex(REDIS_LIST_NODES), &[]), V::ok());
    let ten: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
    let ten: Vec<&str> = ten.iter().map(|s| s.as_str()).collect();
    assert_eq!(c.q(&["LRANGE", "l", "0", "-1"]), V::arr(&ten));
    assert_eq!(
        restore(&mut c, "h", &hex(REDIS_HASH_HASHTABLE), &[]),
        V::ok()
    );
    assert_eq!(c.q(&["HLEN", "h"]), int(5));
    assert_eq!(c.q(&["HGET", "h", "long"]), V::bulk(&"y".repeat(40)));
    assert_eq!(c.q(&["HGET", "h", "c"]), V::bulk("3"));
    assert_eq!(restore(&mut c, "s", &hex(REDIS_SET_INTSET), &[]), V::ok());
    assert_eq!(c.q(&["OBJECT", "ENCODING", "s"]), V::bulk("intset"));
    assert_eq!(
        c.q(&["SMEMBERS", "s"]),
        V::arr(&["-5", "1", "2", "3", "300"])
    );
    assert_eq!(
        restore(&mut c, "z", &hex(REDIS_ZSET_LISTPACK), &[]),
        V::ok()
    );
    assert_eq!(
        c.q(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        V::arr(&["c", "-3", "a", "1", "b", "2.5", "d", "inf"])
    );
    assert_eq!(c.q(&["OBJECT", "ENCODING", "z"]), V::bulk("listpack"));
}

#[test]
fn encodings_follow_the_limits_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    c.q(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    c.q(&["SADD", "s", "1", "2", "3"]);
    let (h, z, st) = (
        payload(&mut c, "h"),
        payload(&mut c, "z"),
        payload(&mut c, "s"),
    );
    for (name, value) in [
        ("hash-max-listpack-entries", "2"),
        ("zset-max-listpack-entries", "2"),
        ("set-max-intset-entries", "2"),
    ] {
        assert_eq!(c.q(&["CONFIG", "SET", name, value]), V::ok());
    }
    assert_eq!(restore(&mut c, "h2", &h, &[]), V::ok());
    assert_eq!(restore(&mut c, "z2", &z, &[]), V::ok());
    assert_eq!(restore(&mut c, "s2", &st, &[]), V::ok());
    assert_eq!(c.q(&["OBJECT", "ENCODING", "h2"]), V::bulk("hashtable"));
    assert_eq!(c.q(&["OBJECT", "ENCODING", "z2"]), V::bulk("skiplist"));
    assert_eq!(c.q(&["OBJECT", "ENCODING", "s2"]), V::bulk("hashtable"));
    assert_eq!(c.q(&["OBJECT", "ENCODING", "h"]), V::bulk("listpack"));
}

#[test]
fn ttl_replace_and_access_options() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["SET", "k", "v"]);
    let p = payload(&mut c, "k");
    // A relative TTL in milliseconds.
    assert_eq!(c.qb(&[b"RESTORE", b"t", b"5000", &p]), V::ok());
    match c.q(&["PTTL", "t"]) {
        V::Int(ms) => assert!((4000..=5000).contains(&ms), "{ms}"),
        other => panic!("{other:?}"),
    }
    // An absolute one, in the future and in the past.
    let future = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 100_000)
        .to_string();
    let ttl_args: Vec<&[u8]> = vec![b"RESTORE", b"a", future.as_bytes(), &p, b"ABSTTL"];
    assert_eq!(c.qb(&ttl_args), V::ok());
    assert_eq!(c.q(&["PEXPIRETIME", "a"]), int(future.parse().unwrap()));
    assert_eq!(c.qb(&[b"RESTORE", b"gone", b"1", &p, b"ABSTTL"]), V::ok());
    assert_eq!(c.q(&["EXISTS", "gone"]), int(0));
    // REPLACE with a past absolute TTL deletes the key it replaces.
    c.q(&["SET", "old", "x"]);
    assert_eq!(
        c.qb(&[b"RESTORE", b"old", b"1", &p, b"ABSTTL", b"REPLACE"]),
        V::ok()
    );
    assert_eq!(c.q(&["EXISTS", "old"]), int(0));
    // REPLACE over another type, dropping its expiry.
    c.q(&["RPUSH", "l", "1", "2"]);
    c.q(&["EXPIRE", "l", "100"]);
    assert_eq!(restore(&mut c, "l", &p, &["REPLACE"]), V::ok());
    assert_eq!(c.q(&["GET", "l"]), V::bulk("v"));
    assert_eq!(c.q(&["TTL", "l"]), int(-1));
    // IDLETIME under the default (LRU-style) policy; FREQ under an LFU one.
    assert_eq!(restore(&mut c, "idle", &p, &["IDLETIME", "1000"]), V::ok());
    match c.q(&["OBJECT", "IDLETIME", "idle"]) {
        V::Int(n) => assert!((1000..1010).contains(&n), "{n}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        c.q(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]),
        V::ok()
    );
    assert_eq!(restore(&mut c, "hot", &p, &["FREQ", "200"]), V::ok());
    assert_eq!(c.q(&["OBJECT", "FREQ", "hot"]), int(200));
}

#[test]
fn errors_are_redis_s() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["SET", "k", "v"]);
    let p = payload(&mut c, "k");
    let busy = V::err("BUSYKEY Target key name already exists.");
    let syntax = V::err("ERR syntax error");
    let not_int = V::err("ERR value is not an integer or out of range");
    let bad_footer = V::err("ERR DUMP payload version or checksum are wrong");
    assert_eq!(restore(&mut c, "k", &p, &[]), busy);
    // Options are parsed first, then the key, then the TTL, then the payload.
    assert_eq!(restore(&mut c, "k", &p, &["bogus"]), syntax);
    assert_eq!(restore(&mut c, "k", &p, &["IDLETIME"]), syntax);
    assert_eq!(
        restore(&mut c, "k", &p, &["IDLETIME", "1", "FREQ", "1"]),
        syntax
    );
    assert_eq!(
        restore(&mut c, "k", &p, &["FREQ", "1", "IDLETIME", "1"]),
        syntax
    );
    assert_eq!(restore(&mut c, "k", &p, &["IDLETIME", "x"]), not_int);
    assert_eq!(
        restore(&mut c, "k", &p, &["IDLETIME", "-1"]),
        V::err("ERR Invalid IDLETIME value, must be >= 0")
    );
    assert_eq!(
        restore(&mut c, "k", &p, &["FREQ", "256"]),
        V::err("ERR Invalid FREQ value, must be >= 0 and <= 255")
    );
    assert_eq!(
        c.qb(&[b"RESTORE", b"n", b"-1", &p]),
        V::err("ERR Invalid TTL value, must be >= 0")
    );
    assert_eq!(c.qb(&[b"RESTORE", b"n", b"1.5", &p]), not_int);
    assert_eq!(c.qb(&[b"RESTORE", b"k", b"-1", &p]), busy);
    assert_eq!(c.q(&["RESTORE", "n", "0", "short"]), bad_footer);
    let mut flipped = p.clone();
    flipped[1] ^= 1;
    assert_eq!(restore(&mut c, "n", &flipped, &[]), bad_footer);
    // Version 13 with a correct CRC: still the footer's error.
    let mut newer = p[..p.len() - 10].to_vec();
    newer.extend_from_slice(&13u16.to_le_bytes());
    let crc = strata_server::rdb::crc64::crc64(&newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(restore(&mut c, "n", &newer, &[]), bad_footer);
    // A good footer over a bad value, and an empty set (Redis refuses both).
    for body in [&[0u8, 0x05, b'a'][..], &[2, 0], &[200]] {
        let mut bad = body.to_vec();
        bad.extend_from_slice(&9u16.to_le_bytes());
        let crc = strata_server::rdb::crc64::crc64(&bad);
        bad.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(
            restore(&mut c, "n", &bad, &[]),
            V::err("ERR Bad data format"),
            "{body:?}"
        );
    }
    assert_eq!(c.q(&["EXISTS", "n"]), int(0));
    assert_eq!(
        c.q(&["DUMP"]),
        V::err("ERR wrong number of arguments for 'dump' command")
    );
    assert_eq!(
        c.q(&["RESTORE", "k", "0"]),
        V::err("ERR wrong number of arguments for 'restore' command")
    );
}

#[test]
fn big_collections_restore_whole() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let n = 20_000;
    let items: Vec<String> = (0..n).map(|i| format!("item:{i:06}")).collect();
    for chunk in items.chunks(1000) {
        let mut rpush = vec!["RPUSH", "l"];
        let mut hset = vec!["HSET", "h"];
        let mut zadd = vec!["ZADD", "z"];
        for (j, it) in chunk.iter().enumerate() {
            rpush.push(it);
            hset.extend([it.as_str(), it.as_str()]);
            zadd.extend([["0", "1", "2"][j % 3], it.as_str()]);
        }
        c.q(&rpush);
        c.q(&hset);
        c.q(&zadd);
    }
    for key in ["l", "h", "z"] {
        let p = payload(&mut c, key);
        let copy = format!("{key}2");
        assert_eq!(restore(&mut c, &copy, &p, &[]), V::ok());
        assert_eq!(snapshot(&mut c, key), snapshot(&mut c, &copy), "{key}");
    }
    assert_eq!(c.q(&["LLEN", "l2"]), int(n));
    assert_eq!(c.q(&["LINDEX", "l2", "-1"]), V::bulk("item:019999"));
    assert_eq!(c.q(&["ZCARD", "z2"]), int(n));
}

#[test]
fn move_between_databases() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["SET", "k", "v"]);
    c.q(&["PEXPIRE", "k", "100000"]);
    c.q(&["RPUSH", "l", "a", "b", "c"]);
    c.q(&["ZADD", "z", "1", "x", "2", "y"]);
    // Redis's checks, in its order: the index, its range, the same database.
    assert_eq!(
        c.q(&["MOVE", "k", "0"]),
        V::err("ERR source and destination objects are the same")
    );
    assert_eq!(
        c.q(&["MOVE", "nokey", "0"]),
        V::err("ERR source and destination objects are the same")
    );
    assert_eq!(
        c.q(&["MOVE", "k", "16"]),
        V::err("ERR DB index is out of range")
    );
    assert_eq!(
        c.q(&["MOVE", "k", "-1"]),
        V::err("ERR DB index is out of range")
    );
    assert_eq!(
        c.q(&["MOVE", "k", "x"]),
        V::err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.q(&["MOVE", "k", "99999999999"]),
        V::err("ERR value is out of range, value must between -2147483648 and 2147483647")
    );
    assert_eq!(c.q(&["MOVE", "nokey", "1"]), int(0));
    for key in ["k", "l", "z"] {
        assert_eq!(c.q(&["MOVE", key, "1"]), int(1), "{key}");
        assert_eq!(c.q(&["EXISTS", key]), int(0));
    }
    assert_eq!(c.q(&["SELECT", "1"]), V::ok());
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
    match c.q(&["PTTL", "k"]) {
        V::Int(ms) => assert!((90_000..=100_000).contains(&ms), "{ms}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.q(&["LRANGE", "l", "0", "-1"]), V::arr(&["a", "b", "c"]));
    assert_eq!(
        c.q(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        V::arr(&["x", "1", "y", "2"])
    );
    // Moving back onto an existing key: 0, both stay.
    assert_eq!(c.q(&["SELECT", "0"]), V::ok());
    c.q(&["SET", "k", "here"]);
    assert_eq!(c.q(&["SELECT", "1"]), V::ok());
    assert_eq!(c.q(&["MOVE", "k", "0"]), int(0));
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
    // Back into an empty database 0 name, and the list's records went with it.
    assert_eq!(c.q(&["MOVE", "l", "0"]), int(1));
    assert_eq!(c.q(&["SELECT", "0"]), V::ok());
    assert_eq!(c.q(&["LPOP", "l"]), V::bulk("a"));
    assert_eq!(c.q(&["LLEN", "l"]), int(2));
    // Inside MULTI too.
    assert_eq!(c.q(&["MULTI"]), V::ok());
    assert_eq!(c.q(&["MOVE", "l", "3"]), V::Simple("QUEUED".into()));
    assert_eq!(c.q(&["EXEC"]), V::Array(vec![int(1)]));
    assert_eq!(c.q(&["SELECT", "3"]), V::ok());
    assert_eq!(c.q(&["LRANGE", "l", "0", "-1"]), V::arr(&["b", "c"]));
}

/// The Redis types' check (`strata check`) after RESTOREs (new keys, REPLACE over every
/// type, an expired restore) and MOVEs of collections: the records agree.
#[test]
fn restored_and_moved_keys_pass_the_types_check() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let mut c = Client::connect(server.local_addr());
    let setup: &[&[&str]] = &[
        &["SET", "s", "string"],
        &["RPUSH", "l", "a", "b", "c"],
        &["HSET", "h", "f", "v", "g", "w"],
        &["SADD", "st", "1", "x"],
        &["ZADD", "z", "1", "a", "-0", "b"],
    ];
    for cmd in setup {
        assert!(!matches!(c.q(cmd), V::Err(_)), "{cmd:?}");
    }
    let keys = ["s", "l", "h", "st", "z"];
    let payloads: Vec<Vec<u8>> = keys.iter().map(|k| payload(&mut c, k)).collect();
    for (i, p) in payloads.iter().enumerate() {
        assert_eq!(restore(&mut c, &format!("copy{i}"), p, &[]), V::ok());
        // Every type over every other.
        for k in keys {
            assert_eq!(restore(&mut c, k, p, &["REPLACE"]), V::ok());
        }
    }
    assert_eq!(
        c.qb(&[
            b"RESTORE",
            b"copy0",
            b"1",
            &payloads[1],
            b"ABSTTL",
            b"REPLACE"
        ]),
        V::ok()
    );
    for (i, db) in [(1, "1"), (2, "2"), (3, "1")] {
        assert_eq!(c.q(&["MOVE", &format!("copy{i}"), db]), int(1));
    }
    let want = match (c.q(&["DBSIZE"]), c.q(&["SELECT", "1"]), c.q(&["DBSIZE"])) {
        (V::Int(a), _, V::Int(b)) => (a + b + 1) as u64, // + copy2 in db 2
        other => panic!("{other:?}"),
    };
    drop(c);
    server.shutdown().unwrap();
    let db = strata::Db::open(dir.path(), strata::DbOptions::default()).unwrap();
    let r = strata_server::check::check_types(&db).unwrap();
    db.close().unwrap();
    assert!(r.is_ok(), "{:#?}", r.problems);
    assert_eq!(r.keys.iter().sum::<u64>(), want, "{r:?}");
    assert!(
        r.garbage > 0,
        "replaced and moved collections leave garbage: {r:?}"
    );
}

/// A stream with a group, its PEL and consumer moves through DUMP and RESTORE whole (XINFO
/// STREAM FULL alike), as RDB 9's STREAM_LISTPACKS; a RESTORE that makes the key a client
/// blocks on wakes it, as Redis's does.
#[test]
fn streams_round_trip_and_wake_readers() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let mut reader = Client::connect(s.local_addr());
    for i in 1..=5 {
        let id = format!("{i}-0");
        c.q(&["XADD", "st", &id, "f", &i.to_string(), "g", "x"]);
    }
    c.q(&["XADD", "st", "6-0", "other", "fields"]);
    assert_eq!(c.q(&["XGROUP", "CREATE", "st", "grp", "0"]), V::ok());
    let read = ["XREADGROUP", "GROUP", "grp", "alice", "STREAMS", "st", ">"];
    assert!(matches!(c.q(&read), V::Array(_)));
    let p = payload(&mut c, "st");
    assert_eq!(p[0], 15, "STREAM_LISTPACKS");
    assert_eq!(&p[p.len() - 10..p.len() - 8], &[9, 0], "RDB 9");

    let block = ["XREAD", "BLOCK", "0", "STREAMS", "copy", "$"];
    reader.send(&common::encode(&block.map(str::as_bytes)));
    std::thread::sleep(std::time::Duration::from_millis(300)); // blocked by now
    assert_eq!(restore(&mut c, "copy", &p, &[]), V::ok());
    // Woken with every entry (all after the `$` of a missing key, 0-0).
    match reader.read() {
        V::Array(streams) => match &streams[..] {
            [V::Array(one)] => {
                assert_eq!(one[0], V::bulk("copy"));
                assert!(matches!(&one[1], V::Array(e) if e.len() == 6), "{one:?}");
            }
            other => panic!("woken with {other:?}"),
        },
        other => panic!("woken with {other:?}"),
    }
    let full = |c: &mut Client, k: &str| c.q(&["XINFO", "STREAM", k, "FULL"]);
    assert_eq!(full(&mut c, "copy"), full(&mut c, "st"));
    assert_eq!(
        c.q(&["XPENDING", "copy", "grp"]),
        c.q(&["XPENDING", "st", "grp"])
    );
    // The copy is a stream like any other: its group reads on.
    c.q(&["XADD", "copy", "7-0", "f", "7"]);
    let more = ["XREADGROUP", "GROUP", "grp", "bob", "STREAMS", "copy", ">"];
    assert!(matches!(c.q(&more), V::Array(v) if v.len() == 1));
    s.shutdown().unwrap();
}
