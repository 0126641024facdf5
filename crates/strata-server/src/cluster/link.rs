//! The cluster bus on the wire: the listener on the cluster port, one outbound link per
//! known node and the inbound links peers open, on the server's tokio runtime.
//!
//! **Concurrency.** One task (the bus) owns every link and is the only one that changes
//! the cluster state for the bus: it accepts connections, receives whole messages from
//! each link's reader task (through one bounded channel, so a fast peer waits), runs the
//! cron every 100 ms, and hands each message or cron step to the pure transitions
//! (`packet.rs`, `cron.rs`) under the state's write lock (`Cluster::bus_update`, which
//! saves nodes.conf before the lock is released when the transition asks). The actions
//! returned are carried out after the lock is released: messages go to each link's writer
//! task through a bounded queue (a peer that does not read loses its link, never the node),
//! connections are opened by short-lived tasks that report back to the bus. A framing
//! error closes the link; a message that frames but does not decode is dropped. Messages
//! published on this node reach the bus task through `Cluster::publish`'s bounded queue;
//! the task republishes its list of links (`Cluster::links`, CLUSTER LINKS) whenever a
//! link opens, closes or learns its node. A manual failover's pause is taken here
//! (`Pause::hold_writes_and_drain`, every stripe once, the sequencer's cut) before the PING
//! that carries the offset: the task blocks (`block_in_place`) for the writes in flight,
//! a few milliseconds.
//!
//! Layer: cluster (beside the server; reaches the store only to empty lost slots).

use super::bus::{self, FrameReader};
use super::cron;
use super::outgoing::Env;
use super::packet::{Action, LinkCtx};
use super::slots::{node_flag, NodeId};
use super::{BusStats, Cluster};
use crate::server::Shared;
use bytes::Bytes;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Messages waiting to be written on one link; a link whose queue is full is closed.
const LINK_QUEUE: usize = 1024;
/// Events waiting for the bus task (readers wait when it is full).
const EVENT_QUEUE: usize = 1024;
/// Messages published here waiting for the bus task (`Cluster::publish`).
const PUBLISH_QUEUE: usize = 4096;

type LinkId = u64;

enum Event {
    Frame(LinkId, Bytes),
    Closed(LinkId),
    Connected(NodeId, TcpStream),
    ConnectFailed(NodeId),
}

struct Link {
    ctx: LinkCtx,
    tx: mpsc::Sender<Bytes>,
    tasks: [JoinHandle<()>; 2],
    /// An inbound link's node, once a message from a known node came on it (Redis's
    /// `setClusterNodeToInboundClusterLink`).
    peer: Option<NodeId>,
    ctime_ms: u64,
    /// Bytes queued and not yet written (CLUSTER LINKS' send buffer).
    queued: Arc<AtomicU64>,
}

impl Drop for Link {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The bus task's state: the links and the connections being opened.
struct Bus {
    shared: Arc<Shared>,
    events: mpsc::Sender<Event>,
    links: HashMap<LinkId, Link>,
    outbound: HashMap<NodeId, LinkId>,
    connecting: HashSet<NodeId>,
    next_id: LinkId,
    iteration: u64,
}

/// Binds the cluster port on the addresses the server listens on (`bind`), as Redis does
/// at start: a port that cannot be bound stops the server.
pub fn bind(
    addrs: &[std::net::SocketAddr],
    cport: u16,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    let mut out = Vec::new();
    for a in addrs {
        let l = std::net::TcpListener::bind((a.ip(), cport))?;
        l.set_nonblocking(true)?;
        out.push(l);
    }
    Ok(out)
}

/// Runs the bus until shutdown (on the server's runtime).
pub async fn run(shared: Arc<Shared>, listeners: Vec<std::net::TcpListener>) {
    let (tx, mut rx) = mpsc::channel(EVENT_QUEUE);
    let (acc_tx, mut acc_rx) = mpsc::channel::<TcpStream>(16);
    for l in listeners {
        let Ok(l) = TcpListener::from_std(l) else {
            continue;
        };
        let acc_tx = acc_tx.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                if acc_tx.send(s).await.is_err() {
                    return;
                }
            }
        });
    }
    let mut bus = Bus {
        shared: shared.clone(),
        events: tx,
        links: HashMap::new(),
        outbound: HashMap::new(),
        connecting: HashSet::new(),
        next_id: 0,
        iteration: 0,
    };
    let mut published = match shared
        .cluster
        .as_ref()
        .and_then(|c| c.take_published(PUBLISH_QUEUE))
    {
        Some(rx) => rx,
        None => mpsc::channel(1).1,
    };
    let mut stop = shared.shutdown_receiver();
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / cron::STEPS_PER_SECOND));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = crate::server::stopped(&mut stop) => break,
            _ = tick.tick() => bus.cron(),
            Some(s) = acc_rx.recv() => bus.accepted(s),
            Some(e) = rx.recv() => bus.event(e),
            Some(p) = published.recv() => bus.publish(p),
        }
    }
}

