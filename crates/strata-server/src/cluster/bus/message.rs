//! Whole bus messages: the header, then a body by type. [`decode`] accepts exactly what
//! redis-server 7.0.15 accepts (its read handler's signature and minimum length, then
//! `clusterProcessPacket`'s version and per-type length checks) but for refusals of
//! messages Redis accepts and then reads out of bounds: lengths are summed in 64 bits
//! (Redis's 32-bit sums of PUBLISH and MODULE lengths can wrap), a nonzero extension count
//! without the extension-data flag is refused (Redis skips validating those extensions but
//! walks them when it processes the message), and so is an extension of 64 KiB or more
//! (Redis sums 16 bits of its length, steps over all 32).

use super::bitmap::{SlotBitmap, SLOT_BYTES};
use super::ext::{self, PingExt};
use super::gossip::{Gossip, GOSSIP_LEN};
use super::header::{mflag0, offset, Cursor, Fixed, Header, NodeName, HEADER_LEN, NAME_LEN};
use super::header::{PROTOCOL_VERSION, SIGNATURE};
use super::BusError;

/// Message types (on the wire: do not renumber).
pub mod msg_type {
    pub const PING: u16 = 0;
    pub const PONG: u16 = 1;
    pub const MEET: u16 = 2;
    pub const FAIL: u16 = 3;
    pub const PUBLISH: u16 = 4;
    pub const FAILOVER_AUTH_REQUEST: u16 = 5;
    pub const FAILOVER_AUTH_ACK: u16 = 6;
    pub const UPDATE: u16 = 7;
    pub const MFSTART: u16 = 8;
    pub const MODULE: u16 = 9;
    pub const PUBLISHSHARD: u16 = 10;
    /// Number of types Redis 7.0 knows (its per-type statistics).
    pub const COUNT: u16 = 11;
}

/// A type's name as Redis's logs and CLUSTER INFO's `cluster_stats_messages_*` use it.
pub fn type_name(t: u16) -> &'static str {
    match t {
        msg_type::PING => "ping",
        msg_type::PONG => "pong",
        msg_type::MEET => "meet",
        msg_type::FAIL => "fail",
        msg_type::PUBLISH => "publish",
        msg_type::PUBLISHSHARD => "publishshard",
        msg_type::FAILOVER_AUTH_REQUEST => "auth-req",
        msg_type::FAILOVER_AUTH_ACK => "auth-ack",
        msg_type::UPDATE => "update",
        msg_type::MFSTART => "mfstart",
        msg_type::MODULE => "module",
        _ => "unknown",
    }
}

/// A decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    pub header: Header,
    pub body: Body,
}

/// The body of each message type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    Ping(Ping),
    Pong(Ping),
    /// A PING that makes the receiver add the sender.
    Meet(Ping),
    /// The named node has failed.
    Fail {
        about: NodeName,
    },
    Publish(Publish),
    /// SPUBLISH, sent to the nodes of the sender's shard.
    PublishShard(Publish),
    FailoverAuthRequest,
    FailoverAuthAck,
    /// A replica asks its master to pause for a manual failover.
    MfStart,
    Update(Update),
    Module(Module),
    /// A type Redis 7.0 does not know: Redis accepts it at any length and ignores it; the
    /// bytes after the header are kept.
    Unknown {
        msg_type: u16,
        data: Vec<u8>,
    },
}

/// PING, PONG and MEET: gossip sections, then extensions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ping {
    pub gossip: Vec<Gossip>,
    pub exts: Vec<PingExt>,
}

/// PUBLISH and PUBLISHSHARD: the channel and message, lengths first, no padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publish {
    pub channel: Vec<u8>,
    pub message: Vec<u8>,
}

/// A node's slots and the configEpoch it holds them at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    pub config_epoch: u64,
    pub nodename: NodeName,
    pub slots: SlotBitmap,
}

/// A module's message, opaque: the module id (8 bytes as the sending module wrote them,
/// not byte-swapped by Redis), its type and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    pub module_id: [u8; 8],
    pub module_type: u8,
    pub payload: Vec<u8>,
}

/// Bytes of fixed data after the header: FAIL's node name, PUBLISH's two lengths,
/// UPDATE's epoch, name and bitmap, MODULE's id, length and type.
const FAIL_LEN: u64 = NAME_LEN as u64;
const PUBLISH_FIXED: u64 = 8;
const UPDATE_LEN: u64 = 8 + NAME_LEN as u64 + SLOT_BYTES as u64;
const MODULE_FIXED: u64 = 13;

impl Msg {
    pub fn new(header: Header, body: Body) -> Msg {
        Msg { header, body }
    }

