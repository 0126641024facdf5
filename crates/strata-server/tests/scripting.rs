//! Lua scripting over TCP: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT with Redis 7.0's
//! replies and errors, and scripts running atomically (declared keys, undeclared keys,
//! inside EXEC) while other clients write.

mod common;

use common::{start, Client, V};
use std::thread;

/// SHA1 of "return 1" (as `redis.sha1hex` and Redis compute it).
const SHA_RETURN_1: &str = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";

fn err_starts(v: &V, prefix: &str) -> bool {
    matches!(v, V::Err(e) if e.starts_with(prefix))
}

#[test]
fn eval_replies_and_errors_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["EVAL", "return 1", "0"]), V::Int(1));
    assert_eq!(
        c.q(&[
            "EVAL",
            "return {KEYS[1], ARGV[1], 3.9, true, false}",
            "1",
            "k",
            "a"
        ]),
        V::Array(vec![
            V::bulk("k"),
            V::bulk("a"),
            V::Int(3),
            V::Int(1),
            V::NilBulk
        ])
    );
    assert_eq!(
        c.q(&[
            "EVAL",
            "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])",
            "1",
            "k",
            "v"
        ]),
        V::bulk("v")
    );
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
    assert_eq!(
        c.q(&["EVAL", "return redis.call('set', 'k2', 'x')", "0"]),
        V::ok()
    );
    // A command's error raised by redis.call, with the script's SHA and line.
    c.q(&["SET", "s", "abc"]);
    let body = "return redis.call('incr', KEYS[1])";
    let sha = match c.q(&["SCRIPT", "LOAD", body]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        v => panic!("{v:?}"),
    };
    assert_eq!(
        c.q(&["EVAL", body, "1", "s"]),
        V::err(&format!(
            "ERR value is not an integer or out of range script: {sha}, on @user_script:1."
        ))
    );
    assert_eq!(
        c.q(&["EVAL", "return redis.pcall('incr', KEYS[1])", "1", "s"]),
        V::err("ERR value is not an integer or out of range")
    );
    assert!(err_starts(
        &c.q(&["EVAL", "return redis.call('multi')", "0"]),
        "ERR This Redis command is not allowed from script script: "
    ));
    assert!(err_starts(
        &c.q(&["EVAL", "return redis.call('nosuch')", "0"]),
        "ERR Unknown Redis command called from script script: "
    ));
    assert!(err_starts(
        &c.q(&["EVAL", "return redis.call('get')", "0"]),
        "ERR Wrong number of args calling Redis command from script script: "
    ));
    assert!(err_starts(
        &c.q(&["EVAL", "return x", "0"]),
        "ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: "
    ));
    assert_eq!(
        c.q(&["EVAL", "return +", "0"]),
        V::err(
            "ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'"
        )
    );
    assert_eq!(
        c.q(&["EVAL", "return 1", "-1"]),
        V::err("ERR Number of keys can't be negative")
    );
    assert_eq!(
        c.q(&["EVAL", "return 1", "2", "a"]),
        V::err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        c.q(&["EVAL", "return 1", "x"]),
        V::err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.q(&["EVAL", "return {err='My Error'}", "0"]),
        V::err("My Error")
    );
    assert_eq!(
        c.q(&["EVAL", "return redis.status_reply('FINE')", "0"]),
        V::Simple("FINE".to_string())
    );
    // Redis 7.0 flags BLPOP `noscript`.
    assert!(err_starts(
        &c.q(&["EVAL", "return redis.call('blpop', 'nolist', 0)", "0"]),
        "ERR This Redis command is not allowed from script script: "
    ));
    s.shutdown().unwrap();
}

