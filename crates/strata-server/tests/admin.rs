//! Connection and server administration: CLIENT, RESET, CONFIG RESETSTAT / REWRITE / tuning
//! directives, SLOWLOG, MEMORY, OBJECT, LASTSAVE, the Unix socket and output-buffer limits.

mod common;

use common::{encode, start, Client, V};
use std::time::{Duration, Instant};

fn int(n: i64) -> V {
    V::Int(n)
}

fn text(v: V) -> String {
    match v {
        V::Bulk(b) | V::Verbatim(_, b) => String::from_utf8(b).unwrap(),
        other => panic!("not a string: {other:?}"),
    }
}

/// `key=value` fields of one CLIENT LIST line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

#[test]
fn client_id_names_list_and_info() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut a = Client::connect(s.local_addr());
    let mut b = Client::connect(s.local_addr());
    let V::Int(id_a) = a.q(&["CLIENT", "ID"]) else {
        panic!()
    };
    let V::Int(id_b) = b.q(&["CLIENT", "ID"]) else {
        panic!()
    };
    assert!(id_b > id_a);
    assert_eq!(a.q(&["CLIENT", "GETNAME"]), V::NilBulk);
    assert_eq!(
        a.q(&["CLIENT", "SETNAME", "a b"]),
        V::err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(a.q(&["CLIENT", "SETNAME", "alpha"]), V::ok());
    assert_eq!(a.q(&["CLIENT", "GETNAME"]), V::bulk("alpha"));
    assert_eq!(b.q(&["SELECT", "3"]), V::ok());
    let list = text(a.q(&["CLIENT", "LIST"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    let la = lines
        .iter()
        .find(|l| l.starts_with(&format!("id={id_a} ")))
        .unwrap();
    let lb = lines
        .iter()
        .find(|l| l.starts_with(&format!("id={id_b} ")))
        .unwrap();
    assert_eq!(field(la, "name"), "alpha");
    assert_eq!(field(la, "cmd"), "client|list");
    assert_eq!(field(la, "flags"), "N");
    assert_eq!(field(la, "laddr"), s.local_addr().to_string());
    assert_eq!(field(lb, "db"), "3");
    assert_eq!(field(lb, "cmd"), "select");
    assert!(la.ends_with("user=default redir=-1 resp=2"), "{la}");
    // Filters.
    let only_b = text(a.q(&["CLIENT", "LIST", "ID", &id_b.to_string()]));
    assert_eq!(only_b.lines().count(), 1);
    assert!(only_b.starts_with(&format!("id={id_b} ")));
    assert_eq!(text(a.q(&["CLIENT", "LIST", "TYPE", "pubsub"])), "");
    assert_eq!(
        text(a.q(&["CLIENT", "LIST", "TYPE", "normal"]))
            .lines()
            .count(),
        2
    );
    assert_eq!(
        a.q(&["CLIENT", "LIST", "TYPE", "foo"]),
        V::err("ERR Unknown client type 'foo'")
    );
    assert_eq!(
        a.q(&["CLIENT", "LIST", "ID", "x"]),
        V::err("ERR Invalid client ID")
    );
    let info = text(b.q(&["CLIENT", "INFO"]));
    assert!(info.starts_with(&format!("id={id_b} ")) && info.ends_with('\n'));
    assert_eq!(field(info.trim_end(), "cmd"), "client|info");
    // SETINFO, NO-EVICT, NO-TOUCH.
    assert_eq!(a.q(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"]), V::ok());
    assert_eq!(
        a.q(&["CLIENT", "SETINFO", "foo", "x"]),
        V::err("ERR Unrecognized option 'foo'")
    );
    assert_eq!(a.q(&["CLIENT", "NO-EVICT", "on"]), V::ok());
    assert_eq!(
        field(text(a.q(&["CLIENT", "INFO"])).trim_end(), "flags"),
        "e"
    );
    assert_eq!(a.q(&["CLIENT", "NO-EVICT", "off"]), V::ok());
    assert_eq!(a.q(&["CLIENT", "NO-TOUCH", "OFF"]), V::ok());
    assert_eq!(
        field(text(a.q(&["CLIENT", "INFO"])).trim_end(), "flags"),
        "N"
    );
    assert_eq!(
        a.q(&["CLIENT", "NO-EVICT", "maybe"]),
        V::err("ERR syntax error")
    );
    let V::Array(help) = a.q(&["CLIENT", "HELP"]) else {
        panic!()
    };
    assert!(help.len() > 10);
    s.shutdown().unwrap();
}

#[test]
fn client_kill_closes_the_other_connection() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut a = Client::connect(s.local_addr());
    let mut b = Client::connect(s.local_addr());
    let mut c = Client::connect(s.local_addr());
    let V::Int(id_b) = b.q(&["CLIENT", "ID"]) else {
        panic!()
    };
    let info_c = text(c.q(&["CLIENT", "INFO"]));
    let addr_c = field(info_c.trim_end(), "addr").to_string();
    assert_eq!(
        a.q(&["CLIENT", "KILL", "1.2.3.4:5"]),
        V::err("ERR No such client")
    );
    assert_eq!(
        a.q(&["CLIENT", "KILL", "ID", "0"]),
        V::err("ERR client-id should be greater than 0")
    );
    assert_eq!(
        a.q(&["CLIENT", "KILL", "USER", "bob"]),
        V::err("ERR No such user 'bob'")
    );
    assert_eq!(a.q(&["CLIENT", "KILL", "ID", &id_b.to_string()]), int(1));
    assert!(b.closed(), "b was killed");
    assert_eq!(a.q(&["CLIENT", "KILL", &addr_c]), V::ok());
    assert!(c.closed(), "c was killed");
    // SKIPME yes (the default) spares the caller; the killed clients are gone.
    assert_eq!(a.q(&["CLIENT", "KILL", "TYPE", "normal"]), int(0));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list = text(a.q(&["CLIENT", "LIST"]));
        if list.lines().count() == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{list}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SKIPME no kills the caller after its reply.
    assert_eq!(a.q(&["CLIENT", "KILL", "SKIPME", "no"]), int(1));
    assert!(a.closed());
    s.shutdown().unwrap();
}

#[test]
fn client_reply_and_reset() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--requirepass", "pw"]);
    let mut a = Client::connect(s.local_addr());
    assert_eq!(a.q(&["AUTH", "pw"]), V::ok());
    let mut batch = encode(&[b"CLIENT", b"REPLY", b"OFF"]);
    batch.extend(encode(&[b"SET", b"k", b"1"]));
    batch.extend(encode(&[b"CLIENT", b"REPLY", b"ON"]));
    batch.extend(encode(&[b"CLIENT", b"REPLY", b"SKIP"]));
    batch.extend(encode(&[b"GET", b"k"]));
    batch.extend(encode(&[b"INCR", b"k"]));
    a.send(&batch);
    assert_eq!(a.read(), V::ok()); // CLIENT REPLY ON
    assert_eq!(a.read(), int(2)); // INCR; SET and GET were silent
    assert_eq!(a.q(&["CLIENT", "SETNAME", "n"]), V::ok());
    assert_eq!(a.q(&["SELECT", "2"]), V::ok());
    assert!(matches!(a.q(&["HELLO", "3"]), V::Map(_)));
    assert_eq!(a.q(&["RESET"]), V::Simple("RESET".into()));
    assert_eq!(
        a.q(&["GET", "k"]),
        V::err("NOAUTH Authentication required.")
    );
    assert_eq!(a.q(&["AUTH", "pw"]), V::ok());
    assert_eq!(a.q(&["CLIENT", "GETNAME"]), V::NilBulk); // RESP2 again
    assert_eq!(a.q(&["GET", "k"]), V::bulk("2")); // database 0
    s.shutdown().unwrap();
}

#[test]
fn config_tuning_directives_and_resetstat() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--maxmemory", "2mb", "--hz", "20"]);
    let mut a = Client::connect(s.local_addr());
    let get = |a: &mut Client, name: &str| match a.q(&["CONFIG", "GET", name]) {
        V::Array(v) if v.len() == 2 => v[1].clone(),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(get(&mut a, "maxmemory"), V::bulk("2097152"));
    assert_eq!(get(&mut a, "hz"), V::bulk("20"));
    assert_eq!(get(&mut a, "hash-max-listpack-entries"), V::bulk("512"));
    assert_eq!(get(&mut a, "tcp-keepalive"), V::bulk("300"));
    assert_eq!(get(&mut a, "slowlog-max-len"), V::bulk("128"));
    assert_eq!(
        get(&mut a, "client-output-buffer-limit"),
        V::bulk("normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60")
    );
    assert_eq!(get(&mut a, "hot-memory"), V::bulk("268435456"));
    assert_eq!(
        a.q(&["CONFIG", "SET", "hash-max-ziplist-entries", "100"]),
        V::ok()
    );
    assert_eq!(get(&mut a, "hash-max-listpack-entries"), V::bulk("100"));
    assert_eq!(
        a.q(&["CONFIG", "SET", "maxmemory-policy", "foo"]),
        V::err(
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - \
             argument(s) must be one of the following: volatile-lru, volatile-lfu, \
             volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
        )
    );
    assert_eq!(
        a.q(&["CONFIG", "SET", "client-output-buffer-limit", "normal 1mb"]),
        V::err(
            "ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') \
             - Wrong number of arguments in buffer limit configuration."
        )
    );
    assert_eq!(
        a.q(&["CONFIG", "SET", "engine-write-buffer-size", "1mb"]),
        V::err(
            "ERR CONFIG SET failed (possibly related to argument 'engine-write-buffer-size') - \
             can't set immutable config"
        )
    );
    assert_eq!(get(&mut a, "engine-write-buffer-size"), V::bulk("16777216"));
    // RESETSTAT zeroes INFO's counters.
    a.q(&["PING"]);
    assert_eq!(a.q(&["CONFIG", "RESETSTAT"]), V::ok());
    let info = text(a.q(&["INFO", "stats"]));
    assert!(info.contains("total_commands_processed:1\r\n"), "{info}");
    assert_eq!(
        a.q(&["CONFIG", "REWRITE"]),
        V::err("ERR The server is running without a config file")
    );
    s.shutdown().unwrap();
}

#[test]
fn unknown_engine_directive_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.conf");
    std::fs::write(&f, "engine-write-buffer-size 8mb\nengine-frobnicate 1\n").unwrap();
    let e = strata_server::Config::from_args(&[f.display().to_string()]).unwrap_err();
    assert_eq!(
        e.0,
        format!("{}:2: unknown directive 'engine-frobnicate'", f.display())
    );
    let c = strata_server::Config::from_args(&[
        "--engine-write-buffer-size".into(),
        "8mb".into(),
        "--engine-value-separation-threshold".into(),
        "1kb".into(),
    ])
    .unwrap();
    let o = c.engine.options();
    assert_eq!(o.write_buffer_bytes, 8 << 20);
    assert_eq!(o.sep_threshold_bytes, 1024);
}

#[test]
fn config_rewrite_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("strata.conf");
    let data = dir.path().join("data");
    std::fs::write(
        &f,
        format!(
            "# my settings\nport 0\ndir {}\nshards 2\n\n# keep me\ntimeout 5\ntimeout 6\n",
            data.display()
        ),
    )
    .unwrap();
    let cfg = strata_server::Config::from_args(&[f.display().to_string()]).unwrap();
    assert_eq!(cfg.timeout_secs, 6);
    let s = strata_server::start(cfg, Default::default()).unwrap();
    let mut a = Client::connect(s.local_addr());
    assert_eq!(
        a.q(&[
            "CONFIG",
            "SET",
            "timeout",
            "42",
            "maxmemory-policy",
            "allkeys-lru"
        ]),
        V::ok()
    );
    let setuser = ["ACL", "SETUSER", "alice", "on", ">pw", "~a*", "+get"];
    assert_eq!(a.q(&setuser), V::ok());
    assert_eq!(a.q(&["CONFIG", "REWRITE"]), V::ok());
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.starts_with("# my settings\nport 0\n"), "{text}");
    assert!(text.contains("# keep me\ntimeout 42\n"), "{text}");
    assert_eq!(text.matches("timeout").count(), 1, "{text}");
    // Users from `user` directives (none here) are written back, as redis-server 7.0.15
    // writes them: every user, the default one too.
    let sha_pw = "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4";
    assert!(
        text.ends_with(&format!(
            "# Generated by CONFIG REWRITE\nmaxmemory-policy allkeys-lru\n\
             user alice on #{sha_pw} ~a* resetchannels -@all +get\n\
             user default on nopass ~* &* +@all\n"
        )),
        "{text}"
    );
    s.shutdown().unwrap();
    let again = strata_server::Config::from_args(&[f.display().to_string()]).unwrap();
    assert_eq!(again.timeout_secs, 42);
    assert_eq!(again.get("maxmemory-policy").unwrap(), "allkeys-lru");
    let s = strata_server::start(again, Default::default()).unwrap();
    let mut a = Client::connect(s.local_addr());
    assert_eq!(a.q(&["AUTH", "alice", "pw"]), V::ok());
    s.shutdown().unwrap();
}

