//! The `struct` library Redis loads (Roberto Ierusalimschy's struct 1.7 with Redis's fixes,
//! `lua_struct.c`): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, pos])`,
//! `struct.size(fmt)`.
//!
//! Format letters: `>` big endian, `<` little endian (the default is the machine's: little
//! on x86-64 and aarch64), `![n]` alignment (n a power of 2, default 8), `x` a zero byte,
//! `b/B` signed/unsigned byte, `h/H` 16-bit, `l/L` and `T` 64-bit, `i/I[n]` n-byte integers
//! (default 4, at most 32; beyond 8 bytes only the low 64 bits carry a value), `f` float32,
//! `d` float64, `c[n]` n characters (`c0`: the whole string when packing, the previously
//! unpacked number as length when unpacking), `s` a zero-terminated string, ` ` ignored.
//! Integers are converted as C converts a double on x86-64 (truncation; out of range values
//! as the hardware does), which is what redis-server computes.

use super::auxlib::{self, MAX_C_STACK};
use mlua::{Lua, MultiValue, Table, Value};

/// The largest `i`/`I` size (`MAXINTSIZE`).
const MAX_INT_SIZE: usize = 32;
/// `!` without a number (`MAXALIGN`: the alignment of a double).
const MAX_ALIGN: usize = 8;

#[derive(Clone, Copy)]
struct Header {
    little: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            little: cfg!(target_endian = "little"),
            align: 1,
        }
    }
}

/// A format string being read.
struct Format<'a> {
    f: &'a [u8],
    pos: usize,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        // A NUL ends a C string.
        let c = *self.f.get(self.pos).filter(|&&c| c != 0)?;
        self.pos += 1;
        Some(c)
    }

    /// `getnum`: a decimal number, or `default` when none follows.
    fn num(&mut self, lua: &Lua, default: usize) -> mlua::Result<usize> {
        if !self.f.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i32 = 0;
        while let Some(&d) = self.f.get(self.pos).filter(|d| d.is_ascii_digit()) {
            let d = i32::from(d - b'0');
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return Err(auxlib::error(lua, "integral size overflow"));
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a as usize)
    }

    /// `optsize`: the size of option `opt` (reading its number).
    fn size(&mut self, lua: &Lua, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.num(lua, 1)?,
            b'i' | b'I' => {
                let n = self.num(lua, 4)?;
                if n > MAX_INT_SIZE {
                    return Err(auxlib::error(
                        lua,
                        format!("integral size {n} is larger than limit of {MAX_INT_SIZE}"),
                    ));
                }
                n
            }
            _ => 0,
        })
    }

    /// `controloptions`: endianness, alignment, spaces; anything else is invalid.
    fn control(&mut self, lua: &Lua, opt: u8, h: &mut Header) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.num(lua, MAX_ALIGN)?;
                if !a.is_power_of_two() {
                    return Err(auxlib::error(
                        lua,
                        format!("alignment {a} is not a power of 2"),
                    ));
                }
                h.align = a;
            }
            _ => {
                let msg = format!("invalid format option '{}'", char::from(opt));
                return Err(auxlib::arg_error(lua, 1, &msg));
            }
        }
        Ok(())
    }
}