#[test]
fn evalsha_script_cache_and_read_only_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let sha = SHA_RETURN_1.to_string();
    assert_eq!(
        c.q(&["EVALSHA", &sha, "0"]),
        V::err("NOSCRIPT No matching script. Please use EVAL.")
    );
    assert_eq!(c.q(&["SCRIPT", "LOAD", "return 1"]), V::bulk(&sha));
    assert_eq!(c.q(&["EVALSHA", &sha, "0"]), V::Int(1));
    assert_eq!(c.q(&["EVALSHA", &sha.to_uppercase(), "0"]), V::Int(1));
    assert_eq!(c.q(&["EVALSHA_RO", &sha, "0"]), V::Int(1));
    assert_eq!(
        c.q(&[
            "SCRIPT",
            "EXISTS",
            &sha,
            "ffffffffffffffffffffffffffffffffffffffff"
        ]),
        V::Array(vec![V::Int(1), V::Int(0)])
    );
    // EVAL caches the script too.
    c.q(&["EVAL", "return 2", "0"]);
    let two = "7f923f79fe76194c868d7e1d0820de36700eb649";
    assert_eq!(c.q(&["EVALSHA", two, "0"]), V::Int(2));
    assert_eq!(c.q(&["SCRIPT", "FLUSH"]), V::ok());
    assert_eq!(c.q(&["SCRIPT", "EXISTS", &sha]), V::Array(vec![V::Int(0)]));
    assert_eq!(c.q(&["SCRIPT", "FLUSH", "ASYNC"]), V::ok());
    assert_eq!(
        c.q(&["SCRIPT", "FLUSH", "x"]),
        V::err("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    );
    assert_eq!(
        c.q(&["SCRIPT", "KILL"]),
        V::err("NOTBUSY No scripts in execution right now.")
    );
    assert_eq!(c.q(&["SCRIPT", "DEBUG", "NO"]), V::ok());
    assert!(matches!(c.q(&["SCRIPT", "HELP"]), V::Array(a) if a.len() == 17));
    assert!(err_starts(
        &c.q(&["EVAL_RO", "return redis.call('set', 'a', 1)", "0"]),
        "ERR Write commands are not allowed from read-only scripts. script: "
    ));
    assert!(err_starts(
        &c.q(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('set', 'a', 1)",
            "0"
        ]),
        "ERR Write commands are not allowed from read-only scripts. script: "
    ));
    assert_eq!(
        c.q(&["EVAL", "#!lua flags=bogus\nreturn 1", "0"]),
        V::err("ERR Unexpected flag in script shebang: bogus")
    );
    assert_eq!(
        c.q(&[
            "EVAL",
            "#!lua flags=no-writes,allow-stale\nreturn redis.call('get', KEYS[1])",
            "1",
            "a"
        ]),
        V::NilBulk
    );
    s.shutdown().unwrap();
}

#[test]
fn writes_before_an_error_are_kept_and_reads_see_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let r = c.q(&[
        "EVAL",
        "redis.call('set', KEYS[1], 'x') redis.call('rpush', KEYS[2], 'a', 'b') \
         local n = redis.call('llen', KEYS[2]) error('after ' .. n)",
        "2",
        "{t}a",
        "other",
    ]);
    assert!(
        err_starts(&r, "ERR user_script:1: after 2 script: "),
        "{r:?}"
    );
    assert_eq!(c.q(&["GET", "{t}a"]), V::bulk("x"));
    assert_eq!(c.q(&["LRANGE", "other", "0", "-1"]), V::arr(&["a", "b"]));
    // SELECT in a script changes the script's database, not the caller's.
    assert_eq!(
        c.q(&[
            "EVAL",
            "redis.call('select', 3) redis.call('set', 'in3', '1') return 1",
            "0"
        ]),
        V::Int(1)
    );
    assert_eq!(c.q(&["GET", "in3"]), V::NilBulk);
    c.q(&["SELECT", "3"]);
    assert_eq!(c.q(&["GET", "in3"]), V::bulk("1"));
    s.shutdown().unwrap();
}

#[test]
fn resp3_conversions_after_setresp() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["HSET", "h", "a", "1"]);
    c.q(&["ZADD", "z", "1.5", "m"]);
    assert_eq!(
        c.q(&[
            "EVAL",
            "redis.setresp(3) return redis.call('hgetall', KEYS[1])['map']['a']",
            "1",
            "h"
        ]),
        V::bulk("1")
    );
    assert_eq!(
        c.q(&[
            "EVAL",
            "redis.setresp(3) return tostring(redis.call('zscore', 'z', 'm')['double'])",
            "0"
        ]),
        V::bulk("1.5")
    );
    assert_eq!(
        c.q(&[
            "EVAL",
            "redis.setresp(3) return type(redis.call('get', 'nokey'))",
            "0"
        ]),
        V::bulk("nil")
    );
    assert_eq!(
        c.q(&["EVAL", "return type(redis.call('get', 'nokey'))", "0"]),
        V::bulk("boolean")
    );
    // A map to a RESP2 client is a flat array; to a RESP3 client a map.
    assert_eq!(
        c.q(&[
            "EVAL",
            "redis.setresp(3) return redis.call('hgetall', 'h')",
            "0"
        ]),
        V::arr(&["a", "1"])
    );
    c.q(&["HELLO", "3"]);
    assert_eq!(
        c.q(&[
            "EVAL",
            "redis.setresp(3) return redis.call('hgetall', 'h')",
            "0"
        ]),
        V::Map(vec![(V::bulk("a"), V::bulk("1"))])
    );
    assert_eq!(
        c.q(&["EVAL", "return {double=3.5}", "0"]),
        V::Double("3.5".to_string())
    );
    assert_eq!(
        c.q(&["EVAL", "redis.setresp(3) return false", "0"]),
        V::Bool(false)
    );
    assert_eq!(c.q(&["EVAL", "return false", "0"]), V::Null);
    s.shutdown().unwrap();
}

