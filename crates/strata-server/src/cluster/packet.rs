//! What a message received on the cluster bus does to the cluster state, as Redis 7.0.15's
//! `clusterProcessPacket`: the handshake (a node met gets its real name from its first
//! PONG), the sender's view in every PING/PONG/MEET header (role, master, slots with
//! their config epoch, epochs, address, hostname extension), gossip sections (failure
//! reports, nodes learned), FAIL and UPDATE. A pure function of the state, the message and
//! the link it came on; what to send, connect or close is returned as [`Action`]s for the
//! link layer (`link.rs`), with whether nodes.conf must be saved.
//!
//! Layer: cluster (a building block below commands).

use super::bus::{Body, ExtView, Gossip, Header, Msg, SlotBitmap};
use super::outgoing::{self, bitmap_of, Env, PingKind};
use super::slots::{id_str, node_flag, Node, NodeId, State};

/// The link a message came on.
#[derive(Clone, Debug, Default)]
pub struct LinkCtx {
    /// Accepted from a peer (replies go back on it), or opened by this node.
    pub inbound: bool,
    /// For a link this node opened: the node it was opened to.
    pub node: Option<NodeId>,
    /// The peer's address as the connection sees it.
    pub peer_ip: String,
    /// This node's address on the connection.
    pub local_ip: String,
}

/// What the link layer is to do after a message or a cron step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send on the link the message came on.
    Reply(Msg),
    /// Send on the node's outbound link (dropped if it has none).
    Send(NodeId, Msg),
    /// Send to every node with a link, but this one and nodes in handshake.
    Broadcast(Msg),
    /// Open an outbound link to the node (if none is open or opening).
    Connect(NodeId),
    /// Close the node's outbound link (it will be reopened by the cron).
    Drop(NodeId),
    /// The node in handshake got its real name: its link now belongs to the new name.
    Renamed { from: NodeId, to: NodeId },
    /// Close the link the message came on.
    CloseThis,
    /// This node lost slots it still holds keys in: delete them.
    DeleteSlotKeys(Vec<u16>),
    /// This node won an election: stop replicating, serve as a master.
    Promote,
    /// This node is now a replica of the node: replicate from it.
    Follow(NodeId),
    /// A replica asked for a manual failover: hold the writers, wait for the writes in
    /// flight, then answer on this link with a PING (PAUSED, the offset reached).
    PauseForFailover,
    /// The manual failover ended on this (former) master: the held writers go on.
    ResumeWrites,
    /// A message published on another node: deliver it to this node's subscribers.
    Deliver {
        shard: bool,
        channel: Vec<u8>,
        message: Vec<u8>,
    },
}

/// The result of a state transition.
#[derive(Debug, Default)]
pub struct Outcome {
    pub actions: Vec<Action>,
    /// nodes.conf must be rewritten (and synced) before anything else is answered.
    pub save: bool,
}

impl Outcome {
    /// Takes back the FAILOVER_AUTH_ACKs among the actions (their `lastVoteEpoch` could not
    /// be saved: `Cluster::process_message`); whether there was one.
    pub fn withhold_votes(&mut self) -> bool {
        let before = self.actions.len();
        self.actions.retain(|a| {
            !matches!(a, Action::Send(_, m) | Action::Reply(m) | Action::Broadcast(m)
                if matches!(m.body, Body::FailoverAuthAck))
        });
        self.actions.len() != before
    }
}