/// `gettoalign`: padding before an item of `size` at offset `len`.
fn padding(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

fn is_integer_option(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

/// The bytes of `v` (in `size` bytes, low 64 bits meaningful) in the header's order.
fn put_integer(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let value = if n < 0.0 {
        auxlib::truncate_i64(n) as u64
    } else {
        auxlib::truncate_u64(n)
    };
    let le: Vec<u8> = (0..size)
        .map(|i| if i < 8 { (value >> (8 * i)) as u8 } else { 0 })
        .collect();
    if little {
        out.extend_from_slice(&le);
    } else {
        out.extend(le.iter().rev());
    }
}

/// `getinteger`: the low 64 bits of `size` bytes; signed ones sign-extended from their top
/// bit as the C shift computes it on x86-64 (the shift count taken modulo 64).
fn get_integer(b: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut push = |byte: u8| l = (l << 8) | u64::from(byte);
    if little {
        b.iter().rev().for_each(|&x| push(x));
    } else {
        b.iter().for_each(|&x| push(x));
    }
    if !signed {
        return l as f64;
    }
    let shift = (b.len() * 8).wrapping_sub(1) as u32;
    let mask = u64::MAX.wrapping_shl(shift);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

/// The `struct` table.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set("unpack", lua.create_function(unpack)?)?;
    t.raw_set("size", lua.create_function(size)?)?;
    Ok(t)
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    let fmt = auxlib::check_string(lua, &args, 1)?;
    let fmt = fmt.as_bytes();
    let mut f = Format { f: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut arg = 2;
    let mut out = Vec::new();
    while let Some(opt) = f.next() {
        let size = f.size(lua, opt)?;
        let pad = padding(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            _ if is_integer_option(opt) => {
                let n = auxlib::check_number(lua, &args, arg)?;
                arg += 1;
                put_integer(&mut out, n, h.little, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let x = auxlib::check_number(lua, &args, arg)? as f32;
                arg += 1;
                let b = if h.little {
                    x.to_le_bytes()
                } else {
                    x.to_be_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'd' => {
                let x = auxlib::check_number(lua, &args, arg)?;
                arg += 1;
                let b = if h.little {
                    x.to_le_bytes()
                } else {
                    x.to_be_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'c' | b's' => {
                let s = auxlib::check_string(lua, &args, arg)?;
                arg += 1;
                let s = s.as_bytes();
                let size = if size == 0 { s.len() } else { size };
                if s.len() < size {
                    // The C library names the argument after the string (its counter has
                    // moved on already).
                    return Err(auxlib::arg_error(lua, arg as i64, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(lua, opt, &mut h)?,
        }
    }
    lua.create_string(&out)
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let fmt = auxlib::check_string(lua, &args, 1)?;
    let data = auxlib::check_string(lua, &args, 2)?;
    let (fmt, data) = (fmt.as_bytes(), data.as_bytes());
    let ld = data.len();
    // A negative position is a huge size_t in C: it passes this check and fails the
    // length checks below.
    let pos = auxlib::opt_integer(lua, &args, 3, 1)? as u64 as usize;
    if pos == 0 {
        return Err(auxlib::arg_error(lua, 3, "offset must be 1 or greater"));
    }
    let mut pos = pos - 1;
    let mut f = Format { f: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut out: Vec<Value> = Vec::new();
    let too_short = || auxlib::arg_error(lua, 2, "data string too short");
    while let Some(opt) = f.next() {
        let mut size = f.size(lua, opt)?;
        pos = pos.wrapping_add(padding(pos, &h, opt, size));
        if size > ld || pos > ld - size {
            return Err(too_short());
        }
        if args.len() + out.len() + 2 > MAX_C_STACK || out.len() + 1 >= auxlib::MAX_RESULTS {
            return Err(auxlib::error(lua, "stack overflow (too many results)"));
        }
        match opt {
            _ if is_integer_option(opt) => {
                let v = get_integer(&data[pos..pos + size], h.little, opt.is_ascii_lowercase());
                out.push(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4]
                    .try_into()
                    .map_err(mlua::Error::external)?;
                let x = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(f64::from(x)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8]
                    .try_into()
                    .map_err(mlua::Error::external)?;
                let x = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(x));
            }
            b'c' => {
                if size == 0 {
                    let prev = out.last().and_then(|v| auxlib::to_number(lua, v));
                    let Some(n) = prev else {
                        return Err(auxlib::error(lua, "format 'c0' needs a previous size"));
                    };
                    out.pop();
                    size = auxlib::truncate_u64(n) as usize;
                    if size > ld || pos > ld - size {
                        return Err(too_short());
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(len) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(auxlib::error(lua, "unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + len])?));
                size = len + 1;
            }
            _ => f.control(lua, opt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(MultiValue::from_iter(out))
}

fn size(lua: &Lua, args: MultiValue) -> mlua::Result<i64> {
    let fmt = auxlib::check_string(lua, &args, 1)?;
    let fmt = fmt.as_bytes();
    let mut f = Format { f: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut pos: usize = 0;
    while let Some(opt) = f.next() {
        let size = f.size(lua, opt)?;
        pos = pos.wrapping_add(padding(pos, &h, opt, size));
        if opt == b's' {
            return Err(auxlib::arg_error(lua, 1, "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(auxlib::arg_error(lua, 1, "option 'c0' has no fixed size"));
        }
        // Unknown letters and digits count nothing; other characters must be options.
        if !opt.is_ascii_alphanumeric() {
            f.control(lua, opt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(pos as i64)
}

#[cfg(test)]
#[path = "lua_struct_tests.rs"]
mod tests;
