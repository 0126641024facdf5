//! RESP <-> Lua, as Redis 7.0's `script_lua.c` converts (`redisProtocolToLuaType`,
//! `luaReplyToRedisReply`).
//!
//! A command's reply to `redis.call`, to Lua:
//! integer -> number; bulk string -> string; null bulk or null array (RESP2) -> `false`;
//! array -> array table; status -> `{ok=...}`; error -> `{err=...}`; and after
//! `redis.setresp(3)`: map -> `{map={...}}`; set -> `{set={member=true}}`; null -> `nil`;
//! boolean -> boolean; double -> `{double=number}`; big number -> `{big_number=string}`;
//! verbatim string -> `{verbatim_string={format=..., string=...}}`; attributes are skipped.
//!
//! A script's result, to the client:
//! string -> bulk; number -> integer (truncated); boolean -> `:1`/null in the script's RESP2
//! mode, a RESP3 boolean after `setresp(3)`; table with a string `err` -> error; with a
//! string `ok` -> status; `double`, `big_number`, `map`, `set`, `verbatim_string` -> those
//! types (in the client's protocol); any other table -> array up to its first nil;
//! nil and anything else -> null.

use crate::protocol::reply::{Proto, ReplyBuf};
use mlua::{Lua, Table, Value};

/// Nesting kept at most in either direction (a deeper reply or result is an error, not a
/// stack overflow).
pub const MAX_DEPTH: usize = 1000;

/// A malformed or too deep reply.
#[derive(Debug)]
pub struct ConvError(pub String);

/// The reply `buf` (one complete RESP value, as the command wrote it) as a Lua value; an
/// error reply becomes `{err=...}` like any other position.
pub fn reply_to_lua(lua: &Lua, buf: &[u8]) -> Result<Value, ConvError> {
    let mut p = Reader { buf, pos: 0 };
    let v = p.value(lua, 0)?;
    Ok(v)
}

