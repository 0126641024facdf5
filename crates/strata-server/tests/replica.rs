//! Strata as a replica of a scripted master on a loopback socket: the handshake it sends,
//! both payload forms, the stream applied with its offsets (ACK on GETACK), the refusals,
//! a command that fails stopping replication, and a corrupt RDB leaving the data as it was.
//! The real redis-server master is `tests/redis/test_replica.py`.

mod common;

use common::{start, Client, V};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};
use strata_server::rdb::crc64::crc64;

const REPLID: &str = "0123456789abcdef0123456789abcdef01234567";

/// A minimal RDB 10: `pre` = "loaded" in db 0, list `l` = [a, b] in db 1.
fn rdb(good_crc: bool) -> Vec<u8> {
    let mut f = b"REDIS0010".to_vec();
    f.extend_from_slice(&[0xfa, 9]);
    f.extend_from_slice(b"redis-ver");
    f.extend_from_slice(&[6]);
    f.extend_from_slice(b"7.0.15");
    f.extend_from_slice(&[0xfe, 0, 0, 3]);
    f.extend_from_slice(b"pre");
    f.push(6);
    f.extend_from_slice(b"loaded");
    f.extend_from_slice(&[0xfe, 1, 1, 1, b'l', 2, 1, b'a', 1, b'b', 0xff]);
    let crc = crc64(&f) ^ u64::from(!good_crc);
    f.extend_from_slice(&crc.to_le_bytes());
    f
}

fn resp(argv: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// The master's side of one connection.
struct Peer {
    r: BufReader<TcpStream>,
}

impl Peer {
    fn accept(l: &TcpListener) -> Peer {
        let (s, _) = l.accept().expect("the replica connects");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Peer {
            r: BufReader::new(s),
        }
    }

    /// One multibulk request from the replica, as strings.
    fn request(&mut self) -> Vec<String> {
        let mut line = String::new();
        // A replica sends a newline every second while it loads (Redis's keepalive).
        while line.trim_end().is_empty() {
            line.clear();
            let n = self.r.read_line(&mut line).expect("request");
            assert!(n > 0, "the replica closed the connection");
        }
        let n: usize = line
            .trim_end()
            .trim_start_matches('*')
            .parse()
            .expect("count");
        (0..n)
            .map(|_| {
                let mut len = String::new();
                self.r.read_line(&mut len).expect("length");
                let len: usize = len.trim_end().trim_start_matches('$').parse().expect("len");
                let mut b = vec![0; len + 2];
                self.r.read_exact(&mut b).expect("bulk");
                b.truncate(len);
                String::from_utf8(b).expect("utf-8")
            })
            .collect()
    }

    fn send(&mut self, b: &[u8]) {
        self.r.get_mut().write_all(b).expect("send");
    }

    /// Answers the handshake and returns the PSYNC arguments.
    fn handshake(&mut self) -> Vec<String> {
        assert_eq!(self.request(), ["PING"]);
        self.send(b"+PONG\r\n");
        let port = self.request();
        assert_eq!(port[..2], ["REPLCONF", "listening-port"]);
        self.send(b"+OK\r\n");
        // A Strata replica also announces the snapshot stream; this scripted master, like
        // redis-server, ignores it and sends an RDB.
        assert_eq!(
            self.request(),
            [
                "REPLCONF",
                "capa",
                "eof",
                "capa",
                "psync2",
                "capa",
                "strata-snapshot"
            ]
        );
        self.send(b"+OK\r\n");
        let psync = self.request();
        assert_eq!(psync[0], "PSYNC");
        psync
    }

    /// Reads requests until `REPLCONF ACK <offset>`, skipping ACKs of other offsets.
    fn wait_ack(&mut self, offset: u64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let req = self.request();
            assert_eq!(req[..2], ["REPLCONF", "ACK"], "{req:?}");
            if req[2] == offset.to_string() {
                return;
            }
        }
        panic!("no ACK of {offset}");
    }
}

fn info_field(c: &mut Client, name: &str) -> Option<String> {
    let V::Bulk(text) = c.q(&["INFO", "replication"]) else {
        panic!("INFO")
    };
    String::from_utf8(text).unwrap().lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::to_string)
    })
}

fn wait_field(c: &mut Client, name: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if info_field(c, name).as_deref() == Some(want) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{name} never became {want}: {:?}", info_field(c, name));
}

