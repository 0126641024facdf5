//! What each write propagates (`effects.rs`), through the in-process harness with a
//! recording sink ([`TestServer::record_effects`]). The expected argvs are those
//! redis-server 7.0.15 wrote to its AOF (`appendonly yes`, `appendfsync always`, active
//! expiry off with `DEBUG SET-ACTIVE-EXPIRE 0`) for the same commands, copied here with
//! their timestamps replaced by range checks; where this server differs on purpose, the
//! test says so.

use crate::test_server::{EffectLog, Reply, TestServer};
use std::time::Duration;

pub(super) fn server() -> (TestServer, EffectLog) {
    let t = TestServer::in_memory();
    let log = t.record_effects();
    (t, log)
}

/// Runs each space-separated command line; the lines propagated by all of them.
pub(super) fn run(t: &mut TestServer, log: &EffectLog, lines: &[&str]) -> Vec<String> {
    for l in lines {
        let r = t.q(l);
        assert!(!r.starts_with('-'), "{l}: {r}");
    }
    log.take()
}

fn now_ms() -> i64 {
    crate::store::now_ms() as i64
}

/// Checks that `line` is `prefix`, a time in ms within `lo..=hi`, then `suffix`.
#[track_caller]
fn assert_at(line: &str, prefix: &str, lo: i64, hi: i64, suffix: &str) {
    let rest = line
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{line:?} does not start with {prefix:?}"));
    let rest = rest
        .strip_suffix(suffix)
        .unwrap_or_else(|| panic!("{line:?} does not end with {suffix:?}"));
    let ms: i64 = rest
        .parse()
        .unwrap_or_else(|_| panic!("{line:?}: {rest:?}"));
    assert!((lo..=hi).contains(&ms), "{line:?}: {ms} not in {lo}..={hi}");
}

/// Members of an array reply, as strings.
fn members(r: &Reply) -> Vec<String> {
    match r {
        Reply::Array(v) | Reply::Set(v) => v
            .iter()
            .map(|x| match x {
                Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("not a bulk: {other}"),
            })
            .collect(),
        other => panic!("not an array: {other}"),
    }
}

#[test]
fn writes_that_change_nothing_propagate_nothing() {
    let (mut t, log) = server();
    let setup = [
        "SET a 1",
        "HSET h f v",
        "SADD s a",
        "ZADD z 1 a",
        "RPUSH l a",
        "PFADD p a",
        "SETBIT b 1 1",
        "XADD x 1-1 f v",
        "GEOADD g 13.36 38.11 m",
    ];
    assert_eq!(
        run(&mut t, &log, &setup),
        setup.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    );
    let nothing = [
        "SET a 2 NX",
        "SETNX a 2",
        "MSETNX a 1 c 2",
        "DEL nokey",
        "UNLINK nokey",
        "HDEL h nof",
        "HSETNX h f v",
        "SREM s nom",
        "SMOVE s s2 nom",
        "ZREM z nom",
        "ZADD z XX 2 nom",
        "ZADD z 1 a",
        "LREM l 0 nom",
        "LPUSHX nokey a",
        "PFADD p a",
        "EXPIRE nokey 10",
        "PERSIST a",
        "XDEL x 9-9",
        "XTRIM x MAXLEN 10",
        "GETDEL nokey",
        "GETEX a",
        "SPOP nokey",
        "SPOP s 0",
        "RENAMENX a s",
    ];
    assert_eq!(run(&mut t, &log, &nothing), Vec::<String>::new());
}

