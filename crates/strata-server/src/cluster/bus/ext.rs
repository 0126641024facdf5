//! Ping extensions: optional records after the gossip sections of PING, PONG and MEET,
//! present when `mflags[0]` has [`mflag0::EXT_DATA`](super::header::mflag0::EXT_DATA) and
//! counted by the header's `extensions`. Each is an 8-byte header (length of the whole
//! extension, big-endian u32; type, u16; unused u16) and data padded with zeros to a
//! multiple of 8 bytes.
//!
//! Redis 7.0 sends and reads only the hostname; 7.2 adds the human node name, forgotten
//! nodes and the shard id, which a 7.0 node logs as unknown and skips by length. All are
//! kept as sent ([`PingExt`]) and read through [`PingExt::view`].

use super::header::{NodeName, NAME_LEN};
use super::BusError;

/// Bytes of an extension's own header.
pub const EXT_HEADER_LEN: usize = 8;

/// Extension types (on the wire: do not renumber).
pub mod ext_type {
    /// The announced hostname, NUL-terminated (Redis 7.0).
    pub const HOSTNAME: u16 = 0;
    /// The announced human-readable node name, NUL-terminated (Redis 7.2).
    pub const HUMAN_NODENAME: u16 = 1;
    /// A node the sender forgot: its name and the seconds left of its ban (Redis 7.2).
    pub const FORGOTTEN_NODE: u16 = 2;
    /// The sender's shard id, 40 bytes (Redis 7.2).
    pub const SHARD_ID: u16 = 3;
}

/// One extension as sent: its type, the unused 16 bits, and its data with the padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PingExt {
    pub ext_type: u16,
    /// Unused by Redis (zero); kept as sent.
    pub reserved: u16,
    /// The data after the 8-byte header, padding included (decoded data is a multiple of 8
    /// bytes; encode pads other lengths with zeros).
    pub data: Vec<u8>,
}

