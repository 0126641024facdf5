//! Protocol abuse: every case of Redis's `tests/unit/protocol.tcl` (empty and negative
//! counts, out-of-range, negative and non-numeric lengths, a missing `$`, unbalanced quotes,
//! the three desync streams, a request of 20002 arguments), plus oversized inline requests,
//! the query buffer limit, a half-sent request under `timeout`, and hostile announced lengths
//! that must cost the server no memory. After each case the offending client alone is
//! affected: another client is served, and (for a spawned server) its RSS stays bounded.
//! Authentication limits (CVE-2021-32675) and `maxclients` are in `connections.rs`.

mod common;

use common::{encode, spawn_binary, start, Client, V};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn pong() -> V {
    V::Simple("PONG".into())
}

/// What a case expects after its input.
enum Then {
    /// These replies, then the connection stays open (a PING is answered).
    Open(Vec<V>),
    /// This error reply, then the server closes the connection.
    Closed(&'static str),
}

fn cases() -> Vec<(&'static str, Vec<u8>, Then)> {
    let perr = |s: &'static str| Then::Closed(s);
    vec![
        ("empty query", b"\r\n".to_vec(), Then::Open(vec![])),
        (
            "negative multibulk length",
            b"*-10\r\n".to_vec(),
            Then::Open(vec![]),
        ),
        (
            "zero multibulk length",
            b"*0\r\n".to_vec(),
            Then::Open(vec![]),
        ),
        (
            "out of range multibulk length",
            b"*3000000000\r\n".to_vec(),
            perr("ERR Protocol error: invalid multibulk length"),
        ),
        (
            "multibulk length just over the limit",
            b"*1048577\r\n".to_vec(),
            perr("ERR Protocol error: invalid multibulk length"),
        ),
        (
            "multibulk length of 20 million",
            b"*20000000\r\n".to_vec(),
            perr("ERR Protocol error: invalid multibulk length"),
        ),
        (
            "non-numeric multibulk length",
            b"*x\r\n".to_vec(),
            perr("ERR Protocol error: invalid multibulk length"),
        ),
        (
            "wrong multibulk payload header",
            b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n".to_vec(),
            perr("ERR Protocol error: expected '$', got 'f'"),
        ),
        (
            "negative multibulk payload length",
            b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n".to_vec(),
            perr("ERR Protocol error: invalid bulk length"),
        ),
        (
            "bulk length -1 in a request",
            b"*1\r\n$-1\r\n".to_vec(),
            perr("ERR Protocol error: invalid bulk length"),
        ),
        (
            "out of range multibulk payload length",
            b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n".to_vec(),
            perr("ERR Protocol error: invalid bulk length"),
        ),
        (
            "bulk length just over proto-max-bulk-len",
            b"*1\r\n$536870913\r\n".to_vec(),
            perr("ERR Protocol error: invalid bulk length"),
        ),
        (
            "non-number multibulk payload length",
            b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n".to_vec(),
            perr("ERR Protocol error: invalid bulk length"),
        ),
        (
            "multi bulk request not followed by bulk arguments",
            b"*1\r\nfoo\r\n".to_vec(),
            perr("ERR Protocol error: expected '$', got 'f'"),
        ),
        (
            "generic wrong number of args",
            b"ping x y z\r\n".to_vec(),
            Then::Open(vec![V::err(
                "ERR wrong number of arguments for 'ping' command",
            )]),
        ),
        (
            "unbalanced number of quotes",
            b"set \"\"\"test-key\"\"\" test-value\r\nping\r\n".to_vec(),
            perr("ERR Protocol error: unbalanced quotes in request"),
        ),
        (
            "empty bulk as the command name",
            b"*1\r\n$0\r\n\r\n".to_vec(),
            Then::Open(vec![V::err(
                "ERR unknown command '', with args beginning with: ",
            )]),
        ),
        (
            "a bulk header sent as an inline command",
            b"$5\r\n".to_vec(),
            Then::Open(vec![V::err(
                "ERR unknown command '$5', with args beginning with: ",
            )]),
        ),
    ]
}

fn run_case(addr: SocketAddr, name: &str, input: &[u8], then: &Then) {
    let mut c = Client::connect(addr);
    // Commands before the bad request are answered first.
    c.send(b"PING\r\n");
    c.send(input);
    assert_eq!(c.read(), pong(), "{name}");
    match then {
        Then::Open(replies) => {
            for r in replies {
                assert_eq!(&c.read(), r, "{name}");
            }
            assert_eq!(c.q(&["PING"]), pong(), "{name}: still open");
        }
        Then::Closed(err) => {
            assert_eq!(c.read(), V::err(err), "{name}");
            assert!(c.closed(), "{name}: the connection must be closed");
        }
    }
}

#[test]
fn redis_protocol_cases_affect_only_their_client() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut other = Client::connect(s.local_addr());
    assert_eq!(other.q(&["SET", "k", "v"]), V::ok());
    for (name, input, then) in cases() {
        run_case(s.local_addr(), name, &input, &then);
        assert_eq!(other.q(&["GET", "k"]), V::bulk("v"), "after {name}");
    }
    // One byte at a time is still one request.
    let mut c = Client::connect(s.local_addr());
    for b in encode(&[b"ECHO", b"split"]) {
        c.send(&[b]);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(c.read(), V::bulk("split"));
    s.shutdown().unwrap();
}

/// Redis's "Protocol desync regression test" #1..#3: a stream of 1 KB lines after a NUL
/// (Redis looks for the newline with `strchr`, so the NUL hides it) must end in a protocol
/// error and a close, not in a buffer that grows forever.
#[test]
fn desync_streams_end_in_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut other = Client::connect(s.local_addr());
    let seqs: [(&[u8], &str); 3] = [
        (b"\x00", "too big inline request"),
        (b"*\x00", "too big mbulk count string"),
        (b"$\x00", "too big inline request"),
    ];
    let mut payload = vec![b'A'; 1024];
    payload.push(b'\n');
    for (seq, want) in seqs {
        let mut sock = TcpStream::connect(s.local_addr()).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        sock.write_all(seq).unwrap();
        let start = Instant::now();
        let mut sent = 0usize;
        while sock.write_all(&payload).is_ok() {
            sent += payload.len();
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{seq:?}: not closed after {sent} bytes"
            );
            if sent > 64 << 20 {
                break;
            }
        }
        let mut reply = Vec::new();
        let _ = sock.read_to_end(&mut reply);
        let text = String::from_utf8_lossy(&reply);
        assert!(
            text.starts_with(&format!("-ERR Protocol error: {want}\r\n")),
            "{seq:?}: got {text:?} after {sent} bytes"
        );
        assert_eq!(other.q(&["PING"]), pong());
    }
    s.shutdown().unwrap();
}