    pub fn msg_type(&self) -> u16 {
        match &self.body {
            Body::Ping(_) => msg_type::PING,
            Body::Pong(_) => msg_type::PONG,
            Body::Meet(_) => msg_type::MEET,
            Body::Fail { .. } => msg_type::FAIL,
            Body::Publish(_) => msg_type::PUBLISH,
            Body::PublishShard(_) => msg_type::PUBLISHSHARD,
            Body::FailoverAuthRequest => msg_type::FAILOVER_AUTH_REQUEST,
            Body::FailoverAuthAck => msg_type::FAILOVER_AUTH_ACK,
            Body::MfStart => msg_type::MFSTART,
            Body::Update(_) => msg_type::UPDATE,
            Body::Module(_) => msg_type::MODULE,
            Body::Unknown { msg_type, .. } => *msg_type,
        }
    }

    /// The gossip and extensions of a PING, PONG or MEET.
    pub fn ping(&self) -> Option<&Ping> {
        match &self.body {
            Body::Ping(p) | Body::Pong(p) | Body::Meet(p) => Some(p),
            _ => None,
        }
    }
}

/// Decodes one whole message: `buf` is exactly its `totlen` bytes (what
/// [`super::FrameReader`] yields).
pub fn decode(buf: &[u8]) -> Result<Msg, BusError> {
    let mut cur = Cursor::new(buf, 0);
    let sig: [u8; 4] = cur.array()?;
    let totlen = cur.u32()?;
    if sig != SIGNATURE {
        return Err(BusError::Signature { found: sig });
    }
    if (totlen as usize) < HEADER_LEN {
        return Err(BusError::TotlenBelowHeader {
            totlen,
            min: HEADER_LEN as u32,
        });
    }
    if totlen as usize != buf.len() {
        return Err(BusError::TotlenMismatch {
            totlen,
            len: buf.len(),
        });
    }
    let version = cur.u16()?;
    if version != PROTOCOL_VERSION {
        return Err(BusError::Version(version));
    }
    let port = cur.u16()?;
    let t = cur.u16()?;
    let header = Header::decode(&mut cur, port)?;
    debug_assert_eq!(cur.pos(), offset::DATA);
    let kind = type_name(t);
    let data = &buf[HEADER_LEN..];
    let expect = |len: u64| -> Result<(), BusError> {
        if data.len() as u64 == len {
            Ok(())
        } else {
            Err(BusError::Length {
                kind,
                totlen,
                expected: HEADER_LEN as u64 + len,
            })
        }
    };
    let body = match t {
        msg_type::PING | msg_type::PONG | msg_type::MEET => {
            let ping = decode_ping(&header, data, kind, totlen)?;
            match t {
                msg_type::PING => Body::Ping(ping),
                msg_type::PONG => Body::Pong(ping),
                _ => Body::Meet(ping),
            }
        }
        msg_type::FAIL => {
            expect(FAIL_LEN)?;
            Body::Fail {
                about: NodeName(Cursor::new(data, 0).array()?),
            }
        }
        msg_type::PUBLISH | msg_type::PUBLISHSHARD => {
            let mut c = Cursor::new(data, 0);
            // A length check needs both lengths: read them only if they are there, else
            // report the length Redis would have expected from what is there.
            if data.len() < PUBLISH_FIXED as usize {
                return Err(BusError::Length {
                    kind,
                    totlen,
                    expected: HEADER_LEN as u64 + PUBLISH_FIXED,
                });
            }
            let channel_len = c.u32()?;
            let message_len = c.u32()?;
            expect(PUBLISH_FIXED + u64::from(channel_len) + u64::from(message_len))?;
            let publish = Publish {
                channel: c.take(channel_len as usize)?.to_vec(),
                message: c.take(message_len as usize)?.to_vec(),
            };
            if t == msg_type::PUBLISH {
                Body::Publish(publish)
            } else {
                Body::PublishShard(publish)
            }
        }
        msg_type::FAILOVER_AUTH_REQUEST | msg_type::FAILOVER_AUTH_ACK | msg_type::MFSTART => {
            expect(0)?;
            match t {
                msg_type::FAILOVER_AUTH_REQUEST => Body::FailoverAuthRequest,
                msg_type::FAILOVER_AUTH_ACK => Body::FailoverAuthAck,
                _ => Body::MfStart,
            }
        }
        msg_type::UPDATE => {
            expect(UPDATE_LEN)?;
            let mut c = Cursor::new(data, 0);
            Body::Update(Update {
                config_epoch: c.u64()?,
                nodename: NodeName(c.array()?),
                slots: SlotBitmap::from_bytes(c.take(SLOT_BYTES)?)?,
            })
        }
        msg_type::MODULE => {
            if data.len() < MODULE_FIXED as usize {
                return Err(BusError::Length {
                    kind,
                    totlen,
                    expected: HEADER_LEN as u64 + MODULE_FIXED,
                });
            }
            let mut c = Cursor::new(data, 0);
            let module_id = c.array()?;
            let len = c.u32()?;
            let module_type = c.u8()?;
            expect(MODULE_FIXED + u64::from(len))?;
            Body::Module(Module {
                module_id,
                module_type,
                payload: c.take(len as usize)?.to_vec(),
            })
        }
        other => Body::Unknown {
            msg_type: other,
            data: data.to_vec(),
        },
    };
    Ok(Msg { header, body })
}