#[test]
fn set_with_a_relative_time_propagates_pxat() {
    let (mut t, log) = server();
    let lo = now_ms();
    let got = run(
        &mut t,
        &log,
        &[
            "SET a 1 EX 100",
            "SET a 1 PX 100000 NX",
            "SET n 1 NX GET EX 100",
            "SETEX s 100 v",
            "PSETEX p 100000 v",
        ],
    );
    let hi = now_ms();
    assert_eq!(got.len(), 4, "{got:?}");
    assert_at(&got[0], "SET a 1 PXAT ", lo + 100_000, hi + 100_000, "");
    assert_at(&got[1], "SET n 1 PXAT ", lo + 100_000, hi + 100_000, "");
    assert_at(&got[2], "SET s v PXAT ", lo + 100_000, hi + 100_000, "");
    assert_at(&got[3], "SET p v PXAT ", lo + 100_000, hi + 100_000, "");
    assert_eq!(
        run(
            &mut t,
            &log,
            &[
                "SET q 1 PXAT 9999999999000 GET",
                "SET q 2 EXAT 9999999999",
                "SET q 3 KEEPTTL",
                "SET q 4 GET",
                "SET q 5 XX get KEEPTTL",
                "GETSET q 6",
            ]
        ),
        [
            "SET q 1 PXAT 9999999999000",
            "SET q 2 PXAT 9999999999000",
            "SET q 3 KEEPTTL",
            "SET q 4",
            "SET q 5 XX KEEPTTL",
            "SET q 6",
        ]
    );
}

/// A SET whose time has passed: Redis propagates the SET (its expiry cycle deletes the key
/// later); this server deletes at once and propagates both, as one transaction.
#[test]
fn set_with_a_past_time_propagates_the_set_and_the_deletion() {
    let (mut t, log) = server();
    assert_eq!(
        run(&mut t, &log, &["SET a 2 EXAT 1"]),
        ["MULTI", "SET a 2 PXAT 1000", "DEL a", "EXEC"]
    );
    assert_eq!(t.q("EXISTS a"), ":0");
}

#[test]
fn expire_propagates_pexpireat_with_its_options() {
    let (mut t, log) = server();
    t.q("SET a v");
    log.take();
    let lo = now_ms();
    let got = run(
        &mut t,
        &log,
        &[
            "EXPIRE a 100",
            "EXPIRE a 100 NX",
            "PEXPIRE a 200000 GT",
            "EXPIREAT a 9999999999",
            "PEXPIREAT a 9999999999000 XX",
            "PERSIST a",
        ],
    );
    let hi = now_ms();
    assert_eq!(got.len(), 5, "{got:?}");
    assert_at(&got[0], "PEXPIREAT a ", lo + 100_000, hi + 100_000, "");
    assert_at(&got[1], "PEXPIREAT a ", lo + 200_000, hi + 200_000, " GT");
    assert_eq!(
        got[2..],
        [
            "PEXPIREAT a 9999999999000",
            "PEXPIREAT a 9999999999000 XX",
            "PERSIST a"
        ]
    );
    assert_eq!(run(&mut t, &log, &["EXPIRE a -1"]), ["DEL a"]);
    t.q("SET a v");
    assert_eq!(run(&mut t, &log, &["EXPIREAT a 1"]), ["SET a v", "DEL a"]);
}

#[test]
fn getex_and_getdel_propagate_what_they_did() {
    let (mut t, log) = server();
    t.q("SET a 1");
    log.take();
    let lo = now_ms();
    let got = run(
        &mut t,
        &log,
        &[
            "GETEX a EX 100",
            "GETEX a PERSIST",
            "GETEX a PERSIST",
            "GETEX a",
            "GETEX a PXAT 9999999999000",
            "GETEX a EXAT 1",
        ],
    );
    let hi = now_ms();
    assert_eq!(got.len(), 4, "{got:?}");
    assert_at(&got[0], "PEXPIREAT a ", lo + 100_000, hi + 100_000, "");
    assert_eq!(
        got[1..],
        ["PERSIST a", "PEXPIREAT a 9999999999000", "DEL a"]
    );
    assert_eq!(
        run(&mut t, &log, &["SET a 1", "GETDEL a", "GETDEL a"]),
        ["SET a 1", "DEL a"]
    );
}

