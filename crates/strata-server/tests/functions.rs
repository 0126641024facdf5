//! Functions over TCP: FUNCTION LOAD/DELETE/FLUSH/LIST/STATS/KILL/DUMP/RESTORE/HELP, FCALL
//! and FCALL_RO with Redis 7.0's replies and errors; libraries surviving a restart.

mod common;

use common::{start, Client, V};
use std::thread;
use std::time::Duration;

const LIB: &str = "#!lua name=mylib\n\
    redis.register_function{function_name='echo', callback=function(keys, args) \
    return {keys, args} end, flags={'no-writes'}, description='keys and args'}\n\
    redis.register_function('setget', function(keys, args) \
    redis.call('set', keys[1], args[1]) return redis.call('get', keys[1]) end)\n\
    redis.register_function('fail', function(keys, args) error('boom') end)\n\
    redis.register_function('globals', function(keys, args) return KEYS end)\n";

fn err_starts(v: &V, prefix: &str) -> bool {
    matches!(v, V::Err(e) if e.starts_with(prefix))
}

fn bulk_of(v: V) -> Vec<u8> {
    match v {
        V::Bulk(b) => b,
        v => panic!("not a bulk: {v:?}"),
    }
}

#[test]
fn load_and_fcall_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["FUNCTION", "LOAD", LIB]), V::bulk("mylib"));
    assert_eq!(
        c.q(&["FUNCTION", "LOAD", LIB]),
        V::err("ERR Library 'mylib' already exists")
    );
    assert_eq!(c.q(&["FUNCTION", "LOAD", "REPLACE", LIB]), V::bulk("mylib"));
    assert_eq!(
        c.q(&["FUNCTION", "LOAD", "BOGUS", LIB]),
        V::err("ERR Unknown option given: BOGUS")
    );
    assert_eq!(
        c.q(&["FUNCTION", "LOAD", "return 1"]),
        V::err("ERR Missing library metadata")
    );
    assert_eq!(
        c.q(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=other\nredis.register_function('ECHO', function() end)"
        ]),
        V::err("ERR Function ECHO already exists")
    );
    assert_eq!(
        c.q(&["FUNCTION", "LOAD", "#!lua name=x\nredis.call('ping')"]),
        V::err(
            "ERR Error registering functions: ERR user_function:2: Script attempted to \
             access nonexistent global variable 'call'"
        )
    );
    // FCALL: keys and arguments as the callback's two tables, names in any case.
    assert_eq!(
        c.q(&["FCALL", "Echo", "2", "a", "b", "c"]),
        V::Array(vec![V::arr(&["a", "b"]), V::arr(&["c"])])
    );
    assert_eq!(c.q(&["FCALL", "setget", "1", "k", "v"]), V::bulk("v"));
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
    assert_eq!(
        c.q(&["FCALL", "fail", "0"]),
        V::err("ERR user_function:4: boom script: fail, on @user_function:4.")
    );
    assert_eq!(
        c.q(&["FCALL", "globals", "0"]),
        V::err(
            "ERR user_function:5: Script attempted to access nonexistent global variable \
             'KEYS' script: globals, on @user_function:5."
        )
    );
    // FCALL_RO refuses a function without no-writes before it runs.
    assert_eq!(
        c.q(&["FCALL_RO", "setget", "1", "k", "w"]),
        V::err("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
    assert_eq!(
        c.q(&["EVAL_RO", "#!lua\nreturn 1", "0"]),
        V::err("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(
        c.q(&["EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"]),
        V::Int(1)
    );
    assert_eq!(
        c.q(&["FCALL_RO", "echo", "0", "x"]),
        V::Array(vec![V::Array(vec![]), V::arr(&["x"])])
    );
    // Errors of the call itself.
    assert_eq!(
        c.q(&["FCALL", "nosuch", "0"]),
        V::err("ERR Function not found")
    );
    assert_eq!(
        c.q(&["FCALL", "echo", "x"]),
        V::err("ERR Bad number of keys provided")
    );
    assert_eq!(
        c.q(&["FCALL", "echo", "-1"]),
        V::err("ERR Number of keys can't be negative")
    );
    assert_eq!(
        c.q(&["FCALL", "echo", "2", "a"]),
        V::err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        c.q(&["FCALL", "echo"]),
        V::err("ERR wrong number of arguments for 'fcall' command")
    );
    // After REPLACE, every pooled Lua state runs the new code, not callbacks it kept.
    for version in 1..=3 {
        let code = format!(
            "#!lua name=versioned\nredis.register_function('version', function() return {version} end)"
        );
        c.q(&["FUNCTION", "LOAD", "REPLACE", &code]);
        for _ in 0..4 {
            assert_eq!(c.q(&["FCALL", "version", "0"]), V::Int(version));
        }
    }
    // Inside MULTI, FCALL is queued and runs in EXEC.
    assert_eq!(c.q(&["MULTI"]), V::ok());
    assert_eq!(
        c.q(&["FCALL", "setget", "1", "k", "m"]),
        V::Simple("QUEUED".into())
    );
    assert_eq!(c.q(&["EXEC"]), V::Array(vec![V::bulk("m")]));
    s.shutdown().unwrap();
}

#[test]
fn list_delete_flush_stats_help() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["FUNCTION", "LOAD", LIB]);
    let echo = V::Array(vec![
        V::bulk("name"),
        V::bulk("echo"),
        V::bulk("description"),
        V::bulk("keys and args"),
        V::bulk("flags"),
        V::Array(vec![V::Simple("no-writes".into())]),
    ]);
    let listed = c.q(&["FUNCTION", "LIST", "LIBRARYNAME", "MY*", "WITHCODE"]);
    let V::Array(libs) = listed else {
        panic!("{listed:?}")
    };
    let V::Array(lib) = &libs[0] else { panic!() };
    assert_eq!(
        lib[0..4],
        [
            V::bulk("library_name"),
            V::bulk("mylib"),
            V::bulk("engine"),
            V::bulk("LUA")
        ]
    );
    let V::Array(functions) = &lib[5] else {
        panic!()
    };
    assert_eq!(functions.len(), 4);
    assert_eq!(functions[0], echo);
    assert_eq!(lib[6..], [V::bulk("library_code"), V::bulk(LIB)]);
    assert_eq!(
        c.q(&["FUNCTION", "LIST", "LIBRARYNAME", "x*"]),
        V::Array(vec![])
    );
    assert_eq!(
        c.q(&["FUNCTION", "LIST", "LIBRARYNAME"]),
        V::err("ERR library name argument was not given")
    );
    assert_eq!(
        c.q(&["FUNCTION", "LIST", "WITHCODE", "WITHCODE"]),
        V::err("ERR Unknown argument WITHCODE")
    );
    // RESP3: maps, a set of flags, a null description.
    assert!(matches!(c.q(&["HELLO", "3"]), V::Map(_)));
    let listed = c.q(&["FUNCTION", "LIST"]);
    let V::Array(libs) = listed else { panic!() };
    let V::Map(lib) = &libs[0] else { panic!() };
    let V::Array(functions) = &lib[2].1 else {
        panic!()
    };
    let V::Map(fail) = &functions[1] else {
        panic!()
    };
    assert_eq!(fail[0], (V::bulk("name"), V::bulk("fail")));
    assert_eq!(fail[1], (V::bulk("description"), V::Null));
    assert_eq!(fail[2], (V::bulk("flags"), V::Set(vec![])));
    assert_eq!(
        c.q(&["FUNCTION", "STATS"]),
        V::Map(vec![
            (V::bulk("running_script"), V::Null),
            (
                V::bulk("engines"),
                V::Map(vec![(
                    V::bulk("LUA"),
                    V::Map(vec![
                        (V::bulk("libraries_count"), V::Int(1)),
                        (V::bulk("functions_count"), V::Int(4)),
                    ])
                )])
            ),
        ])
    );
    assert!(matches!(c.q(&["HELLO", "2"]), V::Array(_)));
    let info = bulk_of(c.q(&["INFO", "memory"]));
    assert!(String::from_utf8_lossy(&info).contains("number_of_functions:4\r\n"));
    assert_eq!(
        c.q(&["FUNCTION", "DELETE", "nosuch"]),
        V::err("ERR Library not found")
    );
    assert_eq!(c.q(&["FUNCTION", "DELETE", "mylib"]), V::ok());
    assert_eq!(
        c.q(&["FCALL", "echo", "0"]),
        V::err("ERR Function not found")
    );
    c.q(&["FUNCTION", "LOAD", LIB]);
    assert_eq!(
        c.q(&["FUNCTION", "FLUSH", "bogus"]),
        V::err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    );
    assert_eq!(
        c.q(&["FUNCTION", "FLUSH", "async", "sync"]),
        V::err(
            "ERR unknown subcommand or wrong number of arguments for 'FLUSH'. Try FUNCTION \
             HELP."
        )
    );
    assert_eq!(c.q(&["FUNCTION", "FLUSH", "SYNC"]), V::ok());
    assert_eq!(c.q(&["FUNCTION", "LIST"]), V::Array(vec![]));
    assert_eq!(
        c.q(&["FUNCTION", "KILL"]),
        V::err("NOTBUSY No scripts in execution right now.")
    );
    let V::Array(help) = c.q(&["FUNCTION", "HELP"]) else {
        panic!()
    };
    assert_eq!(
        help[0],
        V::Simple("FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".into())
    );
    assert_eq!(help.len(), 40);
    s.shutdown().unwrap();
}

