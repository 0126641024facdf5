//! The list type over an in-memory store: the bounds and Redis's range rules, the staged
//! changes a multi-key command collects, every command operation (pushes, pops, ranges,
//! LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, the first non-empty pop) with the key
//! deleted with its last element, WRONGTYPE, and the three transactions a handle may be
//! given. The blocking pops are tested through the server (`cmd/lists_tests.rs`).

use super::*;
use crate::store::tests::{in_exec, mem_store, on_worker, put_string};

#[test]
fn bounds_round_trip_and_positions() {
    let b = Bounds {
        head: MID - 2,
        tail: MID + 3,
    };
    assert_eq!(Bounds::decode(&b.encode()), Some(b));
    assert_eq!(Bounds::decode(&b.encode()[..15]), None);
    let mut bad = b.encode();
    bad[0] = 0xff; // head above tail
    assert_eq!(Bounds::decode(&bad), None);
    assert_eq!(b.len(), 5);
    assert_eq!(b.position(0), Some(0));
    assert_eq!(b.position(4), Some(4));
    assert_eq!(b.position(5), None);
    assert_eq!(b.position(-1), Some(4));
    assert_eq!(b.position(-5), Some(0));
    assert_eq!(b.position(-6), None);
    assert_eq!(b.position(i64::MIN), None);
    assert_eq!(b.position(i64::MAX), None);
    let e = Bounds {
        head: MID,
        tail: MID,
    };
    assert_eq!((e.len(), e.position(0), e.position(-1)), (0, None, None));
}

#[test]
fn ranges_as_redis_normalises_them() {
    assert_eq!(range(0, -1, 5), Some((0, 4)));
    assert_eq!(range(-100, 100, 5), Some((0, 4)));
    assert_eq!(range(2, 1, 5), None);
    assert_eq!(range(5, 10, 5), None);
    assert_eq!(range(-1, -1, 5), Some((4, 4)));
    assert_eq!(range(-6, -6, 5), None, "stop before the head");
    assert_eq!(range(0, 0, 0), None);
    assert_eq!(range(i64::MIN, i64::MAX, 3), Some((0, 2)));
    assert_eq!(range(i64::MAX, i64::MIN, 3), None);
}

fn load<'a>(s: &'a Tx<'a>, key: &'a [u8]) -> Option<List<'a>> {
    List::open_write(s, 0, key).unwrap()
}

/// Applies one change to list `key` (created if absent) and returns its elements after.
fn change(s: &Tx<'_>, key: &[u8], f: impl FnOnce(&mut List<'_>, &mut Writes)) -> Vec<Vec<u8>> {
    let mut l = load(s, key).unwrap_or_else(|| List::create(s, 0, key));
    let mut w = Writes::new();
    f(&mut l, &mut w);
    l.finish(&mut w);
    s.apply(w).unwrap();
    load(s, key).map(|l| l.all().unwrap()).unwrap_or_default()
}

fn strs(v: &[Vec<u8>]) -> Vec<&str> {
    v.iter().map(|e| std::str::from_utf8(e).unwrap()).collect()
}

