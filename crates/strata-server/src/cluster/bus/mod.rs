//! The Redis Cluster bus wire format, binary-compatible with Redis 7.0
//! (`docs/format/cluster-bus.md`): typed messages, their encoder and a decoder exactly as
//! strict as redis-server 7.0.15's `clusterProcessPacket`, the stream framing of its read
//! handler, and the pure helpers the cluster state machine needs. No I/O but
//! [`frame::FrameReader::read_frame`], no cluster state.
//!
//! - `header.rs`: the fixed 2256-byte header every message starts with, node names and the
//!   fixed-size IP fields;
//! - `bitmap.rs`: the 16384-bit slot bitmap (headers and UPDATE messages carry it);
//! - `gossip.rs`: the 104-byte gossip sections of PING, PONG and MEET, and how many a sender
//!   includes;
//! - `ext.rs`: the ping extensions after the gossip sections (hostname, human node name,
//!   forgotten node, shard id; unknown ones kept opaque);
//! - `message.rs`: every message type, [`decode`] and [`encode`];
//! - `node.rs`: node flag bits and their CLUSTER NODES names, node name validation;
//! - `frame.rs`: whole messages out of a byte stream.
//!
//! Every message a redis-server could send decodes and re-encodes byte for byte (reserved
//! fields and padding are kept as sent). A message redis-server would drop is a
//! [`BusError`] naming what is wrong; nothing here panics on input or allocates more than the
//! input's own length.
//!
//! Layer: cluster (beside the server; no commands, no store).

pub mod bitmap;
pub mod ext;
pub mod frame;
pub mod gossip;
pub mod header;
pub mod message;
pub mod node;

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod probe_tests;
#[cfg(test)]
mod proptests;

pub use bitmap::SlotBitmap;
pub use ext::{ExtView, PingExt};
pub use frame::FrameReader;
pub use gossip::Gossip;
pub use header::{Header, IpField, NodeName};
pub use message::{decode, encode, Body, Module, Msg, Ping, Publish, Update};

/// Why a bus message (or a helper's input) was refused. Message errors name the message
/// type as Redis's logs do (`ping`, `auth-req`, ...).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    /// Fewer bytes than the fields read so far need.
    #[error("bus message of {len} bytes is shorter than the {need} bytes its fields need")]
    Truncated { need: u64, len: usize },
    /// The first four bytes are not `RCmb`.
    #[error("bad bus message signature {found:02x?}, expected \"RCmb\"")]
    Signature { found: [u8; 4] },
    /// `totlen` is smaller than the fixed header (Redis's read handler closes the link).
    #[error("bus message length {totlen} is below the {min}-byte header")]
    TotlenBelowHeader { totlen: u32, min: u32 },
    /// `totlen` is above the reader's limit.
    #[error("bus message length {totlen} is above the limit of {max} bytes")]
    TotlenAboveLimit { totlen: u32, max: u32 },
    /// The buffer given to [`decode`] is not exactly `totlen` bytes.
    #[error("bus message length {totlen} but {len} bytes given")]
    TotlenMismatch { totlen: u32, len: usize },
    /// A protocol version other than 1.
    #[error("bus protocol version {0}, only version 1 is known")]
    Version(u16),
    /// `totlen` disagrees with the length the type and its counts imply.
    #[error("invalid {kind} message of length {totlen} but expected length {expected}")]
    Length {
        kind: &'static str,
        totlen: u32,
        expected: u64,
    },
    /// The gossip sections alone overrun the message.
    #[error("invalid {kind} message with gossip count {count} that exceeds its length {totlen}")]
    GossipCount {
        kind: &'static str,
        count: u16,
        totlen: u32,
    },
    /// A ping extension whose length is zero, not a multiple of 8, or 64 KiB or more.
    #[error(
        "{kind} message extension {index} has length {len}, not a non-zero multiple of 8 below 65536"
    )]
    ExtensionPadding {
        kind: &'static str,
        index: u16,
        len: u32,
    },
    /// A ping extension (or its 8-byte header) runs past the end of the message.
    #[error(
        "{kind} message extension {index} needs {need} bytes but {remaining} are left of the message"
    )]
    ExtensionOverrun {
        kind: &'static str,
        index: u16,
        need: u64,
        remaining: u64,
    },
    /// A hostname extension that does not end with a NUL byte.
    #[error("{kind} message extension {index} of type {ext_type} is missing its NUL terminator")]
    ExtensionUnterminated {
        kind: &'static str,
        index: u16,
        ext_type: u16,
    },
    /// A nonzero extension count without the extension-data flag (redis-server would walk
    /// extensions that are not in the message).
    #[error("{kind} message declares {count} extensions without the extension-data flag")]
    ExtensionsWithoutFlag { kind: &'static str, count: u16 },
    /// An extension of a known type whose data is too short for its fields.
    #[error("ping extension of type {ext_type} has {len} bytes of data, needs {need}")]
    ExtensionData {
        ext_type: u16,
        len: usize,
        need: usize,
    },
    /// A string that cannot go in an extension (it holds a NUL byte).
    #[error("ping extension text may not contain a NUL byte")]
    ExtensionText,
    /// Not a node name: 40 characters from `a-z` and `0-9`.
    #[error("invalid node name {0:?}: need 40 characters from a-z and 0-9")]
    NodeName(String),
    /// A word of a CLUSTER NODES flag list that is not a flag.
    #[error("unknown node flag {0:?}")]
    NodeFlag(String),
    /// A slot number outside 0-16383 (or a range that ends before it starts).
    #[error("slot {0} is out of range (0-16383)")]
    Slot(u32),
    /// The connection ended inside a message, or reading it failed.
    #[error("bus connection: {0}")]
    Io(String),
}
