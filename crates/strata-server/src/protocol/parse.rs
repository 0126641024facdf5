//! The request codec: RESP2 multibulk requests and inline commands, incrementally, as Redis's
//! `processMultibulkBuffer` / `processInlineBuffer` (networking.c) parse them.
//!
//! Hand-written rather than taken from a crate because its subject is the limits: every
//! length read from the network is checked against its limit *before* anything is allocated
//! for it (no crate we know of does so for all of multibulk count, bulk length, inline line
//! and unauthenticated sizes), and the error texts must be Redis's own.
//!
//! The parser keeps Redis's state between reads (arguments still expected, length of the bulk
//! being read), so a request arriving one byte at a time costs no re-parsing, and pipelines of
//! any depth come out one command per call to [`Parser::next`]. Argument bytes are split off
//! the read buffer without copying.

use bytes::{Buf, Bytes, BytesMut};

/// Longest inline request, and longest multibulk / bulk count line (Redis's
/// `PROTO_INLINE_MAX_SIZE`).
pub const INLINE_MAX_BYTES: usize = 64 * 1024;
/// Most arguments in one multibulk request. Redis 6 rejected more than 1024*1024; Redis 7
/// allows up to `INT_MAX`. We keep the older bound: a million arguments is already a 16 MB
/// vector of argument handles before a single byte of them has arrived.
pub const MULTIBULK_MAX: i64 = 1024 * 1024;
/// Arguments an unauthenticated client may send in one request (Redis 7, CVE-2021-32675).
pub const UNAUTH_MULTIBULK_MAX: i64 = 10;
/// Largest argument of an unauthenticated client (Redis 7, CVE-2021-32675).
pub const UNAUTH_BULK_MAX: i64 = 16 * 1024;
/// Capacity reserved up front for a request's arguments, whatever count it announces.
const ARGV_PREALLOC: usize = 1024;

/// Limits the parser enforces; `authenticated` changes between requests (AUTH, HELLO).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `proto-max-bulk-len`.
    pub max_bulk_bytes: i64,
    /// False while a password is set and the client has not authenticated.
    pub authenticated: bool,
}

/// A protocol error: the text Redis replies with (after `-ERR `); the connection is closed
/// after the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(msg: impl Into<String>) -> Self {
        ProtocolError(format!("Protocol error: {}", msg.into()))
    }
}

/// Incremental request parser (one per connection).
#[derive(Debug, Default)]
pub struct Parser {
    /// Arguments still expected by the multibulk request being read (0: between requests).
    multibulk_left: usize,
    /// Length of the bulk being read, once its `$len` line has been parsed.
    bulk_len: Option<usize>,
    argv: Vec<Bytes>,
}

fn find(buf: &[u8], b: u8) -> Option<usize> {
    buf.iter().position(|&c| c == b)
}

/// Redis's `string2ll`: optional '-', digits, no leading zeros or '+', fits in i64.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = i64::from(c - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

impl Parser {
    pub fn new() -> Self {
        Parser::default()
    }

