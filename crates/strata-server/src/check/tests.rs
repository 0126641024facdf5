//! The type check over a store built through the types layer, then with each kind of
//! inconsistency written as raw records through the `Db`.

use super::*;
use crate::keys::{meta_key, sub_key, sub_prefix};
use crate::list::{End, List};
use crate::store::{Store, Writes};
use crate::zset::{self, Loc};

fn open_store(dir: &std::path::Path) -> Store {
    crate::store::tests::open_store(dir, 2)
}

/// One key of each type in database 0 (and a hash in database 3), plus the garbage of a
/// deleted set and of an overwritten hash.
fn populate(s: &crate::store::Tx<'_>) {
    s.put(
        0,
        b"str",
        &Meta {
            rtype: RType::String,
            expire_ms: 0,
            version: s.next_version(),
            size: 3,
            value: b"abc".to_vec(),
        },
    )
    .unwrap();
    for (db, key) in [(0u8, &b"h"[..]), (3, b"h")] {
        let mut m = Meta::collection(RType::Hash, s.next_version());
        let mut w = Writes::new();
        for f in ["a", "b", "c"] {
            w.put_member(db, key, &sub_key(db, key, m.version, f.as_bytes()), b"v");
        }
        m.size = 3;
        w.meta(db, key, Some(&m));
        s.apply(w).unwrap();
    }
    let mut m = Meta::collection(RType::Set, s.next_version());
    let mut w = Writes::new();
    for x in ["1", "2"] {
        w.put_member(0, b"s", &sub_key(0, b"s", m.version, x.as_bytes()), b"");
    }
    m.size = 2;
    w.meta(0, b"s", Some(&m));
    s.apply(w).unwrap();
    // A deleted set: its member records are garbage.
    let mut m = Meta::collection(RType::Set, s.next_version());
    let mut w = Writes::new();
    w.put_member(0, b"gone", &sub_key(0, b"gone", m.version, b"x"), b"");
    m.size = 1;
    w.meta(0, b"gone", Some(&m));
    s.apply(w).unwrap();
    s.delete(0, b"gone").unwrap();
    // The hash "h" recreated: the old incarnation's three fields are garbage.
    let mut m = Meta::collection(RType::Hash, s.next_version());
    let mut w = Writes::new();
    w.put_member(0, b"h", &sub_key(0, b"h", m.version, b"z"), b"v");
    m.size = 1;
    w.meta(0, b"h", Some(&m));
    s.apply(w).unwrap();

    let mut l = List::create(s, 0, b"l");
    let mut w = Writes::new();
    l.stage_push(&mut w, End::Right, &["a", "b", "c"]);
    l.stage_push(&mut w, End::Left, &["z"]);
    l.finish(&mut w);
    s.apply(w).unwrap();

    let mut m = Meta::collection(RType::ZSet, s.next_version());
    let z = Loc {
        db: 0,
        key: b"z",
        version: m.version,
    };
    let mut w = Writes::new();
    zset::put(&mut w, z, b"a", None, 1.5);
    zset::put(&mut w, z, b"b", None, -0.0);
    zset::put(&mut w, z, b"c", None, f64::NEG_INFINITY);
    m.size = 3;
    w.meta(0, b"z", Some(&m));
    s.apply(w).unwrap();
}

fn meta_of(db: &Db, d: u8, key: &[u8]) -> Meta {
    Meta::decode(&db.get(&meta_key(d, key)).unwrap().unwrap()).unwrap()
}

/// A clean store's report, then the problems `corrupt` leaves (each must mention `want`).
fn problems_after(corrupt: impl FnOnce(&Db)) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let s = store.front();
    populate(&s);
    drop(s);
    let db = store.into_db();
    let clean = check_types(&db).unwrap();
    assert!(clean.is_ok(), "{clean:?}");
    corrupt(&db);
    let r = check_types(&db).unwrap();
    assert_eq!(r.problem_count as usize, r.problems.len());
    r.problems
}

fn assert_reported(problems: &[String], want: &[&str]) {
    assert!(!problems.is_empty(), "no problem reported, wanted {want:?}");
    for w in want {
        assert!(
            problems.iter().any(|p| p.contains(w)),
            "{w:?} not among {problems:#?}"
        );
    }
}

#[test]
fn a_store_of_every_type_is_clean_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_store(dir.path());
    let s = s.front();
    assert!(is_server_db(s.db()).unwrap());
    populate(&s);
    let r = check_types(s.db()).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.keys, [1, 2, 1, 1, 1, 0]);
    // h: 1 field, h in db 3: 3, s: 2, l: 4, z: 3.
    assert_eq!(r.members, 1 + 3 + 2 + 4 + 3);
    assert_eq!(r.score_records, 3);
    assert_eq!(r.garbage, 3 + 1, "old incarnation of h, deleted set");
}

#[test]
fn plain_database_is_not_a_server_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), strata::DbOptions::default()).unwrap();
    assert!(!is_server_db(&db).unwrap());
}

#[test]
fn wrong_size_is_reported() {
    let p = problems_after(|db| {
        let mut m = meta_of(db, 0, b"s");
        m.size = 5;
        db.put(&meta_key(0, b"s"), &m.encode()).unwrap();
    });
    assert_reported(&p, &["key \"s\": set size 5 but 2 member records"]);
}

#[test]
fn extra_member_of_the_live_version_is_reported() {
    let p = problems_after(|db| {
        let v = meta_of(db, 3, b"h").version;
        db.put(&sub_key(3, b"h", v, b"extra"), b"v").unwrap();
    });
    assert_reported(&p, &["db 3 key \"h\": hash size 3 but 4 member records"]);
}