#[test]
fn eval_in_a_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["MULTI"]);
    assert_eq!(c.q(&["SET", "m", "1"]), V::Simple("QUEUED".to_string()));
    assert_eq!(
        c.q(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "m"]),
        V::Simple("QUEUED".to_string())
    );
    assert_eq!(
        c.q(&["EVAL", "return redis.call('incr', 'undeclared')", "0"]),
        V::Simple("QUEUED".to_string())
    );
    assert_eq!(
        c.q(&["EXEC"]),
        V::Array(vec![V::ok(), V::Int(2), V::Int(1)])
    );
    s.shutdown().unwrap();
}

/// Many clients run scripts that move units between two keys on different shards (declared,
/// and undeclared so they take every stripe), while others read both in a script: the sum
/// never changes and no update is lost.
#[test]
fn scripts_are_atomic_across_shards() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut c = Client::connect(addr);
    c.q(&["MSET", "acct:a", "1000", "acct:b", "1000"]);
    let mv = "local n = tonumber(ARGV[1]) redis.call('decrby', KEYS[1], n) \
              redis.call('incrby', KEYS[2], n) return 1";
    let mv_undeclared = "redis.call('decrby', 'acct:b', 1) redis.call('incrby', 'acct:a', 1) \
                         redis.call('incr', 'moves') return 1";
    let read = "return tonumber(redis.call('get', KEYS[1])) + tonumber(redis.call('get', KEYS[2]))";
    let mut threads = Vec::new();
    for t in 0..4 {
        threads.push(thread::spawn(move || {
            let mut c = Client::connect(addr);
            for i in 0..150 {
                let r = if (i + t) % 3 == 0 {
                    c.q(&["EVAL", mv_undeclared, "0"])
                } else {
                    c.q(&["EVAL", mv, "2", "acct:a", "acct:b", "2"])
                };
                assert_eq!(r, V::Int(1));
            }
        }));
    }
    threads.push(thread::spawn(move || {
        let mut c = Client::connect(addr);
        for _ in 0..300 {
            assert_eq!(c.q(&["EVAL", read, "2", "acct:a", "acct:b"]), V::Int(2000));
        }
    }));
    for t in threads {
        t.join().unwrap();
    }
    let moves = match c.q(&["GET", "moves"]) {
        V::Bulk(b) => String::from_utf8(b).unwrap().parse::<i64>().unwrap(),
        v => panic!("{v:?}"),
    };
    assert_eq!(moves, 200);
    let a = c.q(&["GET", "acct:a"]);
    // 400 declared moves of 2 from a to b, 200 undeclared moves of 1 back.
    assert_eq!(a, V::bulk(&(1000 - 400 * 2 + 200).to_string()));
    s.shutdown().unwrap();
}

#[test]
fn eval_cache_is_bounded_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["SCRIPT", "LOAD", "return 'loaded'"]);
    for i in 0..700 {
        assert_eq!(c.q(&["EVAL", &format!("return {i}"), "0"]), V::Int(i));
    }
    let info = match c.q(&["INFO"]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        v => panic!("{v:?}"),
    };
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(field("number_of_cached_scripts"), "501");
    assert_eq!(field("evicted_scripts"), "200");
    assert!(field("used_memory_lua").parse::<u64>().unwrap() > 0);
    // The loaded script stays; the oldest EVAL-cached ones are gone.
    assert_eq!(
        c.q(&["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"]),
        V::bulk("loaded")
    );
    assert_eq!(
        c.q(&["EVALSHA", "06d3d9b2060dd51343d5f19f0e531f15c507e3d1", "0"]),
        V::err("NOSCRIPT No matching script. Please use EVAL.")
    );
    s.shutdown().unwrap();
}

