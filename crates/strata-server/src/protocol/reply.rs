//! The reply builder: the only code that writes RESP type prefixes. Commands say what they
//! reply (a map, a set, a null, a double); the builder writes it in RESP2 or RESP3 as the
//! connection negotiated with `HELLO`, the way Redis's `addReplyMapLen`, `addReplyNull`,
//! `addReplyDouble`, `addReplyBool` and `addReplyVerbatim` (networking.c) do.

use bytes::{BufMut, BytesMut};

/// Protocol version of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Resp2,
    Resp3,
}

/// Replies of one connection, appended to its output buffer.
pub struct ReplyBuf {
    pub proto: Proto,
    out: BytesMut,
    /// Error replies written since the last [`ReplyBuf::take_errors`], and the codes of the
    /// first [`MAX_ERROR_CODES`] of them (for INFO commandstats and errorstats).
    errors: u32,
    error_codes: Vec<String>,
}

/// Error codes a builder keeps between two [`ReplyBuf::take_errors`].
const MAX_ERROR_CODES: usize = 16;

/// An error reply's code, as Redis's errorstats name it: its first word when a space comes
/// within the first 32 bytes, `ERR` otherwise.
pub fn error_code(msg: &[u8]) -> String {
    let head = &msg[..msg.len().min(32)];
    match head.iter().position(|&b| b == b' ') {
        Some(i) => String::from_utf8_lossy(&msg[..i]).into_owned(),
        None => "ERR".to_string(),
    }
}

impl ReplyBuf {
    pub fn new(proto: Proto) -> Self {
        ReplyBuf {
            proto,
            out: BytesMut::with_capacity(4096),
            errors: 0,
            error_codes: Vec::new(),
        }
    }

    /// A builder whose buffer starts at `capacity` bytes (a single command's reply).
    pub fn with_capacity(proto: Proto, capacity: usize) -> Self {
        ReplyBuf {
            proto,
            out: BytesMut::with_capacity(capacity),
            errors: 0,
            error_codes: Vec::new(),
        }
    }

    /// Appends replies built elsewhere (by a command run on a shard worker).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.put_slice(bytes);
    }

    /// The bytes written so far (taken by the connection to send).
    pub fn take(&mut self) -> BytesMut {
        self.out.split()
    }

    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Takes what was written after the first `at` bytes, leaving those (to rewrite some
    /// replies of a pipeline whose write failed).
    pub fn split_off(&mut self, at: usize) -> BytesMut {
        self.out.split_off(at)
    }

    /// Drops what was written after the first `len` bytes (CLIENT REPLY OFF / SKIP).
    pub fn truncate(&mut self, len: usize) {
        self.out.truncate(len);
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    fn line(&mut self, prefix: u8, body: &[u8]) {
        self.out.put_u8(prefix);
        self.out.put_slice(body);
        self.out.put_slice(b"\r\n");
    }

    fn len_line(&mut self, prefix: u8, n: usize) {
        // Formatted on the stack: a reply's lengths and integers cost no allocation.
        self.line(prefix, itoa::Buffer::new().format(n).as_bytes());
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.simple("OK");
    }

    /// A status reply (`+text`). Newlines would break the protocol; Redis replaces them.
    pub fn simple(&mut self, s: &str) {
        if s.bytes().any(|b| b == b'\r' || b == b'\n') {
            let clean = s.replace(['\r', '\n'], " ");
            self.line(b'+', clean.as_bytes());
        } else {
            self.line(b'+', s.as_bytes());
        }
    }

    /// An error reply; `msg` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    pub fn error(&mut self, msg: &str) {
        self.error_bytes(msg.as_bytes());
    }

    /// An error reply of any bytes (texts quoting a client's arguments), cleaned as Redis's
    /// `addReplyErrorFormat` does: newlines at the end removed, the others made spaces.
    pub fn error_bytes(&mut self, msg: &[u8]) {
        let end = msg
            .iter()
            .rposition(|&b| b != b'\r' && b != b'\n')
            .map_or(0, |i| i + 1);
        let clean: Vec<u8> = msg[..end]
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        self.line(b'-', &clean);
        self.errors = self.errors.saturating_add(1);
        if self.error_codes.len() < MAX_ERROR_CODES {
            self.error_codes.push(error_code(&clean));
        }
    }

    /// The number of error replies written since the last call, and their codes.
    /// Error replies written since the last [`ReplyBuf::take_errors`].
    pub fn error_count(&self) -> u32 {
        self.errors
    }

    pub fn take_errors(&mut self) -> (u32, Vec<String>) {
        (
            std::mem::take(&mut self.errors),
            std::mem::take(&mut self.error_codes),
        )
    }

    pub fn int(&mut self, n: i64) {
        self.line(b':', itoa::Buffer::new().format(n).as_bytes());
    }

    pub fn bulk(&mut self, b: &[u8]) {
        self.len_line(b'$', b.len());
        self.out.put_slice(b);
        self.out.put_slice(b"\r\n");
    }

    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        match self.proto {
            Proto::Resp2 => self.out.put_slice(b"$-1\r\n"),
            Proto::Resp3 => self.out.put_slice(b"_\r\n"),
        }
    }

    /// A missing array (e.g. a timed-out blocking pop): `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        match self.proto {
            Proto::Resp2 => self.out.put_slice(b"*-1\r\n"),
            Proto::Resp3 => self.out.put_slice(b"_\r\n"),
        }
    }

    pub fn opt_bulk(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => self.bulk(b),
            None => self.null(),
        }
    }

    pub fn array(&mut self, n: usize) {
        self.len_line(b'*', n);
    }

    /// A map of `n` pairs (the caller writes 2n elements): a flat array in RESP2.
    pub fn map(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.len_line(b'*', 2 * n),
            Proto::Resp3 => self.len_line(b'%', n),
        }
    }

    /// An out-of-band push of `n` elements (pub/sub messages and confirmations): an array
    /// in RESP2.
    pub fn push(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.len_line(b'*', n),
            Proto::Resp3 => self.len_line(b'>', n),
        }
    }

    /// A set of `n` elements: an array in RESP2.
    pub fn set(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.len_line(b'*', n),
            Proto::Resp3 => self.len_line(b'~', n),
        }
    }

    /// A double: a bulk string in RESP2, `,` in RESP3, both in Redis's `%.17g` form.
    pub fn double(&mut self, d: f64) {
        let s = format_double(d);
        match self.proto {
            Proto::Resp2 => self.bulk(s.as_bytes()),
            Proto::Resp3 => self.line(b',', s.as_bytes()),
        }
    }

    /// A number already printed (Redis's `addReplyHumanLongDouble`): a bulk string in
    /// RESP2, a `,` double in RESP3.
    pub fn double_text(&mut self, text: &str) {
        match self.proto {
            Proto::Resp2 => self.bulk(text.as_bytes()),
            Proto::Resp3 => self.line(b',', text.as_bytes()),
        }
    }

    /// A boolean: `:1`/`:0` in RESP2, `#t`/`#f` in RESP3.
    pub fn bool(&mut self, b: bool) {
        match self.proto {
            Proto::Resp2 => self.int(i64::from(b)),
            Proto::Resp3 => self.line(b'#', if b { b"t" } else { b"f" }),
        }
    }

    /// Text for humans (INFO, CLIENT LIST): a bulk string in RESP2, a verbatim string of
    /// format `txt` in RESP3.
    pub fn verbatim(&mut self, text: &[u8]) {
        match self.proto {
            Proto::Resp2 => self.bulk(text),
            Proto::Resp3 => {
                self.len_line(b'=', text.len() + 4);
                self.out.put_slice(b"txt:");
                self.out.put_slice(text);
                self.out.put_slice(b"\r\n");
            }
        }
    }
}