#[test]
fn dump_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["FUNCTION", "LOAD", LIB]);
    let payload = bulk_of(c.q(&["FUNCTION", "DUMP"]));
    assert_eq!(payload[0], 245, "RDB_OPCODE_FUNCTION2");
    assert_eq!(
        c.qb(&[b"FUNCTION", b"RESTORE", &payload]),
        V::err("ERR Library mylib already exists")
    );
    assert_eq!(
        c.qb(&[b"FUNCTION", b"RESTORE", &payload, b"BOGUS"]),
        V::err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
    );
    assert_eq!(
        c.qb(&[b"FUNCTION", b"RESTORE", b"abc"]),
        V::err("ERR DUMP payload version or checksum are wrong")
    );
    c.q(&["FUNCTION", "FLUSH"]);
    c.q(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=b\nredis.register_function('b', function() return 2 end)",
    ]);
    assert_eq!(c.qb(&[b"FUNCTION", b"RESTORE", &payload]), V::ok());
    assert_eq!(c.q(&["FCALL", "b", "0"]), V::Int(2));
    assert_eq!(c.q(&["FCALL", "setget", "1", "k", "r"]), V::bulk("r"));
    assert_eq!(
        c.qb(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]),
        V::ok()
    );
    assert_eq!(
        c.qb(&[b"FUNCTION", b"RESTORE", &payload, b"FLUSH"]),
        V::ok()
    );
    assert_eq!(c.q(&["FCALL", "b", "0"]), V::err("ERR Function not found"));
    assert_eq!(bulk_of(c.q(&["FUNCTION", "DUMP"])), payload);
    s.shutdown().unwrap();
}