/// `lazyfree-lazy-expire` turns the deletions of expired keys into UNLINK (lazy expiry,
/// EXPIRE and GETEX with a past time); `lazyfree-lazy-user-del` turns GETDEL's into UNLINK;
/// SPOP of the whole set stays DEL (all as Redis 7.0).
#[test]
fn lazyfree_directives_choose_unlink() {
    let (mut t, log) = server();
    t.q("CONFIG SET lazyfree-lazy-expire yes");
    assert!(log.take().is_empty());
    assert_eq!(
        run(
            &mut t,
            &log,
            &[
                "SET a 1",
                "EXPIRE a -1",
                "SET a 1",
                "GETEX a EXAT 1",
                "SET a 1",
                "GETDEL a"
            ]
        ),
        ["SET a 1", "UNLINK a", "SET a 1", "UNLINK a", "SET a 1", "DEL a"]
    );
    t.q("SET e 1 PX 1");
    std::thread::sleep(Duration::from_millis(5));
    log.take();
    assert_eq!(run(&mut t, &log, &["GET e"]), ["UNLINK e"]);
    t.q("CONFIG SET lazyfree-lazy-expire no");
    t.q("CONFIG SET lazyfree-lazy-user-del yes");
    assert!(log.take().is_empty());
    assert_eq!(
        run(
            &mut t,
            &log,
            &["SET a 1", "GETDEL a", "SET a 1", "DEL a", "SADD s a", "SPOP s 3"]
        ),
        ["SET a 1", "UNLINK a", "SET a 1", "DEL a", "SADD s a", "DEL s"]
    );
}

#[test]
fn float_increments_propagate_their_results() {
    let (mut t, log) = server();
    assert_eq!(
        run(
            &mut t,
            &log,
            &[
                "SET f 1.5",
                "INCRBYFLOAT f 1",
                "HSET h x 1",
                "HINCRBYFLOAT h x 2.5"
            ]
        ),
        [
            "SET f 1.5",
            "SET f 2.5 KEEPTTL",
            "HSET h x 1",
            "HSET h x 3.5"
        ]
    );
}

#[test]
fn spop_propagates_the_members_it_drew() {
    let (mut t, log) = server();
    t.q("SADD s a");
    log.take();
    assert_eq!(run(&mut t, &log, &["SPOP s"]), ["SREM s a"]);
    t.q("SADD s a b c d e");
    log.take();
    let one = members(&t.cmd(&["SPOP", "s", "1"]));
    assert_eq!(log.take(), [format!("SREM s {}", one[0])]);
    let two = members(&t.cmd(&["SPOP", "s", "2"]));
    let mut want = vec!["MULTI".to_string()];
    want.extend(two.iter().map(|m| format!("SREM s {m}")));
    want.push("EXEC".to_string());
    assert_eq!(log.take(), want);
    // More than SPOP_MOVE_STRATEGY_MUL times fewer left: the rebuilt-set path.
    t.q("SADD big 0 1 2 3 4 5 6 7 8 9 10 11");
    log.take();
    let popped = members(&t.cmd(&["SPOP", "big", "10"]));
    let got = log.take();
    assert_eq!(got.len(), 12);
    for (m, line) in popped.iter().zip(&got[1..11]) {
        assert_eq!(line, &format!("SREM big {m}"));
    }
    assert_eq!(run(&mut t, &log, &["SPOP s 10"]), ["DEL s"]);
    t.q("SADD s a b");
    log.take();
    assert_eq!(
        run(
            &mut t,
            &log,
            &["SRANDMEMBER s", "SRANDMEMBER s 2", "RANDOMKEY"]
        ),
        Vec::<String>::new()
    );
}

/// A key a command finds expired is deleted and propagated as `DEL` before the command's
/// own effects, the two wrapped in MULTI/EXEC (Redis 7.0's `propagatePendingCommands`).
#[test]
fn lazy_expiry_propagates_del_before_the_command() {
    let (mut t, log) = server();
    let expire_soon = |t: &mut TestServer, k: &str| {
        t.q(&format!("SET {k} 1 PX 1"));
        std::thread::sleep(Duration::from_millis(5));
    };
    expire_soon(&mut t, "a");
    log.take();
    assert_eq!(run(&mut t, &log, &["GET a"]), ["DEL a"]);
    expire_soon(&mut t, "a");
    log.take();
    assert_eq!(run(&mut t, &log, &["EXISTS a"]), ["DEL a"]);
    expire_soon(&mut t, "a");
    log.take();
    assert_eq!(
        run(&mut t, &log, &["APPEND a x"]),
        ["MULTI", "DEL a", "APPEND a x", "EXEC"]
    );
    expire_soon(&mut t, "e");
    log.take();
    assert_eq!(
        run(&mut t, &log, &["MULTI", "GET e", "SET q 1", "EXEC"]),
        ["MULTI", "DEL e", "SET q 1", "EXEC"]
    );
    expire_soon(&mut t, "e");
    log.take();
    assert_eq!(
        run(&mut t, &log, &["MULTI", "GET e", "GET q", "EXEC"]),
        ["DEL e"]
    );
}

