//! Replica elections (Redis 7.0's `clusterHandleSlaveFailover`,
//! `clusterSendFailoverAuthIfNeeded` and `clusterFailoverReplaceYourMaster`): when a
//! replica's master is FAIL, the replica waits 500-1000 ms plus a second per rank (replicas
//! with a greater replication offset go first), takes a new epoch and asks the masters for
//! their vote; a master serving slots votes once per epoch, at most once per two node
//! timeouts per failed master, and only if no slot the replica claims belongs to a newer
//! config; `lastVoteEpoch` is saved (fsynced) before the vote leaves. With votes from a
//! majority of the masters serving slots, the replica takes its master's slots with the
//! election's epoch, stops replicating and tells everyone with a PONG. Manual failover
//! (MFSTART, CLUSTER FAILOVER) is not built. Pure functions returning [`Action`]s.
//!
//! Layer: cluster (a building block below commands).

use super::bus::{Body, Msg};
use super::outgoing::{self, Env, PingKind};
use super::packet::{Action, Outcome};
use super::slots::{node_flag, NodeId, State};

/// This replica's rank: the other replicas of its master (able to fail over) with a
/// greater replication offset.
fn rank(st: &State, my_offset: u64) -> usize {
    let Some(m) = st.me().master else {
        return 0;
    };
    st.replicas_of(&m)
        .iter()
        .filter(|r| {
            r.id != st.myself && !r.has(node_flag::NOFAILOVER) && r.bus.repl_offset > my_offset
        })
        .count()
}

/// The election step of the cron, on a replica whose master is FAIL.
pub fn replica_step(st: &mut State, env: &Env) -> Outcome {
    let mut out = Outcome::default();
    let now = env.now_ms;
    let forced = st.election.forced_until_ms > now;
    if st.election.forced_until_ms != 0 && !forced {
        // A forced failover not won in time is abandoned.
        st.election = Default::default();
        return out;
    }
    let me = st.me();
    let Some(master) = me.master.filter(|_| me.has(node_flag::SLAVE)) else {
        return out;
    };
    let failed = st
        .nodes
        .get(&master)
        .is_some_and(|m| m.has(node_flag::FAIL));
    if !(failed || forced) || me.has(node_flag::NOFAILOVER) || st.slot_count(&master) == 0 {
        return out;
    }
    let auth_timeout = (env.node_timeout_ms * 2).max(2000);
    let retry = auth_timeout * 2;
    let e = &st.election;
    let age = now.saturating_sub(e.auth_time_ms);
    if e.auth_time_ms == 0 || (now >= e.auth_time_ms && age > retry) {
        let r = rank(st, env.repl_offset);
        let delay = 500 + crate::random::below(500) as u64 + r as u64 * 1000;
        st.election = super::slots::Election {
            auth_time_ms: now + delay,
            count: 0,
            sent: false,
            rank: r,
            epoch: 0,
            forced_until_ms: 0,
        };
        return out;
    }
    if !st.election.sent && !forced {
        let r = rank(st, env.repl_offset);
        if r > st.election.rank {
            st.election.auth_time_ms += (r - st.election.rank) as u64 * 1000;
            st.election.rank = r;
        }
    }
    if now < st.election.auth_time_ms || age > auth_timeout {
        return out;
    }
    if !st.election.sent {
        st.current_epoch += 1;
        st.election.epoch = st.current_epoch;
        st.election.sent = true;
        let mut h = outgoing::header(st, env);
        if forced {
            h.mflags[0] |= super::bus::header::mflag0::FORCEACK;
        }
        let request = Msg::new(h, Body::FailoverAuthRequest);
        out.actions.push(Action::Broadcast(request));
        out.save = true;
        return out;
    }
    // A majority: more than half of the masters serving slots.
    if st.election.count > st.size() / 2 {
        replace_master(st, env, master, &mut out);
    }
    out
}

/// CLUSTER FAILOVER FORCE: an election now, whatever the master's state; the vote request
/// asks masters to vote even for a master they do not see failing. Abandoned after 5 s.
pub fn force(st: &mut State, now_ms: u64) {
    st.election = super::slots::Election {
        auth_time_ms: now_ms,
        forced_until_ms: now_ms + MANUAL_FAILOVER_MS,
        ..Default::default()
    };
}

