//! How keys, values and figures cross the command line: hex input, escaped output, byte
//! sizes, SI-suffixed numbers.

use std::fmt::Write as _;

/// Renders bytes for a terminal or a `key<TAB>value` line.
///
/// Bytes that form valid UTF-8 are printed as text, except that a backslash becomes `\\`
/// and control characters (tab, newline, ...) become `\xNN` per byte. Bytes that are not
/// valid UTF-8 as a whole are binary: printable ASCII stays, every other byte becomes
/// `\xNN`. The result never contains a tab or a newline, so every `scan` line splits into
/// exactly one key and one value, and the bytes can be read back unambiguously.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            for c in text.chars() {
                if c == '\\' {
                    out.push_str("\\\\");
                } else if c.is_control() {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        push_hex_escape(&mut out, b);
                    }
                } else {
                    out.push(c);
                }
            }
        }
        Err(_) => {
            for &b in bytes {
                match b {
                    b'\\' => out.push_str("\\\\"),
                    0x20..=0x7e => out.push(b as char),
                    _ => push_hex_escape(&mut out, b),
                }
            }
        }
    }
    out
}

fn push_hex_escape(out: &mut String, b: u8) {
    // Writing to a String cannot fail.
    let _ = write!(out, "\\x{b:02x}");
}

/// Parses a hex string such as `00ff1a` or `0x00FF1A` into bytes. The empty string (or a lone
/// `0x`) is the empty key.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "hex string {s:?} has an odd number of digits (each byte takes two)"
        ));
    }
    let nibble = |i: usize, c: u8| -> Result<u8, String> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(format!(
                "hex string {s:?}: {:?} at position {i} is not a hex digit",
                c as char
            )),
        }
    };
    digits
        .as_bytes()
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| Ok(nibble(2 * i, pair[0])? << 4 | nibble(2 * i + 1, pair[1])?))
        .collect()
}

/// Lower-case hex of `bytes`, two digits per byte.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A byte count for humans: `512 B`, `4.0 KiB`, `27.5 MiB`, `1.2 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// 1500 -> "1.5k", 2000000 -> "2M".
pub fn si(v: f64) -> String {
    let (d, suffix) = if v >= 1e6 {
        (1e6, "M")
    } else if v >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let x = v / d;
    if (x - x.round()).abs() < 1e-9 {
        format!("{:.0}{suffix}", x)
    } else {
        format!("{:.1}{suffix}", x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_keeps_printable_utf8() {
        assert_eq!(escape(b"hello world"), "hello world");
        assert_eq!(escape("naïve ключ 鍵".as_bytes()), "naïve ключ 鍵");
        assert_eq!(escape(b""), "");
    }

    #[test]
    fn escape_hexes_invalid_and_control_bytes() {
        assert_eq!(escape(b"\x00"), "\\x00");
        assert_eq!(escape(b"a\tb\nc"), "a\\x09b\\x0ac");
        assert_eq!(escape(b"\xff\xfeok"), "\\xff\\xfeok");
        assert_eq!(escape(b"back\\slash"), "back\\\\slash");
        assert_eq!(
            escape(&[0, 0, 0, 0, 0, 0, 1, 0]),
            "\\x00".repeat(6) + "\\x01\\x00"
        );
        // A truncated multi-byte sequence in the middle of valid text.
        assert_eq!(escape(b"a\xe2\x82b"), "a\\xe2\\x82b");
        // Binary data is escaped whole, even where some bytes happen to form UTF-8.
        assert_eq!(escape("é".as_bytes()), "é");
        assert_eq!(escape(b"\xc3\xa9\xff\\"), "\\xc3\\xa9\\xff\\\\");
        // C1 control characters are escaped byte by byte too.
        assert_eq!(escape("\u{85}".as_bytes()), "\\xc2\\x85");
    }

    #[test]
    fn escaped_output_never_contains_tab_or_newline() {
        let all: Vec<u8> = (0..=255u8).collect();
        let e = escape(&all);
        assert!(!e.contains('\t') && !e.contains('\n') && !e.contains('\r'));
    }

    #[test]
    fn parse_hex_accepts_both_cases_and_prefix() {
        assert_eq!(parse_hex("00ff1A").unwrap(), vec![0x00, 0xff, 0x1a]);
        assert_eq!(parse_hex("0x0001").unwrap(), vec![0, 1]);
        assert_eq!(parse_hex("0X7f").unwrap(), vec![0x7f]);
        assert_eq!(parse_hex("").unwrap(), Vec::<u8>::new());
        assert_eq!(parse_hex("0x").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn parse_hex_rejects_bad_input_clearly() {
        let e = parse_hex("abc").unwrap_err();
        assert!(e.contains("odd number of digits"), "{e}");
        let e = parse_hex("zz").unwrap_err();
        assert!(e.contains("'z' at position 0 is not a hex digit"), "{e}");
        let e = parse_hex("0g").unwrap_err();
        assert!(e.contains("position 1"), "{e}");
    }

    #[test]
    fn hex_round_trip() {
        let all: Vec<u8> = (0..=255u8).collect();
        assert_eq!(parse_hex(&to_hex(&all)).unwrap(), all);
    }

    #[test]
    fn human_bytes_picks_a_unit() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(64 << 20), "64.0 MiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }

    #[test]
    fn si_labels() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(950.0), "950");
        assert_eq!(si(1500.0), "1.5k");
        assert_eq!(si(2_000_000.0), "2M");
    }
}
