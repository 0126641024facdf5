//! Every command the table flags `write` propagates something when it changes the
//! dataset: one valid call of each, on keys of the right type, must propagate at least one
//! command (`effects.rs`). A write command missing from [`CASES`] fails the walk, so a new
//! one cannot be forgotten; the cases where a write command legitimately propagates
//! nothing are named in [`NOTHING`], each with its reason, and checked too.

use super::{all_commands, flag, Spec};
use crate::test_server::{EffectLog, Reply, TestServer};

/// Keys of every type, made before each case (after FLUSHALL and FUNCTION FLUSH).
const SETUP: &[&str] = &[
    "SET str 10",
    "HSET h f 1 g 2",
    "SADD s a b c",
    "SADD s2 c d",
    "ZADD z 1 a 2 b 3 c",
    "ZADD z2 1 c",
    "RPUSH l a b c",
    "XADD x 1-1 f v",
    "XGROUP CREATE x g 0",
    "XREADGROUP GROUP g c STREAMS x >",
    "XADD x 2-1 f v",
    "PFADD p a",
    "GEOADD geo 13.361389 38.115556 m1 15.087269 37.502669 m2",
];

/// The library FUNCTION cases load first.
const LIBRARY: &str =
    "#!lua name=lib\nredis.register_function('f', function(k, a) return redis.call('set', k[1], '1') end)";

