//! The fixed header every bus message starts with (Redis's `clusterMsg` up to its `data`
//! union): 2256 bytes, integers big-endian (`docs/format/cluster-bus.md`, "Header").

use super::bitmap::SlotBitmap;
use super::BusError;
use std::fmt;

/// The signature: "Redis Cluster message bus".
pub const SIGNATURE: [u8; 4] = *b"RCmb";
/// The only protocol version Redis 7 speaks.
pub const PROTOCOL_VERSION: u16 = 1;
/// Bytes of the fixed header; every message is at least this long.
pub const HEADER_LEN: usize = 2256;
/// Bytes of a node name (a SHA-1 in hex).
pub const NAME_LEN: usize = 40;
/// Bytes of an IP address field (Redis's `NET_IP_STR_LEN`).
pub const IP_LEN: usize = 46;
/// Reserved bytes after the extension count.
pub const RESERVED_LEN: usize = 30;

/// Byte offsets of the header's fields (on the wire: Redis asserts them at compile time).
pub mod offset {
    pub const SIG: usize = 0;
    pub const TOTLEN: usize = 4;
    pub const VER: usize = 8;
    pub const PORT: usize = 10;
    pub const TYPE: usize = 12;
    pub const COUNT: usize = 14;
    pub const CURRENT_EPOCH: usize = 16;
    pub const CONFIG_EPOCH: usize = 24;
    pub const OFFSET: usize = 32;
    pub const SENDER: usize = 40;
    pub const MYSLOTS: usize = 80;
    pub const SLAVEOF: usize = 2128;
    pub const MYIP: usize = 2168;
    pub const EXTENSIONS: usize = 2214;
    pub const RESERVED: usize = 2216;
    pub const PPORT: usize = 2246;
    pub const CPORT: usize = 2248;
    pub const FLAGS: usize = 2250;
    pub const STATE: usize = 2252;
    pub const MFLAGS: usize = 2253;
    pub const DATA: usize = 2256;
}

/// `mflags[0]` bits.
pub mod mflag0 {
    /// The sending master paused its clients for a manual failover.
    pub const PAUSED: u8 = 1 << 0;
    /// Grant a failover vote even though the master is up (manual failover).
    pub const FORCEACK: u8 = 1 << 1;
    /// Ping extensions follow the gossip sections.
    pub const EXT_DATA: u8 = 1 << 2;
}

/// A node name as carried on the wire: 40 bytes, normally lowercase hex. The bus does not
/// validate names (Redis copies them as sent); [`NodeName::parse`] does, for names typed by
/// users or read from files. All zeros is the null name (a master's `slaveof`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeName(pub [u8; NAME_LEN]);

impl NodeName {
    /// The null name: no node.
    pub const NULL: NodeName = NodeName([0; NAME_LEN]);

    /// A name checked as Redis's `verifyClusterNodeId` does: exactly 40 characters from
    /// `a-z` and `0-9` (Redis generates lowercase hex, but accepts the wider set).
    pub fn parse(name: &[u8]) -> Result<NodeName, BusError> {
        let bad = || BusError::NodeName(String::from_utf8_lossy(name).into_owned());
        let arr: [u8; NAME_LEN] = name.try_into().map_err(|_| bad())?;
        if arr
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            Ok(NodeName(arr))
        } else {
            Err(bad())
        }
    }

    pub fn is_null(&self) -> bool {
        self.0 == [0; NAME_LEN]
    }

    pub fn as_bytes(&self) -> &[u8; NAME_LEN] {
        &self.0
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Debug for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeName({:?})", String::from_utf8_lossy(&self.0))
    }
}

/// A 46-byte IP address field: the text up to the first NUL; the bytes after it are kept
/// as sent (Redis copies the whole field).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpField(pub [u8; IP_LEN]);

impl IpField {
    /// All zeros: no address (a header's `myip` when no announce IP is configured).
    pub const EMPTY: IpField = IpField([0; IP_LEN]);