fn decode_ping(
    header: &Header,
    data: &[u8],
    kind: &'static str,
    totlen: u32,
) -> Result<Ping, BusError> {
    let count = header.count;
    let gossip_len = count as usize * GOSSIP_LEN;
    if gossip_len > data.len() {
        return Err(BusError::GossipCount {
            kind,
            count,
            totlen,
        });
    }
    let mut cur = Cursor::new(data, 0);
    // The count allocated is bounded by the input: the check above.
    let mut gossip = Vec::with_capacity(count as usize);
    for _ in 0..count {
        gossip.push(Gossip::decode(&mut cur)?);
    }
    let rest = &data[gossip_len..];
    let flagged = header.mflags[0] & mflag0::EXT_DATA != 0;
    let exts = if flagged {
        ext::decode_all(rest, header.extensions, kind)?
    } else {
        Vec::new()
    };
    let used: usize = exts.iter().map(PingExt::encoded_len).sum();
    if used != rest.len() {
        return Err(BusError::Length {
            kind,
            totlen,
            expected: (HEADER_LEN + gossip_len + used) as u64,
        });
    }
    // Redis's length check passes this; its processing would then walk the extensions.
    if !flagged && header.extensions != 0 {
        return Err(BusError::ExtensionsWithoutFlag {
            kind,
            count: header.extensions,
        });
    }
    Ok(Ping { gossip, exts })
}

/// Encodes a message. For PING, PONG and MEET the header's gossip and extension counts are
/// the body's, and the extension-data flag is set when there are extensions; every other
/// header field is written as it is.
pub fn encode(msg: &Msg) -> Vec<u8> {
    let h = &msg.header;
    let mut fixed = Fixed {
        totlen: 0,
        msg_type: msg.msg_type(),
        count: h.count,
        extensions: h.extensions,
        mflag0: h.mflags[0],
    };
    let mut body = Vec::new();
    match &msg.body {
        Body::Ping(p) | Body::Pong(p) | Body::Meet(p) => {
            fixed.count = u16::try_from(p.gossip.len()).expect("at most 65535 gossip sections");
            fixed.extensions = u16::try_from(p.exts.len()).expect("at most 65535 extensions");
            if !p.exts.is_empty() {
                fixed.mflag0 |= mflag0::EXT_DATA;
            }
            for g in &p.gossip {
                g.encode(&mut body);
            }
            for e in &p.exts {
                e.encode(&mut body);
            }
        }
        Body::Fail { about } => body.extend_from_slice(&about.0),
        Body::Publish(p) | Body::PublishShard(p) => {
            body.extend_from_slice(&u32_len(p.channel.len()).to_be_bytes());
            body.extend_from_slice(&u32_len(p.message.len()).to_be_bytes());
            body.extend_from_slice(&p.channel);
            body.extend_from_slice(&p.message);
        }
        Body::FailoverAuthRequest | Body::FailoverAuthAck | Body::MfStart => {}
        Body::Update(u) => {
            body.extend_from_slice(&u.config_epoch.to_be_bytes());
            body.extend_from_slice(&u.nodename.0);
            body.extend_from_slice(u.slots.as_bytes());
        }
        Body::Module(m) => {
            body.extend_from_slice(&m.module_id);
            body.extend_from_slice(&u32_len(m.payload.len()).to_be_bytes());
            body.push(m.module_type);
            body.extend_from_slice(&m.payload);
        }
        Body::Unknown { data, .. } => body.extend_from_slice(data),
    }
    fixed.totlen = u32_len(HEADER_LEN + body.len());
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    h.encode(&mut out, fixed);
    out.extend_from_slice(&body);
    out
}

fn u32_len(n: usize) -> u32 {
    u32::try_from(n).expect("a bus message fits in 4 GiB")
}