/// Whether the reply in `buf` is an error (`redis.call` raises it).
pub fn is_error(buf: &[u8]) -> bool {
    buf.first() == Some(&b'-')
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn lua_err(e: mlua::Error) -> ConvError {
    ConvError(e.to_string())
}

impl Reader<'_> {
    fn line(&mut self) -> Result<&[u8], ConvError> {
        let rest = &self.buf[self.pos..];
        let end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| ConvError("truncated reply".to_string()))?;
        self.pos += end + 2;
        Ok(&rest[..end])
    }

    fn len(&mut self) -> Result<i64, ConvError> {
        let l = self.line()?;
        crate::protocol::parse::parse_i64(l).ok_or_else(|| ConvError("bad length".to_string()))
    }

    fn bytes(&mut self, n: i64) -> Result<&[u8], ConvError> {
        let n = usize::try_from(n).map_err(|_| ConvError("bad length".to_string()))?;
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| e + 2 <= self.buf.len())
            .ok_or_else(|| ConvError("truncated reply".to_string()))?;
        let b = &self.buf[self.pos..end];
        self.pos = end + 2;
        Ok(b)
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> Result<Value, ConvError> {
        if depth > MAX_DEPTH {
            return Err(ConvError("reply nested too deeply".to_string()));
        }
        let Some(&kind) = self.buf.get(self.pos) else {
            return Err(ConvError("truncated reply".to_string()));
        };
        self.pos += 1;
        let s = |b: &[u8]| lua.create_string(b).map(Value::String).map_err(lua_err);
        let wrap = |key: &str, v: Value| -> Result<Value, ConvError> {
            let t = lua.create_table().map_err(lua_err)?;
            t.raw_set(key, v).map_err(lua_err)?;
            Ok(Value::Table(t))
        };
        match kind {
            b':' => {
                let n = self.len()?;
                Ok(Value::Number(n as f64))
            }
            b'$' => {
                let n = self.len()?;
                if n < 0 {
                    return Ok(Value::Boolean(false));
                }
                let b = self.bytes(n)?.to_vec();
                s(&b)
            }
            b'+' => {
                let l = self.line()?.to_vec();
                wrap("ok", s(&l)?)
            }
            b'-' => {
                let l = self.line()?.to_vec();
                wrap("err", s(&l)?)
            }
            b'*' | b'~' | b'%' | b'|' => {
                let n = self.len()?;
                if n < 0 {
                    return Ok(Value::Boolean(false));
                }
                let t = lua.create_table().map_err(lua_err)?;
                match kind {
                    b'*' => {
                        for i in 1..=n {
                            let v = self.value(lua, depth + 1)?;
                            t.raw_set(i, v).map_err(lua_err)?;
                        }
                        Ok(Value::Table(t))
                    }
                    b'~' => {
                        for _ in 0..n {
                            let v = self.value(lua, depth + 1)?;
                            t.raw_set(v, true).map_err(lua_err)?;
                        }
                        wrap("set", Value::Table(t))
                    }
                    b'%' => {
                        for _ in 0..n {
                            let k = self.value(lua, depth + 1)?;
                            let v = self.value(lua, depth + 1)?;
                            t.raw_set(k, v).map_err(lua_err)?;
                        }
                        wrap("map", Value::Table(t))
                    }
                    _ => {
                        // An attribute: skipped, the value after it is the reply.
                        for _ in 0..2 * n {
                            self.value(lua, depth + 1)?;
                        }
                        self.value(lua, depth)
                    }
                }
            }
            b'_' => {
                self.line()?;
                Ok(Value::Nil)
            }
            b'#' => {
                let l = self.line()?;
                Ok(Value::Boolean(l == b"t"))
            }
            b',' => {
                let l = String::from_utf8_lossy(self.line()?).into_owned();
                let d = match l.as_str() {
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    "nan" | "-nan" => f64::NAN,
                    x => x
                        .parse::<f64>()
                        .map_err(|_| ConvError("bad double".to_string()))?,
                };
                wrap("double", Value::Number(d))
            }
            b'(' => {
                let l = self.line()?.to_vec();
                wrap("big_number", s(&l)?)
            }
            b'=' => {
                let n = self.len()?;
                let b = self.bytes(n)?.to_vec();
                let (format, text) = if b.len() >= 4 && b[3] == b':' {
                    (&b[..3], &b[4..])
                } else {
                    (&b"txt"[..], &b[..])
                };
                let t = lua.create_table().map_err(lua_err)?;
                t.raw_set("format", s(format)?).map_err(lua_err)?;
                t.raw_set("string", s(text)?).map_err(lua_err)?;
                wrap("verbatim_string", Value::Table(t))
            }
            other => Err(ConvError(format!(
                "unexpected reply type '{}'",
                char::from(other)
            ))),
        }
    }
}

/// Writes the script's result `v` to `out` (in the client's protocol); `resp3`: the script
/// switched to RESP3 (`redis.setresp(3)`), which changes how booleans reply.
///
/// Iterative over an explicit stack, and an array's elements are read one at a time: a
/// deeply nested or cyclic result must neither exhaust the thread's stack nor hold one mlua
/// reference per element (mlua keeps those on a Lua stack of about 8000 slots).
pub fn lua_to_reply(v: &Value, out: &mut ReplyBuf, resp3: bool) {
    let mut todo = vec![Work::Value(v.clone(), 0)];
    while let Some(w) = todo.pop() {
        match w {
            Work::Value(v, depth) => {
                let first = todo.len();
                write_value(&v, out, resp3, depth, &mut todo);
                // Pushed in order: reversed, they pop in order.
                todo[first..].reverse();
            }
            Work::Array {
                t,
                next,
                len,
                depth,
            } => {
                if next > len {
                    continue;
                }
                let v = t.raw_get::<Value>(next).unwrap_or(Value::Nil);
                todo.push(Work::Array {
                    t,
                    next: next + 1,
                    len,
                    depth,
                });
                todo.push(Work::Value(v, depth + 1));
            }
        }
    }
}

