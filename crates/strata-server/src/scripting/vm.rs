//! One sandboxed Lua 5.1 state as Redis 7.0 sets it up (`script_lua.c`, `eval.c`), and
//! running a script in it.
//!
//! **Sandbox.** The base, table, string and math libraries (coroutine is part of 5.1's
//! base); no `io`, `os`, `debug`, `package`/`require`, `dofile`, `loadfile`, `print`,
//! `getfenv`/`setfenv`, `newproxy`. The state's globals table is an empty proxy over the
//! real globals: reading a missing global raises "Script attempted to access nonexistent
//! global variable", assigning one raises "Attempt to modify a readonly table", and the
//! library tables (`string`, `table`, `math`, `coroutine`, `redis`, `bit`, `cjson`,
//! `cmsgpack`, `struct`) are read-only proxies
//! too. Anything a script managed to store in a proxy with `rawset` is wiped after it
//! ends, so scripts cannot leave state for the next one. The state's memory is bounded
//! (`super::LUA_MEMORY_LIMIT_BYTES`): an allocation beyond it fails the script with
//! "not enough memory".
//!
//! **Errors.** A script runs under `xpcall` with Redis's error handler: an error value that
//! is not a table becomes `{err='ERR <message>'}`, and the handler notes the source and line
//! of the script's frame, which the reply quotes (`... script: <sha>, on @user_script:1.`).
//! `redis.call` raises a command's error reply as such a table; `redis.pcall` returns it.

use super::resp::{lua_to_reply, reply_to_lua};
use super::{Running, Script};
use crate::protocol::reply::{Proto, ReplyBuf};
use bytes::{Bytes, BytesMut};
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Redis's version as scripts see it (`redis.REDIS_VERSION`, `redis.REDIS_VERSION_NUM`).
pub const REDIS_VERSION: &str = "7.0.15";
pub const REDIS_VERSION_NUM: i64 = 0x0007_000f;

/// Instructions between two checks of the kill flag (Redis's count hook).
pub const HOOK_INSTRUCTIONS: u32 = 100_000;

/// Compiled scripts a state keeps at most. Each is an mlua reference, and mlua keeps those
/// on one Lua stack of about 8000 slots: 10,000 distinct scripts made every later script
/// fail with "out of Lua stack".
const COMPILED_MAX: usize = 1000;

/// The chunk name of scripts (errors say `user_script:1:`).
const CHUNK_NAME: &str = "@user_script";
/// The chunk name of the sandbox's own Lua code (skipped when an error finds its line).
pub(crate) const SANDBOX_CHUNK: &str = "=redis";

/// What a script's `redis.call` runs on: the server side of a script.
pub trait Host {
    /// Runs `argv` (checked and run as the script's command, see `cmd/scripting.rs`) and
    /// returns its reply in `proto`; `Err` is an error text of the script layer
    /// (`ERR Unknown Redis command called from script`, ...), raised or returned as a
    /// command's error is.
    fn call(&mut self, argv: Vec<Bytes>, proto: Proto) -> Result<BytesMut, String>;
}

/// A Lua state with Redis's sandbox and the scripts it has compiled.
pub struct Vm {
    lua: Lua,
    /// `SCRIPT FLUSH` generation this state belongs to.
    pub generation: u64,
    /// The real globals behind the read-only proxy (KEYS and ARGV are set here).
    backing: Table,
    /// The `redis` table behind its read-only proxy (`call`, `pcall` and `setresp` are
    /// bound to each run's host here).
    redis: Table,
    /// Wipes what a script stored in the proxies.
    cleanup: Function,
    handler: Function,
    xpcall: Function,
    /// The proxy every script runs with as its environment.
    env: Table,
    compiled: HashMap<String, Function>,
}

/// Checks that `code` compiles, as SCRIPT LOAD and EVAL do before caching it.
pub fn check_compiles(code: &[u8]) -> Result<(), String> {
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::default()).map_err(|e| e.to_string())?;
    lua.load(code)
        .set_name(CHUNK_NAME)
        .into_function()
        .map(|_| ())
        .map_err(compile_error)
}

fn compile_error(e: mlua::Error) -> String {
    let msg = match e {
        mlua::Error::SyntaxError { message, .. } => message,
        other => other.to_string(),
    };
    format!("ERR Error compiling script (new function): {msg}")
}

