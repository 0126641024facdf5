//! The stream codec against payloads captured from redis-server 7.0.15 (`fixtures.rs`,
//! type `STREAM_LISTPACKS_2`), the node listpacks Strata writes against Redis's bytes,
//! round trips through the three stream types, and hostile and fuzzed payloads.

use super::fixtures::{b, hex};
use super::stream::{
    node_listpack, write_as, ConsumerValue, GroupValue, Node, PendingValue, StreamValue,
};
use super::*;
use crate::stream::StreamId;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

fn fields(pairs: &[(&str, &str)]) -> stream::Fields {
    pairs.iter().map(|(f, v)| (b(f), b(v))).collect()
}

fn frame(body: &[u8], version: u16) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&version.to_le_bytes());
    let crc = crc64::crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

fn stream_of(payload: &[u8]) -> Result<StreamValue, RdbError> {
    match parse_payload(payload)? {
        Value::Stream(s) => Ok(*s),
        v => panic!("not a stream: {v:?}"),
    }
}

fn from_hex(s: &str) -> StreamValue {
    stream_of(&hex(s)).unwrap_or_else(|e| panic!("{e}"))
}

/// The node listpacks of a payload body (type, node count, then key and listpack each).
fn node_blobs(body: &[u8]) -> Vec<Vec<u8>> {
    let mut r = Reader::new(body);
    r.u8("type").unwrap();
    let n = r.count("nodes").unwrap();
    (0..n)
        .map(|_| {
            r.string("key").unwrap();
            r.string("listpack").unwrap()
        })
        .collect()
}

fn body(s: &StreamValue, t: u8) -> Vec<u8> {
    let mut out = Vec::new();
    write_as(&mut out, s, t);
    out
}

fn pending(ms: u64, consumer: &str, delivery_ms: u64, deliveries: u64) -> PendingValue {
    PendingValue {
        id: id(ms, 0),
        consumer: b(consumer),
        delivery_ms,
        deliveries,
    }
}

fn consumer(name: &str, seen_ms: u64) -> ConsumerValue {
    ConsumerValue {
        name: b(name),
        seen_ms,
    }
}

#[test]
fn streams_from_redis() {
    use fixtures::*;
    let same = from_hex(STREAM_SAMEFIELDS);
    let entries = vec![
        (id(1, 1), fields(&[("a", "1"), ("b", "x")])),
        (id(1, 2), fields(&[("a", "2"), ("b", "y")])),
        (id(2, 0), fields(&[("c", "z")])),
    ];
    let expected = StreamValue {
        nodes: vec![Node { entries, total: 3 }],
        last_id: id(2, 0),
        max_deleted: StreamId::MIN,
        entries_added: 3,
        groups: vec![],
    };
    assert_eq!(same, expected);

    // Nodes of two: [1 (2 deleted)], [3 4] all deleted and gone, [5].
    let nodes = from_hex(STREAM_NODES);
    let n1 = Node {
        entries: vec![(id(1, 0), fields(&[("f", "v1")]))],
        total: 2,
    };
    let n3 = Node {
        entries: vec![(id(5, 0), fields(&[("f", "v5")]))],
        total: 1,
    };
    assert_eq!(nodes.nodes, vec![n1, n3]);
    assert_eq!((nodes.last_id, nodes.max_deleted), (id(5, 0), id(4, 0)));
    assert_eq!((nodes.entries_added, nodes.len()), (5, 2));

    let empty = from_hex(STREAM_EMPTY);
    assert!(empty.is_empty());
    assert_eq!((empty.last_id, empty.max_deleted), (id(5, 0), id(5, 0)));
    assert_eq!(empty.entries_added, 1);
    let g = GroupValue {
        name: b("g"),
        last_id: StreamId::MIN,
        entries_read: None,
        pel: vec![],
        consumers: vec![],
    };
    assert_eq!(empty.groups, vec![g]);

    let lzf = from_hex(STREAM_LZF);
    let value = "value".repeat(6);
    let entries: Vec<_> = (1..=20)
        .map(|i| (id(i, 0), fields(&[("name", &value)])))
        .collect();
    assert_eq!(lzf.nodes, vec![Node { entries, total: 20 }]);

    let ints = from_hex(STREAM_INTS);
    let (x, y) = ("x".repeat(100), "y".repeat(5000));
    let f = fields(&[
        ("a", "300"),
        ("b", "70000"),
        ("c", "-3"),
        ("d", "5000000000"),
        ("e", "2000000000"),
        ("s", &x),
        ("t", &y),
    ]);
    let entries = vec![(id(1_000_000_000_000, 5), f)];
    assert_eq!(ints.nodes, vec![Node { entries, total: 1 }]);
}

