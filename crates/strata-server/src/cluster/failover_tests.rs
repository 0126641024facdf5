//! Elections as pure transitions: a master's vote, a replica's schedule, request, count
//! and promotion, and a master demoted when a newer config takes its last slot.

use super::bus::{Body, Msg, NodeName, Ping};
use super::failover::replica_step;
use super::outgoing;
use super::packet::{process, Action};
use super::slots::{node_flag, Node, NodeId, State};
use super::test_fixtures::{env, inbound, A, B, C};

const R: NodeId = [b'r'; 40];

/// Masters A, B, C with a third of the slots each (epochs 1, 2, 3) and R a replica of C,
/// as seen by `me`.
fn cluster(me: NodeId) -> State {
    let mut st = State::new(me);
    for (id, epoch) in [(A, 1), (B, 2), (C, 3)] {
        let mut n = Node::new(id, node_flag::MASTER);
        n.config_epoch = epoch;
        n.link_connected = true;
        st.nodes.entry(id).or_insert(n).config_epoch = epoch;
    }
    let mut r = Node::new(R, node_flag::SLAVE);
    r.master = Some(C);
    r.link_connected = true;
    let e = st.nodes.entry(R).or_insert(r);
    e.flags = (e.flags & node_flag::MYSELF) | node_flag::SLAVE;
    e.master = Some(C);
    for s in 0..16384usize {
        st.owner[s] = Some(match s {
            0..=5460 => A,
            5461..=10922 => B,
            _ => C,
        });
    }
    st.current_epoch = 3;
    st
}

fn request_from_r(epoch: u64) -> Msg {
    let r = cluster(R);
    let mut h = outgoing::header(&r, &env(0));
    h.current_epoch = epoch;
    Msg::new(h, Body::FailoverAuthRequest)
}

#[test]
fn a_master_votes_once_per_epoch_for_a_replica_of_a_failed_master() {
    let mut a = cluster(A);
    // C is not failing: no vote.
    let out = process(&mut a, &env(10_000), &inbound(), &request_from_r(4));
    assert!(out.actions.is_empty());
    a.nodes.get_mut(&C).unwrap().flags |= node_flag::FAIL;
    let out = process(&mut a, &env(10_000), &inbound(), &request_from_r(4));
    assert!(out.save, "lastVoteEpoch is saved before the vote leaves");
    assert_eq!(a.last_vote_epoch, 4);
    match &out.actions[..] {
        [Action::Send(to, m)] => {
            assert_eq!(*to, R);
            assert!(matches!(m.body, Body::FailoverAuthAck));
        }
        other => panic!("{other:?}"),
    }
    // The same epoch again: no second vote.
    let out = process(&mut a, &env(10_100), &inbound(), &request_from_r(4));
    assert!(out.actions.is_empty());
    // A newer epoch within two node timeouts of the last vote for C: still none.
    let out = process(&mut a, &env(10_500), &inbound(), &request_from_r(5));
    assert!(out.actions.is_empty());
    // A replica never votes.
    let mut r2 = cluster(R);
    r2.nodes.get_mut(&C).unwrap().flags |= node_flag::FAIL;
    let mut m = request_from_r(6);
    m.header.sender = NodeName(A);
    assert!(process(&mut r2, &env(20_000), &inbound(), &m)
        .actions
        .is_empty());
}