    /// Parses the next complete request from `buf`, consuming its bytes. `Ok(None)`: more
    /// bytes are needed. An empty request (`*0`, a blank inline line) is skipped.
    pub fn next(
        &mut self,
        buf: &mut BytesMut,
        limits: Limits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            if self.multibulk_left == 0 {
                if buf.is_empty() {
                    return Ok(None);
                }
                if buf[0] != b'*' {
                    match self.inline(buf)? {
                        Some(argv) if argv.is_empty() => continue,
                        other => return Ok(other),
                    }
                }
                match self.multibulk_header(buf, limits)? {
                    None => return Ok(None),
                    Some(0) => continue,
                    Some(n) => {
                        self.multibulk_left = n;
                        self.argv = Vec::with_capacity(n.min(ARGV_PREALLOC));
                    }
                }
            }
            return self.bulks(buf, limits);
        }
    }

    /// `*<count>\r\n`: `Some(count)` once the line is complete.
    fn multibulk_header(
        &mut self,
        buf: &mut BytesMut,
        limits: Limits,
    ) -> Result<Option<usize>, ProtocolError> {
        let Some(cr) = find(buf, b'\r') else {
            if buf.len() > INLINE_MAX_BYTES {
                return Err(ProtocolError::new("too big mbulk count string"));
            }
            return Ok(None);
        };
        if cr + 1 >= buf.len() {
            return Ok(None); // the '\n' has not arrived yet
        }
        let n = parse_i64(&buf[1..cr]);
        let n = match n {
            Some(n) if n <= MULTIBULK_MAX => n,
            _ => return Err(ProtocolError::new("invalid multibulk length")),
        };
        if n > UNAUTH_MULTIBULK_MAX && !limits.authenticated {
            return Err(ProtocolError::new("unauthenticated multibulk length"));
        }
        buf.advance(cr + 2);
        Ok(Some(n.max(0) as usize))
    }

    /// The bulks of the current multibulk request.
    fn bulks(
        &mut self,
        buf: &mut BytesMut,
        limits: Limits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        while self.multibulk_left > 0 {
            let len = match self.bulk_len {
                Some(len) => len,
                None => {
                    let Some(cr) = find(buf, b'\r') else {
                        if buf.len() > INLINE_MAX_BYTES {
                            return Err(ProtocolError::new("too big bulk count string"));
                        }
                        return Ok(None);
                    };
                    if cr + 1 >= buf.len() {
                        return Ok(None);
                    }
                    if buf[0] != b'$' {
                        return Err(ProtocolError::new(format!(
                            "expected '$', got '{}'",
                            char::from(buf[0])
                        )));
                    }
                    let len = match parse_i64(&buf[1..cr]) {
                        Some(l) if l >= 0 && l <= limits.max_bulk_bytes => l,
                        _ => return Err(ProtocolError::new("invalid bulk length")),
                    };
                    if len > UNAUTH_BULK_MAX && !limits.authenticated {
                        return Err(ProtocolError::new("unauthenticated bulk length"));
                    }
                    buf.advance(cr + 2);
                    let len = len as usize;
                    self.bulk_len = Some(len);
                    len
                }
            };
            // The bulk and its CRLF must be buffered; the buffer itself is bounded by the
            // connection's query buffer limit, so nothing is reserved for `len` here.
            if buf.len() < len + 2 {
                return Ok(None);
            }
            let arg = buf.split_to(len).freeze();
            buf.advance(2); // Redis does not check that these are "\r\n" either.
            self.argv.push(arg);
            self.bulk_len = None;
            self.multibulk_left -= 1;
        }
        Ok(Some(std::mem::take(&mut self.argv)))
    }

    /// An inline command: one line, split by Redis's `sdssplitargs` rules.
    fn inline(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        // Redis finds the newline with strchr, which stops at a NUL byte: a NUL before the
        // newline leaves the request incomplete until it is too big.
        let upto = find(buf, 0).unwrap_or(buf.len());
        let Some(nl) = find(&buf[..upto], b'\n') else {
            if buf.len() > INLINE_MAX_BYTES {
                return Err(ProtocolError::new("too big inline request"));
            }
            return Ok(None);
        };
        if nl > INLINE_MAX_BYTES {
            return Err(ProtocolError::new("too big inline request"));
        }
        let end = if nl > 0 && buf[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        let argv = split_args(&buf[..end])
            .ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))?;
        buf.advance(nl + 1);
        Ok(Some(argv.into_iter().map(Bytes::from).collect()))
    }
}

