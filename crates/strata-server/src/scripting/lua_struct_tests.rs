//! Edge cases of `struct`: every format letter's bytes, alignment, round trips, huge and
//! negative numbers, truncated data and the library's errors.

use super::*;

/// The values a chunk returns (with the state they live in), or the error text.
fn run(code: &str) -> (Lua, Result<Vec<Value>, String>) {
    let lua = Lua::new();
    lua.globals().set("struct", table(&lua).unwrap()).unwrap();
    let r = lua
        .load(code)
        .into_function()
        .and_then(|f| f.call::<MultiValue>(()))
        .map(|v| v.into_iter().collect())
        .map_err(|e| e.to_string());
    (lua, r)
}

fn hex(code: &str) -> String {
    let (_lua, r) = run(code);
    match r {
        Ok(v) => match v.first() {
            Some(Value::String(s)) => s.as_bytes().iter().map(|x| format!("{x:02x}")).collect(),
            other => format!("not a string: {other:?}"),
        },
        Err(e) => format!("error: {e}"),
    }
}

/// Numbers and strings returned, as text.
fn show(code: &str) -> String {
    let (_lua, r) = run(code);
    match r {
        Ok(v) => v
            .iter()
            .map(|v| match v {
                Value::Integer(n) => n.to_string(),
                Value::Number(n) => n.to_string(),
                Value::String(s) => format!("{:?}", s.to_string_lossy()),
                other => format!("{other:?}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn integer_letters_and_endianness() {
    assert_eq!(
        hex("return struct.pack('>b B h H', -1, 255, -2, 65534)"),
        "ffff fffe fffe".replace(' ', "")
    );
    assert_eq!(hex("return struct.pack('<h', 1)"), "0100");
    assert_eq!(hex("return struct.pack('>i', 1)"), "00000001");
    assert_eq!(hex("return struct.pack('>i3', -1)"), "ffffff");
    assert_eq!(hex("return struct.pack('>l', -2)"), "fffffffffffffffe");
    assert_eq!(hex("return struct.pack('<T', 1)"), "0100000000000000");
    // Beyond 8 bytes only the low 64 bits carry the value.
    assert_eq!(
        hex("return struct.pack('>i16', -1)"),
        format!("{}{}", "00".repeat(8), "ff".repeat(8))
    );
    assert_eq!(hex("return struct.pack('>i0', 5)"), "");
    // Native order is little endian on this machine.
    assert_eq!(hex("return struct.pack('H', 1)"), "0100");
}

#[test]
fn huge_and_odd_numbers_convert_as_c_on_x86_64() {
    assert_eq!(hex("return struct.pack('>L', 2^64)"), "0000000000000000");
    assert_eq!(hex("return struct.pack('>L', 1e30)"), "0000000000000000");
    assert_eq!(hex("return struct.pack('>L', 0/0)"), "8000000000000000");
    assert_eq!(hex("return struct.pack('>l', -1e30)"), "8000000000000000");
    assert_eq!(
        hex("return struct.pack('>L', 2^63 + 2^62)"),
        "c000000000000000"
    );
    assert_eq!(hex("return struct.pack('>B', 256.9)"), "00");
    assert_eq!(hex("return struct.pack('>b', -1.9)"), "ff");
    assert_eq!(
        show("return struct.unpack('>L', struct.pack('>L', 2^64 - 1))"),
        "0 9"
    );
}

#[test]
fn floats_strings_padding_and_alignment() {
    assert_eq!(hex("return struct.pack('>f', 1.5)"), "3fc00000");
    assert_eq!(hex("return struct.pack('<d', 1.5)"), "000000000000f83f");
    assert_eq!(hex("return struct.pack('c2', 'abc')"), "6162");
    assert_eq!(hex("return struct.pack('c0', 'abc')"), "616263");
    assert_eq!(hex("return struct.pack('s', 'ab')"), "616200");
    assert_eq!(hex("return struct.pack('bxb', 1, 2)"), "010002");
    assert_eq!(
        hex("return struct.pack('!4 b i', 1, 2)"),
        "0100000002000000"
    );
    assert_eq!(hex("return struct.pack('!2 b i', 1, 2)"), "010002000000");
    assert_eq!(
        hex("return struct.pack('! b d', 1, 0)"),
        "01".to_string() + &"00".repeat(15)
    );
    assert_eq!(show("return struct.size('!4 b i')"), "8");
    assert_eq!(show("return struct.size('bhilfdxc3T')"), "39");
    assert_eq!(show("return struct.size('z9')"), "0");
}

#[test]
fn round_trips_and_positions() {
    assert_eq!(
        show("return struct.unpack('>i h c3 s d', struct.pack('>i h c3 s d', -7, 300, 'xyz', 'str', 0.25))"),
        "-7 300 \"xyz\" \"str\" 0.25 22"
    );
    assert_eq!(show("return struct.unpack('b', '\\1\\2\\3', 2)"), "2 3");
    assert_eq!(show("return struct.unpack('B c0', '\\3abcd')"), "\"abc\" 5");
    assert_eq!(show("return struct.unpack('c1 c0', '2abcd')"), "\"ab\" 4");
    assert_eq!(show("return struct.unpack('', 'abc', 4)"), "4");
    assert_eq!(
        show("return struct.unpack('>I9', string.rep('\\255', 9))"),
        "18446744073709552000 10"
    );
    assert_eq!(
        show("return struct.unpack('<i9', struct.pack('<i9', -2))"),
        "-2 10"
    );
}

#[test]
fn errors_as_the_library_raises_them() {
    let e = show("return struct.pack('y', 1)");
    assert!(
        e.contains("bad argument #1 to 'pack' (invalid format option 'y')"),
        "{e}"
    );
    let e = show("return struct.pack('i33', 1)");
    assert!(
        e.contains("integral size 33 is larger than limit of 32"),
        "{e}"
    );
    let e = show("return struct.pack('i99999999999', 1)");
    assert!(e.contains("integral size overflow"), "{e}");
    let e = show("return struct.pack('!3', 1)");
    assert!(e.contains("alignment 3 is not a power of 2"), "{e}");
    let e = show("return struct.pack('i', 'x')");
    assert!(
        e.contains("bad argument #2 to 'pack' (number expected, got string)"),
        "{e}"
    );
    let e = show("return struct.pack('c5', 'abc')");
    assert!(
        e.contains("bad argument #3 to 'pack' (string too short)"),
        "{e}"
    );
    let e = show("return struct.unpack('i', 'abc')");
    assert!(
        e.contains("bad argument #2 to 'unpack' (data string too short)"),
        "{e}"
    );
    let e = show("return struct.unpack('b', 'abc', 0)");
    assert!(
        e.contains("bad argument #3 to 'unpack' (offset must be 1 or greater)"),
        "{e}"
    );
    let e = show("return struct.unpack('b', 'abc', -1)");
    assert!(e.contains("data string too short"), "{e}");
    let e = show("return struct.unpack('c0', 'abc')");
    assert!(e.contains("format 'c0' needs a previous size"), "{e}");
    let e = show("return struct.unpack('B c0', '\\9abc')");
    assert!(e.contains("data string too short"), "{e}");
    let e = show("return struct.unpack('s', 'abc')");
    assert!(e.contains("unfinished string in data"), "{e}");
    let e = show("return struct.size('s')");
    assert!(
        e.contains("bad argument #1 to 'size' (option 's' has no fixed size)"),
        "{e}"
    );
    let e = show("return struct.size('c0')");
    assert!(e.contains("option 'c0' has no fixed size"), "{e}");
    let e = show("return struct.size('#')");
    assert!(e.contains("invalid format option '#'"), "{e}");
    let e = show("return struct.pack()");
    assert!(
        e.contains("bad argument #1 to 'pack' (string expected, got no value)"),
        "{e}"
    );
    let e = show("return struct.unpack(string.rep('b', 9000), string.rep('x', 9000))");
    assert!(e.contains("stack overflow (too many results)"), "{e}");
}
