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
