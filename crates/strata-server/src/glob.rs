//! Redis's glob matching (`stringmatchlen` in util.c), used by KEYS, CONFIG GET and
//! COMMAND LIST: `*`, `?`, `[abc]`, `[^a-z]`, `\x` escapes; bytes, not characters.
//!
//! Layer: building block (imports no server module above the protocol).

/// True if `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, s, nocase, &mut skip_longer, 0)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

fn match_impl(mut p: &[u8], mut s: &[u8], nocase: bool, skip: &mut bool, depth: u32) -> bool {
    // Redis caps recursion the same way (a pattern of many stars cannot blow the stack).
    if depth > 1000 {
        return false;
    }
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_impl(&p[1..], s, nocase, skip, depth + 1) {
                        return true;
                    }
                    if *skip {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip = true;
                return false;
            }
            b'?' => s = &s[1..],
            b'[' => {
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut hit = false;
                loop {
                    if p.is_empty() {
                        // Unterminated class: Redis steps back onto the last byte.
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if p[0] == s[0] {
                            hit = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        // Redis compares `char`s: signed on x86, so bytes >= 0x80 sort
                        // below every ASCII byte in a range.
                        // Swapped before lowering, as Redis does.
                        let (mut lo, mut hi) = (p[0] as i8, p[2] as i8);
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        let low = |b: i8| {
                            if nocase {
                                (b as u8).to_ascii_lowercase() as i8
                            } else {
                                b
                            }
                        };
                        let (lo, hi, c) = (low(lo), low(hi), low(s[0] as i8));
                        if c >= lo && c <= hi {
                            hit = true;
                        }
                        p = &p[2..];
                    } else if eq(p[0], s[0], nocase) {
                        hit = true;
                    }
                    p = &p[1..];
                }
                if p.is_empty() {
                    // Keep the loop's "p points at the last byte" semantics.
                    p = b"]";
                }
                if not {
                    hit = !hit;
                }
                if !hit {
                    return false;
                }
                s = &s[1..];
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if !eq(p[0], s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if !eq(c, s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn ranges_compare_signed_chars() {
        // Redis's `char` is signed: 0xff is -1, below 'b', so [\xff-b] spans 0xff and
        // every byte up to 'b', and no byte from 'c' to 0x7f.
        assert!(matches(b"[\xff-b]", b"a", false));
        assert!(matches(b"[\xff-b]", b"\xff", false));
        assert!(!matches(b"[\xff-b]", b"n", false));
        assert!(!matches(b"[\xff-b]", b"\x80", false));
        assert!(matches(b"*[k\xff-b ", b"k0", false), "unterminated class");
        assert!(!matches(b"*[k\xff-b ", b"h?llo", false));
        assert!(!matches(b"[Z-a]", b"m", true), "swapped before lowering");
    }

    #[test]
    fn redis_glob_cases() {
        let yes: &[(&str, &str)] = &[
            ("*", "anything"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("h[b-a]llo", "hbllo"),
            ("h\\*llo", "h*llo"),
            ("user:*", "user:1"),
            ("*:1", "user:1"),
            ("a*b*c", "aXXbYYc"),
        ];
        for (p, s) in yes {
            assert!(matches(p.as_bytes(), s.as_bytes(), false), "{p} {s}");
        }
        let no: &[(&str, &str)] = &[
            ("h?llo", "hllo"),
            ("h[^e]llo", "hello"),
            ("h[ae]llo", "hillo"),
            ("h\\*llo", "hello"),
            ("user:*", "usr:1"),
            ("a*b*c", "aXXbYY"),
            ("", "a"),
            ("*", ""), // as in Redis; KEYS * special-cases "all keys"
        ];
        for (p, s) in no {
            assert!(!matches(p.as_bytes(), s.as_bytes(), false), "{p} {s}");
        }
        assert!(matches(b"HE*", b"hello", true));
        assert!(!matches(b"HE*", b"hello", false));
        assert!(matches(b"", b"", false));
    }
}
