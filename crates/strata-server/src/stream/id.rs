//! Stream entry IDs (Redis's `streamID`): a 64-bit millisecond time and a 64-bit sequence,
//! ordered by time then sequence, and their textual forms as commands take them.

use std::fmt;

/// An entry ID. Its 16-byte big-endian form ([`StreamId::to_bytes`]) sorts as the IDs do,
/// which is why entry records are keyed by it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID (Redis's `streamIncrID`); `None` past the last possible one.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID (Redis's `streamDecrID`); `None` before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// Big-endian ms then seq: sorts as the IDs.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// `None` unless `b` holds at least 16 bytes (the rest is ignored).
    pub fn from_bytes(b: &[u8]) -> Option<StreamId> {
        let ms = u64::from_be_bytes(b.get(..8)?.try_into().ok()?);
        let seq = u64::from_be_bytes(b.get(8..16)?.try_into().ok()?);
        Some(StreamId { ms, seq })
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An ID as a command names it, before the stream it applies to is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedId {
    pub id: StreamId,
    /// False for `ms-*` (XADD: the sequence is generated).
    pub seq_given: bool,
}

/// Redis's `string2ull`: a decimal integer that fits 64 bits unsigned; a leading `+` or
/// spaces are accepted as `strtoull` does, a negative number is not.
fn parse_u64(s: &[u8]) -> Option<u64> {
    let t = std::str::from_utf8(s).ok()?;
    if let Ok(n) = t.parse::<i64>() {
        return u64::try_from(n).ok();
    }
    let t = t.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.is_empty() || !t.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    t.parse::<u64>().ok()
}

/// Redis's `streamGenericParseIDOrReply`: `ms-seq`, `ms` (the sequence is `missing_seq`),
/// and unless `strict` `-` (0-0) and `+` (the maximum); with `allow_auto_seq`, `ms-*`.
/// `None`: Redis's "Invalid stream ID" error.
pub fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_auto_seq: bool,
) -> Option<ParsedId> {
    if arg.len() > 127 {
        return None;
    }
    let given = |id| ParsedId {
        id,
        seq_given: true,
    };
    if !strict && arg.len() == 1 {
        match arg[0] {
            b'-' => return Some(given(StreamId::MIN)),
            b'+' => return Some(given(StreamId::MAX)),
            _ => {}
        }
    }
    match arg.iter().position(|&c| c == b'-') {
        None => Some(given(StreamId::new(parse_u64(arg)?, missing_seq))),
        Some(dash) => {
            let ms = parse_u64(&arg[..dash])?;
            let rest = &arg[dash + 1..];
            if allow_auto_seq && rest == b"*" {
                return Some(ParsedId {
                    id: StreamId::new(ms, 0),
                    seq_given: false,
                });
            }
            Some(given(StreamId::new(ms, parse_u64(rest)?)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_order_by_time_then_sequence_in_bytes_too() {
        let ids = [
            StreamId::new(0, 0),
            StreamId::new(0, 1),
            StreamId::new(0, u64::MAX),
            StreamId::new(1, 0),
            StreamId::new(256, 3),
            StreamId::MAX,
        ];
        for w in ids.windows(2) {
            assert!(w[0] < w[1]);
            assert!(w[0].to_bytes() < w[1].to_bytes());
            assert_eq!(StreamId::from_bytes(&w[1].to_bytes()), Some(w[1]));
            assert!(w[0].incr().unwrap() <= w[1]);
        }
        assert_eq!(StreamId::new(0, u64::MAX).incr(), Some(StreamId::new(1, 0)));
        assert_eq!(StreamId::new(1, 0).decr(), Some(StreamId::new(0, u64::MAX)));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(StreamId::MIN.decr(), None);
        assert_eq!(StreamId::new(5, 7).to_string(), "5-7");
        assert_eq!(StreamId::from_bytes(&[0; 15]), None);
    }

    #[test]
    fn ids_parse_as_redis_does() {
        let p = |s: &str| parse_id(s.as_bytes(), 0, false, false).map(|p| p.id);
        assert_eq!(p("5-3"), Some(StreamId::new(5, 3)));
        assert_eq!(p("5"), Some(StreamId::new(5, 0)));
        assert_eq!(parse_id(b"5", 9, false, false).unwrap().id.seq, 9);
        assert_eq!(p("-"), Some(StreamId::MIN));
        assert_eq!(p("+"), Some(StreamId::MAX));
        assert_eq!(parse_id(b"+", 0, true, false), None, "strict");
        assert_eq!(
            p("18446744073709551615-18446744073709551615"),
            Some(StreamId::MAX)
        );
        assert_eq!(p("18446744073709551616"), None);
        assert_eq!(p("+5-1"), Some(StreamId::new(5, 1)));
        for bad in ["", "x", "-1", "1-", "1-x", "1-2-3", "5-*", "1.5", "0x10"] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
        let auto = parse_id(b"5-*", 0, true, true).unwrap();
        assert_eq!((auto.id, auto.seq_given), (StreamId::new(5, 0), false));
        assert_eq!(parse_id(&[b'1'; 128], 0, false, false), None);
    }
}
