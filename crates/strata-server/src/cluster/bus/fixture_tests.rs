//! Conformance with messages captured from redis-server 7.0.15 (`fixtures/README.md`):
//! each decodes, re-encodes byte for byte, and says what the capture run knows it says;
//! every truncation and extension of each is refused. `STRATA_BUS_FIXTURES=DIR` runs them
//! over a fresh capture instead.

use super::ext::ExtView;
use super::header::offset;
use super::message::msg_type;
use super::*;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

struct Node {
    port: u16,
    cport: u16,
    hostname: String,
}

struct Capture {
    nodes: HashMap<NodeName, Node>,
    ranges: Vec<SlotBitmap>,
    manifest: Value,
    fixtures: Vec<(String, u16, Vec<u8>)>,
}

/// The committed fixtures, or a fresh capture's (`STRATA_BUS_FIXTURES=DIR`, written by
/// `scripts/capture-cluster-bus.py --out DIR`).
pub(super) fn dir() -> PathBuf {
    match std::env::var_os("STRATA_BUS_FIXTURES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/cluster/bus/fixtures"),
    }
}

fn load() -> Capture {
    let text = std::fs::read_to_string(dir().join("manifest.json")).expect("manifest.json");
    let manifest: Value = serde_json::from_str(&text).expect("manifest is JSON");
    let mut nodes = HashMap::new();
    let mut ranges = Vec::new();
    for n in manifest["nodes"].as_array().expect("nodes") {
        let id = NodeName::parse(n["id"].as_str().expect("id").as_bytes()).expect("node id");
        let num = |k: &str| u16::try_from(n[k].as_u64().expect(k)).expect(k);
        let node = Node {
            port: num("port"),
            cport: num("cport"),
            hostname: n["hostname"].as_str().expect("hostname").to_string(),
        };
        nodes.insert(id, node);
        if let Some(r) = n["slots"].as_array() {
            let mut b = SlotBitmap::new();
            let s = |i: usize| r[i].as_u64().expect("slot") as u16;
            b.set_range(s(0), s(1)).unwrap();
            ranges.push(b);
        }
    }
    let mut fixtures = Vec::new();
    for f in manifest["fixtures"].as_array().expect("fixtures") {
        let name = f["file"].as_str().expect("file").to_string();
        let t = f["type"].as_u64().expect("type") as u16;
        let bytes = std::fs::read(dir().join(&name)).expect("fixture file");
        assert_eq!(bytes.len() as u64, f["bytes"].as_u64().unwrap(), "{name}");
        fixtures.push((name, t, bytes));
    }
    Capture {
        nodes,
        ranges,
        manifest,
        fixtures,
    }
}

#[test]
fn fixtures_cover_every_redis_70_type_but_module() {
    let cap = load();
    assert!(cap.manifest["redis"].as_str().unwrap().contains("v=7.0.15"));
    let types: BTreeSet<u16> = cap.fixtures.iter().map(|f| f.1).collect();
    let want: BTreeSet<u16> = (0..msg_type::COUNT)
        .filter(|&t| t != msg_type::MODULE)
        .collect();
    assert_eq!(types, want);
    assert_eq!(cap.nodes.len(), 4);
}

#[test]
fn fixtures_decode_and_reencode_byte_for_byte() {
    let cap = load();
    for (name, t, bytes) in &cap.fixtures {
        let msg = decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(msg.msg_type(), *t, "{name}");
        assert_eq!(&encode(&msg), bytes, "{name} re-encodes");
    }
}

#[test]
fn fixture_headers_say_what_the_capture_knows() {
    let cap = load();
    for (name, _, bytes) in &cap.fixtures {
        let msg = decode(bytes).unwrap();
        let h = &msg.header;
        let node = cap
            .nodes
            .get(&h.sender)
            .unwrap_or_else(|| panic!("{name}: unknown sender {:?}", h.sender));
        assert_eq!(h.port, node.port, "{name}");
        assert_eq!(h.cport, node.cport, "{name}");
        assert_eq!(h.pport, 0, "{name}: no TLS");
        assert!(h.myip.is_empty(), "{name}: no announce-ip");
        assert!(h.reserved.iter().all(|&b| b == 0), "{name}");
        assert!(
            h.slaveof.is_null() || cap.nodes.contains_key(&h.slaveof),
            "{name}"
        );
        // A master's own slots or its master's: one assigned range or none.
        assert!(
            h.myslots.is_empty() || cap.ranges.contains(&h.myslots),
            "{name}: {:?}",
            h.myslots
        );
        assert!(h.state <= 1, "{name}");
        // The sender's flags hold myself and exactly one role.
        assert_ne!(h.flags & node::MYSELF, 0, "{name}");
        assert_eq!(
            (h.flags & node::MASTER != 0) as u8 + (h.flags & node::SLAVE != 0) as u8,
            1,
            "{name}"
        );
        assert_eq!(h.flags & node::SLAVE != 0, !h.slaveof.is_null(), "{name}");
        // Fields the decoder does not interpret sit at their documented offsets.
        assert_eq!(
            &bytes[offset::SENDER..offset::SENDER + 40],
            &h.sender.0[..],
            "{name}"
        );
        assert_eq!(bytes[offset::STATE], h.state, "{name}");
    }
}