/// The wall clock in Unix milliseconds (the bus's times).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn ip_text(a: std::io::Result<std::net::SocketAddr>) -> String {
    match a.map(|a| a.ip()) {
        Ok(std::net::IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        Ok(ip) => ip.to_string(),
        Err(_) => String::new(),
    }
}

impl Bus {
    fn cluster(&self) -> &Cluster {
        self.shared
            .cluster
            .as_ref()
            .expect("the bus runs only in cluster mode")
    }

    fn env(&self) -> Env {
        let c = self.shared.config.read();
        let get = |n: &str| c.tuning.get(n).cloned().unwrap_or_default();
        Env {
            now_ms: now_ms(),
            node_timeout_ms: get("cluster-node-timeout").parse().unwrap_or(15000),
            announce_ip: get("cluster-announce-ip"),
            full_coverage: get("cluster-require-full-coverage") != "no",
            migration_barrier: get("cluster-migration-barrier").parse().unwrap_or(1),
            allow_replica_migration: get("cluster-allow-replica-migration") != "no",
            no_failover: get("cluster-replica-no-failover") == "yes",
            validity_factor: get("cluster-replica-validity-factor").parse().unwrap_or(10),
            repl_ping_period_ms: get("repl-ping-replica-period")
                .parse::<u64>()
                .unwrap_or(10)
                .saturating_mul(1000),
            data_age_ms: self
                .shared
                .replication
                .data_age()
                .map_or(u64::MAX, |d| d.as_millis().try_into().unwrap_or(u64::MAX)),
            // A replica's offset is what it applied of its master's stream (Redis's
            // `replicationGetSlaveOffset`); a master's, its stream's end.
            repl_offset: if self.shared.replication.is_replica() {
                self.shared.replication.ids().3
            } else {
                self.shared.master.offset().unwrap_or(0)
            },
        }
    }

    fn add_link(&mut self, stream: TcpStream, inbound: bool, node: Option<NodeId>) -> LinkId {
        let _ = stream.set_nodelay(true);
        let ctx = LinkCtx {
            inbound,
            node,
            peer_ip: ip_text(stream.peer_addr()),
            local_ip: ip_text(stream.local_addr()),
        };
        self.next_id += 1;
        let id = self.next_id;
        let (mut r, mut w) = stream.into_split();
        let (tx, mut rx) = mpsc::channel::<Bytes>(LINK_QUEUE);
        let queued = Arc::new(AtomicU64::new(0));
        let events = self.events.clone();
        let reader = tokio::spawn(async move {
            let mut frames = FrameReader::new(bus::frame::DEFAULT_MAX_MESSAGE_BYTES);
            while let Ok(Some(f)) = frames.read_frame(&mut r).await {
                if events.send(Event::Frame(id, f)).await.is_err() {
                    return;
                }
            }
            let _ = events.send(Event::Closed(id)).await;
        });
        let events = self.events.clone();
        let written = queued.clone();
        let writer = tokio::spawn(async move {
            while let Some(b) = rx.recv().await {
                if w.write_all(&b).await.is_err() {
                    let _ = events.send(Event::Closed(id)).await;
                    return;
                }
                written.fetch_sub(b.len() as u64, Ordering::Relaxed);
            }
        });
        self.links.insert(
            id,
            Link {
                ctx,
                tx,
                tasks: [reader, writer],
                peer: None,
                ctime_ms: now_ms(),
                queued,
            },
        );
        self.publish_links();
        id
    }