/// One call of each write command (table name, extra setup lines, the call) that changes
/// the dataset and so must propagate.
const CASES: &[(&str, &[&str], &str)] = &[
    ("append", &[], "APPEND str x"),
    ("bitfield", &[], "BITFIELD str SET u8 0 1"),
    ("bitop", &[], "BITOP AND dest str str"),
    ("blmove", &[], "BLMOVE l l2 LEFT RIGHT 0"),
    ("blmpop", &[], "BLMPOP 0 1 l LEFT"),
    ("blpop", &[], "BLPOP l 0"),
    ("brpop", &[], "BRPOP l 0"),
    ("brpoplpush", &[], "BRPOPLPUSH l l2 0"),
    ("bzmpop", &[], "BZMPOP 0 1 z MIN"),
    ("bzpopmax", &[], "BZPOPMAX z 0"),
    ("bzpopmin", &[], "BZPOPMIN z 0"),
    ("copy", &[], "COPY str str2"),
    ("decr", &[], "DECR str"),
    ("decrby", &[], "DECRBY str 2"),
    ("del", &[], "DEL str"),
    ("expire", &[], "EXPIRE str 100"),
    ("expireat", &[], "EXPIREAT str 9999999999"),
    ("flushall", &[], "FLUSHALL"),
    ("flushdb", &[], "FLUSHDB"),
    ("function|delete", &["FUNCTION LOAD"], "FUNCTION DELETE lib"),
    ("function|flush", &[], "FUNCTION FLUSH"),
    ("function|load", &[], "FUNCTION LOAD"),
    ("function|restore", &["FUNCTION DUMP"], "FUNCTION RESTORE"),
    ("geoadd", &[], "GEOADD geo 1 1 m3"),
    ("georadius", &[], "GEORADIUS geo 15 37 200 km STORE gd"),
    (
        "georadiusbymember",
        &[],
        "GEORADIUSBYMEMBER geo m1 200 km STORE gd",
    ),
    (
        "geosearchstore",
        &[],
        "GEOSEARCHSTORE gd geo FROMMEMBER m1 BYRADIUS 200 km",
    ),
    ("getdel", &[], "GETDEL str"),
    ("getex", &[], "GETEX str EX 100"),
    ("getset", &[], "GETSET str v"),
    ("hdel", &[], "HDEL h f"),
    ("hincrby", &[], "HINCRBY h f 1"),
    ("hincrbyfloat", &[], "HINCRBYFLOAT h f 1.5"),
    ("hmset", &[], "HMSET h f 3"),
    ("hset", &[], "HSET h f 4"),
    ("hsetnx", &[], "HSETNX h new 1"),
    ("incr", &[], "INCR str"),
    ("incrby", &[], "INCRBY str 2"),
    ("incrbyfloat", &[], "INCRBYFLOAT str 1.5"),
    ("linsert", &[], "LINSERT l BEFORE b x"),
    ("lmove", &[], "LMOVE l l2 LEFT RIGHT"),
    ("lmpop", &[], "LMPOP 1 l LEFT"),
    ("lpop", &[], "LPOP l"),
    ("lpush", &[], "LPUSH l x"),
    ("lpushx", &[], "LPUSHX l x"),
    ("lrem", &[], "LREM l 0 a"),
    ("lset", &[], "LSET l 0 x"),
    ("ltrim", &[], "LTRIM l 1 -1"),
    ("move", &[], "MOVE str 1"),
    ("mset", &[], "MSET a 1 b 2"),
    ("msetnx", &[], "MSETNX na 1 nb 2"),
    ("persist", &["EXPIRE str 100"], "PERSIST str"),
    ("pexpire", &[], "PEXPIRE str 100000"),
    ("pexpireat", &[], "PEXPIREAT str 9999999999000"),
    ("pfadd", &[], "PFADD p b"),
    ("pfdebug", &[], "PFDEBUG TODENSE p"),
    ("pfmerge", &[], "PFMERGE p2 p"),
    ("psetex", &[], "PSETEX str 100000 v"),
    ("rename", &[], "RENAME str str3"),
    ("renamenx", &[], "RENAMENX str str4"),
    ("restore", &["DUMP"], "RESTORE"),
    ("restore-asking", &["DUMP"], "RESTORE-ASKING"),
    ("migrate", &[], "MIGRATE"),
    ("rpop", &[], "RPOP l"),
    ("rpoplpush", &[], "RPOPLPUSH l l2"),
    ("rpush", &[], "RPUSH l x"),
    ("rpushx", &[], "RPUSHX l x"),
    ("sadd", &[], "SADD s x"),
    ("sdiffstore", &[], "SDIFFSTORE sd s s2"),
    ("set", &[], "SET str 1"),
    ("setbit", &[], "SETBIT str 1 1"),
    ("setex", &[], "SETEX str 100 v"),
    ("setnx", &[], "SETNX new 1"),
    ("setrange", &[], "SETRANGE str 0 x"),
    ("sinterstore", &[], "SINTERSTORE sd s s2"),
    ("smove", &[], "SMOVE s s2 a"),
    ("sort", &[], "SORT l ALPHA STORE sd"),
    ("spop", &[], "SPOP s"),
    ("srem", &[], "SREM s a"),
    ("sunionstore", &[], "SUNIONSTORE sd s s2"),
    ("swapdb", &[], "SWAPDB 0 1"),
    ("unlink", &[], "UNLINK str"),
    ("xack", &[], "XACK x g 1-1"),
    ("xadd", &[], "XADD x * f v"),
    ("xautoclaim", &[], "XAUTOCLAIM x g c2 0 0"),
    ("xclaim", &[], "XCLAIM x g c2 0 1-1"),
    ("xdel", &[], "XDEL x 1-1"),
    ("xgroup|create", &[], "XGROUP CREATE x g2 0"),
    ("xgroup|createconsumer", &[], "XGROUP CREATECONSUMER x g cc"),
    ("xgroup|delconsumer", &[], "XGROUP DELCONSUMER x g c"),
    ("xgroup|destroy", &[], "XGROUP DESTROY x g"),
    ("xgroup|setid", &[], "XGROUP SETID x g 0"),
    ("xreadgroup", &[], "XREADGROUP GROUP g c2 STREAMS x >"),
    ("xsetid", &[], "XSETID x 9-9"),
    ("xtrim", &[], "XTRIM x MAXLEN 0"),
    ("zadd", &[], "ZADD z 4 d"),
    ("zdiffstore", &[], "ZDIFFSTORE zd 2 z z2"),
    ("zincrby", &[], "ZINCRBY z 1 a"),
    ("zinterstore", &[], "ZINTERSTORE zd 2 z z2"),
    ("zmpop", &[], "ZMPOP 1 z MIN"),
    ("zpopmax", &[], "ZPOPMAX z"),
    ("zpopmin", &[], "ZPOPMIN z"),
    ("zrangestore", &[], "ZRANGESTORE zd z 0 -1"),
    ("zrem", &[], "ZREM z a"),
    ("zremrangebylex", &[], "ZREMRANGEBYLEX z - +"),
    ("zremrangebyrank", &[], "ZREMRANGEBYRANK z 0 0"),
    ("zremrangebyscore", &[], "ZREMRANGEBYSCORE z 1 1"),
    ("zunionstore", &[], "ZUNIONSTORE zd 2 z z2"),
];

/// Calls of write commands that propagate nothing, with the reason (Redis 7.0 the same).
const NOTHING: &[(&str, &str, &str)] = &[
    ("set", "SET str 1 NX", "NX and the key exists: nothing set"),
    ("del", "DEL nokey", "no key deleted"),
    ("expire", "EXPIRE nokey 10", "no such key"),
    ("persist", "PERSIST str", "the key has no expiry"),
    ("hdel", "HDEL h nofield", "no field deleted"),
    ("zadd", "ZADD z 1 a", "the member has that score already"),
    ("pfadd", "PFADD p a", "no register changed"),
    (
        "xreadgroup",
        "XREADGROUP GROUP g c STREAMS x 0",
        "a history read delivers nothing new",
    ),
    (
        "xgroup|createconsumer",
        "XGROUP CREATECONSUMER x g c",
        "the consumer exists",
    ),
    ("xack", "XACK x g 9-9", "no such pending entry"),
    ("spop", "SPOP s 0", "a count of 0 pops nothing"),
    ("getex", "GETEX str", "no option: the expiry is unchanged"),
];