/// Libraries are stored in the database and loaded again before clients are served.
#[test]
fn libraries_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["FUNCTION", "LOAD", LIB]);
    c.q(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=gone\nredis.register_function('gone', function() end)",
    ]);
    assert_eq!(c.q(&["FUNCTION", "DELETE", "gone"]), V::ok());
    let before = c.q(&["FUNCTION", "LIST", "WITHCODE"]);
    s.shutdown().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["FUNCTION", "LIST", "WITHCODE"]), before);
    assert_eq!(
        c.q(&["FCALL", "setget", "1", "k", "after"]),
        V::bulk("after")
    );
    assert_eq!(
        c.q(&["FCALL", "gone", "0"]),
        V::err("ERR Function not found")
    );
    // FLUSHALL leaves the libraries, as in Redis; FUNCTION FLUSH survives a restart too.
    assert_eq!(c.q(&["FLUSHALL"]), V::ok());
    assert_eq!(
        c.q(&["FCALL", "echo", "0"]),
        V::Array(vec![V::Array(vec![]), V::Array(vec![])])
    );
    assert_eq!(c.q(&["FUNCTION", "FLUSH"]), V::ok());
    s.shutdown().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["FUNCTION", "LIST"]), V::Array(vec![]));
    s.shutdown().unwrap();
}