    /// Publishes the links whose node is known for CLUSTER LINKS.
    fn publish_links(&self) {
        let views = self
            .links
            .values()
            .filter_map(|l| {
                let node = if l.ctx.inbound { l.peer } else { l.ctx.node }?;
                Some(super::LinkView {
                    inbound: l.ctx.inbound,
                    node,
                    ctime_ms: l.ctime_ms,
                    queued: l.queued.clone(),
                })
            })
            .collect();
        *self.cluster().links.lock() = views;
    }

    fn accepted(&mut self, s: TcpStream) {
        self.add_link(s, true, None);
    }

    fn close(&mut self, id: LinkId) {
        let Some(link) = self.links.remove(&id) else {
            return;
        };
        self.publish_links();
        if let Some(node) = link.ctx.node {
            if self.outbound.get(&node) == Some(&id) {
                self.outbound.remove(&node);
                let env = self.env();
                self.cluster().bus_update(|st| {
                    cron::disconnected(st, &env, &node, false);
                    ((), false)
                });
            }
        }
    }

    fn send(&mut self, link: LinkId, m: &bus::Msg) {
        let Some(l) = self.links.get(&link) else {
            return;
        };
        BusStats::count(&self.cluster().stats.sent, m.msg_type());
        let bytes = Bytes::from(bus::encode(m));
        let len = bytes.len() as u64;
        if l.tx.try_send(bytes).is_err() {
            self.close(link);
        } else {
            l.queued.fetch_add(len, Ordering::Relaxed);
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Frame(link, bytes) => self.frame(link, &bytes),
            Event::Closed(link) => self.close(link),
            Event::Connected(node, stream) => {
                self.connecting.remove(&node);
                if !self.cluster().read().nodes.contains_key(&node) {
                    return;
                }
                if let Some(old) = self.outbound.remove(&node) {
                    self.links.remove(&old);
                }
                let id = self.add_link(stream, false, Some(node));
                self.outbound.insert(node, id);
                let env = self.env();
                let out = self
                    .cluster()
                    .bus_update(|st| (cron::connected(st, &env, &node), false));
                self.apply(out.actions, None);
            }
            Event::ConnectFailed(node) => {
                self.connecting.remove(&node);
                let env = self.env();
                self.cluster().bus_update(|st| {
                    cron::disconnected(st, &env, &node, true);
                    ((), false)
                });
            }
        }
    }

    fn frame(&mut self, link: LinkId, bytes: &[u8]) {
        let Some(ctx) = self.links.get(&link).map(|l| l.ctx.clone()) else {
            return;
        };
        let Ok(msg) = bus::decode(bytes) else {
            // Redis drops a message it cannot read and keeps the link.
            return;
        };
        BusStats::count(&self.cluster().stats.received, msg.msg_type());
        if ctx.inbound {
            let sender = msg.header.sender.0;
            let known = self.cluster().read().nodes.contains_key(&sender);
            let changed = match self.links.get_mut(&link) {
                Some(l) if known && l.peer != Some(sender) => {
                    l.peer = Some(sender);
                    true
                }
                _ => false,
            };
            if changed {
                self.publish_links();
            }
        }
        let env = self.env();
        let out = self.cluster().process_message(&env, &ctx, &msg);
        self.apply(out.actions, Some(link));
    }

