//! Keyspace notifications over TCP: `notify-keyspace-events` from the command line and
//! CONFIG SET, events on `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>`, in
//! command order (also inside MULTI/EXEC and scripts), `expired` from the active expiry
//! cycle and from lazy expiry, the `new` and `keymiss` classes, and nothing at all when the
//! directive is empty. The exact events of every command are compared with redis-server's
//! by `tests/redis/test_notify.py`.

mod common;

use common::{start, Client, V};
use std::time::Duration;

/// A client subscribed to every keyspace and keyevent channel.
fn subscriber(c: &mut Client) {
    c.q(&["PSUBSCRIBE", "__key*__:*"]);
}

/// The next pmessage's channel and message.
fn next_event(c: &mut Client) -> (String, String) {
    match c.read() {
        V::Array(v) if v.len() == 4 && v[0] == V::bulk("pmessage") => {
            let s = |x: &V| match x {
                V::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("not a bulk: {other:?}"),
            };
            (s(&v[2]), s(&v[3]))
        }
        other => panic!("not a pmessage: {other:?}"),
    }
}

/// Publishes a marker from `cmd` and returns every event `sub` got before it.
fn events_until_marker(cmd: &mut Client, sub: &mut Client) -> Vec<(String, String)> {
    cmd.q(&["PUBLISH", "__keyevent@0__:marker", "end"]);
    let mut out = Vec::new();
    loop {
        let e = next_event(sub);
        if e.0 == "__keyevent@0__:marker" {
            return out;
        }
        out.push(e);
    }
}

fn ev(chan: &str, msg: &str) -> (String, String) {
    (chan.to_string(), msg.to_string())
}

/// Both channels of `event` on `key` in database 0, keyspace first (Redis's order).
fn both(event: &str, key: &str) -> [(String, String); 2] {
    [
        ev(&format!("__keyspace@0__:{key}"), event),
        ev(&format!("__keyevent@0__:{event}"), key),
    ]
}

#[test]
fn commands_publish_their_events_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--notify-keyspace-events", "KEA"]);
    let mut sub = Client::connect(s.local_addr());
    let mut c = Client::connect(s.local_addr());
    subscriber(&mut sub);
    assert_eq!(
        c.q(&["CONFIG", "GET", "notify-keyspace-events"]),
        V::arr(&["notify-keyspace-events", "AKE"])
    );
    c.q(&["SET", "k", "1", "EX", "100"]);
    c.q(&["INCRBY", "k", "2"]);
    c.q(&["RPUSH", "l", "a", "b"]);
    c.q(&["LPOP", "l", "2"]);
    c.q(&["RENAME", "k", "k2"]);
    c.q(&["DEL", "k2", "nosuch"]);
    let mut want = Vec::new();
    for (e, k) in [
        ("set", "k"),
        ("expire", "k"),
        ("incrby", "k"),
        ("rpush", "l"),
        ("lpop", "l"),
        ("del", "l"),
        ("rename_from", "k"),
        ("rename_to", "k2"),
        ("del", "k2"),
    ] {
        want.extend(both(e, k));
    }
    assert_eq!(events_until_marker(&mut c, &mut sub), want);

    // MULTI/EXEC and scripts: the events of their commands, in order.
    c.q(&["MULTI"]);
    c.q(&["SADD", "s", "x", "y", "z"]);
    c.q(&["HSET", "h", "f", "v"]);
    c.q(&["ZADD", "z", "1", "m"]);
    c.q(&["EXEC"]);
    c.q(&[
        "EVAL",
        "redis.call('ZINCRBY', KEYS[1], 1, 'm'); redis.call('HDEL', KEYS[2], 'f')",
        "2",
        "z",
        "h",
    ]);
    let mut want = Vec::new();
    for (e, k) in [
        ("sadd", "s"),
        ("hset", "h"),
        ("zadd", "z"),
        ("zincr", "z"),
        ("hdel", "h"),
        ("del", "h"),
    ] {
        want.extend(both(e, k));
    }
    assert_eq!(events_until_marker(&mut c, &mut sub), want);

    // A partial SPOP (random members: the differential test leaves it out).
    assert!(matches!(c.q(&["SPOP", "s", "2"]), V::Array(v) if v.len() == 2));
    assert!(matches!(c.q(&["SPOP", "s"]), V::Bulk(_)));
    let mut want = Vec::new();
    want.extend(both("spop", "s"));
    want.extend(both("spop", "s"));
    want.extend(both("del", "s"));
    assert_eq!(events_until_marker(&mut c, &mut sub), want);
    s.shutdown().unwrap();
}

