//! Tests of the sandbox and `redis.*` in one Lua state (`vm.rs`) over a fake host.

use super::vm::{Host, Vm};
use super::{parse_shebang, sha1hex, Running, Script, Scripts};
use crate::protocol::reply::{Proto, ReplyBuf};
use bytes::{Bytes, BytesMut};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A host that answers every command with a fixed reply and records the argv.
struct Echo(Vec<Vec<Bytes>>);

impl Host for Echo {
    fn call(&mut self, argv: Vec<Bytes>, proto: Proto) -> Result<BytesMut, String> {
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
        self.0.push(argv);
        let mut r = ReplyBuf::new(proto);
        match name.as_str() {
            "fail" => r.error("ERR value is not an integer or out of range"),
            "nope" => return Err("ERR Unknown Redis command called from script".into()),
            "hgetall" => {
                r.map(1);
                r.bulk(b"a");
                r.bulk(b"1");
            }
            _ => r.ok(),
        }
        Ok(r.take())
    }
}

fn eval(body: &str, keys: &[&str], args: &[&str]) -> (String, Vec<Vec<Bytes>>) {
    let (flags, code) = parse_shebang(body.as_bytes()).unwrap();
    let script = Script {
        sha: sha1hex(body.as_bytes()),
        code,
        flags,
        undeclared_keys: Default::default(),
    };
    let mut vm = Vm::new(0, 16 << 20).unwrap();
    let mut host = Echo(Vec::new());
    let b = |v: &[&str]| {
        v.iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect::<Vec<_>>()
    };
    let out = vm.run(
        &script,
        &b(keys),
        &b(args),
        Proto::Resp2,
        &mut host,
        test_running(),
    );
    (String::from_utf8_lossy(&out.reply).into_owned(), host.0)
}

fn test_running() -> Arc<Running> {
    let scripts = Scripts::default();
    let g = scripts.begin(std::time::Duration::from_secs(5));
    g.running.clone()
}

#[test]
fn a_killed_script_stops() {
    let (flags, code) = parse_shebang(b"while true do end").unwrap();
    let script = Script {
        sha: "k".into(),
        code,
        flags,
        undeclared_keys: Default::default(),
    };
    let running = test_running();
    let r2 = running.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        r2.kill.store(true, Ordering::SeqCst);
    });
    let mut vm = Vm::new(0, 16 << 20).unwrap();
    let out = vm.run(
        &script,
        &[],
        &[],
        Proto::Resp2,
        &mut Echo(Vec::new()),
        running,
    );
    t.join().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.reply),
        "-ERR Script killed by user with SCRIPT KILL... script: k, on @user_script:1.\r\n"
    );
}

fn sha(body: &str) -> String {
    sha1hex(body.as_bytes())
}