/// The sandbox, in Lua: `backing` holds the real globals, `hooks` the per-run callbacks.
const SANDBOX: &str = r#"
local backing, hooks = ...
local error, rawset, setmetatable, next, tostring = error, rawset, setmetatable, next, tostring
local function readonly() error("Attempt to modify a readonly table", 2) end
local function proxy(t)
  return setmetatable({}, {__index = t, __newindex = readonly, __metatable = "readonly"})
end
local unwrap = hooks.unwrap
local raw_pcall, raw_xpcall = pcall, xpcall
-- A Redis error raised by a redis.* function reaches a script's own pcall as {err=...}.
local function unwrapped(ok, ...)
  if ok then return ok, ... end
  return false, unwrap((...))
end
backing.pcall = function(f, ...) return unwrapped(raw_pcall(f, ...)) end
backing.xpcall = function(f, h)
  return raw_xpcall(f, function(e) return h(unwrap(e)) end)
end
-- Lua 5.1 matches a pattern by recursing once per pattern item, without a bound (5.2 added
-- one): a pattern of a few hundred thousand items overflows the thread's stack and takes the
-- server down (redis-server too). Longer patterns than any script needs are refused, on the
-- library table itself so that s:find(p) is covered too. 20,000 items recurse well within
-- the network threads' 16 MiB stacks, in debug builds too.
local MAX_PATTERN_BYTES = 20000
local type, string_lib = type, backing.string
for _, name in ipairs({"find", "match", "gmatch", "gsub"}) do
  local f = string_lib[name]
  string_lib[name] = function(s, p, ...)
    if type(p) == "string" and #p > MAX_PATTERN_BYTES then
      error("pattern too complex", 2)
    end
    return f(s, p, ...)
  end
end
local G = setmetatable({}, {
  __index = function(_, k)
    local v = backing[k]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = readonly,
  __metatable = "readonly",
})
local proxies = {G}
for _, name in ipairs({"string", "table", "math", "coroutine", "redis", "bit", "cjson",
                       "cmsgpack", "struct", "os"}) do
  local p = proxy(backing[name])
  backing[name] = p
  proxies[#proxies + 1] = p
end
backing._G = G
for _, name in ipairs({"dofile", "loadfile", "print", "getfenv", "setfenv", "newproxy",
                       "module", "require", "package", "debug", "io"}) do
  backing[name] = nil
end
local function cleanup()
  for _, p in ipairs(proxies) do
    local k = next(p)
    while k ~= nil do
      rawset(p, k, nil)
      k = next(p)
    end
  end
end
return G, cleanup
"#;

/// A Redis error raised by a `redis.*` function (`redis.call`'s failed command, a bad
/// argument): the handler and the sandbox's `pcall` turn it into `{err=...}`. Raised from
/// Rust (a C function) so the script's frame stays on the stack for the error's line, as
/// Redis's C functions keep it (a Lua wrapper would be tail-called away).
#[derive(Debug)]
pub struct ScriptError(pub String);

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScriptError {}

pub(crate) fn raise<T>(msg: impl Into<String>) -> mlua::Result<T> {
    Err(mlua::Error::external(ScriptError(msg.into())))
}

/// `{err=...}` for a raised [`ScriptError`]; any other value as it is.
fn unwrap_error(lua: &Lua, v: Value) -> mlua::Result<Value> {
    // A killed script cannot catch its kill: it is raised again.
    let killed = lua
        .app_data_ref::<Arc<Running>>()
        .is_some_and(|r| r.kill.load(Ordering::SeqCst));
    if killed {
        return raise("ERR Script killed by user with SCRIPT KILL...");
    }
    match &v {
        Value::Error(e) => match (e.downcast_ref::<ScriptError>(), ()) {
            (Some(se), _) => err_table(lua, &se.0),
            // A library's argument error reaches the script as Lua's string would.
            (None, _) => Ok(Value::String(lua.create_string(error_text(e))?)),
        },
        _ => Ok(v),
    }
}

/// The message of an error raised from Rust, as Lua would show it (without mlua's
/// "runtime error: " and callback wrapping).
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::WithContext { cause, .. } => error_text(cause),
        e => e.to_string(),
    }
}

