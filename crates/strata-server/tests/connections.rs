//! Connections over TCP, in-process on an ephemeral port: pipelining, authentication and
//! its limits for unauthenticated clients, maxclients, idle timeout and SHUTDOWN. Protocol
//! errors, hostile lengths and buffer limits: `abuse.rs`.

mod common;

use common::{encode, start, Client, V};
use std::net::TcpStream;
use std::time::Duration;

fn int(n: i64) -> V {
    V::Int(n)
}

#[test]
fn pipelining_a_thousand_commands_in_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let mut batch = Vec::new();
    for i in 0..1000 {
        let k = format!("k{i}");
        batch.extend(encode(&[b"SET", k.as_bytes(), i.to_string().as_bytes()]));
        batch.extend(encode(&[b"GET", k.as_bytes()]));
        batch.extend(b"INCR k0\r\n"); // inline commands mix with multibulk ones
    }
    c.send(&batch);
    for i in 0..1000 {
        assert_eq!(c.read(), V::ok());
        let want = if i == 0 { 0 } else { i };
        assert_eq!(c.read(), V::bulk(&want.to_string()), "GET k{i}");
        assert_eq!(c.read(), int(i + 1));
    }
    assert_eq!(c.q(&["DBSIZE"]), int(1000));
    s.shutdown().unwrap();
}

#[test]
fn authentication_and_unauthenticated_limits() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--requirepass", "s3cret"]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(
        c.q(&["GET", "k"]),
        V::err("NOAUTH Authentication required.")
    );
    assert_eq!(
        c.q(&["nosuch"]),
        V::err("ERR unknown command 'nosuch', with args beginning with: "),
        "lookup comes before authentication"
    );
    assert_eq!(
        c.q(&["GET"]),
        V::err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.q(&["AUTH", "wrong"]),
        V::err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(
        c.q(&["HELLO", "3"]),
        V::err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time"
        )
    );
    assert_eq!(c.q(&["PING"]), V::err("NOAUTH Authentication required."));
    // Limits before authentication: 10 arguments, 16 KB each.
    let mut d = Client::connect(s.local_addr());
    d.send(b"*11\r\n");
    assert_eq!(
        d.read(),
        V::err("ERR Protocol error: unauthenticated multibulk length")
    );
    assert!(d.closed());
    let mut d = Client::connect(s.local_addr());
    d.send(b"*2\r\n$4\r\nECHO\r\n$16385\r\n");
    assert_eq!(
        d.read(),
        V::err("ERR Protocol error: unauthenticated bulk length")
    );
    assert!(d.closed());
    let mut d = Client::connect(s.local_addr());
    let big = "x".repeat(16384);
    assert_eq!(
        d.q(&["AUTH", &big]),
        V::err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    // After AUTH (even within one pipeline) the limits are lifted.
    assert_eq!(c.q(&["AUTH", "s3cret"]), V::ok());
    let args: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let mut mset = vec!["MSET"];
    for a in &args {
        mset.push(a);
        mset.push(a);
    }
    assert_eq!(c.q(&mset), V::ok());
    let big = "y".repeat(100_000);
    assert_eq!(c.q(&["SET", "big", &big]), V::ok());
    let mut e = Client::connect(s.local_addr());
    let mut pipe = b"AUTH s3cret\r\n".to_vec();
    pipe.extend(encode(&[b"ECHO", big.as_bytes()]));
    e.send(&pipe);
    assert_eq!(e.read(), V::ok());
    assert_eq!(e.read(), V::bulk(&big));
    // HELLO AUTH authenticates and switches protocol at once.
    let mut h = Client::connect(s.local_addr());
    assert!(matches!(
        h.q(&["HELLO", "3", "AUTH", "default", "s3cret"]),
        V::Map(_)
    ));
    assert_eq!(h.q(&["GET", "nokey"]), V::Null);
    assert_eq!(c.q(&["CONFIG", "SET", "requirepass", ""]), V::ok());
    let mut f = Client::connect(s.local_addr());
    assert_eq!(f.q(&["GET", "k1"]), V::bulk("k1"));
    s.shutdown().unwrap();
}

#[test]
fn maxclients_refuses_with_redis_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--maxclients", "2"]);
    let mut a = Client::connect(s.local_addr());
    let mut b = Client::connect(s.local_addr());
    assert_eq!(a.q(&["PING"]), V::Simple("PONG".into()));
    assert_eq!(b.q(&["PING"]), V::Simple("PONG".into()));
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.read(), V::err("ERR max number of clients reached"));
    assert!(c.closed());
    drop(b);
    // The slot is freed once the server sees the close.
    let mut ok = false;
    for _ in 0..100 {
        let mut d = Client::connect(s.local_addr());
        d.send(b"PING\r\n");
        if d.read() == V::Simple("PONG".into()) {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ok);
    let V::Bulk(info) = a.q(&["INFO", "stats"]) else {
        panic!()
    };
    assert!(String::from_utf8(info)
        .unwrap()
        .contains("rejected_connections:"));
    s.shutdown().unwrap();
}

#[test]
fn shutdown_command_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["SET", "k", "v"]), V::ok());
    assert_eq!(c.q(&["SHUTDOWN", "foo"]), V::err("ERR syntax error"));
    c.send(b"SHUTDOWN NOSAVE\r\n");
    assert!(c.closed(), "SHUTDOWN closes without a reply");
    s.wait().unwrap();
    assert!(
        TcpStream::connect(addr).is_err(),
        "nothing listens any more"
    );
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
    s.shutdown().unwrap();
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--timeout", "1"]);
    let mut idle = Client::connect(s.local_addr());
    let mut busy = Client::connect(s.local_addr());
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(busy.q(&["PING"]), V::Simple("PONG".into()));
    }
    assert!(idle.closed(), "idle for 1.5 s with timeout 1");
    assert_eq!(busy.q(&["CONFIG", "SET", "timeout", "0"]), V::ok());
    s.shutdown().unwrap();
}