#[test]
fn slowlog_records_trims_and_resets() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &["--slowlog-log-slower-than", "0"]);
    let mut a = Client::connect(s.local_addr());
    assert_eq!(a.q(&["CLIENT", "SETNAME", "slow"]), V::ok());
    let big = "x".repeat(200);
    assert_eq!(a.q(&["SET", "k", &big]), V::ok());
    let many: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let mut argv = vec!["DEL"];
    argv.extend(many.iter().map(|s| s.as_str()));
    assert_eq!(a.q(&argv), int(0));
    let V::Array(entries) = a.q(&["SLOWLOG", "GET", "2"]) else {
        panic!()
    };
    assert_eq!(entries.len(), 2);
    let V::Array(del) = &entries[0] else { panic!() };
    let V::Array(set) = &entries[1] else { panic!() };
    assert_eq!(del.len(), 6);
    let (V::Int(id_del), V::Int(id_set)) = (&del[0], &set[0]) else {
        panic!()
    };
    assert_eq!(*id_del, id_set + 1);
    assert!(matches!(del[1], V::Int(t) if t > 1_600_000_000));
    assert!(matches!(del[2], V::Int(us) if us >= 0));
    let V::Array(del_args) = &del[3] else {
        panic!()
    };
    assert_eq!(del_args.len(), 32);
    assert_eq!(del_args[31], V::bulk("... (10 more arguments)"));
    let V::Array(set_args) = &set[3] else {
        panic!()
    };
    assert_eq!(
        set_args[2],
        V::bulk(&format!("{}... (72 more bytes)", "x".repeat(128)))
    );
    let addr = text(a.q(&["CLIENT", "INFO"]));
    assert_eq!(del[4], V::bulk(field(addr.trim_end(), "addr")));
    assert_eq!(del[5], V::bulk("slow"));
    assert_eq!(
        a.q(&["SLOWLOG", "GET", "-2"]),
        V::err("ERR count should be greater than or equal to -1")
    );
    // slowlog-max-len bounds it; a negative threshold stops logging.
    assert_eq!(a.q(&["CONFIG", "SET", "slowlog-max-len", "3"]), V::ok());
    assert_eq!(a.q(&["SLOWLOG", "LEN"]), int(3));
    assert_eq!(a.q(&["SLOWLOG", "RESET"]), V::ok());
    assert_eq!(
        a.q(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        V::ok()
    );
    a.q(&["PING"]);
    // Only the RESET was logged: the CONFIG SET ended with logging off, as in Redis.
    assert_eq!(a.q(&["SLOWLOG", "LEN"]), int(1));
    assert_eq!(a.q(&["SLOWLOG", "LEN"]), int(1));
    s.shutdown().unwrap();
}

