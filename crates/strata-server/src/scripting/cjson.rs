//! The `cjson` library Redis loads (lua_cjson 2.1 with Redis's defaults):
//! `cjson.encode`, `cjson.decode`, `cjson.null`.
//!
//! Encoding: numbers in `%.14g` (NaN and infinities refused), strings with JSON's escapes
//! plus `\/` and `\u007f` as lua_cjson writes them, a table with only positive integer keys
//! is an array (holes as `null`; an excessively sparse one, whose largest index is over 10
//! and over twice its element count, is refused), an empty table is `{}`, any other table an
//! object (number keys written as strings); nesting is limited to 1000.
//! Decoding: objects and arrays to tables, `null` to `cjson.null` (a NULL light userdata),
//! `\uXXXX` escapes (surrogate pairs included) to UTF-8, nesting limited to 1000.

use mlua::{LightUserData, Lua, Table, Value};

const MAX_DEPTH: usize = 1000;

/// `cjson.null`.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// An error raised at the calling script's line, as `luaL_error` words it.
fn error_at_caller(lua: &Lua, msg: String) -> mlua::Error {
    let place = lua
        .inspect_stack(1, |d| {
            let s = d.source();
            match (s.what, s.short_src, d.current_line()) {
                (w, Some(src), Some(line)) if w != "C" => format!("{src}:{line}: "),
                _ => String::new(),
            }
        })
        .unwrap_or_default();
    mlua::Error::RuntimeError(format!("{place}{msg}"))
}