/// Redis's `clusterProcessPacket` for a decoded message.
pub fn process(st: &mut State, env: &Env, link: &LinkCtx, msg: &Msg) -> Outcome {
    let mut out = Outcome::default();
    let h = &msg.header;
    // A sender whose name no node can have (Redis's `verifyClusterNodeId` rule) is not
    // listened to: its name would enter the table, and nodes.conf, on a handshake.
    if super::bus::NodeName::parse(&h.sender.0).is_err() {
        return out;
    }
    let sender_id = h.sender.0;
    let sender = st.nodes.contains_key(&sender_id).then_some(sender_id);
    let mut sender_config_epoch = 0;
    if let Some(s) = sender {
        let n = st.nodes.get_mut(&s).expect("looked up");
        n.bus.data_received_ms = env.now_ms;
        if !n.has(node_flag::HANDSHAKE) {
            sender_config_epoch = h.config_epoch;
            if sender_config_epoch > n.config_epoch {
                n.config_epoch = sender_config_epoch;
                out.save = true;
            }
            n.bus.repl_offset = h.offset;
            if h.current_epoch > st.current_epoch {
                st.current_epoch = h.current_epoch;
            }
            super::failover::paused_offset(st, env, &s, msg);
        }
    }
    match &msg.body {
        Body::Ping(p) | Body::Meet(p) => {
            let meet = matches!(msg.body, Body::Meet(_));
            // A MEET names this node's address as the peer reached it (a PING too while
            // this node knows no address of its own), unless an address is announced.
            if (meet || st.me().ip.is_empty())
                && env.announce_ip.is_empty()
                && !link.local_ip.is_empty()
                && st.me().ip != link.local_ip
            {
                st.me_mut().ip.clone_from(&link.local_ip);
                out.save = true;
            }
            if sender.is_none() && meet {
                let mut n = Node::new(super::slots::random_id(), node_flag::HANDSHAKE);
                n.ip = sender_ip(h, link);
                n.port = h.port;
                n.cport = h.cport;
                n.bus.pport = h.pport;
                n.bus.ctime_ms = env.now_ms;
                st.nodes.insert(n.id, n);
                out.save = true;
                // A MEET's gossip is trusted: the peer asked this node in.
                gossip(st, env, None, &p.gossip, &mut out);
            }
            let pong = outgoing::ping(st, env, PingKind::Pong, None);
            out.actions.push(Action::Reply(pong));
            view(st, env, link, msg, sender, sender_config_epoch, &mut out);
        }
        Body::Pong(_) => view(st, env, link, msg, sender, sender_config_epoch, &mut out),
        Body::Fail { about } if sender.is_some() => {
            if let Some(n) = st.nodes.get_mut(&about.0) {
                if !n.has(node_flag::FAIL | node_flag::MYSELF) {
                    n.flags = (n.flags | node_flag::FAIL) & !node_flag::PFAIL;
                    n.bus.fail_time_ms = env.now_ms;
                    out.save = true;
                }
            }
        }
        Body::Update(u) => {
            let (Some(_), Some(n)) = (sender, st.nodes.get(&u.nodename.0)) else {
                return out;
            };
            if n.config_epoch >= u.config_epoch {
                return out;
            }
            let id = n.id;
            if n.has(node_flag::SLAVE) {
                set_master_role(st, &id);
            }
            st.nodes.get_mut(&id).expect("looked up").config_epoch = u.config_epoch;
            out.save = true;
            update_slots(st, &id, u.config_epoch, &u.slots, &mut out);
        }
        Body::FailoverAuthRequest => {
            if let Some(s) = sender {
                super::failover::vote(st, env, &s, msg, &mut out);
            }
        }
        Body::FailoverAuthAck => {
            if let Some(s) = sender {
                super::failover::ack(st, &s, msg);
            }
        }
        Body::Publish(p) | Body::PublishShard(p) if sender.is_some() => {
            out.actions.push(Action::Deliver {
                shard: matches!(msg.body, Body::PublishShard(_)),
                channel: p.channel.clone(),
                message: p.message.clone(),
            });
        }
        Body::MfStart => {
            if let Some(s) = sender {
                super::failover::mfstart(st, env, &s, &mut out);
            }
        }
        // Modules' messages are not handled: ignored, as a node without modules would.
        _ => {}
    }
    out
}

/// The address of a message's sender: the one it announces, or the link's peer address
/// (Redis's `nodeIp2String`; an announced address that is not one is ignored).
fn sender_ip(h: &Header, link: &LinkCtx) -> String {
    address_text(h.myip.text()).unwrap_or_else(|| link.peer_ip.clone())
}