#[test]
fn transactions_are_wrapped_only_around_more_than_one_effect() {
    let (mut t, log) = server();
    assert_eq!(
        run(&mut t, &log, &["MULTI", "SET a 1", "INCR a", "EXEC"]),
        ["MULTI", "SET a 1", "INCR a", "EXEC"]
    );
    assert_eq!(
        run(&mut t, &log, &["MULTI", "SET a 1", "GET a", "EXEC"]),
        ["SET a 1"]
    );
    assert_eq!(
        run(&mut t, &log, &["MULTI", "GET a", "EXEC"]),
        Vec::<String>::new()
    );
    assert_eq!(
        run(&mut t, &log, &["MULTI", "SET a 1 NX", "EXEC"]),
        Vec::<String>::new()
    );
    assert_eq!(
        run(
            &mut t,
            &log,
            &["MULTI", "SELECT 2", "SET a 1", "SELECT 0", "DEL a", "EXEC"]
        ),
        ["@2 MULTI", "@2 SET a 1", "DEL a", "EXEC"]
    );
}

#[test]
fn scripts_propagate_their_writes() {
    let (mut t, log) = server();
    let eval = |t: &mut TestServer, body: &str, key: &str| {
        let r = t.cmd(&["EVAL", body, "1", key]);
        assert!(!matches!(r, Reply::Error(_)), "{r}");
    };
    eval(
        &mut t,
        "redis.call('set','x','1'); redis.call('incr','x'); return 1",
        "x",
    );
    assert_eq!(log.take(), ["MULTI", "set x 1", "incr x", "EXEC"]);
    eval(&mut t, "redis.call('set','x','1'); return 1", "x");
    assert_eq!(log.take(), ["set x 1"]);
    eval(&mut t, "return redis.call('get','x')", "x");
    assert!(log.take().is_empty());
    t.q("SADD s2 a");
    log.take();
    eval(&mut t, "return redis.call('spop',KEYS[1])", "s2");
    assert_eq!(log.take(), ["SREM s2 a"]);
    let lo = now_ms();
    eval(&mut t, "return redis.call('expire',KEYS[1], 100)", "x");
    let got = log.take();
    assert_eq!(got.len(), 1);
    assert_at(
        &got[0],
        "PEXPIREAT x ",
        lo + 100_000,
        now_ms() + 100_000,
        "",
    );
    // A script inside a transaction: one MULTI/EXEC around everything.
    t.q("MULTI");
    t.cmd(&[
        "EVAL",
        "redis.call('set','x','1'); redis.call('incr','x'); return 1",
        "1",
        "x",
    ]);
    t.q("SET y 1");
    t.q("EXEC");
    assert_eq!(
        log.take(),
        ["MULTI", "set x 1", "incr x", "SET y 1", "EXEC"]
    );
    // SCRIPT LOAD and FLUSH are not propagated (Redis 7.0 replicates effects only).
    t.cmd(&["SCRIPT", "LOAD", "return 1"]);
    t.q("SCRIPT FLUSH");
    assert!(log.take().is_empty());
}

#[test]
fn functions_propagate_as_called_and_fcall_as_its_writes() {
    let (mut t, log) = server();
    let code = "#!lua name=lib\nredis.register_function('f', function(k,a) return redis.call('set',k[1],'1') end)";
    assert_eq!(t.cmd(&["FUNCTION", "LOAD", code]).to_string(), "\"lib\"");
    assert_eq!(log.take(), [format!("FUNCTION LOAD {code}")]);
    t.q("FCALL f 1 fk");
    t.q("FUNCTION DELETE lib");
    t.q("FUNCTION FLUSH ASYNC");
    assert_eq!(
        log.take(),
        ["set fk 1", "FUNCTION DELETE lib", "FUNCTION FLUSH ASYNC"]
    );
}

