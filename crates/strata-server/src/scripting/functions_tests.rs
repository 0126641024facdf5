//! Unit tests of the function registry: library and function name rules, the load-time
//! sandbox, REPLACE, DELETE, FLUSH, flags, and the DUMP/RESTORE payload.

use super::functions::*;
use bytes::Bytes;
use std::cell::RefCell;

/// A `save` that keeps every payload it was given.
struct Saved(RefCell<Vec<Vec<u8>>>);

impl Saved {
    fn new() -> Saved {
        Saved(RefCell::new(Vec::new()))
    }
    fn save(&self) -> impl Fn(&[u8]) -> Result<(), String> + '_ {
        |p: &[u8]| {
            self.0.borrow_mut().push(p.to_vec());
            Ok(())
        }
    }
    fn count(&self) -> usize {
        self.0.borrow().len()
    }
}

fn lib(name: &str, functions: &[&str]) -> Bytes {
    let mut code = format!("#!lua name={name}\n");
    for f in functions {
        code.push_str(&format!(
            "redis.register_function('{f}', function(keys, args) return 1 end)\n"
        ));
    }
    Bytes::from(code)
}

fn load(f: &Functions, code: &str) -> Result<String, String> {
    f.load(Bytes::from(code.to_string()), false, &|_| Ok(()))
}

/// A FUNCTION DUMP of redis-server 7.0.15 (LZF-compressed code) holding library `mylib`:
/// `myfunc` (no-writes, described) and `myset`.
const REDIS_PAYLOAD: &str = "f5c340ca41141f23216c7561206e616d653d6d796c69620a72656469732e72656769737465725f0866756e6374696f6e7bc008005f602b02276d7940100b272c2063616c6c6261636b3d400f402912286b6579732c2061726773292072657475726e600c1f5b315d20656e642c20666c6167733d7b276e6f2d777269746573277d2c20646504736372697040400f3d276563686f20746865206669727374403d06756d656e74277de00f9d0028208f02736574208ee0138580da40b0012827802d40aa209780ad2008002920a10164290a003dce53ce53183b24";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn metadata_rules() {
    assert_eq!(parse_metadata(b"#!lua name=a_1\n").unwrap(), "a_1");
    assert_eq!(parse_metadata(b"#!LUA   NAME=x  \ncode").unwrap(), "x");
    let err = |c: &[u8]| parse_metadata(c).unwrap_err();
    assert_eq!(err(b"return 1"), "ERR Missing library metadata");
    assert_eq!(err(b"#!lua name=x"), "ERR Invalid library metadata");
    assert_eq!(err(b"#!lua\n"), "ERR Library name was not given");
    assert_eq!(
        err(b"#!lua name=x foo=bar\n"),
        "ERR Invalid metadata value given: foo=bar"
    );
    assert_eq!(
        err(b"#!lua name=x name=y\n"),
        "ERR Invalid metadata value, name argument was given multiple times"
    );
    assert!(err(b"#!lua name=a-b\n").starts_with("ERR Library names can only contain"));
    assert!(err(b"#!lua name=\n").starts_with("ERR Library names can only contain"));
    assert_eq!(err(b"#!lu name=x\n"), "ERR Engine 'lu' not found");
    assert_eq!(
        err("#!lua nam\u{e9}=x\n".as_bytes()),
        "ERR Invalid metadata value given: nam\u{e9}=x"
    );
    assert_eq!(err("#!\u{e9}".as_bytes()), "ERR Invalid library metadata");
    // Quotes and escapes as Redis's sdssplitargs reads them.
    assert_eq!(parse_metadata(b"#!lua name=\"ab\"\n").unwrap(), "ab");
    assert_eq!(parse_metadata(b"#!lua name=\"h\\x41\"\n").unwrap(), "hA");
    assert_eq!(err(b"#!lua name=\"cd\n"), "ERR Invalid library metadata");
    assert_eq!(err(b"#!lua name=\"h\"x\n"), "ERR Invalid library metadata");
    assert!(err(b"#!lua \"name=e f\"\n").starts_with("ERR Library names can only contain"));
}

#[test]
fn load_registers_functions_with_flags_and_description() {
    let f = Functions::default();
    let code = "#!lua name=t\nredis.register_function{function_name='f7', \
                callback=function(keys, args) return 1 end, flags={'no-writes', 'ALLOW-OOM'}, \
                description='d7'}\nredis.register_function('g', function() return 2 end)";
    assert_eq!(load(&f, code).unwrap(), "t");
    let (l, name) = f.find(b"F7").unwrap();
    assert_eq!(name, "f7");
    let info = &l.functions["f7"];
    assert!(info.flags.no_writes && info.flags.allow_oom && !info.flags.allow_stale);
    assert!(info.flags.shebang);
    assert_eq!(info.description.as_deref(), Some(&b"d7"[..]));
    assert!(l.functions["g"].description.is_none());
    assert_eq!(f.counts(), (1, 2));
    assert!(f.find(b"nosuch").is_none());
}