#[test]
fn a_replica_is_elected_with_a_majority_and_takes_its_master_slots() {
    let mut r = cluster(R);
    assert!(
        replica_step(&mut r, &env(1_000)).actions.is_empty(),
        "master not failing"
    );
    r.nodes.get_mut(&C).unwrap().flags |= node_flag::FAIL;
    let out = replica_step(&mut r, &env(1_000));
    assert!(out.actions.is_empty(), "the request waits 500-1000 ms");
    let at = r.election.auth_time_ms;
    assert!((1_500..2_000).contains(&at), "{at}");
    assert!(replica_step(&mut r, &env(at - 1)).actions.is_empty());
    let out = replica_step(&mut r, &env(at));
    assert!(out.save);
    assert_eq!((r.current_epoch, r.election.epoch), (4, 4));
    assert!(
        matches!(&out.actions[..], [Action::Broadcast(m)] if matches!(m.body, Body::FailoverAuthRequest))
    );
    // One vote of three masters: not enough.
    let ack = |from: NodeId, epoch: u64| {
        let mut h = outgoing::header(&cluster(from), &env(0));
        h.current_epoch = epoch;
        Msg::new(h, Body::FailoverAuthAck)
    };
    process(&mut r, &env(at + 10), &inbound(), &ack(A, 4));
    assert!(replica_step(&mut r, &env(at + 20)).actions.is_empty());
    // A vote from an older epoch does not count.
    process(&mut r, &env(at + 30), &inbound(), &ack(B, 3));
    assert_eq!(r.election.count, 1);
    process(&mut r, &env(at + 30), &inbound(), &ack(B, 4));
    let out = replica_step(&mut r, &env(at + 40));
    assert!(out.actions.contains(&Action::Promote));
    assert!(out
        .actions
        .iter()
        .any(|x| matches!(x, Action::Broadcast(m) if matches!(m.body, Body::Pong(_)))));
    let me = r.me();
    assert!(me.has(node_flag::MASTER) && !me.has(node_flag::SLAVE) && me.master.is_none());
    assert_eq!(me.config_epoch, 4);
    assert_eq!(r.owner[16000], Some(R));
    assert_eq!(r.slot_count(&C), 0);
}

#[test]
fn a_master_whose_last_slot_goes_to_a_newer_config_becomes_its_replica() {
    // C comes back and hears R claim all of C's slots with epoch 4.
    let mut c = cluster(C);
    let mut h = outgoing::header(&cluster(R), &env(0));
    h.sender = NodeName(R);
    h.flags = node_flag::MASTER;
    h.slaveof = NodeName::NULL;
    h.config_epoch = 4;
    h.current_epoch = 4;
    let mut slots = super::bus::SlotBitmap::new();
    slots.set_range(10923, 16383).unwrap();
    h.myslots = slots;
    let out = process(
        &mut c,
        &env(5),
        &inbound(),
        &Msg::new(h, Body::Ping(Ping::default())),
    );
    assert!(out.actions.contains(&Action::Follow(R)));
    assert!(
        !out.actions
            .iter()
            .any(|x| matches!(x, Action::DeleteSlotKeys(_))),
        "the full resync replaces the data"
    );
    let me = c.me();
    assert!(me.has(node_flag::SLAVE) && me.master == Some(R));
    assert_eq!(c.owner[16000], Some(R));
    assert!(c.nodes[&R].has(node_flag::MASTER));
}

#[test]
fn forced_failover_asks_for_forced_votes_and_takeover_needs_none() {
    let mut r = cluster(R);
    super::failover::force(&mut r, 1_000);
    let out = replica_step(&mut r, &env(1_100));
    let request = match &out.actions[..] {
        [Action::Broadcast(m)] => m.clone(),
        other => panic!("{other:?}"),
    };
    let force_ack = super::bus::header::mflag0::FORCEACK;
    assert_ne!(request.header.mflags[0] & force_ack, 0);
    // A master votes although C is not failing, because the request forces it.
    let mut a = cluster(A);
    let out = process(&mut a, &env(10_000), &inbound(), &request);
    assert!(matches!(&out.actions[..], [Action::Send(to, _)] if *to == R));
    // Not won within 5 s: abandoned.
    assert!(replica_step(&mut r, &env(6_100)).actions.is_empty());
    assert_eq!(r.election, Default::default());
    // TAKEOVER: the slots and a new epoch at once.
    let mut r = cluster(R);
    let out = super::failover::takeover(&mut r, &env(7_000));
    assert!(out.actions.contains(&Action::Promote));
    assert_eq!(r.me().config_epoch, 4);
    assert_eq!(r.owner[16000], Some(R));
    assert!(r.me().has(node_flag::MASTER));
}