#[test]
fn memory_usage_object_and_lastsave() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut a = Client::connect(s.local_addr());
    a.q(&["SET", "i", "123"]);
    a.q(&["SET", "e", "hello"]);
    a.q(&["SET", "r", &"v".repeat(45)]);
    a.q(&["SET", "big", "123456789"]);
    assert_eq!(a.q(&["OBJECT", "ENCODING", "i"]), V::bulk("int"));
    assert_eq!(a.q(&["OBJECT", "ENCODING", "e"]), V::bulk("embstr"));
    assert_eq!(a.q(&["OBJECT", "ENCODING", "r"]), V::bulk("raw"));
    assert_eq!(a.q(&["OBJECT", "ENCODING", "none"]), V::NilBulk);
    assert_eq!(a.q(&["OBJECT", "REFCOUNT", "i"]), int(i64::from(i32::MAX)));
    assert_eq!(a.q(&["OBJECT", "REFCOUNT", "big"]), int(1));
    assert_eq!(a.q(&["OBJECT", "IDLETIME", "e"]), int(0));
    assert_eq!(
        a.q(&["OBJECT", "FREQ", "e"]),
        V::err(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please \
             note that when switching between policies at runtime LRU and LFU data will take \
             some time to adjust."
        )
    );
    assert_eq!(a.q(&["OBJECT", "FREQ", "none"]), V::NilBulk);
    let V::Int(small) = a.q(&["MEMORY", "USAGE", "e"]) else {
        panic!()
    };
    let V::Int(large) = a.q(&["MEMORY", "USAGE", "r", "SAMPLES", "0"]) else {
        panic!()
    };
    assert!(small > 6 && large - small == 40, "{small} {large}");
    assert_eq!(a.q(&["MEMORY", "USAGE", "none"]), V::NilBulk);
    assert_eq!(
        a.q(&["MEMORY", "USAGE", "e", "bar"]),
        V::err("ERR syntax error")
    );
    assert_eq!(
        a.q(&["MEMORY", "USAGE", "e", "SAMPLES", "x"]),
        V::err("ERR value is not an integer or out of range")
    );
    let V::Int(t) = a.q(&["LASTSAVE"]) else {
        panic!()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - 60..=now).contains(&t), "{t} {now}");
    for c in ["OBJECT", "MEMORY", "SLOWLOG"] {
        let V::Array(h) = a.q(&[c, "HELP"]) else {
            panic!()
        };
        assert!(matches!(&h[0], V::Simple(l) if l.starts_with(c)));
    }
    s.shutdown().unwrap();
}

