//! The stream commands over TCP with Redis 7.0.15's replies (read from redis-server 7.0.15):
//! entries, ranges, trimming, consumer groups with their pending entries, XINFO, blocking
//! XREAD / XREADGROUP woken by XADD, timing out, unblocked by CLIENT UNBLOCK or by the
//! stream's deletion, the keyspace commands on streams, and streams across a restart
//! (with `strata check`'s verification of their records).

mod common;

use common::{start, Client, V};
use std::time::{Duration, Instant};

fn int(n: i64) -> V {
    V::Int(n)
}

fn entry(id: &str, fields: &[&str]) -> V {
    V::Array(vec![V::bulk(id), V::arr(fields)])
}

#[test]
fn entries_ranges_and_trimming() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["XADD", "s", "1-1", "a", "1"]), V::bulk("1-1"));
    assert_eq!(c.q(&["XADD", "s", "1-*", "b", "2"]), V::bulk("1-2"));
    assert_eq!(c.q(&["XADD", "s", "5", "c", "3"]), V::bulk("5-0"));
    assert_eq!(
        c.q(&["XADD", "s", "5-0", "x", "y"]),
        V::err("ERR The ID specified in XADD is equal or smaller than the target stream top item")
    );
    assert_eq!(
        c.q(&["XADD", "t", "0-0", "x", "y"]),
        V::err("ERR The ID specified in XADD must be greater than 0-0")
    );
    assert_eq!(
        c.q(&["XADD", "s", "bad", "x", "y"]),
        V::err("ERR Invalid stream ID specified as stream command argument")
    );
    assert_eq!(
        c.q(&["XADD", "s", "9-0", "x"]),
        V::err("ERR wrong number of arguments for 'xadd' command")
    );
    assert_eq!(c.q(&["XADD", "t", "NOMKSTREAM", "*", "x", "y"]), V::NilBulk);
    assert_eq!(c.q(&["EXISTS", "t"]), int(0));
    // `*` takes the clock, above the last ID.
    let V::Bulk(auto) = c.q(&["XADD", "s", "*", "d", "4"]) else {
        panic!()
    };
    let auto = String::from_utf8(auto).unwrap();
    assert!(auto.ends_with("-0") && auto.len() > 10, "{auto}");
    assert_eq!(c.q(&["XLEN", "s"]), int(4));
    assert_eq!(
        c.q(&["XRANGE", "s", "-", "(5-0"]),
        V::Array(vec![entry("1-1", &["a", "1"]), entry("1-2", &["b", "2"])])
    );
    assert_eq!(
        c.q(&["XREVRANGE", "s", "5", "-", "COUNT", "1"]),
        V::Array(vec![entry("5-0", &["c", "3"])])
    );
    assert_eq!(c.q(&["XRANGE", "s", "-", "+", "COUNT", "0"]), V::NilArray);
    assert_eq!(c.q(&["XRANGE", "nokey", "-", "+"]), V::Array(vec![]));
    assert_eq!(c.q(&["XDEL", "s", "1-2", "1-2", "7-7"]), int(1));
    assert_eq!(c.q(&["XTRIM", "s", "MAXLEN", "2"]), int(1));
    assert_eq!(
        c.q(&["XRANGE", "s", "-", "5"]),
        V::Array(vec![entry("5-0", &["c", "3"])])
    );
    assert_eq!(
        c.q(&["XTRIM", "s", "MAXLEN", "1", "LIMIT", "1"]),
        V::err("ERR syntax error, LIMIT cannot be used without the special ~ option")
    );
    assert_eq!(
        c.q(&["XSETID", "s", "4-0"]),
        V::err("ERR The ID specified in XSETID is smaller than the target stream top item")
    );
    assert_eq!(c.q(&["TYPE", "s"]), V::Simple("stream".into()));
    assert_eq!(c.q(&["OBJECT", "ENCODING", "s"]), V::bulk("stream"));
    assert_eq!(c.q(&["SET", "str", "x"]), V::ok());
    assert_eq!(
        c.q(&["XADD", "str", "1-1", "a", "b"]),
        V::err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    // The keyspace commands carry streams with their groups.
    assert_eq!(c.q(&["XGROUP", "CREATE", "s", "g", "0"]), V::ok());
    assert_eq!(c.q(&["COPY", "s", "s2"]), int(1));
    assert_eq!(c.q(&["RENAME", "s2", "s3"]), V::ok());
    assert_eq!(c.q(&["XLEN", "s3"]), int(2));
    assert_eq!(
        c.q(&["XINFO", "GROUPS", "s3"]),
        c.q(&["XINFO", "GROUPS", "s"])
    );
    let V::Array(scan) = c.q(&["SCAN", "0", "TYPE", "stream", "COUNT", "100"]) else {
        panic!()
    };
    let V::Array(mut keys) = scan[1].clone() else {
        panic!()
    };
    keys.sort_by_key(|k| match k {
        V::Bulk(b) => b.clone(),
        _ => Vec::new(),
    });
    assert_eq!(keys, vec![V::bulk("s"), V::bulk("s3")]);
    assert_eq!(c.q(&["DBSIZE"]), int(3));
    assert_eq!(c.q(&["DEL", "s"]), int(1));
    assert_eq!(c.q(&["XLEN", "s"]), int(0));
}