/// An address a peer sent (a header's `myip`, a gossip section's `ip`) as text, if it can
/// be one: an IP address or a host name, so that CLUSTER NODES and nodes.conf, whose lines
/// it enters, keep their form. Redis copies the bytes as sent.
fn address_text(b: &[u8]) -> Option<String> {
    let ok = |c: &u8| c.is_ascii_alphanumeric() || b".:-_%".contains(c);
    (!b.is_empty() && b.iter().all(ok)).then(|| String::from_utf8_lossy(b).into_owned())
}

/// A hostname a peer's extension carries, if it keeps CLUSTER NODES' and nodes.conf's form
/// (letters, digits, `-`, `.`, `_`; the characters Redis accepts for
/// `cluster-announce-hostname`); another is taken as no hostname.
fn hostname_text(b: &[u8]) -> Option<String> {
    let ok = |c: &u8| c.is_ascii_alphanumeric() || b".-_".contains(c);
    b.iter()
        .all(ok)
        .then(|| String::from_utf8_lossy(b).into_owned())
}

/// Redis's `nodeUpdateAddressIfNeeded`: the node's address from a message it sent on
/// another link than this node's link to it; a changed address drops that link.
fn update_address(st: &mut State, id: &NodeId, link: &LinkCtx, h: &Header, out: &mut Outcome) {
    if !link.inbound && link.node == Some(*id) {
        return;
    }
    let ip = sender_ip(h, link);
    let Some(n) = st.nodes.get_mut(id) else {
        return;
    };
    if n.ip == ip && n.port == h.port && n.cport == h.cport && n.bus.pport == h.pport {
        return;
    }
    n.ip = ip;
    n.port = h.port;
    n.cport = h.cport;
    n.bus.pport = h.pport;
    n.flags &= !node_flag::NOADDR;
    out.actions.push(Action::Drop(*id));
    out.save = true;
}

/// Redis's `clusterSetNodeAsMaster`.
fn set_master_role(st: &mut State, id: &NodeId) {
    let myself = st.myself;
    let Some(n) = st.nodes.get_mut(id) else {
        return;
    };
    if n.has(node_flag::MASTER) {
        return;
    }
    if n.master.take().is_some() && *id != myself {
        n.flags |= node_flag::MIGRATE_TO;
    }
    n.flags = (n.flags & !node_flag::SLAVE) | node_flag::MASTER;
}

