//! INCRBYFLOAT's numbers as Redis has them: an x87 80-bit `long double` (64-bit mantissa),
//! read as glibc's `strtold` reads it and printed as `printf("%.17Lf")` prints it, then
//! trimmed (Redis's `string2ld` and `ld2string(.., LD_STR_HUMAN)` in util.c).
//!
//! Written here because Rust has no 80-bit float and f64 gives other digits: in Redis
//! `0.1 + 0.2` is "0.3" and `9223372036854775806 + 0` keeps all its digits. No crate offers
//! x87 arithmetic with glibc's conversions; the exact conversions need only a few
//! big-integer operations (below), all correctly rounded (ties to even) as glibc does.
//!
//! Layer: building block (imports no server module above the protocol).

use std::cmp::Ordering;

/// A finite long double: (-1)^neg × mant × 2^exp (zero has mant 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
}

/// What a string reads as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    Finite(LongDouble),
    /// "inf", "-infinity", ...: valid for Redis, but no sum with it is stored.
    Infinite,
}

/// Exponent of the smallest subnormal, 2^-16445.
const EXP_MIN: i64 = -16445;
/// Values must stay below 2^16384.
const BITS_MAX: i64 = 16384;
/// Redis's `MAX_LONG_DOUBLE_CHARS`: longer strings are not floats.
const MAX_CHARS: usize = 5 * 1024;

