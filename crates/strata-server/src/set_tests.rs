//! The set type over an in-memory store: adds and removes down to nothing, the intset →
//! hashtable rules, SPOP's three ways, SMOVE, the STORE forms and the multi-set operations,
//! through the front and an EXEC's transaction.

use super::*;
use crate::collection::encoding;
use crate::store::tests::{in_exec, mem_store};

fn strs(v: &[Vec<u8>]) -> Vec<String> {
    let mut out: Vec<String> = v
        .iter()
        .map(|x| String::from_utf8(x.clone()).unwrap())
        .collect();
    out.sort();
    out
}

fn add(tx: &Tx<'_>, key: &[u8], members: &[&str], max_intset: u64) -> u64 {
    let refs: Vec<&[u8]> = members.iter().map(|m| m.as_bytes()).collect();
    Set::open_or_create(tx, 0, key)
        .unwrap()
        .add(&refs, max_intset)
        .unwrap()
}

#[test]
fn add_remove_and_membership() {
    let store = mem_store(2);
    let tx = store.front();
    assert!(Set::open(&tx, 0, b"s").unwrap().is_none());
    assert_eq!(add(&tx, b"s", &["a", "b", "a", "c"], 512), 3);
    assert_eq!(add(&tx, b"s", &["c", "d"], 512), 1, "c is there already");
    let s = Set::open(&tx, 0, b"s").unwrap().unwrap();
    assert_eq!(s.len(), 4);
    assert_eq!(strs(&s.members().unwrap()), ["a", "b", "c", "d"]);
    assert_eq!(
        s.contains(&[b"a", b"x", b"d"]).unwrap(),
        [true, false, true]
    );
    let mut s = Set::open_write(&tx, 0, b"s").unwrap().unwrap();
    assert_eq!(s.remove(&[b"a", b"a", b"x"]).unwrap(), 1);
    assert_eq!(s.remove(&[b"b", b"c", b"d"]).unwrap(), 3);
    assert_eq!(s.len(), 0);
    assert!(
        Set::open(&tx, 0, b"s").unwrap().is_none(),
        "gone with its last"
    );
    assert_eq!(s.remove(&[b"b"]).unwrap(), 0);
    // Another type is WRONGTYPE for every opener.
    let h = Meta::collection(RType::Hash, 1);
    tx.put(0, b"h", &Meta { size: 1, ..h }).unwrap();
    assert!(matches!(Set::open(&tx, 0, b"h"), Err(TypeError::WrongType)));
    assert!(matches!(
        Set::open_or_create(&tx, 0, b"h"),
        Err(TypeError::WrongType)
    ));
}

#[test]
fn intset_becomes_hashtable_and_never_back() {
    let store = mem_store(2);
    let tx = store.front();
    let enc = |key: &[u8]| encoding(Set::open(&tx, 0, key).unwrap().unwrap().meta());
    add(&tx, b"i", &["1", "2", "-3"], 4);
    assert_eq!(enc(b"i"), Some("intset"));
    add(&tx, b"i", &["4"], 4);
    assert_eq!(enc(b"i"), Some("intset"), "at the limit");
    add(&tx, b"i", &["5"], 4);
    assert_eq!(enc(b"i"), Some("hashtable"), "past the limit");
    let mut s = Set::open_write(&tx, 0, b"i").unwrap().unwrap();
    s.remove(&[&b"1"[..], b"2", b"-3", b"4"]).unwrap();
    assert_eq!(enc(b"i"), Some("hashtable"), "never back");
    add(&tx, b"t", &["1", "x"], 512);
    assert_eq!(
        enc(b"t"),
        Some("hashtable"),
        "a member that is not an integer"
    );
    // Built from scratch, the encoding is decided again.
    assert!(!super::store(&tx, 0, b"t", &[b"7".to_vec()], 512).unwrap());
    assert_eq!(enc(b"t"), Some("intset"));
}