#[test]
fn groups_from_redis() {
    let s = from_hex(fixtures::STREAM_GROUPS);
    assert_eq!(s.len(), 3);
    let [g1, g2] = &s.groups[..] else {
        panic!("two groups: {:?}", s.groups)
    };
    assert_eq!(
        (&g1.name[..], g1.last_id, g1.entries_read),
        (&b"g1"[..], id(3, 0), Some(3))
    );
    // Delivery and seen times of XREADGROUP are the capture's clock: after 2023.
    let t = |p: &PendingValue| (p.id, p.consumer.clone(), p.deliveries);
    let got: Vec<_> = g1.pel.iter().map(t).collect();
    let want = vec![
        (id(1, 0), b("bob"), 7),
        (id(2, 0), b("alice"), 1),
        (id(3, 0), b("bob"), 1),
    ];
    assert_eq!(got, want);
    assert_eq!(g1.pel[0].delivery_ms, 1_700_000_000_000);
    assert!(g1.pel[1..]
        .iter()
        .all(|p| p.delivery_ms > 1_700_000_000_000));
    let names: Vec<_> = g1.consumers.iter().map(|c| c.name.clone()).collect();
    assert_eq!(names, vec![b("alice"), b("bob")]);
    assert!(g1.consumers.iter().all(|c| c.seen_ms > 1_700_000_000_000));
    assert_eq!(
        (&g2.name[..], g2.last_id, g2.entries_read),
        (&b"g2"[..], id(3, 0), Some(3))
    );
    assert!(g2.pel.is_empty());
    assert_eq!(g2.consumers.len(), 1);
    assert_eq!(g2.consumers[0].name, b("carol"));
}

#[test]
fn node_listpacks_are_redis_s_bytes() {
    use fixtures::*;
    for fx in [
        STREAM_SAMEFIELDS,
        STREAM_GROUPS,
        STREAM_LZF,
        STREAM_INTS,
        STREAM_NODES,
    ] {
        let p = hex(fx);
        let s = stream_of(&p).unwrap();
        let (body, _) = check_payload(&p).unwrap();
        let blobs = node_blobs(body);
        for (node, blob) in s.nodes.iter().zip(&blobs) {
            // Redis keeps a deleted entry in its node; Strata writes live entries only.
            if node.total == node.entries.len() as u64 {
                assert_eq!(&node_listpack(node), blob, "{fx}");
            }
        }
    }
}

/// What reading back a stream written as `STREAM_LISTPACKS_2` or `_3` gives: the same
/// value, with each node's total its live entries (deleted ones are not written).
fn live_totals(mut s: StreamValue) -> StreamValue {
    for n in &mut s.nodes {
        n.total = n.entries.len() as u64;
    }
    s
}

#[test]
fn round_trips_through_every_stream_type() {
    use fixtures::*;
    for fx in [
        STREAM_SAMEFIELDS,
        STREAM_NODES,
        STREAM_GROUPS,
        STREAM_EMPTY,
        STREAM_LZF,
        STREAM_INTS,
    ] {
        let s = from_hex(fx);
        for (t, version) in [
            (types::STREAM_LISTPACKS_2, 10),
            (types::STREAM_LISTPACKS_3, 11),
        ] {
            let back = stream_of(&frame(&body(&s, t), version)).unwrap();
            assert_eq!(back, live_totals(s.clone()), "{fx} as type {t}");
        }
        // Type 15, DUMP's: Redis 7's loader's derivations of what it does not carry.
        let back = stream_of(&dump_payload(&Value::Stream(Box::new(s.clone())))).unwrap();
        assert_eq!(back.nodes, live_totals(s.clone()).nodes, "{fx}");
        assert_eq!(back.last_id, s.last_id);
        assert_eq!(
            (back.entries_added, back.max_deleted),
            (s.len(), StreamId::MIN)
        );
        for (a, b) in back.groups.iter().zip(&s.groups) {
            assert_eq!(
                (&a.name, a.last_id, &a.pel, &a.consumers),
                (&b.name, b.last_id, &b.pel, &b.consumers)
            );
        }
    }
    // Groups' entries read, estimated as Redis 7 does for type 15: known at the last ID.
    let back = stream_of(&dump_payload(
        &parse_payload(&hex(fixtures::STREAM_GROUPS)).unwrap(),
    ));
    assert!(back
        .unwrap()
        .groups
        .iter()
        .all(|g| g.entries_read == Some(3)));
}