#[test]
fn load_time_errors_are_redis_texts() {
    let f = Functions::default();
    let cases: &[(&str, &str)] = &[
        ("return 1", "ERR No functions registered"),
        (
            "redis.call('ping')",
            "ERR Error registering functions: ERR user_function:2: Script attempted to \
             access nonexistent global variable 'call'",
        ),
        (
            "local x = string.len('a')",
            "ERR Error registering functions: ERR user_function:2: Script attempted to \
             access nonexistent global variable 'string'",
        ),
        (
            "x = 1",
            "ERR Error registering functions: ERR user_function:2: Attempt to modify a \
             readonly table",
        ),
        (
            "local a = nil + 1",
            "ERR Error registering functions: ERR user_function:2: attempt to perform \
             arithmetic on a nil value",
        ),
        (
            "redis.register_function('a', function() end",
            "ERR Error compiling function: user_function:2: ')' expected near '<eof>'",
        ),
        (
            "redis.register_function('f-1', function() end)",
            "ERR Error registering functions: ERR Library names can only contain letters, \
             numbers, or underscores(_) and must be at least one character long",
        ),
        (
            "redis.register_function('g', function() end)\n\
             redis.register_function('g', function() end)",
            "ERR Error registering functions: ERR Function already exists in the library",
        ),
        (
            "redis.register_function('a', 'b')",
            "ERR Error registering functions: ERR second argument to \
             redis.register_function must be a function",
        ),
        (
            "redis.register_function()",
            "ERR Error registering functions: ERR wrong number of arguments to \
             redis.register_function",
        ),
        (
            "redis.register_function('x')",
            "ERR Error registering functions: ERR calling redis.register_function with a \
             single argument is only applicable to Lua table (representing named arguments).",
        ),
        (
            "redis.register_function{function_name='q', callback=function() end, flags={'x'}}",
            "ERR Error registering functions: ERR unknown flag given",
        ),
        (
            "redis.register_function{function_name='q', callback=function() end, flags='x'}",
            "ERR Error registering functions: ERR flags argument to redis.register_function \
             must be a table representing function flags",
        ),
        (
            "redis.register_function{function_name='q', callback=function() end, foo=1}",
            "ERR Error registering functions: ERR unknown argument given to \
             redis.register_function",
        ),
        (
            "redis.register_function{callback=function() end}",
            "ERR Error registering functions: ERR redis.register_function must get a \
             function name argument",
        ),
        (
            "redis.register_function{function_name='q'}",
            "ERR Error registering functions: ERR redis.register_function must get a \
             callback argument",
        ),
        (
            "while true do end",
            "ERR Error registering functions: ERR FUNCTION LOAD timeout",
        ),
    ];
    for (body, want) in cases {
        let got = load(&f, &format!("#!lua name=w\n{body}")).unwrap_err();
        assert_eq!(&got, want, "{body}");
    }
    assert_eq!(f.counts(), (0, 0));
    // A number is a name, as Lua's lua_isstring takes it; redis.log works at load time.
    let ok = "#!lua name=n\nredis.log(redis.LOG_WARNING, 'loading')\n\
              redis.register_function(1, function() return redis.REDIS_VERSION end)";
    assert_eq!(load(&f, ok).unwrap(), "n");
    assert!(f.find(b"1").is_some());
}

#[test]
fn replace_delete_flush_and_collisions() {
    let f = Functions::default();
    let saved = Saved::new();
    f.load(lib("a", &["f1", "f2"]), false, &saved.save())
        .unwrap();
    assert_eq!(
        f.load(lib("a", &["f3"]), false, &saved.save()).unwrap_err(),
        "ERR Library 'a' already exists"
    );
    // Function names collide across libraries without regard to case.
    assert_eq!(
        f.load(lib("b", &["F1"]), false, &saved.save()).unwrap_err(),
        "ERR Function F1 already exists"
    );
    f.load(lib("a", &["f3"]), true, &saved.save()).unwrap();
    assert!(f.find(b"f1").is_none() && f.find(b"f3").is_some());
    // REPLACE that collides with another library leaves both as they were.
    f.load(lib("b", &["g"]), false, &saved.save()).unwrap();
    assert_eq!(
        f.load(lib("a", &["g"]), true, &saved.save()).unwrap_err(),
        "ERR Function g already exists"
    );
    assert!(f.find(b"f3").is_some());
    assert_eq!(saved.count(), 3);
    assert_eq!(
        f.delete(b"nosuch", &saved.save()).unwrap_err(),
        "ERR Library not found"
    );
    assert_eq!(
        f.delete(b"A", &saved.save()).unwrap_err(),
        "ERR Library not found"
    );
    f.delete(b"a", &saved.save()).unwrap();
    assert!(f.find(b"f3").is_none());
    assert_eq!(f.counts(), (1, 1));
    f.flush(&saved.save()).unwrap();
    assert_eq!(f.counts(), (0, 0));
    assert_eq!(saved.count(), 5);
}

