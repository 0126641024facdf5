//! MIGRATE (`cmd/migrate.rs`) against a scripted target on a loopback socket: what it sends
//! (AUTH, SELECT once per cached connection, pipelined RESTOREs with DUMP payloads and TTLs,
//! REPLACE), what it deletes (only keys the target acknowledged, none with COPY) and its
//! replies and errors, Redis 7.0.15's texts. Against a real redis-server both ways:
//! `tests/redis/test_cluster_single.py`.

use crate::test_server::{Reply, TestServer};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

type Log = Arc<Mutex<Vec<Vec<Vec<u8>>>>>;

/// A target that records every command and answers `+OK`, but for RESTORE of `bad`
/// (BUSYKEY) and AUTH with password `wrong`.
pub(super) fn target() -> (u16, Log) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let log: Log = Arc::default();
    let seen = log.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(conn) = conn else { return };
            let seen = seen.clone();
            std::thread::spawn(move || serve(conn, seen));
        }
    });
    (port, log)
}

fn serve(conn: std::net::TcpStream, seen: Log) {
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let n: usize = line.trim()[1..].parse().unwrap();
        let mut argv = Vec::new();
        for _ in 0..n {
            let mut len = String::new();
            r.read_line(&mut len).unwrap();
            let len: usize = len.trim()[1..].parse().unwrap();
            let mut buf = vec![0; len + 2];
            r.read_exact(&mut buf).unwrap();
            buf.truncate(len);
            argv.push(buf);
        }
        let reply: &[u8] = match (&argv[0][..], argv.get(1).map(|a| &a[..])) {
            (b"RESTORE" | b"RESTORE-ASKING", Some(b"bad")) => {
                b"-BUSYKEY Target key name already exists.\r\n"
            }
            (b"AUTH", _) if argv.last().unwrap() == b"wrong" => {
                b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
            }
            _ => b"+OK\r\n",
        };
        seen.lock().unwrap().push(argv);
        w.write_all(reply).unwrap();
    }
}

fn names(log: &Log) -> Vec<String> {
    let mut l = log.lock().unwrap();
    let out = l
        .iter()
        .map(|a| {
            let shown: Vec<String> = a
                .iter()
                .enumerate()
                // The payload (argument 3 of RESTORE) is not text.
                .map(|(i, x)| {
                    if i == 3 {
                        "<payload>".into()
                    } else {
                        String::from_utf8_lossy(x).into_owned()
                    }
                })
                .collect();
            shown.join(" ")
        })
        .collect();
    l.clear();
    out
}

