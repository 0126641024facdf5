//! Reading the replies of the master's requests that the replica applied: whether an
//! EXEC's array holds an error (which stops replication, as any error reply does).

/// Whether a reply is an array (EXEC's) with an error among its elements.
pub fn exec_error(out: &[u8]) -> bool {
    let Some((n, mut pos)) = header(out, 0, b'*') else {
        return false;
    };
    for _ in 0..n {
        match out.get(pos) {
            Some(b'-') => return true,
            Some(_) => match skip(out, pos) {
                Some(next) => pos = next,
                None => return false,
            },
            None => return false,
        }
    }
    false
}

/// `<kind><integer>\r\n` at `pos`: the integer and the position after the line.
fn header(out: &[u8], pos: usize, kind: u8) -> Option<(i64, usize)> {
    if out.get(pos) != Some(&kind) {
        return None;
    }
    let end = pos + out.get(pos..)?.windows(2).position(|w| w == b"\r\n")?;
    let n = std::str::from_utf8(&out[pos + 1..end]).ok()?.parse().ok()?;
    Some((n, end + 2))
}

/// The position after the RESP2 reply at `pos`.
fn skip(out: &[u8], pos: usize) -> Option<usize> {
    let line_end = |p: usize| -> Option<usize> {
        Some(p + out.get(p..)?.windows(2).position(|w| w == b"\r\n")? + 2)
    };
    match out.get(pos)? {
        b'+' | b'-' | b':' => line_end(pos),
        b'$' => {
            let (n, p) = header(out, pos, b'$')?;
            Some(if n < 0 { p } else { p + n as usize + 2 })
        }
        b'*' => {
            let (n, mut p) = header(out, pos, b'*')?;
            for _ in 0..n.max(0) {
                p = skip(out, p)?;
            }
            Some(p)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_inside_exec_are_found() {
        assert!(exec_error(b"*2\r\n+OK\r\n-WRONGTYPE no\r\n"));
        assert!(!exec_error(b"*2\r\n+OK\r\n$3\r\n-AB\r\n"));
        assert!(exec_error(b"*3\r\n*1\r\n$2\r\n-X\r\n:1\r\n-ERR x\r\n"));
        assert!(!exec_error(b"*-1\r\n"));
        assert!(!exec_error(b"+OK\r\n"));
    }
}
