//! Keyspace commands over TCP: RENAME, RENAMENX, COPY, SCAN (including a full iteration under
//! concurrent writes), RANDOMKEY, TOUCH, EXPIRETIME, PEXPIRETIME, and active expiry (keys
//! deleted without being read, also after a restart). Replies and error texts compared by
//! hand against redis-server 7.0.15.

mod common;

use common::{start, Client, V};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn int(n: i64) -> V {
    V::Int(n)
}

fn err(s: &str) -> V {
    V::err(s)
}

fn get_int(v: V) -> i64 {
    match v {
        V::Int(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn expired_keys(c: &mut Client) -> u64 {
    let V::Bulk(info) = c.q(&["INFO", "stats"]) else {
        panic!()
    };
    let info = String::from_utf8(info).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// One SCAN call: the next cursor and the keys.
fn scan_once(c: &mut Client, cursor: &str, extra: &[&str]) -> (String, Vec<String>) {
    let mut args = vec!["SCAN", cursor];
    args.extend_from_slice(extra);
    match c.q(&args) {
        V::Array(v) => {
            let [V::Bulk(cur), V::Array(keys)] = &v[..] else {
                panic!("{v:?}")
            };
            let keys = keys
                .iter()
                .map(|k| match k {
                    V::Bulk(b) => String::from_utf8(b.clone()).unwrap(),
                    other => panic!("{other:?}"),
                })
                .collect();
            (String::from_utf8(cur.clone()).unwrap(), keys)
        }
        other => panic!("{other:?}"),
    }
}

/// A full SCAN iteration: the union of the keys and the number of calls.
fn scan_all(c: &mut Client, extra: &[&str]) -> (BTreeSet<String>, usize) {
    let (mut cursor, mut all, mut calls) = ("0".to_string(), BTreeSet::new(), 0);
    loop {
        let (next, keys) = scan_once(c, &cursor, extra);
        calls += 1;
        all.extend(keys);
        if next == "0" {
            return (all, calls);
        }
        cursor = next;
    }
}

#[test]
fn rename_and_renamenx() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["RENAME", "nokey", "b"]), err("ERR no such key"));
    assert_eq!(c.q(&["RENAMENX", "nokey", "b"]), err("ERR no such key"));
    assert_eq!(c.q(&["RENAME", "nokey", "nokey"]), err("ERR no such key"));
    assert_eq!(
        c.q(&["RENAME", "a"]),
        err("ERR wrong number of arguments for 'rename' command")
    );
    assert_eq!(c.q(&["SET", "a", "1", "PX", "50000"]), V::ok());
    assert_eq!(c.q(&["RENAME", "a", "a"]), V::ok());
    assert_eq!(c.q(&["RENAMENX", "a", "a"]), int(0));
    assert_eq!(c.q(&["RENAME", "a", "b"]), V::ok());
    assert_eq!(c.q(&["EXISTS", "a"]), int(0));
    assert_eq!(c.q(&["GET", "b"]), V::bulk("1"));
    let t = get_int(c.q(&["PTTL", "b"]));
    assert!((49_000..=50_000).contains(&t), "the TTL moves: {t}");
    // RENAME overwrites the destination (and its expiry); RENAMENX does not.
    assert_eq!(c.q(&["SET", "c", "3"]), V::ok());
    assert_eq!(c.q(&["RENAMENX", "b", "c"]), int(0));
    assert_eq!(c.q(&["GET", "c"]), V::bulk("3"));
    assert_eq!(c.q(&["SET", "d", "4", "EX", "100"]), V::ok());
    assert_eq!(c.q(&["RENAME", "c", "d"]), V::ok());
    assert_eq!(c.q(&["GET", "d"]), V::bulk("3"));
    assert_eq!(c.q(&["TTL", "d"]), int(-1));
    assert_eq!(c.q(&["RENAMENX", "d", "e"]), int(1));
    assert_eq!(
        c.q(&["MGET", "d", "e"]),
        V::Array(vec![V::NilBulk, V::bulk("3")])
    );
    // An expired source is absent.
    assert_eq!(c.q(&["SET", "x", "v", "PX", "1"]), V::ok());
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(c.q(&["RENAME", "x", "y"]), err("ERR no such key"));
    assert_eq!(c.q(&["DBSIZE"]), int(2));
    s.shutdown().unwrap();
}

#[test]
fn copy_with_db_and_replace() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "a", "1", "EX", "100"]), V::ok());
    assert_eq!(
        c.q(&["COPY", "a", "a"]),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(
        c.q(&["COPY", "nokey", "nokey"]),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(
        c.q(&["COPY", "a", "b", "DB", "99"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        c.q(&["COPY", "a", "b", "DB", "-1"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        c.q(&["COPY", "a", "b", "DB", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.q(&["COPY", "a", "b", "DB", "4294967296"]),
        err("ERR value is out of range, value must between -2147483648 and 2147483647")
    );
    assert_eq!(
        c.q(&["COPY", "a", "b", "DB", "9223372036854775808"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.q(&["COPY", "a", "b", "DB"]), err("ERR syntax error"));
    assert_eq!(c.q(&["COPY", "a", "b", "foo"]), err("ERR syntax error"));
    assert_eq!(
        c.q(&["COPY", "a"]),
        err("ERR wrong number of arguments for 'copy' command")
    );
    assert_eq!(c.q(&["COPY", "nokey", "b"]), int(0));
    assert_eq!(c.q(&["COPY", "a", "b"]), int(1));
    let t = get_int(c.q(&["TTL", "b"]));
    assert!((99..=100).contains(&t), "the TTL is copied: {t}");
    assert_eq!(c.q(&["SET", "a", "2"]), V::ok());
    assert_eq!(c.q(&["GET", "b"]), V::bulk("1"), "a copy, not a link");
    assert_eq!(c.q(&["COPY", "a", "b"]), int(0));
    assert_eq!(c.q(&["COPY", "a", "b", "REPLACE", "REPLACE"]), int(1));
    assert_eq!(c.q(&["GET", "b"]), V::bulk("2"));
    assert_eq!(c.q(&["TTL", "b"]), int(-1));
    // Same name in another database; the last DB option wins.
    assert_eq!(c.q(&["COPY", "a", "a", "DB", "0", "DB", "1"]), int(1));
    assert_eq!(c.q(&["COPY", "a", "a", "db", "1"]), int(0));
    assert_eq!(c.q(&["SET", "a", "3"]), V::ok());
    assert_eq!(c.q(&["COPY", "a", "a", "replace", "db", "1"]), int(1));
    assert_eq!(c.q(&["SELECT", "1"]), V::ok());
    assert_eq!(c.q(&["GET", "a"]), V::bulk("3"));
    assert_eq!(c.q(&["DBSIZE"]), int(1));
    s.shutdown().unwrap();
}

#[test]
fn scan_arguments_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(scan_all(&mut c, &[]).0, BTreeSet::new());
    assert_eq!(scan_once(&mut c, "0", &[]), ("0".to_string(), vec![]));
    assert_eq!(c.q(&["SCAN", "x"]), err("ERR invalid cursor"));
    assert_eq!(c.q(&["SCAN", " 1"]), err("ERR invalid cursor"));
    assert_eq!(
        c.q(&["SCAN", "18446744073709551616"]),
        err("ERR invalid cursor")
    );
    assert_eq!(c.q(&["SCAN", "x", "COUNT", "0"]), err("ERR invalid cursor"));
    assert_eq!(c.q(&["SCAN", "0", "COUNT", "0"]), err("ERR syntax error"));
    assert_eq!(c.q(&["SCAN", "0", "COUNT", "-1"]), err("ERR syntax error"));
    assert_eq!(
        c.q(&["SCAN", "0", "COUNT", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.q(&["SCAN", "0", "MATCH"]), err("ERR syntax error"));
    assert_eq!(c.q(&["SCAN", "0", "TYPE"]), err("ERR syntax error"));
    assert_eq!(c.q(&["SCAN", "0", "foo", "bar"]), err("ERR syntax error"));
    assert_eq!(
        c.q(&["SCAN"]),
        err("ERR wrong number of arguments for 'scan' command")
    );

    let mut want = BTreeSet::new();
    for i in 0..300 {
        let k = format!("key:{i}");
        assert_eq!(c.q(&["SET", &k, "v"]), V::ok());
        want.insert(k);
    }
    // Many keys of one slot sharing a long prefix: their cursors are kept by the server.
    for i in 0..50 {
        let k = format!("{{tag}}:common-prefix:{i}");
        assert_eq!(c.q(&["SET", &k, "v"]), V::ok());
        want.insert(k);
    }
    assert_eq!(c.q(&["SET", "short", "v", "PX", "1"]), V::ok());
    std::thread::sleep(Duration::from_millis(5));
    let (all, calls) = scan_all(&mut c, &[]);
    assert_eq!(all, want, "expired keys are not returned");
    assert!(calls > 10, "COUNT 10 by default: {calls} calls");
    let (all, calls) = scan_all(&mut c, &["COUNT", "1000"]);
    assert_eq!((all, calls), (want.clone(), 1));
    let (all, _) = scan_all(&mut c, &["COUNT", "7", "MATCH", "key:1*"]);
    let ones: BTreeSet<String> = want
        .iter()
        .filter(|k| k.starts_with("key:1"))
        .cloned()
        .collect();
    assert_eq!(all, ones);
    assert_eq!(scan_all(&mut c, &["TYPE", "STRING"]).0, want);
    assert_eq!(scan_all(&mut c, &["TYPE", "hash"]).0, BTreeSet::new());
    assert_eq!(scan_all(&mut c, &["TYPE", "nosuchtype"]).0, BTreeSet::new());
    let (mut cursor, mut tagged) = ("0".to_string(), BTreeSet::new());
    loop {
        let (next, keys) = scan_once(&mut c, &cursor, &["COUNT", "3", "MATCH", "{tag}*"]);
        assert!(keys.len() <= 3, "COUNT 3 gave {keys:?}");
        tagged.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(tagged.len(), 50);
    // Options may repeat; the last one wins.
    let (all, _) = scan_all(
        &mut c,
        &["MATCH", "x", "MATCH", "*", "COUNT", "1", "COUNT", "50"],
    );
    assert_eq!(all, want);
    // Any integer is a cursor: it resumes somewhere and the iteration still ends.
    for cur in ["-1", "18446744073709551615", "12345", "+0", ""] {
        let (mut cursor, mut n) = (cur.to_string(), 0);
        loop {
            let (next, _) = scan_once(&mut c, &cursor, &["COUNT", "100"]);
            n += 1;
            assert!(n < 100, "cursor {cur} does not end");
            if next == "0" {
                break;
            }
            cursor = next;
        }
    }
    s.shutdown().unwrap();
}

#[test]
fn scan_under_concurrent_writes_returns_every_stable_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let mut stable = BTreeSet::new();
    for i in 0..2000 {
        let k = format!("stable:{i}");
        assert_eq!(c.q(&["SET", &k, "v"]), V::ok());
        stable.insert(k);
    }
    // One slot with many keys sharing a long prefix: cursors from the server's table.
    for i in 0..500 {
        let k = format!("{{one-slot}}:stable:{i}");
        assert_eq!(c.q(&["SET", &k, "v"]), V::ok());
        stable.insert(k);
    }
    for i in 0..500 {
        assert_eq!(c.q(&["SET", &format!("doomed:{i}"), "v"]), V::ok());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, addr) = (stop.clone(), s.local_addr());
        std::thread::spawn(move || {
            let mut w = Client::connect(addr);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Inserts spread over every slot, deletes, and rewrites of stable keys.
                assert_eq!(w.q(&["SET", &format!("churn:{i}"), "v"]), V::ok());
                let k = format!("{{one-slot}}:stable:{}x{i}", i % 500);
                assert_eq!(w.q(&["SET", &k, "v"]), V::ok());
                if i.is_multiple_of(3) {
                    w.q(&["DEL", &format!("{{one-slot}}:stable:{}x{}", i % 500, i / 3)]);
                }
                if i.is_multiple_of(2) {
                    w.q(&["DEL", &format!("churn:{}", i / 2)]);
                }
                if i < 500 {
                    assert_eq!(w.q(&["DEL", &format!("doomed:{i}")]), int(1));
                }
                assert_eq!(w.q(&["SET", &format!("stable:{}", i % 2000), "w"]), V::ok());
                i += 1;
            }
            i
        })
    };
    let mut seen = BTreeSet::new();
    let (mut cursor, mut calls) = ("0".to_string(), 0);
    loop {
        let (next, keys) = scan_once(&mut c, &cursor, &["COUNT", "5"]);
        seen.extend(keys);
        calls += 1;
        if next == "0" {
            break;
        }
        cursor = next;
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(writes > 0 && calls > 100, "{writes} writes, {calls} calls");
    let missing: Vec<&String> = stable.difference(&seen).collect();
    assert!(missing.is_empty(), "SCAN lost {missing:?}");
    s.shutdown().unwrap();
}

#[test]
fn randomkey_touch_and_expiretime() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["RANDOMKEY"]), V::NilBulk);
    assert_eq!(
        c.q(&["RANDOMKEY", "x"]),
        err("ERR wrong number of arguments for 'randomkey' command")
    );
    assert_eq!(c.q(&["SET", "gone", "v", "PX", "1"]), V::ok());
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(c.q(&["RANDOMKEY"]), V::NilBulk, "never an expired key");
    assert_eq!(c.q(&["SET", "only", "v"]), V::ok());
    for _ in 0..20 {
        assert_eq!(c.q(&["RANDOMKEY"]), V::bulk("only"));
    }
    let mut keys = BTreeSet::new();
    for k in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        assert_eq!(c.q(&["SET", k, "v"]), V::ok());
    }
    for _ in 0..200 {
        let V::Bulk(k) = c.q(&["RANDOMKEY"]) else {
            panic!()
        };
        keys.insert(String::from_utf8(k).unwrap());
    }
    assert!(keys.len() > 2, "random keys: {keys:?}");
    assert_eq!(c.q(&["SELECT", "2"]), V::ok());
    assert_eq!(c.q(&["RANDOMKEY"]), V::NilBulk, "per database");
    assert_eq!(c.q(&["SELECT", "0"]), V::ok());

    assert_eq!(c.q(&["TOUCH", "a", "nokey", "a", "only"]), int(3));
    assert_eq!(
        c.q(&["TOUCH"]),
        err("ERR wrong number of arguments for 'touch' command")
    );
    assert_eq!(c.q(&["EXPIRETIME", "a"]), int(-1));
    assert_eq!(c.q(&["PEXPIRETIME", "a"]), int(-1));
    assert_eq!(c.q(&["EXPIRETIME", "nokey"]), int(-2));
    assert_eq!(c.q(&["PEXPIRETIME", "nokey"]), int(-2));
    assert_eq!(c.q(&["SET", "e", "v", "PXAT", "99999999999500"]), V::ok());
    assert_eq!(c.q(&["PEXPIRETIME", "e"]), int(99_999_999_999_500));
    assert_eq!(c.q(&["EXPIRETIME", "e"]), int(100_000_000_000), "rounded");
    assert_eq!(c.q(&["EXPIREAT", "e", "99999999999"]), int(1));
    assert_eq!(c.q(&["EXPIRETIME", "e"]), int(99_999_999_999));
    assert_eq!(
        c.q(&["EXPIRETIME"]),
        err("ERR wrong number of arguments for 'expiretime' command")
    );
    s.shutdown().unwrap();
}

/// Waits up to `limit` for `cond`.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

#[test]
fn active_expiry_deletes_keys_nobody_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    for i in 0..200 {
        assert_eq!(c.q(&["SET", &format!("t:{i}"), "v", "PX", "100"]), V::ok());
    }
    assert_eq!(c.q(&["SET", "persisted", "v", "PX", "100"]), V::ok());
    assert_eq!(c.q(&["PERSIST", "persisted"]), int(1));
    assert_eq!(c.q(&["SET", "overwritten", "v", "PX", "100"]), V::ok());
    assert_eq!(c.q(&["SET", "overwritten", "v"]), V::ok());
    assert_eq!(c.q(&["SET", "later", "v", "EX", "100"]), V::ok());
    assert_eq!(c.q(&["SELECT", "5"]), V::ok());
    assert_eq!(c.q(&["SET", "other-db", "v", "PX", "100"]), V::ok());
    assert_eq!(c.q(&["SELECT", "0"]), V::ok());
    assert!(
        eventually(Duration::from_secs(5), || expired_keys(&mut c) == 201),
        "expired_keys: {}",
        expired_keys(&mut c)
    );
    assert_eq!(c.q(&["DBSIZE"]), int(3));
    assert_eq!(scan_all(&mut c, &[]).0.len(), 3);
    assert_eq!(c.q(&["GET", "persisted"]), V::bulk("v"));
    assert_eq!(c.q(&["GET", "overwritten"]), V::bulk("v"));
    assert_eq!(expired_keys(&mut c), 201, "each key counted once");
    let V::Bulk(info) = c.q(&["INFO", "stats"]) else {
        panic!()
    };
    let info = String::from_utf8(info).unwrap();
    let stale: f64 = info
        .lines()
        .find_map(|l| l.strip_prefix("expired_stale_perc:"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(stale > 0.0 && stale <= 100.0, "{info}");
    assert!(
        info.contains("\r\nexpired_time_cap_reached_count:"),
        "{info}"
    );
    s.shutdown().unwrap();
}

#[test]
fn ttls_survive_a_restart_and_expire_actively_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["SET", "short", "v", "PX", "1500"]), V::ok());
    assert_eq!(c.q(&["SET", "long", "v", "PX", "60000"]), V::ok());
    assert_eq!(c.q(&["SELECT", "3"]), V::ok());
    assert_eq!(c.q(&["SET", "short3", "v", "PX", "1500"]), V::ok());
    s.shutdown().unwrap();

    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let t = get_int(c.q(&["PTTL", "long"]));
    assert!((50_000..=60_000).contains(&t), "{t}");
    // Neither short key is read again: active expiry, from the index rebuilt at open.
    assert!(
        eventually(Duration::from_secs(5), || expired_keys(&mut c) == 2),
        "expired_keys: {}",
        expired_keys(&mut c)
    );
    assert_eq!(c.q(&["DBSIZE"]), int(1));
    assert_eq!(c.q(&["GET", "long"]), V::bulk("v"));
    assert_eq!(c.q(&["EXISTS", "short"]), int(0));
    s.shutdown().unwrap();

    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["DBSIZE"]), int(1));
    assert_eq!(c.q(&["SELECT", "3"]), V::ok());
    assert_eq!(c.q(&["DBSIZE"]), int(0));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        expired_keys(&mut c),
        0,
        "deleted for good before the restart"
    );
    s.shutdown().unwrap();
}
