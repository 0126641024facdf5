//! A function library's code in a Lua state (Redis's `function_lua.c`): running its
//! load-time code, which registers functions, and calling a registered function.
//!
//! **Two environments, one table.** A library's chunk runs with an environment of its own
//! (one per Lua state, shared by every library): while the load-time code runs, its globals
//! are only `redis` with `register_function`, `log`, the `LOG_*` levels and the version
//! (no `redis.call`, no `string`: reading anything else raises "Script attempted to access
//! nonexistent global variable"); once loaded, the functions the chunk defined see the
//! globals every script sees (`redis.call`, the libraries), since Lua 5.1 closures keep their
//! chunk's environment and the environment's lookup switches with the load flag. Assigning
//! a global raises "Attempt to modify a readonly table" in both.
//!
//! **Loading is bounded**: the load-time code stops with "FUNCTION LOAD timeout" after
//! [`LOAD_TIMEOUT`] (the state's instruction hook reads [`LoadDeadline`]), and the state's
//! memory bound holds as for scripts.
//!
//! **Per state.** FUNCTION LOAD runs the code once in a fresh state to check it and learn
//! its functions (`functions.rs`); a pooled state runs a library's code again the first time
//! it calls one of its functions, and keeps the callbacks by the library's id.

use super::vm::{raise, Host, Outcome, ScriptError, Vm, SANDBOX_CHUNK};
use super::{Running, ScriptFlags};
use crate::protocol::reply::Proto;
use bytes::Bytes;
use mlua::{Function, Lua, MultiValue, Table, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a library's load-time code may run (Redis's 500 ms).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// While a library's load-time code runs: when it must have ended.
pub struct LoadDeadline(pub Instant);

/// The chunk name of library code (errors say `user_function:2:`).
const CHUNK_NAME: &str = "@user_function";

/// One `redis.register_function` of a library's load-time code.
pub struct Registered {
    pub name: String,
    pub callback: Function,
    pub description: Option<Bytes>,
    pub flags: ScriptFlags,
}

/// The registrations of the load-time code running now (app data of the state).
struct LoadCtx(Vec<Registered>);

/// A state's library environment and the libraries it has run (app data of the state).
struct LibraryEnv {
    env: Table,
    set_loading: Function,
    /// `wrap(f, keys, args)`: a closure calling `f(keys, args)`, run under the error handler.
    wrap: Function,
    /// Library id to its callbacks by function name.
    loaded: HashMap<u64, HashMap<String, Function>>,
    /// The registry generation `loaded` was last pruned at.
    generation: u64,
}

/// The environment, in Lua: `backing` holds the real globals, `register` is
/// `redis.register_function`.
const LIBRARY_ENV: &str = r#"
local backing, register = ...
local error, tostring, setmetatable, ipairs = error, tostring, setmetatable, ipairs
local function readonly() error("Attempt to modify a readonly table", 2) end
local function missing(k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 3)
end
local function strict(t)
  return setmetatable({}, {
    __index = function(_, k)
      local v = t[k]
      if v == nil then missing(k) end
      return v
    end,
    __newindex = readonly,
    __metatable = "readonly",
  })
end
local R = backing.redis
local api = {register_function = register, log = R.log}
for _, k in ipairs({"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING",
                    "REDIS_VERSION", "REDIS_VERSION_NUM"}) do
  api[k] = R[k]
end
local load_api = {redis = strict(api)}
local loading = false
local env = setmetatable({}, {
  __index = function(_, k)
    local v
    if loading then v = load_api[k] else v = backing[k] end
    if v == nil then missing(k) end
    return v
  end,
  __newindex = readonly,
  __metatable = "readonly",
})
local function set_loading(b) loading = b end
local function wrap(f, keys, args) return function() return f(keys, args) end end
return env, set_loading, wrap
"#;

/// Redis's `functionsVerifyName`: letters, digits and `_`, at least one.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Redis's error for a bad library or function name (both say "Library", as Redis 7.0).
pub const ERR_NAME: &str = "ERR Library names can only contain letters, numbers, or \
                            underscores(_) and must be at least one character long";

