//! Client-side caching over TCP (`tracking.rs`): RESP3 `invalidate` pushes when another
//! client writes a key the tracking client read, RESP2 redirection to a client subscribed
//! to `__redis__:invalidate`, BCAST prefixes (one message per command), OPTIN/OPTOUT with
//! CLIENT CACHING, NOLOOP, FLUSHALL's null, eviction past `tracking-table-max-keys`, and
//! invalidation whatever path the write takes: a shard worker, a pipeline run in place,
//! EXEC, a script, expiry. `tests/redis/test_tracking.py` compares the replies with
//! redis-server's.

mod common;

use common::{start, Client, V};
use std::time::{Duration, Instant};

fn resp3(c: &mut Client) {
    assert!(matches!(c.q(&["HELLO", "3"]), V::Map(_)));
}

fn id_of(c: &mut Client) -> String {
    match c.q(&["CLIENT", "ID"]) {
        V::Int(n) => n.to_string(),
        other => panic!("CLIENT ID: {other:?}"),
    }
}

fn invalidate(keys: &[&str]) -> V {
    V::Push(vec![V::bulk("invalidate"), V::arr(keys)])
}

/// What `c` (RESP3) received before the reply of a PING sent now.
fn pushes(c: &mut Client) -> Vec<V> {
    c.send(&common::encode(&[b"PING"]));
    let mut out = Vec::new();
    loop {
        match c.read() {
            V::Simple(s) if s == "PONG" => return out,
            v => out.push(v),
        }
    }
}

/// What a RESP2 subscriber received before the reply of a PING sent now.
fn messages(c: &mut Client) -> Vec<V> {
    c.send(&common::encode(&[b"PING"]));
    let mut out = Vec::new();
    loop {
        match c.read() {
            V::Array(v) if v.first() == Some(&V::bulk("pong")) => return out,
            v => out.push(v),
        }
    }
}

#[test]
fn resp3_push_when_another_client_writes() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut a = Client::connect(s.local_addr());
    let mut b = Client::connect(s.local_addr());
    resp3(&mut a);
    assert_eq!(a.q(&["CLIENT", "TRACKING", "on"]), V::ok());
    assert_eq!(a.q(&["MGET", "k", "j"]), V::Array(vec![V::Null, V::Null]));
    assert_eq!(b.q(&["SET", "k", "1"]), V::ok());
    assert_eq!(b.q(&["SET", "k", "2"]), V::ok());
    // Once: the key is forgotten until read again.
    assert_eq!(pushes(&mut a), vec![invalidate(&["k"])]);
    assert_eq!(b.q(&["DEL", "j"]), V::Int(0));
    assert!(
        pushes(&mut a).is_empty(),
        "DEL of a missing key writes nothing"
    );
    // A write of its own comes after the write's reply.
    assert_eq!(a.q(&["GET", "k"]), V::bulk("2"));
    assert_eq!(a.q(&["SET", "k", "3"]), V::ok());
    assert_eq!(pushes(&mut a), vec![invalidate(&["k"])]);
    // CLIENT LIST and INFO show it.
    let info = match a.q(&["CLIENT", "INFO"]) {
        V::Verbatim(_, b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(
        info.contains(" flags=t ") && info.contains(" redir=0 "),
        "{info}"
    );
    let stats = match b.q(&["INFO", "everything"]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(stats.contains("tracking_clients:1\r\n"), "{stats}");
    assert!(
        stats.contains("tracking_total_keys:1\r\n"),
        "j stays remembered"
    );
    assert_eq!(a.q(&["CLIENT", "TRACKING", "off"]), V::ok());
    assert_eq!(a.q(&["CLIENT", "GETREDIR"]), V::Int(-1));
}

#[test]
fn resp2_redirect_to_a_subscriber_and_broken_redirect() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut sub = Client::connect(s.local_addr());
    let mut t = Client::connect(s.local_addr());
    let mut w = Client::connect(s.local_addr());
    let sub_id = id_of(&mut sub);
    sub.q(&["SUBSCRIBE", "__redis__:invalidate"]);
    assert_eq!(
        t.q(&["CLIENT", "TRACKING", "on", "REDIRECT", &sub_id]),
        V::ok()
    );
    assert_eq!(
        t.q(&["CLIENT", "GETREDIR"]),
        V::Int(sub_id.parse().unwrap())
    );
    t.q(&["GET", "k"]);
    w.q(&["SET", "k", "v"]);
    let msg = |v: V| V::Array(vec![V::bulk("message"), V::bulk("__redis__:invalidate"), v]);
    assert_eq!(messages(&mut sub), vec![msg(V::arr(&["k"]))]);
    t.q(&["GET", "k"]);
    w.q(&["FLUSHALL"]);
    assert_eq!(messages(&mut sub), vec![msg(V::NilBulk)]);
    // The target leaves: the redirect is broken (a RESP2 client is not told).
    drop(sub);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        t.q(&["GET", "k"]);
        w.q(&["SET", "k", "v"]);
        let info = match t.q(&["CLIENT", "TRACKINGINFO"]) {
            V::Array(v) => v,
            other => panic!("{other:?}"),
        };
        if info[1] == V::arr(&["on", "broken_redirect"]) {
            break;
        }
        assert!(Instant::now() < deadline, "never broken: {info:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // In RESP3 it gets the broken-redirect push.
    resp3(&mut t);
    t.q(&["GET", "k"]);
    w.q(&["SET", "k", "v"]);
    assert_eq!(
        pushes(&mut t),
        vec![V::Push(vec![
            V::bulk("tracking-redir-broken"),
            V::Int(sub_id.parse().unwrap())
        ])]
    );
}

#[test]
fn bcast_prefixes_get_one_message_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut a = Client::connect(s.local_addr());
    let mut w = Client::connect(s.local_addr());
    resp3(&mut a);
    assert_eq!(
        a.q(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", "y:"]),
        V::ok()
    );
    assert_eq!(
        a.q(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x:1"]),
        V::err(
            "ERR Prefix 'x:1' overlaps with an existing prefix 'x'. Prefixes for a single \
             client must not overlap."
        )
    );
    w.q(&["MSET", "x2", "1", "x1", "1", "z", "1", "y:a", "2"]);
    assert_eq!(
        pushes(&mut a),
        vec![invalidate(&["x1", "x2"]), invalidate(&["y:a"])]
    );
    // In a transaction: one message for the whole EXEC.
    w.q(&["MULTI"]);
    w.q(&["SET", "x3", "1"]);
    w.q(&["SET", "x1", "2"]);
    w.q(&["EXEC"]);
    assert_eq!(pushes(&mut a), vec![invalidate(&["x1", "x3"])]);
    let info = match a.q(&["CLIENT", "TRACKINGINFO"]) {
        V::Map(m) => m,
        other => panic!("{other:?}"),
    };
    assert_eq!(info[0].1, V::Set(vec![V::bulk("on"), V::bulk("bcast")]));
    assert_eq!(info[2].1, V::arr(&["x", "y:"]));
}

#[test]
fn optin_optout_and_noloop() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut a = Client::connect(s.local_addr());
    let mut w = Client::connect(s.local_addr());
    resp3(&mut a);
    assert_eq!(a.q(&["CLIENT", "TRACKING", "on", "OPTIN"]), V::ok());
    a.q(&["GET", "k1"]);
    assert_eq!(a.q(&["CLIENT", "CACHING", "yes"]), V::ok());
    a.q(&["GET", "k2"]);
    a.q(&["GET", "k3"]); // CACHING applies to one command
    w.q(&["MSET", "k1", "1", "k2", "2", "k3", "3"]);
    assert_eq!(pushes(&mut a), vec![invalidate(&["k2"])]);
    assert_eq!(
        a.q(&["CLIENT", "CACHING", "no"]),
        V::err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
    );
    a.q(&["CLIENT", "TRACKING", "off"]);
    assert_eq!(
        a.q(&["CLIENT", "TRACKING", "on", "OPTOUT", "NOLOOP"]),
        V::ok()
    );
    assert_eq!(a.q(&["CLIENT", "CACHING", "no"]), V::ok());
    a.q(&["GET", "k1"]);
    a.q(&["GET", "k2"]);
    a.q(&["GET", "k3"]);
    // NOLOOP: its own write of k3 is not sent.
    a.q(&["SET", "k3", "x"]);
    w.q(&["MSET", "k1", "1", "k2", "2"]);
    assert_eq!(pushes(&mut a), vec![invalidate(&["k2"])]);
}

#[test]
fn flushall_sends_null_and_the_table_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut a = Client::connect(s.local_addr());
    let mut w = Client::connect(s.local_addr());
    resp3(&mut a);
    a.q(&["CLIENT", "TRACKING", "on"]);
    a.q(&["MGET", "a", "b"]);
    w.q(&["SET", "a", "1"]);
    w.q(&["FLUSHALL"]);
    assert_eq!(
        pushes(&mut a),
        vec![
            invalidate(&["a"]),
            V::Push(vec![V::bulk("invalidate"), V::Null])
        ]
    );
    assert_eq!(
        w.q(&["CONFIG", "SET", "tracking-table-max-keys", "2"]),
        V::ok()
    );
    a.q(&["MGET", "k1", "k2", "k3", "k4"]);
    let got = pushes(&mut a);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        w.q(&["CONFIG", "GET", "tracking-table-max-keys"]),
        V::arr(&["tracking-table-max-keys", "2"])
    );
}