/// Runs a case's line: space-separated, except the FUNCTION and RESTORE calls that need
/// binary or multi-word arguments (`dumps`: the payloads taken by DUMP / FUNCTION DUMP).
fn call(t: &mut TestServer, line: &str, dumps: &mut Vec<Vec<u8>>) -> Reply {
    match line {
        "FUNCTION LOAD" => t.cmd(&["FUNCTION", "LOAD", LIBRARY]),
        "FUNCTION DUMP" | "DUMP" => {
            t.cmd(&["FUNCTION", "LOAD", LIBRARY]);
            let r = if line == "DUMP" {
                t.cmd(&["DUMP", "str"])
            } else {
                t.cmd(&["FUNCTION", "DUMP"])
            };
            if let Reply::Bulk(b) = &r {
                dumps.push(b.clone());
            }
            t.cmd(&["FUNCTION", "FLUSH"])
        }
        "FUNCTION RESTORE" => t.cmd_bytes(&[b"FUNCTION", b"RESTORE", &dumps[0]]),
        "RESTORE" => t.cmd_bytes(&[b"RESTORE", b"restored", b"0", &dumps[0]]),
        "RESTORE-ASKING" => t.cmd_bytes(&[b"RESTORE-ASKING", b"restored", b"0", &dumps[0]]),
        // A scripted target that acknowledges every RESTORE (`migrate_tests.rs`).
        "MIGRATE" => {
            let (port, _) = super::migrate_tests::target();
            t.cmd(&[
                "MIGRATE",
                "127.0.0.1",
                &port.to_string(),
                "str",
                "0",
                "5000",
            ])
        }
        _ => t.cmd(&line.split(' ').collect::<Vec<_>>()),
    }
}

/// Resets the server to [`SETUP`] plus `extra`; nothing recorded so far is kept.
fn prepare(t: &mut TestServer, log: &EffectLog, extra: &[&str], dumps: &mut Vec<Vec<u8>>) {
    t.q("FLUSHALL");
    t.q("FUNCTION FLUSH");
    for l in SETUP.iter().chain(extra) {
        let r = call(t, l, dumps);
        assert!(!matches!(r, Reply::Error(_)), "{l}: {r}");
    }
    log.take();
}

/// Every write command of the table, subcommands included.
fn write_commands() -> Vec<&'static Spec> {
    let mut out = Vec::new();
    for s in all_commands() {
        if s.handler.is_some() && s.has(flag::WRITE) {
            out.push(*s);
        }
        for (_, sub) in &s.subcommands {
            if sub.handler.is_some() && sub.has(flag::WRITE) {
                out.push(*sub);
            }
        }
    }
    out
}

#[test]
fn every_write_command_propagates_when_it_writes() {
    let t0 = TestServer::in_memory();
    let log = t0.record_effects();
    let mut t = t0;
    let mut missing = Vec::new();
    let mut silent = Vec::new();
    for spec in write_commands() {
        let Some((_, extra, line)) = CASES.iter().find(|(n, _, _)| *n == spec.name) else {
            missing.push(spec.name);
            continue;
        };
        let mut dumps = Vec::new();
        prepare(&mut t, &log, extra, &mut dumps);
        let r = call(&mut t, line, &mut dumps);
        assert!(!matches!(r, Reply::Error(_)), "{line}: {r}");
        if log.take().is_empty() {
            silent.push(*line);
        }
    }
    assert!(CASES.len() > 100, "the walk covers the write commands");
    assert!(
        missing.is_empty(),
        "write commands without a case: {missing:?}"
    );
    assert!(
        silent.is_empty(),
        "writes that propagated nothing: {silent:?}"
    );
}

#[test]
fn the_writes_that_propagate_nothing_are_the_listed_ones() {
    let t0 = TestServer::in_memory();
    let log = t0.record_effects();
    let mut t = t0;
    let names: Vec<&str> = write_commands().iter().map(|s| s.name).collect();
    for (name, line, why) in NOTHING {
        assert!(names.contains(name), "{name} is not a write command");
        let mut dumps = Vec::new();
        prepare(&mut t, &log, &[], &mut dumps);
        let r = call(&mut t, line, &mut dumps);
        assert!(!matches!(r, Reply::Error(_)), "{line}: {r}");
        assert_eq!(log.take(), Vec::<String>::new(), "{line} ({why})");
    }
}