#[cfg(unix)]
#[test]
fn unix_socket_serves_ping() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("strata.sock");
    let s = start(
        dir.path(),
        &[
            "--unixsocket",
            sock.to_str().unwrap(),
            "--unixsocketperm",
            "700",
        ],
    );
    assert_eq!(s.unix_path(), Some(sock.as_path()));
    let mut u = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    u.write_all(b"PING\r\n").unwrap();
    let mut buf = [0u8; 7];
    u.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"+PONG\r\n");
    u.write_all(&encode(&[b"CLIENT", b"INFO"])).unwrap();
    let mut got = Vec::new();
    while !got.ends_with(b"\n\r\n") {
        let mut b = [0u8; 512];
        let n = u.read(&mut b).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&b[..n]);
    }
    let line = String::from_utf8(got).unwrap();
    assert!(
        line.contains(&format!("addr={}:0 ", sock.display())),
        "{line}"
    );
    assert!(line.contains(" flags=U "), "{line}");
    drop(u);
    s.shutdown().unwrap();
    assert!(!sock.exists(), "the socket file is removed at shutdown");
}

#[test]
fn output_buffer_limit_disconnects_a_client_that_never_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(
        dir.path(),
        &[
            "--client-output-buffer-limit",
            "normal",
            "1mb",
            "256kb",
            "1",
        ],
    );
    let mut a = Client::connect(s.local_addr());
    let value = "v".repeat(256 * 1024);
    assert_eq!(a.q(&["SET", "big", &value]), V::ok());
    let mut greedy = Client::connect(s.local_addr());
    let mut batch = Vec::new();
    for _ in 0..100 {
        batch.extend(encode(&[b"GET", b"big"]));
    }
    let started = Instant::now();
    // 400 x 256 KiB = 100 MiB of replies asked for, none read. The writes may fail once
    // the server has closed the connection.
    let mut sent = 0;
    while sent < 4 && greedy.try_send(&batch).is_ok() {
        sent += 1;
    }
    // Meanwhile another client keeps being served.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert_eq!(a.q(&["PING"]), V::Simple("PONG".into()));
        let list = text(a.q(&["CLIENT", "LIST"]));
        if list.lines().count() == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the greedy client is still there: {list}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(greedy.closed());
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(a.q(&["GET", "big"]), V::Bulk(value.into_bytes()));
    s.shutdown().unwrap();
}

