//! Abuse of Lua scripts over TCP: endless loops (in Lua, under `pcall`, inside a library
//! function), scripts allocating without bound, deep recursion, odd return values (functions,
//! coroutines, userdata, cyclic and deeply nested tables) and 10,000 distinct EVAL scripts.
//! After each, the server answers other clients, its memory stays bounded and the INFO
//! fields report what happened. (`scripting.rs` has the basic BUSY / SCRIPT KILL /
//! UNKILLABLE / SHUTDOWN NOSAVE case; the replies to odd values are compared with
//! redis-server's in `tests/redis/test_scripting.py`.)

mod common;

use common::{rss_bytes, spawn_binary, start, Client, V};
use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

fn info_field(c: &mut Client, section: &str, name: &str) -> String {
    let info = match c.q(&["INFO", section]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        v => panic!("{v:?}"),
    };
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
}

fn is_err(v: &V, part: &str) -> bool {
    matches!(v, V::Err(e) if e.contains(part))
}

/// Runs `body` on another connection, waits until other clients get `-BUSY`, kills it with
/// SCRIPT KILL and returns the script's reply.
fn busy_then_killed(addr: SocketAddr, body: &'static str) -> V {
    let mut c = Client::connect(addr);
    let running = thread::spawn(move || Client::connect(addr).q(&["EVAL", body, "0"]));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c.q(&["GET", "x"]);
        if is_err(&r, "BUSY Redis is busy running a script") {
            break;
        }
        assert!(Instant::now() < deadline, "never busy: {r:?}");
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.q(&["SCRIPT", "KILL"]), V::ok());
    let reply = running.join().unwrap();
    assert_eq!(c.q(&["PING"]), V::Simple("PONG".into()), "served again");
    reply
}

#[test]
fn endless_loops_are_busy_and_killable_wherever_they_loop() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut c = Client::connect(addr);
    // The old name of the directive works as well.
    assert_eq!(c.q(&["CONFIG", "SET", "lua-time-limit", "50"]), V::ok());
    assert_eq!(
        c.q(&["CONFIG", "GET", "busy-reply-threshold"]),
        V::Array(vec![V::bulk("busy-reply-threshold"), V::bulk("50")])
    );
    let killed = "ERR Script killed by user with SCRIPT KILL...";
    for body in [
        "while true do end",
        // A script cannot catch its own kill.
        "while true do pcall(function() while true do end end) end",
        "local ok = pcall(function() local i = 0 repeat i = i + 1 until false end) return ok",
        // Packing a wide cyclic table runs inside the library (100^16 values).
        "local t = {} for i = 1, 100 do t[i] = t end return cmsgpack.pack(t)",
    ] {
        let r = busy_then_killed(addr, body);
        assert!(is_err(&r, killed), "{body}: {r:?}");
    }
    s.shutdown().unwrap();
}

#[test]
fn unbounded_allocation_is_an_error_and_memory_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = spawn_binary(dir.path(), &[]);
    let mut c = Client::connect(addr);
    assert_eq!(c.q(&["EVAL", "return 1", "0"]), V::Int(1));
    let lua_before: u64 = info_field(&mut c, "memory", "used_memory_lua")
        .parse()
        .unwrap();
    assert!(lua_before > 0, "an idle Lua state is reported");
    let rss_before = rss_bytes(child.id());
    for body in [
        "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 2^20) .. i end",
        "local s = 'x' while true do s = s .. s end",
        "return cmsgpack.pack(string.rep('x', 2^20), string.rep('y', 2^29))",
        "local s = string.rep('x', 2^27) return struct.pack('c0c0c0', s, s, s)",
        "return cjson.encode({string.rep('x', 2^27), string.rep('y', 2^27)})",
    ] {
        let r = c.q(&["EVAL", body, "0"]);
        assert!(is_err(&r, "not enough memory"), "{body}: {r:?}");
        assert_eq!(c.q(&["SET", "alive", "1"]), V::ok(), "{body}");
        assert_eq!(
            c.q(&["EVAL", "return redis.call('get', 'alive')", "0"]),
            V::bulk("1")
        );
    }
    // The state that ran out is not kept: what INFO reports is back to a small state.
    let lua_after: u64 = info_field(&mut c, "memory", "used_memory_lua")
        .parse()
        .unwrap();
    assert!(lua_after < 16 << 20, "used_memory_lua {lua_after}");
    let rss_after = rss_bytes(child.id());
    assert!(
        rss_after < rss_before + (768 << 20),
        "RSS {rss_before} -> {rss_after}"
    );
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn deep_recursion_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    for (body, part) in [
        (
            "local function f(n) return 1 + f(n + 1) end return f(1)",
            "stack overflow",
        ),
        // (Not `local function f() return pcall(f) end`: Lua 5.1's own `pcall` then pushes
        // its result one slot past the frame's top, which the API checks of debug builds
        // abort on; release builds, like redis-server's Lua, use the spare slots.)
        ("local function f() return select(2, xpcall(f, f)) end return f()", ""),
        // C recursion Lua bounds at 200 calls (with 8 KiB buffers in each gsub frame).
        ("local function f(s) return (string.gsub(s, '.', f)) end return f('ab')", "C stack overflow"),
        ("local t = setmetatable({}, {__index = function(t, k) return t[k] end}) return t.x", "C stack overflow"),
        ("local function f(a, b) table.sort({3, 2, 1}, f) return a < b end table.sort({3, 2, 1}, f)", "C stack overflow"),
        ("local function f() return coroutine.wrap(f)() end return f()", ""),
        // Pattern matching recursion, which Lua 5.1 does not bound (a C frame per item).
        ("return string.find(string.rep('a', 50000), string.rep('a?', 50000))", ""),
        (
            "return cjson.decode(string.rep('[', 100000))",
            "too many nested",
        ),
        (
            "return cmsgpack.unpack(string.rep('\\145', 100000))",
            "stack overflow",
        ),
        ("return loadstring(string.rep('(', 100000))()", ""),
    ] {
        let r = c.q(&["EVAL", body, "0"]);
        // Some of these are caught in Lua and returned; what matters is a reply.
        if !part.is_empty() {
            assert!(is_err(&r, part), "{body}: {r:?}");
        }
        assert_eq!(c.q(&["PING"]), V::Simple("PONG".into()), "{body}: {r:?}");
    }
    s.shutdown().unwrap();
}