#[test]
fn full_sync_then_stream_with_offsets_and_acks() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let master = TcpListener::bind("127.0.0.1:0").unwrap();
    let mport = master.local_addr().unwrap().port().to_string();
    let mut c = Client::connect(server.local_addr());
    c.q(&["SET", "old", "replaced by the sync"]);
    assert_eq!(c.q(&["REPLICAOF", "127.0.0.1", &mport]), V::ok());
    assert_eq!(
        c.q(&["REPLICAOF", "127.0.0.1", &mport]),
        V::Simple("OK Already connected to specified master".into())
    );
    let mut m = Peer::accept(&master);
    assert_eq!(m.handshake(), ["PSYNC", "?", "-1"]);
    // Keepalive newlines before the payload, then the diskless form.
    m.send(format!("+FULLRESYNC {REPLID} 100\r\n\n\n").as_bytes());
    let mark = "m".repeat(40);
    m.send(format!("$EOF:{mark}\r\n").as_bytes());
    m.send(&rdb(true));
    m.send(mark.as_bytes());
    m.wait_ack(100);
    wait_field(&mut c, "master_link_status", "up");
    assert_eq!(info_field(&mut c, "master_replid").as_deref(), Some(REPLID));
    assert_eq!(c.q(&["GET", "pre"]), V::bulk("loaded"));
    assert_eq!(c.q(&["GET", "old"]), V::NilBulk);
    // The stream: SELECT, a write, PING, MULTI/EXEC, then GETACK (counted before the ACK).
    let mut stream = Vec::new();
    for cmd in [
        &["SELECT", "1"][..],
        &["RPUSH", "l", "c"],
        &["PING"],
        &["MULTI"],
        &["SET", "x", "1"],
        &["INCR", "x"],
        &["EXEC"],
        &["REPLCONF", "GETACK", "*"],
    ] {
        stream.extend_from_slice(&resp(cmd));
    }
    m.send(&stream);
    let offset = 100 + stream.len() as u64;
    m.wait_ack(offset);
    assert_eq!(
        info_field(&mut c, "slave_repl_offset"),
        Some(offset.to_string())
    );
    c.q(&["SELECT", "1"]);
    assert_eq!(c.q(&["LRANGE", "l", "0", "-1"]), V::arr(&["a", "b", "c"]));
    assert_eq!(c.q(&["GET", "x"]), V::bulk("2"));
    assert_eq!(
        c.q(&["SET", "x", "3"]),
        V::err("READONLY You can't write against a read only replica.")
    );
    match c.q(&["ROLE"]) {
        V::Array(r) => {
            assert_eq!(r[0], V::bulk("slave"));
            assert_eq!(r[3], V::bulk("connected"));
            assert_eq!(r[4], V::Int(offset as i64));
        }
        other => panic!("ROLE: {other:?}"),
    }
    // A command that fails here stops replication, loudly.
    m.send(&resp(&["LPUSH", "x", "oops"]));
    wait_field(&mut c, "master_link_status", "down");
    let reason = info_field(&mut c, "master_link_down_reason").expect("a reason");
    assert!(
        reason.contains("LPUSH x oops") && reason.contains("WRONGTYPE"),
        "{reason}"
    );
    // Not retried; REPLICAOF of the same master starts over with a full sync.
    assert_eq!(c.q(&["REPLICAOF", "127.0.0.1", &mport]), V::ok());
    let mut again = Peer::accept(&master);
    assert_eq!(again.handshake(), ["PSYNC", "?", "-1"]);
    drop(again);
    // Promotion keeps the data and takes writes.
    assert_eq!(c.q(&["REPLICAOF", "NO", "ONE"]), V::ok());
    assert_eq!(c.q(&["SET", "x", "3"]), V::ok());
    assert_eq!(c.q(&["LRANGE", "l", "0", "-1"]), V::arr(&["a", "b", "c"]));
    assert_eq!(
        info_field(&mut c, "master_replid2").as_deref(),
        Some(REPLID)
    );
    drop(c);
    server.shutdown().unwrap();
}