fn err_table(lua: &Lua, msg: &str) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", msg)?;
    Ok(Value::Table(t))
}

/// Redis's `luaPushError` text for `redis.error_reply` and the like: `-CODE msg` keeps
/// its code, anything else gets `ERR`.
fn error_reply_text(s: &str) -> String {
    let s = s.trim_end_matches(['\r', '\n']);
    match s.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => format!("{code} {msg}"),
            None => format!("ERR {rest}"),
        },
        None => format!("ERR {s}"),
    }
}

/// The `redis` table's functions that need no run state.
fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    let ok_or = |_: &Lua, r: Result<Value, String>| -> mlua::Result<Value> { r.or_else(raise) };
    redis.raw_set(
        "sha1hex",
        lua.create_function(move |lua, args: MultiValue| {
            let r = match args.len() {
                1 => match lua.coerce_string(args[0].clone()) {
                    Ok(Some(s)) => Ok(Value::String(
                        lua.create_string(super::sha1hex(&s.as_bytes()))?,
                    )),
                    _ => Ok(Value::Nil),
                },
                _ => Err("ERR wrong number of arguments".to_string()),
            };
            ok_or(lua, r)
        })?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| match args.front() {
            Some(Value::String(s)) if args.len() == 1 => {
                let text = s.to_string_lossy();
                let full = if text.starts_with('-') {
                    text.to_string()
                } else {
                    format!("-{text}")
                };
                err_table(lua, &error_reply_text(&full))
            }
            _ => err_table(lua, "ERR wrong number or type of arguments"),
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| match args.front() {
            Some(Value::String(s)) if args.len() == 1 => {
                let t = lua.create_table()?;
                t.raw_set("ok", s.clone())?;
                Ok(Value::Table(t))
            }
            _ => err_table(lua, "ERR wrong number or type of arguments"),
        })?,
    )?;
    redis.raw_set(
        "log",
        lua.create_function(move |lua, args: MultiValue| {
            let r = if args.len() < 2 {
                Err("ERR redis.log() requires two arguments or more.".to_string())
            } else {
                match &args[0] {
                    Value::Number(n) if (0.0..=3.0).contains(n) => Ok(Value::Nil),
                    Value::Integer(n) if (0..=3).contains(n) => Ok(Value::Nil),
                    Value::Number(_) | Value::Integer(_) => {
                        Err("ERR Invalid debug level.".to_string())
                    }
                    _ => Err("ERR First argument must be a number".to_string()),
                }
            };
            ok_or(lua, r)
        })?,
    )?;
    redis.raw_set(
        "set_repl",
        lua.create_function(move |lua, args: MultiValue| {
            let r = match (args.len(), args.front()) {
                (1, Some(Value::Number(n))) if matches!(*n as i64, 0..=3) && n.fract() == 0.0 => {
                    Ok(Value::Nil)
                }
                (1, Some(Value::Integer(n))) if (0..=3).contains(n) => Ok(Value::Nil),
                (1, _) => Err(
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, \
                               REPL_ALL or REPL_NONE."
                        .to_string(),
                ),
                _ => Err("ERR redis.set_repl() requires one argument.".to_string()),
            };
            ok_or(lua, r)
        })?,
    )?;
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(move |lua, args: MultiValue| {
            let name = args
                .front()
                .and_then(|v| lua.coerce_string(v.clone()).ok().flatten())
                .map(|s| s.to_string_lossy().to_ascii_lowercase());
            let r = match name {
                None => Err(
                    "ERR Please specify at least one argument for this redis lib call".to_string(),
                ),
                Some(n) if crate::cmd::table().get(n.as_bytes()).is_none() => {
                    Err("ERR Invalid command passed to redis.acl_check_cmd()".to_string())
                }
                Some(_) => Ok(Value::Boolean(true)),
            };
            ok_or(lua, r)
        })?,
    )?;
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    for (k, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(k, v)?;
    }
    redis.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    redis.raw_set("REDIS_VERSION_NUM", REDIS_VERSION_NUM)?;
    Ok(redis)
}

