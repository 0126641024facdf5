//! `min-replicas-to-write` / `min-replicas-max-lag` on a master followed by a scripted
//! replica: writes (and an EXEC of writes) refused with Redis's `-NOREPLICAS` while too few
//! replicas ACKed within the lag, accepted once one does, refused again when its ACKs stop;
//! INFO's `min_slaves_good_slaves` follows; CONFIG SET turns the check off.

mod common;

use common::{start, Client, V};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

fn send(s: &mut TcpStream, argv: &[&str]) {
    s.write_all(&common::encode(
        &argv.iter().map(|a| a.as_bytes()).collect::<Vec<_>>(),
    ))
    .unwrap();
}

/// A replica that full-syncs from disk and then ACKs when told; returns the stream's
/// offset after the payload.
fn replica(addr: std::net::SocketAddr) -> (BufReader<TcpStream>, u64) {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut r = BufReader::new(s);
    let line = |r: &mut BufReader<TcpStream>| loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        assert!(!l.is_empty(), "the master closed the link");
        if l != "\n" {
            return l.trim_end().to_string();
        }
    };
    send(r.get_mut(), &["REPLCONF", "listening-port", "7001"]);
    assert_eq!(line(&mut r), "+OK");
    send(r.get_mut(), &["PSYNC", "?", "-1"]);
    let full = line(&mut r);
    let off: u64 = full.rsplit(' ').next().unwrap().parse().unwrap();
    let n: usize = line(&mut r).strip_prefix('$').unwrap().parse().unwrap();
    let mut rdb = vec![0; n];
    r.read_exact(&mut rdb).unwrap();
    (r, off)
}

fn info_field(c: &mut Client, name: &str) -> Option<String> {
    let V::Bulk(b) = c.q(&["INFO", "replication"]) else {
        panic!("INFO")
    };
    String::from_utf8(b)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn writes_need_enough_good_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[
            "--repl-diskless-sync",
            "no",
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            "1",
        ],
    );
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.q(&["SET", "k", "1"]), V::err(NOREPLICAS));
    assert_eq!(c.q(&["GET", "k"]), V::NilBulk);
    assert_eq!(c.q(&["MULTI"]), V::ok());
    assert_eq!(c.q(&["INCR", "k"]), V::err(NOREPLICAS));
    assert_eq!(
        c.q(&["EXEC"]),
        V::err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(
        info_field(&mut c, "min_slaves_good_slaves").as_deref(),
        Some("0")
    );

    // A replica online that ACKed within the lag: writes go.
    let (mut r, off) = replica(server.local_addr());
    send(r.get_mut(), &["REPLCONF", "ACK", &off.to_string()]);
    wait_until("a good replica", || {
        info_field(&mut c, "min_slaves_good_slaves").as_deref() == Some("1")
    });
    assert_eq!(c.q(&["SET", "k", "1"]), V::ok());
    assert_eq!(c.q(&["MULTI"]), V::ok());
    assert_eq!(c.q(&["INCR", "k"]), V::Simple("QUEUED".into()));
    assert_eq!(c.q(&["EXEC"]), V::Array(vec![V::Int(2)]));

    // Its ACKs stop: after more than the lag it is no longer good.
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        info_field(&mut c, "min_slaves_good_slaves").as_deref(),
        Some("0")
    );
    assert_eq!(c.q(&["DEL", "k"]), V::err(NOREPLICAS));
    assert_eq!(c.q(&["GET", "k"]), V::bulk("2"));
    send(r.get_mut(), &["REPLCONF", "ACK", &off.to_string()]);
    wait_until("the replica good again", || {
        info_field(&mut c, "min_slaves_good_slaves").as_deref() == Some("1")
    });
    assert_eq!(c.q(&["DEL", "k"]), V::Int(1));

    // Off: either directive at 0.
    assert_eq!(
        c.q(&["CONFIG", "SET", "min-replicas-max-lag", "0"]),
        V::ok()
    );
    assert_eq!(info_field(&mut c, "min_slaves_good_slaves"), None);
    drop(r);
    wait_until("the replica gone", || {
        info_field(&mut c, "connected_slaves").as_deref() == Some("0")
    });
    assert_eq!(c.q(&["SET", "k", "3"]), V::ok());
    assert_eq!(
        c.q(&["CONFIG", "SET", "min-replicas-max-lag", "10"]),
        V::ok()
    );
    assert_eq!(c.q(&["SET", "k", "4"]), V::err(NOREPLICAS));
    assert_eq!(c.q(&["CONFIG", "SET", "min-slaves-to-write", "0"]), V::ok());
    assert_eq!(c.q(&["SET", "k", "4"]), V::ok());
}
