//! Redis's parsing of scores and weights, as its C library reads them: `strtod` with its
//! hex floats, infinities and ERANGE ([`strtod`]), a whole argument as a double
//! (`getDoubleFromObject`, [`parse_double`]) and a score range's bound (`zslParseRange`,
//! [`parse_score_bound`]). Sorted sets, GEO and SORT read numbers through it.
//!
//! Layer: store and types.

/// C's `strtod` over the start of `s`: the value, the bytes read (0: no number) and whether
/// it over- or underflowed (`ERANGE`). Leading white space is skipped as C does.
pub fn strtod(s: &[u8]) -> (f64, usize, bool) {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let start = i;
    let neg = matches!(s.get(i), Some(b'-'));
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let sign = if neg { -1.0 } else { 1.0 };
    let rest = &s[i..];
    let lower: Vec<u8> = rest
        .iter()
        .take(8)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if lower.starts_with(b"infinity") {
        return (sign * f64::INFINITY, i + 8, false);
    }
    if lower.starts_with(b"inf") {
        return (sign * f64::INFINITY, i + 3, false);
    }
    if lower.starts_with(b"nan") {
        let mut n = i + 3;
        if s.get(n) == Some(&b'(') {
            if let Some(close) = s[n..].iter().position(|&c| c == b')') {
                if s[n + 1..n + close]
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    n += close + 1;
                }
            }
        }
        return (f64::NAN, n, false);
    }
    if lower.starts_with(b"0x") {
        if let Some((v, n)) = hex_float(&rest[2..]) {
            let v = sign * v;
            let erange = v.is_infinite() || (v == 0.0 && n.1);
            return (v, i + 2 + n.0, erange);
        }
    }
    // Decimal: digits [. digits] [e [sign] digits].
    let digits = |from: usize| s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int = digits(i);
    let mut j = i + int;
    let mut frac = 0;
    if s.get(j) == Some(&b'.') {
        frac = digits(j + 1);
        if int + frac > 0 {
            j += 1 + frac;
        }
    }
    if int + frac == 0 {
        return (0.0, 0, false);
    }
    if matches!(s.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(s.get(k), Some(b'-' | b'+')) {
            k += 1;
        }
        let e = digits(k);
        if e > 0 {
            j = k + e;
        }
    }
    let text = std::str::from_utf8(&s[start..j]).unwrap_or("0");
    let v: f64 = text.parse().unwrap_or(0.0);
    let nonzero = s[i..j]
        .iter()
        .take_while(|c| !matches!(c, b'e' | b'E'))
        .any(|c| (b'1'..=b'9').contains(c));
    let erange = v.is_infinite() || (v == 0.0 && nonzero);
    (v, j, erange)
}

/// A hex float's value after "0x": `((value, (bytes read, nonzero digits)))`, `None` if no
/// hex digit follows (then C reads only the "0").
fn hex_float(s: &[u8]) -> Option<(f64, (usize, bool))> {
    let mut mant: u64 = 0;
    let mut exp: i64 = 0;
    let mut any = false;
    let mut nonzero = false;
    let mut i = 0;
    let mut seen_dot = false;
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !seen_dot {
            seen_dot = true;
            i += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else {
            break;
        };
        any = true;
        nonzero |= d != 0;
        if mant >> 59 == 0 {
            mant = mant * 16 + u64::from(d);
            if seen_dot {
                exp -= 4;
            }
        } else if !seen_dot {
            exp += 4;
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        let mut k = i + 1;
        let neg = s.get(k) == Some(&b'-');
        if matches!(s.get(k), Some(b'-' | b'+')) {
            k += 1;
        }
        let n = s[k..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n > 0 {
            let e: i64 = s[k..k + n]
                .iter()
                .fold(0i64, |a, &c| (a * 10 + i64::from(c - b'0')).min(1 << 20));
            exp += if neg { -e } else { e };
            i = k + n;
        }
    }
    let v = (mant as f64) * 2f64.powi(exp.clamp(-2000, 2000) as i32);
    Some((v, (i, nonzero)))
}

/// Redis's `getDoubleFromObject`: the whole argument is a number (no leading space), not
/// NaN, neither overflowing nor underflowing to zero.
pub fn parse_double(s: &[u8]) -> Option<f64> {
    if s.is_empty() || matches!(s[0], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        return None;
    }
    let (v, n, erange) = strtod(s);
    if n != s.len() || v.is_nan() || (erange && (v.is_infinite() || v == 0.0)) {
        return None;
    }
    Some(v)
}

/// Redis's `zslParseRange` for one bound: `(` for exclusive, then what `strtod` reads, up
/// to the end or a NUL byte; not NaN.
pub fn parse_score_bound(s: &[u8]) -> Option<(f64, bool)> {
    let (body, ex) = match s.first() {
        Some(b'(') => (&s[1..], true),
        _ => (s, false),
    };
    let (v, n, _) = strtod(body);
    if (n < body.len() && body[n] != 0) || v.is_nan() {
        return None;
    }
    Some((v, ex))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_parse_as_redis() {
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"0x10"), Some(16.0));
        assert_eq!(parse_double(b"0x1p3"), Some(8.0));
        assert_eq!(parse_double(b"1e3"), Some(1000.0));
        assert_eq!(parse_double(b".5"), Some(0.5));
        assert_eq!(parse_double(b"5."), Some(5.0));
        assert_eq!(parse_double(b"4.9e-324"), Some(5e-324));
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"nan",
            b"1e999",
            b"1e-400",
            b"abc",
            b"1\0",
            b"e5",
            b".",
        ] {
            assert_eq!(
                parse_double(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_double(b"1e"), None);
        assert_eq!(strtod(b"1e"), (1.0, 1, false));
        assert_eq!(strtod(b"0x"), (0.0, 1, false));
    }

    #[test]
    fn score_bounds_parse_as_redis() {
        assert_eq!(parse_score_bound(b"(1.5"), Some((1.5, true)));
        assert_eq!(parse_score_bound(b"-inf"), Some((f64::NEG_INFINITY, false)));
        assert_eq!(parse_score_bound(b""), Some((0.0, false)));
        assert_eq!(parse_score_bound(b"("), Some((0.0, true)));
        assert_eq!(parse_score_bound(b" 1"), Some((1.0, false)));
        assert_eq!(parse_score_bound(b"1e999"), Some((f64::INFINITY, false)));
        assert_eq!(parse_score_bound(b"1\0x"), Some((1.0, false)));
        assert_eq!(parse_score_bound(b"1 "), None);
        assert_eq!(parse_score_bound(b"nan"), None);
        assert_eq!(parse_score_bound(b"x"), None);
    }
}