/// C's `%.14g`.
fn format_g14(n: f64) -> String {
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let exp = n.abs().log10().floor() as i32;
    if !(-5..14).contains(&exp) {
        let s = format!("{:.13e}", n);
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let mant = trim_zeros(mant);
        let e: i32 = e.parse().unwrap_or(0);
        let sign = if e < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", e.abs());
    }
    let decimals = (13 - exp).max(0) as usize;
    trim_zeros(&format!("{n:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// The array length of `t` if it is an array (Redis's lua_cjson `lua_array_length`):
/// `Ok(Some(n))`, `Ok(None)` for an object, `Err` for an excessively sparse array.
fn array_length(t: &Table) -> Result<Option<usize>, String> {
    let mut max = 0usize;
    let mut items = 0usize;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair.map_err(|e| e.to_string())?;
        let n = match k {
            Value::Number(n) => n,
            Value::Integer(n) => n as f64,
            _ => return Ok(None),
        };
        if n < 1.0 || n.fract() != 0.0 || n > usize::MAX as f64 {
            return Ok(None);
        }
        max = max.max(n as usize);
        items += 1;
    }
    if max > 10 && max > items * 2 {
        return Err("excessively sparse array".to_string());
    }
    Ok((max > 0).then_some(max))
}

fn encode_value(lua: &Lua, out: &mut Vec<u8>, v: &Value, depth: usize) -> mlua::Result<()> {
    let fail =
        |what: &str, why: &str| error_at_caller(lua, format!("Cannot serialise {what}: {why}"));
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(n) => out.extend_from_slice(format_g14(*n as f64).as_bytes()),
        Value::Number(n) => {
            if !n.is_finite() {
                return Err(fail("number", "must not be NaN or Inf"));
            }
            out.extend_from_slice(format_g14(*n).as_bytes());
        }
        Value::String(s) => encode_string(out, &s.as_bytes()),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Err(error_at_caller(
                    lua,
                    format!("Cannot serialise, excessive nesting ({})", depth + 1),
                ));
            }
            match array_length(t).map_err(|why| fail("table", &why))? {
                Some(n) => {
                    out.push(b'[');
                    for i in 1..=n {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode_value(lua, out, &t.raw_get::<Value>(i)?, depth + 1)?;
                    }
                    out.push(b']');
                }
                None => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.clone().pairs::<Value, Value>() {
                        let (k, val) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => encode_string(out, &s.as_bytes()),
                            Value::Number(n) => encode_string(out, format_g14(*n).as_bytes()),
                            Value::Integer(n) => {
                                encode_string(out, format_g14(*n as f64).as_bytes())
                            }
                            _ => return Err(fail("table", "table key must be a number or string")),
                        }
                        out.push(b':');
                        encode_value(lua, out, &val, depth + 1)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => return Err(fail(other.type_name(), "type not supported")),
    }
    Ok(())
}

struct Decoder<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Decoder<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn err(&self, what: &str) -> String {
        format!("Expected {what} at character {}", self.pos + 1)
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> Result<Value, String> {
        self.ws();
        let Some(&c) = self.s.get(self.pos) else {
            return Err(self.err("value but found T_END"));
        };
        match c {
            b'{' | b'[' => {
                if depth >= MAX_DEPTH {
                    return Err(format!(
                        "Found too many nested data structures ({}) at character {}",
                        depth + 1,
                        self.pos + 1
                    ));
                }
                self.pos += 1;
                let t = lua.create_table().map_err(|e| e.to_string())?;
                let close = if c == b'{' { b'}' } else { b']' };
                self.ws();
                if self.s.get(self.pos) == Some(&close) {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                let mut i = 1;
                loop {
                    if c == b'{' {
                        self.ws();
                        if self.s.get(self.pos) != Some(&b'"') {
                            return Err(self.err("object key string but found invalid token"));
                        }
                        let k = self.string(lua)?;
                        self.ws();
                        if self.s.get(self.pos) != Some(&b':') {
                            return Err(self.err("colon but found invalid token"));
                        }
                        self.pos += 1;
                        let v = self.value(lua, depth + 1)?;
                        t.raw_set(k, v).map_err(|e| e.to_string())?;
                    } else {
                        let v = self.value(lua, depth + 1)?;
                        t.raw_set(i, v).map_err(|e| e.to_string())?;
                        i += 1;
                    }
                    self.ws();
                    match self.s.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(x) if *x == close => {
                            self.pos += 1;
                            return Ok(Value::Table(t));
                        }
                        _ if c == b'{' => {
                            return Err(self.err("comma or object end but found invalid token"))
                        }
                        _ => return Err(self.err("comma or array end but found invalid token")),
                    }
                }
            }
            b'"' => self.string(lua),
            b't' if self.s[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.s[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.s[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Ok(null())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                while self.pos < self.s.len()
                    && matches!(
                        self.s[self.pos],
                        b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                    )
                {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
                text.parse::<f64>().map(Value::Number).map_err(|_| {
                    format!(
                        "Expected value but found invalid number at character {}",
                        start + 1
                    )
                })
            }
            _ => Err(self.err("value but found invalid token")),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.pos..self.pos + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.pos += 4;
        Some(v)
    }

    fn string(&mut self, lua: &Lua) -> Result<Value, String> {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return Err(format!(
                    "Expected value but found unexpected end of string at character {}",
                    start + 1
                ));
            };
            self.pos += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else {
                        continue;
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let bad = || {
                                format!(
                                    "Expected value but found invalid unicode escape code at character {}",
                                    start + 1
                                )
                            };
                            let mut cp = self.hex4().ok_or_else(bad)?;
                            if (0xd800..0xdc00).contains(&cp) {
                                if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Err(bad());
                                }
                                self.pos += 2;
                                let lo = self.hex4().ok_or_else(bad)?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err(bad());
                                }
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                            } else if (0xdc00..0xe000).contains(&cp) {
                                return Err(bad());
                            }
                            let ch = char::from_u32(cp).ok_or_else(bad)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            return Err(format!(
                                "Expected value but found invalid escape code at character {}",
                                start + 1
                            ))
                        }
                    }
                }
                c => out.push(c),
            }
        }
        lua.create_string(&out)
            .map(Value::String)
            .map_err(|e| e.to_string())
    }
}

