//! The stream type over an on-disk store: adds, ranges, deletes and trimming with Redis's
//! node bookkeeping, the lag arithmetic, and pending entries, checked against plain models
//! and by `strata check`'s stream verification.

use super::*;
use crate::store::Store;

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = crate::store::tests::open_store(dir.path(), 2);
    (dir, s)
}

/// A stream of `n` entries with IDs 1-0, 2-0, ... in nodes of `node_max`.
fn filled(store: &Tx<'_>, n: u64, node_max: u64) -> Stream {
    let mut s = Stream::create(0, b"s", store.next_version());
    for i in 1..=n {
        let mut w = Writes::new();
        s.add(
            store,
            &mut w,
            StreamId::new(i, 0),
            &[("f", i.to_string())],
            node_max,
        )
        .unwrap();
        s.put_meta(&mut w);
        store.apply(w).unwrap();
    }
    s
}

fn ids(store: &Tx<'_>, s: &Stream) -> Vec<u64> {
    s.collect(store, StreamId::MIN, StreamId::MAX, false, 0)
        .unwrap()
        .into_iter()
        .map(|(id, _)| id.ms)
        .collect()
}

/// Reloads the stream's metadata as the store holds it.
fn reload(store: &Tx<'_>) -> Stream {
    let m = store.get(0, b"s").unwrap().unwrap();
    Stream::from_meta(0, b"s", m).unwrap()
}