fn env_of(vm: &Vm) -> Result<(), String> {
    let lua = vm.lua();
    if lua.app_data_ref::<LibraryEnv>().is_some() {
        return Ok(());
    }
    let made = (|| -> mlua::Result<LibraryEnv> {
        let register = lua.create_function(register_function)?;
        let (env, set_loading, wrap): (Table, Function, Function) = lua
            .load(LIBRARY_ENV)
            .set_name(SANDBOX_CHUNK)
            .call((vm.backing().clone(), register))?;
        Ok(LibraryEnv {
            env,
            set_loading,
            wrap,
            loaded: HashMap::new(),
            generation: 0,
        })
    })()
    .map_err(|e| format!("ERR Lua state: {e}"))?;
    lua.set_app_data(made);
    Ok(())
}

/// Runs a library's code (`body`: the code after the shebang line, which starts with its
/// newline) in `vm`: the functions it registered, or Redis's error.
pub fn load(vm: &Vm, body: &[u8]) -> Result<Vec<Registered>, String> {
    env_of(vm)?;
    let lua = vm.lua();
    let (env, set_loading) = match lua.app_data_ref::<LibraryEnv>() {
        Some(e) => (e.env.clone(), e.set_loading.clone()),
        None => return Err("ERR Lua state: no library environment".to_string()),
    };
    let chunk = lua
        .load(body)
        .set_name(CHUNK_NAME)
        .set_environment(env)
        .into_function()
        .map_err(|e| {
            let msg = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            };
            format!("ERR Error compiling function: {msg}")
        })?;
    lua.set_app_data(LoadCtx(Vec::new()));
    lua.set_app_data(LoadDeadline(Instant::now() + LOAD_TIMEOUT));
    let switched = set_loading.call::<()>(true);
    let ran = match switched {
        Ok(()) => vm.protected_call(&chunk),
        Err(e) => Err(format!("ERR {e}")),
    };
    let _ = set_loading.call::<()>(false);
    lua.remove_app_data::<LoadDeadline>();
    let registered = lua.remove_app_data::<LoadCtx>().map(|c| c.0);
    ran.map_err(|e| format!("ERR Error registering functions: {e}"))?;
    Ok(registered.unwrap_or_default())
}

/// `redis.register_function(name, callback)` or `redis.register_function{...}`.
fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    if lua.app_data_ref::<LoadCtx>().is_none() {
        return raise("ERR redis.register_function can only be called on FUNCTION LOAD command");
    }
    let r = read_args(lua, args).or_else(|m| raise(format!("ERR {m}")))?;
    if !valid_name(r.name.as_bytes()) {
        return raise(ERR_NAME);
    }
    let Some(mut ctx) = lua.app_data_mut::<LoadCtx>() else {
        return raise("ERR redis.register_function can only be called on FUNCTION LOAD command");
    };
    if ctx.0.iter().any(|x| x.name == r.name) {
        drop(ctx);
        return raise("ERR Function already exists in the library");
    }
    ctx.0.push(r);
    Ok(())
}

/// A string argument as Lua's `lua_isstring` takes it (numbers too, formatted).
fn string_arg(lua: &Lua, v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(_) | Value::Integer(_) | Value::Number(_) => lua
            .coerce_string(v.clone())
            .ok()
            .flatten()
            .map(|s| s.as_bytes().to_vec()),
        _ => None,
    }
}

fn read_args(lua: &Lua, args: MultiValue) -> Result<Registered, &'static str> {
    match args.len() {
        2 => {
            let name = string_arg(lua, &args[0])
                .ok_or("first argument to redis.register_function must be a string")?;
            let Value::Function(callback) = &args[1] else {
                return Err("second argument to redis.register_function must be a function");
            };
            Ok(Registered {
                name: String::from_utf8_lossy(&name).into_owned(),
                callback: callback.clone(),
                description: None,
                flags: ScriptFlags {
                    shebang: true,
                    ..Default::default()
                },
            })
        }
        1 => read_named(lua, &args[0]),
        _ => Err("wrong number of arguments to redis.register_function"),
    }
}