/// Redis's error handler: the error as `{err=...}` with the script frame's source and line.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let t = match err {
        Value::Table(t) => t,
        Value::Error(e) if e.downcast_ref::<ScriptError>().is_some() => {
            let msg = e
                .downcast_ref::<ScriptError>()
                .map(|s| s.0.clone())
                .unwrap_or_default();
            let t = lua.create_table()?;
            t.raw_set("err", msg)?;
            t
        }
        other => {
            let msg = match &other {
                Value::String(s) => s.to_string_lossy(),
                Value::Error(e) => error_text(e),
                v => lua
                    .coerce_string(v.clone())
                    .ok()
                    .flatten()
                    .map(|s| s.to_string_lossy())
                    .unwrap_or_else(|| v.type_name().to_string()),
            };
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {msg}"))?;
            t
        }
    };
    for level in 1..64 {
        let frame = lua.inspect_stack(level, |d| {
            let s = d.source();
            (s.what, s.source.map(|x| x.into_owned()), d.current_line())
        });
        let Some((what, source, line)) = frame else {
            break;
        };
        if what == "C" || source.as_deref() == Some(SANDBOX_CHUNK) {
            continue;
        }
        if let (Some(source), Some(line)) = (source, line) {
            t.raw_set("source", source)?;
            t.raw_set("line", line)?;
        }
        break;
    }
    Ok(Value::Table(t))
}

/// The `os` a script sees: only `os.clock` (as Redis 7.2 gives it; nothing that reaches the
/// system). C's `clock()` is the process's CPU time, which in a server of many threads
/// counts every other client's work too; this is the monotonic time since the server's first
/// script, in seconds, which is what scripts use it for (timing their own loops).
fn os_table(lua: &Lua) -> mlua::Result<Table> {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let os = lua.create_table()?;
    os.raw_set(
        "clock",
        lua.create_function(|_, ()| {
            Ok(EPOCH
                .get_or_init(std::time::Instant::now)
                .elapsed()
                .as_secs_f64())
        })?,
    )?;
    Ok(os)
}

/// How a script ended.
pub struct Outcome {
    /// The reply for the client, complete.
    pub reply: BytesMut,
}