#[test]
fn globals_are_protected() {
    let body = "return x";
    assert_eq!(
        eval(body, &[], &[]).0,
        format!(
            "-ERR user_script:1: Script attempted to access nonexistent global variable 'x' \
             script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    let body = "x = 1";
    assert_eq!(
        eval(body, &[], &[]).0,
        format!(
            "-ERR user_script:1: Attempt to modify a readonly table script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    for lib in [
        "string.x = 1",
        "redis.call = nil",
        "_G.y = 2",
        "math.pi = 3",
    ] {
        assert!(
            eval(lib, &[], &[])
                .0
                .contains("Attempt to modify a readonly table"),
            "{lib}"
        );
    }
    for gone in [
        "io", "print", "dofile", "loadfile", "require", "debug", "setfenv",
    ] {
        let (r, _) = eval(&format!("return {gone}"), &[], &[]);
        assert!(r.contains("nonexistent global variable"), "{gone}: {r}");
    }
    assert_eq!(
        eval(
            "return {type(loadstring), type(unpack), type(table.getn), type(coroutine.create)}",
            &[],
            &[]
        )
        .0,
        "*4\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n"
    );
    // A pattern long enough to overflow the stack in Lua 5.1's matcher is refused, as a
    // function and as a method; long subjects and ordinary patterns are fine.
    for script in [
        "return string.find(string.rep('a', 30000), string.rep('a?', 15000))",
        "local s = 'aaa' return s:match(string.rep('a?', 15000))",
        "return string.gsub('a', string.rep('%a', 15000), '')",
    ] {
        let (r, _) = eval(script, &[], &[]);
        assert!(r.contains("pattern too complex"), "{script}: {r}");
    }
    assert_eq!(
        eval(
            "return #string.match(string.rep('a', 5000), string.rep('a?', 5000))",
            &[],
            &[]
        )
        .0,
        ":5000\r\n"
    );
    // `os` holds only `clock`, read-only.
    assert_eq!(
        eval(
            "local a = os.clock() local b = os.clock() \
             return {type(os.execute), type(os.exit), type(os.getenv), b >= a and a >= 0}",
            &[],
            &[]
        )
        .0,
        "*4\r\n$3\r\nnil\r\n$3\r\nnil\r\n$3\r\nnil\r\n:1\r\n"
    );
    assert!(eval("os.exit = 1", &[], &[])
        .0
        .contains("Attempt to modify a readonly table"));
    assert_eq!(
        eval("local t = {} t.x = 1 return t.x", &[], &[]).0,
        ":1\r\n"
    );
}

#[test]
fn rawset_does_not_leak_into_the_next_script() {
    let (flags, code) = parse_shebang(b"rawset(_G, 'leak', 1) return 1").unwrap();
    let s1 = Script {
        sha: "a".into(),
        code,
        flags,
        undeclared_keys: Default::default(),
    };
    let s2 = Script {
        sha: "b".into(),
        code: b"return leak".to_vec(),
        flags,
        undeclared_keys: Default::default(),
    };
    let mut vm = Vm::new(0, 16 << 20).unwrap();
    let mut host = Echo(Vec::new());
    vm.run(&s1, &[], &[], Proto::Resp2, &mut host, test_running());
    let out = vm.run(&s2, &[], &[], Proto::Resp2, &mut host, test_running());
    assert!(String::from_utf8_lossy(&out.reply).contains("nonexistent global variable 'leak'"));
}

#[test]
fn keys_args_and_call_arguments() {
    let (r, calls) = eval(
        "redis.call('set', KEYS[1], ARGV[1], 3, 0.1, 1e20) return {KEYS[1], ARGV[2]}",
        &["k"],
        &["v", "w"],
    );
    assert_eq!(r, "*2\r\n$1\r\nk\r\n$1\r\nw\r\n");
    let argv: Vec<String> = calls[0]
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert_eq!(argv, ["set", "k", "v", "3", "0.10000000000000001", "1e+20"]);
    let body = "return redis.call('get', {})";
    assert_eq!(
        eval(body, &[], &[]).0,
        format!(
            "-ERR Lua redis lib command arguments must be strings or integers script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    assert_eq!(
        eval("return redis.pcall()", &[], &[]).0,
        "-ERR Please specify at least one argument for this redis lib call\r\n"
    );
}

#[test]
fn call_raises_and_pcall_returns_errors() {
    let body = "return redis.call('fail')";
    assert_eq!(
        eval(body, &[], &[]).0,
        format!(
            "-ERR value is not an integer or out of range script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    assert_eq!(
        eval("return redis.pcall('fail')", &[], &[]).0,
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        eval("local r = redis.pcall('fail') return r['err']", &[], &[]).0,
        "$43\r\nERR value is not an integer or out of range\r\n"
    );
    let body = "\nlocal x = 1\nreturn redis.call('nope')";
    assert_eq!(
        eval(body, &[], &[]).0,
        format!(
            "-ERR Unknown Redis command called from script script: {}, on @user_script:3.\r\n",
            sha(body)
        )
    );
    assert_eq!(
        eval("return redis.call('set','a','b')['ok']", &[], &[]).0,
        "$2\r\nOK\r\n"
    );
    let body = "error('boom')";
    assert_eq!(
        eval(body, &[], &[]).0,
        format!(
            "-ERR user_script:1: boom script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    let body = "error({err='boom'})";
    assert_eq!(
        eval(body, &[], &[]).0,
        format!("-boom script: {}, on @user_script:1.\r\n", sha(body))
    );
    // pcall inside the script catches a raised call.
    assert_eq!(
        eval(
            "local ok, e = pcall(redis.call, 'fail') return e['err']",
            &[],
            &[]
        )
        .0,
        "$43\r\nERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn redis_helpers() {
    assert_eq!(
        eval("return redis.error_reply('My Error')", &[], &[]).0,
        "-My Error\r\n"
    );
    assert_eq!(
        eval("return redis.error_reply('Oops')", &[], &[]).0,
        "-ERR Oops\r\n"
    );
    assert_eq!(
        eval("return redis.error_reply('-Oops')", &[], &[]).0,
        "-ERR Oops\r\n"
    );
    assert_eq!(
        eval("return redis.error_reply(1)", &[], &[]).0,
        "-ERR wrong number or type of arguments\r\n"
    );
    assert_eq!(
        eval("return redis.status_reply('FINE')", &[], &[]).0,
        "+FINE\r\n"
    );
    assert_eq!(
        eval("return redis.sha1hex('')", &[], &[]).0,
        "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"
    );
    assert_eq!(
        eval(
            "return redis.REDIS_VERSION .. ' ' .. redis.REDIS_VERSION_NUM",
            &[],
            &[]
        )
        .0,
        "$13\r\n7.0.15 458767\r\n"
    );
    let body = "return redis.setresp(4)";
    assert_eq!(
        eval(body, &[], &[]).0,
        format!(
            "-ERR RESP version must be 2 or 3. script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    assert!(eval("return redis.log()", &[], &[])
        .0
        .contains("requires two arguments"));
    assert_eq!(
        eval("return redis.log(redis.LOG_WARNING, 'x')", &[], &[]).0,
        "$-1\r\n"
    );
    assert!(eval("return redis.set_repl(99)", &[], &[])
        .0
        .contains("Invalid replication flags"));
    assert_eq!(
        eval("return redis.set_repl(redis.REPL_ALL)", &[], &[]).0,
        "$-1\r\n"
    );
    assert_eq!(
        eval("return redis.replicate_commands()", &[], &[]).0,
        ":1\r\n"
    );
    assert_eq!(eval("return redis.breakpoint()", &[], &[]).0, "$-1\r\n");
    // RESP3 after setresp(3): the map comes back as {map=...}.
    assert_eq!(
        eval(
            "redis.setresp(3) return redis.call('hgetall','h')['map']['a']",
            &[],
            &[]
        )
        .0,
        "$1\r\n1\r\n"
    );
}

#[test]
fn bit_library_in_the_sandbox() {
    assert_eq!(eval("return bit.band(0xff, 0x0f)", &[], &[]).0, ":15\r\n");
    assert!(eval("bit.x = 1", &[], &[])
        .0
        .contains("Attempt to modify a readonly table"));
    let body = "return bit.tobit()";
    assert_eq!(
        eval(body, &[], &[]).0,
        format!(
            "-ERR user_script:1: bad argument #1 to 'tobit' (number expected, got no value) script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    assert_eq!(
        eval("local ok, e = pcall(bit.tobit) return e", &[], &[]).0,
        "$54\r\nbad argument #1 to '?' (number expected, got no value)\r\n"
    );
}

#[test]
fn runaway_memory_and_recursion_are_errors() {
    let (r, _) = eval(
        "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1024) .. i end",
        &[],
        &[],
    );
    assert!(r.starts_with('-') && r.contains("not enough memory"), "{r}");
    let (r, _) = eval(
        "local function f(n) return f(n + 1) + 1 end return f(1)",
        &[],
        &[],
    );
    assert!(r.starts_with("-ERR"), "{r}");
    assert!(eval("return +", &[], &[])
        .0
        .starts_with("-ERR Error compiling script (new function): user_script:1:"));
}