/// The stream applied in runs of single-shard requests (`replica/batch.rs`): a request cut
/// at the end of what the master sent waits for its rest, a MULTI sent in two parts applies
/// whole at its EXEC (the offset stays at the MULTI meanwhile), and a request that fails in
/// the middle of a run stops replication with the requests before it applied and none after
/// it, the offset at the failing request.
#[test]
fn a_batched_stream_splits_at_buffer_ends_and_multi_and_stops_at_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let master = TcpListener::bind("127.0.0.1:0").unwrap();
    let mport = master.local_addr().unwrap().port().to_string();
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.q(&["REPLICAOF", "127.0.0.1", &mport]), V::ok());
    let mut m = Peer::accept(&master);
    assert_eq!(m.handshake(), ["PSYNC", "?", "-1"]);
    let file = rdb(true);
    m.send(format!("+FULLRESYNC {REPLID} 100\r\n${}\r\n", file.len()).as_bytes());
    m.send(&file);
    m.wait_ack(100);
    wait_field(&mut c, "master_link_status", "up");
    // Part one: 300 SETs over both shards, a MULTI with one request, and half of the next.
    let mut one = Vec::new();
    for i in 0..300 {
        one.extend_from_slice(&resp(&["SET", &format!("k{i}"), &i.to_string()]));
    }
    let before_multi = 100 + one.len() as u64;
    one.extend_from_slice(&resp(&["MULTI"]));
    one.extend_from_slice(&resp(&["SET", "m", "1"]));
    let incr = resp(&["INCR", "m"]);
    let (head, tail) = incr.split_at(incr.len() / 2);
    one.extend_from_slice(head);
    m.send(&one);
    wait_field(&mut c, "slave_repl_offset", &before_multi.to_string());
    assert_eq!(c.q(&["GET", "k0"]), V::bulk("0"));
    assert_eq!(c.q(&["GET", "k299"]), V::bulk("299"));
    assert_eq!(c.q(&["DBSIZE"]), V::Int(301));
    assert_eq!(c.q(&["GET", "m"]), V::NilBulk);
    // Part two: the rest of the cut request, EXEC, a SET and GETACK.
    let mut two = tail.to_vec();
    two.extend_from_slice(&resp(&["EXEC"]));
    two.extend_from_slice(&resp(&["SET", "after", "x"]));
    two.extend_from_slice(&resp(&["REPLCONF", "GETACK", "*"]));
    m.send(&two);
    let acked = 100 + (one.len() + two.len()) as u64;
    m.wait_ack(acked);
    assert_eq!(c.q(&["GET", "m"]), V::bulk("2"));
    assert_eq!(c.q(&["GET", "after"]), V::bulk("x"));
    // Part three, in one write: two SETs, a request that fails here, two more SETs.
    let mut three = Vec::new();
    three.extend_from_slice(&resp(&["SET", "f1", "1"]));
    three.extend_from_slice(&resp(&["SET", "f2", "2"]));
    let failing_at = acked + three.len() as u64;
    three.extend_from_slice(&resp(&["LPUSH", "k7", "oops"]));
    three.extend_from_slice(&resp(&["SET", "f3", "3"]));
    three.extend_from_slice(&resp(&["SET", "k8", "changed"]));
    m.send(&three);
    wait_field(&mut c, "master_link_status", "down");
    let reason = info_field(&mut c, "master_link_down_reason").expect("a reason");
    assert!(
        reason.contains("LPUSH k7 oops") && reason.contains("WRONGTYPE"),
        "{reason}"
    );
    assert_eq!(
        info_field(&mut c, "slave_repl_offset"),
        Some(failing_at.to_string())
    );
    assert_eq!(c.q(&["GET", "f1"]), V::bulk("1"));
    assert_eq!(c.q(&["GET", "f2"]), V::bulk("2"));
    assert_eq!(c.q(&["GET", "k7"]), V::bulk("7"));
    assert_eq!(c.q(&["GET", "f3"]), V::NilBulk);
    assert_eq!(c.q(&["GET", "k8"]), V::bulk("8"));
    drop(m);
    drop(c);
    server.shutdown().unwrap();
}