/// What an extension says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExtView<'a> {
    /// The hostname, up to its NUL; empty means no hostname.
    Hostname(&'a [u8]),
    HumanNodename(&'a [u8]),
    /// A forgotten node and the seconds its ban has left.
    ForgottenNode {
        name: NodeName,
        ttl_secs: u64,
    },
    ShardId(NodeName),
    /// A type this codec does not know; skipped as Redis does.
    Unknown(u16),
}

fn padded(n: usize) -> usize {
    n.div_ceil(8) * 8
}

impl PingExt {
    fn text(ext_type: u16, text: &[u8]) -> Result<PingExt, BusError> {
        if text.contains(&0) {
            return Err(BusError::ExtensionText);
        }
        let mut data = text.to_vec();
        data.resize(padded(text.len() + 1), 0);
        Ok(PingExt {
            ext_type,
            reserved: 0,
            data,
        })
    }

    /// The hostname extension as Redis writes it: the name, a NUL, zeros to 8 bytes.
    pub fn hostname(name: &[u8]) -> Result<PingExt, BusError> {
        Self::text(ext_type::HOSTNAME, name)
    }

    pub fn human_nodename(name: &[u8]) -> Result<PingExt, BusError> {
        Self::text(ext_type::HUMAN_NODENAME, name)
    }

    pub fn forgotten_node(name: NodeName, ttl_secs: u64) -> PingExt {
        let mut data = name.0.to_vec();
        data.extend_from_slice(&ttl_secs.to_be_bytes());
        PingExt {
            ext_type: ext_type::FORGOTTEN_NODE,
            reserved: 0,
            data,
        }
    }

    pub fn shard_id(id: NodeName) -> PingExt {
        PingExt {
            ext_type: ext_type::SHARD_ID,
            reserved: 0,
            data: id.0.to_vec(),
        }
    }

    /// Bytes of the whole extension, header included.
    pub fn encoded_len(&self) -> usize {
        EXT_HEADER_LEN + padded(self.data.len())
    }

    /// Reads the extension's fields. The message decoder checked what Redis 7.0 checks
    /// (lengths, the hostname's NUL); the 7.2 types are checked here, for the fields they
    /// need.
    pub fn view(&self) -> Result<ExtView<'_>, BusError> {
        let need = |need: usize| {
            if self.data.len() < need {
                Err(BusError::ExtensionData {
                    ext_type: self.ext_type,
                    len: self.data.len(),
                    need,
                })
            } else {
                Ok(())
            }
        };
        let upto_nul = |d: &'_ [u8]| -> usize { d.iter().position(|&b| b == 0).unwrap_or(d.len()) };
        Ok(match self.ext_type {
            ext_type::HOSTNAME => ExtView::Hostname(&self.data[..upto_nul(&self.data)]),
            ext_type::HUMAN_NODENAME => ExtView::HumanNodename(&self.data[..upto_nul(&self.data)]),
            ext_type::FORGOTTEN_NODE => {
                need(NAME_LEN + 8)?;
                let mut name = [0; NAME_LEN];
                name.copy_from_slice(&self.data[..NAME_LEN]);
                let mut ttl = [0; 8];
                ttl.copy_from_slice(&self.data[NAME_LEN..NAME_LEN + 8]);
                ExtView::ForgottenNode {
                    name: NodeName(name),
                    ttl_secs: u64::from_be_bytes(ttl),
                }
            }
            ext_type::SHARD_ID => {
                need(NAME_LEN)?;
                let mut name = [0; NAME_LEN];
                name.copy_from_slice(&self.data[..NAME_LEN]);
                ExtView::ShardId(NodeName(name))
            }
            other => ExtView::Unknown(other),
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let len = u32::try_from(self.encoded_len()).expect("a ping extension fits in 4 GiB");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&self.ext_type.to_be_bytes());
        out.extend_from_slice(&self.reserved.to_be_bytes());
        out.extend_from_slice(&self.data);
        out.resize(out.len() + padded(self.data.len()) - self.data.len(), 0);
    }
}

/// Reads `count` extensions from `buf` (the message after its gossip sections, to its
/// end), checking each as Redis 7.0.15's `clusterProcessPacket` does: at least an 8-byte
/// header left, a length that is a nonzero multiple of 8 and fits in what is left, and a
/// hostname that ends with NUL. Redis checks and sums lengths truncated to 16 bits but
/// steps over extensions by their full 32-bit length, so it accepts a message with an
/// extension of 64 KiB or more only when it then reads past it; such an extension is
/// refused here (Redis never sends one).
pub(crate) fn decode_all(
    buf: &[u8],
    count: u16,
    kind: &'static str,
) -> Result<Vec<PingExt>, BusError> {
    // Each extension takes at least 8 bytes: the count allocated is bounded by the input.
    let mut exts = Vec::with_capacity((count as usize).min(buf.len() / EXT_HEADER_LEN));
    let mut pos = 0usize;
    for index in 0..count {
        let remaining = (buf.len() - pos) as u64;
        if remaining < EXT_HEADER_LEN as u64 {
            return Err(BusError::ExtensionOverrun {
                kind,
                index,
                need: EXT_HEADER_LEN as u64,
                remaining,
            });
        }
        let h = &buf[pos..pos + EXT_HEADER_LEN];
        let len = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let ty = u16::from_be_bytes([h[4], h[5]]);
        let reserved = u16::from_be_bytes([h[6], h[7]]);
        if len < EXT_HEADER_LEN as u32 || !len.is_multiple_of(8) || len > u16::MAX.into() {
            return Err(BusError::ExtensionPadding { kind, index, len });
        }
        if u64::from(len) > remaining {
            return Err(BusError::ExtensionOverrun {
                kind,
                index,
                need: len.into(),
                remaining,
            });
        }
        let end = pos + len as usize;
        let data = &buf[pos + EXT_HEADER_LEN..end];
        if ty == ext_type::HOSTNAME && data.last() != Some(&0) {
            return Err(BusError::ExtensionUnterminated {
                kind,
                index,
                ext_type: ty,
            });
        }
        exts.push(PingExt {
            ext_type: ty,
            reserved,
            data: data.to_vec(),
        });
        pos = end;
    }
    Ok(exts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(exts: &[PingExt]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in exts {
            e.encode(&mut out);
        }
        out
    }

    #[test]
    fn hostname_is_padded_as_redis() {
        // "b.test": 6 bytes, NUL, one zero: 8 bytes of data, 16 in all.
        let e = PingExt::hostname(b"b.test").unwrap();
        assert_eq!(e.encoded_len(), 16);
        assert_eq!(
            raw(std::slice::from_ref(&e)),
            b"\0\0\0\x10\0\0\0\0b.test\0\0".to_vec()
        );
        assert_eq!(e.view(), Ok(ExtView::Hostname(b"b.test")));
        // 7 bytes + NUL fill 8 exactly; 8 bytes + NUL need 16.
        assert_eq!(PingExt::hostname(b"1234567").unwrap().encoded_len(), 16);
        assert_eq!(PingExt::hostname(b"12345678").unwrap().encoded_len(), 24);
        assert_eq!(PingExt::hostname(b"").unwrap().encoded_len(), 16);
        assert_eq!(PingExt::hostname(b"a\0b"), Err(BusError::ExtensionText));
    }

    #[test]
    fn typed_views_of_72_extensions() {
        let name = NodeName([b'c'; 40]);
        let f = PingExt::forgotten_node(name, 59);
        assert_eq!(f.encoded_len(), 56);
        assert_eq!(f.view(), Ok(ExtView::ForgottenNode { name, ttl_secs: 59 }));
        let s = PingExt::shard_id(name);
        assert_eq!(s.encoded_len(), 48);
        assert_eq!(s.view(), Ok(ExtView::ShardId(name)));
        let h = PingExt::human_nodename(b"cache-1").unwrap();
        assert_eq!(h.view(), Ok(ExtView::HumanNodename(b"cache-1")));
        let short = PingExt {
            ext_type: ext_type::FORGOTTEN_NODE,
            reserved: 0,
            data: vec![0; 40],
        };
        assert_eq!(
            short.view(),
            Err(BusError::ExtensionData {
                ext_type: 2,
                len: 40,
                need: 48
            })
        );
        let unknown = PingExt {
            ext_type: 77,
            reserved: 9,
            data: vec![1; 8],
        };
        assert_eq!(unknown.view(), Ok(ExtView::Unknown(77)));
    }

    #[test]
    fn decode_all_round_trips_and_checks() {
        let exts = vec![
            PingExt::hostname(b"alpha.strata.test").unwrap(),
            PingExt {
                ext_type: 1000,
                reserved: 3,
                data: vec![7; 16],
            },
            PingExt::shard_id(NodeName([b'9'; 40])),
        ];
        let buf = raw(&exts);
        assert_eq!(decode_all(&buf, 3, "ping"), Ok(exts.clone()));
        // Fewer declared than present is the caller's length check; more is an overrun.
        assert!(matches!(
            decode_all(&buf, 4, "ping"),
            Err(BusError::ExtensionOverrun {
                index: 3,
                need: 8,
                remaining: 0,
                ..
            })
        ));
        let mut bad = buf.clone();
        bad[3] = 12; // length 12: not a multiple of 8
        assert!(matches!(
            decode_all(&bad, 3, "pong"),
            Err(BusError::ExtensionPadding { len: 12, .. })
        ));
        bad[3] = 0; // length 0 would never advance
        assert!(matches!(
            decode_all(&bad, 1, "pong"),
            Err(BusError::ExtensionPadding { len: 0, .. })
        ));
        bad[3] = 8; // a hostname with no data has no NUL
        assert!(matches!(
            decode_all(&bad, 1, "meet"),
            Err(BusError::ExtensionUnterminated {
                index: 0,
                ext_type: 0,
                ..
            })
        ));
        let mut unterminated = raw(&[PingExt::hostname(b"1234567").unwrap()]);
        unterminated[15] = b'x';
        assert!(matches!(
            decode_all(&unterminated, 1, "ping"),
            Err(BusError::ExtensionUnterminated { .. })
        ));
        let mut long = buf.clone();
        long[0] = 1; // 16 MiB
        assert!(matches!(
            decode_all(&long, 1, "ping"),
            Err(BusError::ExtensionPadding { .. })
        ));
        // 64 KiB fits in the message but not in Redis's 16-bit sum: refused.
        let mut big = PingExt {
            ext_type: 9,
            reserved: 0,
            data: vec![0; 65536 - 8],
        };
        assert!(matches!(
            decode_all(&raw(std::slice::from_ref(&big)), 1, "ping"),
            Err(BusError::ExtensionPadding { len: 65536, .. })
        ));
        big.data.truncate(65528 - 8);
        let buf = raw(std::slice::from_ref(&big));
        assert_eq!(decode_all(&buf, 1, "ping"), Ok(vec![big]));
        assert!(matches!(
            decode_all(&buf[..buf.len() - 8], 1, "ping"),
            Err(BusError::ExtensionOverrun {
                need: 65528,
                remaining: 65520,
                ..
            })
        ));
    }
}
