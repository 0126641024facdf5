//! The command stream after the RDB: requests parsed as a client's are (the connection's
//! `Parser`, with the server's bulk limit), each with the number of stream bytes it
//! covers, so that the replica's offset moves by exactly the bytes it has applied (Redis's
//! `reploff`; keepalive newlines between requests count with the request that follows).

use crate::protocol::parse::{Limits, Parser, ProtocolError};
use bytes::{Bytes, BytesMut};

/// Parses the stream's requests and counts their bytes.
#[derive(Default)]
pub struct StreamReader {
    parser: Parser,
    /// Bytes consumed from the buffer since the last request returned.
    pending: u64,
}

impl StreamReader {
    /// The next complete request in `buf` (its bytes consumed) and how many stream bytes it
    /// covers; `None` if more bytes are needed.
    pub fn next(
        &mut self,
        buf: &mut BytesMut,
        max_bulk_bytes: i64,
    ) -> Result<Option<(Vec<Bytes>, u64)>, ProtocolError> {
        let limits = Limits {
            max_bulk_bytes,
            authenticated: true,
        };
        let before = buf.len();
        let r = self.parser.next(buf, limits);
        self.pending += (before - buf.len()) as u64;
        match r? {
            Some(argv) => Ok(Some((argv, std::mem::take(&mut self.pending)))),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(argv: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", argv.len()).into_bytes();
        for a in argv {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        out
    }

    /// Offsets: each request covers its own bytes (and the newlines before it), whatever
    /// the read sizes, and the sum is the stream's length.
    #[test]
    fn offsets_are_stream_bytes_in_every_split() {
        let cmds: Vec<Vec<&str>> = vec![
            vec!["SELECT", "3"],
            vec!["SET", "k", "v"],
            vec!["PING"],
            vec!["RPUSH", "l", "a", "", "ccc"],
            vec!["REPLCONF", "GETACK", "*"],
        ];
        let mut wire = Vec::new();
        let mut sizes = Vec::new();
        for (i, c) in cmds.iter().enumerate() {
            let r = resp(c);
            let lead = if i == 2 { b"\n".to_vec() } else { Vec::new() };
            sizes.push((lead.len() + r.len()) as u64);
            wire.extend_from_slice(&lead);
            wire.extend_from_slice(&r);
        }
        for chunk in 1..=wire.len() {
            let mut s = StreamReader::default();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for c in wire.chunks(chunk) {
                buf.extend_from_slice(c);
                while let Some((argv, n)) = s.next(&mut buf, 1 << 20).unwrap() {
                    got.push((argv, n));
                }
            }
            assert_eq!(got.len(), cmds.len(), "chunk {chunk}");
            for (i, (argv, n)) in got.iter().enumerate() {
                let want: Vec<Bytes> = cmds[i].iter().map(|a| Bytes::from(a.to_string())).collect();
                assert_eq!(argv, &want, "chunk {chunk}");
                assert_eq!(*n, sizes[i], "chunk {chunk}, request {i}");
            }
            assert_eq!(got.iter().map(|g| g.1).sum::<u64>(), wire.len() as u64);
        }
    }

    #[test]
    fn oversized_and_malformed_requests_are_errors() {
        let mut s = StreamReader::default();
        let mut buf = BytesMut::from(&b"*1\r\n$100\r\n"[..]);
        assert!(s.next(&mut buf, 10).is_err());
        let mut s = StreamReader::default();
        let mut buf = BytesMut::from(&b"*1\r\n!3\r\nabc\r\n"[..]);
        assert!(s.next(&mut buf, 1 << 20).is_err());
    }
}