/// A small valid stream with a group, a consumer and a pending entry.
fn sample() -> StreamValue {
    StreamValue {
        nodes: vec![
            Node {
                entries: vec![
                    (id(1, 0), fields(&[("f", "1")])),
                    (id(2, 0), fields(&[("f", "2")])),
                ],
                total: 2,
            },
            Node {
                entries: vec![(id(3, 0), fields(&[("g", "3")]))],
                total: 1,
            },
        ],
        last_id: id(3, 0),
        max_deleted: StreamId::MIN,
        entries_added: 3,
        groups: vec![GroupValue {
            name: b("grp"),
            last_id: id(2, 0),
            entries_read: Some(2),
            pel: vec![pending(1, "c1", 5, 1), pending(2, "c2", 6, 2)],
            consumers: vec![consumer("c1", 7), consumer("c2", 8)],
        }],
    }
}

fn rejects(body: &[u8], why: &str) {
    let e = stream_of(&frame(body, 10));
    assert!(e.is_err(), "{why}: accepted {e:?}");
}

#[test]
fn hostile_streams_are_refused() {
    let t = types::STREAM_LISTPACKS_2;
    assert_eq!(stream_of(&frame(&body(&sample(), t), 10)), Ok(sample()));

    let mut s = sample();
    s.groups[0].pel[1].consumer = b("nobody");
    rejects(&body(&s, t), "a pending entry no consumer owns");

    // c2's own PEL names 9-0, which the group's PEL does not hold.
    let mut bad = body(&sample(), t);
    let at = bad.len() - 16;
    assert_eq!(&bad[at..], &id(2, 0).to_bytes());
    bad[at..].copy_from_slice(&id(9, 0).to_bytes());
    rejects(&bad, "a consumer's pending entry missing from the group");

    let mut s = sample();
    s.groups.push(s.groups[0].clone());
    rejects(&body(&s, t), "duplicate group");
    let mut s = sample();
    s.groups[0].consumers.push(consumer("c1", 1));
    rejects(&body(&s, t), "duplicate consumer");
    let mut s = sample();
    s.nodes.swap(0, 1);
    rejects(&body(&s, t), "entries out of order");
    let mut s = sample();
    s.last_id = id(2, 0);
    rejects(&body(&s, t), "an entry above the last ID");
    let mut s = sample();
    s.entries_added = 1;
    rejects(&body(&s, t), "fewer added than live");
    s.entries_added = u64::MAX - 1;
    rejects(&body(&s, t), "more added than a signed counter holds");
    let mut s = sample();
    s.groups[0].entries_read = Some(4);
    rejects(&body(&s, t), "more read than added");

    // The first node's master count (its listpack's first element) says 3 for 2 entries.
    let mut bad = body(&sample(), t);
    assert_eq!((bad[1], bad[2], bad[26]), (2, 16, 2));
    bad[26] = 3;
    rejects(&bad, "a node whose count does not match its entries");
    // The master's deleted count says 1 with no deleted entry.
    let mut bad = body(&sample(), t);
    bad[28] = 1;
    rejects(&bad, "a deleted count without deleted entries");

    // Counts far beyond the data: refused before anything is reserved.
    let mut huge = vec![t];
    write::length(&mut huge, u64::from(u32::MAX));
    rejects(&huge, "four billion nodes in two bytes");
    let mut huge = vec![t, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    write::length(&mut huge, 1 << 40);
    rejects(&huge, "a trillion groups");
}

#[test]
fn truncated_and_bit_flipped_streams_never_panic() {
    use fixtures::*;
    for fx in [STREAM_GROUPS, STREAM_NODES, STREAM_INTS] {
        let p = hex(fx);
        let (body, _) = check_payload(&p).unwrap();
        for end in 0..body.len() {
            assert!(parse_body(&body[..end]).is_err(), "{fx} cut at {end}");
        }
        let mut wrong_crc = p.clone();
        let n = wrong_crc.len();
        wrong_crc[n - 1] ^= 1;
        assert!(matches!(
            parse_payload(&wrong_crc),
            Err(RdbError::Checksum { .. })
        ));
        // Every single bit flipped, checksum fixed: an error or a consistent value.
        for bit in 0..body.len() * 8 {
            let mut m = body.to_vec();
            m[bit / 8] ^= 1 << (bit % 8);
            if let Ok(v) = parse_body(&m) {
                assert!(parse_payload(&dump_payload(&v)).is_ok(), "{fx} bit {bit}");
            }
        }
    }
}

/// xorshift64: a dependency-free, seeded source of mutations.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn fuzzed_stream_payloads_never_panic() {
    use fixtures::*;
    let seeds = [STREAM_GROUPS, STREAM_NODES, STREAM_SAMEFIELDS, STREAM_EMPTY];
    let mut st = 0x9e37_79b9_7f4a_7c15u64;
    for fx in seeds {
        let p = hex(fx);
        let (orig, _) = check_payload(&p).unwrap();
        for _ in 0..3000 {
            let mut m = orig.to_vec();
            for _ in 0..1 + next(&mut st) % 4 {
                let at = (next(&mut st) as usize) % m.len().max(1);
                match next(&mut st) % 5 {
                    0 => m[at] = next(&mut st) as u8,
                    1 => m[at] ^= 1 << (next(&mut st) % 8),
                    2 => m.truncate(at),
                    3 => m.insert(at, next(&mut st) as u8),
                    _ => {
                        let b = [0x00, 0x01, 0x3f, 0x40, 0x7f, 0x80, 0x81, 0xc3, 0xf0, 0xff];
                        m[at] = b[(next(&mut st) % 10) as usize];
                    }
                }
                if m.is_empty() {
                    break;
                }
            }
            if let Ok(v) = parse_payload(&frame(&m, 10)) {
                assert!(parse_payload(&dump_payload(&v)).is_ok(), "{fx}: {m:02x?}");
            }
        }
    }
}

