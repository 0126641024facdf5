//! Fuzzing the bus's state machine: messages captured from redis-server 7.0.15
//! (`bus/fixtures/`), mutated field by field and byte by byte, sent from known, unknown and
//! badly named senders on inbound and outbound links, interleaved with cron steps at a
//! clock that jumps. Nothing panics, this node stays in its table as itself, and what the
//! table became can always be saved and read back (a peer cannot make nodes.conf
//! unreadable, which would stop the node at its next start).
//!
//! The default suite runs 300 sequences of 60 messages; a longer run:
//! `STRATA_CLUSTER_FUZZ_SEQUENCES=20000 cargo test -p strata-server --release --lib cluster::fuzz_tests -- --ignored`
//! (`STRATA_CLUSTER_FUZZ_SEED` picks the seed; a failure prints the seed and sequence).

use super::bus::{self, Body, Gossip, IpField, Msg, NodeName, PingExt};
use super::cron::cron;
use super::nodes_conf;
use super::packet::{process, LinkCtx};
use super::slots::{node_flag, Node, NodeId, State};
use super::test_fixtures::{env, master, A, B, C};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

const R: NodeId = [b'r'; 40];

fn captured() -> Vec<Msg> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/cluster/bus/fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    files.sort();
    let msgs: Vec<Msg> = files
        .iter()
        .map(|p| bus::decode(&std::fs::read(p).expect("fixture")).expect("captured decodes"))
        .collect();
    assert!(msgs.len() >= 10, "the captured messages are there");
    msgs
}

/// This node (A) a master with a third of the slots beside B and C, R a replica of C, and
/// a node met by CLUSTER MEET still in handshake.
fn start() -> (State, NodeId) {
    let mut st = State::new(A);
    st.me_mut().ip = "127.0.0.1".into();
    st.me_mut().port = 7000;
    st.me_mut().cport = 17000;
    st.me_mut().config_epoch = 1;
    for (id, port, epoch) in [(B, 7001, 2), (C, 7002, 3)] {
        st.nodes.insert(id, master(id, port, epoch));
    }
    let mut r = master(R, 7003, 0);
    r.flags = node_flag::SLAVE;
    r.master = Some(C);
    st.nodes.insert(R, r);
    st.add_replica(&C);
    let mut h = Node::new(
        super::slots::random_id(),
        node_flag::HANDSHAKE | node_flag::MEET,
    );
    h.ip = "127.0.0.1".into();
    h.port = 7004;
    h.cport = 17004;
    let hid = h.id;
    st.nodes.insert(hid, h);
    for s in 0..16384usize {
        st.owner[s] = Some(match s {
            0..=5460 => A,
            5461..=10922 => B,
            _ => C,
        });
    }
    st.current_epoch = 3;
    (st, hid)
}

fn name(rng: &mut StdRng, known: &[NodeId]) -> NodeName {
    match rng.gen_range(0..6) {
        0..=2 => NodeName(known[rng.gen_range(0..known.len())]),
        3 => NodeName(super::slots::random_id()),
        4 => NodeName::NULL,
        _ => {
            let mut n = [0u8; 40];
            rng.fill(&mut n[..]);
            NodeName(n)
        }
    }
}

fn ip(rng: &mut StdRng) -> IpField {
    match rng.gen_range(0..4) {
        0 => IpField::EMPTY,
        1 => IpField::new("127.0.0.1"),
        2 => IpField::new("::1"),
        _ => {
            let mut f = [0u8; 46];
            let n = rng.gen_range(0..46);
            rng.fill(&mut f[..n]);
            IpField(f)
        }
    }
}

fn some_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let n = rng.gen_range(0..=max);
    let mut v = vec![0u8; n];
    rng.fill(&mut v[..]);
    v
}