#[test]
fn consumer_groups_deliver_acknowledge_and_claim() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(
        c.q(&["XGROUP", "CREATE", "q", "g", "$"]),
        V::err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
    );
    assert_eq!(
        c.q(&["XGROUP", "CREATE", "q", "g", "$", "MKSTREAM"]),
        V::ok()
    );
    assert_eq!(
        c.q(&["XGROUP", "CREATE", "q", "g", "$"]),
        V::err("BUSYGROUP Consumer Group name already exists")
    );
    for i in 1..=4 {
        let id = format!("{i}-0");
        c.q(&["XADD", "q", &id, "job", &i.to_string()]);
    }
    assert_eq!(
        c.q(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "q",
            ">"
        ]),
        V::Array(vec![V::Array(vec![
            V::bulk("q"),
            V::Array(vec![
                entry("1-0", &["job", "1"]),
                entry("2-0", &["job", "2"])
            ]),
        ])])
    );
    assert_eq!(
        c.q(&["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "q", ">"]),
        V::Array(vec![V::Array(vec![
            V::bulk("q"),
            V::Array(vec![
                entry("3-0", &["job", "3"]),
                entry("4-0", &["job", "4"])
            ]),
        ])])
    );
    assert_eq!(
        c.q(&["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "q", ">"]),
        V::NilArray
    );
    // XPENDING's summary, then alice acknowledges 1 and her history holds 2 only.
    assert_eq!(
        c.q(&["XPENDING", "q", "g"]),
        V::Array(vec![
            int(4),
            V::bulk("1-0"),
            V::bulk("4-0"),
            V::Array(vec![V::arr(&["alice", "2"]), V::arr(&["bob", "2"])]),
        ])
    );
    assert_eq!(c.q(&["XACK", "q", "g", "1-0", "1-0", "9-0"]), int(1));
    assert_eq!(
        c.q(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "q", "0"]),
        V::Array(vec![V::Array(vec![
            V::bulk("q"),
            V::Array(vec![entry("2-0", &["job", "2"])]),
        ])])
    );
    // A deleted entry still pending shows with a null body in the history.
    assert_eq!(c.q(&["XDEL", "q", "2-0"]), int(1));
    assert_eq!(
        c.q(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "q", "0"]),
        V::Array(vec![V::Array(vec![
            V::bulk("q"),
            V::Array(vec![V::Array(vec![V::bulk("2-0"), V::NilArray])]),
        ])])
    );
    // XCLAIM moves 3 to carol (delivery count 2); XAUTOCLAIM takes the rest and reports 2
    // as deleted.
    assert_eq!(
        c.q(&["XCLAIM", "q", "g", "carol", "0", "3-0", "JUSTID"]),
        V::arr(&["3-0"])
    );
    assert_eq!(
        c.q(&["XAUTOCLAIM", "q", "g", "carol", "0", "0"]),
        V::Array(vec![
            V::bulk("0-0"),
            V::Array(vec![
                entry("3-0", &["job", "3"]),
                entry("4-0", &["job", "4"])
            ]),
            V::arr(&["2-0"]),
        ])
    );
    let V::Array(rows) = c.q(&["XPENDING", "q", "g", "-", "+", "10", "carol"]) else {
        panic!()
    };
    assert_eq!(rows.len(), 2);
    let V::Array(row) = &rows[0] else { panic!() };
    assert_eq!(
        (&row[0], &row[1], &row[3]),
        (&V::bulk("3-0"), &V::bulk("carol"), &int(2))
    );
    assert_eq!(c.q(&["XGROUP", "DELCONSUMER", "q", "g", "carol"]), int(2));
    assert_eq!(c.q(&["XGROUP", "CREATECONSUMER", "q", "g", "dave"]), int(1));
    assert_eq!(c.q(&["XGROUP", "CREATECONSUMER", "q", "g", "dave"]), int(0));
    assert_eq!(
        c.q(&["XINFO", "GROUPS", "q"]),
        V::Array(vec![V::Array(vec![
            V::bulk("name"),
            V::bulk("g"),
            V::bulk("consumers"),
            int(3),
            V::bulk("pending"),
            int(0),
            V::bulk("last-delivered-id"),
            V::bulk("4-0"),
            V::bulk("entries-read"),
            int(4),
            V::bulk("lag"),
            int(0),
        ])])
    );
    assert_eq!(c.q(&["XGROUP", "DESTROY", "q", "g"]), int(1));
    assert_eq!(c.q(&["XGROUP", "DESTROY", "q", "g"]), int(0));
    assert_eq!(
        c.q(&["XREADGROUP", "GROUP", "g", "a", "STREAMS", "q", ">"]),
        V::err("NOGROUP No such key 'q' or consumer group 'g' in XREADGROUP with GROUP option")
    );
}

/// Reads the reply of a client blocked earlier, within `limit`.
fn read_within(c: &mut Client, limit: Duration) -> (V, Duration) {
    let t = Instant::now();
    let v = c.read();
    let took = t.elapsed();
    assert!(took < limit, "took {took:?}");
    (v, took)
}

#[test]
fn blocked_reads_wake_time_out_and_unblock() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut w = Client::connect(s.local_addr());
    let mut r1 = Client::connect(s.local_addr());
    let mut r2 = Client::connect(s.local_addr());
    // Two XREADs on `$` both get the one XADD: reads do not consume.
    r1.send(&common::encode(&[
        b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$",
    ]));
    r2.send(&common::encode(&[
        b"XREAD", b"COUNT", b"5", b"BLOCK", b"5000", b"STREAMS", b"x", b"s", b"$", b"$",
    ]));
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(w.q(&["XADD", "s", "7-0", "f", "v"]), V::bulk("7-0"));
    let want = V::Array(vec![V::Array(vec![
        V::bulk("s"),
        V::Array(vec![entry("7-0", &["f", "v"])]),
    ])]);
    assert_eq!(read_within(&mut r1, Duration::from_secs(5)).0, want);
    assert_eq!(read_within(&mut r2, Duration::from_secs(5)).0, want);
    // A timeout answers a null array.
    r1.send(&common::encode(&[
        b"XREAD", b"BLOCK", b"100", b"STREAMS", b"s", b"$",
    ]));
    let (v, took) = read_within(&mut r1, Duration::from_secs(5));
    assert_eq!(v, V::NilArray);
    assert!(took >= Duration::from_millis(90), "{took:?}");
    // A group reader gets the new entry into its pending list.
    assert_eq!(w.q(&["XGROUP", "CREATE", "s", "g", "$"]), V::ok());
    r1.send(&common::encode(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"c",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"s",
        b">",
    ]));
    std::thread::sleep(Duration::from_millis(150));
    w.q(&["XADD", "s", "8-0", "f", "w"]);
    assert_eq!(
        read_within(&mut r1, Duration::from_secs(5)).0,
        V::Array(vec![V::Array(vec![
            V::bulk("s"),
            V::Array(vec![entry("8-0", &["f", "w"])])
        ])])
    );
    assert_eq!(
        w.q(&["XPENDING", "s", "g"]).clone(),
        V::Array(vec![
            int(1),
            V::bulk("8-0"),
            V::bulk("8-0"),
            V::Array(vec![V::arr(&["c", "1"])])
        ])
    );
    // Deleting the stream wakes a blocked group reader with Redis's error; destroying its
    // group too.
    r1.send(&common::encode(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"c",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"s",
        b">",
    ]));
    std::thread::sleep(Duration::from_millis(150));
    w.q(&["DEL", "s"]);
    assert_eq!(
        read_within(&mut r1, Duration::from_secs(5)).0,
        V::err("UNBLOCKED the stream key no longer exists")
    );
    w.q(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    r1.send(&common::encode(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"c",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"s",
        b">",
    ]));
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(w.q(&["XGROUP", "DESTROY", "s", "g"]), int(1));
    assert_eq!(
        read_within(&mut r1, Duration::from_secs(5)).0,
        V::err("NOGROUP the consumer group this client was blocked on no longer exists")
    );
    // CLIENT UNBLOCK answers as a timeout.
    let V::Int(id) = r1.q(&["CLIENT", "ID"]) else {
        panic!()
    };
    r1.send(&common::encode(&[
        b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$",
    ]));
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(w.q(&["CLIENT", "UNBLOCK", &id.to_string()]), int(1));
    assert_eq!(read_within(&mut r1, Duration::from_secs(5)).0, V::NilArray);
    // In MULTI, a blocking read does not block.
    assert_eq!(r1.q(&["MULTI"]), V::ok());
    r1.q(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert_eq!(r1.q(&["EXEC"]), V::Array(vec![V::NilArray]));
}

#[test]
fn streams_survive_a_restart_and_check_clean() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = start(dir.path(), &["--appendfsync", "always"]);
        let mut c = Client::connect(s.local_addr());
        for i in 1..=50 {
            c.q(&["XADD", "s", &format!("{i}-0"), "n", &i.to_string()]);
        }
        c.q(&["XGROUP", "CREATE", "s", "g", "0"]);
        c.q(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "10",
            "STREAMS",
            "s",
            ">",
        ]);
        c.q(&["XACK", "s", "g", "1-0", "2-0"]);
        c.q(&["XDEL", "s", "5-0"]);
        c.q(&["XTRIM", "s", "MINID", "3"]);
        s.shutdown().unwrap();
    }
    let db = strata::Db::open(dir.path(), strata::DbOptions::default()).unwrap();
    let report = strata_server::check::check_types(&db).unwrap();
    db.close().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.keys[5], 1, "one stream");
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["XLEN", "s"]), int(47));
    assert_eq!(
        c.q(&["XPENDING", "s", "g"]),
        V::Array(vec![
            int(8),
            V::bulk("3-0"),
            V::bulk("10-0"),
            V::Array(vec![V::arr(&["c", "8"])])
        ])
    );
}