#[test]
fn a_corrupt_rdb_leaves_the_data_and_the_link_retries() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let master = TcpListener::bind("127.0.0.1:0").unwrap();
    let mport = master.local_addr().unwrap().port().to_string();
    let mut c = Client::connect(server.local_addr());
    c.q(&["SET", "mine", "kept"]);
    c.q(&["REPLICAOF", "127.0.0.1", &mport]);
    let mut m = Peer::accept(&master);
    m.handshake();
    let bad = rdb(false);
    m.send(format!("+FULLRESYNC {REPLID} 7\r\n${}\r\n", bad.len()).as_bytes());
    m.send(&bad);
    wait_field(&mut c, "master_link_status", "down");
    let deadline = Instant::now() + Duration::from_secs(20);
    let reason = loop {
        if let Some(r) = info_field(&mut c, "master_link_down_reason") {
            break r;
        }
        assert!(Instant::now() < deadline, "no reason given");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(reason.contains("checksum"), "{reason}");
    assert_eq!(c.q(&["GET", "mine"]), V::bulk("kept"));
    assert_eq!(c.q(&["GET", "pre"]), V::NilBulk);
    // The link tries again; this time the sized payload is good.
    let mut m2 = Peer::accept(&master);
    assert_eq!(m2.handshake(), ["PSYNC", "?", "-1"]);
    let good = rdb(true);
    m2.send(format!("+FULLRESYNC {REPLID} 7\r\n${}\r\n", good.len()).as_bytes());
    m2.send(&good);
    m2.wait_ack(7);
    wait_field(&mut c, "master_link_status", "up");
    assert_eq!(c.q(&["GET", "pre"]), V::bulk("loaded"));
    assert_eq!(c.q(&["GET", "mine"]), V::NilBulk);
    // A dropped link resumes with a partial resync from the next offset.
    drop(m2);
    let mut m3 = Peer::accept(&master);
    assert_eq!(m3.handshake(), ["PSYNC", REPLID, "8"]);
    m3.send(b"+CONTINUE\r\n");
    let mut sent = resp(&["SET", "after", "continue"]);
    sent.extend_from_slice(&resp(&["SELECT", "3"]));
    m3.send(&sent);
    let mut offset = 7 + sent.len() as u64;
    m3.wait_ack(offset);
    assert_eq!(c.q(&["GET", "after"]), V::bulk("continue"));
    // The link's client: CLIENT LIST TYPE master shows it (flag M); killing it makes the
    // link resync, partially, in the database the stream had selected.
    let V::Bulk(list) = c.q(&["CLIENT", "LIST", "TYPE", "master"]) else {
        panic!("CLIENT LIST")
    };
    let list = String::from_utf8(list).unwrap();
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(
        list.contains(" flags=M ") && list.contains(" db=3 "),
        "{list}"
    );
    assert_eq!(c.q(&["CLIENT", "KILL", "TYPE", "master"]), V::Int(1));
    let mut m4 = Peer::accept(&master);
    let from = (offset + 1).to_string();
    assert_eq!(m4.handshake(), ["PSYNC", REPLID, from.as_str()]);
    m4.send(b"+CONTINUE\r\n");
    let set = resp(&["SET", "in3", "yes"]);
    m4.send(&set);
    offset += set.len() as u64;
    m4.wait_ack(offset);
    // A link dropped inside MULTI: the next resync starts at the MULTI.
    m4.send(&[resp(&["MULTI"]), resp(&["SET", "t", "1"])].concat());
    std::thread::sleep(Duration::from_millis(300));
    drop(m4);
    let mut m5 = Peer::accept(&master);
    let from = (offset + 1).to_string();
    assert_eq!(m5.handshake(), ["PSYNC", REPLID, from.as_str()]);
    m5.send(b"+CONTINUE\r\n");
    let tx = [resp(&["MULTI"]), resp(&["SET", "t", "1"]), resp(&["EXEC"])].concat();
    m5.send(&tx);
    m5.wait_ack(offset + tx.len() as u64);
    c.q(&["SELECT", "3"]);
    assert_eq!(c.q(&["GET", "in3"]), V::bulk("yes"));
    assert_eq!(c.q(&["GET", "t"]), V::bulk("1"));
    drop(c);
    server.shutdown().unwrap();
}