#[test]
fn fixture_bodies_say_what_the_capture_knows() {
    let cap = load();
    let publish = |k: &str| Publish {
        channel: cap.manifest[k]["channel"]
            .as_str()
            .unwrap()
            .as_bytes()
            .to_vec(),
        message: cap.manifest[k]["message"]
            .as_str()
            .unwrap()
            .as_bytes()
            .to_vec(),
    };
    let mut gossip_seen = 0;
    let mut hostnames_seen = 0;
    for (name, _, bytes) in &cap.fixtures {
        let msg = decode(bytes).unwrap();
        let sender = &cap.nodes[&msg.header.sender];
        match &msg.body {
            Body::Ping(p) | Body::Pong(p) | Body::Meet(p) => {
                for g in &p.gossip {
                    let n = cap
                        .nodes
                        .get(&g.nodename)
                        .unwrap_or_else(|| panic!("{name}: gossip about {:?}", g.nodename));
                    assert_ne!(
                        g.nodename, msg.header.sender,
                        "{name}: no gossip about oneself"
                    );
                    assert_eq!((g.port, g.cport, g.pport), (n.port, n.cport, 0), "{name}");
                    assert_eq!(g.ip.text(), b"127.0.0.1", "{name}");
                    assert_eq!(g.flags & node::MYSELF, 0, "{name}");
                    gossip_seen += 1;
                }
                // Redis 7.0 sends one extension, the hostname, when one is announced.
                let hostnames: Vec<ExtView> = p.exts.iter().map(|e| e.view().unwrap()).collect();
                if sender.hostname.is_empty() {
                    assert!(hostnames.is_empty(), "{name}");
                } else {
                    assert_eq!(
                        hostnames,
                        vec![ExtView::Hostname(sender.hostname.as_bytes())],
                        "{name}"
                    );
                    hostnames_seen += 1;
                }
            }
            Body::Fail { about } => {
                assert!(cap.nodes.contains_key(about), "{name}");
                assert_ne!(about, &msg.header.sender, "{name}");
            }
            Body::Publish(p) => assert_eq!(p, &publish("publish"), "{name}"),
            Body::PublishShard(p) => assert_eq!(p, &publish("publishshard"), "{name}"),
            Body::Update(u) => {
                assert!(cap.nodes.contains_key(&u.nodename), "{name}");
                assert!(cap.ranges.contains(&u.slots), "{name}: {:?}", u.slots);
                assert!(u.config_epoch > 0, "{name}");
            }
            Body::FailoverAuthRequest | Body::FailoverAuthAck | Body::MfStart => {
                assert_eq!(bytes.len(), header::HEADER_LEN, "{name}");
            }
            Body::Module(_) | Body::Unknown { .. } => panic!("{name}: not captured"),
        }
    }
    assert!(
        gossip_seen > 0 && hostnames_seen > 0,
        "{gossip_seen} {hostnames_seen}"
    );
}

#[test]
fn every_truncation_and_extension_of_every_fixture_is_refused() {
    let cap = load();
    for (name, _, bytes) in &cap.fixtures {
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "{name} cut to {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err(), "{name} plus a byte");
        // A totlen that claims the extra byte: the type's length check refuses it.
        let totlen = (longer.len() as u32).to_be_bytes();
        longer[offset::TOTLEN..offset::TOTLEN + 4].copy_from_slice(&totlen);
        assert!(
            matches!(decode(&longer), Err(BusError::Length { .. })),
            "{name} with a byte more"
        );
        // A totlen that drops the last byte, the message cut to it.
        let mut shorter = bytes[..bytes.len() - 1].to_vec();
        let totlen = (shorter.len() as u32).to_be_bytes();
        shorter[offset::TOTLEN..offset::TOTLEN + 4].copy_from_slice(&totlen);
        assert!(decode(&shorter).is_err(), "{name} with a byte less");
    }
}

#[test]
fn fixtures_frame_from_one_stream() {
    let cap = load();
    let stream: Vec<u8> = cap.fixtures.iter().flat_map(|f| f.2.clone()).collect();
    let mut r = FrameReader::new(frame::DEFAULT_MAX_MESSAGE_BYTES);
    let mut got = Vec::new();
    for chunk in stream.chunks(1000) {
        r.feed(chunk);
        while let Some(f) = r.next_frame().unwrap() {
            got.push(f.to_vec());
        }
    }
    let want: Vec<Vec<u8>> = cap.fixtures.iter().map(|f| f.2.clone()).collect();
    assert_eq!(got, want);
}