#[test]
fn odd_return_values_become_replies() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let nil = V::NilBulk;
    for (body, want) in [
        ("return type", nil.clone()),
        ("return coroutine.create(function() end)", nil.clone()),
        ("return cjson.null", nil.clone()),
        (
            "return {1, type, 3}",
            V::Array(vec![V::Int(1), V::NilBulk, V::Int(3)]),
        ),
        ("return {err = 3}", V::Array(vec![])),
        (
            "local t = setmetatable({}, {__index = function() return 1 end}) return t",
            V::Array(vec![]),
        ),
    ] {
        assert_eq!(c.q(&["EVAL", body, "0"]), want, "{body}");
    }
    // A cyclic table ends in an error element at the depth limit, as Redis's.
    let cyclic = c.q(&["EVAL", "local t = {} t[1] = t return t", "0"]);
    let mut v = &cyclic;
    let mut depth = 0;
    while let V::Array(items) = v {
        assert_eq!(items.len(), 1);
        v = &items[0];
        depth += 1;
    }
    assert!(depth > 100, "depth {depth}");
    assert!(is_err(v, "reached lua stack limit"), "{v:?}");
    for body in [
        "local t = {} local c = t for i = 1, 100000 do c[1] = {} c = c[1] end return t",
        "local t = {} for i = 1, 100000 do t[i] = {i, {tostring(i)}} end return t",
    ] {
        assert!(matches!(c.q(&["EVAL", body, "0"]), V::Array(_)), "{body}");
        assert_eq!(c.q(&["PING"]), V::Simple("PONG".into()));
    }
    s.shutdown().unwrap();
}

#[test]
fn ten_thousand_distinct_scripts_keep_the_cache_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    let loaded = match c.q(&["SCRIPT", "LOAD", "return 'loaded'"]) {
        V::Bulk(b) => String::from_utf8(b).unwrap(),
        v => panic!("{v:?}"),
    };
    let mut reqs = Vec::new();
    for i in 0..10_000 {
        let body = format!("return {i}");
        reqs.extend(common::encode(&[b"EVAL", body.as_bytes(), b"0"]));
    }
    c.send(&reqs);
    for i in 0..10_000 {
        assert_eq!(c.read(), V::Int(i));
    }
    let cached: usize = info_field(&mut c, "memory", "number_of_cached_scripts")
        .parse()
        .unwrap();
    let evicted: usize = info_field(&mut c, "stats", "evicted_scripts")
        .parse()
        .unwrap();
    // At most 500 EVAL-cached scripts (Redis 7.4's bound), plus the loaded one.
    assert_eq!(cached, 500 + 1);
    assert_eq!(evicted, 10_000 - 500);
    assert_eq!(c.q(&["EVALSHA", &loaded, "0"]), V::bulk("loaded"));
    assert_eq!(
        c.q(&["SCRIPT", "EXISTS", &loaded]),
        V::Array(vec![V::Int(1)])
    );
    // The most recent EVAL scripts are cached, the oldest are not.
    let sha = |i: i64| {
        sha1_smol::Sha1::from(format!("return {i}").as_bytes())
            .digest()
            .to_string()
    };
    assert_eq!(
        c.q(&[
            "SCRIPT",
            "EXISTS",
            &sha(0),
            &sha(9_499),
            &sha(9_500),
            &sha(9_999)
        ]),
        V::Array(vec![V::Int(0), V::Int(0), V::Int(1), V::Int(1)])
    );
    s.shutdown().unwrap();
}