impl Vm {
    /// A fresh state whose allocations are bounded by `memory_limit_bytes`.
    pub fn new(generation: u64, memory_limit_bytes: usize) -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let backing = lua.globals();
        let redis = redis_table(&lua)?;
        backing.raw_set("redis", redis.clone())?;
        backing.raw_set("bit", super::bit::table(&lua)?)?;
        backing.raw_set("cjson", super::cjson::table(&lua)?)?;
        backing.raw_set("cmsgpack", super::cmsgpack::table(&lua)?)?;
        backing.raw_set("struct", super::lua_struct::table(&lua)?)?;
        backing.raw_set("os", os_table(&lua)?)?;
        let hooks = lua.create_table()?;
        hooks.raw_set("unwrap", lua.create_function(unwrap_error)?)?;
        let xpcall: Function = backing.raw_get("xpcall")?;
        let (env, cleanup): (Table, Function) = lua
            .load(SANDBOX)
            .set_name(SANDBOX_CHUNK)
            .call((backing.clone(), hooks))?;
        let handler = lua.create_function(error_handler)?;
        lua.set_memory_limit(memory_limit_bytes)?;
        // SCRIPT KILL and SHUTDOWN reach a running script here (`Scripts::kill`).
        lua.set_hook(
            mlua::HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS),
            |lua, _| {
                let killed = lua
                    .app_data_ref::<Arc<Running>>()
                    .is_some_and(|r| r.kill.load(Ordering::SeqCst));
                if killed {
                    return raise("ERR Script killed by user with SCRIPT KILL...");
                }
                // A library's load-time code is bounded in time (`library.rs`).
                let late = lua
                    .app_data_ref::<super::library::LoadDeadline>()
                    .is_some_and(|d| std::time::Instant::now() >= d.0);
                if late {
                    return raise("ERR FUNCTION LOAD timeout");
                }
                Ok(mlua::VmState::Continue)
            },
        )?;
        Ok(Vm {
            lua,
            generation,
            backing,
            redis,
            cleanup,
            handler,
            xpcall,
            env,
            compiled: HashMap::new(),
        })
    }

    /// Bytes the state uses.
    pub fn memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// After a script: collects its garbage if the state grew past `keep_bytes`; whether
    /// the state is small enough to be reused (a script that ran into the memory bound
    /// leaves garbage the next one must not inherit).
    pub fn settle(&self, keep_bytes: usize) -> bool {
        if self.memory() <= keep_bytes {
            return true;
        }
        self.lua.gc_collect().is_ok() && self.memory() <= keep_bytes
    }

    fn function(&mut self, script: &Script) -> Result<Function, String> {
        if let Some(f) = self.compiled.get(&script.sha) {
            return Ok(f.clone());
        }
        let f = self
            .lua
            .load(&script.code[..])
            .set_name(CHUNK_NAME)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(compile_error)?;
        if self.compiled.len() >= COMPILED_MAX {
            // Recompiling on demand is cheap; running out of mlua references is not.
            self.compiled.clear();
        }
        self.compiled.insert(script.sha.clone(), f.clone());
        Ok(f)
    }

    fn set_array(&self, name: &str, items: &[Bytes]) -> mlua::Result<()> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, a) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(&a[..])?)?;
        }
        self.backing.raw_set(name, t)
    }

    /// Runs `script` with `keys` and `args`, its `redis.call`s going to `host`; returns the
    /// reply in `proto` (the client's protocol).
    pub fn run(
        &mut self,
        script: &Script,
        keys: &[Bytes],
        args: &[Bytes],
        proto: Proto,
        host: &mut dyn Host,
        running: Arc<Running>,
    ) -> Outcome {
        let f = match self.function(script) {
            Ok(f) => f,
            Err(e) => {
                let mut out = ReplyBuf::new(proto);
                out.error(&e);
                return Outcome { reply: out.take() };
            }
        };
        let set = self
            .set_array("KEYS", keys)
            .and_then(|()| self.set_array("ARGV", args));
        if let Err(e) = set {
            let mut out = ReplyBuf::new(proto);
            out.error(&format!("ERR Error running script {}, {}", script.sha, e));
            return Outcome { reply: out.take() };
        }
        self.run_function(&f, &script.sha, proto, host, running)
    }

    /// Runs `f` (a script's body, or a closure calling a library's function with its keys
    /// and arguments: `library.rs`) as the script `name` (errors say `script: <name>`).
    pub fn run_function(
        &mut self,
        f: &Function,
        name: &str,
        proto: Proto,
        host: &mut dyn Host,
        running: Arc<Running>,
    ) -> Outcome {
        let mut out = ReplyBuf::new(proto);
        self.lua.set_app_data(running);
        let ran = self.run_in_scope(f, name, host, &mut out);
        if let Err(e) = ran {
            out.error(&format!("ERR Error running script {name}, {e}"));
        }
        // Wiping cannot fail short of memory; a state that fails it is not reused by the
        // caller's pool bound, so the result is only logged in the reply path above.
        let _ = self.cleanup.call::<()>(());
        let _ = self.backing.raw_set("KEYS", Value::Nil);
        let _ = self.backing.raw_set("ARGV", Value::Nil);
        self.lua.remove_app_data::<Arc<Running>>();
        Outcome { reply: out.take() }
    }

    /// The Lua state (the functions engine keeps its libraries' callbacks in its app data).
    pub(crate) fn lua(&self) -> &Lua {
        &self.lua
    }

    /// The real globals behind the read-only proxy.
    pub(crate) fn backing(&self) -> &Table {
        &self.backing
    }

    /// Calls `f` under Redis's error handler: the error's `err` text if it fails.
    pub(crate) fn protected_call(&self, f: &Function) -> Result<(), String> {
        match self
            .xpcall
            .call::<(bool, Value)>((f.clone(), self.handler.clone()))
        {
            Ok((true, _)) => Ok(()),
            Ok((false, Value::Table(t))) => Err(t
                .raw_get::<Option<String>>("err")
                .ok()
                .flatten()
                .unwrap_or_else(|| "ERR unknown error".to_string())),
            Ok((false, v)) => Err(format!("ERR {}", v.type_name())),
            Err(e) => Err(format!("ERR {}", error_text(&e))),
        }
    }

    fn run_in_scope(
        &mut self,
        f: &Function,
        name: &str,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> mlua::Result<()> {
        let resp3 = std::cell::Cell::new(false);
        let host = RefCell::new(host);
        let lua = &self.lua;
        let call_with = |lua: &Lua, args: MultiValue, raise_errors: bool| {
            let argv = match command_args(args.into_iter()) {
                Ok(a) => a,
                Err(m) if raise_errors => return raise(m),
                Err(m) => return err_table(lua, &m),
            };
            let proto = if resp3.get() {
                Proto::Resp3
            } else {
                Proto::Resp2
            };
            let reply = host.borrow_mut().call(argv, proto);
            match reply {
                Err(m) if raise_errors => raise(m),
                Err(m) => err_table(lua, &m),
                Ok(bytes) if raise_errors && super::resp::is_error(&bytes) => {
                    let text = String::from_utf8_lossy(&bytes[1..]);
                    raise(text.trim_end_matches(['\r', '\n']))
                }
                Ok(bytes) => {
                    reply_to_lua(lua, &bytes).or_else(|e| err_table(lua, &format!("ERR {}", e.0)))
                }
            }
        };
        let result: (bool, Value) = lua.scope(|scope| {
            let call = scope.create_function(|lua, args: MultiValue| call_with(lua, args, true))?;
            let pcall =
                scope.create_function(|lua, args: MultiValue| call_with(lua, args, false))?;
            let setresp = scope.create_function(|_, args: MultiValue| {
                if args.len() != 1 {
                    return raise("ERR redis.setresp() requires one argument.");
                }
                let n = match &args[0] {
                    Value::Integer(n) => *n as f64,
                    Value::Number(n) => *n,
                    _ => 0.0,
                };
                if n == 2.0 || n == 3.0 {
                    resp3.set(n == 3.0);
                    Ok(())
                } else {
                    raise("ERR RESP version must be 2 or 3.")
                }
            })?;
            self.redis.raw_set("call", call)?;
            self.redis.raw_set("pcall", pcall)?;
            self.redis.raw_set("setresp", setresp)?;
            let r = self
                .xpcall
                .call::<(bool, Value)>((f.clone(), self.handler.clone()));
            for name in ["call", "pcall", "setresp"] {
                self.redis.raw_set(name, Value::Nil)?;
            }
            r
        })?;
        match result {
            (true, v) => lua_to_reply(&v, out, resp3.get()),
            (false, Value::Table(t)) => {
                let msg = match t.raw_get::<Value>("err")? {
                    Value::String(s) => s.as_bytes().to_vec(),
                    _ => b"ERR unknown error".to_vec(),
                };
                let mut m = msg.strip_prefix(b"-").unwrap_or(&msg).to_vec();
                let source: Option<String> = t.raw_get("source").ok();
                let line: Option<i64> = t.raw_get("line").ok();
                if let (Some(source), Some(line)) = (source, line) {
                    m.extend_from_slice(format!(" script: {name}, on {source}:{line}.").as_bytes());
                }
                out.error_bytes(&m);
            }
            (false, other) => {
                let msg = lua
                    .coerce_string(other)
                    .ok()
                    .flatten()
                    .map(|s| s.to_string_lossy())
                    .unwrap_or_else(|| "execution failure".to_string());
                let msg: String = msg.chars().take(100).collect();
                out.error(&format!("ERR Error running script {name}, {msg}"));
            }
        }
        Ok(())
    }
}

/// The arguments of `redis.call(...)` as a command's argv: strings as they are, numbers as
/// Redis formats them (`%.17g`); anything else is Redis's error.
fn command_args(args: impl Iterator<Item = Value>) -> Result<Vec<Bytes>, String> {
    let mut argv = Vec::new();
    for a in args {
        match a {
            Value::String(s) => argv.push(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(n) => argv.push(Bytes::from(format_g17(n as f64))),
            Value::Number(n) => argv.push(Bytes::from(format_g17(n))),
            _ => {
                return Err(
                    "ERR Lua redis lib command arguments must be strings or integers".to_string(),
                )
            }
        }
    }
    if argv.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call".to_string());
    }
    Ok(argv)
}

/// C's `%.17g`.
pub fn format_g17(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    crate::protocol::reply::format_double(n)
}