/// Redis's "test large number of args": MSET of 10001 pairs.
#[test]
fn a_request_of_twenty_thousand_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let mut args: Vec<&str> = vec!["MSET"];
    for _ in 0..10000 {
        args.extend(["k", "v"]);
    }
    args.extend(["{k}2", "v2"]);
    assert_eq!(c.q(&args), V::ok());
    assert_eq!(c.q(&["GET", "{k}2"]), V::bulk("v2"));
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
    s.shutdown().unwrap();
}

#[test]
fn oversized_inline_request_and_query_buffer_limit() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--client-query-buffer-limit", "1mb"]);
    let mut other = Client::connect(s.local_addr());
    // A long inline request without a newline.
    let mut c = Client::connect(s.local_addr());
    c.send(&vec![b'a'; 64 * 1024 + 1]);
    assert_eq!(
        c.read(),
        V::err("ERR Protocol error: too big inline request")
    );
    assert!(c.closed());
    assert_eq!(other.q(&["PING"]), pong());
    // A 2 MB argument is within proto-max-bulk-len but over the query buffer limit: closed
    // without a reply, as Redis's "closing client that reached max query buffer length".
    let mut c = Client::connect(s.local_addr());
    c.send(b"*2\r\n$4\r\nECHO\r\n$2097152\r\n");
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..32 {
        if c.try_send(&chunk).is_err() {
            break;
        }
    }
    assert!(c.closed());
    assert_eq!(other.q(&["PING"]), pong());
    s.shutdown().unwrap();
}

/// A client that sends half a request and waits is closed by `timeout` like an idle one; a
/// client that keeps talking is not.
#[test]
fn half_a_request_then_silence_is_closed_by_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--timeout", "1"]);
    let mut half = Client::connect(s.local_addr());
    half.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc");
    let mut busy = Client::connect(s.local_addr());
    let started = Instant::now();
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(busy.q(&["PING"]), pong());
    }
    assert!(
        half.closed(),
        "half a request and 2 s of silence with timeout 1"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // The half-sent SET never ran.
    assert_eq!(busy.q(&["EXISTS", "k"]), V::Int(0));
    s.shutdown().unwrap();
}

/// Hostile announcements against a spawned server, watching its RSS: clients that announce
/// a million arguments or a 512 MB bulk and send nothing more (or a little) must not make the
/// server allocate what they announced, and the bad-length cases repeated many times leave no
/// memory behind.
#[test]
fn announced_lengths_cost_no_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = spawn_binary(dir.path(), &["--shards", "2"]);
    let pid = child.id();
    let mut other = Client::connect(addr);
    for i in 0..100 {
        assert_eq!(other.q(&["SET", &format!("k{i}"), "v"]), V::ok());
    }
    // Warm up: one round of every case, so allocator pools and task slabs exist.
    for (name, input, then) in cases() {
        run_case(addr, name, &input, &then);
    }
    let base = common::rss_bytes(pid);
    let mut hostile = Vec::new();
    for i in 0..50 {
        let mut c = TcpStream::connect(addr).unwrap();
        let announce: &[u8] = match i % 3 {
            0 => b"*1048576\r\n",
            1 => b"*1048576\r\n$536870912\r\n",
            _ => b"*2\r\n$3\r\nGET\r\n$536870912\r\nsome",
        };
        c.write_all(announce).unwrap();
        hostile.push(c);
    }
    // Every hostile client is registered before measuring.
    assert_eq!(other.q(&["PING"]), pong());
    std::thread::sleep(Duration::from_millis(300));
    let held = common::rss_bytes(pid);
    assert!(
        held < base + (8 << 20),
        "50 clients announcing 1M arguments or 512 MB bulks: RSS {base} -> {held}"
    );
    drop(hostile);
    for _ in 0..20 {
        for (name, input, then) in cases() {
            run_case(addr, name, &input, &then);
        }
    }
    let after = common::rss_bytes(pid);
    assert!(
        after < base + (8 << 20),
        "360 protocol errors later: RSS {base} -> {after}"
    );
    eprintln!("rss base {base} held {held} after {after}");
    assert_eq!(other.q(&["GET", "k99"]), V::bulk("v"));
    drop(other);
    child.kill().unwrap();
    let _ = child.wait();
}