/// Redis's `%.17g` rendering of a double reply, with `inf`/`-inf`/`nan` spelled as Redis does.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        // As C's %g writes it (0/0 in Lua is a negative NaN on x86-64: "-nan").
        return if d.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // %.17g: 17 significant digits, exponent form outside 1e-5 ..= 1e17.
    let exp = if d == 0.0 {
        0
    } else {
        d.abs().log10().floor() as i32
    };
    if (-5..17).contains(&exp) {
        let decimals = (16 - exp).max(0) as usize;
        let s = format!("{d:.decimals$}");
        trim_fraction(&s)
    } else {
        let s = format!("{d:.16e}");
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!(
            "{}e{}{:02}",
            trim_fraction(mant),
            if e < 0 { '-' } else { '+' },
            e.abs()
        )
    }
}

fn trim_fraction(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(proto: Proto, f: impl FnOnce(&mut ReplyBuf)) -> Vec<u8> {
        let mut r = ReplyBuf::new(proto);
        f(&mut r);
        r.take().to_vec()
    }

    #[test]
    fn resp2_and_resp3_shapes() {
        assert_eq!(render(Proto::Resp2, |r| r.null()), b"$-1\r\n");
        assert_eq!(render(Proto::Resp3, |r| r.null()), b"_\r\n");
        assert_eq!(render(Proto::Resp2, |r| r.map(2)), b"*4\r\n");
        assert_eq!(render(Proto::Resp3, |r| r.map(2)), b"%2\r\n");
        assert_eq!(render(Proto::Resp3, |r| r.set(1)), b"~1\r\n");
        assert_eq!(render(Proto::Resp2, |r| r.bool(true)), b":1\r\n");
        assert_eq!(render(Proto::Resp3, |r| r.bool(false)), b"#f\r\n");
        assert_eq!(render(Proto::Resp2, |r| r.double(1.5)), b"$3\r\n1.5\r\n");
        assert_eq!(render(Proto::Resp3, |r| r.double(1.5)), b",1.5\r\n");
        assert_eq!(
            render(Proto::Resp3, |r| r.verbatim(b"ab")),
            b"=6\r\ntxt:ab\r\n"
        );
        assert_eq!(render(Proto::Resp2, |r| r.verbatim(b"ab")), b"$2\r\nab\r\n");
        assert_eq!(
            render(Proto::Resp2, |r| r.error("ERR a\r\nb")),
            b"-ERR a  b\r\n"
        );
    }

    #[test]
    fn doubles_as_percent_17g() {
        assert_eq!(format_double(0.0), "0");
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(-2.5e-7), "-2.4999999999999999e-07");
        assert_eq!(format_double(f64::INFINITY), "inf");
    }
}
