//! Replica elections (Redis 7.0's `clusterHandleSlaveFailover`,
//! `clusterSendFailoverAuthIfNeeded` and `clusterFailoverReplaceYourMaster`): when a
//! replica's master is FAIL, the replica waits 500-1000 ms plus a second per rank (replicas
//! with a greater replication offset go first), takes a new epoch and asks the masters for
//! their vote; a master serving slots votes once per epoch, at most once per two node
//! timeouts per failed master, and only if no slot the replica claims belongs to a newer
//! config; `lastVoteEpoch` is saved (fsynced) before the vote leaves. With votes from a
//! majority of the masters serving slots, the replica takes its master's slots with the
//! election's epoch, stops replicating and tells everyone with a PONG. A replica whose
//! replication link has been down or silent for too long (`cluster-replica-validity-factor`)
//! does not run, unless the failover is manual.
//!
//! Manual failover (CLUSTER FAILOVER without an option; Redis's `clusterSendMFStart`,
//! `clusterHandleManualFailover`, `manualFailoverCheckTimeout`): the replica sends MFSTART
//! to its master; the master holds its writers and answers with a PING whose header has
//! PAUSED and its replication offset once no write is in flight; the replica, once its
//! own offset reaches that one, runs an election at once whose request carries FORCEACK
//! (masters vote though its master is up). The master's writers go on when it learns the
//! new configuration and becomes a replica (they are then redirected), or after 5 s.
//! Pure functions returning [`Action`]s.
//!
//! Layer: cluster (a building block below commands).

use super::bus::{Body, Msg};
use super::outgoing::{self, Env, PingKind};
use super::packet::{Action, Outcome};
use super::slots::{node_flag, ManualFailover, NodeId, State};

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
    if !forced && !data_recent(env) {
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

/// Whether this replica's data is recent enough for it to run for election (Redis 7.0's
/// `cluster-replica-validity-factor` check): its link to the master may have been silent
/// or down for the node timeout (the time the master took to be flagged FAIL) plus
/// `repl-ping-replica-period` plus the node timeout times the factor, no longer. A factor
/// of 0 makes every replica eligible. Manual and forced failovers skip the check.
pub fn data_recent(env: &Env) -> bool {
    if env.validity_factor == 0 {
        return true;
    }
    let mut age = env.data_age_ms;
    if age > env.node_timeout_ms {
        age -= env.node_timeout_ms;
    }
    let allowed = env
        .node_timeout_ms
        .saturating_mul(env.validity_factor)
        .saturating_add(env.repl_ping_period_ms);
    age <= allowed
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
    st.manual = Default::default();
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

/// CLUSTER FAILOVER without an option, on a replica: MFSTART goes to the master with the
/// next cron step; abandoned after [`MANUAL_FAILOVER_MS`].
pub fn manual_start(st: &mut State, now_ms: u64) {
    st.election = Default::default();
    st.manual = ManualFailover {
        end_ms: now_ms + MANUAL_FAILOVER_MS,
        start_pending: true,
        ..Default::default()
    };
    eprintln!("strata-server: cluster: Manual failover user request accepted.");
}

/// MFSTART from `sender` (Redis's handling in `clusterProcessPacket`): accepted from a
/// replica of this master only. The link layer holds the writers, waits for the writes in
/// flight, and answers with a PING carrying PAUSED and the offset then reached.
pub fn mfstart(st: &mut State, env: &Env, sender: &NodeId, out: &mut Outcome) {
    let me = st.myself;
    let is_my_replica = st.nodes.get(sender).is_some_and(|n| n.master == Some(me));
    if !is_my_replica || !st.me().has(node_flag::MASTER) {
        return;
    }
    st.manual = ManualFailover {
        end_ms: env.now_ms + MANUAL_FAILOVER_MS,
        replica: Some(*sender),
        ..Default::default()
    };
    eprintln!(
        "strata-server: cluster: Manual failover requested by replica {}.",
        String::from_utf8_lossy(sender)
    );
    out.actions.push(Action::PauseForFailover);
}

/// A header from `sender` on a replica in a manual failover: the master's offset, taken
/// from the first header its master sends while paused.
pub fn paused_offset(st: &mut State, env: &Env, sender: &NodeId, msg: &Msg) {
    let me = st.me();
    let from_my_master = me.has(node_flag::SLAVE) && me.master == Some(*sender);
    let paused = msg.header.mflags[0] & super::bus::header::mflag0::PAUSED != 0;
    if st.manual.end_ms != 0 && from_my_master && paused && st.manual.master_offset.is_none() {
        st.manual.master_offset = Some(msg.header.offset);
        eprintln!(
            "strata-server: cluster: Received replication offset for paused master manual \
             failover: {}",
            msg.header.offset
        );
        manual_step(st, env, &mut Outcome::default());
    }
}

/// The manual failover's part of the cron (Redis's `manualFailoverCheckTimeout` and
/// `clusterHandleManualFailover`): abandoned past its end (a paused master's writers go
/// on); on the replica, MFSTART sent, and the election started once this replica's offset
/// reached the paused master's.
pub fn manual_step(st: &mut State, env: &Env, out: &mut Outcome) {
    let mf = &st.manual;
    if mf.end_ms == 0 {
        return;
    }
    if mf.end_ms < env.now_ms {
        eprintln!("strata-server: cluster: Manual failover timed out.");
        if mf.replica.is_some() {
            out.actions.push(Action::ResumeWrites);
        }
        st.manual = ManualFailover::default();
        return;
    }
    if mf.start_pending {
        st.manual.start_pending = false;
        if let Some(m) = st.me().master.filter(|_| st.me().has(node_flag::SLAVE)) {
            let start = Msg::new(outgoing::header(st, env), Body::MfStart);
            out.actions.push(Action::Send(m, start));
        }
        return;
    }
    let mf = &st.manual;
    if mf.can_start || mf.replica.is_some() {
        return;
    }
    // Redis waits for the exact offset; a replica past it (the master's replication
    // pings) has every write the master acknowledged before it paused.
    if mf.master_offset.is_some_and(|o| env.repl_offset >= o) {
        eprintln!(
            "strata-server: cluster: All master replication stream processed, manual \
             failover can start."
        );
        st.manual.can_start = true;
        let end = st.manual.end_ms;
        force(st, env.now_ms);
        st.election.forced_until_ms = end;
    }
}

/// A master that paused its writers for a manual failover and is now a replica of the
/// new master (or gave it up): its writers go on.
pub fn manual_end_on_master(st: &mut State, out: &mut Outcome) {
    if st.manual.replica.is_some() {
        st.manual = ManualFailover::default();
        out.actions.push(Action::ResumeWrites);
    }
}