fn is_space(c: u8) -> bool {
    // C's isspace in the "C" locale.
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Redis's `sdssplitargs`: whitespace-separated arguments; "double quotes" with `\xHH`,
/// `\n \r \t \b \a` and `\<c>` escapes; 'single quotes' with `\'`; a closing quote must be
/// followed by whitespace or the end. `None` on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // A C string: a NUL byte ends the line (and must not start an empty argument forever).
    let line = &line[..find(line, 0).unwrap_or(line.len())];
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && hex_val(line[i + 2]).is_some()
                    && hex_val(line[i + 3]).is_some()
                {
                    let hi = hex_val(line[i + 2]).unwrap_or(0);
                    let lo = hex_val(line[i + 3]).unwrap_or(0);
                    cur.push(hi * 16 + lo);
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        o => o,
                    });
                } else if c == b'"' {
                    // The closing quote must be followed by a space or nothing.
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        break;
                    }
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: Limits = Limits {
        max_bulk_bytes: 512 * 1024 * 1024,
        authenticated: true,
    };
    const UNAUTH: Limits = Limits {
        max_bulk_bytes: 512 * 1024 * 1024,
        authenticated: false,
    };

    /// Parses everything in `input`, returning the requests and the error, if any.
    fn parse_all(input: &[u8], limits: Limits) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
        let mut p = Parser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        loop {
            match p.next(&mut buf, limits) {
                Ok(Some(argv)) => out.push(argv.iter().map(|a| a.to_vec()).collect()),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e.0)),
            }
        }
    }

    /// Feeds `input` one byte at a time.
    fn parse_bytewise(input: &[u8], limits: Limits) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
        let mut p = Parser::new();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for &b in input {
            buf.extend_from_slice(&[b]);
            loop {
                match p.next(&mut buf, limits) {
                    Ok(Some(argv)) => out.push(argv.iter().map(|a| a.to_vec()).collect()),
                    Ok(None) => break,
                    Err(e) => return (out, Some(e.0)),
                }
            }
        }
        (out, None)
    }

    fn args(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_and_pipeline() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n";
        let want = vec![args(&["GET", "k"]), args(&["SET", "k", ""])];
        assert_eq!(parse_all(input, OPEN), (want.clone(), None));
        assert_eq!(parse_bytewise(input, OPEN), (want, None));
    }

    #[test]
    fn binary_bulk_with_crlf_inside() {
        let input = b"*2\r\n$4\r\nECHO\r\n$4\r\n\r\n\x00\xff\r\n";
        let (reqs, err) = parse_bytewise(input, OPEN);
        assert_eq!(err, None);
        assert_eq!(reqs[0][1], b"\r\n\x00\xff");
    }

    #[test]
    fn empty_requests_are_skipped() {
        let (reqs, err) = parse_all(b"*0\r\n*-1\r\n\r\n   \r\nPING\r\n", OPEN);
        assert_eq!((reqs, err), (vec![args(&["PING"])], None));
    }

    #[test]
    fn inline_commands_and_quoting() {
        let (reqs, err) =
            parse_bytewise(b"SET k \"a b\\x41\\n\" 'it\\'s'\r\nGET k\nPING\r\n", OPEN);
        assert_eq!(err, None);
        assert_eq!(
            reqs,
            vec![
                vec![
                    b"SET".to_vec(),
                    b"k".to_vec(),
                    b"a bA\n".to_vec(),
                    b"it's".to_vec()
                ],
                args(&["GET", "k"]),
                args(&["PING"]),
            ]
        );
    }

    #[test]
    fn split_args_matches_sdssplitargs() {
        assert_eq!(split_args(b"  a  b ").unwrap(), args(&["a", "b"]));
        assert_eq!(split_args(b"a\"b c\"").unwrap(), args(&["ab c"]));
        assert_eq!(split_args(b"\"\"").unwrap(), args(&[""]));
        assert_eq!(split_args(b"\"\\xzz\"").unwrap(), args(&["xzz"]));
        assert_eq!(split_args(b"\"a\"b"), None);
        assert_eq!(split_args(b"'a'b"), None);
        assert_eq!(split_args(b"\"abc"), None);
        assert_eq!(split_args(b"'abc"), None);
        assert_eq!(split_args(b"").unwrap(), Vec::<Vec<u8>>::new());
        // A NUL ends the line, as in C (this used to loop forever).
        assert_eq!(split_args(b"ECHO a\0b").unwrap(), args(&["ECHO", "a"]));
        assert_eq!(split_args(b"\"a\0b\""), None);
    }

    #[test]
    fn nul_before_the_newline_leaves_an_inline_request_incomplete() {
        // Redis looks for the newline with strchr, which stops at the NUL.
        assert_eq!(parse_all(b"ECHO a\0b\r\nPING\r\n", OPEN), (vec![], None));
        let (reqs, err) = parse_all(b"PING\r\nECHO a\0b\r\n", OPEN);
        assert_eq!((reqs.len(), err), (1, None));
        let mut big = b"ECHO a\0b\r\n".to_vec();
        big.resize(INLINE_MAX_BYTES + 100, b'x');
        assert_eq!(
            parse_all(&big, OPEN).1.as_deref(),
            Some("Protocol error: too big inline request")
        );
    }

    #[test]
    fn unbalanced_quotes() {
        let (reqs, err) = parse_all(b"PING\r\nSET k \"v\r\n", OPEN);
        assert_eq!(reqs, vec![args(&["PING"])]);
        assert_eq!(
            err.as_deref(),
            Some("Protocol error: unbalanced quotes in request")
        );
    }

    #[test]
    fn protocol_errors_have_redis_texts() {
        let cases: &[(&[u8], &str)] = &[
            (b"*x\r\n", "Protocol error: invalid multibulk length"),
            (b"*1048577\r\n", "Protocol error: invalid multibulk length"),
            (
                b"*99999999999999999999\r\n",
                "Protocol error: invalid multibulk length",
            ),
            (b"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"),
            (b"*1\r\n$abc\r\n", "Protocol error: invalid bulk length"),
            (
                b"*1\r\n$536870913\r\n",
                "Protocol error: invalid bulk length",
            ),
            (b"*1\r\nx3\r\n", "Protocol error: expected '$', got 'x'"),
            (b"*1\r\n:3\r\n", "Protocol error: expected '$', got ':'"),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse_all(input, OPEN).1.as_deref(),
                Some(*want),
                "{input:?}"
            );
            assert_eq!(
                parse_bytewise(input, OPEN).1.as_deref(),
                Some(*want),
                "{input:?}"
            );
        }
    }

    #[test]
    fn too_big_lines() {
        let mut inline = vec![b'a'; INLINE_MAX_BYTES + 1];
        assert_eq!(
            parse_all(&inline, OPEN).1.as_deref(),
            Some("Protocol error: too big inline request")
        );
        inline.extend_from_slice(b"\r\n");
        assert_eq!(
            parse_all(&inline, OPEN).1.as_deref(),
            Some("Protocol error: too big inline request")
        );
        let mut mb = b"*".to_vec();
        mb.extend(vec![b'1'; INLINE_MAX_BYTES + 1]);
        assert_eq!(
            parse_all(&mb, OPEN).1.as_deref(),
            Some("Protocol error: too big mbulk count string")
        );
        let mut bulk = b"*1\r\n$".to_vec();
        bulk.extend(vec![b'1'; INLINE_MAX_BYTES + 1]);
        assert_eq!(
            parse_all(&bulk, OPEN).1.as_deref(),
            Some("Protocol error: too big bulk count string")
        );
    }

    #[test]
    fn huge_announced_lengths_allocate_nothing() {
        // A client announcing the maximum but sending nothing more: the parser waits,
        // having reserved only its small argument vector.
        let mut p = Parser::new();
        let mut buf = BytesMut::from(&b"*1048576\r\n$536870912\r\n"[..]);
        assert_eq!(p.next(&mut buf, OPEN), Ok(None));
        assert!(p.argv.capacity() <= ARGV_PREALLOC);
        assert!(buf.capacity() < 1024);
    }

    #[test]
    fn bulk_limit_follows_config() {
        let small = Limits {
            max_bulk_bytes: 3,
            authenticated: true,
        };
        assert_eq!(parse_all(b"*1\r\n$3\r\nabc\r\n", small).1, None);
        assert_eq!(
            parse_all(b"*1\r\n$4\r\nabcd\r\n", small).1.as_deref(),
            Some("Protocol error: invalid bulk length")
        );
    }

    #[test]
    fn unauthenticated_limits() {
        let ten = format!("*10\r\n{}", "$1\r\na\r\n".repeat(10));
        assert_eq!(parse_all(ten.as_bytes(), UNAUTH).1, None);
        assert_eq!(
            parse_all(b"*11\r\n", UNAUTH).1.as_deref(),
            Some("Protocol error: unauthenticated multibulk length")
        );
        assert_eq!(parse_all(b"*11\r\n", OPEN).1, None);
        let ok = format!("*1\r\n$16384\r\n{}\r\n", "a".repeat(16384));
        assert_eq!(parse_all(ok.as_bytes(), UNAUTH).1, None);
        assert_eq!(
            parse_all(b"*1\r\n$16385\r\n", UNAUTH).1.as_deref(),
            Some("Protocol error: unauthenticated bulk length")
        );
        assert_eq!(
            parse_bytewise(b"*1\r\n$16385\r\n", UNAUTH).1.as_deref(),
            Some("Protocol error: unauthenticated bulk length")
        );
    }

    #[test]
    fn requests_before_an_error_are_returned() {
        let (reqs, err) = parse_bytewise(b"PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n+x\r\n", OPEN);
        assert_eq!(reqs, vec![args(&["PING"]), args(&["PING"])]);
        assert_eq!(
            err.as_deref(),
            Some("Protocol error: expected '$', got '+'")
        );
    }

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"01",
            b"+1",
            b"-",
            b"-0",
            b"1 ",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }
}