fn check(store: &Tx<'_>) {
    let r = crate::check::check_types(store.db()).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

#[test]
fn info_and_entries_round_trip_and_reject_garbage() {
    let i = StreamInfo {
        last_id: StreamId::new(9, 2),
        first_id: StreamId::new(1, 0),
        max_deleted: StreamId::new(3, 0),
        entries_added: 12,
        tail_node: 4,
    };
    assert_eq!(StreamInfo::decode(&i.encode()), Some(i));
    assert_eq!(StreamInfo::decode(&i.encode()[1..]), None);
    let e = encode_entry(true, &[("a", "1"), ("", "")]);
    assert_eq!(
        decode_entry(&e),
        Some((true, vec![(b"a".to_vec(), b"1".to_vec()), (vec![], vec![])]))
    );
    assert_eq!(decode_entry(&e[..e.len() - 1]), None);
    // A huge pair count with no bytes behind it is refused without reserving for it.
    let mut hostile = vec![0u8];
    hostile.extend_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(decode_entry(&hostile), None);
}

#[test]
fn ranges_read_in_id_order_both_ways() {
    let (_d, store) = open();
    let store = store.front();
    let s = filled(&store, 10, 100);
    assert_eq!(ids(&store, &s), (1..=10).collect::<Vec<_>>());
    let rev = s
        .collect(&store, StreamId::new(3, 0), StreamId::new(7, 0), true, 2)
        .unwrap();
    assert_eq!(rev.iter().map(|(id, _)| id.ms).collect::<Vec<_>>(), [7, 6]);
    assert_eq!(rev[0].1, vec![(b"f".to_vec(), b"7".to_vec())]);
    assert!(s
        .collect(&store, StreamId::new(8, 0), StreamId::new(2, 0), false, 0)
        .unwrap()
        .is_empty());
    check(&store);
}

#[test]
fn deletes_keep_first_id_tombstones_and_nodes() {
    let (_d, store) = open();
    let store = store.front();
    let mut s = filled(&store, 7, 3); // nodes [1 2 3] [4 5 6] [7]
    let mut w = Writes::new();
    assert_eq!(
        s.delete(
            &store,
            &mut w,
            &[
                StreamId::new(1, 0),
                StreamId::new(4, 0),
                StreamId::new(99, 0)
            ],
            true
        )
        .unwrap(),
        2
    );
    s.put_meta(&mut w);
    store.apply(w).unwrap();
    let s = reload(&store);
    assert_eq!(s.len(), 5);
    assert_eq!(s.info.first_id, StreamId::new(2, 0));
    assert_eq!(s.info.max_deleted, StreamId::new(4, 0));
    // The nodes' first entries moved to 2 and 5.
    let starts: Vec<u64> = [2, 3, 5, 6, 7]
        .iter()
        .filter(|&&i| s.get_entry(&store, StreamId::new(i, 0)).unwrap().unwrap().0)
        .copied()
        .collect();
    assert_eq!(starts, [2, 5, 7]);
    check(&store);
    // Deleting the last node's only entry makes [4 5 6] the last node again, with the
    // count its first entry kept (3, deleted entries included): full, so the next add
    // starts a node.
    let mut s = s;
    let mut w = Writes::new();
    s.delete(&store, &mut w, &[StreamId::new(7, 0)], true)
        .unwrap();
    assert_eq!(s.info.tail_node, 3);
    s.put_meta(&mut w);
    store.apply(w).unwrap();
    let mut w = Writes::new();
    s.add(&store, &mut w, StreamId::new(8, 0), &[("f", "8")], 3)
        .unwrap();
    s.put_meta(&mut w);
    store.apply(w).unwrap();
    assert!(s.get_entry(&store, StreamId::new(8, 0)).unwrap().unwrap().0);
    // With room in it, the last node takes the next entry.
    let mut w = Writes::new();
    s.add(&store, &mut w, StreamId::new(9, 0), &[("f", "9")], 3)
        .unwrap();
    assert_eq!(s.info.tail_node, 2);
    check(&store);
}

#[test]
fn exact_trimming_removes_the_oldest() {
    let (_d, store) = open();
    let store = store.front();
    let mut s = filled(&store, 10, 4);
    let mut w = Writes::new();
    assert_eq!(
        s.trim(&store, &mut w, Trim::MaxLen(3), false, 0).unwrap(),
        7
    );
    s.put_meta(&mut w);
    store.apply(w).unwrap();
    assert_eq!(ids(&store, &s), [8, 9, 10]);
    assert_eq!(s.info.first_id, StreamId::new(8, 0));
    assert_eq!(
        s.info.max_deleted,
        StreamId::MIN,
        "trimming leaves no tombstone"
    );
    let mut w = Writes::new();
    assert_eq!(
        s.trim(&store, &mut w, Trim::MinId(StreamId::new(10, 0)), false, 0)
            .unwrap(),
        2
    );
    s.put_meta(&mut w);
    store.apply(w).unwrap();
    assert_eq!(ids(&store, &s), [10]);
    check(&store);
}

#[test]
fn approximate_trimming_removes_whole_nodes_within_the_limit() {
    let (_d, store) = open();
    let store = store.front();
    // Nodes of 4: [1..4] [5..8] [9..12] [13..14].
    let mut s = filled(&store, 14, 4);
    let mut w = Writes::new();
    // MAXLEN ~ 7: removing [1..4] leaves 10 >= 7, [5..8] leaves 6 < 7: one node goes.
    assert_eq!(s.trim(&store, &mut w, Trim::MaxLen(7), true, 0).unwrap(), 4);
    s.put_meta(&mut w);
    store.apply(w).unwrap();
    assert_eq!(ids(&store, &s)[0], 5);
    // MINID ~ 11: [5..8] ends below 11 and goes; [9..12] does not.
    let mut w = Writes::new();
    assert_eq!(
        s.trim(&store, &mut w, Trim::MinId(StreamId::new(11, 0)), true, 0)
            .unwrap(),
        4
    );
    s.put_meta(&mut w);
    store.apply(w).unwrap();
    assert_eq!(ids(&store, &s), (9..=14).collect::<Vec<_>>());
    // LIMIT 3 is less than a node: nothing goes.
    let mut w = Writes::new();
    assert_eq!(s.trim(&store, &mut w, Trim::MaxLen(0), true, 3).unwrap(), 0);
    // Without a limit everything goes, the last node too.
    assert_eq!(s.trim(&store, &mut w, Trim::MaxLen(0), true, 0).unwrap(), 6);
    s.put_meta(&mut w);
    store.apply(w).unwrap();
    assert!(s.is_empty());
    assert_eq!((s.info.first_id, s.info.tail_node), (StreamId::MIN, 0));
    check(&store);
}

#[test]
fn lag_follows_redis_estimates() {
    let g = |last: u64, read: Option<u64>| Group {
        last_id: StreamId::new(last, 0),
        entries_read: read,
    };
    let mut i = StreamInfo {
        last_id: StreamId::new(10, 0),
        first_id: StreamId::new(1, 0),
        entries_added: 10,
        ..StreamInfo::default()
    };
    assert_eq!(i.lag(10, &g(4, Some(4))), Some(6));
    // Unknown counter: estimated at the ends, unknown inside.
    assert_eq!(i.lag(10, &g(10, None)), Some(0));
    assert_eq!(i.lag(10, &g(0, None)), Some(10));
    assert_eq!(i.lag(10, &g(1, None)), Some(9));
    assert_eq!(i.lag(10, &g(5, None)), None);
    // A tombstone after the group's position makes the counter unreliable.
    i.max_deleted = StreamId::new(6, 0);
    assert!(i.has_tombstones(9, Some(StreamId::new(4, 0)), None));
    assert!(!i.has_tombstones(9, Some(StreamId::new(7, 0)), None));
    assert_eq!(i.lag(9, &g(4, Some(4))), None);
    assert_eq!(i.lag(9, &g(7, Some(7))), Some(3));
    assert_eq!(StreamInfo::default().lag(0, &g(0, None)), Some(0));
}

#[test]
fn pending_entries_move_between_consumers() {
    let (_d, store) = open();
    let store = store.front();
    let s = filled(&store, 3, 100);
    let mut w = Writes::new();
    s.put_group(
        &mut w,
        b"g",
        &Group {
            last_id: StreamId::MIN,
            entries_read: None,
        },
    );
    for c in [&b"alice"[..], b"bob"] {
        s.put_consumer(&mut w, b"g", c, &Consumer { seen_ms: 1 });
    }
    for i in 1..=3 {
        let e = PelEntry {
            consumer: b"alice".to_vec(),
            delivery_ms: 5,
            deliveries: 1,
        };
        s.pel_put(&mut w, b"g", StreamId::new(i, 0), &e, None);
    }
    store.apply(w).unwrap();
    check(&store);
    assert_eq!(s.pending_count(&store, b"g").unwrap(), 3);
    // Claim 2 for bob: alice's index loses it.
    let mut w = Writes::new();
    let e = PelEntry {
        consumer: b"bob".to_vec(),
        delivery_ms: 6,
        deliveries: 2,
    };
    s.pel_put(&mut w, b"g", StreamId::new(2, 0), &e, Some(b"alice"));
    store.apply(w).unwrap();
    let all = |c: &[u8]| {
        s.consumer_pending(&store, b"g", c, StreamId::MIN, StreamId::MAX, 0)
            .unwrap()
    };
    assert_eq!(all(b"alice"), [StreamId::new(1, 0), StreamId::new(3, 0)]);
    assert_eq!(all(b"bob"), [StreamId::new(2, 0)]);
    assert_eq!(
        s.pel_get(&store, b"g", StreamId::new(2, 0)).unwrap(),
        Some(e)
    );
    check(&store);
    // Deleting alice drops her two pending entries; destroying the group drops the rest.
    let mut w = Writes::new();
    assert_eq!(
        s.delete_consumer(&store, &mut w, b"g", b"alice").unwrap(),
        2
    );
    store.apply(w).unwrap();
    assert_eq!(s.pending_count(&store, b"g").unwrap(), 1);
    check(&store);
    let mut w = Writes::new();
    s.delete_group(&store, &mut w, b"g").unwrap();
    store.apply(w).unwrap();
    assert!(s.groups(&store).unwrap().is_empty());
    assert_eq!(s.pending_count(&store, b"g").unwrap(), 0);
    check(&store);
}

#[test]
fn check_finds_a_stream_whose_length_disagrees() {
    let (_d, store) = open();
    let store = store.front();
    let mut s = filled(&store, 3, 100);
    s.meta.size = 4;
    let mut w = Writes::new();
    s.put_meta(&mut w);
    store.apply(w).unwrap();
    let r = crate::check::check_types(store.db()).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains("stream length 4 but 3 entry records")),
        "{:?}",
        r.problems
    );
}
