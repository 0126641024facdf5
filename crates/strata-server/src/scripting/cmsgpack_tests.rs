//! Edge cases of `cmsgpack` (those of Redis's `tests/unit/scripting.tcl` and
//! lua-cmsgpack's own test suite): exact bytes of each encoding choice, round trips, the
//! nesting limit, streams, offsets and limits, truncated and malformed input.

use super::*;

fn lua() -> Lua {
    let lua = Lua::new();
    lua.globals().set("cmsgpack", table(&lua).unwrap()).unwrap();
    lua
}

/// The bytes a chunk returns (a string), or the error text.
fn bytes(code: &str) -> Result<Vec<u8>, String> {
    let lua = lua();
    match lua.load(code).eval::<Value>() {
        Ok(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Ok(v) => Err(format!("not a string: {v:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// What a chunk returns, through `tostring` (tables as their contents), or the error.
fn show(code: &str) -> String {
    let lua = lua();
    let dump = r#"
        local function dump(v)
          if type(v) ~= 'table' then return tostring(v) end
          local keys = {}
          for k in pairs(v) do keys[#keys + 1] = k end
          table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
          local parts = {}
          for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. '=' .. dump(v[k]) end
          return '{' .. table.concat(parts, ',') .. '}'
        end
        return function(...)
          local out = {}
          for i = 1, select('#', ...) do out[#out + 1] = dump((select(i, ...))) end
          return table.concat(out, ' ')
        end
    "#;
    let dump: mlua::Function = lua.load(dump).eval().unwrap();
    match lua
        .load(code)
        .into_function()
        .and_then(|f| f.call::<MultiValue>(()))
    {
        Ok(vals) => dump.call::<String>(vals).unwrap(),
        Err(e) => format!("error: {e}"),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn integers_take_the_smallest_form() {
    let cases: &[(&str, &str)] = &[
        ("0", "00"),
        ("127", "7f"),
        ("128", "cc80"),
        ("255", "ccff"),
        ("256", "cd0100"),
        ("65535", "cdffff"),
        ("65536", "ce00010000"),
        ("4294967295", "ceffffffff"),
        ("4294967296", "cf0000000100000000"),
        ("-1", "ff"),
        ("-32", "e0"),
        ("-33", "d0df"),
        ("-128", "d080"),
        ("-129", "d1ff7f"),
        ("-32768", "d18000"),
        ("-32769", "d2ffff7fff"),
        ("-2147483648", "d280000000"),
        ("-2147483649", "d3ffffffff7fffffff"),
        ("-2^63", "d38000000000000000"),
        ("-0.0", "00"),
    ];
    for (n, want) in cases {
        let got = bytes(&format!("return cmsgpack.pack({n})")).unwrap();
        assert_eq!(hex(&got), *want, "{n}");
    }
}

#[test]
fn non_integers_are_float32_when_exact_else_float64() {
    assert_eq!(
        hex(&bytes("return cmsgpack.pack(1.5)").unwrap()),
        "ca3fc00000"
    );
    assert_eq!(
        hex(&bytes("return cmsgpack.pack(0.1)").unwrap()),
        "cb3fb999999999999a"
    );
    // 2^63 is not an int64; it is exact in float32.
    assert_eq!(
        hex(&bytes("return cmsgpack.pack(2^63)").unwrap()),
        "ca5f000000"
    );
    assert_eq!(
        hex(&bytes("return cmsgpack.pack(1/0)").unwrap()),
        "ca7f800000"
    );
    assert_eq!(
        hex(&bytes("return cmsgpack.pack(-1/0)").unwrap()),
        "caff800000"
    );
    assert_eq!(
        hex(&bytes("return cmsgpack.pack(1e300)").unwrap()),
        "cb7e37e43c8800759c"
    );
    let nan = bytes("return cmsgpack.pack(0/0)").unwrap();
    assert_eq!(nan[0], 0xcb, "NaN is never equal to its float32: float64");
    assert_eq!(
        show("return cmsgpack.unpack(cmsgpack.pack(0/0)) ~= 0"),
        "true"
    );
}

#[test]
fn strings_booleans_nil_and_other_types() {
    assert_eq!(hex(&bytes("return cmsgpack.pack('')").unwrap()), "a0");
    assert_eq!(
        hex(&bytes("return cmsgpack.pack('abc')").unwrap()),
        "a3616263"
    );
    let s31 = bytes("return cmsgpack.pack(string.rep('x', 31))").unwrap();
    assert_eq!(s31[0], 0xbf);
    let s32 = bytes("return cmsgpack.pack(string.rep('x', 32))").unwrap();
    assert_eq!(&s32[..2], &[0xd9, 32]);
    let s256 = bytes("return cmsgpack.pack(string.rep('x', 256))").unwrap();
    assert_eq!(&s256[..3], &[0xda, 1, 0]);
    let s64k = bytes("return cmsgpack.pack(string.rep('x', 65536))").unwrap();
    assert_eq!(&s64k[..5], &[0xdb, 0, 1, 0, 0]);
    assert_eq!(s64k.len(), 65541);
    assert_eq!(
        hex(&bytes("return cmsgpack.pack(true, false, nil)").unwrap()),
        "c3c2c0"
    );
    assert_eq!(
        hex(&bytes("return cmsgpack.pack(print, coroutine.create(function() end))").unwrap()),
        "c0c0"
    );
    assert_eq!(
        show("return cmsgpack.unpack(cmsgpack.pack('a\\0b'))"),
        "a\0b"
    );
}

#[test]
fn tables_are_arrays_only_for_keys_one_to_n() {
    assert_eq!(hex(&bytes("return cmsgpack.pack({})").unwrap()), "90");
    assert_eq!(
        hex(&bytes("return cmsgpack.pack({1, 2, 3})").unwrap()),
        "93010203"
    );
    assert_eq!(
        hex(&bytes("return cmsgpack.pack({[2] = 1})").unwrap()),
        "810201"
    );
    assert_eq!(
        hex(&bytes("return cmsgpack.pack({a = 1})").unwrap()),
        "81a16101"
    );
    assert_eq!(
        hex(&bytes("return cmsgpack.pack({[1.5] = 1})").unwrap()),
        "81ca3fc0000001"
    );
    // A string key "1" is not a number: a map.
    assert_eq!(
        hex(&bytes("return cmsgpack.pack({['1'] = 1})").unwrap()),
        "81a13101"
    );
    let a16 = bytes("local t = {} for i = 1, 16 do t[i] = i end return cmsgpack.pack(t)");
    assert_eq!(&a16.unwrap()[..3], &[0xdc, 0, 16]);
    let m16 = bytes("local t = {} for i = 1, 16 do t['k' .. i] = i end return cmsgpack.pack(t)");
    assert_eq!(&m16.unwrap()[..3], &[0xde, 0, 16]);
    let a64k = bytes("local t = {} for i = 1, 65536 do t[i] = 0 end return cmsgpack.pack(t)");
    assert_eq!(&a64k.unwrap()[..5], &[0xdd, 0, 1, 0, 0]);
}

#[test]
fn nesting_beyond_sixteen_is_nil_and_cycles_end() {
    // Sixteen arrays, then the seventeenth level is nil.
    let deep = bytes(
        "local t = {} local c = t for i = 1, 20 do c[1] = {} c = c[1] end \
         return cmsgpack.pack(t)",
    )
    .unwrap();
    assert_eq!(deep, [vec![0x91; 16], vec![0xc0]].concat());
    let cyclic = bytes("local t = {} t[1] = t return cmsgpack.pack(t)").unwrap();
    assert_eq!(cyclic, [vec![0x91; 16], vec![0xc0]].concat());
    let map = bytes("local t = {} t.a = t return cmsgpack.pack(t)").unwrap();
    let mut want = [0x81, 0xa1, b'a'].repeat(16);
    want.push(0xc0);
    assert_eq!(map, want);
}

#[test]
fn round_trips() {
    assert_eq!(
        show("return cmsgpack.unpack(cmsgpack.pack({1, 'two', {3, {a = true}}, -4.25}))"),
        "{1=1,2=two,3={1=3,2={a=true}},4=-4.25}"
    );
    assert_eq!(
        show("return cmsgpack.unpack(cmsgpack.pack(1, 'a', {}, false))"),
        "1 a {} false"
    );
    assert_eq!(
        show("return cmsgpack.unpack(cmsgpack.pack(-2^63, 2^53, -123456789012))"),
        "-9.2233720368548e+18 9.007199254741e+15 -123456789012"
    );
    // An array with a nil inside comes back without the key.
    assert_eq!(
        show("return cmsgpack.unpack('\\147\\1\\192\\3')"),
        "{1=1,3=3}"
    );
}

#[test]
fn uint64_wraps_to_signed_as_redis() {
    assert_eq!(
        show("return cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255')"),
        "-1"
    );
}

#[test]
fn streams_offsets_and_limits() {
    let pre = "local s = cmsgpack.pack(1, 2, 3) ";
    assert_eq!(show(&format!("{pre} return cmsgpack.unpack_one(s)")), "1 1");
    assert_eq!(
        show(&format!("{pre} return cmsgpack.unpack_one(s, 1)")),
        "2 2"
    );
    assert_eq!(
        show(&format!("{pre} return cmsgpack.unpack_one(s, 2)")),
        "-1 3"
    );
    assert_eq!(
        show(&format!("{pre} return cmsgpack.unpack_limit(s, 2)")),
        "2 1 2"
    );
    assert_eq!(
        show(&format!("{pre} return cmsgpack.unpack_limit(s, 5, 1)")),
        "-1 2 3"
    );
    // Limit 0 and no offset decodes everything and gives no offset.
    assert_eq!(
        show(&format!("{pre} return cmsgpack.unpack_limit(s, 0)")),
        "1 2 3"
    );
    assert_eq!(
        show(&format!("{pre} return cmsgpack.unpack_limit(s, 0, 1)")),
        "1"
    );
    assert_eq!(
        show(&format!("{pre} return cmsgpack.unpack_one(s, 3)")),
        "-1"
    );
    assert_eq!(show("return cmsgpack.unpack('')"), "");
    assert_eq!(show("return cmsgpack.unpack_one('')"), "-1");
    let e = show(&format!("{pre} return cmsgpack.unpack_one(s, 4)"));
    assert!(
        e.contains("Start offset 4 greater than input length 3."),
        "{e}"
    );
    let e = show(&format!("{pre} return cmsgpack.unpack_one(s, -1)"));
    assert!(
        e.contains("Invalid request to unpack with offset of -1 and limit of 3."),
        "{e}"
    );
    let e = show("return cmsgpack.unpack_limit('')");
    assert!(
        e.contains("bad argument #2 to 'unpack_limit' (number expected, got no value)"),
        "{e}"
    );
    let e = show("return cmsgpack.unpack({})");
    assert!(
        e.contains("bad argument #1 to 'unpack' (string expected, got table)"),
        "{e}"
    );
    let e = show("return cmsgpack.pack()");
    assert!(
        e.contains("bad argument #0 to 'pack' (MessagePack pack needs input.)"),
        "{e}"
    );
}

#[test]
fn truncated_and_malformed_input_is_an_error() {
    let packed = bytes("return cmsgpack.pack({1, 'hello', {a = 2.5}, 2^40})").unwrap();
    let lua = lua();
    let unpack: mlua::Function = lua.load("return cmsgpack.unpack").eval().unwrap();
    for n in 1..packed.len() {
        let s = lua.create_string(&packed[..n]).unwrap();
        let e = unpack.call::<MultiValue>(s).unwrap_err().to_string();
        assert!(e.contains("Missing bytes in input."), "{n}: {e}");
    }
    for bad in ["\\193", "\\196\\1a", "\\212\\1\\1", "\\145\\199"] {
        let e = show(&format!("return cmsgpack.unpack('{bad}')"));
        assert!(e.contains("Bad data format in input."), "{bad}: {e}");
    }
    // Headers announcing more than there is cost nothing.
    let e = show("return cmsgpack.unpack('\\221\\255\\255\\255\\255')");
    assert!(e.contains("Missing bytes in input."), "{e}");
    let e = show("return cmsgpack.unpack('\\219\\255\\255\\255\\255ab')");
    assert!(e.contains("Missing bytes in input."), "{e}");
    assert!(show("return cmsgpack.unpack('\\129\\192\\1')").contains("table index is nil"));
}

#[test]
fn stack_limits_of_the_c_library() {
    // The C library holds 7999 values beside its argument; a Rust callback hands back
    // a few less (`auxlib::MAX_RESULTS`), with the same error beyond.
    assert_eq!(
        show("local t = {cmsgpack.unpack(string.rep('\\1', 7949))} return #t"),
        "7949"
    );
    let e = show("return cmsgpack.unpack(string.rep('\\1', 7950))");
    assert!(
        e.contains("stack overflow (too many return values at once"),
        "{e}"
    );
    let e = show("return cmsgpack.unpack(string.rep('\\1', 8000))");
    assert!(e.contains("stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"), "{e}");
    assert_eq!(
        show("return select('#', cmsgpack.unpack_limit(string.rep('\\1', 9000), 100))"),
        "101"
    );
    // Nesting deeper than the stack allows is an error, not a crash, however deep.
    let e = show("return cmsgpack.unpack(string.rep('\\145', 100000) .. '\\1')");
    assert!(e.contains("stack overflow"), "{e}");
    let e = show("return cmsgpack.unpack(string.rep('\\129', 100000) .. '\\1')");
    assert!(e.contains("stack overflow"), "{e}");
    assert_eq!(
        show(
            "local t = cmsgpack.unpack(string.rep('\\145', 3000) .. '\\7') \
              for i = 1, 3000 do t = t[1] end return t"
        ),
        "7"
    );
}