/// A message changed field by field: sender, master, flags, epochs, slots, addresses, and
/// the body's own fields.
fn mutate(rng: &mut StdRng, mut m: Msg, known: &[NodeId]) -> Msg {
    let h = &mut m.header;
    if rng.gen_bool(0.9) {
        h.sender = name(rng, known);
    }
    if rng.gen_bool(0.5) {
        h.slaveof = name(rng, known);
    }
    if rng.gen_bool(0.5) {
        h.flags = rng.gen::<u16>() & 0x3ff;
    }
    if rng.gen_bool(0.5) {
        h.current_epoch = rng.gen_range(0..10);
        h.config_epoch = rng.gen_range(0..10);
    }
    if rng.gen_bool(0.3) {
        h.offset = rng.gen();
    }
    if rng.gen_bool(0.5) {
        for _ in 0..rng.gen_range(0..64) {
            let slot = rng.gen_range(0..16384);
            let _ = h.myslots.set(slot);
        }
    }
    if rng.gen_bool(0.3) {
        h.myip = ip(rng);
    }
    if rng.gen_bool(0.2) {
        h.port = rng.gen();
        h.cport = rng.gen();
    }
    if rng.gen_bool(0.2) {
        h.mflags[0] = rng.gen();
    }
    match &mut m.body {
        Body::Ping(p) | Body::Pong(p) | Body::Meet(p) => {
            for g in p.gossip.iter_mut() {
                if rng.gen_bool(0.7) {
                    g.nodename = name(rng, known);
                }
                if rng.gen_bool(0.5) {
                    g.flags = rng.gen::<u16>() & 0x3ff;
                }
                if rng.gen_bool(0.3) {
                    g.ip = ip(rng);
                }
                if rng.gen_bool(0.3) {
                    g.pong_received = rng.gen();
                }
            }
            if rng.gen_bool(0.3) {
                p.gossip.push(Gossip {
                    nodename: name(rng, known),
                    ping_sent: rng.gen(),
                    pong_received: rng.gen(),
                    ip: ip(rng),
                    port: rng.gen(),
                    cport: rng.gen(),
                    flags: rng.gen::<u16>() & 0x3ff,
                    pport: rng.gen(),
                    reserved: 0,
                });
            }
            if rng.gen_bool(0.3) {
                let host = some_bytes(rng, 60);
                let host: Vec<u8> = host.into_iter().filter(|b| *b != 0).collect();
                if let Ok(e) = PingExt::hostname(&host) {
                    p.exts = vec![e];
                }
            }
        }
        Body::Fail { about } => *about = name(rng, known),
        Body::Update(u) => {
            u.nodename = name(rng, known);
            u.config_epoch = rng.gen_range(0..12);
            for _ in 0..rng.gen_range(0..64) {
                let _ = u.slots.set(rng.gen_range(0..16384));
            }
        }
        Body::Publish(p) | Body::PublishShard(p) => {
            p.channel = some_bytes(rng, 16);
            p.message = some_bytes(rng, 16);
        }
        _ => {}
    }
    m
}

/// The message's bytes with a few changed, decoded again if it still decodes.
fn flip_bytes(rng: &mut StdRng, m: &Msg) -> Option<Msg> {
    let mut b = bus::encode(m);
    for _ in 0..rng.gen_range(1..8) {
        let i = rng.gen_range(0..b.len());
        b[i] = rng.gen();
    }
    bus::decode(&b).ok()
}

fn link(rng: &mut StdRng, known: &[NodeId]) -> LinkCtx {
    let local = if rng.gen_bool(0.8) {
        "127.0.0.1"
    } else {
        "10.0.0.9"
    };
    LinkCtx {
        inbound: rng.gen_bool(0.5),
        node: Some(known[rng.gen_range(0..known.len())]),
        peer_ip: "127.0.0.1".into(),
        local_ip: local.into(),
    }
}

fn check(st: &State, what: &str) {
    let me = st
        .nodes
        .get(&st.myself)
        .unwrap_or_else(|| panic!("{what}: myself left"));
    assert!(me.has(node_flag::MYSELF), "{what}: myself lost its flag");
    let selves = st
        .nodes
        .values()
        .filter(|n| n.has(node_flag::MYSELF))
        .count();
    assert_eq!(selves, 1, "{what}: another node flagged myself");
}

/// nodes.conf's node lines without what a restart does not restore (ping and pong times,
/// link states); the epochs are compared apart.
fn saved_part(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.starts_with("vars ")) {
        let mut f: Vec<&str> = line.split(' ').collect();
        if f.len() >= 8 {
            f[4] = "0";
            f[5] = "0";
            f[7] = "-";
        }
        out += &f.join(" ");
        out.push('\n');
    }
    out
}

fn check_saved(st: &State, what: &str) {
    let text = nodes_conf::render(st);
    let back = nodes_conf::parse(&text)
        .unwrap_or_else(|e| panic!("{what}: nodes.conf unreadable: {e}\n{text}"))
        .unwrap_or_else(|| panic!("{what}: nodes.conf empty"));
    assert_eq!(
        saved_part(&nodes_conf::render(&back)),
        saved_part(&text),
        "{what}: not read back as written"
    );
    // Loading raises currentEpoch to the greatest config epoch, as Redis's does.
    assert!(back.current_epoch >= st.current_epoch, "{what}");
    assert_eq!(back.last_vote_epoch, st.last_vote_epoch, "{what}");
}