#[test]
fn migrate_sends_restores_and_deletes_what_was_acknowledged() {
    let (port, log) = target();
    let p = port.to_string();
    let mut t = TestServer::in_memory();
    t.check(
        r#"
            SET a 1 => +OK
            RPUSH l x y => :2
            SET e v PX 100000 => +OK
        "#,
    );
    let Reply::Bulk(dumped) = t.cmd(&["DUMP", "l"]) else {
        panic!()
    };
    let run = |t: &mut TestServer, args: &[&str]| t.cmd(args).to_string();
    assert_eq!(
        run(&mut t, &["MIGRATE", "127.0.0.1", &p, "nokey", "0", "1000"]),
        "+NOKEY"
    );
    assert_eq!(
        run(&mut t, &["MIGRATE", "127.0.0.1", &p, "a", "3", "1000"]),
        "+OK"
    );
    assert_eq!(names(&log), ["SELECT 3", "RESTORE a 0 <payload>"]);
    assert_eq!(t.q("EXISTS a"), ":0");
    // Cached connection, same database: no SELECT; COPY keeps the keys; AUTH2 first.
    let args = [
        "MIGRATE",
        "127.0.0.1",
        &p,
        "",
        "3",
        "1000",
        "COPY",
        "REPLACE",
        "AUTH2",
        "u",
        "pw",
        "KEYS",
        "l",
        "e",
        "missing",
    ];
    assert_eq!(run(&mut t, &args), "+OK");
    let sent = log.lock().unwrap().clone();
    let got = names(&log);
    assert_eq!(got[0], "AUTH u pw");
    assert_eq!(got[1], "RESTORE l 0 <payload> REPLACE");
    assert!(
        got[2].starts_with("RESTORE e ") && got[2].ends_with(" <payload> REPLACE"),
        "{got:?}"
    );
    let ttl: u64 = String::from_utf8_lossy(&sent[2][2]).parse().unwrap();
    assert!(ttl > 90_000 && ttl <= 100_000, "{ttl}");
    assert_eq!(sent[1][3], dumped, "the payload is DUMP's");
    assert_eq!(t.q("EXISTS l e"), ":2");
    // The target refuses one key: the others go, it stays, and the error is the target's.
    t.check("SET bad 1 => +OK\nSET good 1 => +OK");
    let args = [
        "MIGRATE",
        "127.0.0.1",
        &p,
        "",
        "3",
        "1000",
        "KEYS",
        "good",
        "bad",
    ];
    assert_eq!(
        run(&mut t, &args),
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    assert_eq!(t.q("EXISTS good"), ":0");
    assert_eq!(t.q("EXISTS bad"), ":1");
    // After an error SELECT is sent again; a failing AUTH fails every key.
    let args = [
        "MIGRATE",
        "127.0.0.1",
        &p,
        "bad",
        "3",
        "1000",
        "AUTH",
        "wrong",
    ];
    assert_eq!(
        run(&mut t, &args),
        "-ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(
        names(&log)[2..],
        ["AUTH wrong", "SELECT 3", "RESTORE bad 0 <payload>"]
    );
    assert_eq!(t.q("EXISTS bad"), ":1");
}

#[test]
fn migrate_argument_and_connection_errors() {
    let mut t = TestServer::in_memory();
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = closed.to_string();
    t.check("SET a 1 => +OK");
    let run = |t: &mut TestServer, args: &[&str]| t.cmd(args).to_string();
    for (args, want) in [
        (
            vec!["MIGRATE", "127.0.0.1", &c, "a", "0", "100"],
            "-IOERR error or timeout connecting to the client",
        ),
        (
            vec!["MIGRATE", "127.0.0.1", &c, "a", "0", "100", "KEYS", "b"],
            "-ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
        ),
        (
            vec!["MIGRATE", "127.0.0.1", &c, "a", "0", "100", "FOO"],
            "-ERR syntax error",
        ),
        (
            vec!["MIGRATE", "127.0.0.1", &c, "a", "0", "100", "AUTH"],
            "-ERR syntax error",
        ),
        (
            vec!["MIGRATE", "127.0.0.1", &c, "a", "0", "x"],
            "-ERR value is not an integer or out of range",
        ),
        (
            vec!["MIGRATE", "127.0.0.1", &c, "a", "x", "100"],
            "-ERR value is not an integer or out of range",
        ),
        (
            vec!["MIGRATE", "127.0.0.1", &c, "a", "0"],
            "-ERR wrong number of arguments for 'migrate' command",
        ),
    ] {
        assert_eq!(run(&mut t, &args), want, "{args:?}");
    }
    assert_eq!(t.q("EXISTS a"), ":1");
}

/// MIGRATE propagates as the deletion of the keys it moved (Redis's migrateCommand), only
/// those the target acknowledged; with COPY nothing changed here and nothing propagates.
#[test]
fn migrate_propagates_the_deletion_of_the_keys_it_moved() {
    let (port, _log) = target();
    let p = port.to_string();
    let mut t = TestServer::in_memory();
    let effects = t.record_effects();
    t.check(
        r#"
            SET a 1 => +OK
            SET bad 2 => +OK
            SET c 3 => +OK
        "#,
    );
    effects.take();
    let r = t.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        &p,
        "",
        "0",
        "5000",
        "COPY",
        "KEYS",
        "a",
        "c",
    ]);
    assert_eq!(r, Reply::Simple("OK".into()));
    assert_eq!(effects.take(), Vec::<String>::new(), "COPY deletes nothing");
    let r = t.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        &p,
        "",
        "0",
        "5000",
        "KEYS",
        "a",
        "bad",
        "c",
    ]);
    assert!(matches!(r, Reply::Error(_)), "{r}");
    assert_eq!(effects.take(), vec!["DEL a c".to_string()]);
}

/// MIGRATE's keys are found by its own parse (its stripes are taken for them alone, not
/// for every key of the store): the key, or what follows KEYS, past an AUTH password or a
/// host that reads "keys".
#[test]
fn migrate_keys_are_found_by_its_parse() {
    let mut t = TestServer::in_memory();
    t.check(
        r#"
            COMMAND GETKEYS MIGRATE h 1 k 0 5000 => ["k"]
            COMMAND GETKEYS MIGRATE h 1 "" 0 5000 COPY REPLACE KEYS a b => ["a", "b"]
            COMMAND GETKEYS MIGRATE h 1 "" 0 5000 AUTH keys KEYS a b => ["a", "b"]
            COMMAND GETKEYS MIGRATE h 1 "" 0 5000 AUTH2 keys keys KEYS c => ["c"]
            COMMAND GETKEYS MIGRATE KEYS 1 "" 0 5000 KEYS a => ["a"]
        "#,
    );
    let keys = |argv: &[&str]| {
        let argv: Vec<bytes::Bytes> = argv
            .iter()
            .map(|a| bytes::Bytes::copy_from_slice(a.as_bytes()))
            .collect();
        super::migrate::key_positions(&argv)
    };
    assert_eq!(keys(&["MIGRATE", "h", "1", "k", "0", "5000"]), Some(3..4));
    assert_eq!(
        keys(&["MIGRATE", "h", "1", "", "0", "5000", "KEYS", "a", "b"]),
        Some(7..9)
    );
    // Refused by the parse: no key is touched.
    assert_eq!(
        keys(&["MIGRATE", "h", "1", "k", "0", "5000", "KEYS", "a"]),
        None
    );
    assert_eq!(
        keys(&["MIGRATE", "h", "1", "k", "0", "5000", "BOGUS"]),
        None
    );
}