#[test]
fn a_change_that_cannot_be_stored_is_not_made() {
    let f = Functions::default();
    let fail = |_: &[u8]| Err("ERR disk full".to_string());
    assert_eq!(
        f.load(lib("a", &["f1"]), false, &fail).unwrap_err(),
        "ERR disk full"
    );
    assert_eq!(f.counts(), (0, 0));
    f.load(lib("a", &["f1"]), false, &|_| Ok(())).unwrap();
    assert!(f.delete(b"a", &fail).is_err());
    assert!(f.flush(&fail).is_err());
    assert_eq!(f.counts(), (1, 1));
}

#[test]
fn payload_round_trip_and_policies() {
    let f = Functions::default();
    f.load(lib("a", &["f1"]), false, &|_| Ok(())).unwrap();
    f.load(lib("b", &["f2", "f3"]), false, &|_| Ok(())).unwrap();
    let p = f.payload();
    assert_eq!(p[0], OPCODE_FUNCTION);
    let (_, version) = crate::rdb::check_payload(&p).unwrap();
    assert_eq!(version, PAYLOAD_VERSION);

    let g = Functions::open(Some(&p)).unwrap();
    assert_eq!(g.counts(), (2, 3));
    assert_eq!(g.payload(), p);

    let h = Functions::default();
    h.load(lib("a", &["other"]), false, &|_| Ok(())).unwrap();
    assert_eq!(
        h.restore(&p, RestorePolicy::Append, &|_| Ok(()))
            .unwrap_err(),
        "ERR Library a already exists"
    );
    h.restore(&p, RestorePolicy::Replace, &|_| Ok(())).unwrap();
    assert!(h.find(b"other").is_none() && h.find(b"f1").is_some());
    h.load(lib("c", &["x"]), false, &|_| Ok(())).unwrap();
    assert_eq!(
        h.restore(&p, RestorePolicy::Replace, &|_| Ok(()))
            .map(|_| h.counts()),
        Ok((3, 4))
    );
    h.restore(&p, RestorePolicy::Flush, &|_| Ok(())).unwrap();
    assert_eq!(h.counts(), (2, 3));

    // A function of the payload that another library has fails the restore.
    let k = Functions::default();
    k.load(lib("z", &["f2"]), false, &|_| Ok(())).unwrap();
    assert_eq!(
        k.restore(&p, RestorePolicy::Append, &|_| Ok(()))
            .unwrap_err(),
        "ERR Function f2 already exists"
    );
    assert_eq!(k.counts(), (1, 1));
}

#[test]
fn bad_payloads_are_refused() {
    let f = Functions::default();
    let bad = |p: &[u8]| {
        f.restore(p, RestorePolicy::Append, &|_| Ok(()))
            .unwrap_err()
    };
    assert_eq!(
        bad(b"abc"),
        "ERR DUMP payload version or checksum are wrong"
    );
    let mut p = Functions::default().payload();
    assert_eq!(p.len(), 10, "an empty registry is the footer alone");
    f.restore(&p, RestorePolicy::Append, &|_| Ok(())).unwrap();
    p[0] ^= 1;
    assert_eq!(bad(&p), "ERR DUMP payload version or checksum are wrong");
    // A string value's DUMP is not a function.
    let dump = crate::rdb::dump_payload(&crate::rdb::Value::String(b"x".to_vec()));
    assert_eq!(bad(&dump), "ERR given type is not a function");
    // A library whose code does not load.
    let mut body = vec![OPCODE_FUNCTION];
    crate::rdb::write::string(&mut body, b"#!lua name=x\nreturn 1");
    body.extend_from_slice(&PAYLOAD_VERSION.to_le_bytes());
    let crc = crate::rdb::crc64::crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(bad(&body), "ERR No functions registered");
    assert!(Functions::open(Some(&body)).is_err());
    assert!(Functions::open(Some(b"garbage")).is_err());
}

#[test]
fn redis_payload_restores() {
    let f = Functions::default();
    f.restore(&unhex(REDIS_PAYLOAD), RestorePolicy::Append, &|_| Ok(()))
        .unwrap();
    let (l, _) = f.find(b"myfunc").unwrap();
    assert_eq!(l.name, "mylib");
    assert!(l.functions["myfunc"].flags.no_writes);
    assert_eq!(
        l.functions["myfunc"].description.as_deref(),
        Some(&b"echo the first argument"[..])
    );
    assert!(f.find(b"myset").is_some());
    assert!(l.code.starts_with(b"#!lua name=mylib\n"));
}
