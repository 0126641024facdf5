//! Replication continuity with scripted peers on loopback sockets: a Strata replica serving
//! its own replica from its log (exactly its master's stream, same id, same offsets), its
//! promotion keeping the old id valid up to the promoted offset (PSYNC2), and a master
//! keeping its id, offset and log over a clean shutdown and over `kill -9` once idle (and
//! starting a new history when killed right after a write).
//! The real servers are `tests/redis/test_chain.py`.

mod common;

use common::{spawn_binary, start, Client, V};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};
use strata_server::rdb::crc64::crc64;
use strata_server::rdb::file::{FileReader, Item};

const REPLID: &str = "0123456789abcdef0123456789abcdef01234567";

fn resp(argv: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// An RDB 10 with `pre` = "loaded" in db 0 and `q` = "x" in db 1.
fn rdb() -> Vec<u8> {
    let mut f = b"REDIS0010".to_vec();
    f.extend_from_slice(&[0xfe, 0, 0, 3]);
    f.extend_from_slice(b"pre");
    f.push(6);
    f.extend_from_slice(b"loaded");
    f.extend_from_slice(&[0xfe, 1, 0, 1, b'q', 1, b'x', 0xff]);
    let crc = crc64(&f);
    f.extend_from_slice(&crc.to_le_bytes());
    f
}

/// An RDB aux field: name, value.
type Aux = (String, String);

/// One end of a replication link: the scripted master's or the scripted replica's.
struct Peer {
    r: BufReader<TcpStream>,
}

impl Peer {
    fn new(s: TcpStream) -> Peer {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Peer {
            r: BufReader::new(s),
        }
    }

    fn connect(addr: SocketAddr) -> Peer {
        Peer::new(TcpStream::connect(addr).unwrap())
    }

    fn send(&mut self, b: &[u8]) {
        self.r.get_mut().write_all(b).unwrap();
    }

    /// The next line that is not a keepalive newline, without its CR LF.
    fn line(&mut self) -> String {
        loop {
            let mut l = String::new();
            self.r.read_line(&mut l).unwrap();
            assert!(!l.is_empty(), "the peer closed the link");
            if l.trim_end().is_empty() {
                continue;
            }
            return l.trim_end().to_string();
        }
    }

    /// One multibulk request, as strings.
    fn request(&mut self) -> Vec<String> {
        let n: usize = self.line().trim_start_matches('*').parse().unwrap();
        (0..n)
            .map(|_| {
                let len: usize = self.line().trim_start_matches('$').parse().unwrap();
                let b = self.exact(len + 2);
                String::from_utf8(b[..len].to_vec()).unwrap()
            })
            .collect()
    }

    fn exact(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        self.r.read_exact(&mut b).unwrap();
        b
    }

    /// The scripted master's side of the handshake; returns PSYNC's arguments.
    fn master_handshake(&mut self) -> Vec<String> {
        assert_eq!(self.request(), ["PING"]);
        self.send(b"+PONG\r\n");
        assert_eq!(self.request()[..2], ["REPLCONF", "listening-port"]);
        self.send(b"+OK\r\n");
        assert_eq!(self.request()[0], "REPLCONF");
        self.send(b"+OK\r\n");
        let psync = self.request();
        assert_eq!(psync[0], "PSYNC");
        psync[1..].to_vec()
    }

    /// The scripted replica's side: REPLCONF, then PSYNC; returns the answer line.
    fn psync(&mut self, id: &str, offset: &str) -> String {
        self.send(&resp(&["REPLCONF", "listening-port", "7100"]));
        assert_eq!(self.line(), "+OK");
        self.send(&resp(&["REPLCONF", "capa", "eof", "capa", "psync2"]));
        assert_eq!(self.line(), "+OK");
        self.send(&resp(&["PSYNC", id, offset]));
        self.line()
    }

    /// After `+FULLRESYNC`: the `$<len>` payload's keys as (db, key) and its aux fields.
    fn rdb(&mut self) -> (Vec<(u64, String)>, Vec<Aux>) {
        let head = self.line();
        let n: usize = head
            .strip_prefix('$')
            .expect("a sized payload")
            .parse()
            .unwrap();
        let data = self.exact(n);
        let mut f = FileReader::open(&data[..]).expect("an RDB");
        let (mut keys, mut aux) = (Vec::new(), Vec::new());
        while let Some(item) = f.next_item().expect("a whole RDB") {
            match item {
                Item::Key(e) => keys.push((e.db, String::from_utf8(e.key).unwrap())),
                Item::Aux(k, v) => {
                    aux.push((String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap()))
                }
                _ => {}
            }
        }
        keys.sort();
        (keys, aux)
    }

    /// Reads until the peer closes the connection (bounded by the read timeout).
    fn closed(&mut self) {
        let mut rest = Vec::new();
        let _ = self.r.read_to_end(&mut rest);
    }
}

fn field(c: &mut Client, section: &str, name: &str) -> String {
    let V::Bulk(b) = c.q(&["INFO", section]) else {
        panic!("INFO")
    };
    let text = String::from_utf8(b).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn wait_field(c: &mut Client, section: &str, name: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while field(c, section, name) != want {
        assert!(Instant::now() < deadline, "{name} never became {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_replica_serves_its_masters_stream_then_its_promotion_keeps_the_history() {
    let master = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = master.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let b = start(
        dir.path(),
        &[
            "--replicaof",
            "127.0.0.1",
            &port,
            "--repl-diskless-sync",
            "no",
            "--repl-ping-replica-period",
            "1000",
        ],
    );
    let mut c = Client::connect(b.local_addr());
    // Before its link is up, a replica serves no replica (Redis's answer).
    let mut early = Peer::connect(b.local_addr());
    assert_eq!(
        early.psync("?", "-1"),
        "-NOMASTERLINK Can't SYNC while not connected with my master"
    );

    let mut m = Peer::new(master.accept().unwrap().0);
    assert_eq!(m.master_handshake(), ["?", "-1"]);
    let payload = rdb();
    m.send(format!("+FULLRESYNC {REPLID} 1000\r\n${}\r\n", payload.len()).as_bytes());
    m.send(&payload);
    wait_field(&mut c, "replication", "master_link_status", "up");
    // The master's stream: a database switch, a transaction, PING, GETACK.
    let first = [
        resp(&["SELECT", "1"]),
        resp(&["SET", "k", "v"]),
        resp(&["PING"]),
        resp(&["MULTI"]),
        resp(&["INCR", "n"]),
        resp(&["RPUSH", "l", "a", "b"]),
        resp(&["EXEC"]),
    ]
    .concat();
    m.send(&first);
    let getack = resp(&["REPLCONF", "GETACK", "*"]);
    m.send(&getack);
    let end = 1000 + (first.len() + getack.len()) as u64;
    loop {
        let req = m.request();
        assert_eq!(req[..2], ["REPLCONF", "ACK"]);
        if req[2] == end.to_string() {
            break;
        }
    }
    assert_eq!(
        field(&mut c, "replication", "master_repl_offset"),
        end.to_string()
    );

    // A replica of the replica: a full sync from its dataset at the master's id and
    // offset, in the database the stream selected, then the stream's own bytes.
    let mut s = Peer::connect(b.local_addr());
    assert_eq!(s.psync("?", "-1"), format!("+FULLRESYNC {REPLID} {end}"));
    let (keys, aux) = s.rdb();
    let want: Vec<(u64, String)> = [(0, "pre"), (1, "k"), (1, "l"), (1, "n"), (1, "q")]
        .iter()
        .map(|(d, k)| (*d, k.to_string()))
        .collect();
    assert_eq!(keys, want);
    assert!(
        aux.contains(&("repl-stream-db".into(), "1".into())),
        "{aux:?}"
    );
    assert!(aux.contains(&("repl-id".into(), REPLID.into())), "{aux:?}");
    assert!(
        aux.contains(&("repl-offset".into(), end.to_string())),
        "{aux:?}"
    );
    let more = [resp(&["DEL", "k"]), resp(&["PING"])].concat();
    m.send(&more);
    assert_eq!(s.exact(more.len()), more);
    let end = end + more.len() as u64;
    s.send(&resp(&["REPLCONF", "ACK", &end.to_string()]));
    wait_field(&mut c, "replication", "connected_slaves", "1");
    let slave0 = field(&mut c, "replication", "slave0");
    assert!(
        slave0.starts_with("ip=127.0.0.1,port=7100,state=online"),
        "{slave0}"
    );
    assert_eq!(field(&mut c, "replication", "role"), "slave");

    // It drops and comes back from the middle of the log: the exact bytes after.
    drop(s);
    let mut s = Peer::connect(b.local_addr());
    let from = end - first.len() as u64 - getack.len() as u64 - more.len() as u64 + 5;
    assert_eq!(
        s.psync(REPLID, &(from + 1).to_string()),
        format!("+CONTINUE {REPLID}")
    );
    let all = [first.clone(), getack.clone(), more.clone()].concat();
    assert_eq!(s.exact(all.len() - 5), all[5..]);

    // Promotion: the replica is disconnected to learn the new id; the old one stays
    // valid up to the promoted offset.
    assert_eq!(c.q(&["REPLICAOF", "NO", "ONE"]), V::ok());
    s.closed();
    assert_eq!(field(&mut c, "replication", "master_replid2"), REPLID);
    assert_eq!(
        field(&mut c, "replication", "second_repl_offset"),
        (end + 1).to_string()
    );
    let new_id = field(&mut c, "replication", "master_replid");
    assert_ne!(new_id, REPLID);
    let mut s = Peer::connect(b.local_addr());
    assert_eq!(
        s.psync(REPLID, &(end + 1).to_string()),
        format!("+CONTINUE {new_id}")
    );
    // Its own writes follow, selecting their database first.
    assert_eq!(c.q(&["SET", "z", "1"]), V::ok());
    let own = [resp(&["SELECT", "0"]), resp(&["SET", "z", "1"])].concat();
    assert_eq!(s.exact(own.len()), own);
    // Past the promoted offset the old id is not ours.
    let mut t = Peer::connect(b.local_addr());
    let answer = t.psync(REPLID, &(end + 2).to_string());
    assert!(
        answer.starts_with(&format!("+FULLRESYNC {new_id} ")),
        "{answer}"
    );
    assert_eq!(field(&mut c, "stats", "sync_partial_ok"), "2");
    assert_eq!(field(&mut c, "stats", "sync_partial_err"), "1");
    assert_eq!(field(&mut c, "stats", "sync_full"), "2");
}

/// A Strata master process with a scripted replica that full-synced, then `SET a 1`:
/// returns the process, its address, the id and the stream's end.
fn master_with_a_replica(dir: &std::path::Path) -> (std::process::Child, SocketAddr, String, u64) {
    let (child, addr) = spawn_binary(
        dir,
        &[
            "--repl-ping-replica-period",
            "1000",
            "--repl-diskless-sync",
            "no",
        ],
    );
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["SET", "before", "1"]), V::ok());
    let mut r = Peer::connect(addr);
    let full = r.psync("?", "-1");
    let parts: Vec<&str> = full.split(' ').collect();
    assert_eq!(parts[0], "+FULLRESYNC", "{full}");
    let (id, off) = (parts[1].to_string(), parts[2].parse::<u64>().unwrap());
    r.rdb();
    assert_eq!(c.q(&["SET", "a", "1"]), V::ok());
    let sent = [resp(&["SELECT", "0"]), resp(&["SET", "a", "1"])].concat();
    assert_eq!(r.exact(sent.len()), sent);
    (child, addr, id, off + sent.len() as u64)
}

/// Asks `addr` to continue `id` at `end` and returns the answer.
fn resume(addr: SocketAddr, id: &str, end: u64) -> (Client, Peer, String) {
    let c = Client::connect(addr);
    let mut r = Peer::connect(addr);
    let answer = r.psync(id, &(end + 1).to_string());
    (c, r, answer)
}

fn wait_exit(child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_master_keeps_its_history_over_a_shutdown_and_an_idle_kill() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr, id, end) = master_with_a_replica(dir.path());
    let mut c = Client::connect(addr);
    c.send(&resp(&["SHUTDOWN"]));
    wait_exit(&mut child);

    let (mut child, addr) = spawn_binary(dir.path(), &[]);
    let (mut c, mut r, answer) = resume(addr, &id, end);
    assert_eq!(answer, format!("+CONTINUE {id}"));
    assert_eq!(field(&mut c, "replication", "master_replid"), id);
    assert_eq!(
        field(&mut c, "replication", "master_repl_offset"),
        end.to_string()
    );
    assert_eq!(c.q(&["GET", "a"]), V::Bulk(b"1".to_vec()));
    assert_eq!(c.q(&["SET", "b", "2"]), V::ok());
    let sent = [resp(&["SELECT", "0"]), resp(&["SET", "b", "2"])].concat();
    assert_eq!(r.exact(sent.len()), sent);
    let end = end + sent.len() as u64;

    // Idle for longer than the history takes to be written, then SIGKILL.
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, addr) = spawn_binary(dir.path(), &[]);
    let (mut c, _r, answer) = resume(addr, &id, end);
    assert_eq!(answer, format!("+CONTINUE {id}"));
    assert_eq!(field(&mut c, "stats", "sync_full"), "0");

    // Killed right after a write: the history file went before the write, so the
    // restarted master starts a new history (its replicas full-sync, never miss a write).
    assert_eq!(c.q(&["SET", "c", "3"]), V::ok());
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, addr) = spawn_binary(dir.path(), &[]);
    let (mut c, _r, answer) = resume(addr, &id, end);
    assert!(answer.starts_with("+FULLRESYNC "), "{answer}");
    assert_ne!(field(&mut c, "replication", "master_replid"), id);
    assert_eq!(c.q(&["GET", "c"]), V::Bulk(b"3".to_vec()));
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Sentinel's reconfiguration of a returning master is a transaction: `MULTI; SLAVEOF
/// host port; ...; EXEC`. EXEC holds a sequencer guard, so the switch of the log to the
/// new master's stream waits for it (the link thread makes it); the node then asks to
/// continue its own stream from its log's end.
#[test]
fn a_master_made_a_replica_inside_exec_asks_to_continue_its_own_stream() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr, id, end) = master_with_a_replica(dir.path());
    let new_master = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = new_master.local_addr().unwrap().port().to_string();
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["MULTI"]), V::ok());
    assert_eq!(
        c.q(&["SLAVEOF", "127.0.0.1", &port]),
        V::Simple("QUEUED".into())
    );
    assert_eq!(c.q(&["PING"]), V::Simple("QUEUED".into()));
    assert_eq!(
        c.q(&["EXEC"]),
        V::Array(vec![V::ok(), V::Simple("PONG".into())])
    );
    let mut m = Peer::new(new_master.accept().unwrap().0);
    assert_eq!(m.master_handshake(), [id.clone(), (end + 1).to_string()]);
    m.send(format!("+CONTINUE {id}\r\n").as_bytes());
    wait_field(&mut c, "replication", "master_link_status", "up");
    assert_eq!(
        field(&mut c, "replication", "slave_repl_offset"),
        end.to_string()
    );
    assert_eq!(
        c.q(&["SET", "x", "1"]),
        V::err("READONLY You can't write against a read only replica.")
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
