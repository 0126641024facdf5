//! Strata as a master, followed by a scripted replica on a loopback socket: the handshake,
//! `+FULLRESYNC` with the RDB of the dataset at the cut (both transfers), then the exact
//! stream bytes; a reconnection with `PSYNC replid offset+1` gets `+CONTINUE` and exactly
//! the bytes after; WAIT counts ACKs; ROLE and INFO show the replica.
//! The real redis-server replica is `tests/redis/test_master.py`.

mod common;

use common::{start, Client, V};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use strata_server::rdb::file::{FileReader, Item};
use strata_server::rdb::Value;

fn resp(argv: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// The replica's side of one connection.
struct Replica {
    r: BufReader<TcpStream>,
}

impl Replica {
    fn connect(addr: std::net::SocketAddr) -> Replica {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Replica {
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, argv: &[&str]) {
        self.r.get_mut().write_all(&resp(argv)).unwrap();
    }

    /// The next line that is not a keepalive newline.
    fn line(&mut self) -> String {
        loop {
            let mut l = String::new();
            self.r.read_line(&mut l).unwrap();
            assert!(!l.is_empty(), "the master closed the link");
            if l != "\n" {
                return l.trim_end().to_string();
            }
        }
    }

    fn handshake(&mut self, port: &str) {
        self.send(&["REPLCONF", "listening-port", port]);
        assert_eq!(self.line(), "+OK");
        self.send(&["REPLCONF", "capa", "eof", "capa", "psync2"]);
        assert_eq!(self.line(), "+OK");
    }

    /// `+FULLRESYNC`: the replid, the offset and the RDB's keys as (db, key, value).
    fn full_sync(&mut self) -> (String, u64, Vec<(u64, String, String)>) {
        self.send(&["PSYNC", "?", "-1"]);
        let l = self.line();
        let parts: Vec<&str> = l.split(' ').collect();
        assert_eq!(parts[0], "+FULLRESYNC", "{l}");
        let (replid, off) = (parts[1].to_string(), parts[2].parse::<u64>().unwrap());
        let head = self.line();
        let rdb = if let Some(mark) = head.strip_prefix("$EOF:") {
            assert_eq!(mark.len(), 40);
            let mut data = Vec::new();
            while !data.ends_with(mark.as_bytes()) {
                let mut b = [0u8; 1];
                self.r.read_exact(&mut b).unwrap();
                data.push(b[0]);
            }
            data.truncate(data.len() - 40);
            // The stream waits for the first ACK after a diskless payload, as Redis's.
            self.send(&["REPLCONF", "ACK", &off.to_string()]);
            data
        } else {
            let n: usize = head.strip_prefix('$').unwrap().parse().unwrap();
            let mut data = vec![0; n];
            self.r.read_exact(&mut data).unwrap();
            data
        };
        let mut f = FileReader::open(&rdb[..]).expect("an RDB");
        assert_eq!(f.version(), 9);
        let mut keys = Vec::new();
        while let Some(item) = f.next_item().expect("a whole RDB") {
            if let Item::Key(e) = item {
                let Value::String(v) = e.value else {
                    panic!("a string")
                };
                let k = String::from_utf8(e.key).unwrap();
                keys.push((e.db, k, String::from_utf8(v).unwrap()));
            }
        }
        keys.sort();
        (replid, off, keys)
    }

    fn exact(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        self.r.read_exact(&mut b).unwrap();
        b
    }
}

fn info_field(c: &mut Client, section: &str, name: &str) -> String {
    let V::Bulk(b) = c.q(&["INFO", section]) else {
        panic!("INFO")
    };
    let text = String::from_utf8(b).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn full_sync_then_stream(diskless: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mode = if diskless { "yes" } else { "no" };
    let server = start(
        dir.path(),
        &[
            "--repl-diskless-sync",
            mode,
            "--repl-diskless-sync-delay",
            "0",
            "--repl-ping-replica-period",
            "1000",
        ],
    );
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.q(&["SET", "a", "1"]), V::ok());
    assert_eq!(c.q(&["SELECT", "3"]), V::ok());
    assert_eq!(c.q(&["SET", "b", "2"]), V::ok());
    assert_eq!(c.q(&["SELECT", "0"]), V::ok());
    assert_eq!(
        info_field(&mut c, "replication", "repl_backlog_active"),
        "0"
    );

    let mut r = Replica::connect(server.local_addr());
    r.handshake("7777");
    let (replid, off, keys) = r.full_sync();
    assert_eq!(
        keys,
        vec![(0, "a".into(), "1".into()), (3, "b".into(), "2".into())]
    );
    assert_eq!(
        info_field(&mut c, "replication", "master_replid"),
        replid,
        "the id in +FULLRESYNC is the master's"
    );

    // Writes after the cut arrive as the stream, byte for byte: SELECT first, errors and
    // reads not propagated, a transaction wrapped.
    assert_eq!(c.q(&["SET", "c", "3"]), V::ok());
    assert_eq!(c.q(&["GET", "c"]), V::bulk("3"));
    assert!(matches!(c.q(&["INCR", "c", "x"]), V::Err(_)));
    assert!(matches!(c.q(&["LPUSH", "c", "x"]), V::Err(_)));
    assert_eq!(c.q(&["MSET", "k1", "v1", "k2", "v2"]), V::ok());
    assert_eq!(c.q(&["MULTI"]), V::ok());
    assert_eq!(c.q(&["INCR", "n"]), V::Simple("QUEUED".into()));
    assert_eq!(c.q(&["SET", "m", "x"]), V::Simple("QUEUED".into()));
    assert_eq!(c.q(&["EXEC"]), V::Array(vec![V::Int(1), V::ok()]));
    assert_eq!(c.q(&["SELECT", "5"]), V::ok());
    assert_eq!(c.q(&["SET", "d", "5"]), V::ok());
    let mut want = resp(&["SELECT", "0"]);
    want.extend(resp(&["SET", "c", "3"]));
    want.extend(resp(&["MSET", "k1", "v1", "k2", "v2"]));
    want.extend(resp(&["MULTI"]));
    want.extend(resp(&["INCR", "n"]));
    want.extend(resp(&["SET", "m", "x"]));
    want.extend(resp(&["EXEC"]));
    want.extend(resp(&["SELECT", "5"]));
    want.extend(resp(&["SET", "d", "5"]));
    let got = r.exact(want.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
    let end = off + want.len() as u64;
    assert_eq!(
        info_field(&mut c, "replication", "master_repl_offset"),
        end.to_string()
    );
    r.send(&["REPLCONF", "ACK", &end.to_string()]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let line = info_field(&mut c, "replication", "slave0");
        if line.contains(&format!("offset={end}")) {
            assert!(
                line.starts_with("ip=127.0.0.1,port=7777,state=online,"),
                "{line}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{line}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(&mut c, "replication", "connected_slaves"), "1");
    assert_eq!(
        info_field(&mut c, "replication", "repl_backlog_active"),
        "1"
    );
    assert_eq!(
        c.q(&["ROLE"]),
        V::Array(vec![
            V::bulk("master"),
            V::Int(end as i64),
            V::Array(vec![V::Array(vec![
                V::bulk("127.0.0.1"),
                V::bulk("7777"),
                V::bulk(&end.to_string()),
            ])]),
        ])
    );
    // WAIT: already acknowledged.
    assert_eq!(c.q(&["WAIT", "1", "2000"]), V::Int(1));
    assert_eq!(c.q(&["WAIT", "2", "100"]), V::Int(1));
    assert_eq!(info_field(&mut c, "stats", "sync_full"), "1");
}

#[test]
fn full_sync_from_disk_then_the_stream() {
    full_sync_then_stream(false);
}

#[test]
fn diskless_full_sync_then_the_stream() {
    full_sync_then_stream(true);
}

#[test]
fn partial_resync_continues_with_the_exact_bytes_and_wait_counts_acks() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[
            "--repl-diskless-sync",
            "no",
            "--repl-ping-replica-period",
            "1000",
        ],
    );
    let mut c = Client::connect(server.local_addr());
    let mut r = Replica::connect(server.local_addr());
    r.handshake("7001");
    let (replid, off, keys) = r.full_sync();
    assert!(keys.is_empty());
    assert_eq!(c.q(&["SET", "x", "1"]), V::ok());
    let first = [resp(&["SELECT", "0"]), resp(&["SET", "x", "1"])].concat();
    assert_eq!(r.exact(first.len()), first);
    let seen = off + first.len() as u64;

    // WAIT sends GETACK into the stream; the replica answers it.
    let addr = server.local_addr();
    let waiter = std::thread::spawn(move || {
        let mut c2 = Client::connect(addr);
        c2.q(&["WAIT", "1", "10000"])
    });
    let getack = resp(&["REPLCONF", "GETACK", "*"]);
    assert_eq!(r.exact(getack.len()), getack);
    let acked = seen + getack.len() as u64;
    r.send(&["REPLCONF", "ACK", &acked.to_string()]);
    assert_eq!(waiter.join().unwrap(), V::Int(1));

    // The link drops (CLIENT KILL TYPE replica); writes go on; the replica comes back.
    assert_eq!(c.q(&["CLIENT", "KILL", "TYPE", "replica"]), V::Int(1));
    let mut rest = Vec::new();
    assert!(r.r.read_to_end(&mut rest).is_ok());
    assert_eq!(c.q(&["SET", "y", "2"]), V::ok());
    assert_eq!(c.q(&["INCR", "x"]), V::Int(2));
    let mut r = Replica::connect(server.local_addr());
    r.handshake("7001");
    r.send(&["PSYNC", &replid, &(acked + 1).to_string()]);
    assert_eq!(r.line(), format!("+CONTINUE {replid}"));
    let after = [resp(&["SET", "y", "2"]), resp(&["INCR", "x"])].concat();
    assert_eq!(r.exact(after.len()), after);
    assert_eq!(info_field(&mut c, "stats", "sync_partial_ok"), "1");
    assert_eq!(info_field(&mut c, "stats", "sync_full"), "1");
    assert_eq!(info_field(&mut c, "stats", "sync_partial_err"), "0");
    let list = c.q(&["CLIENT", "LIST", "TYPE", "replica"]);
    let V::Bulk(list) = list else { panic!() };
    let list = String::from_utf8(list).unwrap();
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.contains(" flags=S "), "{list}");

    // An offset the log does not cover, or another id: a full sync.
    let mut r2 = Replica::connect(server.local_addr());
    r2.handshake("7002");
    r2.send(&["PSYNC", &replid, &(acked + 100_000).to_string()]);
    assert!(r2.line().starts_with("+FULLRESYNC "));
    assert_eq!(info_field(&mut c, "stats", "sync_partial_err"), "1");
    assert_eq!(info_field(&mut c, "stats", "sync_full"), "2");
}

#[test]
fn replconf_and_wait_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let mut c = Client::connect(server.local_addr());
    assert_eq!(
        c.q(&["REPLCONF", "bogus", "1"]),
        V::err("ERR Unrecognized REPLCONF option: bogus")
    );
    assert_eq!(c.q(&["REPLCONF", "listening-port", "6380"]), V::ok());
    assert_eq!(c.q(&["WAIT", "1", "-1"]), V::err("ERR timeout is negative"));
    assert_eq!(
        c.q(&["WAIT", "1", "x"]),
        V::err("ERR timeout is not an integer or out of range")
    );
    // No replica: WAIT times out with 0.
    assert_eq!(c.q(&["WAIT", "1", "50"]), V::Int(0));
    assert_eq!(c.q(&["WAIT", "0", "0"]), V::Int(0));
    assert_eq!(
        c.q(&["ROLE"]),
        V::Array(vec![V::bulk("master"), V::Int(0), V::Array(vec![])])
    );
}

#[test]
fn scripts_propagate_their_writes_as_one_unit() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[
            "--repl-diskless-sync",
            "no",
            "--repl-ping-replica-period",
            "1000",
        ],
    );
    let mut c = Client::connect(server.local_addr());
    let mut r = Replica::connect(server.local_addr());
    r.handshake("7003");
    r.full_sync();
    // Keys in one slot ({t}) run on a shard's worker; others on the connection's thread.
    let two = "redis.call('SET', KEYS[1], ARGV[1]); redis.call('INCR', KEYS[2]); return 1";
    assert_eq!(c.q(&["EVAL", two, "2", "{t}a", "{t}b", "v"]), V::Int(1));
    assert_eq!(c.q(&["EVAL", two, "2", "a", "b", "w"]), V::Int(1));
    let one = "return redis.call('SET', KEYS[1], 'x')";
    assert_eq!(c.q(&["EVAL", one, "1", "solo"]), V::ok());
    // A script that only reads, or fails before writing, propagates nothing.
    assert_eq!(
        c.q(&["EVAL", "return redis.call('GET', KEYS[1])", "1", "a"]),
        V::bulk("w")
    );
    let mut want = resp(&["SELECT", "0"]);
    for (a, b, v) in [("{t}a", "{t}b", "v"), ("a", "b", "w")] {
        want.extend(resp(&["MULTI"]));
        want.extend(resp(&["SET", a, v]));
        want.extend(resp(&["INCR", b]));
        want.extend(resp(&["EXEC"]));
    }
    want.extend(resp(&["SET", "solo", "x"]));
    assert_eq!(
        String::from_utf8_lossy(&r.exact(want.len())),
        String::from_utf8_lossy(&want)
    );
}