    /// A field holding `ip`, zero-filled; at most 45 bytes are kept, as Redis's copy does.
    pub fn new(ip: &str) -> IpField {
        let mut f = [0; IP_LEN];
        let n = ip.len().min(IP_LEN - 1);
        f[..n].copy_from_slice(&ip.as_bytes()[..n]);
        IpField(f)
    }

    /// The address bytes, up to the first NUL.
    pub fn text(&self) -> &[u8] {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(IP_LEN);
        &self.0[..end]
    }

    pub fn is_empty(&self) -> bool {
        self.0[0] == 0
    }
}

impl fmt::Debug for IpField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IpField({:?})", String::from_utf8_lossy(self.text()))
    }
}

/// The header's fields but the signature, length, version and type, which [`super::encode`]
/// writes from the message. For PING, PONG and MEET, `count` and `extensions` are the
/// body's gossip and extension counts (decode sets them, encode writes the body's); other
/// types carry them as sent (Redis ignores them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The sender's client port (TLS port when TLS is on).
    pub port: u16,
    pub count: u16,
    pub current_epoch: u64,
    /// The sender's configEpoch, or its master's if it is a replica.
    pub config_epoch: u64,
    /// Replication offset: a master's, or what a replica processed.
    pub offset: u64,
    pub sender: NodeName,
    /// The slots the sender serves, or its master's if it is a replica.
    pub myslots: SlotBitmap,
    /// The sender's master; [`NodeName::NULL`] if it is a master.
    pub slaveof: NodeName,
    /// The announced IP; empty: the receiver uses the connection's address.
    pub myip: IpField,
    pub extensions: u16,
    /// Unused by Redis 7.0 (zeros); kept as sent.
    pub reserved: [u8; RESERVED_LEN],
    /// The plaintext client port when `port` is the TLS port.
    pub pport: u16,
    /// The sender's cluster bus port.
    pub cport: u16,
    /// The sender's node flags ([`super::node`]).
    pub flags: u16,
    /// The cluster state as the sender sees it: 0 ok, 1 fail.
    pub state: u8,
    /// Message flags; `mflags[0]` bits are [`mflag0`].
    pub mflags: [u8; 3],
}

impl Header {
    /// A header from `sender` with every other field zero.
    pub fn new(sender: NodeName) -> Header {
        Header {
            port: 0,
            count: 0,
            current_epoch: 0,
            config_epoch: 0,
            offset: 0,
            sender,
            myslots: SlotBitmap::new(),
            slaveof: NodeName::NULL,
            myip: IpField::EMPTY,
            extensions: 0,
            reserved: [0; RESERVED_LEN],
            pport: 0,
            cport: 0,
            flags: 0,
            state: 0,
            mflags: [0; 3],
        }
    }

    /// Reads the fields after the type (the caller has checked signature, length and
    /// version); `cur` is at offset 14.
    pub(crate) fn decode(cur: &mut Cursor<'_>, port: u16) -> Result<Header, BusError> {
        Ok(Header {
            port,
            count: cur.u16()?,
            current_epoch: cur.u64()?,
            config_epoch: cur.u64()?,
            offset: cur.u64()?,
            sender: NodeName(cur.array()?),
            myslots: SlotBitmap::from_bytes(cur.take(super::bitmap::SLOT_BYTES)?)?,
            slaveof: NodeName(cur.array()?),
            myip: IpField(cur.array()?),
            extensions: cur.u16()?,
            reserved: cur.array()?,
            pport: cur.u16()?,
            cport: cur.u16()?,
            flags: cur.u16()?,
            state: cur.u8()?,
            mflags: cur.array()?,
        })
    }

