//! The messages this node sends on the cluster bus, built from its state as Redis 7.0's
//! `clusterBuildMessageHdr`, `clusterSendPing`, `clusterSendFail` and `clusterSendUpdate`
//! build them (`docs/format/cluster-bus.md`). Pure functions of the state; the only
//! change they make is the ping time of the node a PING goes to.
//!
//! Layer: cluster (a building block below commands).

use super::bus::gossip::gossip_wanted;
use super::bus::{Body, Gossip, Header, IpField, Msg, NodeName, Ping, PingExt, SlotBitmap, Update};
use super::slots::{node_flag, Node, NodeId, State};

/// What the node's configuration and the clock say, for building and processing messages.
#[derive(Clone, Debug)]
pub struct Env {
    pub now_ms: u64,
    /// `cluster-node-timeout`.
    pub node_timeout_ms: u64,
    /// `cluster-announce-ip` (empty: peers take the address they see).
    pub announce_ip: String,
    /// `cluster-require-full-coverage`.
    pub full_coverage: bool,
    /// This node's replication offset (the header's `offset`).
    pub repl_offset: u64,
    /// `cluster-migration-barrier`.
    pub migration_barrier: u64,
    /// `cluster-allow-replica-migration`.
    pub allow_replica_migration: bool,
    /// `cluster-replica-no-failover`: this node, as a replica, never fails its master over.
    pub no_failover: bool,
    /// `cluster-replica-validity-factor` (0: a replica may always be elected).
    pub validity_factor: u64,
    /// `repl-ping-replica-period`, in milliseconds.
    pub repl_ping_period_ms: u64,
    /// On a replica, how long ago its replication link last heard from the master (the
    /// link up), or since when it has been down (Redis's `data_age`); `u64::MAX` if it
    /// never came up.
    pub data_age_ms: u64,
}

/// The slots `id` owns, as the header's bitmap.
pub fn bitmap_of(st: &State, id: &NodeId) -> SlotBitmap {
    let mut b = SlotBitmap::new();
    for (s, o) in st.owner.iter().enumerate() {
        if o.as_ref() == Some(id) {
            // In range by construction: the owner table has 16384 entries.
            let _ = b.set(s as u16);
        }
    }
    b
}

/// The master whose slots and config epoch this node's headers carry: itself, or its
/// master if it is a replica.
fn header_master(st: &State) -> &Node {
    let me = st.me();
    match me.master.and_then(|m| st.nodes.get(&m)) {
        Some(m) if me.has(node_flag::SLAVE) => m,
        _ => me,
    }
}

/// Redis's `clusterBuildMessageHdr`.
pub fn header(st: &State, env: &Env) -> Header {
    let me = st.me();
    let master = header_master(st);
    let mut h = Header::new(NodeName(st.myself));
    h.port = me.port;
    h.cport = me.cport;
    h.pport = 0;
    h.current_epoch = st.current_epoch;
    h.config_epoch = master.config_epoch;
    h.offset = env.repl_offset;
    h.myslots = bitmap_of(st, &master.id);
    if let Some(m) = me.master {
        h.slaveof = NodeName(m);
    }
    h.myip = IpField::new(&env.announce_ip);
    h.flags = me.flags & !node_flag::MEET;
    // A master that paused its writers for a replica's manual failover says so.
    if me.has(node_flag::MASTER) && st.manual.end_ms != 0 {
        h.mflags[0] |= super::bus::header::mflag0::PAUSED;
    }
    // CLUSTER_OK is 0, CLUSTER_FAIL 1.
    h.state = u8::from(!st.is_ok(env.full_coverage));
    h
}

/// Redis's `clusterSetGossipEntry`: times in seconds.
fn gossip_entry(n: &Node) -> Gossip {
    Gossip {
        nodename: NodeName(n.id),
        ping_sent: (n.ping_sent_ms / 1000) as u32,
        pong_received: (n.pong_received_ms / 1000) as u32,
        ip: IpField::new(&n.ip),
        port: n.port,
        cport: n.cport,
        flags: n.flags & !node_flag::MEET,
        pport: n.bus.pport,
        reserved: 0,
    }
}

/// The gossip sections of a PING, PONG or MEET (Redis's `clusterSendPing`): a tenth of the
/// nodes (at least 3, at most all but the sender and receiver), chosen at random among the
/// healthy ones with an address (and a link or slots), then every node in PFAIL.
pub fn gossip_sections(st: &State) -> Vec<Gossip> {
    let wanted = gossip_wanted(st.nodes.len());
    let mut fresh: Vec<&Node> = st
        .nodes
        .values()
        .filter(|n| {
            !n.has(node_flag::MYSELF | node_flag::PFAIL | node_flag::HANDSHAKE | node_flag::NOADDR)
                && (n.link_connected || st.slot_count(&n.id) != 0)
        })
        .collect();
    let mut out = Vec::new();
    while out.len() < wanted && !fresh.is_empty() {
        let i = crate::random::below(fresh.len());
        out.push(gossip_entry(fresh.swap_remove(i)));
    }
    for n in st.nodes.values() {
        if n.has(node_flag::PFAIL) && !n.has(node_flag::HANDSHAKE | node_flag::NOADDR) {
            out.push(gossip_entry(n));
        }
    }
    out
}

/// Which of PING, PONG and MEET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PingKind {
    Ping,
    Pong,
    Meet,
}

/// A PING, PONG or MEET with gossip and, if this node announces one, the hostname
/// extension. A PING to `to` records the time it was sent (Redis sets `ping_sent` when
/// it builds a PING for a link with a node).
pub fn ping(st: &mut State, env: &Env, kind: PingKind, to: Option<NodeId>) -> Msg {
    if let (PingKind::Ping, Some(id)) = (kind, to) {
        if let Some(n) = st.nodes.get_mut(&id) {
            n.ping_sent_ms = env.now_ms;
        }
    }
    let header = header(st, env);
    let mut body = Ping {
        gossip: gossip_sections(st),
        exts: Vec::new(),
    };
    let hostname = &st.me().hostname;
    if !hostname.is_empty() {
        if let Ok(e) = PingExt::hostname(hostname.as_bytes()) {
            body.exts.push(e);
        }
    }
    let body = match kind {
        PingKind::Ping => Body::Ping(body),
        PingKind::Pong => Body::Pong(body),
        PingKind::Meet => Body::Meet(body),
    };
    Msg::new(header, body)
}

/// FAIL about `about` (Redis's `clusterSendFail`).
pub fn fail(st: &State, env: &Env, about: NodeId) -> Msg {
    Msg::new(
        header(st, env),
        Body::Fail {
            about: NodeName(about),
        },
    )
}

/// UPDATE telling a stale node the slots and config epoch of `about`.
pub fn update(st: &State, env: &Env, about: &NodeId) -> Option<Msg> {
    let n = st.nodes.get(about)?;
    Some(Msg::new(
        header(st, env),
        Body::Update(Update {
            config_epoch: n.config_epoch,
            nodename: NodeName(n.id),
            slots: bitmap_of(st, about),
        }),
    ))
}