#[test]
fn every_write_path_invalidates() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut a = Client::connect(s.local_addr());
    let mut w = Client::connect(s.local_addr());
    resp3(&mut a);
    a.q(&["CLIENT", "TRACKING", "on"]);
    // A pipeline of writes (run in place or on the shard's worker).
    a.q(&["MGET", "p1", "p2"]);
    let mut pipe = common::encode(&[b"SET", b"p1", b"1"]);
    pipe.extend(common::encode(&[b"LPUSH", b"p2", b"1"]));
    w.send(&pipe);
    w.read();
    w.read();
    assert_eq!(
        pushes(&mut a),
        vec![invalidate(&["p1"]), invalidate(&["p2"])]
    );
    // EXEC.
    a.q(&["GET", "e"]);
    w.q(&["MULTI"]);
    w.q(&["INCR", "e"]);
    w.q(&["EXEC"]);
    assert_eq!(pushes(&mut a), vec![invalidate(&["e"])]);
    // A script's write, and a script's read is remembered for its caller.
    a.q(&["EVAL", "return redis.call('get', KEYS[1])", "1", "s"]);
    w.q(&["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "s"]);
    assert_eq!(pushes(&mut a), vec![invalidate(&["s"])]);
    // Expiry (the active cycle or a lazy read).
    w.q(&["SET", "t", "1", "PX", "30"]);
    a.q(&["GET", "t"]);
    std::thread::sleep(Duration::from_millis(60));
    w.q(&["GET", "t"]);
    assert_eq!(pushes(&mut a), vec![invalidate(&["t"])]);
    // A write command reads nothing remembered: GETDEL's key is not tracked.
    w.q(&["SET", "g", "1"]);
    a.q(&["GETDEL", "g"]);
    w.q(&["SET", "g", "1"]);
    assert!(pushes(&mut a).is_empty(), "GETDEL is no read-only command");
}
