//! Gossip sections: what a PING, PONG or MEET tells about other nodes, 104 bytes each
//! (Redis's `clusterMsgDataGossip`), and how many of them a sender includes.

use super::header::{Cursor, IpField, NodeName};
use super::BusError;

/// Bytes of one gossip section.
pub const GOSSIP_LEN: usize = 104;

/// One node as the sender sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gossip {
    pub nodename: NodeName,
    /// When the sender last pinged the node, in seconds (Unix time, truncated to 32 bits).
    pub ping_sent: u32,
    /// When the sender last received its pong, in seconds.
    pub pong_received: u32,
    pub ip: IpField,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
    /// Unused by Redis 7.0 (zero); kept as sent.
    pub reserved: u16,
}

impl Gossip {
    pub(crate) fn decode(cur: &mut Cursor<'_>) -> Result<Gossip, BusError> {
        Ok(Gossip {
            nodename: NodeName(cur.array()?),
            ping_sent: cur.u32()?,
            pong_received: cur.u32()?,
            ip: IpField(cur.array()?),
            port: cur.u16()?,
            cport: cur.u16()?,
            flags: cur.u16()?,
            pport: cur.u16()?,
            reserved: cur.u16()?,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.nodename.0);
        out.extend_from_slice(&self.ping_sent.to_be_bytes());
        out.extend_from_slice(&self.pong_received.to_be_bytes());
        out.extend_from_slice(&self.ip.0);
        for v in [self.port, self.cport, self.flags, self.pport, self.reserved] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

/// How many healthy nodes a PING, PONG or MEET gossips about when the sender knows
/// `known_nodes` nodes (itself included), as Redis 7.0's `clusterSendPing`: a tenth of
/// them, at least 3, but never more than the nodes other than the sender and the receiver.
/// Nodes in PFAIL are added on top of this, all of them.
pub fn gossip_wanted(known_nodes: usize) -> usize {
    let fresh = known_nodes.saturating_sub(2);
    (known_nodes / 10).max(3).min(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gossip_section_is_104_bytes_big_endian() {
        let g = Gossip {
            nodename: NodeName([b'a'; 40]),
            ping_sent: 0x0102_0304,
            pong_received: 5,
            ip: IpField::new("10.0.0.1"),
            port: 6379,
            cport: 16379,
            flags: 0x11,
            pport: 7,
            reserved: 0,
        };
        let mut out = Vec::new();
        g.encode(&mut out);
        assert_eq!(out.len(), GOSSIP_LEN);
        assert_eq!(&out[40..44], &[1, 2, 3, 4]);
        assert_eq!(&out[94..96], &6379u16.to_be_bytes());
        assert_eq!(&out[96..98], &16379u16.to_be_bytes());
        let back = Gossip::decode(&mut Cursor::new(&out, 0)).unwrap();
        assert_eq!(back, g);
        assert!(Gossip::decode(&mut Cursor::new(&out[..103], 0)).is_err());
    }

    #[test]
    fn wanted_follows_redis() {
        assert_eq!(gossip_wanted(1), 0);
        assert_eq!(gossip_wanted(2), 0);
        assert_eq!(gossip_wanted(4), 2);
        assert_eq!(gossip_wanted(5), 3);
        assert_eq!(gossip_wanted(30), 3);
        assert_eq!(gossip_wanted(40), 4);
        assert_eq!(gossip_wanted(1000), 100);
    }
}
