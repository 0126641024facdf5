//! The `cmsgpack` library Redis loads (lua-cmsgpack 0.4.0, `lua_cmsgpack.c`):
//! `cmsgpack.pack(...)`, `cmsgpack.unpack(s)`, `cmsgpack.unpack_one(s [, offset])`,
//! `cmsgpack.unpack_limit(s, limit [, offset])`.
//!
//! **Encoding** (the choices lua-cmsgpack makes, byte for byte):
//! - a number that is an exact 64-bit integer is written in the smallest integer form
//!   (positive/negative fixint, uint8..uint64, int8..int64); any other number as float32
//!   (`0xca`) when the float32 holds it exactly, else float64 (`0xcb`);
//! - strings as fixstr, str8 (`0xd9`), str16, str32 (never `bin`);
//! - booleans `0xc2`/`0xc3`; nil and every other type (functions, userdata, threads) `0xc0`;
//! - a table whose keys are exactly the numbers 1..n (n >= 0, so also the empty table) as an
//!   array, any other table as a map in the table's iteration order;
//! - tables nested 16 deep are written as nil (so cyclic tables end);
//! - several arguments are encoded one after the other into one string.
//!
//! **Decoding** reads a stream of values: positive/negative fixint, (u)int8..64 (uint64
//! wraps to a signed 64-bit integer, as Redis's `lua_pushinteger` does), float32/64, nil,
//! booleans, fixstr/str8/str16/str32, fixarray/array16/32, fixmap/map16/32. Anything else
//! (`bin`, `ext`, `0xc1`) is "Bad data format in input.", a truncated value "Missing bytes in
//! input."; a map key that decodes to nil or NaN is Lua's "table index is nil"/"is NaN".
//! Lua 5.1 bounds the values a C function may hold on its stack; the C library fails with
//! "stack overflow (...)" when a stream has too many top-level values or nests too deep,
//! and so does this one, counting the same stack slots against a slightly smaller budget
//! ([`MAX_RESULTS`]: every value and open table held here is an mlua reference, and mlua
//! keeps those on one Lua stack too). The budget also bounds the nesting the iterative
//! decoder below keeps.
//!
//! The encoder and decoder are written here rather than over a MessagePack crate: the
//! wire forms are a handful of headers, and what matters is lua-cmsgpack's exact choices
//! and quirks (float32 when exact, no `bin`, uint64 wrapping, its error texts and stack
//! limits), which a general-purpose crate would have to be bent to anyway.

use super::auxlib::{self, MAX_RESULTS};
use mlua::{Lua, MultiValue, Table, Value};

/// Tables nested this deep are encoded as nil (`LUACMSGPACK_MAX_NESTING`).
pub const MAX_NESTING: usize = 16;

/// Encoded values between two checks of SCRIPT KILL (a pack of a wide cyclic table can
/// take long: each of up to 16 levels multiplies the work).
const KILL_CHECK_VALUES: u64 = 1 << 14;

/// The `cmsgpack` table.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            // The C function leaves every argument on its stack.
            unpack_full(lua, &args, args.len(), 0, 0)
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let offset = auxlib::opt_integer(lua, &args, 2, 0)?;
            unpack_full(lua, &args, 1, 1, offset)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let limit = auxlib::check_integer(lua, &args, 2)?;
            let offset = auxlib::opt_integer(lua, &args, 3, 0)?;
            unpack_full(lua, &args, 1, limit, offset)
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Redis Ltd.")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

// ---------------------------------------------------------------------------- encoding

struct Encoder<'a> {
    lua: &'a Lua,
    out: Vec<u8>,
    values: u64,
}