#[test]
fn replicaof_in_the_configuration_follows_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let master = TcpListener::bind("127.0.0.1:0").unwrap();
    let mport = master.local_addr().unwrap().port().to_string();
    let server = start(dir.path(), &["--replicaof", "127.0.0.1", &mport]);
    let mut m = Peer::accept(&master);
    assert_eq!(m.handshake(), ["PSYNC", "?", "-1"]);
    let mut c = Client::connect(server.local_addr());
    let shown = format!("127.0.0.1 {mport}");
    assert_eq!(
        c.q(&["CONFIG", "GET", "replicaof"]),
        V::arr(&["replicaof", &shown])
    );
    assert_eq!(
        c.q(&["CONFIG", "SET", "replicaof", "127.0.0.1 1"]),
        V::err(
            "ERR CONFIG SET failed (possibly related to argument 'replicaof') - can't set \
             immutable config"
        )
    );
    assert_eq!(
        c.q(&["SET", "k", "v"]),
        V::err("READONLY You can't write against a read only replica.")
    );
    assert_eq!(c.q(&["REPLICAOF", "NO", "ONE"]), V::ok());
    assert_eq!(
        c.q(&["CONFIG", "GET", "replicaof"]),
        V::arr(&["replicaof", ""])
    );
    assert_eq!(c.q(&["SET", "k", "v"]), V::ok());
    drop((c, m));
    server.shutdown().unwrap();
}

/// An RDB 10 of `n` strings `<prefix>:<i>` = `<i>` in database 0 (and a trailer whose
/// checksum is right unless `good_crc` is false).
fn big_rdb(prefix: &str, n: usize, good_crc: bool) -> Vec<u8> {
    fn len(out: &mut Vec<u8>, l: usize) {
        if l < 64 {
            out.push(l as u8);
        } else if l < 16384 {
            out.extend_from_slice(&[0x40 | (l >> 8) as u8, l as u8]);
        } else {
            out.push(0x80);
            out.extend_from_slice(&(l as u32).to_be_bytes());
        }
    }
    let mut f = b"REDIS0010".to_vec();
    f.extend_from_slice(&[0xfe, 0]);
    for i in 0..n {
        f.push(0);
        let k = format!("{prefix}:{i}");
        len(&mut f, k.len());
        f.extend_from_slice(k.as_bytes());
        let v = i.to_string();
        len(&mut f, v.len());
        f.extend_from_slice(v.as_bytes());
    }
    f.push(0xff);
    let crc = crc64(&f) ^ u64::from(!good_crc);
    f.extend_from_slice(&crc.to_le_bytes());
    f
}