/// The manual failover's messages as the replica R and its master C exchange them: R's
/// MFSTART, C pausing and answering with PAUSED and its offset, R's election once caught
/// up (its request forcing the votes), C's writers resumed when it follows R.
#[test]
fn manual_failover_pauses_the_master_until_the_replica_caught_up() {
    use super::bus::header::mflag0;
    use super::cron::cron;
    use super::failover::{manual_start, MANUAL_FAILOVER_MS};
    // R asks: MFSTART goes to C with the next cron step.
    let mut r = cluster(R);
    manual_start(&mut r, 1_000);
    let mut e = env(1_050);
    e.repl_offset = 90;
    let out = cron(&mut r, &e, 1);
    let mfstart = out
        .actions
        .iter()
        .find_map(|a| match a {
            Action::Send(to, m) if *to == C && matches!(m.body, Body::MfStart) => Some(m.clone()),
            _ => None,
        })
        .expect("MFSTART sent to the master");
    // A master that is not R's master ignores it.
    let mut a = cluster(A);
    assert!(process(&mut a, &env(1_060), &inbound(), &mfstart)
        .actions
        .is_empty());
    assert_eq!(a.manual, Default::default());
    // C pauses and tells its offset with PAUSED in its headers.
    let mut c = cluster(C);
    let out = process(&mut c, &env(1_060), &inbound(), &mfstart);
    assert!(out.actions.contains(&Action::PauseForFailover));
    assert_eq!(c.manual.replica, Some(R));
    let mut ce = env(1_070);
    ce.repl_offset = 100;
    let ping = outgoing::ping(&mut c, &ce, outgoing::PingKind::Ping, None);
    assert_ne!(ping.header.mflags[0] & mflag0::PAUSED, 0);
    assert_eq!(ping.header.offset, 100);
    // R has the offset but is behind it: no election yet.
    process(&mut r, &e, &inbound(), &ping);
    assert_eq!(r.manual.master_offset, Some(100));
    let out = cron(&mut r, &env(1_100), 2);
    assert!(!r.manual.can_start);
    assert!(!out
        .actions
        .iter()
        .any(|a| matches!(a, Action::Broadcast(m) if matches!(m.body, Body::FailoverAuthRequest))));
    // Caught up: the election runs at once, its request forcing the votes.
    let mut e = env(1_200);
    e.repl_offset = 100;
    let out = cron(&mut r, &e, 3);
    assert!(r.manual.can_start);
    let request = out
        .actions
        .iter()
        .find_map(|a| match a {
            Action::Broadcast(m) if matches!(m.body, Body::FailoverAuthRequest) => Some(m),
            _ => None,
        })
        .expect("vote requested");
    assert_ne!(request.header.mflags[0] & mflag0::FORCEACK, 0);
    // C itself votes (its master is not failing, but the request forces it).
    let out = process(&mut c, &env(10_000), &inbound(), request);
    assert!(out.actions.iter().any(
        |a| matches!(a, Action::Send(to, m) if *to == R && matches!(m.body, Body::FailoverAuthAck))
    ));
    // R, elected, claims C's slots with a newer epoch: C follows R and its writers go on.
    let mut h = outgoing::header(&cluster(R), &env(0));
    h.flags = node_flag::MASTER;
    h.slaveof = NodeName::NULL;
    h.config_epoch = 4;
    h.current_epoch = 4;
    let mut slots = super::bus::SlotBitmap::new();
    slots.set_range(10923, 16383).unwrap();
    h.myslots = slots;
    let out = process(
        &mut c,
        &env(10_100),
        &inbound(),
        &Msg::new(h, Body::Ping(Ping::default())),
    );
    let follow = out.actions.iter().position(|a| *a == Action::Follow(R));
    let resume = out.actions.iter().position(|a| *a == Action::ResumeWrites);
    assert!(follow.is_some() && resume > follow, "{:?}", out.actions);
    assert_eq!(c.manual, Default::default());
    // A master whose replica never finished: its writers go on after the timeout.
    let mut c = cluster(C);
    process(&mut c, &env(20_000), &inbound(), &mfstart);
    let out = cron(&mut c, &env(20_000 + MANUAL_FAILOVER_MS + 1), 4);
    assert!(out.actions.contains(&Action::ResumeWrites));
    assert_eq!(c.manual, Default::default());
}

#[test]
fn a_replica_with_no_failover_set_is_flagged_and_starts_no_election() {
    let mut r = cluster(R);
    r.nodes.get_mut(&C).unwrap().flags |= node_flag::FAIL;
    let mut e = env(1_000);
    e.no_failover = true;
    let out = super::cron::cron(&mut r, &e, 1);
    assert!(r.me().has(node_flag::NOFAILOVER) && out.save);
    assert!(r.describe(r.me()).contains("myself,slave,nofailover"));
    assert_eq!(r.election.auth_time_ms, 0, "no election scheduled");
    // Turned off: the flag goes and the election is scheduled.
    e.no_failover = false;
    e.now_ms = 2_000;
    let out = super::cron::cron(&mut r, &e, 2);
    assert!(!r.me().has(node_flag::NOFAILOVER) && out.save);
    assert_ne!(r.election.auth_time_ms, 0);
}