/// How long a manual failover may take (Redis's `CLUSTER_MF_TIMEOUT`).
pub const MANUAL_FAILOVER_MS: u64 = 5000;

/// CLUSTER FAILOVER TAKEOVER (Redis's `clusterBumpConfigEpochWithoutConsensus` then
/// `clusterFailoverReplaceYourMaster`): a new epoch without a vote, and the master's slots.
/// The caller promotes the replication side.
pub fn takeover(st: &mut State, env: &Env) -> Outcome {
    let mut out = Outcome::default();
    let Some(master) = st.me().master else {
        return out;
    };
    let max = st.max_epoch();
    if st.me().config_epoch == 0 || st.me().config_epoch != max {
        st.current_epoch += 1;
    }
    st.election.epoch = st.current_epoch;
    replace_master(st, env, master, &mut out);
    out
}

/// Redis's `clusterFailoverReplaceYourMaster`.
fn replace_master(st: &mut State, env: &Env, old: NodeId, out: &mut Outcome) {
    let me = st.myself;
    let epoch = st.election.epoch;
    let n = st.me_mut();
    n.flags = (n.flags & !node_flag::SLAVE) | node_flag::MASTER;
    n.master = None;
    if n.config_epoch < epoch {
        n.config_epoch = epoch;
    }
    for o in st.owner.iter_mut() {
        if *o == Some(old) {
            *o = Some(me);
        }
    }
    st.election = Default::default();
    eprintln!("strata-server: cluster: failover won, this node is now a master");
    out.actions.push(Action::Promote);
    let pong = outgoing::ping(st, env, PingKind::Pong, None);
    out.actions.push(Action::Broadcast(pong));
    out.save = true;
}

/// A master's answer to FAILOVER_AUTH_REQUEST from `sender` (Redis's
/// `clusterSendFailoverAuthIfNeeded`): the vote, after `lastVoteEpoch` is saved.
pub fn vote(st: &mut State, env: &Env, sender: &NodeId, msg: &Msg, out: &mut Outcome) {
    let h = &msg.header;
    let me = st.myself;
    if st.me().has(node_flag::SLAVE) || st.slot_count(&me) == 0 {
        return;
    }
    if h.current_epoch < st.current_epoch || st.last_vote_epoch == st.current_epoch {
        return;
    }
    let Some(node) = st.nodes.get(sender) else {
        return;
    };
    let force = h.mflags[0] & super::bus::header::mflag0::FORCEACK != 0;
    let Some(master) = node.master.filter(|_| !node.has(node_flag::MASTER)) else {
        return;
    };
    let Some(m) = st.nodes.get(&master) else {
        return;
    };
    if !m.has(node_flag::FAIL) && !force {
        return;
    }
    if env.now_ms.saturating_sub(m.bus.voted_time_ms) < env.node_timeout_ms * 2 {
        return;
    }
    let newer = h.myslots.iter().any(|slot| {
        st.owner[usize::from(slot)]
            .and_then(|o| st.nodes.get(&o))
            .is_some_and(|o| o.config_epoch > h.config_epoch)
    });
    if newer {
        return;
    }
    st.last_vote_epoch = st.current_epoch;
    if let Some(m) = st.nodes.get_mut(&master) {
        m.bus.voted_time_ms = env.now_ms;
    }
    out.save = true;
    let ack = Msg::new(outgoing::header(st, env), Body::FailoverAuthAck);
    out.actions.push(Action::Send(*sender, ack));
}

/// FAILOVER_AUTH_ACK from `sender`: a vote if it is a master serving slots and its epoch
/// is the election's or newer.
pub fn ack(st: &mut State, sender: &NodeId, msg: &Msg) {
    let Some(n) = st.nodes.get(sender) else {
        return;
    };
    if n.has(node_flag::MASTER)
        && st.slot_count(sender) > 0
        && msg.header.current_epoch >= st.election.epoch
        && st.election.sent
    {
        st.election.count += 1;
    }
}