    fn cron(&mut self) {
        let env = self.env();
        self.cluster().set_node_timeout(env.node_timeout_ms);
        let it = self.iteration;
        self.iteration += 1;
        let out = self.cluster().bus_update(|st| {
            let out = cron::cron(st, &env, it);
            let save = out.save;
            (out, save)
        });
        self.apply(out.actions, None);
        // Links to nodes no longer in the table (forgotten, reset) are closed.
        let gone: Vec<LinkId> = {
            let st = self.cluster().read();
            self.outbound
                .iter()
                .filter(|(n, _)| !st.nodes.contains_key(*n))
                .map(|(_, l)| *l)
                .collect()
        };
        for l in gone {
            self.close(l);
        }
        // A replica not replicating (after a restart) starts once its master's address is
        // known, as Redis's cron does.
        let master = {
            let st = self.cluster().read();
            let me = st.me();
            me.master.filter(|_| me.has(node_flag::SLAVE))
        };
        if let Some(m) = master {
            if !self.shared.replication.is_replica() {
                self.follow(m);
            }
        }
    }

    /// Replicates from `node` (CLUSTER REPLICATE's and a demoted master's way).
    fn follow(&self, node: NodeId) {
        let target = {
            let st = self.cluster().read();
            st.nodes
                .get(&node)
                .filter(|n| !n.ip.is_empty() && n.port != 0)
                .map(|n| (n.ip.clone(), n.port))
        };
        let (Some((host, port)), Some(shared)) = (target, self.shared.me.upgrade()) else {
            return;
        };
        // It asks from its own stream's end (`Replication::follow`).
        shared.replication.follow(&shared, host, port);
    }

    fn apply(&mut self, actions: Vec<Action>, from: Option<LinkId>) {
        for a in actions {
            match a {
                Action::Reply(m) => {
                    if let Some(l) = from {
                        self.send(l, &m);
                    }
                }
                Action::Send(node, m) => {
                    if let Some(&l) = self.outbound.get(&node) {
                        self.send(l, &m);
                    }
                }
                Action::Broadcast(m) => {
                    let targets: Vec<LinkId> = {
                        let st = self.cluster().read();
                        self.outbound
                            .iter()
                            .filter(|(n, _)| {
                                st.nodes.get(*n).is_some_and(|n| {
                                    !n.has(node_flag::MYSELF | node_flag::HANDSHAKE)
                                })
                            })
                            .map(|(_, l)| *l)
                            .collect()
                    };
                    for l in targets {
                        self.send(l, &m);
                    }
                }
                Action::Connect(node) => self.connect(node),
                Action::Drop(node) => {
                    if let Some(l) = self.outbound.get(&node).copied() {
                        self.close(l);
                    }
                }
                Action::Renamed { from: old, to } => {
                    if let Some(l) = self.outbound.remove(&old) {
                        if let Some(link) = self.links.get_mut(&l) {
                            link.ctx.node = Some(to);
                        }
                        self.outbound.insert(to, l);
                    }
                }
                Action::CloseThis => {
                    if let Some(l) = from {
                        self.close(l);
                    }
                }
                Action::DeleteSlotKeys(slots) => self.delete_slot_keys(&slots),
                Action::Promote => {
                    let r = &self.shared.replication;
                    if r.is_replica() {
                        r.promote(&self.shared);
                    }
                }
                Action::Follow(node) => self.follow(node),
                Action::PauseForFailover => self.pause_for_failover(from),
                Action::Deliver {
                    shard,
                    channel,
                    message,
                } => {
                    let kind = if shard {
                        crate::pubsub::Kind::Shard
                    } else {
                        crate::pubsub::Kind::Channel
                    };
                    let limit = self.shared.config.read().output_limits[2];
                    // No connection of this node published it: nothing is written back.
                    let mut none = bytes::BytesMut::new();
                    self.shared.pubsub.publish(
                        kind,
                        &channel,
                        &message,
                        limit,
                        u64::MAX,
                        &mut none,
                        false,
                    );
                }
                Action::ResumeWrites => self.shared.pause.hold_writes(false),
            }
        }
    }