#[test]
fn whole_database_commands_propagate_as_called() {
    let (mut t, log) = server();
    assert_eq!(
        run(
            &mut t,
            &log,
            &[
                "SET a 1",
                "FLUSHDB ASYNC",
                "FLUSHALL SYNC",
                "FLUSHALL",
                "SWAPDB 0 1",
                "SWAPDB 0 1"
            ]
        ),
        [
            "SET a 1",
            "FLUSHDB ASYNC",
            "FLUSHALL SYNC",
            "FLUSHALL",
            "SWAPDB 0 1",
            "SWAPDB 0 1"
        ]
    );
    assert_eq!(
        run(
            &mut t,
            &log,
            &[
                "SET a 1",
                "MOVE a 1",
                "SET q 1",
                "COPY q q2",
                "COPY q q3 DB 1",
                "RPUSH sl 3 1 2",
                "SORT sl STORE sd",
                "SORT sl",
                "SORT_RO sl"
            ]
        ),
        [
            "SET a 1",
            "MOVE a 1",
            "SET q 1",
            "COPY q q2",
            "COPY q q3 DB 1",
            "RPUSH sl 3 1 2",
            "SORT sl STORE sd"
        ]
    );
    // A client in another database: its writes name that database.
    assert_eq!(
        run(&mut t, &log, &["SELECT 3", "SET a 1", "SELECT 0"]),
        ["@3 SET a 1"]
    );
}

#[test]
fn blocking_pops_served_at_once_propagate_the_plain_pop() {
    let (mut t, log) = server();
    assert_eq!(
        run(
            &mut t,
            &log,
            &[
                "RPUSH l a b",
                "BLPOP l 0",
                "BRPOP l 0",
                "RPUSH l a b",
                "blmove l m left right 0",
                "BRPOPLPUSH l m 0",
                "RPUSH l a b c",
                "BLMPOP 0 1 l LEFT COUNT 2",
                "BLMPOP 0 1 l RIGHT",
                "RPUSH l a b c",
                "LPOP l 2",
                "LMPOP 1 l RIGHT COUNT 5",
            ]
        ),
        [
            "RPUSH l a b",
            "LPOP l",
            "RPOP l",
            "RPUSH l a b",
            "LMOVE l m left right",
            "RPOPLPUSH l m",
            "RPUSH l a b c",
            "LPOP l 2",
            "RPOP l 1",
            "RPUSH l a b c",
            "LPOP l 2",
            "RPOP l 1",
        ]
    );
    assert_eq!(
        run(
            &mut t,
            &log,
            &[
                "ZADD z 1 a 2 b 3 c",
                "BZPOPMIN z 0",
                "BZPOPMAX z 0",
                "ZADD z 1 a 2 b 3 c",
                "BZMPOP 0 1 z MIN COUNT 2",
                "ZMPOP 1 z MAX",
            ]
        ),
        [
            "ZADD z 1 a 2 b 3 c",
            "ZPOPMIN z",
            "ZPOPMAX z",
            "ZADD z 1 a 2 b 3 c",
            "ZPOPMIN z 2",
            "ZPOPMAX z 1",
        ]
    );
}

#[test]
fn blocking_pops_woken_later_propagate_the_plain_pop_after_the_write() {
    let (mut t, log) = server();
    let mut b = t.conn();
    let cases: &[(&[&str], &str, &[&str])] = &[
        (
            &["BLPOP", "wl", "0"],
            "RPUSH wl a b",
            &["RPUSH wl a b", "LPOP wl"],
        ),
        (
            &["BLMOVE", "wl2", "wd", "RIGHT", "LEFT", "0"],
            "RPUSH wl2 a b",
            &["RPUSH wl2 a b", "LMOVE wl2 wd right left"],
        ),
        (
            &["BRPOPLPUSH", "w1", "wd", "0"],
            "RPUSH w1 a b",
            &["RPUSH w1 a b", "RPOPLPUSH w1 wd"],
        ),
        (
            &["BLMPOP", "0", "1", "wl3", "LEFT", "COUNT", "5"],
            "RPUSH wl3 a b",
            &["RPUSH wl3 a b", "LPOP wl3 2"],
        ),
        (
            &["BZPOPMIN", "wz", "0"],
            "ZADD wz 1 a 2 b",
            &["ZADD wz 1 a 2 b", "ZPOPMIN wz"],
        ),
        (
            &["BZMPOP", "0", "1", "wz2", "MAX", "COUNT", "3"],
            "ZADD wz2 1 a 2 b",
            &["ZADD wz2 1 a 2 b", "ZPOPMAX wz2 2"],
        ),
    ];
    for (blocking, write, want) in cases {
        b.send(blocking);
        t.wait_blocked(1);
        assert!(!t.q(write).starts_with('-'));
        let r = b.recv();
        assert!(!matches!(r, Reply::Error(_)), "{r}");
        assert_eq!(log.take(), *want, "{blocking:?}");
    }
    // Woken by a transaction: the pop follows its MULTI/EXEC.
    b.send(&["BLPOP", "wl5", "0"]);
    t.wait_blocked(1);
    assert_eq!(
        run(&mut t, &log, &["MULTI", "RPUSH wl5 a", "SET q 1", "EXEC"]),
        ["MULTI", "RPUSH wl5 a", "SET q 1", "EXEC", "LPOP wl5"]
    );
    b.recv();
}