#[test]
fn staged_changes_at_the_ends_in_the_middle_and_emptying() {
    let store = mem_store(2);
    let s = store.front();
    let k = &b"l"[..];
    let got = change(&s, k, |l, w| l.stage_push(w, End::Left, &["a", "b", "c"]));
    assert_eq!(strs(&got), ["c", "b", "a"]);
    let got = change(&s, k, |l, w| l.stage_push(w, End::Right, &["x", "y"]));
    assert_eq!(strs(&got), ["c", "b", "a", "x", "y"]);
    let l = load(&s, k).unwrap();
    assert_eq!((l.b.head, l.b.tail), (MID - 3, MID + 2));
    let got = change(&s, k, |l, w| {
        assert_eq!(strs(&l.stage_pop(w, End::Right, 2).unwrap()), ["y", "x"]);
    });
    assert_eq!(strs(&got), ["c", "b", "a"]);
    // Inserting near the head shifts the head side; near the tail, the tail side.
    let got = change(&s, k, |l, w| l.stage_insert(w, 1, b"h").unwrap());
    assert_eq!(strs(&got), ["c", "h", "b", "a"]);
    let got = change(&s, k, |l, w| l.stage_insert(w, 3, b"t").unwrap());
    assert_eq!(strs(&got), ["c", "h", "b", "t", "a"]);
    let got = change(&s, k, |l, w| l.stage_insert(w, 5, b"z").unwrap());
    assert_eq!(strs(&got), ["c", "h", "b", "t", "a", "z"]);
    let got = change(&s, k, |l, w| l.stage_insert(w, 0, b"0").unwrap());
    assert_eq!(strs(&got), ["0", "c", "h", "b", "t", "a", "z"]);
    let got = change(&s, k, |l, w| l.stage_set(w, 6, b"Z"));
    assert_eq!(strs(&got), ["0", "c", "h", "b", "t", "a", "Z"]);
    let got = change(&s, k, |l, w| l.stage_trim(w, range(1, -2, 7)));
    assert_eq!(strs(&got), ["c", "h", "b", "t", "a"]);
    let got = change(&s, k, |l, w| {
        let old = l.all().unwrap();
        let keep: Vec<Vec<u8>> = old.iter().filter(|e| *e != b"h").cloned().collect();
        l.stage_rewrite(w, &old, &keep);
    });
    assert_eq!(strs(&got), ["c", "b", "t", "a"]);
    let mut seen = Vec::new();
    load(&s, k)
        .unwrap()
        .scan(1, 2, true, |p, v| {
            seen.push((p, v.to_vec()));
            true
        })
        .unwrap();
    assert_eq!(seen, vec![(2, b"t".to_vec()), (1, b"b".to_vec())]);
    // Popping more than there is empties the list, and the key goes.
    let got = change(&s, k, |l, w| {
        assert_eq!(l.stage_pop(w, End::Left, 100).unwrap().len(), 4);
    });
    assert!(got.is_empty());
    assert_eq!(s.get(0, k).unwrap(), None);
    // A new incarnation does not see the old records.
    let got = change(&s, k, |l, w| l.stage_push(w, End::Right, &["n"]));
    assert_eq!(strs(&got), ["n"]);
}

/// A list `key` with `elems`, pushed at the tail.
fn make<'a>(tx: &'a Tx<'a>, key: &'a [u8], elems: &[&str]) -> List<'a> {
    let mut l = List::open_or_create(tx, 0, key).unwrap();
    l.push(End::Right, elems).unwrap();
    l
}

/// The elements of list `key`, as stored (empty if the key is absent).
fn stored(tx: &Tx<'_>, key: &[u8]) -> Vec<String> {
    match List::open(tx, 0, key).unwrap() {
        Some(l) => l
            .all()
            .unwrap()
            .into_iter()
            .map(|e| String::from_utf8(e).unwrap())
            .collect(),
        None => Vec::new(),
    }
}

#[test]
fn pushes_pops_and_reads() {
    let store = mem_store(2);
    let tx = store.front();
    assert!(List::open(&tx, 0, b"l").unwrap().is_none());
    let mut l = List::open_or_create(&tx, 0, b"l").unwrap();
    assert_eq!(l.len(), 0);
    assert_eq!(l.push(End::Left, &["a", "b", "c"]).unwrap(), 3);
    assert_eq!(l.push(End::Right, &["x"]).unwrap(), 4);
    assert_eq!(stored(&tx, b"l"), ["c", "b", "a", "x"]);
    let l = List::open(&tx, 0, b"l").unwrap().unwrap();
    assert_eq!(strs(&l.range(0, -1).unwrap()), ["c", "b", "a", "x"]);
    assert_eq!(strs(&l.range(-2, 100).unwrap()), ["a", "x"]);
    assert!(l.range(3, 1).unwrap().is_empty());
    assert_eq!(l.index(0).unwrap(), Some(b"c".to_vec()));
    assert_eq!(l.index(-1).unwrap(), Some(b"x".to_vec()));
    assert_eq!(l.index(4).unwrap(), None);
    assert_eq!(l.index(i64::MIN).unwrap(), None);
    let mut l = List::open_write(&tx, 0, b"l").unwrap().unwrap();
    assert_eq!(strs(&l.pop(End::Right, 2).unwrap()), ["x", "a"]);
    assert!(l.pop(End::Left, 0).unwrap().is_empty());
    assert_eq!(stored(&tx, b"l"), ["c", "b"]);
    // Popping more than there is takes everything, and the key with it.
    assert_eq!(strs(&l.pop(End::Left, 10).unwrap()), ["c", "b"]);
    assert_eq!(l.len(), 0);
    assert_eq!(tx.get(0, b"l").unwrap(), None);
}