/// A script past `busy-reply-threshold`: other clients get `-BUSY`, SCRIPT KILL stops a
/// script that has not written, `-UNKILLABLE` once it has, and SHUTDOWN NOSAVE still stops
/// the server (the busy script's writes are dropped).
#[test]
fn busy_scripts_kill_unkillable_and_shutdown() {
    busy_scripts(false);
}

/// The same with cached scripts and a declared key: they run on the key's shard.
#[test]
fn busy_scripts_on_their_shard_kill_unkillable_and_shutdown() {
    busy_scripts(true);
}

/// The script `body` as a request: EVAL with no key, or (`on_shard`) loaded first and run
/// by EVALSHA with the key `x`.
fn script_request(c: &mut Client, body: &str, on_shard: bool) -> Vec<u8> {
    if !on_shard {
        return common::encode(&[b"EVAL", body.as_bytes(), b"0"]);
    }
    let sha = match c.q(&["SCRIPT", "LOAD", body]) {
        V::Bulk(b) => b,
        v => panic!("{v:?}"),
    };
    common::encode(&[b"EVALSHA", &sha, b"1", b"x"])
}

fn busy_scripts(on_shard: bool) {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut c = Client::connect(addr);
    assert_eq!(
        c.q(&["CONFIG", "SET", "busy-reply-threshold", "100"]),
        V::ok()
    );
    let req = script_request(&mut c, "local i = 0 while true do i = i + 1 end", on_shard);
    let looping = thread::spawn(move || {
        let mut a = Client::connect(addr);
        a.send(&req);
        a.read()
    });
    thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(
        c.q(&["GET", "x"]),
        V::err("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.")
    );
    assert_eq!(c.q(&["PING"]), c.q(&["PING"]));
    assert_eq!(c.q(&["SCRIPT", "KILL"]), V::ok());
    let r = looping.join().unwrap();
    assert!(
        err_starts(&r, "ERR Script killed by user with SCRIPT KILL... script: "),
        "{r:?}"
    );
    assert_eq!(c.q(&["SET", "x", "before"]), V::ok());
    // A script that wrote cannot be killed.
    let req = script_request(
        &mut c,
        "redis.call('set', 'x', 'during') while true do end",
        on_shard,
    );
    let writing = thread::spawn(move || {
        let mut a = Client::connect(addr);
        a.send(&req);
        a.closed()
    });
    thread::sleep(std::time::Duration::from_millis(400));
    assert!(err_starts(
        &c.q(&["SCRIPT", "KILL"]),
        "UNKILLABLE Sorry the script already executed write commands"
    ));
    c.send(b"SHUTDOWN NOSAVE\r\n");
    assert!(c.closed(), "SHUTDOWN closes without a reply");
    assert!(
        writing.join().unwrap(),
        "the busy script's client is closed"
    );
    s.wait().unwrap();
    // The script stopped by SHUTDOWN left nothing behind.
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["GET", "x"]), V::bulk("before"));
    s.shutdown().unwrap();
}

/// A script that touches an undeclared key is run again under every stripe: the first
/// run's writes are dropped even when the script catches the error with pcall.
#[test]
fn undeclared_keys_rerun_once_with_every_stripe() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let body = "redis.call('incr', KEYS[1]) local ok = pcall(redis.call, 'incr', 'other') \
                redis.call('incr', KEYS[1]) return redis.call('get', KEYS[1])";
    assert_eq!(c.q(&["EVAL", body, "1", "d"]), V::bulk("2"));
    assert_eq!(c.q(&["GET", "other"]), V::bulk("1"));
    assert_eq!(c.q(&["EVAL", body, "1", "d"]), V::bulk("4"));
    assert_eq!(c.q(&["GET", "other"]), V::bulk("2"));
    // KEYS and SCAN name no keys: the script runs under every stripe.
    assert_eq!(
        c.q(&["EVAL", "return #redis.call('keys', '*')", "0"]),
        V::Int(2)
    );
    s.shutdown().unwrap();
}

