//! The replica's side of the handshake as text (Redis's `syncWithMaster`): the master's
//! answers to PSYNC and the line that announces the RDB payload, parsed without I/O so that
//! they are tested alone; `link.rs` does the talking.

/// Length of a replication id and of the diskless transfer's end mark.
pub const ID_LEN: usize = 40;

/// What the master answered to PSYNC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PsyncReply {
    /// `+FULLRESYNC <replid> <offset>`: an RDB follows; the stream starts at `offset`.
    Full { replid: String, offset: u64 },
    /// `+CONTINUE [<new replid>]`: the stream resumes where the replica asked.
    Continue { replid: Option<String> },
    /// `-NOMASTERLINK`, `-LOADING`: the master cannot serve now; try again later.
    TryLater(String),
    /// Any other error (a master without PSYNC, a refusal).
    Error(String),
}

/// Why a line from the master is not what the protocol allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected reply from the master: {0}")]
pub struct HandshakeError(pub String);

fn quoted(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(&line[..line.len().min(128)]);
    format!("{s:?}")
}

fn valid_id(s: &str) -> bool {
    s.len() == ID_LEN && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The master's answer to PSYNC (one line, without its CRLF).
pub fn parse_psync_reply(line: &[u8]) -> Result<PsyncReply, HandshakeError> {
    let text = std::str::from_utf8(line).map_err(|_| HandshakeError(quoted(line)))?;
    if let Some(rest) = text.strip_prefix("+FULLRESYNC ") {
        let mut parts = rest.split(' ');
        let (Some(id), Some(off), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(HandshakeError(quoted(line)));
        };
        let offset = off.parse::<u64>().ok().filter(|_| valid_id(id));
        return match offset {
            Some(offset) => Ok(PsyncReply::Full {
                replid: id.to_string(),
                offset,
            }),
            None => Err(HandshakeError(quoted(line))),
        };
    }
    if text == "+CONTINUE" {
        return Ok(PsyncReply::Continue { replid: None });
    }
    if let Some(id) = text.strip_prefix("+CONTINUE ") {
        let id = id.trim();
        if !valid_id(id) {
            return Err(HandshakeError(quoted(line)));
        }
        return Ok(PsyncReply::Continue {
            replid: Some(id.to_string()),
        });
    }
    if let Some(e) = text.strip_prefix('-') {
        if e.starts_with("NOMASTERLINK") || e.starts_with("LOADING") {
            return Ok(PsyncReply::TryLater(e.to_string()));
        }
        return Ok(PsyncReply::Error(e.to_string()));
    }
    Err(HandshakeError(quoted(line)))
}

/// How the RDB payload is framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// `$<len>`: exactly `len` bytes follow.
    Sized(u64),
    /// `$EOF:<mark>`: bytes follow until the 40-byte mark (a diskless transfer).
    Marked([u8; ID_LEN]),
    /// `$STRATA-SNAPSHOT`: a Strata master's snapshot stream follows, ending with a frame
    /// of its own (`repl/frames.rs`); sent only to a replica that announced it.
    Snapshot,
}

/// The line that announces the payload (`$<len>` or `$EOF:<40 bytes>`, no CRLF); a bare
/// newline before it is the master's keepalive and is skipped by the caller.
pub fn parse_payload_header(line: &[u8]) -> Result<Payload, HandshakeError> {
    if line == crate::repl::frames::HEADER_LINE {
        return Ok(Payload::Snapshot);
    }
    if let Some(mark) = line.strip_prefix(b"$EOF:") {
        let mark: [u8; ID_LEN] = mark.try_into().map_err(|_| HandshakeError(quoted(line)))?;
        return Ok(Payload::Marked(mark));
    }
    if let Some(n) = line.strip_prefix(b"$") {
        let n = std::str::from_utf8(n)
            .ok()
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| HandshakeError(quoted(line)))?;
        return Ok(Payload::Sized(n));
    }
    if line.starts_with(b"-") {
        return Err(HandshakeError(format!(
            "error instead of the RDB: {}",
            quoted(line)
        )));
    }
    Err(HandshakeError(quoted(line)))
}

/// Finds a diskless transfer's end: bytes go through [`EofMark::feed`], which returns the
/// ones that are surely payload (all but the last 40 seen) and says when the last 40 are
/// the mark. Memory: the mark and a 40-byte window.
pub struct EofMark {
    mark: [u8; ID_LEN],
    /// The last bytes seen (at most [`ID_LEN`]), not yet known to be payload.
    tail: Vec<u8>,
}

