//! The hash type over an in-memory store: field writes and reads, deletes down to nothing,
//! read-modify-writes that fail without writing, the listpack → hashtable rules, and the
//! three transactions a handle may be given (front, EXEC, worker).

use super::*;
use crate::collection::{encoding, TypeError};
use crate::store::tests::{in_exec, mem_store, on_worker, put_string};

const SMALL: Limits = Limits {
    max_entries: 3,
    max_value: 8,
};

fn fields(h: &Hash<'_>) -> Vec<(String, String)> {
    h.all()
        .unwrap()
        .into_iter()
        .map(|(f, v)| (String::from_utf8(f).unwrap(), String::from_utf8(v).unwrap()))
        .collect()
}

#[test]
fn set_get_and_delete_down_to_nothing() {
    let store = mem_store(2);
    let tx = store.front();
    assert!(Hash::open(&tx, 0, b"h").unwrap().is_none());
    let mut h = Hash::open_or_create(&tx, 0, b"h").unwrap();
    assert_eq!((h.len(), h.get(b"a").unwrap()), (0, None));
    // A repeated field counts once and keeps its last value.
    let pairs: [&[u8]; 6] = [b"a", b"1", b"b", b"2", b"a", b"3"];
    assert_eq!(h.set(&pairs, SMALL).unwrap(), 2);
    let h = Hash::open(&tx, 0, b"h").unwrap().expect("created");
    assert_eq!(h.len(), 2);
    assert_eq!(
        fields(&h),
        [("a".into(), "3".into()), ("b".into(), "2".into())]
    );
    assert_eq!(
        h.get_many(&[b"b", b"zz", b"a"]).unwrap(),
        [Some(b"2".to_vec()), None, Some(b"3".to_vec())]
    );
    // Setting existing fields creates none; HSETNX only sets an absent field.
    let mut h = Hash::open_write(&tx, 0, b"h").unwrap().unwrap();
    assert_eq!(h.set(&[&b"b"[..], b"22"], SMALL).unwrap(), 0);
    assert!(!h.set_nx(b"a", b"x", SMALL).unwrap());
    assert!(h.set_nx(b"c", b"x", SMALL).unwrap());
    assert_eq!(h.len(), 3);
    // HDEL counts each existing field once; the last field takes the key with it.
    assert_eq!(h.del(&[&b"a"[..], b"a", b"nope"]).unwrap(), 1);
    assert_eq!(Hash::open(&tx, 0, b"h").unwrap().unwrap().len(), 2);
    assert_eq!(h.del(&[b"b", b"c"]).unwrap(), 2);
    assert_eq!(h.len(), 0);
    assert!(Hash::open(&tx, 0, b"h").unwrap().is_none());
    assert_eq!(tx.get(0, b"h").unwrap(), None);
    assert_eq!(h.del(&[b"b"]).unwrap(), 0, "nothing left to delete");
}

#[test]
fn another_type_is_wrongtype_and_is_left_alone() {
    let store = mem_store(2);
    let tx = store.front();
    let s = put_string(&tx, b"s", b"v");
    assert!(matches!(
        Hash::open(&tx, 0, b"s"),
        Err(TypeError::WrongType)
    ));
    assert!(matches!(
        Hash::open_or_create(&tx, 0, b"s"),
        Err(TypeError::WrongType)
    ));
    assert_eq!(tx.get(0, b"s").unwrap(), Some(s));
}

#[test]
fn a_failed_modify_writes_nothing() {
    let store = mem_store(2);
    let tx = store.front();
    let mut h = Hash::open_or_create(&tx, 0, b"h").unwrap();
    let add = |by: i64| {
        move |cur: Option<&[u8]>| -> std::result::Result<Vec<u8>, crate::error::CmdError> {
            let n: i64 = match cur {
                Some(v) => std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| crate::error::CmdError::reply("ERR not an integer"))?,
                None => 0,
            };
            Ok((n + by).to_string().into_bytes())
        }
    };
    assert_eq!(h.modify(b"n", SMALL, add(5)).unwrap(), b"5");
    assert_eq!(h.modify(b"n", SMALL, add(-7)).unwrap(), b"-2");
    h.set(&[&b"s"[..], b"abc"], SMALL).unwrap();
    let before = tx.get(0, b"h").unwrap();
    assert!(h.modify(b"s", SMALL, add(1)).is_err());
    assert_eq!(tx.get(0, b"h").unwrap(), before);
    let h = Hash::open(&tx, 0, b"h").unwrap().unwrap();
    assert_eq!(
        fields(&h),
        [("n".into(), "-2".into()), ("s".into(), "abc".into())]
    );
    // A modify that fails on a new hash leaves no key behind.
    let mut fresh = Hash::open_or_create(&tx, 0, b"new").unwrap();
    let fail = |_: Option<&[u8]>| -> std::result::Result<Vec<u8>, crate::error::CmdError> {
        Err(crate::error::CmdError::reply("ERR no"))
    };
    assert!(fresh.modify(b"f", SMALL, fail).is_err());
    assert_eq!(tx.get(0, b"new").unwrap(), None);
}