#[test]
fn listpack_builder_round_trips_every_encoding() {
    use packed::{build_listpack, listpack, LpItem};
    let ints = [
        0,
        127,
        128,
        -1,
        -4096,
        4095,
        4096,
        -32768,
        32767,
        32768,
        -8_388_608,
        8_388_607,
        8_388_608,
        i64::from(i32::MIN),
        i64::from(i32::MAX),
        i64::from(i32::MAX) + 1,
        i64::MIN,
        i64::MAX,
    ];
    let texts: Vec<Vec<u8>> = ["007", "-0", "+1", "", "12345678901234567890123"]
        .iter()
        .map(|s| b(s))
        .chain([63, 64, 4095, 4096, 20_000].map(|n| vec![b'a'; n]))
        .collect();
    let mut items: Vec<LpItem<'_>> = ints.iter().map(|&v| LpItem::Int(v)).collect();
    items.extend(texts.iter().map(|t| LpItem::Str(t)));
    let lp = build_listpack(&items);
    let mut want: Vec<Vec<u8>> = ints.iter().map(|v| v.to_string().into_bytes()).collect();
    want.extend(texts.iter().cloned());
    assert_eq!(listpack(&lp), Ok(want));
    // A 202-byte entry's back-length: two bytes, the high group first.
    let s200 = vec![b'a'; 200];
    let lp = build_listpack(&[LpItem::Str(&s200)]);
    assert_eq!(&lp[6..8], &[0xe0, 200]);
    assert_eq!(&lp[208..], &[0x01, 0x80 | (202 & 0x7f), 0xff]);
    // Canonical integer text is stored as an integer (13-bit form here), as Redis does.
    assert_eq!(
        &build_listpack(&[LpItem::Str(b"-3")])[6..9],
        &[0xdf, 0xfd, 2]
    );
}
