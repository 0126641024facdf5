//! The cluster bus's periodic work (Redis 7.0's `clusterCron`, every 100 ms), and what
//! happens when an outbound link connects or fails to: handshakes that did not complete
//! within the node timeout are dropped, nodes without a link get one, a random node is
//! pinged every second and any node not pinged for half the node timeout at once, a link
//! silent for half the timeout while a ping waits is reopened, and a node that has not
//! answered a ping within the node timeout is flagged PFAIL; on a replica, the manual
//! failover, election and replica migration steps follow. A pure function of the state
//! and the clock, returning [`Action`]s as `packet.rs` does.
//!
//! Layer: cluster (a building block below commands).

use super::outgoing::{self, Env, PingKind};
use super::packet::{mark_failing_if_needed, Action, Outcome};
use super::slots::{node_flag, NodeId, State};

/// Cron steps per second (Redis runs `clusterCron` 10 times a second).
pub const STEPS_PER_SECOND: u64 = 10;

/// One cron step; `iteration` counts steps from 0.
pub fn cron(st: &mut State, env: &Env, iteration: u64) -> Outcome {
    let mut out = Outcome::default();
    // Redis's `clusterUpdateMyselfFlags`: NOFAILOVER follows `cluster-replica-no-failover`
    // (peers learn it from this node's headers; elections skip such a replica).
    let no_failover = if env.no_failover {
        node_flag::NOFAILOVER
    } else {
        0
    };
    let me = st.me_mut();
    if me.flags & node_flag::NOFAILOVER != no_failover {
        me.flags = (me.flags & !node_flag::NOFAILOVER) | no_failover;
        out.save = true;
    }
    let now = env.now_ms;
    let timeout = env.node_timeout_ms;
    let handshake_timeout = timeout.max(1000);
    let ids: Vec<NodeId> = st.nodes.keys().copied().collect();
    for id in &ids {
        let n = &st.nodes[id];
        if n.has(node_flag::MYSELF | node_flag::NOADDR) {
            continue;
        }
        if n.has(node_flag::HANDSHAKE) && now.saturating_sub(n.bus.ctime_ms) > handshake_timeout {
            st.forget(id);
            out.actions.push(Action::Drop(*id));
            continue;
        }
        if !n.link_connected {
            out.actions.push(Action::Connect(*id));
        }
    }
    if iteration.is_multiple_of(STEPS_PER_SECOND) {
        // Of five random nodes, ping the one with the oldest pong.
        let candidates: Vec<NodeId> = (0..5)
            .filter_map(|_| ids.get(crate::random::below(ids.len().max(1))).copied())
            .filter(|id| {
                let n = &st.nodes.get(id);
                n.is_some_and(|n| {
                    n.link_connected
                        && n.ping_sent_ms == 0
                        && !n.has(node_flag::MYSELF | node_flag::HANDSHAKE)
                })
            })
            .collect();
        if let Some(id) = candidates
            .iter()
            .min_by_key(|id| st.nodes[*id].pong_received_ms)
        {
            let m = outgoing::ping(st, env, PingKind::Ping, Some(*id));
            out.actions.push(Action::Send(*id, m));
        }
    }
    let mut pfail_changed = false;
    for id in &ids {
        let Some(n) = st.nodes.get(id) else {
            continue;
        };
        if n.has(node_flag::MYSELF | node_flag::NOADDR | node_flag::HANDSHAKE) {
            continue;
        }
        let ping_delay = now.saturating_sub(n.ping_sent_ms);
        let data_delay = now.saturating_sub(n.bus.data_received_ms);
        if n.link_connected
            && now.saturating_sub(n.bus.link_ctime_ms) > timeout
            && n.ping_sent_ms != 0
            && ping_delay > timeout / 2
            && data_delay > timeout / 2
        {
            // Connected but silent: reconnect (the cron reopens the link).
            out.actions.push(Action::Drop(*id));
        }
        if n.link_connected
            && n.ping_sent_ms == 0
            && now.saturating_sub(n.pong_received_ms) > timeout / 2
        {
            let m = outgoing::ping(st, env, PingKind::Ping, Some(*id));
            out.actions.push(Action::Send(*id, m));
            continue;
        }
        if n.ping_sent_ms == 0 {
            continue;
        }
        if ping_delay.min(data_delay) > timeout && !n.has(node_flag::PFAIL | node_flag::FAIL) {
            st.nodes.get_mut(id).expect("present").flags |= node_flag::PFAIL;
            pfail_changed = true;
        }
    }
    if pfail_changed {
        // A master that is the only one serving slots reaches the quorum alone.
        for id in &ids {
            mark_failing_if_needed(st, env, id, &mut out);
        }
    }
    super::failover::manual_step(st, env, &mut out);
    let election = super::failover::replica_step(st, env);
    out.save |= election.save;
    out.actions.extend(election.actions);
    super::replica_migration::step(st, env, &mut out);
    out
}

/// An outbound link to `id` connected (Redis's `clusterLinkConnectHandler`): the first
/// message is a MEET if the node was met by CLUSTER MEET, a PING otherwise; a ping that
/// was already waiting keeps its time, so failure detection is not reset by reconnects.
pub fn connected(st: &mut State, env: &Env, id: &NodeId) -> Outcome {
    let mut out = Outcome::default();
    let Some(n) = st.nodes.get_mut(id) else {
        return out;
    };
    n.link_connected = true;
    n.bus.link_ctime_ms = env.now_ms;
    let old_ping = n.ping_sent_ms;
    let kind = if n.has(node_flag::MEET) {
        PingKind::Meet
    } else {
        PingKind::Ping
    };
    n.flags &= !node_flag::MEET;
    let m = outgoing::ping(st, env, kind, Some(*id));
    if old_ping != 0 {
        if let Some(n) = st.nodes.get_mut(id) {
            n.ping_sent_ms = old_ping;
        }
    }
    out.actions.push(Action::Send(*id, m));
    out
}

/// An outbound link to `id` closed, or could not be opened (`refused`): a node that
/// refuses connections and was never pinged counts as pinged now, so it times out.
pub fn disconnected(st: &mut State, env: &Env, id: &NodeId, refused: bool) {
    if let Some(n) = st.nodes.get_mut(id) {
        n.link_connected = false;
        if refused && n.ping_sent_ms == 0 {
            n.ping_sent_ms = env.now_ms;
        }
    }
}
