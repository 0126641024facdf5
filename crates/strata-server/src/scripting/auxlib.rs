//! What Lua 5.1's `lauxlib.c` gives the C libraries Redis loads, for the libraries written
//! here in Rust (`cmsgpack.rs`, `struct_lib.rs`): argument checks and errors worded and
//! placed as `luaL_argerror`, `luaL_error` and `luaL_check*` word and place them, and C's
//! number conversions as redis-server (x86-64) performs them.

use mlua::{Lua, LuaString, MultiValue, Value};

/// Lua 5.1's `LUAI_MAXCSTACK`: the most values a C function may have on its stack.
pub const MAX_C_STACK: usize = 8000;

/// The most values a library function here returns at once. A C function may leave up to
/// [`MAX_C_STACK`] values less its arguments; an mlua callback keeps some slots for itself
/// (measured: about 7975 values get through), so the libraries raise the C library's own
/// "too many results" error from this many on, a few values earlier than redis-server.
pub const MAX_RESULTS: usize = 7950;

/// `luaL_where(L, 1)`: `chunk:line: ` of the Lua function that called the library
/// function, empty when a C function (e.g. `pcall`) called it.
pub fn caller_position(lua: &Lua) -> String {
    lua.inspect_stack(1, |d| {
        let s = d.source();
        match (s.what, s.short_src, d.current_line()) {
            (w, Some(src), Some(line)) if w != "C" => format!("{src}:{line}: "),
            _ => String::new(),
        }
    })
    .unwrap_or_default()
}

/// `luaL_error`: `msg` at the caller's position.
pub fn error(lua: &Lua, msg: impl AsRef<str>) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}{}", caller_position(lua), msg.as_ref()))
}

/// `luaL_argerror`: argument `narg` of the running library function is bad. The function
/// is named as the caller named it (`cmsgpack.pack` is `'pack'`, a local alias `p` is `'p'`).
pub fn arg_error(lua: &Lua, narg: i64, extramsg: &str) -> mlua::Error {
    let names = lua.inspect_stack(0, |d| {
        let n = d.names();
        (
            n.name.map(|s| s.into_owned()),
            n.name_what.map(str::to_owned),
        )
    });
    let Some((name, what)) = names else {
        return error(lua, format!("bad argument #{narg} ({extramsg})"));
    };
    let name = name.unwrap_or_else(|| "?".to_string());
    let mut narg = narg;
    if what.as_deref() == Some("method") {
        narg -= 1;
        if narg == 0 {
            return error(lua, format!("calling '{name}' on bad self ({extramsg})"));
        }
    }
    error(
        lua,
        format!("bad argument #{narg} to '{name}' ({extramsg})"),
    )
}

/// Argument `i` (1-based), `None` past the last one.
fn arg(args: &MultiValue, i: usize) -> Option<&Value> {
    args.get(i - 1)
}

/// `luaL_typerror`: `expected` wanted, something else (or nothing) given.
fn type_error(lua: &Lua, args: &MultiValue, i: usize, expected: &str) -> mlua::Error {
    let got = arg(args, i).map_or("no value", |v| match v {
        Value::Integer(_) => "number",
        Value::LightUserData(_) => "userdata",
        v => v.type_name(),
    });
    arg_error(lua, i as i64, &format!("{expected} expected, got {got}"))
}

/// A Lua number as an `f64` (mlua hands integral numbers over as `Integer`).
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(n) => Some(*n as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// `lua_tonumber`: numbers, and strings that read as numbers.
pub fn to_number(lua: &Lua, v: &Value) -> Option<f64> {
    match v {
        Value::String(_) => lua.coerce_number(v.clone()).ok().flatten(),
        v => number(v),
    }
}

/// `luaL_checknumber`.
pub fn check_number(lua: &Lua, args: &MultiValue, i: usize) -> mlua::Result<f64> {
    arg(args, i)
        .and_then(|v| to_number(lua, v))
        .ok_or_else(|| type_error(lua, args, i, "number"))
}

/// `luaL_checkinteger`: the number truncated as C's cast does.
pub fn check_integer(lua: &Lua, args: &MultiValue, i: usize) -> mlua::Result<i64> {
    check_number(lua, args, i).map(truncate_i64)
}

/// `luaL_optinteger`: `default` when the argument is absent or nil.
pub fn opt_integer(lua: &Lua, args: &MultiValue, i: usize, default: i64) -> mlua::Result<i64> {
    match arg(args, i) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, args, i),
    }
}

/// `luaL_checklstring`: strings, and numbers as Lua writes them.
pub fn check_string(lua: &Lua, args: &MultiValue, i: usize) -> mlua::Result<LuaString> {
    match arg(args, i) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => lua
            .coerce_string(v.clone())?
            .ok_or_else(|| type_error(lua, args, i, "string")),
        _ => Err(type_error(lua, args, i, "string")),
    }
}

/// C's `(int64_t)d` on x86-64 (`cvttsd2si`): truncation toward zero, and `INT64_MIN` for
/// NaN and values out of range (undefined in C; what redis-server computes).
pub fn truncate_i64(d: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    // NaN is in no range.
    if !(-TWO_63..TWO_63).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// C's `(uint64_t)d` as gcc compiles it on x86-64 (values from 2^63 up are converted as
/// `d - 2^63` with the top bit set back): NaN gives 2^63, values from 2^64 up give 0.
pub fn truncate_u64(d: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO_63 {
        (truncate_i64(d - TWO_63) as u64) ^ (1 << 63)
    } else {
        truncate_i64(d) as u64
    }
}

/// The running script was killed (SCRIPT KILL or SHUTDOWN): a long-running library
/// function checks this now and then, as the Lua instruction hook cannot run inside it.
pub fn check_killed(lua: &Lua) -> mlua::Result<()> {
    let killed = lua
        .app_data_ref::<std::sync::Arc<super::Running>>()
        .is_some_and(|r| r.kill.load(std::sync::atomic::Ordering::SeqCst));
    if killed {
        return Err(mlua::Error::external(super::vm::ScriptError(
            "ERR Script killed by user with SCRIPT KILL...".to_string(),
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_casts_as_x86_64() {
        assert_eq!(truncate_i64(-1.9), -1);
        assert_eq!(truncate_i64(2f64.powi(63)), i64::MIN);
        assert_eq!(truncate_i64(-(2f64.powi(63))), i64::MIN);
        assert_eq!(truncate_i64(f64::NAN), i64::MIN);
        assert_eq!(
            truncate_u64(2f64.powi(63) + 2f64.powi(62)),
            0xc000_0000_0000_0000
        );
        assert_eq!(truncate_u64(2f64.powi(64)), 0);
        assert_eq!(truncate_u64(1e30), 0);
        assert_eq!(truncate_u64(f64::NAN), 1 << 63);
        assert_eq!(truncate_u64(255.7), 255);
    }
}