/// A cached script runs on its declared key's shard; when a run there reaches a key it did
/// not declare, its writes on the shard are rolled back and it runs again under every stripe,
/// before the commands pipelined behind it.
#[test]
fn a_script_on_its_shard_that_reaches_an_undeclared_key_runs_again_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let body = "redis.call('incr', KEYS[1]) \
                if ARGV[1] == 'wide' then redis.call('incr', 'far:' .. KEYS[1]) end \
                return redis.call('get', KEYS[1])";
    let sha = match c.q(&["SCRIPT", "LOAD", body]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        v => panic!("{v:?}"),
    };
    // Declared keys only: on the shard.
    assert_eq!(c.q(&["EVALSHA", &sha, "1", "k", "narrow"]), V::bulk("1"));
    let mut pipeline = Vec::new();
    for args in [
        vec!["EVALSHA", &sha, "1", "k", "wide"],
        vec!["GET", "far:k"],
        vec!["EVALSHA", &sha, "1", "k", "narrow"],
        vec!["GET", "k"],
    ] {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        pipeline.extend(common::encode(&args));
    }
    c.send(&pipeline);
    assert_eq!(c.read(), V::bulk("2"));
    assert_eq!(c.read(), V::bulk("1"));
    assert_eq!(c.read(), V::bulk("3"));
    assert_eq!(c.read(), V::bulk("3"));
    assert_eq!(c.q(&["GET", "far:k"]), V::bulk("1"));
    s.shutdown().unwrap();
}

/// A key of database 0 whose hash slot falls in `slots` (the server routes slots to shards
/// by range: the first slots to the first shard, the last to the last).
fn key_in_slots(prefix: &str, slots: std::ops::Range<u16>) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| slots.contains(&strata_server::keys::hash_slot(k.as_bytes())))
        .unwrap()
}

/// A script running on one shard stops that shard's commands until it ends, and no other:
/// while a script spins on a key of the first shard, a client writing a key of the last
/// shard goes on, and a read of the script's key answers only after the script.
#[test]
fn a_script_on_one_shard_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut c = Client::connect(addr);
    let mine = key_in_slots("mine:", 0..100);
    let other = key_in_slots("other:", 16_300..16_384);
    // Spins for ARGV[1] ms of the server's clock, having written its key.
    let body = "redis.call('set', KEYS[1], 'during') local s = redis.call('time') \
                repeat local n = redis.call('time') \
                until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > tonumber(ARGV[1]) * 1000 \
                redis.call('set', KEYS[1], 'after') return 1";
    let sha = match c.q(&["SCRIPT", "LOAD", body]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        v => panic!("{v:?}"),
    };
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinning = {
        let (done, sha, mine) = (done.clone(), sha.clone(), mine.clone());
        thread::spawn(move || {
            let mut a = Client::connect(addr);
            let r = a.q(&["EVALSHA", &sha, "1", &mine, "3000"]);
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            r
        })
    };
    thread::sleep(std::time::Duration::from_millis(300));
    let started = std::time::Instant::now();
    let mut writes = 0u64;
    while started.elapsed() < std::time::Duration::from_millis(500) {
        assert_eq!(c.q(&["SET", &other, &writes.to_string()]), V::ok());
        writes += 1;
    }
    assert!(
        !done.load(std::sync::atomic::Ordering::SeqCst),
        "the script ended before the other shard's writes did"
    );
    eprintln!("{writes} SETs on the other shard in 500 ms while the script ran");
    assert!(writes > 0);
    // The script's shard: this read waits for the script and sees all of it.
    assert_eq!(c.q(&["GET", &mine]), V::bulk("after"));
    assert_eq!(spinning.join().unwrap(), V::Int(1));
    s.shutdown().unwrap();
}

/// Abuse: a script allocating without bound gets an error and the server goes on; deep
/// recursion and deeply nested results are errors, not crashes.
#[test]
fn runaway_scripts_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let r = c.q(&[
        "EVAL",
        "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 65536) .. i end",
        "0",
    ]);
    assert!(
        matches!(&r, V::Err(e) if e.contains("not enough memory")),
        "{r:?}"
    );
    assert_eq!(c.q(&["PING"]), V::Simple("PONG".to_string()));
    let r = c.q(&[
        "EVAL",
        "local function f(n) return 1 + f(n + 1) end return f(1)",
        "0",
    ]);
    assert!(err_starts(&r, "ERR "), "{r:?}");
    let r = c.q(&[
        "EVAL",
        "local t = {} local c = t for i = 1, 5000 do c[1] = {} c = c[1] end return t",
        "0",
    ]);
    assert!(matches!(r, V::Array(_)), "{r:?}");
    assert_eq!(c.q(&["EVAL", "return 1", "0"]), V::Int(1));
    s.shutdown().unwrap();
}