    /// Appends the whole header; `count` and `extensions` are given by the caller (the
    /// body's for PING, PONG and MEET).
    pub(crate) fn encode(&self, out: &mut Vec<u8>, fixed: Fixed) {
        out.extend_from_slice(&SIGNATURE);
        out.extend_from_slice(&fixed.totlen.to_be_bytes());
        out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        out.extend_from_slice(&self.port.to_be_bytes());
        out.extend_from_slice(&fixed.msg_type.to_be_bytes());
        out.extend_from_slice(&fixed.count.to_be_bytes());
        out.extend_from_slice(&self.current_epoch.to_be_bytes());
        out.extend_from_slice(&self.config_epoch.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.sender.0);
        out.extend_from_slice(self.myslots.as_bytes());
        out.extend_from_slice(&self.slaveof.0);
        out.extend_from_slice(&self.myip.0);
        out.extend_from_slice(&fixed.extensions.to_be_bytes());
        out.extend_from_slice(&self.reserved);
        out.extend_from_slice(&self.pport.to_be_bytes());
        out.extend_from_slice(&self.cport.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.push(self.state);
        out.push(fixed.mflag0);
        out.extend_from_slice(&self.mflags[1..]);
    }
}

/// The header values [`Header::encode`] takes from the message rather than the header.
pub(crate) struct Fixed {
    pub totlen: u32,
    pub msg_type: u16,
    pub count: u16,
    pub extensions: u16,
    pub mflag0: u8,
}

/// Reads big-endian fields from a byte slice, refusing to read past its end.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { buf, pos }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], BusError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(BusError::Truncated {
                need: self.pos as u64 + n as u64,
                len: self.buf.len(),
            });
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], BusError> {
        let s = self.take(N)?;
        let mut a = [0; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, BusError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, BusError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, BusError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, BusError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_follow_redis_rule() {
        let ok = b"0123456789abcdef0123456789abcdef01234567";
        assert_eq!(NodeName::parse(ok).map(|n| n.0), Ok(*ok));
        // Redis accepts all of a-z, not only hex digits.
        assert!(NodeName::parse(b"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz").is_ok());
        for bad in [
            &b"0123456789abcdef0123456789abcdef0123456"[..],
            b"0123456789abcdef0123456789abcdef012345678",
            b"0123456789ABCDEF0123456789abcdef01234567",
            b"0123456789abcdef0123456789abcdef0123456-",
            b"",
        ] {
            assert!(
                matches!(NodeName::parse(bad), Err(BusError::NodeName(_))),
                "{bad:?}"
            );
        }
        assert!(NodeName::NULL.is_null());
        assert!(!NodeName(*ok).is_null());
    }

    #[test]
    fn ip_field_text_stops_at_nul() {
        let f = IpField::new("127.0.0.1");
        assert_eq!(f.text(), b"127.0.0.1");
        assert!(IpField::EMPTY.is_empty());
        let long = "x".repeat(60);
        assert_eq!(IpField::new(&long).text().len(), IP_LEN - 1);
        let mut raw = [b'9'; IP_LEN];
        raw[3] = 0;
        assert_eq!(IpField(raw).text(), b"999");
        assert_eq!(IpField([b'1'; IP_LEN]).text().len(), IP_LEN);
    }

    #[test]
    fn offsets_add_up() {
        assert_eq!(
            offset::MYSLOTS + super::super::bitmap::SLOT_BYTES,
            offset::SLAVEOF
        );
        assert_eq!(offset::MYIP + IP_LEN, offset::EXTENSIONS);
        assert_eq!(offset::RESERVED + RESERVED_LEN, offset::PPORT);
        assert_eq!(offset::MFLAGS + 3, HEADER_LEN);
        let mut out = Vec::new();
        let fixed = Fixed {
            totlen: 1,
            msg_type: 2,
            count: 3,
            extensions: 4,
            mflag0: 5,
        };
        Header::new(NodeName::NULL).encode(&mut out, fixed);
        assert_eq!(out.len(), HEADER_LEN);
        assert_eq!(&out[offset::EXTENSIONS..offset::EXTENSIONS + 2], &[0, 4]);
        assert_eq!(out[offset::MFLAGS], 5);
    }
}