/// The PING/PONG/MEET part of `clusterProcessPacket`: handshake completion, the sender's
/// role, master and slots, config epoch collisions, gossip and extensions.
fn view(
    st: &mut State,
    env: &Env,
    link: &LinkCtx,
    msg: &Msg,
    sender: Option<NodeId>,
    sender_config_epoch: u64,
    out: &mut Outcome,
) {
    let h = &msg.header;
    let is_pong = matches!(msg.body, Body::Pong(_));
    if let (false, Some(lid)) = (link.inbound, link.node) {
        let Some(ln) = st.nodes.get(&lid) else {
            return;
        };
        if ln.has(node_flag::HANDSHAKE) {
            if let Some(s) = sender {
                // Already known under its real name: take the address, forget the
                // handshake node (and its link).
                update_address(st, &s, link, h, out);
                st.forget(&lid);
                out.actions.push(Action::Drop(lid));
                out.save = true;
                return;
            }
            let mut n = st.nodes.remove(&lid).expect("looked up");
            n.id = h.sender.0;
            n.flags &= !node_flag::HANDSHAKE;
            n.flags |= h.flags & (node_flag::MASTER | node_flag::SLAVE);
            st.nodes.insert(n.id, n);
            out.actions.push(Action::Renamed {
                from: lid,
                to: h.sender.0,
            });
            out.save = true;
        } else if lid != h.sender.0 {
            // Someone else answers at this node's address: the address is stale.
            let n = st.nodes.get_mut(&lid).expect("looked up");
            n.flags |= node_flag::NOADDR;
            n.ip.clear();
            n.port = 0;
            n.cport = 0;
            n.bus.pport = 0;
            out.actions.push(Action::CloseThis);
            out.save = true;
            return;
        }
    }
    // As in Redis, `sender` is who was known when the message arrived: a PONG completing
    // a handshake updates only the pong time; the next message brings the rest.
    if let Some(s) = sender {
        let n = st.nodes.get_mut(&s).expect("known");
        n.flags = (n.flags & !node_flag::NOFAILOVER) | (h.flags & node_flag::NOFAILOVER);
        if matches!(msg.body, Body::Ping(_)) && !n.has(node_flag::HANDSHAKE) {
            update_address(st, &s, link, h, out);
        }
    }
    if let (false, true, Some(lid)) = (link.inbound, is_pong, link.node) {
        let lid = if st.nodes.contains_key(&lid) {
            lid
        } else {
            h.sender.0
        };
        if let Some(n) = st.nodes.get_mut(&lid) {
            n.pong_received_ms = env.now_ms;
            n.ping_sent_ms = 0;
            if n.has(node_flag::PFAIL) {
                n.flags &= !node_flag::PFAIL;
                out.save = true;
            } else if n.has(node_flag::FAIL) {
                clear_failure_if_needed(st, env, &lid, out);
            }
        }
    }
    let Some(s) = sender else {
        return;
    };
    role(st, &s, h, out);
    let sender_master = {
        let n = &st.nodes[&s];
        if n.has(node_flag::MASTER) {
            Some(s)
        } else {
            n.master
        }
    };
    let dirty = sender_master.is_some_and(|m| bitmap_of(st, &m) != h.myslots);
    if dirty && st.nodes[&s].has(node_flag::MASTER) {
        update_slots(st, &s, sender_config_epoch, &h.myslots, out);
    }
    if dirty {
        // The sender claims slots a newer configuration gives to another node: tell it.
        let stale = h.myslots.iter().find_map(|slot| {
            let o = st.owner[usize::from(slot)]?;
            (o != s && st.nodes.get(&o)?.config_epoch > sender_config_epoch).then_some(o)
        });
        if let Some(owner) = stale {
            if let Some(m) = outgoing::update(st, env, &owner) {
                out.actions.push(Action::Send(s, m));
            }
        }
    }
    if st.me().has(node_flag::MASTER)
        && st.nodes[&s].has(node_flag::MASTER)
        && sender_config_epoch == st.me().config_epoch
    {
        config_epoch_collision(st, &s, out);
    }
    if let Some(p) = msg.ping() {
        gossip(st, env, Some(s), &p.gossip, out);
        let mut hostname = String::new();
        for e in &p.exts {
            if let Ok(ExtView::Hostname(name)) = e.view() {
                hostname = hostname_text(name).unwrap_or_default();
            }
        }
        let n = st.nodes.get_mut(&s).expect("known");
        if n.hostname != hostname {
            n.hostname = hostname;
            out.save = true;
        }
    }
}

/// The role switch part: a master that now names a master is a replica (and loses its
/// slots); a replica's master is recorded.
fn role(st: &mut State, s: &NodeId, h: &Header, out: &mut Outcome) {
    if h.slaveof.is_null() {
        if !st.nodes[s].has(node_flag::MASTER) {
            set_master_role(st, s);
            out.save = true;
        }
        return;
    }
    if st.nodes[s].has(node_flag::MASTER) {
        for o in st.owner.iter_mut() {
            if o.as_ref() == Some(s) {
                *o = None;
            }
        }
        let n = st.nodes.get_mut(s).expect("known");
        n.flags = (n.flags & !(node_flag::MASTER | node_flag::MIGRATE_TO)) | node_flag::SLAVE;
        out.save = true;
    }
    let master = h.slaveof.0;
    if st.nodes.contains_key(&master) && st.nodes[s].master != Some(master) {
        st.nodes.get_mut(s).expect("known").master = Some(master);
        st.add_replica(&master);
        out.save = true;
    }
}