/// A busy function: other clients get the FUNCTION KILL text, SCRIPT KILL refuses it,
/// FUNCTION STATS reports it, FUNCTION KILL stops it.
#[test]
fn busy_function_stats_and_kill() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let addr = s.local_addr();
    let mut c = Client::connect(addr);
    c.q(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
    c.q(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=slow\nredis.register_function('spin', function(keys, args) \
         local i = 0 while true do i = i + 1 end end)",
    ]);
    let looping = thread::spawn(move || {
        let mut a = Client::connect(addr);
        a.q(&["FCALL", "spin", "0", "x"])
    });
    thread::sleep(Duration::from_millis(400));
    let busy =
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
    assert_eq!(c.q(&["GET", "x"]), V::err(busy));
    assert_eq!(c.q(&["SCRIPT", "KILL"]), V::err(busy));
    let V::Array(stats) = c.q(&["FUNCTION", "STATS"]) else {
        panic!()
    };
    let V::Array(running) = &stats[1] else {
        panic!("{stats:?}")
    };
    assert_eq!(
        running[..4],
        [
            V::bulk("name"),
            V::bulk("spin"),
            V::bulk("command"),
            V::arr(&["FCALL", "spin", "0", "x"])
        ]
    );
    assert_eq!(running[4], V::bulk("duration_ms"));
    assert!(matches!(running[5], V::Int(ms) if ms >= 100));
    assert_eq!(c.q(&["FUNCTION", "KILL"]), V::ok());
    let r = looping.join().unwrap();
    assert_eq!(
        r,
        V::err("ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.")
    );
    // A busy EVAL: FUNCTION KILL and FUNCTION STATS answer with the SCRIPT KILL text.
    let looping = thread::spawn(move || {
        let mut a = Client::connect(addr);
        a.q(&["EVAL", "while true do end", "0"])
    });
    thread::sleep(Duration::from_millis(400));
    let eval_busy =
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
    assert_eq!(c.q(&["FUNCTION", "KILL"]), V::err(eval_busy));
    assert_eq!(c.q(&["FUNCTION", "STATS"]), V::err(eval_busy));
    assert_eq!(c.q(&["SCRIPT", "KILL"]), V::ok());
    assert!(err_starts(
        &looping.join().unwrap(),
        "ERR Script killed by user"
    ));
    s.shutdown().unwrap();
}

/// A stored library that does not load stops the server at start with a clear error, not a
/// panic: a payload with a bad checksum, and a valid payload whose library fails.
#[test]
fn a_corrupt_stored_library_is_an_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["FUNCTION", "LOAD", LIB]);
    let good = bulk_of(c.q(&["FUNCTION", "DUMP"]));
    s.shutdown().unwrap();
    let key = [&[0xfe][..], b"functions"].concat();
    let mut bad_crc = good.clone();
    bad_crc[3] ^= 0xff;
    // A library without functions, in a payload whose checksum is right.
    let mut no_functions = vec![245u8, 21];
    no_functions.extend_from_slice(b"#!lua name=x\nreturn 1");
    no_functions.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64_jones(&no_functions);
    no_functions.extend_from_slice(&crc.to_le_bytes());
    for (value, want) in [
        (&bad_crc, "DUMP payload version or checksum are wrong"),
        (&no_functions, "No functions registered"),
    ] {
        let db = strata::Db::open(dir.path(), strata::DbOptions::default()).unwrap();
        db.put(&key, value).unwrap();
        db.close().unwrap();
        let args: Vec<String> = [
            "--port",
            "0",
            "--dir",
            dir.path().to_str().unwrap(),
            "--shards",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cfg = strata_server::Config::from_args(&args).unwrap();
        let err = match strata_server::start(cfg, Default::default()) {
            Ok(_) => panic!("started over a corrupt library"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("function libraries") && err.contains(want),
            "{err}"
        );
    }
    // The good payload back: the server starts and the function runs.
    let db = strata::Db::open(dir.path(), strata::DbOptions::default()).unwrap();
    db.put(&key, &good).unwrap();
    db.close().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["FCALL", "setget", "1", "k", "ok"]), V::bulk("ok"));
    s.shutdown().unwrap();
}

/// Redis's CRC-64 (Jones, reflected), bit by bit: the test's own, independent of the
/// server's table-driven one.
fn crc64_jones(data: &[u8]) -> u64 {
    let mut crc: u64 = 0;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}
