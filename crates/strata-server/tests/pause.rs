//! CLIENT PAUSE and CLIENT UNPAUSE over TCP: WRITE holds writes (and an EXEC of writes,
//! PUBLISH) while reads go on, ALL holds everything, UNPAUSE and the timeout release the
//! held commands in order, and the errors are Redis's.

mod common;

use common::{encode, start, Client, V};
use std::time::{Duration, Instant};

#[test]
fn write_pause_holds_writes_not_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut admin = Client::connect(s.local_addr());
    let mut c = Client::connect(s.local_addr());
    c.q(&["SET", "k", "1"]);
    assert_eq!(admin.q(&["CLIENT", "PAUSE", "400", "WRITE"]), V::ok());
    let t = Instant::now();
    // Reads run at once.
    assert_eq!(c.q(&["GET", "k"]), V::bulk("1"));
    assert!(t.elapsed() < Duration::from_millis(300));
    // A pipelined read answers before the write behind it waits for the pause to end.
    c.send(&[encode(&[b"GET", b"k"]), encode(&[b"INCR", b"k"])].concat());
    assert_eq!(c.read(), V::bulk("1"));
    assert!(t.elapsed() < Duration::from_millis(300));
    assert_eq!(c.read(), V::Int(2));
    assert!(
        t.elapsed() >= Duration::from_millis(350),
        "{:?}",
        t.elapsed()
    );
    s.shutdown().unwrap();
}

#[test]
fn all_holds_reads_until_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut admin = Client::connect(s.local_addr());
    let mut c = Client::connect(s.local_addr());
    assert_eq!(admin.q(&["CLIENT", "PAUSE", "300"]), V::ok()); // ALL by default
    let t = Instant::now();
    assert_eq!(c.q(&["GET", "k"]), V::NilBulk);
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    // A client held by a long pause does not keep the server from stopping.
    assert_eq!(admin.q(&["CLIENT", "PAUSE", "100000"]), V::ok());
    c.send(&encode(&[b"GET", b"k"]));
    std::thread::sleep(Duration::from_millis(50));
    s.shutdown().unwrap();
}

#[test]
fn unpause_releases_a_held_exec_and_publish() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut admin = Client::connect(s.local_addr());
    let mut c = Client::connect(s.local_addr());
    assert_eq!(admin.q(&["CLIENT", "PAUSE", "100000", "WRITE"]), V::ok());
    let t = Instant::now();
    assert_eq!(c.q(&["MULTI"]), V::ok());
    assert_eq!(
        c.q(&["SET", "k", "v"]),
        V::Simple("QUEUED".into()),
        "queueing is not held"
    );
    c.send(&[encode(&[b"EXEC"]), encode(&[b"PUBLISH", b"ch", b"m"])].concat());
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(admin.q(&["GET", "k"]), V::NilBulk, "the EXEC has not run");
    assert_eq!(admin.q(&["CLIENT", "UNPAUSE"]), V::ok());
    assert_eq!(c.read(), V::Array(vec![V::ok()]));
    assert_eq!(c.read(), V::Int(0));
    assert!(t.elapsed() >= Duration::from_millis(150));
    assert!(t.elapsed() < Duration::from_secs(10));
    s.shutdown().unwrap();
}

#[test]
fn pause_errors_are_redis_texts() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    for (args, want) in [
        (
            &["CLIENT", "PAUSE", "abc"][..],
            "ERR timeout is not an integer or out of range",
        ),
        (&["CLIENT", "PAUSE", "-1"][..], "ERR timeout is negative"),
        (
            &["CLIENT", "PAUSE", "10", "foo"][..],
            "ERR CLIENT PAUSE mode must be WRITE or ALL",
        ),
        (
            &["CLIENT", "UNPAUSE", "x"][..],
            "ERR wrong number of arguments for 'client|unpause' command",
        ),
    ] {
        assert_eq!(c.q(args), V::err(want), "{args:?}");
    }
    assert_eq!(c.q(&["CLIENT", "PAUSE", "1", "all"]), V::ok());
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.q(&["PING"]), V::Simple("PONG".into()));
    s.shutdown().unwrap();
}
