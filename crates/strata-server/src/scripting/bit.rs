//! The `bit` library Redis loads (Lua BitOp 1.0.2, `lua_bit.c`): 32-bit operations on Lua
//! numbers. An argument is normalized as BitOp does on a double Lua: rounded to the nearest
//! integer (ties to even) and wrapped modulo 2^32, by adding 2^52 + 2^51 and taking the low
//! word of the double; results are signed 32-bit numbers.

use mlua::{Lua, MultiValue, Table, Value};

/// BitOp's `barg`: the low 32 bits of `n + 2^52 + 2^51`.
pub fn normalize(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

fn push(b: u32) -> f64 {
    f64::from(b as i32)
}

/// Argument `i` (1-based) of function `name` as BitOp reads it, or Lua's argument error.
fn arg(lua: &Lua, args: &MultiValue, i: usize, name: &str) -> mlua::Result<u32> {
    let v = args.get(i - 1).cloned().unwrap_or(Value::Nil);
    let got = if i > args.len() {
        "no value"
    } else {
        v.type_name()
    };
    match lua.coerce_number(v)? {
        Some(n) => Ok(normalize(n)),
        None => {
            // As `luaL_argerror`: the calling Lua line first; called from C (pcall) the
            // function has no name.
            let caller = lua.inspect_stack(1, |d| {
                let s = d.source();
                let src = s.short_src.map(|x| x.into_owned());
                (s.what, src, d.current_line())
            });
            let (place, name) = match caller {
                Some((what, Some(src), Some(line))) if what != "C" => {
                    (format!("{src}:{line}: "), name)
                }
                _ => (String::new(), "?"),
            };
            Err(mlua::Error::RuntimeError(format!(
                "{place}bad argument #{i} to '{name}' (number expected, got {got})"
            )))
        }
    }
}

/// The `bit` table.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "tobit",
        lua.create_function(|lua, a: MultiValue| Ok(push(arg(lua, &a, 1, "tobit")?)))?,
    )?;
    t.raw_set(
        "bnot",
        lua.create_function(|lua, a: MultiValue| Ok(push(!arg(lua, &a, 1, "bnot")?)))?,
    )?;
    t.raw_set(
        "bswap",
        lua.create_function(|lua, a: MultiValue| Ok(push(arg(lua, &a, 1, "bswap")?.swap_bytes())))?,
    )?;
    type Fold = fn(u32, u32) -> u32;
    let folds: [(&str, Fold); 3] = [
        ("band", |x, y| x & y),
        ("bor", |x, y| x | y),
        ("bxor", |x, y| x ^ y),
    ];
    for (name, f) in folds {
        t.raw_set(
            name,
            lua.create_function(move |lua, a: MultiValue| {
                let mut b = arg(lua, &a, 1, name)?;
                for i in 2..=a.len() {
                    b = f(b, arg(lua, &a, i, name)?);
                }
                Ok(push(b))
            })?,
        )?;
    }
    type Shift = fn(u32, u32) -> u32;
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |b, n| b << (n & 31)),
        ("rshift", |b, n| b >> (n & 31)),
        ("arshift", |b, n| ((b as i32) >> (n & 31)) as u32),
        ("rol", |b, n| b.rotate_left(n & 31)),
        ("ror", |b, n| b.rotate_right(n & 31)),
    ];
    for (name, f) in shifts {
        t.raw_set(
            name,
            lua.create_function(move |lua, a: MultiValue| {
                let b = arg(lua, &a, 1, name)?;
                let n = arg(lua, &a, 2, name)?;
                Ok(push(f(b, n)))
            })?,
        )?;
    }
    t.raw_set(
        "tohex",
        lua.create_function(|lua, a: MultiValue| {
            let mut b = arg(lua, &a, 1, "tohex")?;
            let mut n: i64 = if a.len() < 2 {
                8
            } else {
                i64::from(arg(lua, &a, 2, "tohex")? as i32)
            };
            let digits: &[u8] = if n < 0 {
                n = -n;
                b"0123456789ABCDEF"
            } else {
                b"0123456789abcdef"
            };
            let n = n.min(8) as usize;
            let mut buf = vec![b'0'; n];
            for c in buf.iter_mut().rev() {
                *c = digits[(b & 15) as usize];
                b >>= 4;
            }
            lua.create_string(&buf)
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(code: &str) -> String {
        let lua = Lua::new();
        lua.globals().set("bit", table(&lua).unwrap()).unwrap();
        match lua.load(code).eval::<Value>() {
            Ok(v) => lua
                .coerce_string(v)
                .ok()
                .flatten()
                .map(|s| s.to_string_lossy())
                .unwrap_or_else(|| "nil".to_string()),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn bitop_semantics() {
        // From Lua BitOp's own test suite (bittest.lua) and Redis's scripting tests.
        assert_eq!(eval("return bit.tobit(0xffffffff)"), "-1");
        assert_eq!(eval("return bit.tobit(0xffffffff + 1)"), "0");
        assert_eq!(eval("return bit.tobit(2^40 + 1234)"), "1234");
        assert_eq!(eval("return bit.tobit(1.5)"), "2");
        assert_eq!(eval("return bit.tobit(2.5)"), "2");
        assert_eq!(eval("return bit.tobit(-1.5)"), "-2");
        assert_eq!(eval("return bit.bnot(0)"), "-1");
        assert_eq!(eval("return bit.band(0x12345678, 0xff)"), "120");
        assert_eq!(eval("return bit.bor(1, 2, 4, 8)"), "15");
        assert_eq!(eval("return bit.bxor(0xf0, 0xff)"), "15");
        assert_eq!(eval("return bit.lshift(1, 31)"), "-2147483648");
        assert_eq!(eval("return bit.lshift(1, 32)"), "1");
        assert_eq!(eval("return bit.rshift(-1, 28)"), "15");
        assert_eq!(eval("return bit.arshift(-256, 4)"), "-16");
        assert_eq!(eval("return bit.rol(0x12345678, 12)"), "1164411171");
        assert_eq!(eval("return bit.ror(0x12345678, 12)"), "1736516421");
        assert_eq!(eval("return bit.bswap(0x12345678)"), "2018915346");
        assert_eq!(eval("return bit.tohex(1)"), "00000001");
        assert_eq!(eval("return bit.tohex(-1)"), "ffffffff");
        assert_eq!(eval("return bit.tohex(0xdeadbeef, -4)"), "BEEF");
        assert_eq!(eval("return bit.tohex(0x1234, 2)"), "34");
        assert_eq!(eval("return bit.tohex(0x1234, 20)"), "00001234");
        assert_eq!(eval("return bit.band('7', 3)"), "3");
        assert!(eval("return bit.band()")
            .contains("bad argument #1 to 'band' (number expected, got no value)"));
        assert!(eval("return bit.tobit({})")
            .contains("bad argument #1 to 'tobit' (number expected, got table)"));
    }
}