#[test]
fn set_insert_remove_and_trim() {
    let store = mem_store(2);
    let tx = store.front();
    let mut l = make(&tx, b"l", &["a", "b", "c", "a", "b", "c"]);
    assert!(l.set(-1, b"C").unwrap());
    assert!(!l.set(6, b"z").unwrap(), "outside: nothing written");
    assert_eq!(stored(&tx, b"l"), ["a", "b", "c", "a", "b", "C"]);
    // LINSERT finds the first pivot; a missing one writes nothing.
    assert_eq!(l.insert(false, b"b", b"X").unwrap(), Some(7));
    assert_eq!(l.insert(true, b"c", b"Y").unwrap(), Some(8));
    assert_eq!(l.insert(true, b"zz", b"Y").unwrap(), None);
    assert_eq!(stored(&tx, b"l"), ["a", "X", "b", "c", "Y", "a", "b", "C"]);
    // LREM: from the head, from the tail, all.
    let mut r = make(&tx, b"r", &["a", "b", "a", "c", "a"]);
    assert_eq!(r.remove(-2, b"a").unwrap(), 2);
    assert_eq!(stored(&tx, b"r"), ["a", "b", "c"]);
    assert_eq!(r.remove(1, b"a").unwrap(), 1);
    assert_eq!(r.remove(0, b"nope").unwrap(), 0);
    assert_eq!(stored(&tx, b"r"), ["b", "c"]);
    assert_eq!(r.remove(0, b"b").unwrap(), 1);
    assert_eq!(r.remove(0, b"c").unwrap(), 1);
    assert_eq!(
        tx.get(0, b"r").unwrap(),
        None,
        "the last element takes the key"
    );
    // LTRIM: everything kept writes nothing; an empty range deletes the key.
    let mut t = make(&tx, b"t", &["a", "b", "c", "d"]);
    assert_eq!(t.trim(0, -1).unwrap(), 4);
    assert_eq!(t.trim(1, -2).unwrap(), 2);
    assert_eq!(stored(&tx, b"t"), ["b", "c"]);
    assert_eq!(t.trim(5, 10).unwrap(), 0);
    assert_eq!(tx.get(0, b"t").unwrap(), None);
}

#[test]
fn positions_by_rank_count_and_maxlen() {
    let store = mem_store(2);
    let tx = store.front();
    let l = make(&tx, b"l", &["a", "b", "c", "a", "b", "c"]);
    let pos = |elem: &[u8], rank: i64, count: Option<i64>, maxlen: i64| {
        let o = PosOptions {
            rank,
            count,
            maxlen,
        };
        l.positions(elem, o).unwrap()
    };
    assert_eq!(pos(b"b", 1, None, 0), [1]);
    assert_eq!(pos(b"b", 2, None, 0), [4]);
    assert_eq!(pos(b"b", -1, None, 0), [4]);
    assert_eq!(pos(b"b", 1, Some(0), 0), [1, 4]);
    assert_eq!(pos(b"b", -1, Some(1), 0), [4]);
    assert_eq!(pos(b"a", 1, Some(0), 3), [0]);
    assert_eq!(pos(b"z", 1, Some(0), 0), Vec::<u64>::new());
    // Redis negates the rank as a C long: LONG_MIN stays negative, matching from the first.
    assert_eq!(pos(b"c", i64::MIN, Some(0), 0), [5, 2]);
}