/// Redis's `clusterUpdateSlotsConfigWith`: `sender` claims `slots` with `epoch`; each slot
/// that is unassigned, or owned by a node with an older config epoch, becomes the
/// sender's (slots being imported are left to the operator). Slots this node loses with
/// keys in them are to be emptied.
pub fn update_slots(
    st: &mut State,
    sender: &NodeId,
    epoch: u64,
    slots: &SlotBitmap,
    out: &mut Outcome,
) {
    if *sender == st.myself {
        return;
    }
    let me = st.me();
    let curmaster = if me.has(node_flag::MASTER) {
        Some(st.myself)
    } else {
        me.master
    };
    let mut lost = Vec::new();
    let mut migrated = 0;
    for slot in slots.iter() {
        let i = usize::from(slot);
        let owner = st.owner[i];
        if owner == Some(*sender) || st.importing.contains_key(&slot) {
            continue;
        }
        let older = match owner.and_then(|o| st.nodes.get(&o)) {
            None => true,
            Some(o) => o.config_epoch < epoch,
        };
        if !older {
            continue;
        }
        if owner == Some(st.myself) {
            lost.push(slot);
        }
        if owner.is_some() && owner == curmaster {
            migrated += 1;
        }
        st.owner[i] = Some(*sender);
        out.save = true;
    }
    // The master this node serves (itself or its master) lost its last slot to the
    // sender: this node follows the sender (a failed-over master rejoins as a replica).
    if curmaster.is_some_and(|cm| migrated > 0 && st.slot_count(&cm) == 0) {
        st.become_replica_of(*sender);
        out.actions.push(Action::Follow(*sender));
        // Redis's clusterSetMaster ends a manual failover: the paused writers, now on a
        // replica, are redirected to the new master.
        super::failover::manual_end_on_master(st, out);
    } else if !lost.is_empty() {
        out.actions.push(Action::DeleteSlotKeys(lost));
    }
}

/// Redis's `clusterHandleConfigEpochCollision`: of two masters with one config epoch, the
/// one with the smaller name takes a new epoch.
fn config_epoch_collision(st: &mut State, sender: &NodeId, out: &mut Outcome) {
    if st.nodes[sender].config_epoch != st.me().config_epoch || sender <= &st.myself {
        return;
    }
    st.current_epoch += 1;
    let e = st.current_epoch;
    st.me_mut().config_epoch = e;
    out.save = true;
}

/// Redis's `clusterProcessGossipSection`: failure reports from masters, pong times of
/// healthy nodes, new addresses of unreachable nodes, and nodes learned (known by name,
/// so no MEET: the cron connects and PINGs them).
fn gossip(
    st: &mut State,
    env: &Env,
    sender: Option<NodeId>,
    sections: &[Gossip],
    out: &mut Outcome,
) {
    let sender_is_master = sender.is_some_and(|s| st.nodes[&s].has(node_flag::MASTER));
    let failing = node_flag::FAIL | node_flag::PFAIL;
    for g in sections {
        let id = g.nodename.0;
        let forgotten = st.forgotten.get(&id).is_some_and(|t| *t > env.now_ms);
        let ip = address_text(g.ip.text());
        if let std::collections::btree_map::Entry::Vacant(slot) = st.nodes.entry(id) {
            if sender.is_some()
                && !forgotten
                && g.flags & node_flag::NOADDR == 0
                && super::bus::NodeName::parse(&id).is_ok()
                && ip.is_some()
            {
                let mut n = Node::new(id, g.flags & !(node_flag::MYSELF | node_flag::MEET));
                n.ip = ip.unwrap_or_default();
                n.port = g.port;
                n.cport = g.cport;
                n.bus.pport = g.pport;
                n.bus.ctime_ms = env.now_ms;
                slot.insert(n);
                out.save = true;
            }
            continue;
        }
        if let (true, Some(s)) = (sender_is_master, sender) {
            if id != st.myself {
                if g.flags & failing != 0 {
                    add_failure_report(st, &id, s, env.now_ms);
                    mark_failing_if_needed(st, env, &id, out);
                } else {
                    st.nodes
                        .get_mut(&id)
                        .expect("known")
                        .bus
                        .fail_reports
                        .retain(|(r, _)| *r != s);
                }
            }
        }
        let n = st.nodes.get_mut(&id).expect("known");
        if g.flags & failing == 0 && n.ping_sent_ms == 0 && n.bus.fail_reports.is_empty() {
            let pong = u64::from(g.pong_received) * 1000;
            if pong <= env.now_ms + 500 && pong > n.pong_received_ms {
                n.pong_received_ms = pong;
            }
        }
        let Some(ip) = ip else {
            continue;
        };
        if n.has(failing)
            && g.flags & (node_flag::NOADDR | failing) == 0
            && (!n.ip.eq_ignore_ascii_case(&ip) || n.port != g.port || n.cport != g.cport)
        {
            n.ip = ip;
            n.port = g.port;
            n.cport = g.cport;
            n.bus.pport = g.pport;
            n.flags &= !node_flag::NOADDR;
            out.actions.push(Action::Drop(id));
        }
    }
}