/// Redis 7.0's `xgroup-createconsumer` when XREADGROUP (served at once or after blocking),
/// XCLAIM or XAUTOCLAIM creates its consumer, and not when the consumer exists or
/// XREADGROUP has nothing to serve.
#[test]
fn reads_and_claims_that_create_a_consumer_publish_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--notify-keyspace-events", "KEA"]);
    let mut sub = Client::connect(s.local_addr());
    let mut c = Client::connect(s.local_addr());
    let mut blocked = Client::connect(s.local_addr());
    subscriber(&mut sub);
    c.q(&["XADD", "q", "1-0", "f", "v"]);
    c.q(&["XGROUP", "CREATE", "q", "g", "0"]);
    let read = |who: &str| ["XREADGROUP", "GROUP", "g", who, "STREAMS", "q", ">"].map(String::from);
    let q = |c: &mut Client, a: &[String]| c.q(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert!(matches!(q(&mut c, &read("alice")), V::Array(_)));
    q(&mut c, &read("alice"));
    q(&mut c, &read("dave")); // nothing new: no consumer, as in 7.0
    assert!(matches!(c.q(&["XCLAIM", "q", "g", "bob", "0", "1-0"]), V::Array(v) if v.len() == 1));
    c.q(&["XCLAIM", "q", "g", "bob", "0", "1-0"]);
    c.q(&["XAUTOCLAIM", "q", "g", "carol", "0", "0"]);
    c.q(&["XAUTOCLAIM", "q", "g", "carol", "0", "0"]);
    let mut want = Vec::new();
    for e in ["xadd", "xgroup-create"] {
        want.extend(both(e, "q"));
    }
    for _ in ["alice", "bob", "carol"] {
        want.extend(both("xgroup-createconsumer", "q"));
    }
    assert_eq!(events_until_marker(&mut c, &mut sub), want);

    let block = [
        "XREADGROUP",
        "GROUP",
        "g",
        "erin",
        "BLOCK",
        "0",
        "STREAMS",
        "q",
        ">",
    ];
    blocked.send(&common::encode(&block.map(str::as_bytes)));
    std::thread::sleep(Duration::from_millis(300)); // blocked by now
    c.q(&["XADD", "q", "2-0", "f", "v"]);
    assert!(matches!(blocked.read(), V::Array(_)));
    let mut want = Vec::new();
    want.extend(both("xadd", "q"));
    want.extend(both("xgroup-createconsumer", "q"));
    assert_eq!(events_until_marker(&mut c, &mut sub), want);
    s.shutdown().unwrap();
}

#[test]
fn expiry_publishes_expired() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--notify-keyspace-events", "Ex"]);
    let mut sub = Client::connect(s.local_addr());
    let mut c = Client::connect(s.local_addr());
    subscriber(&mut sub);
    // Active expiry: nobody reads the key.
    c.q(&["SET", "a", "1", "PX", "30"]);
    assert_eq!(next_event(&mut sub), ev("__keyevent@0__:expired", "a"));
    // Lazy expiry (or the cycle, whichever comes first): one `expired`, before the marker.
    c.q(&["SET", "b", "1", "PX", "5"]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.q(&["GET", "b"]), V::NilBulk);
    assert_eq!(
        events_until_marker(&mut c, &mut sub),
        vec![ev("__keyevent@0__:expired", "b")]
    );
    s.shutdown().unwrap();
}

#[test]
fn new_and_keymiss_classes() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut sub = Client::connect(s.local_addr());
    let mut c = Client::connect(s.local_addr());
    subscriber(&mut sub);
    assert_eq!(
        c.q(&["CONFIG", "SET", "notify-keyspace-events", "nmE$"]),
        V::ok()
    );
    assert_eq!(
        c.q(&["CONFIG", "GET", "notify-keyspace-events"]),
        V::arr(&["notify-keyspace-events", "$nEm"])
    );
    c.q(&["SET", "k", "1"]);
    c.q(&["SET", "k", "2"]);
    c.q(&["GET", "nosuch"]);
    c.q(&["MSET", "k", "3", "k2", "4"]);
    assert_eq!(
        events_until_marker(&mut c, &mut sub),
        vec![
            ev("__keyevent@0__:new", "k"),
            ev("__keyevent@0__:set", "k"),
            ev("__keyevent@0__:set", "k"),
            ev("__keyevent@0__:keymiss", "nosuch"),
            // A known difference: `new` goes out as the store applies the write, so a
            // multi-key write's `new` events precede its own (Redis: `set k`, `new k2`).
            ev("__keyevent@0__:new", "k2"),
            ev("__keyevent@0__:set", "k"),
            ev("__keyevent@0__:set", "k2"),
        ]
    );
    assert_eq!(
        c.q(&["CONFIG", "SET", "notify-keyspace-events", "KEx?"]),
        V::err(
            "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - \
             Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
        )
    );
    s.shutdown().unwrap();
}

#[test]
fn nothing_is_published_when_off() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--notify-keyspace-events", "KEA"]);
    let mut sub = Client::connect(s.local_addr());
    let mut c = Client::connect(s.local_addr());
    subscriber(&mut sub);
    assert_eq!(
        c.q(&["CONFIG", "SET", "notify-keyspace-events", ""]),
        V::ok()
    );
    c.q(&["SET", "k", "1"]);
    c.q(&["LPUSH", "l", "1"]);
    c.q(&["DEL", "k", "l"]);
    assert_eq!(events_until_marker(&mut c, &mut sub), vec![]);
    // Classes without K or E publish nothing either, as in Redis.
    assert_eq!(
        c.q(&["CONFIG", "SET", "notify-keyspace-events", "g$"]),
        V::ok()
    );
    c.q(&["SET", "k", "1"]);
    assert_eq!(events_until_marker(&mut c, &mut sub), vec![]);
    s.shutdown().unwrap();
}