impl EofMark {
    pub fn new(mark: [u8; ID_LEN]) -> EofMark {
        EofMark {
            mark,
            tail: Vec::with_capacity(2 * ID_LEN),
        }
    }

    /// Takes `data`; appends to `out` the bytes that are payload; true once the last 40
    /// bytes seen are the mark. The master sends nothing after the mark until the replica's
    /// first REPLCONF ACK (Redis's `repl_put_online_on_ack`), so the mark ends a read.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) -> bool {
        // Everything but the last ID_LEN bytes of tail+data is payload.
        let total = self.tail.len() + data.len();
        let keep = total.min(ID_LEN);
        let release = total - keep;
        let from_tail = release.min(self.tail.len());
        out.extend_from_slice(&self.tail[..from_tail]);
        self.tail.drain(..from_tail);
        let from_data = release - from_tail;
        out.extend_from_slice(&data[..from_data]);
        self.tail.extend_from_slice(&data[from_data..]);
        self.tail.len() == ID_LEN && self.tail[..] == self.mark[..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4894af000470ea2b8bd31e7d362775b060382e3f";

    #[test]
    fn psync_replies() {
        assert_eq!(
            parse_psync_reply(format!("+FULLRESYNC {ID} 1234").as_bytes()),
            Ok(PsyncReply::Full {
                replid: ID.to_string(),
                offset: 1234
            })
        );
        assert_eq!(
            parse_psync_reply(b"+CONTINUE"),
            Ok(PsyncReply::Continue { replid: None })
        );
        assert_eq!(
            parse_psync_reply(format!("+CONTINUE {ID}").as_bytes()),
            Ok(PsyncReply::Continue {
                replid: Some(ID.to_string())
            })
        );
        assert!(matches!(
            parse_psync_reply(b"-NOMASTERLINK Can't SYNC while not connected with my master"),
            Ok(PsyncReply::TryLater(_))
        ));
        assert!(matches!(
            parse_psync_reply(b"-LOADING Redis is loading the dataset in memory"),
            Ok(PsyncReply::TryLater(_))
        ));
        assert!(matches!(
            parse_psync_reply(b"-ERR unknown command 'PSYNC'"),
            Ok(PsyncReply::Error(_))
        ));
        for bad in [
            &b"+FULLRESYNC"[..],
            b"+FULLRESYNC abc 12",
            format!("+FULLRESYNC {ID}").as_bytes(),
            format!("+FULLRESYNC {ID} -1").as_bytes(),
            format!("+FULLRESYNC {ID} 1 2").as_bytes(),
            b"+CONTINUE xyz",
            b"+OK",
            b"\xff\xfe",
            b"",
        ] {
            assert!(parse_psync_reply(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn payload_headers() {
        assert_eq!(parse_payload_header(b"$175"), Ok(Payload::Sized(175)));
        assert_eq!(parse_payload_header(b"$0"), Ok(Payload::Sized(0)));
        let mark = [b'a'; ID_LEN];
        let mut line = b"$EOF:".to_vec();
        line.extend_from_slice(&mark);
        assert_eq!(parse_payload_header(&line), Ok(Payload::Marked(mark)));
        assert_eq!(
            parse_payload_header(b"$STRATA-SNAPSHOT"),
            Ok(Payload::Snapshot)
        );
        for bad in [
            &b"$EOF:short"[..],
            b"$STRATA-SNAPSHOTS",
            b"$strata-snapshot",
            b"$-1",
            b"$",
            b"$12x",
            b"+OK",
            b"-ERR no",
            b"",
        ] {
            assert!(parse_payload_header(bad).is_err(), "{bad:?}");
        }
    }

    /// The payload comes out exact whatever the read sizes, and the mark is found only at
    /// the end.
    #[test]
    fn eof_mark_in_every_split() {
        let mark = *b"0123456789012345678901234567890123456789";
        // A payload that contains most of the mark, to catch a scanner that matches early.
        let mut payload = b"REDIS0010...".to_vec();
        payload.extend_from_slice(&mark[..39]);
        payload.extend_from_slice(b"tail");
        let mut wire = payload.clone();
        wire.extend_from_slice(&mark);
        for chunk in 1..=wire.len() {
            let mut m = EofMark::new(mark);
            let mut out = Vec::new();
            let mut found = false;
            for (i, c) in wire.chunks(chunk).enumerate() {
                assert!(!found, "chunk {chunk}: data after the mark");
                found = m.feed(c, &mut out);
                let end = (i + 1) * chunk >= wire.len();
                assert_eq!(found, end, "chunk {chunk}, piece {i}");
            }
            assert_eq!(out, payload, "chunk {chunk}");
        }
    }
}