#[test]
fn spop_one_some_and_all() {
    let store = mem_store(2);
    let tx = store.front();
    let names: Vec<String> = (0..20).map(|i| format!("m{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    add(&tx, b"s", &refs, 512);
    let mut s = Set::open_write(&tx, 0, b"s").unwrap().unwrap();
    let one = s.pop_one().unwrap().unwrap();
    assert_eq!(s.len(), 19);
    // Few popped: drawn; many popped: the kept ones drawn and the set rebuilt.
    let few = s.pop_some(2, 512).unwrap();
    let many = s.pop_some(15, 512).unwrap();
    assert_eq!((few.len(), many.len(), s.len()), (2, 15, 2));
    let left = Set::open(&tx, 0, b"s").unwrap().unwrap().members().unwrap();
    let mut seen: Vec<Vec<u8>> = [vec![one], few, many, left.clone()].concat();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 20, "every member once, popped or left");
    let all = s.pop_all().unwrap();
    assert_eq!(strs(&all), strs(&left));
    assert!(Set::open(&tx, 0, b"s").unwrap().is_none());
    assert_eq!(s.pop_one().unwrap(), None);
}

#[test]
fn smove_and_store_write_once() {
    let store = mem_store(2);
    let tx = store.front();
    add(&tx, b"a", &["x", "y"], 512);
    add(&tx, b"b", &["y"], 512);
    assert_eq!(
        move_member(&tx, 0, (b"a", b"b"), b"nope", 512).unwrap(),
        Moved::NotInSource
    );
    assert_eq!(
        move_member(&tx, 0, (b"a", b"a"), b"x", 512).unwrap(),
        Moved::Same
    );
    assert_eq!(
        move_member(&tx, 0, (b"a", b"b"), b"y", 512).unwrap(),
        Moved::Done {
            src_left: 1,
            added: false
        }
    );
    assert_eq!(
        move_member(&tx, 0, (b"a", b"new"), b"x", 512).unwrap(),
        Moved::Done {
            src_left: 0,
            added: true
        }
    );
    assert!(Set::open(&tx, 0, b"a").unwrap().is_none());
    let new = Set::open(&tx, 0, b"new").unwrap().unwrap();
    assert_eq!(strs(&new.members().unwrap()), ["x"]);
    tx.put(0, b"str", &Meta::collection(RType::String, 1))
        .unwrap();
    assert!(matches!(
        move_member(&tx, 0, (b"new", b"str"), b"x", 512),
        Err(TypeError::WrongType)
    ));
    // An empty result deletes the destination, and says so; none to delete, nothing.
    assert!(super::store(&tx, 0, b"new", &[], 512).unwrap());
    assert!(Set::open(&tx, 0, b"new").unwrap().is_none());
    assert!(!super::store(&tx, 0, b"new", &[], 512).unwrap());
}

fn open_all<'t>(tx: &'t Tx<'t>, keys: &[&'t [u8]]) -> Vec<Option<Set<'t>>> {
    keys.iter().map(|k| Set::open(tx, 0, k).unwrap()).collect()
}

#[test]
fn inter_union_diff() {
    let store = mem_store(2);
    let tx = store.front();
    // More members than one probe batch, so that batches and the limit both matter.
    let big: Vec<String> = (0..600).map(|i| i.to_string()).collect();
    let big_refs: Vec<&str> = big.iter().map(String::as_str).collect();
    add(&tx, b"{t}big", &big_refs, 512);
    let evens: Vec<String> = (0..600).step_by(2).map(|i| i.to_string()).collect();
    let even_refs: Vec<&str> = evens.iter().map(String::as_str).collect();
    add(&tx, b"{t}even", &even_refs, 512);
    add(&tx, b"{t}few", &["1", "2", "3", "x"], 512);
    let open = |keys: &[&'static [u8]]| open_all(&tx, keys);
    let sets = open(&[b"{t}big", b"{t}even", b"{t}few"]);
    assert_eq!(strs(&inter(&sets, 0).unwrap()), ["2"]);
    let sets = open(&[b"{t}big", b"{t}even"]);
    assert_eq!(inter(&sets, 0).unwrap().len(), 300);
    assert_eq!(inter(&sets, 7).unwrap().len(), 7, "LIMIT");
    assert!(inter(&open(&[b"{t}big", b"{t}absent"]), 0)
        .unwrap()
        .is_empty());
    let sets = open(&[b"{t}few", b"{t}absent", b"{t}even"]);
    assert_eq!(strs(&union(&sets).unwrap()).len(), 300 + 3);
    assert_eq!(strs(&diff(&sets).unwrap()), ["1", "3", "x"]);
    assert!(diff(&open(&[b"{t}absent", b"{t}few"])).unwrap().is_empty());
}

#[test]
fn an_exec_transaction_sees_its_own_adds() {
    let store = mem_store(2);
    in_exec(&store, |tx| {
        add(tx, b"s", &["a"], 512);
        add(tx, b"s", &["a", "b"], 512);
        assert_eq!(Set::open(tx, 0, b"s").unwrap().unwrap().len(), 2);
        assert!(Set::open(&store.front(), 0, b"s").unwrap().is_none());
    });
    let front = store.front();
    assert_eq!(Set::open(&front, 0, b"s").unwrap().unwrap().len(), 2);
}