/// A non-negative big integer, little-endian 32-bit limbs without leading zero limbs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> i64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as i64 - 1) * 32 + (32 - top.leading_zeros()) as i64,
        }
    }

    /// self = self × m + a.
    fn mul_add(&mut self, m: u32, a: u32) {
        let mut carry = u64::from(a);
        for l in &mut self.0 {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    /// self /= d; returns the remainder.
    fn div(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let v = (rem << 32) | u64::from(*l);
            *l = (v / u64::from(d)) as u32;
            rem = v % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    fn shl(&mut self, n: i64) {
        if self.is_zero() || n == 0 {
            return;
        }
        let bits = (n % 32) as u32;
        if bits != 0 {
            let mut carry = 0u32;
            for l in &mut self.0 {
                let v = *l;
                *l = (v << bits) | carry;
                carry = v >> (32 - bits);
            }
            if carry != 0 {
                self.0.push(carry);
            }
        }
        self.0
            .splice(0..0, std::iter::repeat_n(0, (n / 32) as usize));
    }

    fn bit(&self, i: i64) -> bool {
        let limb = (i / 32) as usize;
        limb < self.0.len() && (self.0[limb] >> (i % 32)) & 1 == 1
    }

    /// Whether a bit below bit `i` is set.
    fn any_below(&self, i: i64) -> bool {
        let limb = (i / 32) as usize;
        for (j, &l) in self.0.iter().enumerate() {
            if j == limb {
                return l & ((1u32 << (i % 32)) - 1) != 0;
            }
            if l != 0 {
                return true;
            }
        }
        false
    }

    /// Bits `n..n + 64` as an integer.
    fn bits_from(&self, n: i64) -> u64 {
        (0..64).fold(0, |acc, k| acc | (u64::from(self.bit(n + k)) << k))
    }

    fn add(&mut self, o: &Big) {
        let n = self.0.len().max(o.0.len());
        self.0.resize(n, 0);
        let mut carry = 0u64;
        for i in 0..n {
            let v = u64::from(self.0[i]) + u64::from(*o.0.get(i).unwrap_or(&0)) + carry;
            self.0[i] = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    /// self -= o, for o <= self.
    fn sub(&mut self, o: &Big) {
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let v = i64::from(self.0[i]) - i64::from(*o.0.get(i).unwrap_or(&0)) - borrow;
            borrow = i64::from(v < 0);
            self.0[i] = (v + (borrow << 32)) as u32;
        }
        self.trim();
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn into_decimal(mut self) -> String {
        let mut chunks = Vec::new();
        while !self.is_zero() {
            chunks.push(self.div(1_000_000_000));
        }
        let mut s = chunks.pop().unwrap_or(0).to_string();
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

/// n × 2^exp (plus, if `sticky`, something positive below bit 0 of n: callers make n at
/// least 66 bits long then) rounded to a long double, ties to even; `None` on overflow.
fn round(neg: bool, n: &Big, exp: i64, sticky: bool) -> Option<LongDouble> {
    let shift = (n.bits() - 64).max(EXP_MIN - exp).max(0);
    let (mut mant, mut exp) = (n.bits_from(shift), exp + shift);
    if shift > 0 && n.bit(shift - 1) && (sticky || n.any_below(shift - 1) || mant & 1 == 1) {
        mant = match mant.checked_add(1) {
            Some(m) => m,
            None => {
                exp += 1;
                1 << 63
            }
        };
    }
    if mant != 0 && i64::from(64 - mant.leading_zeros()) + exp > BITS_MAX {
        return None;
    }
    Some(LongDouble { neg, mant, exp })
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Reads the digits of `base` at the front of `s` into `acc`: their count and the rest.
fn digits<'a>(mut s: &'a [u8], base: u32, acc: &mut Big) -> (usize, &'a [u8]) {
    let mut n = 0;
    while let Some(d) = s.first().and_then(|&c| (c as char).to_digit(base)) {
        if !(acc.is_zero() && d == 0) {
            acc.mul_add(base, d);
        }
        s = &s[1..];
        n += 1;
    }
    (n, s)
}

/// An exponent: optional sign and at least one decimal digit, saturated far beyond any
/// long double.
fn exponent(s: &[u8]) -> Option<(i64, &[u8])> {
    let (neg, s) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return None;
    }
    let v = s[..n]
        .iter()
        .fold(0i64, |v, &c| (v * 10 + i64::from(c - b'0')).min(1 << 40));
    Some((if neg { -v } else { v }, &s[n..]))
}

/// Redis's `string2ld`: the whole string must be a number `strtold` reads, with no leading
/// space, not NaN, and neither overflowing nor underflowing to zero.
pub fn parse(s: &[u8]) -> Option<Parsed> {
    if s.is_empty() || s.len() >= MAX_CHARS || is_c_space(s[0]) {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    if lower == b"inf" || lower == b"infinity" {
        return Some(Parsed::Infinite);
    }
    let hex = lower.starts_with(b"0x");
    let base = if hex { 16 } else { 10 };
    let mut n = Big(Vec::new());
    let (int_digits, rest) = digits(if hex { &body[2..] } else { body }, base, &mut n);
    let (frac_digits, rest) = match rest.first() {
        Some(b'.') => digits(&rest[1..], base, &mut n),
        _ => (0, rest),
    };
    if int_digits + frac_digits == 0 {
        return None;
    }
    let marker: &[u8] = if hex { b"pP" } else { b"eE" };
    let (e, rest) = match rest.first() {
        Some(c) if marker.contains(c) => exponent(&rest[1..])?,
        _ => (0, rest),
    };
    if !rest.is_empty() {
        return None;
    }
    if n.is_zero() {
        return Some(Parsed::Finite(LongDouble {
            neg,
            mant: 0,
            exp: 0,
        }));
    }
    let v = if hex {
        round(neg, &n, e - 4 * frac_digits as i64, false)?
    } else {
        let e10 = e - frac_digits as i64;
        // Far outside the range (about 1e-4951 to 1e4932): overflow or zero.
        let magnitude = e10 + n.bits() * 3 / 10;
        if magnitude > 5000 {
            return None;
        }
        if magnitude < -5000 {
            return None;
        }
        decimal(neg, n, e10)?
    };
    (v.mant != 0).then_some(Parsed::Finite(v))
}

/// n × 10^e10, correctly rounded.
fn decimal(neg: bool, mut n: Big, e10: i64) -> Option<LongDouble> {
    if e10 >= 0 {
        for _ in 0..e10 {
            n.mul_add(10, 0);
        }
        return round(neg, &n, 0, false);
    }
    // floor(n × 2^s / 10^k) with at least 66 bits, and whether anything was left over.
    let k = -e10;
    let s = (67 + (k * 3322 + 999) / 1000 - n.bits()).max(0);
    n.shl(s);
    let mut sticky = false;
    let mut left = k;
    while left > 0 {
        let step = left.min(9);
        sticky |= n.div(10u32.pow(step as u32)) != 0;
        left -= step;
    }
    round(neg, &n, -s, sticky)
}

impl LongDouble {
    /// self + o, rounded; `None` if it overflows.
    pub fn add(self, o: LongDouble) -> Option<LongDouble> {
        if o.mant == 0 {
            return Some(self);
        }
        if self.mant == 0 {
            return Some(o);
        }
        let exp = self.exp.min(o.exp);
        let mut a = Big::from_u64(self.mant);
        a.shl(self.exp - exp);
        let mut b = Big::from_u64(o.mant);
        b.shl(o.exp - exp);
        if self.neg == o.neg {
            a.add(&b);
            return round(self.neg, &a, exp, false);
        }
        match a.cmp(&b) {
            Ordering::Equal => Some(LongDouble {
                neg: false,
                mant: 0,
                exp: 0,
            }),
            Ordering::Greater => {
                a.sub(&b);
                round(self.neg, &a, exp, false)
            }
            Ordering::Less => {
                b.sub(&a);
                round(o.neg, &b, exp, false)
            }
        }
    }

    /// Redis's `ld2string(.., LD_STR_HUMAN)`: `%.17Lf`, trailing zeros and a trailing
    /// point removed, "-0" as "0".
    pub fn to_human(self) -> String {
        let digits = if self.exp >= 0 {
            let mut n = Big::from_u64(self.mant);
            n.shl(self.exp);
            n.into_decimal()
        } else {
            // round(mant × 10^17 / 2^s), ties to even; mant × 10^17 < 2^121.
            let x = u128::from(self.mant) * 10u128.pow(17);
            let s = -self.exp;
            let q = if s >= 128 {
                0
            } else {
                let (q, rem, half) = (x >> s, x & ((1 << s) - 1), 1u128 << (s - 1));
                q + u128::from(rem > half || (rem == half && q & 1 == 1))
            };
            let d = format!("{q:018}");
            let (int, frac) = d.split_at(d.len() - 17);
            let frac = frac.trim_end_matches('0');
            if frac.is_empty() {
                int.to_string()
            } else {
                format!("{int}.{frac}")
            }
        };
        if self.neg && digits != "0" {
            format!("-{digits}")
        } else {
            digits
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> Option<String> {
        let (Some(Parsed::Finite(a)), Some(Parsed::Finite(b))) =
            (parse(a.as_bytes()), parse(b.as_bytes()))
        else {
            panic!("not finite: {a} {b}");
        };
        a.add(b).map(LongDouble::to_human)
    }

    #[test]
    fn sums_print_as_redis_prints_them() {
        // Replies of redis-server 7.0.15 (x86-64) to SET k A, INCRBYFLOAT k B.
        assert_eq!(sum("0.1", "0.2").unwrap(), "0.3");
        assert_eq!(sum("10.5", "0.1").unwrap(), "10.6");
        assert_eq!(
            sum("9223372036854775806", "-0").unwrap(),
            "9223372036854775806"
        );
        assert_eq!(sum("5.0e3", "2.0e2").unwrap(), "5200");
        assert_eq!(sum("-1", "1").unwrap(), "0");
        assert_eq!(sum("-0.5", "0.25").unwrap(), "-0.25");
        assert_eq!(sum("1e-20", "0").unwrap(), "0");
        assert_eq!(sum("-1e-20", "0").unwrap(), "0");
        assert_eq!(sum("0x10", "0x1p-1").unwrap(), "16.5");
        assert_eq!(sum("1e30", "0").unwrap(), "1000000000000000000024696061952");
        assert_eq!(sum("3.0", "1e-2").unwrap(), "3.01");
        assert_eq!(
            sum("123456789.123456789", "0").unwrap(),
            "123456789.12345678899873747"
        );
        assert_eq!(sum("1", "0x.8").unwrap(), "1.5");
        assert_eq!(sum("1e-4940", "0").unwrap(), "0");
        let e400 = sum("1e400", "0").unwrap();
        assert!(e400.starts_with("10000000000000000000281880683947586514586453433629052"));
        assert!(e400.ends_with("4947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880"));
        assert_eq!(e400.len(), 401);
    }

    #[test]
    fn parsing_follows_strtold_and_string2ld() {
        for bad in [
            "", " 1", "1 ", "abc", "nan", "-nan", "1e", "e5", ".", "0x", "1e99999", "1e-99999",
            "--1",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        for inf in ["inf", "-inf", "Infinity", "+INF"] {
            assert_eq!(parse(inf.as_bytes()), Some(Parsed::Infinite), "{inf:?}");
        }
        for ok in [
            "1", "+3", ".5", "5.", "1E2", "0x1P3", "0x.8", "-0", "1e400", "0e-99999", "1e-4940",
        ] {
            assert!(
                matches!(parse(ok.as_bytes()), Some(Parsed::Finite(_))),
                "{ok:?}"
            );
        }
        assert_eq!(parse(&vec![b'1'; MAX_CHARS]), None);
    }

    #[test]
    fn overflow_is_reported() {
        let big = match parse(b"1.1e4932") {
            Some(Parsed::Finite(v)) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!(big.add(big), None);
    }
}