/// The `cjson` table.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "encode",
        lua.create_function(|lua, args: mlua::MultiValue| {
            if args.len() != 1 {
                return Err(error_at_caller(
                    lua,
                    "bad argument #1 to 'encode' (expected 1 argument)".to_string(),
                ));
            }
            let mut out = Vec::new();
            encode_value(lua, &mut out, &args[0], 0)?;
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "decode",
        lua.create_function(|lua, args: mlua::MultiValue| {
            let s = match args.front() {
                Some(v) if args.len() == 1 => lua.coerce_string(v.clone())?,
                _ => None,
            };
            let Some(s) = s else {
                return Err(error_at_caller(
                    lua,
                    "bad argument #1 to 'decode' (expected 1 argument)".to_string(),
                ));
            };
            let bytes = s.as_bytes().to_vec();
            let mut d = Decoder { s: &bytes, pos: 0 };
            let v = d.value(lua, 0).map_err(|m| error_at_caller(lua, m))?;
            d.ws();
            if d.pos < bytes.len() {
                return Err(error_at_caller(
                    lua,
                    format!(
                        "Expected the end but found invalid token at character {}",
                        d.pos + 1
                    ),
                ));
            }
            Ok(v)
        })?,
    )?;
    t.raw_set("null", null())?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(code: &str) -> String {
        let lua = Lua::new();
        lua.globals().set("cjson", table(&lua).unwrap()).unwrap();
        match lua.load(code).eval::<Value>() {
            Ok(v) => lua
                .coerce_string(v.clone())
                .ok()
                .flatten()
                .map(|s| s.to_string_lossy())
                .unwrap_or_else(|| format!("<{}>", v.type_name())),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn encode_as_lua_cjson() {
        assert_eq!(eval("return cjson.encode({})"), "{}");
        assert_eq!(eval("return cjson.encode({1, 2, 'a'})"), "[1,2,\"a\"]");
        assert_eq!(eval("return cjson.encode({[1]=1, [3]=3})"), "[1,null,3]");
        assert_eq!(
            eval("return cjson.encode({a={b={true, false}}})"),
            "{\"a\":{\"b\":[true,false]}}"
        );
        assert_eq!(
            eval("return cjson.encode('a/b\"c\\n\\1')"),
            "\"a\\/b\\\"c\\n\\u0001\""
        );
        assert_eq!(eval("return cjson.encode(0.1)"), "0.1");
        assert_eq!(eval("return cjson.encode(1/3)"), "0.33333333333333");
        assert_eq!(eval("return cjson.encode(1e20)"), "1e+20");
        assert_eq!(
            eval("return cjson.encode(123456789012345)"),
            "1.2345678901234e+14"
        );
        assert_eq!(eval("return cjson.encode(-5)"), "-5");
        assert_eq!(eval("return cjson.encode(cjson.null)"), "null");
        assert_eq!(eval("return cjson.encode({[2.5]=1})"), "{\"2.5\":1}");
        assert!(eval("return cjson.encode({[20]=1})").contains("excessively sparse array"));
        assert!(eval("return cjson.encode(0/0)").contains("must not be NaN or Inf"));
        assert!(eval("return cjson.encode(print)").contains("Cannot serialise function"));
        assert!(eval("local t = {} local c = t for i = 1, 1100 do c[1] = {} c = c[1] end return cjson.encode(t)")
            .contains("Cannot serialise, excessive nesting (1001)"));
    }

    #[test]
    fn decode_as_lua_cjson() {
        assert_eq!(eval("return cjson.decode('[1,2,3]')[3]"), "3");
        assert_eq!(
            eval("return cjson.decode('{\"a\":{\"b\":\"x\"}}').a.b"),
            "x"
        );
        assert_eq!(
            eval("return cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00\"')"),
            "é😀"
        );
        assert_eq!(
            eval("return cjson.decode('[null]')[1] == cjson.null and 'null' or 'no'"),
            "null"
        );
        assert_eq!(eval("return cjson.decode(' 1.5e2 ')"), "150");
        assert_eq!(
            eval("return cjson.encode(cjson.decode('{\"k\":[1,{},[]]}'))"),
            "{\"k\":[1,{},{}]}"
        );
        assert!(eval("return cjson.decode('[1,')")
            .contains("Expected value but found T_END at character 4"));
        assert!(eval("return cjson.decode('{1:2}')").contains("Expected object key string"));
        assert!(eval("return cjson.decode('[1] x')").contains("Expected the end"));
        let deep = format!("return cjson.decode('{}')", "[".repeat(1100));
        assert!(eval(&deep).contains("Found too many nested data structures (1001)"));
    }
}
