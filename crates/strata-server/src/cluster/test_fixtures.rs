//! What the bus's transition tests (`packet_tests.rs`, `failover_tests.rs`) share: the
//! node names, the clock and configuration, a master at an address, and the links a
//! message arrives on.

use super::outgoing::Env;
use super::packet::LinkCtx;
use super::slots::{node_flag, Node, NodeId};

pub const A: NodeId = [b'a'; 40];
pub const B: NodeId = [b'b'; 40];
pub const C: NodeId = [b'c'; 40];

/// The clock at `now_ms`, a node timeout of 1 s, full coverage required, replica
/// migration on with Redis's default barrier of 1.
pub fn env(now_ms: u64) -> Env {
    Env {
        now_ms,
        node_timeout_ms: 1000,
        announce_ip: String::new(),
        full_coverage: true,
        repl_offset: 0,
        migration_barrier: 1,
        allow_replica_migration: true,
        no_failover: false,
        validity_factor: 10,
        repl_ping_period_ms: 10_000,
        data_age_ms: 0,
    }
}

/// A connected master on 127.0.0.1:`port` with config epoch `epoch`.
pub fn master(id: NodeId, port: u16, epoch: u64) -> Node {
    let mut n = Node::new(id, node_flag::MASTER);
    n.ip = "127.0.0.1".into();
    n.port = port;
    n.cport = port + 10000;
    n.config_epoch = epoch;
    n.link_connected = true;
    n
}

/// A link a peer opened to this node, over loopback.
pub fn inbound() -> LinkCtx {
    LinkCtx {
        inbound: true,
        node: None,
        peer_ip: "127.0.0.1".into(),
        local_ip: "127.0.0.1".into(),
    }
}

/// A link this node opened to `to`, over loopback.
pub fn outbound(to: NodeId) -> LinkCtx {
    LinkCtx {
        inbound: false,
        node: Some(to),
        ..inbound()
    }
}