fn read_named(lua: &Lua, arg: &Value) -> Result<Registered, &'static str> {
    let Value::Table(t) = arg else {
        return Err(
            "calling redis.register_function with a single argument is only \
                    applicable to Lua table (representing named arguments).",
        );
    };
    let (mut name, mut description, mut callback) = (None, None, None);
    let mut flags = ScriptFlags {
        shebang: true,
        ..Default::default()
    };
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|_| "unknown argument given to redis.register_function")?;
        let key = string_arg(lua, &k)
            .ok_or("named argument key given to redis.register_function is not a string")?;
        match key.to_ascii_lowercase().as_slice() {
            b"function_name" => {
                name = Some(string_arg(lua, &v).ok_or(
                    "function_name argument given to redis.register_function must be a string",
                )?);
            }
            b"description" => {
                description = Some(string_arg(lua, &v).ok_or(
                    "description argument given to redis.register_function must be a string",
                )?);
            }
            b"callback" => match v {
                Value::Function(f) => callback = Some(f),
                _ => {
                    return Err(
                        "callback argument given to redis.register_function must be a function",
                    )
                }
            },
            b"flags" => {
                let Value::Table(list) = v else {
                    return Err("flags argument to redis.register_function must be a table \
                                representing function flags");
                };
                read_flags(lua, &list, &mut flags).ok_or("unknown flag given")?;
            }
            _ => return Err("unknown argument given to redis.register_function"),
        }
    }
    let name = name.ok_or("redis.register_function must get a function name argument")?;
    let callback = callback.ok_or("redis.register_function must get a callback argument")?;
    Ok(Registered {
        name: String::from_utf8_lossy(&name).into_owned(),
        callback,
        description: description.map(Bytes::from),
        flags,
    })
}

/// The flags list `{'no-writes', ...}` (names compared without case); `None` at an
/// unknown flag or a value that is not a string.
fn read_flags(lua: &Lua, list: &Table, flags: &mut ScriptFlags) -> Option<()> {
    for i in 1.. {
        let v: Value = list.raw_get(i).ok()?;
        if v == Value::Nil {
            break;
        }
        let name = string_arg(lua, &v)?.to_ascii_lowercase();
        match name.as_slice() {
            b"no-writes" => flags.no_writes = true,
            b"allow-oom" => flags.allow_oom = true,
            b"allow-stale" => flags.allow_stale = true,
            b"no-cluster" => flags.no_cluster = true,
            b"allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
            _ => return None,
        }
    }
    Some(())
}

/// What [`call`] runs: a library (its id and code after the shebang line) and a function.
pub struct Target<'a> {
    pub library_id: u64,
    pub body: &'a [u8],
    pub function: &'a str,
    /// The registry's generation now: when it changed, the state forgets the callbacks of
    /// libraries `live` no longer has.
    pub generation: u64,
    pub live: &'a dyn Fn(u64) -> bool,
}

/// Calls `function(keys, args)` of the library in `vm` (running the library's code there
/// first if this state has not yet), its `redis.call`s going to `host`.
pub fn call(
    vm: &mut Vm,
    target: &Target<'_>,
    keys: &[Bytes],
    args: &[Bytes],
    proto: Proto,
    host: &mut dyn Host,
    running: Arc<Running>,
) -> Outcome {
    let fail = |msg: &str| {
        let mut out = crate::protocol::reply::ReplyBuf::new(proto);
        out.error(msg);
        Outcome { reply: out.take() }
    };
    let f = match callback(vm, target) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    let closure = (|| -> mlua::Result<Function> {
        let lua = vm.lua();
        let k = array(lua, keys)?;
        let a = array(lua, args)?;
        let wrap = match lua.app_data_ref::<LibraryEnv>() {
            Some(e) => e.wrap.clone(),
            None => return Err(mlua::Error::external(ScriptError("no library env".into()))),
        };
        wrap.call((f, k, a))
    })();
    match closure {
        Ok(c) => vm.run_function(&c, target.function, proto, host, running),
        Err(e) => fail(&format!(
            "ERR Error running script {}, {e}",
            target.function
        )),
    }
}

fn array(lua: &Lua, items: &[Bytes]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, a) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(&a[..])?)?;
    }
    Ok(t)
}

/// The callback of `target.function`, running the library's code in `vm` if needed.
fn callback(vm: &Vm, target: &Target<'_>) -> Result<Function, String> {
    env_of(vm)?;
    let lua = vm.lua();
    if let Some(mut e) = lua.app_data_mut::<LibraryEnv>() {
        if e.generation != target.generation {
            e.loaded.retain(|id, _| (target.live)(*id));
            e.generation = target.generation;
        }
        if let Some(f) = e
            .loaded
            .get(&target.library_id)
            .and_then(|l| l.get(target.function))
        {
            return Ok(f.clone());
        }
    }
    let registered = load(vm, target.body)?;
    let by_name: HashMap<String, Function> = registered
        .into_iter()
        .map(|r| (r.name, r.callback))
        .collect();
    let f = by_name.get(target.function).cloned();
    if let Some(mut e) = lua.app_data_mut::<LibraryEnv>() {
        e.loaded.insert(target.library_id, by_name);
    }
    f.ok_or_else(|| "ERR Function not found".to_string())
}