/// Records (or refreshes) `reporter`'s report that `id` is failing.
pub fn add_failure_report(st: &mut State, id: &NodeId, reporter: NodeId, now_ms: u64) {
    let Some(n) = st.nodes.get_mut(id) else {
        return;
    };
    match n.bus.fail_reports.iter_mut().find(|(r, _)| *r == reporter) {
        Some(r) => r.1 = now_ms,
        None => n.bus.fail_reports.push((reporter, now_ms)),
    }
}

/// Redis's `clusterNodeFailureReportsCount`: the reports younger than twice the node
/// timeout (older ones are dropped).
pub fn failure_reports(st: &mut State, env: &Env, id: &NodeId) -> usize {
    let max_age = env.node_timeout_ms.saturating_mul(2);
    let Some(n) = st.nodes.get_mut(id) else {
        return 0;
    };
    n.bus
        .fail_reports
        .retain(|(_, t)| env.now_ms.saturating_sub(*t) <= max_age);
    n.bus.fail_reports.len()
}

/// Redis's `markNodeAsFailingIfNeeded`: a node in PFAIL becomes FAIL when a majority of
/// the masters serving slots (this node counting itself if a master) report it; the FAIL
/// is broadcast so every reachable node agrees.
pub fn mark_failing_if_needed(st: &mut State, env: &Env, id: &NodeId, out: &mut Outcome) {
    let quorum = st.size() / 2 + 1;
    match st.nodes.get(id) {
        Some(n) if n.has(node_flag::PFAIL) && !n.has(node_flag::FAIL) => {}
        _ => return,
    }
    let mut failures = failure_reports(st, env, id);
    if st.me().has(node_flag::MASTER) {
        failures += 1;
    }
    if failures < quorum {
        return;
    }
    let n = st.nodes.get_mut(id).expect("checked");
    n.flags = (n.flags & !node_flag::PFAIL) | node_flag::FAIL;
    n.bus.fail_time_ms = env.now_ms;
    eprintln!(
        "strata-server: cluster: marking node {} as failing (quorum reached)",
        id_str(id)
    );
    out.actions
        .push(Action::Broadcast(outgoing::fail(st, env, *id)));
    out.save = true;
}

/// Redis's `clearNodeFailureIfNeeded`, when a node in FAIL answers again: a replica or a
/// master without slots is cleared at once; a master with slots once its FAIL is older
/// than twice the node timeout (nobody took its slots over).
pub fn clear_failure_if_needed(st: &mut State, env: &Env, id: &NodeId, out: &mut Outcome) {
    let slots = st.slot_count(id);
    let Some(n) = st.nodes.get_mut(id) else {
        return;
    };
    let old = env.now_ms.saturating_sub(n.bus.fail_time_ms) > env.node_timeout_ms * 2;
    if n.has(node_flag::SLAVE) || slots == 0 || (n.has(node_flag::MASTER) && old) {
        n.flags &= !node_flag::FAIL;
        out.save = true;
    }
}
