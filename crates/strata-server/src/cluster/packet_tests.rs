//! The bus's state transitions as pure functions: a node table and a message (or a cron
//! step) in, the new table and the actions out, checked against what Redis 7.0's
//! `clusterProcessPacket` and `clusterCron` do in the same situation.

use super::bus::{Body, Gossip, IpField, Msg, NodeName, Ping, SlotBitmap};
use super::cron::{connected, cron, disconnected};
use super::outgoing::{self, PingKind};
use super::packet::{process, Action};
use super::slots::{node_flag, Node, NodeId, State};
use super::test_fixtures::{env, inbound, master, outbound, A, B, C};

const H: NodeId = [b'h'; 40];

/// This node (A, epoch 1, slots 0-5460) knowing B and C as masters with a third each.
fn three() -> State {
    let mut st = State::new(A);
    st.me_mut().config_epoch = 1;
    st.me_mut().port = 7000;
    st.nodes.insert(B, master(B, 7001, 2));
    st.nodes.insert(C, master(C, 7002, 3));
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

/// A message from `st`'s myself, of the given kind.
fn msg_from(st: &mut State, kind: PingKind) -> Msg {
    outgoing::ping(st, &env(1), kind, None)
}

#[test]
fn meet_from_an_unknown_node_starts_a_handshake_and_is_answered() {
    let mut a = State::new(A);
    let mut b = State::new(B);
    b.me_mut().port = 7001;
    b.me_mut().cport = 17001;
    let meet = msg_from(&mut b, PingKind::Meet);
    let out = process(&mut a, &env(5), &inbound(), &meet);
    assert!(out.save);
    assert_eq!(a.me().ip, "127.0.0.1", "a MEET names this node's address");
    let hs: Vec<&Node> = a
        .nodes
        .values()
        .filter(|n| n.has(node_flag::HANDSHAKE))
        .collect();
    assert_eq!(hs.len(), 1);
    assert_eq!((hs[0].port, hs[0].cport), (7001, 17001));
    assert_ne!(
        hs[0].id, B,
        "a handshake node has a random name until its PONG"
    );
    assert!(matches!(&out.actions[0], Action::Reply(m) if matches!(m.body, Body::Pong(_))));
    // A PING from an unknown node creates nothing.
    let mut c = State::new(C);
    let ping = msg_from(&mut c, PingKind::Ping);
    let before = a.nodes.len();
    process(&mut a, &env(6), &inbound(), &ping);
    assert_eq!(a.nodes.len(), before);
}

#[test]
fn first_pong_gives_a_met_node_its_name() {
    let mut a = State::new(A);
    let mut h = Node::new(H, node_flag::HANDSHAKE | node_flag::MEET);
    h.ip = "127.0.0.1".into();
    h.port = 7001;
    h.cport = 17001;
    a.nodes.insert(H, h);
    let out = connected(&mut a, &env(10), &H);
    match &out.actions[..] {
        [Action::Send(to, m)] => {
            assert_eq!(*to, H);
            assert!(matches!(m.body, Body::Meet(_)), "a met node gets a MEET");
        }
        other => panic!("{other:?}"),
    }
    assert!(!a.nodes[&H].has(node_flag::MEET));
    let mut b = State::new(B);
    let pong = msg_from(&mut b, PingKind::Pong);
    let out = process(&mut a, &env(20), &outbound(H), &pong);
    assert!(out.save);
    assert!(out.actions.contains(&Action::Renamed { from: H, to: B }));
    assert!(!a.nodes.contains_key(&H));
    let nb = &a.nodes[&B];
    assert!(nb.has(node_flag::MASTER) && !nb.has(node_flag::HANDSHAKE));
    assert_eq!(nb.pong_received_ms, 20);
    // A node answering at an address with another name: the address is stale.
    let mut c = State::new(C);
    let pong = msg_from(&mut c, PingKind::Pong);
    let out = process(&mut a, &env(30), &outbound(B), &pong);
    assert!(out.actions.contains(&Action::CloseThis));
    assert!(a.nodes[&B].has(node_flag::NOADDR) && a.nodes[&B].ip.is_empty());
}

#[test]
fn headers_claim_slots_by_config_epoch_and_stale_senders_get_an_update() {
    let mut a = three();
    // B now claims C's slots with a greater epoch (a failover): they move to B.
    let mut b = three();
    b.myself = B;
    for o in b.owner.iter_mut() {
        if *o == Some(C) {
            *o = Some(B);
        }
    }
    b.nodes.get_mut(&B).unwrap().config_epoch = 4;
    let mut h = outgoing::header(&b, &env(1));
    h.sender = NodeName(B);
    h.config_epoch = 4;
    h.current_epoch = 4;
    let ping = Msg::new(h, Body::Ping(Ping::default()));
    let out = process(&mut a, &env(2), &inbound(), &ping);
    assert!(out.save);
    assert_eq!(a.owner[16000], Some(B));
    assert_eq!(a.owner[0], Some(A));
    assert_eq!((a.current_epoch, a.nodes[&B].config_epoch), (4, 4));
    // C still claims its old slots with epoch 3: it is told about B.
    let mut h = outgoing::header(&three(), &env(1));
    h.sender = NodeName(C);
    h.config_epoch = 3;
    let mut slots = SlotBitmap::new();
    slots.set_range(10923, 16383).unwrap();
    h.myslots = slots;
    let out = process(
        &mut a,
        &env(3),
        &inbound(),
        &Msg::new(h, Body::Ping(Ping::default())),
    );
    assert_eq!(
        a.owner[16000],
        Some(B),
        "an older epoch does not take slots back"
    );
    let update = out.actions.iter().find_map(|x| match x {
        Action::Send(to, m) => Some((*to, m.clone())),
        _ => None,
    });
    let (to, m) = update.expect("an UPDATE to the stale sender");
    assert_eq!(to, C);
    match m.body {
        Body::Update(u) => {
            assert_eq!((u.nodename, u.config_epoch), (NodeName(B), 4));
            assert!(u.slots.test(16000) && u.slots.test(6000));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn losing_a_slot_this_node_serves_empties_it_and_importing_slots_stay() {
    let mut a = three();
    a.importing.insert(10, B);
    let mut h = outgoing::header(&three(), &env(1));
    h.sender = NodeName(B);
    h.config_epoch = 9;
    let mut slots = SlotBitmap::new();
    slots.set_range(5, 10).unwrap();
    h.myslots = slots;
    let out = process(
        &mut a,
        &env(2),
        &inbound(),
        &Msg::new(h, Body::Pong(Ping::default())),
    );
    assert_eq!(a.owner[5], Some(B));
    assert_eq!(
        a.owner[10],
        Some(A),
        "an importing slot changes only by hand"
    );
    assert!(out
        .actions
        .contains(&Action::DeleteSlotKeys(vec![5, 6, 7, 8, 9])));
}

#[test]
fn config_epoch_collision_moves_the_smaller_name() {
    let mut a = three();
    // B announces A's epoch: A's name is smaller, so A takes a new epoch.
    let mut h = outgoing::header(&three(), &env(1));
    h.sender = NodeName(B);
    h.config_epoch = 1;
    let mut slots = SlotBitmap::new();
    slots.set_range(5461, 10922).unwrap();
    h.myslots = slots;
    a.nodes.get_mut(&B).unwrap().config_epoch = 1;
    process(
        &mut a,
        &env(2),
        &inbound(),
        &Msg::new(h.clone(), Body::Ping(Ping::default())),
    );
    assert_eq!(a.me().config_epoch, 4);
    assert_eq!(a.current_epoch, 4);
    // Seen from B, the sender A has the smaller name: B keeps its epoch.
    let mut b = three();
    b.myself = B;
    b.nodes.get_mut(&A).unwrap().flags = node_flag::MASTER;
    b.nodes.get_mut(&B).unwrap().flags = node_flag::MASTER | node_flag::MYSELF;
    b.nodes.get_mut(&B).unwrap().config_epoch = 1;
    h.sender = NodeName(A);
    let mut slots = SlotBitmap::new();
    slots.set_range(0, 5460).unwrap();
    h.myslots = slots;
    process(
        &mut b,
        &env(2),
        &inbound(),
        &Msg::new(h, Body::Ping(Ping::default())),
    );
    assert_eq!(b.nodes[&B].config_epoch, 1);
}

fn gossip_about(id: NodeId, flags: u16, port: u16) -> Gossip {
    Gossip {
        nodename: NodeName(id),
        ping_sent: 0,
        pong_received: 0,
        ip: IpField::new("127.0.0.1"),
        port,
        cport: port + 10000,
        flags,
        pport: 0,
        reserved: 0,
    }
}

fn ping_with(st: &State, sender: NodeId, gossip: Vec<Gossip>) -> Msg {
    let mut h = outgoing::header(st, &env(1));
    h.sender = NodeName(sender);
    h.config_epoch = st.nodes[&sender].config_epoch;
    h.myslots = outgoing::bitmap_of(st, &sender);
    h.flags = node_flag::MASTER;
    Msg::new(
        h,
        Body::Ping(Ping {
            gossip,
            exts: Vec::new(),
        }),
    )
}

#[test]
fn gossip_teaches_nodes_without_a_meet() {
    let mut a = three();
    const D: NodeId = [b'd'; 40];
    let m = ping_with(&a, B, vec![gossip_about(D, node_flag::MASTER, 7003)]);
    let out = process(&mut a, &env(2), &inbound(), &m);
    assert!(out.save);
    let d = &a.nodes[&D];
    assert!(d.has(node_flag::MASTER) && !d.has(node_flag::HANDSHAKE | node_flag::MEET));
    assert_eq!((d.port, d.cport), (7003, 17003));
    // The cron opens a link to it, and the first message is a PING.
    let out = cron(&mut a, &env(3), 1);
    assert!(out.actions.contains(&Action::Connect(D)));
    let out = connected(&mut a, &env(4), &D);
    assert!(matches!(&out.actions[0], Action::Send(_, m) if matches!(m.body, Body::Ping(_))));
    // Gossip from an unknown sender teaches nothing; nor does a NOADDR entry.
    const E: NodeId = [b'e'; 40];
    let mut m = ping_with(
        &a,
        B,
        vec![gossip_about(E, node_flag::MASTER | node_flag::NOADDR, 1)],
    );
    process(&mut a, &env(5), &inbound(), &m);
    m.header.sender = NodeName([b'z'; 40]);
    if let Body::Ping(p) = &mut m.body {
        p.gossip[0].flags = node_flag::MASTER;
    }
    process(&mut a, &env(5), &inbound(), &m);
    assert!(!a.nodes.contains_key(&E));
}

#[test]
fn pfail_after_the_timeout_then_fail_by_a_majority_of_masters() {
    let mut a = three();
    let e = env(10_000);
    for id in [B, C] {
        a.nodes.get_mut(&id).unwrap().pong_received_ms = 9_900;
        a.nodes.get_mut(&id).unwrap().bus.data_received_ms = 9_900;
    }
    // C was pinged 1.5 s ago and has not answered (timeout 1 s): PFAIL, not yet FAIL.
    a.nodes.get_mut(&C).unwrap().ping_sent_ms = 8_500;
    a.nodes.get_mut(&C).unwrap().bus.data_received_ms = 8_400;
    let out = cron(&mut a, &e, 1);
    assert!(a.nodes[&C].has(node_flag::PFAIL));
    assert!(!a.nodes[&C].has(node_flag::FAIL));
    assert!(!a.nodes[&B].has(node_flag::PFAIL));
    assert!(!out
        .actions
        .iter()
        .any(|x| matches!(x, Action::Broadcast(_))));
    assert!(
        a.is_ok(true),
        "one master of three in PFAIL: still a reachable majority and full coverage"
    );
    // The PFAIL node is gossiped about.
    let mut me = a.clone();
    let p = outgoing::ping(&mut me, &e, PingKind::Ping, None);
    assert!(p
        .ping()
        .unwrap()
        .gossip
        .iter()
        .any(|g| g.nodename == NodeName(C)));
    // B (a master) reports C failing: with A itself, 2 of 3 masters agree.
    let m = ping_with(
        &a,
        B,
        vec![gossip_about(C, node_flag::MASTER | node_flag::PFAIL, 7002)],
    );
    let out = process(&mut a, &env(10_100), &inbound(), &m);
    let c = &a.nodes[&C];
    assert!(c.has(node_flag::FAIL) && !c.has(node_flag::PFAIL));
    assert!(out.save);
    let fail = out.actions.iter().find_map(|x| match x {
        Action::Broadcast(m) => Some(m.clone()),
        _ => None,
    });
    assert!(matches!(fail.unwrap().body, Body::Fail { about } if about == NodeName(C)));
    assert!(!a.is_ok(true));
    assert!(
        a.is_ok(false),
        "2 of 3 masters reachable: a majority without full coverage"
    );
    // C answers again: a master with slots keeps FAIL until it is 2 timeouts old.
    let mut c_state = three();
    c_state.myself = C;
    let pong = ping_with(&c_state, C, Vec::new());
    let pong = Msg::new(pong.header, Body::Pong(Ping::default()));
    process(&mut a, &env(10_200), &outbound(C), &pong);
    assert!(a.nodes[&C].has(node_flag::FAIL));
    process(&mut a, &env(13_000), &outbound(C), &pong);
    assert!(!a.nodes[&C].has(node_flag::FAIL));
}

#[test]
fn fail_messages_are_honoured_from_known_senders_only() {
    let mut a = three();
    let mut h = outgoing::header(&a, &env(1));
    h.sender = NodeName([b'z'; 40]);
    let m = Msg::new(h.clone(), Body::Fail { about: NodeName(C) });
    process(&mut a, &env(2), &inbound(), &m);
    assert!(!a.nodes[&C].has(node_flag::FAIL));
    h.sender = NodeName(B);
    let m = Msg::new(h, Body::Fail { about: NodeName(C) });
    assert!(process(&mut a, &env(2), &inbound(), &m).save);
    assert!(a.nodes[&C].has(node_flag::FAIL));
    // About this node itself: ignored.
    let m = Msg::new(
        outgoing::header(&a, &env(1)),
        Body::Fail { about: NodeName(A) },
    );
    let mut m = m;
    m.header.sender = NodeName(B);
    process(&mut a, &env(3), &inbound(), &m);
    assert!(!a.me().has(node_flag::FAIL));
}

#[test]
fn cron_drops_stale_handshakes_pings_and_reconnects() {
    let mut a = three();
    let mut h = Node::new(H, node_flag::HANDSHAKE | node_flag::MEET);
    h.ip = "127.0.0.1".into();
    h.cport = 1;
    h.bus.ctime_ms = 1_000;
    a.nodes.insert(H, h);
    a.nodes.get_mut(&B).unwrap().link_connected = false;
    a.nodes.get_mut(&C).unwrap().pong_received_ms = 100;
    let out = cron(&mut a, &env(1_500), 1);
    assert!(a.nodes.contains_key(&H), "within the timeout");
    assert!(out.actions.contains(&Action::Connect(B)));
    assert!(out.actions.contains(&Action::Connect(H)));
    assert!(
        out.actions.iter().any(
            |x| matches!(x, Action::Send(to, m) if *to == C && matches!(m.body, Body::Ping(_)))
        ),
        "a node not pinged for half the timeout is pinged"
    );
    assert_eq!(a.nodes[&C].ping_sent_ms, 1_500);
    let out = cron(&mut a, &env(2_100), 2);
    assert!(!a.nodes.contains_key(&H), "handshake expired");
    assert!(out.actions.contains(&Action::Drop(H)));
    // A refused connection counts as a ping sent, so the node times out.
    disconnected(&mut a, &env(2_200), &B, true);
    assert_eq!(a.nodes[&B].ping_sent_ms, 2_200);
    cron(&mut a, &env(3_300), 3);
    assert!(a.nodes[&B].has(node_flag::PFAIL));
}

#[test]
fn hostname_extension_and_header_fields() {
    let mut b = three();
    b.myself = B;
    b.nodes.get_mut(&A).unwrap().flags = node_flag::MASTER;
    b.nodes.get_mut(&B).unwrap().flags = node_flag::MASTER | node_flag::MYSELF;
    b.nodes.get_mut(&B).unwrap().hostname = "node-b.example".into();
    let m = outgoing::ping(&mut b, &env(1), PingKind::Ping, Some(A));
    assert_eq!(
        b.nodes[&A].ping_sent_ms, 1,
        "a PING records when it was sent"
    );
    assert_eq!(m.header.config_epoch, 2);
    assert_eq!(m.header.myslots.count(), 10922 - 5461 + 1);
    assert_eq!(m.header.state, 0);
    // 3 nodes: Redis gossips about one node other than the sender (a tenth of the nodes,
    // at least 3, at most the nodes but two).
    let g = &m.ping().unwrap().gossip;
    assert_eq!(g.len(), 1);
    assert_ne!(g[0].nodename, NodeName(B));
    let mut a = three();
    process(&mut a, &env(2), &inbound(), &m);
    assert_eq!(a.nodes[&B].hostname, "node-b.example");
    // A message without the extension clears it.
    let m = Msg::new(m.header.clone(), Body::Ping(Ping::default()));
    process(&mut a, &env(3), &inbound(), &m);
    assert_eq!(a.nodes[&B].hostname, "");
    // Bytes round trip through the codec.
    let bytes = super::bus::encode(&m);
    assert_eq!(super::bus::decode(&bytes).unwrap(), m);
}

#[test]
fn a_forgotten_node_is_not_learned_back_from_gossip_for_a_minute() {
    let mut a = three();
    a.forgotten.insert(H, 10_000 + super::slots::FORGET_TTL_MS);
    let m = ping_with(&a, B, vec![gossip_about(H, node_flag::MASTER, 7005)]);
    process(&mut a, &env(10_000), &inbound(), &m);
    assert!(!a.nodes.contains_key(&H));
    process(
        &mut a,
        &env(10_001 + super::slots::FORGET_TTL_MS),
        &inbound(),
        &m,
    );
    assert!(a.nodes.contains_key(&H));
}

#[test]
fn publish_from_a_known_node_is_delivered_here() {
    let mut a = three();
    let mut b = three();
    b.myself = B;
    let publish = |shard: bool| {
        let body = super::bus::Publish {
            channel: b"news".to_vec(),
            message: b"hello".to_vec(),
        };
        let h = outgoing::header(&b, &env(1));
        Msg::new(
            h,
            if shard {
                Body::PublishShard(body)
            } else {
                Body::Publish(body)
            },
        )
    };
    for shard in [false, true] {
        let out = process(&mut a, &env(2), &inbound(), &publish(shard));
        assert_eq!(
            out.actions,
            vec![Action::Deliver {
                shard,
                channel: b"news".to_vec(),
                message: b"hello".to_vec(),
            }]
        );
    }
    // From a node this one does not know: dropped, as Redis does.
    let mut m = publish(false);
    m.header.sender = NodeName([b'z'; 40]);
    assert!(process(&mut a, &env(3), &inbound(), &m).actions.is_empty());
}