#[test]
fn listpack_becomes_hashtable_by_size_or_length_and_never_back() {
    let store = mem_store(2);
    let tx = store.front();
    let enc = |key: &[u8]| encoding(Hash::open(&tx, 0, key).unwrap().unwrap().meta());
    // By count: more than `max_entries` fields.
    let mut h = Hash::open_or_create(&tx, 0, b"n").unwrap();
    let three: [&[u8]; 6] = [b"a", b"1", b"b", b"2", b"c", b"3"];
    h.set(&three, SMALL).unwrap();
    assert_eq!(enc(b"n"), Some("listpack"));
    h.set_nx(b"d", b"4", SMALL).unwrap();
    assert_eq!(enc(b"n"), Some("hashtable"));
    // Never back, even with fields deleted.
    h.del(&[b"a", b"b", b"c"]).unwrap();
    assert_eq!(enc(b"n"), Some("hashtable"));
    // By length: a value (or a field) longer than `max_value`, through every writer.
    let mut v = Hash::open_or_create(&tx, 0, b"v").unwrap();
    v.set(&[&b"f"[..], b"12345678"], SMALL).unwrap();
    assert_eq!(enc(b"v"), Some("listpack"), "at the limit");
    v.set(&[&b"f"[..], b"123456789"], SMALL).unwrap();
    assert_eq!(enc(b"v"), Some("hashtable"));
    let mut k = Hash::open_or_create(&tx, 0, b"k").unwrap();
    k.set_nx(b"a-long-field", b"1", SMALL).unwrap();
    assert_eq!(enc(b"k"), Some("hashtable"));
    let mut m = Hash::open_or_create(&tx, 0, b"m").unwrap();
    m.modify(b"f", SMALL, |_| {
        Ok::<_, strata_engine::Error>(vec![b'9'; 9])
    })
    .unwrap();
    assert_eq!(enc(b"m"), Some("hashtable"));
}

#[test]
fn an_exec_transaction_buffers_until_applied() {
    let store = mem_store(2);
    in_exec(&store, |tx| {
        let mut h = Hash::open_or_create(tx, 0, b"h").unwrap();
        let two: [&[u8]; 4] = [b"a", b"1", b"b", b"2"];
        h.set(&two, SMALL).unwrap();
        // The transaction reads its own writes; the front does not yet.
        let h = Hash::open(tx, 0, b"h").unwrap().unwrap();
        assert_eq!(h.get(b"b").unwrap(), Some(b"2".to_vec()));
        assert!(Hash::open(&store.front(), 0, b"h").unwrap().is_none());
    });
    let front = store.front();
    let h = Hash::open(&front, 0, b"h").unwrap().unwrap();
    assert_eq!(
        fields(&h),
        [("a".into(), "1".into()), ("b".into(), "2".into())]
    );
}

#[test]
fn a_worker_group_writes_once_at_its_end() {
    let store = mem_store(2);
    on_worker(&store, b"h", |tx| {
        let mut h = Hash::open_or_create(tx, 0, b"h").unwrap();
        h.set(&[&b"f"[..], b"v"], SMALL).unwrap();
        assert_eq!(
            Hash::open(tx, 0, b"h").unwrap().unwrap().get(b"f").unwrap(),
            Some(b"v".to_vec())
        );
        assert_eq!(
            store.db().get(&crate::keys::meta_key(0, b"h")).unwrap(),
            None
        );
    });
    let tx = store.front();
    let h = Hash::open(&tx, 0, b"h").unwrap().unwrap();
    assert_eq!(h.get(b"f").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn random_fields_come_from_the_hash() {
    let store = mem_store(2);
    let tx = store.front();
    let mut h = Hash::open_or_create(&tx, 0, b"h").unwrap();
    let names: Vec<Vec<u8>> = (0..300).map(|i| format!("f{i:03}").into_bytes()).collect();
    let pairs: Vec<&[u8]> = names.iter().flat_map(|n| [&n[..], b"v"]).collect();
    h.set(&pairs, SMALL).unwrap();
    let picked = h.sample_distinct(20).unwrap();
    let mut seen: Vec<&Vec<u8>> = picked.iter().map(|(f, _)| f).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 20, "distinct");
    assert!(picked.iter().all(|(f, v)| names.contains(f) && v == b"v"));
    let mut n = 0;
    h.sample_repeating(50, |f, _| {
        assert!(names.iter().any(|x| x == f));
        n += 1;
    })
    .unwrap();
    assert_eq!(n, 50);
}