/// What is left to write of a result.
enum Work {
    Value(Value, usize),
    /// Elements `next..=len` of an array table at `depth`.
    Array {
        t: Table,
        next: usize,
        len: usize,
        depth: usize,
    },
}

fn sanitize(s: &[u8]) -> String {
    String::from_utf8_lossy(s).replace(['\r', '\n'], " ")
}

/// Writes a scalar, or a table's header with its elements queued on `todo` in order.
fn write_value(v: &Value, out: &mut ReplyBuf, resp3: bool, depth: usize, todo: &mut Vec<Work>) {
    if depth > MAX_DEPTH {
        out.error("ERR reached lua stack limit");
        return;
    }
    match v {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if resp3 {
                out.bool(*b);
            } else if *b {
                out.int(1);
            } else {
                out.null();
            }
        }
        Value::Integer(n) => out.int(*n),
        Value::Number(n) => out.int(number_to_int(*n)),
        Value::Table(t) => write_table(t, out, depth, todo),
        _ => out.null(),
    }
}

/// C's `(long long)` cast of a Lua number as redis-server computes it on x86-64: NaN and
/// values out of range are `i64::MIN` (`return 2^63` replies `:-9223372036854775808`).
pub fn number_to_int(n: f64) -> i64 {
    super::auxlib::truncate_i64(n)
}

fn field_string(t: &Table, key: &str) -> Option<mlua::LuaString> {
    match t.raw_get::<Value>(key) {
        Ok(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn write_table(t: &Table, out: &mut ReplyBuf, depth: usize, todo: &mut Vec<Work>) {
    if let Some(e) = field_string(t, "err") {
        return out.error_bytes(&error_text(&e.as_bytes()));
    }
    if let Some(s) = field_string(t, "ok") {
        return out.simple(&sanitize(&s.as_bytes()));
    }
    if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
        return out.double(d);
    }
    if let Ok(Value::Integer(d)) = t.raw_get::<Value>("double") {
        return out.double(d as f64);
    }
    if let Some(s) = field_string(t, "big_number") {
        let text = sanitize(&s.as_bytes());
        return match out.proto {
            Proto::Resp2 => out.bulk(text.as_bytes()),
            Proto::Resp3 => out.raw(format!("({text}\r\n").as_bytes()),
        };
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        out.map(pairs.len());
        for (k, v) in pairs {
            todo.push(Work::Value(k, depth + 1));
            todo.push(Work::Value(v, depth + 1));
        }
        return;
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let keys: Vec<Value> = s
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, _)| k)
            .collect();
        out.set(keys.len());
        for k in keys {
            todo.push(Work::Value(k, depth + 1));
        }
        return;
    }
    if let Ok(Value::Table(vs)) = t.raw_get::<Value>("verbatim_string") {
        if let (Some(format), Some(text)) =
            (field_string(&vs, "format"), field_string(&vs, "string"))
        {
            let (format, text) = (format.as_bytes().to_vec(), text.as_bytes().to_vec());
            match out.proto {
                Proto::Resp2 => out.bulk(&text),
                Proto::Resp3 => {
                    let mut b = format!("={}\r\n", text.len() + 4).into_bytes();
                    let mut f = format;
                    f.resize(3, b' ');
                    b.extend_from_slice(&f);
                    b.push(b':');
                    b.extend_from_slice(&text);
                    b.extend_from_slice(b"\r\n");
                    out.raw(&b);
                }
            }
            return;
        }
    }
    // An array up to its first nil.
    let mut len = 0;
    while matches!(t.raw_get::<Value>(len + 1), Ok(v) if !v.is_nil()) {
        len += 1;
    }
    out.array(len);
    todo.push(Work::Array {
        t: t.clone(),
        next: 1,
        len,
        depth,
    });
}