fn run(seed: u64, sequences: u64, per_sequence: usize) {
    let base = captured();
    let mut rng = StdRng::seed_from_u64(seed);
    for seq in 0..sequences {
        let (mut st, handshake) = start();
        let known = [A, B, C, R, handshake];
        let senders = [A, B, C, R];
        let mut now = 1_000_000u64;
        for i in 0..per_sequence {
            let what = format!("seed {seed} sequence {seq} message {i}");
            now += match rng.gen_range(0..10) {
                0 => rng.gen_range(0..60_000),
                _ => rng.gen_range(0..500),
            };
            let e = env(now);
            if rng.gen_bool(0.15) {
                cron(&mut st, &e, i as u64);
                check(&st, &what);
                continue;
            }
            let m = base[rng.gen_range(0..base.len())].clone();
            let m = mutate(&mut rng, m, &senders);
            let m = if rng.gen_bool(0.3) {
                match flip_bytes(&mut rng, &m) {
                    Some(m) => m,
                    None => continue,
                }
            } else {
                m
            };
            let l = link(&mut rng, &known);
            process(&mut st, &e, &l, &m);
            check(&st, &what);
        }
        check_saved(&st, &format!("seed {seed} sequence {seq}"));
    }
}

fn seed() -> u64 {
    std::env::var("STRATA_CLUSTER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_00c1_u64)
}

#[test]
fn mutated_messages_never_break_the_state_machine() {
    run(seed(), 300, 60);
}

#[test]
#[ignore]
fn mutated_messages_never_break_the_state_machine_long() {
    let sequences = std::env::var("STRATA_CLUSTER_FUZZ_SEQUENCES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    run(seed(), sequences, 100);
}

#[test]
fn badly_named_senders_and_malformed_addresses_stay_out_of_the_table() {
    let (mut st, handshake) = start();
    let base = captured();
    let pong = base
        .iter()
        .find(|m| matches!(m.body, Body::Pong(_)))
        .expect("a captured PONG")
        .clone();
    // A PONG completing the handshake under a name no node can have: ignored.
    let mut bad = pong.clone();
    bad.header.sender = NodeName(*b"zzzz zzzz\nzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
    let to_h = LinkCtx {
        inbound: false,
        node: Some(handshake),
        peer_ip: "127.0.0.1".into(),
        local_ip: "127.0.0.1".into(),
    };
    let out = process(&mut st, &env(1_000), &to_h, &bad);
    assert!(out.actions.is_empty());
    assert!(st.nodes.contains_key(&handshake), "still in handshake");
    // Gossip about a new node with an address that is not one: not learned.
    let mut m = pong.clone();
    m.header.sender = NodeName(B);
    let mut g = Gossip {
        nodename: NodeName([b'9'; 40]),
        ping_sent: 0,
        pong_received: 0,
        ip: IpField::new("1.2.3.4 x@y,z"),
        port: 7009,
        cport: 17009,
        flags: node_flag::MASTER,
        pport: 0,
        reserved: 0,
    };
    if let Body::Pong(p) = &mut m.body {
        p.gossip = vec![g.clone()];
        p.exts = vec![PingExt::hostname(b"bad host\nname").unwrap()];
    }
    let inbound = LinkCtx {
        inbound: true,
        node: None,
        ..to_h.clone()
    };
    m.header.myslots = super::outgoing::bitmap_of(&st, &B);
    m.header.config_epoch = 2;
    m.header.current_epoch = 3;
    m.header.slaveof = NodeName::NULL;
    m.header.flags = node_flag::MASTER;
    process(&mut st, &env(2_000), &inbound, &m);
    assert!(!st.nodes.contains_key(&[b'9'; 40]));
    assert_eq!(
        st.nodes[&B].hostname, "",
        "a hostname that is not one is none"
    );
    // The same with a real address is learned.
    g.ip = IpField::new("10.1.2.3");
    if let Body::Pong(p) = &mut m.body {
        p.gossip = vec![g];
        p.exts = vec![PingExt::hostname(b"node-9.example").unwrap()];
    }
    process(&mut st, &env(3_000), &inbound, &m);
    assert_eq!(st.nodes[&[b'9'; 40]].ip, "10.1.2.3");
    assert_eq!(st.nodes[&B].hostname, "node-9.example");
    check_saved(&st, "after the gossip");
}