#[test]
fn a_waiting_client_does_not_hold_off_a_full_sync() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--repl-diskless-sync", "no"]);
    let mut c = Client::connect(server.local_addr());
    // The log exists (a first replica), so WAIT has a stream to wait on.
    let mut first = Replica::connect(server.local_addr());
    first.handshake("7010");
    first.full_sync();
    assert_eq!(c.q(&["SET", "k", "v"]), V::ok());
    let addr = server.local_addr();
    let waiter = std::thread::spawn(move || Client::connect(addr).q(&["WAIT", "5", "4000"]));
    std::thread::sleep(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let mut r = Replica::connect(server.local_addr());
    r.handshake("7011");
    let (_, _, keys) = r.full_sync();
    assert_eq!(keys, vec![(0, "k".into(), "v".into())]);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the full sync waited for WAIT"
    );
    assert_eq!(waiter.join().unwrap(), V::Int(0));
}

/// A snapshot stream (`docs/format/snapshot-stream.md`), read by this test's own reading of
/// the spec: every frame's CRC-32C checked, the frames in order, END's counts equal to what
/// came; returns the metadata records' `(logical db, key)`, sorted.
fn read_snapshot_stream(r: &mut Replica) -> Vec<(u8, String)> {
    let mut keys = Vec::new();
    let (mut frames, mut records, mut bytes) = (0u64, 0u64, 0u64);
    let mut first = true;
    loop {
        let head = r.exact(9);
        let tag = head[0];
        let len = u32::from_le_bytes(head[1..5].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(head[5..9].try_into().unwrap());
        let body = r.exact(len);
        assert_eq!(
            crc32c::crc32c_append(crc32c::crc32c(&head[..5]), &body),
            crc,
            "frame {tag}"
        );
        assert_eq!(first, tag == 1, "START first and once");
        first = false;
        match tag {
            1 => assert_eq!(body[0], 1, "format version"),
            2 => {}
            3 => {
                let n = u32::from_le_bytes(body[4..8].try_into().unwrap());
                let mut at = 8;
                for _ in 0..n {
                    let k = u32::from_le_bytes(body[at..at + 4].try_into().unwrap()) as usize;
                    let v = u32::from_le_bytes(body[at + 4..at + 8].try_into().unwrap()) as usize;
                    let key = &body[at + 8..at + 8 + k];
                    if key[3] == 0 {
                        keys.push((key[0], String::from_utf8(key[4..].to_vec()).unwrap()));
                    }
                    at += 8 + k + v;
                    records += 1;
                    bytes += (k + v) as u64;
                }
                assert_eq!(at, body.len());
                frames += 1;
            }
            4 => {
                let w = |i: usize| u64::from_le_bytes(body[i * 8..i * 8 + 8].try_into().unwrap());
                assert_eq!((w(0), w(1), w(2)), (frames, records, bytes));
                break;
            }
            t => panic!("tag {t}"),
        }
    }
    keys.sort();
    keys
}

#[test]
fn a_strata_replica_gets_the_snapshot_stream_then_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--repl-ping-replica-period", "1000"]);
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.q(&["SET", "a", "1"]), V::ok());
    assert_eq!(c.q(&["HSET", "h", "f", "v", "g", "w"]), V::Int(2));
    assert_eq!(c.q(&["SELECT", "3"]), V::ok());
    assert_eq!(c.q(&["SET", "b", "2"]), V::ok());
    // Logical 3 is physical 7 now: the stream names logical databases.
    assert_eq!(c.q(&["SWAPDB", "3", "7"]), V::ok());
    assert_eq!(c.q(&["SELECT", "0"]), V::ok());

    let mut r = Replica::connect(server.local_addr());
    r.send(&["REPLCONF", "listening-port", "7778"]);
    assert_eq!(r.line(), "+OK");
    r.send(&[
        "REPLCONF",
        "capa",
        "eof",
        "capa",
        "psync2",
        "capa",
        "strata-snapshot",
    ]);
    assert_eq!(r.line(), "+OK");
    r.send(&["PSYNC", "?", "-1"]);
    let l = r.line();
    let off: u64 = l.split(' ').nth(2).unwrap().parse().unwrap();
    assert!(l.starts_with("+FULLRESYNC "), "{l}");
    assert_eq!(r.line(), "$STRATA-SNAPSHOT");
    let keys = read_snapshot_stream(&mut r);
    assert_eq!(
        keys,
        vec![(0, "a".into()), (0, "h".into()), (7, "b".into())]
    );
    // The command stream follows the END frame at once (no ACK awaited).
    assert_eq!(c.q(&["SET", "c", "3"]), V::ok());
    let mut want = resp(&["SELECT", "0"]);
    want.extend(resp(&["SET", "c", "3"]));
    assert_eq!(r.exact(want.len()), want);
    r.send(&["REPLCONF", "ACK", &(off + want.len() as u64).to_string()]);

    // With `repl-strata-snapshot no` the same announcement gets an RDB.
    assert_eq!(c.q(&["DEL", "h"]), V::Int(1)); // this test's RDB reader takes strings
    assert_eq!(
        c.q(&["CONFIG", "SET", "repl-strata-snapshot", "no"]),
        V::ok()
    );
    let mut r2 = Replica::connect(server.local_addr());
    r2.send(&[
        "REPLCONF",
        "capa",
        "eof",
        "capa",
        "psync2",
        "capa",
        "strata-snapshot",
    ]);
    assert_eq!(r2.line(), "+OK");
    let (_, _, keys) = r2.full_sync();
    assert!(keys.contains(&(7, "b".into(), "2".into())), "{keys:?}");
}