/// `cluster-replica-validity-factor`: a replica whose link to its failed master has been
/// down longer than the node timeout times the factor plus the ping period (beyond the
/// node timeout the master took to fail) does not run; factor 0 lets it; a forced
/// failover skips the check.
#[test]
fn a_replica_with_stale_data_does_not_run_for_election() {
    use super::failover::{data_recent, force};
    // Node timeout 1 s, factor 10, ping period 10 s: 1 + 10 + 10 = 21 s of link down.
    let at = |age_ms: u64| {
        let mut e = env(1_000);
        e.data_age_ms = age_ms;
        e
    };
    assert!(data_recent(&at(0)));
    assert!(data_recent(&at(21_000)), "the limit itself is still recent");
    assert!(!data_recent(&at(21_001)));
    assert!(!data_recent(&at(u64::MAX)), "a link that never came up");
    let mut zero = at(u64::MAX);
    zero.validity_factor = 0;
    assert!(data_recent(&zero), "factor 0: always eligible");
    let mut one = at(12_001);
    one.validity_factor = 1;
    assert!(!data_recent(&one), "1 + 1 * 1 + 10 s allowed");
    one.data_age_ms = 12_000;
    assert!(data_recent(&one));

    let mut r = cluster(R);
    r.nodes.get_mut(&C).unwrap().flags |= node_flag::FAIL;
    let stale = at(30_000);
    assert!(replica_step(&mut r, &stale).actions.is_empty());
    assert_eq!(r.election.auth_time_ms, 0, "no election scheduled");
    let mut fresh = stale.clone();
    fresh.data_age_ms = 2_000;
    replica_step(&mut r, &fresh);
    assert_ne!(
        r.election.auth_time_ms, 0,
        "recent data: an election is scheduled"
    );
    // Forced: the request leaves at once, however stale the data.
    let mut r = cluster(R);
    force(&mut r, 1_000);
    let out = replica_step(&mut r, &stale);
    assert!(
        matches!(&out.actions[..], [Action::Broadcast(m)] if matches!(m.body, Body::FailoverAuthRequest)),
        "{:?}",
        out.actions
    );
}

/// A vote leaves only once the `lastVoteEpoch` recording it is on disk: with nodes.conf's
/// fsync failing, the master grants no FAILOVER_AUTH_ACK (Redis would exit), and still
/// counts the epoch as voted; once saves work again it votes in a later epoch.
#[test]
fn a_vote_is_not_sent_when_last_vote_epoch_cannot_be_saved() {
    use std::sync::Arc;
    use strata_engine::io::{FaultFs, FaultKind, FaultOp, FaultRule, Fs, MemFs};
    let fs = FaultFs::new(Arc::new(MemFs::new()));
    fs.create_dir_all(std::path::Path::new("/c")).unwrap();
    let args: Vec<String> = ["--dir", "/c", "--cluster-enabled", "yes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let config = crate::config::Config::from_args(&args).unwrap();
    let node = super::Cluster::open(&config, Arc::new(fs.clone()), 7000).unwrap();
    let mut a = cluster(A);
    a.nodes.get_mut(&C).unwrap().flags |= node_flag::FAIL;
    *node.state.write() = a;
    let acks = |out: &super::packet::Outcome| {
        out.actions
            .iter()
            .filter(|a| matches!(a, Action::Send(_, m) if matches!(m.body, Body::FailoverAuthAck)))
            .count()
    };
    fs.add_rule(
        FaultRule::new(FaultOp::Sync, 1, FaultKind::Eio)
            .path_contains("nodes.conf")
            .persistent(),
    );
    let out = node.process_message(&env(10_000), &inbound(), &request_from_r(4));
    assert_eq!(acks(&out), 0, "no vote without a durable lastVoteEpoch");
    assert!(fs.injected_count() > 0);
    assert_eq!(node.read().last_vote_epoch, 4);
    fs.clear();
    let out = node.process_message(&env(10_100), &inbound(), &request_from_r(4));
    assert_eq!(acks(&out), 0, "epoch 4 counts as voted");
    let out = node.process_message(&env(13_000), &inbound(), &request_from_r(5));
    assert_eq!(acks(&out), 1);
    let conf = fs.read_all(std::path::Path::new("/c/nodes.conf")).unwrap();
    assert!(String::from_utf8(conf).unwrap().contains("lastVoteEpoch 5"));
}