#[test]
fn move_one_and_pop_first() {
    let store = mem_store(2);
    let tx = store.front();
    make(&tx, b"src", &["a", "b"]);
    let m = move_one(&tx, 0, b"src", b"dst", End::Left, End::Right).unwrap();
    assert_eq!(
        m,
        Some(Moved {
            elem: b"a".to_vec(),
            src_left: 1
        })
    );
    // Onto itself: a rotation.
    make(&tx, b"rot", &["1", "2", "3"]);
    let m = move_one(&tx, 0, b"rot", b"rot", End::Left, End::Right).unwrap();
    assert_eq!(m.map(|m| m.elem), Some(b"1".to_vec()));
    assert_eq!(stored(&tx, b"rot"), ["2", "3", "1"]);
    // The last element moves with the source's deletion.
    let m = move_one(&tx, 0, b"src", b"dst", End::Right, End::Left).unwrap();
    assert_eq!(m.map(|m| m.src_left), Some(0));
    assert_eq!(tx.get(0, b"src").unwrap(), None);
    assert_eq!(stored(&tx, b"dst"), ["b", "a"]);
    assert_eq!(
        move_one(&tx, 0, b"none", b"dst", End::Left, End::Left).unwrap(),
        None
    );
    // A destination of another type is checked only when there is something to move.
    put_string(&tx, b"s", b"v");
    assert!(move_one(&tx, 0, b"none", b"s", End::Left, End::Left)
        .unwrap()
        .is_none());
    assert!(matches!(
        move_one(&tx, 0, b"dst", b"s", End::Left, End::Left),
        Err(TypeError::WrongType)
    ));
    assert_eq!(stored(&tx, b"dst"), ["b", "a"], "nothing moved");
    // The first key holding a list; a key of another type before it is WRONGTYPE.
    let keys: [&[u8]; 3] = [b"none", b"dst", b"rot"];
    let p = pop_first(&tx, 0, &keys, End::Right, 5).unwrap().unwrap();
    assert_eq!((p.index, strs(&p.elems), p.left), (1, vec!["a", "b"], 0));
    assert_eq!(pop_first(&tx, 0, &[b"none"], End::Left, 1).unwrap(), None);
    let keys: [&[u8]; 2] = [b"s", b"rot"];
    assert!(matches!(
        pop_first(&tx, 0, &keys, End::Left, 1),
        Err(TypeError::WrongType)
    ));
}

#[test]
fn another_type_is_wrongtype_and_is_left_alone() {
    let store = mem_store(2);
    let tx = store.front();
    let s = put_string(&tx, b"s", b"v");
    assert!(matches!(
        List::open(&tx, 0, b"s"),
        Err(TypeError::WrongType)
    ));
    assert!(matches!(
        List::open_write(&tx, 0, b"s"),
        Err(TypeError::WrongType)
    ));
    assert!(matches!(
        List::open_or_create(&tx, 0, b"s"),
        Err(TypeError::WrongType)
    ));
    assert_eq!(tx.get(0, b"s").unwrap(), Some(s));
}

#[test]
fn an_exec_and_a_worker_see_their_own_writes() {
    let store = mem_store(2);
    in_exec(&store, |tx| {
        make(tx, b"l", &["a", "b"]);
        let mut l = List::open_write(tx, 0, b"l").unwrap().unwrap();
        assert_eq!(strs(&l.pop(End::Left, 1).unwrap()), ["a"]);
        assert_eq!(stored(tx, b"l"), ["b"]);
        assert!(stored(&store.front(), b"l").is_empty(), "buffered");
    });
    assert_eq!(stored(&store.front(), b"l"), ["b"]);
    on_worker(&store, b"l", |tx| {
        let mut l = List::open_write(tx, 0, b"l").unwrap().unwrap();
        assert_eq!(l.push(End::Left, &["z"]).unwrap(), 2);
        assert_eq!(stored(tx, b"l"), ["z", "b"]);
    });
    assert_eq!(stored(&store.front(), b"l"), ["z", "b"]);
}