/// The `strata-server` program over `dir`, its address and its log lines (stderr).
fn spawn_logged(dir: &std::path::Path, extra: &[&str]) -> (Child, SocketAddr, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .args(["--port", "0", "--shards", "2"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strata-server");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("banner");
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let (tx, rx) = channel();
    let err = BufReader::new(child.stderr.take().expect("stderr"));
    std::thread::spawn(move || {
        for l in err.lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split([',', ' ']).next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in the banner {line:?}"));
    (child, addr, rx)
}

fn kill_9(child: &mut Child) {
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
}

/// One request of a scripted stream: its bytes start at `at` (offset after the sync).
struct Req {
    at: u64,
    name: &'static str,
    in_multi: bool,
}

/// A stream of INCR n and MULTI/INCR a/INCR b/EXEC after SELECT 1, its bytes and its
/// requests (with where each starts, from `base`).
fn counter_stream(base: u64, requests: usize) -> (Vec<u8>, Vec<Req>) {
    let mut bytes = Vec::new();
    let mut reqs = Vec::new();
    let mut push = |bytes: &mut Vec<u8>, argv: &[&str], name: &'static str, in_multi| {
        reqs.push(Req {
            at: base + bytes.len() as u64,
            name,
            in_multi,
        });
        bytes.extend_from_slice(&resp(argv));
    };
    push(&mut bytes, &["SELECT", "1"], "select", false);
    for i in 0..requests {
        if i % 5 == 0 {
            push(&mut bytes, &["MULTI"], "multi", false);
            push(&mut bytes, &["INCR", "a"], "a", true);
            push(&mut bytes, &["INCR", "b"], "b", true);
            push(&mut bytes, &["EXEC"], "exec", true);
        } else {
            push(&mut bytes, &["INCR", "n"], "n", false);
        }
    }
    (bytes, reqs)
}

fn int(c: &mut Client, key: &str) -> i64 {
    match c.q(&["GET", key]) {
        V::Bulk(b) => String::from_utf8(b).unwrap().parse().unwrap(),
        V::NilBulk => 0,
        other => panic!("GET {key}: {other:?}"),
    }
}

#[test]
fn kill_9_mid_stream_resumes_at_the_exact_offset() {
    let dir = tempfile::tempdir().unwrap();
    let master = TcpListener::bind("127.0.0.1:0").unwrap();
    let mport = master.local_addr().unwrap().port().to_string();
    let conf = ["--replicaof", "127.0.0.1", mport.as_str()];
    let (mut child, addr, _log) = spawn_logged(dir.path(), &conf);
    let mut m = Peer::accept(&master);
    assert_eq!(m.handshake(), ["PSYNC", "?", "-1"]);
    let good = rdb(true);
    m.send(format!("+FULLRESYNC {REPLID} 100\r\n${}\r\n", good.len()).as_bytes());
    m.send(&good);
    m.wait_ack(100);
    let (bytes, reqs) = counter_stream(100, 4_000);
    let end = 100 + bytes.len() as u64;
    // The whole stream at once, from a thread (the replica dies while reading it).
    let mut w = m.r.get_ref().try_clone().unwrap();
    let sending = bytes.clone();
    let sender = std::thread::spawn(move || {
        let _ = w.write_all(&sending);
    });
    let mut c = Client::connect(addr);
    // Dies once part of the stream is applied.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let at: u64 = info_field(&mut c, "slave_repl_offset")
            .unwrap()
            .parse()
            .unwrap();
        if at > 100 + bytes.len() as u64 / 10 || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    kill_9(&mut child);
    let _ = sender.join();
    drop(m);
    let (mut child, addr, _log) = spawn_logged(dir.path(), &conf);
    let mut m = Peer::accept(&master);
    let psync = m.handshake();
    assert_eq!(psync[1], REPLID, "{psync:?}");
    let from: u64 = psync[2].parse().unwrap();
    let resumed = from - 1;
    // The offset is a request boundary outside a transaction, in the stream sent.
    let i = reqs
        .iter()
        .position(|r| r.at == resumed)
        .or_else(|| (resumed == end).then_some(reqs.len()))
        .unwrap_or_else(|| panic!("{resumed} is no request boundary"));
    assert!(i == reqs.len() || !reqs[i].in_multi, "resumes inside MULTI");
    assert!(resumed > 100, "nothing was persisted");
    // The data is exactly the stream's prefix: nothing applied twice, no transaction cut.
    let mut c = Client::connect(addr);
    assert_eq!(
        info_field(&mut c, "slave_repl_offset"),
        Some(resumed.to_string())
    );
    assert_eq!(info_field(&mut c, "master_replid").as_deref(), Some(REPLID));
    c.q(&["SELECT", "1"]);
    let count = |name: &str, upto: usize| reqs[..upto].iter().filter(|r| r.name == name).count();
    assert_eq!(int(&mut c, "n"), count("n", i) as i64);
    assert_eq!(int(&mut c, "a"), count("exec", i) as i64);
    assert_eq!(int(&mut c, "b"), count("exec", i) as i64);
    // The rest of the stream, in the database the stream had selected.
    m.send(b"+CONTINUE\r\n");
    m.send(&bytes[(resumed - 100) as usize..]);
    m.send(&resp(&["REPLCONF", "GETACK", "*"]));
    m.wait_ack(end + resp(&["REPLCONF", "GETACK", "*"]).len() as u64);
    assert_eq!(int(&mut c, "n"), count("n", reqs.len()) as i64);
    assert_eq!(int(&mut c, "a"), count("exec", reqs.len()) as i64);
    assert_eq!(int(&mut c, "b"), int(&mut c, "a"));
    // A clean restart resumes too; a request that wrote nothing (the GETACK) is asked for
    // again, the last write is not.
    c.send(&common::encode(&[b"SHUTDOWN", b"NOSAVE"]));
    child.wait().unwrap();
    drop(m);
    let (mut child, _, _log) = spawn_logged(dir.path(), &conf);
    let mut m = Peer::accept(&master);
    let from = (end + 1).to_string();
    assert_eq!(m.handshake(), ["PSYNC", REPLID, from.as_str()]);
    kill_9(&mut child);
}

#[test]
fn a_full_sync_swaps_the_dataset_in_whole_and_a_crash_in_the_load_leaves_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let master = TcpListener::bind("127.0.0.1:0").unwrap();
    let mport = master.local_addr().unwrap().port().to_string();
    let (mut child, addr, log) = spawn_logged(dir.path(), &[]);
    let mut c = Client::connect(addr);
    c.q(&["REPLICAOF", "127.0.0.1", &mport]);
    const OLD: usize = 3000;
    const NEW: usize = 60_000;
    let mut m = Peer::accept(&master);
    m.handshake();
    let first = big_rdb("old", OLD, true);
    m.send(format!("+FULLRESYNC {REPLID} 10\r\n${}\r\n", first.len()).as_bytes());
    m.send(&first);
    m.wait_ack(10);
    assert_eq!(c.q(&["DBSIZE"]), V::Int(OLD as i64));
    // A reader sees the old dataset or the new one, never a part.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut r = Client::connect(addr);
            let mut seen = std::collections::BTreeSet::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let V::Int(n) = r.q(&["DBSIZE"]) else {
                    panic!("DBSIZE")
                };
                let old = r.q(&["GET", "old:7"]);
                seen.insert(n);
                assert!(
                    n == OLD as i64 || n == NEW as i64,
                    "a partial dataset: {n} keys"
                );
                if n == OLD as i64 {
                    // The switch may come between the two reads, never the other way.
                    assert!(old == V::bulk("7") || old == V::NilBulk, "{old:?}");
                }
            }
            seen
        })
    };
    // A corrupt RDB: the old dataset stays.
    drop(m);
    let mut m = Peer::accept(&master);
    m.handshake();
    let bad = big_rdb("new", NEW, false);
    m.send(format!("+FULLRESYNC {REPLID} 20\r\n${}\r\n", bad.len()).as_bytes());
    m.send(&bad);
    let mut m = Peer::accept(&master);
    m.handshake();
    assert_eq!(c.q(&["GET", "old:7"]), V::bulk("7"));
    // A good one: loaded beside the old dataset (async_loading), then switched in.
    let good = big_rdb("new", NEW, true);
    m.send(format!("+FULLRESYNC {REPLID} 30\r\n${}\r\n", good.len()).as_bytes());
    m.send(&good);
    m.wait_ack(30);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = reader.join().expect("the reader saw no partial dataset");
    assert!(seen.contains(&(OLD as i64)), "{seen:?}");
    assert_eq!(c.q(&["DBSIZE"]), V::Int(NEW as i64));
    assert_eq!(c.q(&["GET", "new:59999"]), V::bulk("59999"));
    assert_eq!(c.q(&["GET", "old:7"]), V::NilBulk);
    // The replaced dataset is deleted in the background.
    wait_log(&log, "records deleted in");
    // kill -9 in the middle of the next load.
    drop(m);
    let mut m = Peer::accept(&master);
    m.handshake();
    // Large enough that the load is still running when the kill comes (a load of 60,000
    // keys can finish within the 150 ms below since a load writes per-shard batches).
    let third = big_rdb("third", 8 * NEW, true);
    m.send(format!("+FULLRESYNC {REPLID} 40\r\n${}\r\n", third.len()).as_bytes());
    m.send(&third);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let V::Bulk(text) = c.q(&["INFO", "persistence"]) else {
            panic!("INFO")
        };
        if String::from_utf8_lossy(&text).contains("async_loading:1") {
            break;
        }
        assert!(Instant::now() < deadline, "the load never started");
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(150));
    kill_9(&mut child);
    drop(m);
    let (mut child, addr, _log) = spawn_logged(dir.path(), &[]);
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["DBSIZE"]), V::Int(NEW as i64));
    assert_eq!(c.q(&["GET", "new:7"]), V::bulk("7"));
    assert_eq!(c.q(&["GET", "third:7"]), V::NilBulk);
    assert_eq!(
        info_field(&mut c, "master_repl_offset").as_deref(),
        Some("30")
    );
    // The cut load had installed nothing (its tables are added to the shards only once
    // the whole file is read): the open deleted them as unreferenced files, so there is
    // no record to clean.
    c.send(&common::encode(&[b"SHUTDOWN", b"NOSAVE"]));
    child.wait().unwrap();
    // With more databases, the physical ones the loads used are visible: empty.
    let server = start(dir.path(), &["--databases", "64"]);
    let mut c = Client::connect(server.local_addr());
    for db in 0..64 {
        c.q(&["SELECT", &db.to_string()]);
        let want = if db == 0 { NEW as i64 } else { 0 };
        assert_eq!(c.q(&["DBSIZE"]), V::Int(want), "database {db}");
    }
    drop(c);
    server.shutdown().unwrap();
}

/// Waits for a log line containing `what`.
fn wait_log(log: &Receiver<String>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match log.recv_timeout(left) {
            Ok(l) if l.contains(what) => return,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    panic!("no log line with {what:?}");
}