fn header(out: &mut Vec<u8>, n: usize, fix: u8, fix_max: usize, tag16: u8, tag32: u8) {
    if n <= fix_max {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(tag16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(tag32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// MessagePack's integer forms, the smallest that holds `n`.
pub fn encode_int(out: &mut Vec<u8>, n: i64) {
    match n {
        0..=127 => out.push(n as u8),
        128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        0x1_0000_0000.. => {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
        -32..=-1 => out.push(n as u8),
        -128..=-33 => out.extend_from_slice(&[0xd0, n as u8]),
        -32768..=-129 => {
            out.push(0xd1);
            out.extend_from_slice(&(n as i16).to_be_bytes());
        }
        -2_147_483_648..=-32769 => {
            out.push(0xd2);
            out.extend_from_slice(&(n as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// A Lua number: an integer form when it is an exact 64-bit integer, else float32 when
/// that is exact, else float64.
pub fn encode_number(out: &mut Vec<u8>, d: f64) {
    let exact_int = d.is_finite() && auxlib::truncate_i64(d) as f64 == d;
    if exact_int {
        encode_int(out, auxlib::truncate_i64(d));
    } else if (d as f32) as f64 == d {
        out.push(0xca);
        out.extend_from_slice(&(d as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

pub fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// lua-cmsgpack's `table_is_an_array`: every key a number that is a positive C `int`,
/// and the largest equal to the count (so the keys are exactly 1..n). `Some(n)` if so.
fn array_length(t: &Table) -> mlua::Result<Option<usize>> {
    let (mut count, mut max) = (0usize, 0usize);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let Some(n) = auxlib::number(&k) else {
            return Ok(None);
        };
        if n <= 0.0 || n > f64::from(i32::MAX) || n.fract() != 0.0 {
            return Ok(None);
        }
        max = max.max(n as usize);
        count += 1;
    }
    Ok((max == count).then_some(count))
}

impl Encoder<'_> {
    fn value(&mut self, v: &Value, level: usize) -> mlua::Result<()> {
        self.values += 1;
        if self.values.is_multiple_of(KILL_CHECK_VALUES) {
            auxlib::check_killed(self.lua)?;
            if self.out.len() > super::LUA_MEMORY_LIMIT_BYTES {
                return Err(mlua::Error::MemoryError("not enough memory".to_string()));
            }
        }
        match v {
            Value::String(s) => encode_bytes(&mut self.out, &s.as_bytes()),
            Value::Boolean(b) => self.out.push(if *b { 0xc3 } else { 0xc2 }),
            Value::Integer(n) => encode_number(&mut self.out, *n as f64),
            Value::Number(n) => encode_number(&mut self.out, *n),
            Value::Table(t) if level < MAX_NESTING => self.table(t, level)?,
            _ => self.out.push(0xc0),
        }
        Ok(())
    }

    fn table(&mut self, t: &Table, level: usize) -> mlua::Result<()> {
        if let Some(n) = array_length(t)? {
            header(&mut self.out, n, 0x90, 15, 0xdc, 0xdd);
            for i in 1..=n {
                self.value(&t.raw_get::<Value>(i)?, level + 1)?;
            }
            return Ok(());
        }
        let n = t.clone().pairs::<Value, Value>().count();
        header(&mut self.out, n, 0x80, 15, 0xde, 0xdf);
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            self.value(&k, level + 1)?;
            self.value(&v, level + 1)?;
        }
        Ok(())
    }
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    if args.is_empty() {
        return Err(auxlib::arg_error(lua, 0, "MessagePack pack needs input."));
    }
    let mut e = Encoder {
        lua,
        out: Vec::new(),
        values: 0,
    };
    for v in args.iter() {
        e.value(v, 0)?;
    }
    lua.create_string(&e.out)
}

// ---------------------------------------------------------------------------- decoding

/// Why a value could not be read (the C library's cursor errors).
enum Stop {
    Eof,
    BadFormat,
    Lua(mlua::Error),
}

impl From<mlua::Error> for Stop {
    fn from(e: mlua::Error) -> Self {
        Stop::Lua(e)
    }
}

/// A table being filled, and the stack slots the C decoder holds for it.
enum Open {
    Array {
        t: Table,
        left: u64,
        next: u64,
    },
    Map {
        t: Table,
        left: u64,
        key: Option<Value>,
    },
}

impl Open {
    /// Stack slots the C decoder uses while it reads this table's next value: the table,
    /// and the pushed index (array) or key (map, while reading its value).
    fn slots(&self) -> usize {
        match self {
            Open::Array { .. } | Open::Map { key: Some(_), .. } => 2,
            Open::Map { key: None, .. } => 1,
        }
    }
}

struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn need(&self, n: usize) -> Result<(), Stop> {
        if self.s.len() - self.pos < n {
            Err(Stop::Eof)
        } else {
            Ok(())
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Stop> {
        self.need(n)?;
        let b = &self.s[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    fn be(&mut self, n: usize) -> Result<u64, Stop> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }
}

/// What one header announces.
enum Item<'a> {
    Value(Value),
    Str(&'a [u8]),
    Array(u64),
    Map(u64),
}

const TOO_MANY_VALUES: &str =
    "too many return values at once; use unpack_one or unpack_limit instead.";

fn stack_overflow(lua: &Lua, what: &str) -> Stop {
    Stop::Lua(auxlib::error(lua, format!("stack overflow ({what})")))
}

/// Reads one header (and a scalar's body). `slots` is the C decoder's stack use here.
fn item<'a>(lua: &Lua, c: &mut Cursor<'a>, slots: usize) -> Result<Item<'a>, Stop> {
    c.need(1)?;
    if slots + 1 > MAX_RESULTS {
        return Err(stack_overflow(lua, TOO_MANY_VALUES));
    }
    let tag = c.take(1)?[0];
    let num = |d: f64| Ok(Item::Value(Value::Number(d)));
    match tag {
        0x00..=0x7f => num(f64::from(tag)),
        0xe0..=0xff => num(f64::from(tag as i8)),
        0xa0..=0xbf => Ok(Item::Str(c.take(usize::from(tag & 0x1f))?)),
        0x90..=0x9f => Ok(Item::Array(u64::from(tag & 0x0f))),
        0x80..=0x8f => Ok(Item::Map(u64::from(tag & 0x0f))),
        0xc0 => Ok(Item::Value(Value::Nil)),
        0xc2 => Ok(Item::Value(Value::Boolean(false))),
        0xc3 => Ok(Item::Value(Value::Boolean(true))),
        0xcc => num(c.be(1)? as f64),
        0xcd => num(c.be(2)? as f64),
        0xce => num(c.be(4)? as f64),
        // lua_pushinteger of a uint64: it wraps to a signed 64-bit integer.
        0xcf => num(c.be(8)? as i64 as f64),
        0xd0 => num(f64::from(c.be(1)? as u8 as i8)),
        0xd1 => num(f64::from(c.be(2)? as u16 as i16)),
        0xd2 => num(f64::from(c.be(4)? as u32 as i32)),
        0xd3 => num(c.be(8)? as i64 as f64),
        0xca => num(f64::from(f32::from_bits(c.be(4)? as u32))),
        0xcb => num(f64::from_bits(c.be(8)?)),
        0xd9..=0xdb => {
            let n = c.be(match tag {
                0xd9 => 1,
                0xda => 2,
                _ => 4,
            })?;
            let n = usize::try_from(n).map_err(|_| Stop::Eof)?;
            Ok(Item::Str(c.take(n)?))
        }
        0xdc => Ok(Item::Array(c.be(2)?)),
        0xdd => Ok(Item::Array(c.be(4)?)),
        0xde => Ok(Item::Map(c.be(2)?)),
        0xdf => Ok(Item::Map(c.be(4)?)),
        _ => Err(Stop::BadFormat),
    }
}

/// `lua_settable` on a fresh table: a nil or NaN key is Lua's error.
fn set(t: &Table, k: Value, v: Value) -> Result<(), Stop> {
    match &k {
        Value::Nil => return Err(Stop::Lua(mlua::Error::runtime("table index is nil"))),
        Value::Number(n) if n.is_nan() => {
            return Err(Stop::Lua(mlua::Error::runtime("table index is NaN")))
        }
        _ => {}
    }
    t.raw_set(k, v)?;
    Ok(())
}

/// Decodes one top-level value at stack use `base`, iteratively (no recursion whatever
/// the nesting).
fn decode_one(lua: &Lua, c: &mut Cursor, base: usize) -> Result<Value, Stop> {
    let mut open: Vec<Open> = Vec::new();
    let mut slots = base;
    loop {
        // Read a value; a header opens a table (an empty one is complete at once).
        let mut done = match item(lua, c, slots)? {
            Item::Value(v) => v,
            Item::Str(s) => Value::String(lua.create_string(s)?),
            Item::Array(n) | Item::Map(n) if n == 0 => Value::Table(lua.create_table()?),
            Item::Array(n) => {
                // The C array reader checks for one more slot beside its table.
                if slots + 2 > MAX_RESULTS {
                    return Err(stack_overflow(lua, "in function mp_decode_to_lua_array"));
                }
                let t = lua.create_table()?;
                open.push(Open::Array {
                    t,
                    left: n,
                    next: 1,
                });
                slots += 2;
                continue;
            }
            Item::Map(n) => {
                open.push(Open::Map {
                    t: lua.create_table()?,
                    left: n,
                    key: None,
                });
                slots += 1;
                continue;
            }
        };
        // Hand the finished value to the tables it completes.
        loop {
            let Some(top) = open.last_mut() else {
                return Ok(done);
            };
            slots -= top.slots();
            let t = match top {
                Open::Array { t, left, next } => {
                    set(t, Value::Number(*next as f64), done)?;
                    *next += 1;
                    *left -= 1;
                    (*left == 0).then(|| t.clone())
                }
                Open::Map { t, left, key } => match key.take() {
                    None => {
                        *key = Some(done);
                        None
                    }
                    Some(k) => {
                        set(t, k, done)?;
                        *left -= 1;
                        (*left == 0).then(|| t.clone())
                    }
                },
            };
            match t {
                Some(t) => {
                    open.pop();
                    done = Value::Table(t);
                }
                None => {
                    slots += open.last().map_or(0, Open::slots);
                    break;
                }
            }
        }
    }
}

/// lua-cmsgpack's `mp_unpack_full`: `limit` values (all when both `limit` and `offset` are
/// 0) from `offset`; when not decoding all, the next offset (-1 at the end) comes first.
/// `stack_args` is how many arguments the C function keeps on its stack.
fn unpack_full(
    lua: &Lua,
    args: &MultiValue,
    stack_args: usize,
    limit: i64,
    offset: i64,
) -> mlua::Result<MultiValue> {
    let s = auxlib::check_string(lua, args, 1)?;
    let s = s.as_bytes();
    let len = s.len();
    if offset < 0 || limit < 0 {
        return Err(auxlib::error(
            lua,
            format!(
                "Invalid request to unpack with offset of {} and limit of {}.",
                offset as i32, len as i32
            ),
        ));
    }
    if offset as u64 > len as u64 {
        return Err(auxlib::error(
            lua,
            format!(
                "Start offset {} greater than input length {}.",
                offset as i32, len as i32
            ),
        ));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut c = Cursor {
        s: &s,
        pos: offset as usize,
    };
    let mut out = Vec::new();
    while c.pos < len && (out.len() as i64) < limit {
        match decode_one(lua, &mut c, stack_args + out.len()) {
            Ok(v) => out.push(v),
            Err(Stop::Eof) => return Err(auxlib::error(lua, "Missing bytes in input.")),
            Err(Stop::BadFormat) => return Err(auxlib::error(lua, "Bad data format in input.")),
            Err(Stop::Lua(e)) => return Err(e),
        }
    }
    if !decode_all {
        let next = if c.pos == len { -1 } else { c.pos as i64 };
        out.insert(0, Value::Number(next as f64));
    }
    Ok(MultiValue::from_iter(out))
}

#[cfg(test)]
#[path = "cmsgpack_tests.rs"]
mod tests;