    /// Carries a message published here (Redis's `clusterSendPublish`): to every node
    /// with a link, or for a shard channel to this node's master and replicas.
    fn publish(&mut self, p: super::Published) {
        let env = self.env();
        let (msg, shard_nodes) = {
            let st = self.cluster().read();
            let body = bus::Publish {
                channel: p.channel.to_vec(),
                message: p.message.to_vec(),
            };
            let msg = bus::Msg::new(
                super::outgoing::header(&st, &env),
                if p.shard {
                    bus::Body::PublishShard(body)
                } else {
                    bus::Body::Publish(body)
                },
            );
            let me = st.me();
            let master = if me.has(node_flag::SLAVE) {
                me.master
            } else {
                Some(st.myself)
            };
            let shard_nodes: Vec<NodeId> = master
                .map(|m| {
                    let mut v: Vec<NodeId> = st.replicas_of(&m).iter().map(|n| n.id).collect();
                    v.push(m);
                    v.retain(|id| *id != st.myself);
                    v
                })
                .unwrap_or_default();
            (msg, shard_nodes)
        };
        if p.shard {
            self.apply(
                shard_nodes
                    .into_iter()
                    .map(|n| Action::Send(n, msg.clone()))
                    .collect(),
                None,
            );
        } else {
            self.apply(vec![Action::Broadcast(msg)], None);
        }
    }

    /// A replica's MFSTART (Redis's `pauseClients` then `clusterSendPing`): writers are
    /// held; a write that passed the pause check before the hold is waited for until it
    /// holds its stripes (`Pause::hold_writes_and_drain`), a write that holds its stripes
    /// keeps them until it is done (queued to a worker included), and the sequencer's cut
    /// waits for its append, so the offset the PING carries covers every write that was
    /// or will be acknowledged before the failover ends. The waits block this task's
    /// thread, handed over so that the connections it waits for keep running. If the
    /// writes in flight do not drain within the manual failover's time, it is given up
    /// here: no PAUSED offset is sent, the writers go on, the replica's attempt times out.
    fn pause_for_failover(&mut self, from: Option<LinkId>) {
        let shared = self.shared.clone();
        let limit = Duration::from_millis(super::failover::MANUAL_FAILOVER_MS);
        let drained = tokio::task::block_in_place(|| {
            if !shared.pause.hold_writes_and_drain(limit) {
                return false;
            }
            drop(shared.store.front().lock_every_stripe_for_command());
            shared.master.seq.cut(|| ());
            true
        });
        if !drained {
            eprintln!(
                "strata-server: cluster: manual failover given up: writes in flight did not \
                 finish in time"
            );
            shared.pause.hold_writes(false);
            self.cluster().bus_update(|st| {
                st.manual = Default::default();
                ((), false)
            });
            return;
        }
        let Some(l) = from else {
            return;
        };
        let env = self.env();
        let m = self.cluster().bus_update(|st| {
            (
                super::outgoing::ping(st, &env, super::outgoing::PingKind::Ping, None),
                false,
            )
        });
        self.send(l, &m);
    }

    fn connect(&mut self, node: NodeId) {
        if self.outbound.contains_key(&node) || self.connecting.contains(&node) {
            return;
        }
        let (ip, cport) = match self.cluster().read().nodes.get(&node) {
            Some(n) if !n.ip.is_empty() && n.cport != 0 => (n.ip.clone(), n.cport),
            _ => return,
        };
        let timeout = Duration::from_millis(self.env().node_timeout_ms.clamp(100, 5000));
        self.connecting.insert(node);
        let events = self.events.clone();
        tokio::spawn(async move {
            let r = tokio::time::timeout(timeout, TcpStream::connect((ip.as_str(), cport))).await;
            let e = match r {
                Ok(Ok(s)) => Event::Connected(node, s),
                _ => Event::ConnectFailed(node),
            };
            let _ = events.send(e).await;
        });
    }

    /// Redis empties the slots it lost while holding keys (after a failover or a manual
    /// reconfiguration), so that no stale key is served if it gets them back.
    fn delete_slot_keys(&self, slots: &[u16]) {
        let store = self.shared.store.front();
        for &slot in slots {
            let mut keys = Vec::new();
            let _ = store.scan_from(0, slot, b"", |s, k, _| {
                if s != slot {
                    return false;
                }
                keys.push(k.to_vec());
                true
            });
            for k in keys {
                if let Err(e) = store.delete(0, &k) {
                    eprintln!("strata-server: cluster: emptying slot {slot}: {e}");
                }
            }
        }
    }
}
