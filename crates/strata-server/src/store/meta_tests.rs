//! The key-metadata record and the writes of one command, without a store: the record's
//! bytes (its type numbers are on disk), what decodes and what does not, expiry at its
//! boundary, the deleted-member count of the member-keyed collections, the type check, and
//! what a `Writes` remembers of the keys it writes.

use super::*;

const ALL: [RType; 6] = [
    RType::String,
    RType::Hash,
    RType::List,
    RType::Set,
    RType::ZSet,
    RType::Stream,
];

#[test]
fn the_record_round_trips_with_its_bytes_in_place() {
    let m = Meta {
        rtype: RType::String,
        expire_ms: 1_700_000_000_000,
        version: 42,
        size: 3,
        value: b"abc".to_vec(),
    };
    let e = m.encode();
    assert_eq!(e.len(), META_HEADER_BYTES + 3);
    assert_eq!(e[0], 0, "type");
    assert_eq!(e[1..9], 1_700_000_000_000u64.to_be_bytes(), "expiry");
    assert_eq!(e[9..17], 42u64.to_be_bytes(), "version");
    assert_eq!(e[17..25], 3u64.to_be_bytes(), "size");
    assert_eq!(&e[25..], b"abc");
    assert_eq!(Meta::decode(&e), Some(m.clone()));
    assert_eq!(Meta::decode_owned(e.clone()), Some(m));
    assert_eq!(Meta::decode_owned(e[..10].to_vec()), None);
}

#[test]
fn type_numbers_are_on_disk_and_unknown_ones_do_not_decode() {
    for (n, t) in ALL.into_iter().enumerate() {
        let m = Meta::collection(t, 7);
        let e = m.encode();
        assert_eq!(usize::from(e[0]), n, "{t:?} is {n} on disk");
        assert_eq!(Meta::decode(&e), Some(m));
        assert_eq!(t.is_collection(), t != RType::String);
    }
    let names: Vec<&str> = ALL.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["string", "hash", "list", "set", "zset", "stream"]);
    let mut bad = Meta::collection(RType::Set, 1).encode();
    bad[0] = 6;
    assert_eq!(Meta::decode(&bad), None);
    bad[0] = 0xff;
    assert_eq!(Meta::decode(&bad), None);
    let short = Meta::collection(RType::Set, 1).encode();
    assert_eq!(Meta::decode(&short[..META_HEADER_BYTES - 1]), None);
    assert_eq!(Meta::decode(&[]), None);
}

#[test]
fn a_string_record_and_expiry_at_its_boundary() {
    let s = Meta::string(9, b"value".to_vec(), 0);
    assert_eq!(
        (s.rtype, s.version, s.size, &s.value[..], s.expiry()),
        (RType::String, 9, 5, &b"value"[..], None)
    );
    assert!(!s.expired_at(u64::MAX), "no expiry never expires");
    let t = Meta::string(9, Vec::new(), 1_000);
    assert_eq!((t.size, t.expiry()), (0, Some(1_000)));
    assert!(!t.expired_at(999));
    assert!(t.expired_at(1_000), "due at its millisecond");
    assert!(t.expired_at(1_001));
}

#[test]
fn only_member_keyed_collections_count_deleted_members() {
    for t in ALL {
        let mut m = Meta::collection(t, 1);
        assert_eq!(m.dead_members(), 0);
        m.set_dead_members(5);
        let counts = matches!(t, RType::Hash | RType::Set | RType::ZSet);
        assert_eq!(m.dead_members(), if counts { 5 } else { 0 }, "{t:?}");
        assert_eq!(
            m.value.is_empty(),
            !counts,
            "{t:?}: extras only where counted"
        );
    }
    // The flags byte before the count is kept, and the count survives the record's bytes.
    let mut h = Meta::collection(RType::Hash, 1);
    h.value = vec![1];
    h.set_dead_members(300);
    assert_eq!(h.value[0], 1);
    let h = Meta::decode(&h.encode()).unwrap();
    assert_eq!(h.dead_members(), 300);
    // A list keeps its bounds where the count would be.
    let mut l = Meta::collection(RType::List, 1);
    l.value = vec![7; 16];
    l.set_dead_members(3);
    assert_eq!((l.dead_members(), l.value.clone()), (0, vec![7; 16]));
}

#[test]
fn the_type_check() {
    let s = Meta::string(1, b"v".to_vec(), 0);
    assert_eq!(s.clone().of_type(RType::String).unwrap(), s);
    assert!(matches!(s.of_type(RType::List), Err(TypeError::WrongType)));
    assert_eq!(
        crate::error::CmdError::from(TypeError::WrongType).message(),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn writes_remember_the_keys_they_touch() {
    let m = Meta::collection(RType::Hash, 3);
    let mut w = Writes::new();
    assert!(w.is_empty());
    w.put_member(0, b"h", b"rec-a", b"1");
    w.put_member(0, b"h", b"rec-b", b"2");
    w.delete_member(0, b"h", b"rec-c");
    w.delete_member(0, b"h", b"rec-d");
    w.delete_member(1, b"h", b"rec-e");
    w.delete_member(0, b"h", b"rec-f");
    w.meta(0, b"h", Some(&m));
    w.meta(0, b"gone", None);
    assert!(!w.is_empty());
    // Consecutive writes of one key are noted once; another key (or database) in between
    // starts a new entry.
    let touched: Vec<(u8, &[u8])> = w.touched.iter().map(|(d, k)| (*d, &k[..])).collect();
    assert_eq!(touched, [(0, &b"h"[..]), (1, b"h"), (0, b"h")]);
    let deleted: Vec<(u8, &[u8], u64)> =
        w.deleted.iter().map(|(d, k, n)| (*d, &k[..], *n)).collect();
    assert_eq!(deleted, [(0, &b"h"[..], 2), (1, b"h", 1), (0, b"h", 1)]);
    let metas: Vec<(u8, &[u8], Option<&Meta>)> = w
        .metas
        .iter()
        .map(|(d, k, m)| (*d, &k[..], m.as_ref()))
        .collect();
    assert_eq!(metas, [(0, &b"h"[..], Some(&m)), (0, b"gone", None)]);
}

#[test]
fn the_header_peek_reads_what_decode_reads_and_refuses_what_it_refuses() {
    for rtype in ALL {
        let m = Meta {
            rtype,
            expire_ms: 1_700_000_000_123,
            version: 7,
            size: 2,
            value: b"xy".to_vec(),
        };
        let e = m.encode();
        let h = Meta::peek(&e).expect("a valid record");
        assert_eq!(
            (h.rtype, h.expire_ms, h.version),
            (m.rtype, m.expire_ms, m.version)
        );
        assert!(h.expired_at(1_700_000_000_123) && !h.expired_at(1_700_000_000_122));
        assert_eq!(Meta::peek(&e[..META_HEADER_BYTES - 1]), None, "cut header");
    }
    let mut bad = Meta::string(1, b"v".to_vec(), 0).encode();
    bad[0] = 0xee;
    assert_eq!(Meta::peek(&bad), None, "unknown type");
    assert_eq!(Meta::decode(&bad).map(|m| m.rtype), None);
}