/// LOLWUT: the version line alone by default and for versions without art; version 5's
/// Braille Schotter and version 6's ANSI skyline with Redis's sizes and closing lines.
#[test]
fn lolwut_versions() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let text = |v: V| match v {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    let plain = text(c.q(&["LOLWUT"]));
    assert!(
        plain.starts_with("Redis ver. ") && plain.ends_with('\n') && plain.lines().count() == 1
    );
    assert_eq!(text(c.q(&["LOLWUT", "VERSION", "7", "x"])), plain);
    assert_eq!(
        c.q(&["LOLWUT", "VERSION", "x"]),
        V::err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.q(&["LOLWUT", "VERSION", "5", "x"]),
        V::err("ERR value is not an integer or out of range")
    );
    let five = text(c.q(&["LOLWUT", "VERSION", "5", "1", "1", "1"]));
    assert_eq!(
        five,
        format!("\u{280b}\n\nGeorg Nees - schotter, plotter on paper, 1968. {plain}")
    );
    let six = text(c.q(&["LOLWUT", "VERSION", "6", "12", "4"]));
    let lines: Vec<&str> = six.lines().collect();
    assert_eq!(lines.len(), 6);
    assert!(lines[..4]
        .iter()
        .all(|l| l.matches(" \x1b[0m").count() == 12));
    assert_eq!(
        lines[4],
        "Dedicated to the 8 bit game developers of past and present."
    );
    assert!(lines[5].starts_with("Original 8 bit image from Plaguemon by hikikomori. Redis ver."));
}