/// An `err` field as the client gets it: the text as is when it has a code (Redis writes
/// `-%s`), trailing newlines trimmed.
fn error_text(e: &[u8]) -> Vec<u8> {
    let e = e.strip_prefix(b"-").unwrap_or(e);
    e.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_lua_and_back(lua: &Lua, reply: &[u8], resp3: bool, proto: Proto) -> Vec<u8> {
        let v = reply_to_lua(lua, reply).unwrap();
        let mut out = ReplyBuf::new(proto);
        lua_to_reply(&v, &mut out, resp3);
        out.take().to_vec()
    }

    #[test]
    fn resp2_replies_round_trip() {
        let lua = Lua::new();
        for (reply, back) in [
            (&b":42\r\n"[..], &b":42\r\n"[..]),
            (b"$3\r\nabc\r\n", b"$3\r\nabc\r\n"),
            (b"+OK\r\n", b"+OK\r\n"),
            (b"-ERR bad\r\n", b"-ERR bad\r\n"),
            // A null bulk is false, and false returns as a null.
            (b"$-1\r\n", b"$-1\r\n"),
            (b"*-1\r\n", b"$-1\r\n"),
            (b"*2\r\n:1\r\n$1\r\nx\r\n", b"*2\r\n:1\r\n$1\r\nx\r\n"),
            (b"*0\r\n", b"*0\r\n"),
        ] {
            assert_eq!(to_lua_and_back(&lua, reply, false, Proto::Resp2), back);
        }
        // An array stops at a null element made false? No: false is a value, kept.
        assert_eq!(
            to_lua_and_back(&lua, b"*3\r\n:1\r\n$-1\r\n:3\r\n", false, Proto::Resp2),
            b"*3\r\n:1\r\n$-1\r\n:3\r\n"
        );
    }

    #[test]
    fn resp3_types_to_lua() {
        let lua = Lua::new();
        let v = reply_to_lua(&lua, b"%1\r\n$1\r\na\r\n:1\r\n").unwrap();
        let Value::Table(t) = v else { panic!() };
        let m: Table = t.get("map").unwrap();
        assert_eq!(m.get::<i64>("a").unwrap(), 1);
        let v = reply_to_lua(&lua, b",1.5\r\n").unwrap();
        let Value::Table(t) = v else { panic!() };
        assert_eq!(t.get::<f64>("double").unwrap(), 1.5);
        assert!(matches!(reply_to_lua(&lua, b"_\r\n").unwrap(), Value::Nil));
        assert!(matches!(
            reply_to_lua(&lua, b"#t\r\n").unwrap(),
            Value::Boolean(true)
        ));
        // A map back to a RESP3 client is a map, to a RESP2 client a flat array.
        assert_eq!(
            to_lua_and_back(&lua, b"%1\r\n$1\r\na\r\n:1\r\n", true, Proto::Resp3),
            b"%1\r\n$1\r\na\r\n:1\r\n"
        );
        assert_eq!(
            to_lua_and_back(&lua, b"%1\r\n$1\r\na\r\n:1\r\n", true, Proto::Resp2),
            b"*2\r\n$1\r\na\r\n:1\r\n"
        );
        assert_eq!(
            to_lua_and_back(&lua, b"~1\r\n$1\r\na\r\n", true, Proto::Resp3),
            b"~1\r\n$1\r\na\r\n"
        );
        assert_eq!(
            to_lua_and_back(&lua, b"(123\r\n", true, Proto::Resp3),
            b"(123\r\n"
        );
        assert_eq!(
            to_lua_and_back(&lua, b"=8\r\ntxt:abcd\r\n", true, Proto::Resp3),
            b"=8\r\ntxt:abcd\r\n"
        );
        assert_eq!(
            to_lua_and_back(&lua, b"=8\r\ntxt:abcd\r\n", true, Proto::Resp2),
            b"$4\r\nabcd\r\n"
        );
        // An attribute is skipped.
        assert_eq!(
            to_lua_and_back(&lua, b"|1\r\n+a\r\n+b\r\n:7\r\n", true, Proto::Resp3),
            b":7\r\n"
        );
    }

    #[test]
    fn script_results_to_replies() {
        let lua = Lua::new();
        let run = |code: &str, resp3: bool, proto: Proto| {
            let v: Value = lua.load(code).eval().unwrap();
            let mut out = ReplyBuf::new(proto);
            lua_to_reply(&v, &mut out, resp3);
            String::from_utf8(out.take().to_vec()).unwrap()
        };
        assert_eq!(run("return 1.9", false, Proto::Resp2), ":1\r\n");
        assert_eq!(run("return -1.9", false, Proto::Resp2), ":-1\r\n");
        assert_eq!(
            run("return {1,2,nil,4}", false, Proto::Resp2),
            "*2\r\n:1\r\n:2\r\n"
        );
        assert_eq!(run("return true", false, Proto::Resp2), ":1\r\n");
        assert_eq!(run("return false", false, Proto::Resp2), "$-1\r\n");
        assert_eq!(run("return false", false, Proto::Resp3), "_\r\n");
        assert_eq!(run("return false", true, Proto::Resp3), "#f\r\n");
        assert_eq!(run("return false", true, Proto::Resp2), ":0\r\n");
        assert_eq!(run("return nil", false, Proto::Resp2), "$-1\r\n");
        assert_eq!(
            run("return {err='My Error'}", false, Proto::Resp2),
            "-My Error\r\n"
        );
        assert_eq!(
            run("return {ok='a\\r\\nb'}", false, Proto::Resp2),
            "+a  b\r\n"
        );
        assert_eq!(run("return {err=3}", false, Proto::Resp2), "*0\r\n");
        assert_eq!(
            run("return {double=3.5}", false, Proto::Resp2),
            "$3\r\n3.5\r\n"
        );
        assert_eq!(run("return {double=3.5}", false, Proto::Resp3), ",3.5\r\n");
        assert_eq!(
            run("return {big_number='12'}", false, Proto::Resp2),
            "$2\r\n12\r\n"
        );
        assert_eq!(
            run("return {map={a=1}}", false, Proto::Resp2),
            "*2\r\n$1\r\na\r\n:1\r\n"
        );
        assert_eq!(
            run("return {set={a=true}}", false, Proto::Resp3),
            "~1\r\n$1\r\na\r\n"
        );
        assert_eq!(run("return print", false, Proto::Resp2), "$-1\r\n");
        assert_eq!(
            run("return {1,{2,{3,'a'}}}", false, Proto::Resp2),
            "*2\r\n:1\r\n*2\r\n:2\r\n*2\r\n:3\r\n$1\r\na\r\n"
        );
    }

    #[test]
    fn malformed_and_deep_replies_are_errors() {
        let lua = Lua::new();
        assert!(reply_to_lua(&lua, b"$5\r\nab\r\n").is_err());
        assert!(reply_to_lua(&lua, b"*2\r\n:1\r\n").is_err());
        assert!(reply_to_lua(&lua, b"?x\r\n").is_err());
        assert!(reply_to_lua(&lua, b"").is_err());
        let deep = "*1\r\n".repeat(MAX_DEPTH + 5) + ":1\r\n";
        assert!(reply_to_lua(&lua, deep.as_bytes()).is_err());
        let v: Value = lua
            .load("local t = {} local c = t for i = 1, 2000 do c[1] = {} c = c[1] end return t")
            .eval()
            .unwrap();
        let mut out = ReplyBuf::new(Proto::Resp2);
        lua_to_reply(&v, &mut out, false);
        assert!(String::from_utf8_lossy(&out.take()).contains("-ERR reached lua stack limit"));
    }
}