#[test]
fn missing_list_index_is_reported() {
    let p = problems_after(|db| {
        let m = meta_of(db, 0, b"l");
        let head = Bounds::decode(&m.value).unwrap().head;
        db.delete(&sub_key(0, b"l", m.version, &(head + 1).to_be_bytes()))
            .unwrap();
    });
    assert_reported(
        &p,
        &[
            "list elements missing at indexes",
            "list size 4 but 3 member records",
        ],
    );
}

#[test]
fn missing_last_list_index_is_reported() {
    let p = problems_after(|db| {
        let m = meta_of(db, 0, b"l");
        let tail = Bounds::decode(&m.value).unwrap().tail;
        db.delete(&sub_key(0, b"l", m.version, &(tail - 1).to_be_bytes()))
            .unwrap();
    });
    assert_reported(&p, &["list elements missing at indexes"]);
}

#[test]
fn list_element_outside_head_and_tail_is_reported() {
    let p = problems_after(|db| {
        let m = meta_of(db, 0, b"l");
        let tail = Bounds::decode(&m.value).unwrap().tail;
        db.put(
            &sub_key(0, b"l", m.version, &(tail + 3).to_be_bytes()),
            b"x",
        )
        .unwrap();
    });
    assert_reported(&p, &["outside [head"]);
}

#[test]
fn list_size_other_than_tail_minus_head_is_reported() {
    let p = problems_after(|db| {
        let mut m = meta_of(db, 0, b"l");
        m.size = 9;
        db.put(&meta_key(0, b"l"), &m.encode()).unwrap();
    });
    assert_reported(&p, &["list size 9 but tail - head = 4"]);
}

fn score_key(key: &[u8], version: u64, score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(KIND_SCORE, 0, key, version);
    k.extend_from_slice(&encode_score(score));
    k.extend_from_slice(member);
    k
}

#[test]
fn score_record_without_member_is_reported() {
    let p = problems_after(|db| {
        let v = meta_of(db, 0, b"z").version;
        db.put(&score_key(b"z", v, 7.0, b"ghost"), b"").unwrap();
    });
    assert_reported(
        &p,
        &[
            "score record of \"ghost\" without a member record",
            "zset size 3 but 4 score records",
        ],
    );
}

#[test]
fn member_without_score_record_is_reported() {
    let p = problems_after(|db| {
        let v = meta_of(db, 0, b"z").version;
        db.delete(&score_key(b"z", v, 1.5, b"a")).unwrap();
    });
    assert_reported(
        &p,
        &[
            "member \"a\" without a score record",
            "zset size 3 but 2 score records",
        ],
    );
}

#[test]
fn score_record_with_another_score_is_reported() {
    let p = problems_after(|db| {
        let v = meta_of(db, 0, b"z").version;
        db.delete(&score_key(b"z", v, 1.5, b"a")).unwrap();
        db.put(&score_key(b"z", v, 2.5, b"a"), b"").unwrap();
    });
    assert_reported(&p, &["disagrees with its member record's score 1.5"]);
}

#[test]
fn negative_zero_flag_is_checked() {
    let p = problems_after(|db| {
        let v = meta_of(db, 0, b"z").version;
        db.put(&score_key(b"z", v, 0.0, b"b"), b"").unwrap();
    });
    assert_reported(&p, &["score record of \"b\" disagrees"]);
}

#[test]
fn members_under_another_type_are_reported() {
    let p = problems_after(|db| {
        let v = meta_of(db, 0, b"str").version;
        db.put(&sub_key(0, b"str", v, b"f"), b"v").unwrap();
        let v = meta_of(db, 0, b"s").version;
        let mut k = sub_prefix(KIND_SCORE, 0, b"s", v);
        k.extend_from_slice(&encode_score(1.0));
        k.extend_from_slice(b"1");
        db.put(&k, b"").unwrap();
        db.put(&sub_key(0, b"s", v, b"3"), b"not empty").unwrap();
    });
    assert_reported(
        &p,
        &[
            "key \"str\": member record under a string",
            "key \"s\": score record under a set",
            "set member record holds a value",
        ],
    );
}

#[test]
fn members_of_other_versions_are_garbage_not_problems() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let s = store.front();
    populate(&s);
    drop(s);
    let db = store.into_db();
    let before = check_types(&db).unwrap();
    let v = meta_of(&db, 0, b"z").version;
    // An older and a newer incarnation's records, and members of a key with no metadata.
    db.put(
        &sub_key(0, b"z", v - 1, b"old"),
        &1f64.to_bits().to_be_bytes(),
    )
    .unwrap();
    db.put(&score_key(b"z", v + 1, 1.0, b"new"), b"").unwrap();
    db.put(&sub_key(0, b"nokey", 1, b"x"), b"").unwrap();
    let r = check_types(&db).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.garbage, before.garbage + 3);
}

#[test]
fn undecodable_and_empty_metadata_are_reported() {
    let p = problems_after(|db| {
        db.put(&meta_key(0, b"bad"), &[9u8; 30]).unwrap();
        let mut m = Meta::collection(RType::Hash, 1);
        m.size = 0;
        db.put(&meta_key(0, b"empty"), &m.encode()).unwrap();
    });
    assert_reported(
        &p,
        &[
            "key \"bad\": metadata record does not decode",
            "key \"empty\": empty hash (size 0)",
        ],
    );
}