#[test]
fn restore_with_a_ttl_propagates_an_absolute_one() {
    let (mut t, log) = server();
    t.q("SET q 1");
    let Reply::Bulk(payload) = t.cmd(&["DUMP", "q"]) else {
        panic!("DUMP")
    };
    log.take();
    let shown = String::from_utf8_lossy(&payload).into_owned();
    let restore = |t: &mut TestServer, args: &[&[u8]]| {
        let mut a: Vec<&[u8]> = vec![b"RESTORE"];
        a.extend_from_slice(args);
        assert_eq!(t.cmd_bytes(&a).to_string(), "+OK");
    };
    let lo = now_ms();
    restore(&mut t, &[b"rq", b"100000", &payload]);
    restore(&mut t, &[b"rq2", b"9999999999000", &payload, b"ABSTTL"]);
    restore(&mut t, &[b"rq3", b"0", &payload]);
    restore(&mut t, &[b"rq", b"100000", &payload, b"REPLACE"]);
    let hi = now_ms();
    let got = log.take();
    assert_eq!(got.len(), 4);
    assert_at(
        &got[0],
        "RESTORE rq ",
        lo + 100_000,
        hi + 100_000,
        &format!(" {shown} ABSTTL"),
    );
    assert_eq!(got[1], format!("RESTORE rq2 9999999999000 {shown} ABSTTL"));
    assert_eq!(got[2], format!("RESTORE rq3 0 {shown}"));
    assert_at(
        &got[3],
        "RESTORE rq ",
        lo + 100_000,
        hi + 100_000,
        &format!(" {shown} REPLACE ABSTTL"),
    );
}

/// PFCOUNT propagates when it stored the count it computed (Redis 7.0: the cached
/// cardinality is part of the value), not when the cache was valid.
#[test]
fn pfcount_propagates_when_it_updates_the_cache() {
    let (mut t, log) = server();
    assert_eq!(
        run(
            &mut t,
            &log,
            &["PFADD p a b c", "PFCOUNT p", "PFCOUNT p", "PFADD p a"]
        ),
        ["PFADD p a b c", "PFCOUNT p"]
    );
}

/// The active expiry cycle deletes outside any command: its deletions go to the outside
/// sink (`effects::outside`), in the logical database, and nothing to the commands' sink.
#[test]
fn active_expiry_propagates_outside_any_command() {
    type Seen = parking_lot::Mutex<Vec<(u8, crate::effects::Argv)>>;
    static SEEN: Seen = parking_lot::Mutex::new(Vec::new());
    crate::effects::set_outside_sink(Box::new(|db, argv| SEEN.lock().push((db, argv))));
    let (mut t, log) = server();
    t.q("SELECT 2");
    t.q("SET active-expiry-key 1 PX 1");
    t.q("SELECT 0");
    log.take();
    std::thread::sleep(Duration::from_millis(5));
    let store = &t.shared().store;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let want = (2, crate::effects::argv(["DEL", "active-expiry-key"]));
    while !SEEN.lock().contains(&want) {
        assert!(
            std::time::Instant::now() < deadline,
            "no DEL from the cycle"
        );
        crate::expire::active_expire_cycle(store, Duration::from_millis(50)).unwrap();
    }
    assert!(log.take().is_empty());
}
