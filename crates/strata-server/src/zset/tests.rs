//! The sorted-set type over an in-memory store: ZADD's options and what it counts, an
//! increment to NaN that writes nothing, -0 in a listpack and in a skiplist, the listpack →
//! skiplist rules, removal down to nothing, pops, ranges and their removal, the STORE forms,
//! and an EXEC's transaction.

use super::*;
use crate::collection::TypeError;
use crate::store::tests::{in_exec, mem_store, put_string};

const SMALL: Limits = Limits {
    entries: 3,
    value: 8,
};

fn names(v: &[Entry]) -> Vec<String> {
    v.iter()
        .map(|(m, _)| String::from_utf8(m.clone()).unwrap())
        .collect()
}

fn add(z: &mut ZSet<'_>, pairs: &[(f64, &str)], flags: AddFlags) -> Added {
    let pairs: Vec<(f64, &[u8])> = pairs.iter().map(|(s, m)| (*s, m.as_bytes())).collect();
    z.add(&pairs, flags, SMALL).unwrap()
}

const PLAIN: AddFlags = AddFlags {
    nx: false,
    xx: false,
    gt: false,
    lt: false,
    incr: false,
};

#[test]
fn zadd_counts_and_options() {
    let store = mem_store(2);
    let tx = store.front();
    assert!(ZSet::open(&tx, 0, b"z").unwrap().is_none());
    let mut z = ZSet::open_or_create(&tx, 0, b"z").unwrap();
    // A repeated member is added once; its later pair updates it.
    let a = add(&mut z, &[(1.0, "a"), (2.0, "b"), (3.0, "a")], PLAIN);
    assert_eq!((a.added, a.updated, a.processed), (2, 1, 3));
    assert!(a.changed());
    let z = ZSet::open(&tx, 0, b"z").unwrap().expect("created");
    assert_eq!(z.len(), 2);
    assert_eq!(
        z.scores(&[b"a", b"b", b"x"]).unwrap(),
        [Some(3.0), Some(2.0), None]
    );
    assert_eq!(names(&z.all().unwrap()), ["b", "a"]);
    let mut z = ZSet::open_write(&tx, 0, b"z").unwrap().unwrap();
    // NX only adds; XX only updates.
    let nx = AddFlags { nx: true, ..PLAIN };
    let a = add(&mut z, &[(9.0, "a"), (0.5, "c")], nx);
    assert_eq!((a.added, a.updated), (1, 0));
    assert_eq!(z.score(b"a").unwrap(), Some(3.0));
    let xx = AddFlags { xx: true, ..PLAIN };
    let a = add(&mut z, &[(9.0, "a"), (1.0, "d")], xx);
    assert_eq!((a.added, a.updated), (0, 1));
    assert_eq!(z.score(b"d").unwrap(), None);
    // GT and LT let through only a higher (lower) score; the same score changes nothing.
    let gt = AddFlags { gt: true, ..PLAIN };
    let a = add(&mut z, &[(5.0, "a"), (10.0, "b")], gt);
    assert_eq!((a.added, a.updated, a.processed), (0, 1, 1));
    let lt = AddFlags { lt: true, ..PLAIN };
    let a = add(&mut z, &[(7.0, "a"), (0.5, "c")], lt);
    assert_eq!((a.added, a.updated, a.processed), (0, 1, 1));
    assert!(!add(&mut z, &[(0.5, "c")], PLAIN).changed());
    // INCR: the score computed is the reply, also for a new member.
    let incr = AddFlags {
        incr: true,
        ..PLAIN
    };
    let a = add(&mut z, &[(2.5, "a")], incr);
    assert_eq!((a.processed, a.score), (1, 9.5));
    let a = add(&mut z, &[(4.0, "new")], incr);
    assert_eq!((a.added, a.score), (1, 4.0));
    let a = add(&mut z, &[(1.0, "a")], AddFlags { nx: true, ..incr });
    assert_eq!(a.processed, 0, "NX refuses the existing member");
    let z = ZSet::open(&tx, 0, b"z").unwrap().unwrap();
    assert_eq!(names(&z.all().unwrap()), ["c", "new", "a", "b"]);
    assert_eq!(z.rank(b"new", false).unwrap(), Some(1));
    assert_eq!(z.rank(b"new", true).unwrap(), Some(2));
    assert_eq!(z.rank(b"zz", false).unwrap(), None);
}

#[test]
fn an_increment_to_nan_writes_nothing() {
    let store = mem_store(2);
    let tx = store.front();
    let mut z = ZSet::open_or_create(&tx, 0, b"z").unwrap();
    add(&mut z, &[(f64::INFINITY, "a")], PLAIN);
    let before = tx.get(0, b"z").unwrap();
    let incr = AddFlags {
        incr: true,
        ..PLAIN
    };
    let pairs: [(f64, &[u8]); 1] = [(f64::NEG_INFINITY, b"a")];
    assert!(matches!(
        z.add(&pairs, incr, SMALL),
        Err(AddError::NotANumber)
    ));
    assert_eq!(tx.get(0, b"z").unwrap(), before);
    assert_eq!(z.score(b"a").unwrap(), Some(f64::INFINITY));
}

#[test]
fn minus_zero_is_kept_only_by_a_skiplist() {
    let store = mem_store(2);
    let tx = store.front();
    let mut small = ZSet::open_or_create(&tx, 0, b"small").unwrap();
    add(&mut small, &[(-0.0, "a")], PLAIN);
    assert!(small.score(b"a").unwrap().unwrap().is_sign_positive());
    let mut big = ZSet::open_or_create(&tx, 0, b"big").unwrap();
    add(
        &mut big,
        &[(1.0, "a"), (2.0, "b"), (3.0, "c"), (4.0, "d")],
        PLAIN,
    );
    assert_eq!(encoding(big.meta()), "skiplist");
    add(&mut big, &[(-0.0, "e")], PLAIN);
    assert!(big.score(b"e").unwrap().unwrap().is_sign_negative());
}

#[test]
fn listpack_becomes_skiplist_by_size_or_length_and_never_back() {
    let store = mem_store(2);
    let tx = store.front();
    let enc = |key: &[u8]| encoding(ZSet::open(&tx, 0, key).unwrap().unwrap().meta());
    let mut n = ZSet::open_or_create(&tx, 0, b"n").unwrap();
    add(&mut n, &[(1.0, "a"), (2.0, "b"), (3.0, "c")], PLAIN);
    assert_eq!(enc(b"n"), "listpack", "at the limit");
    add(&mut n, &[(4.0, "d")], PLAIN);
    assert_eq!(enc(b"n"), "skiplist");
    assert_eq!(n.remove(&[b"a", b"b", b"c"]).unwrap(), 3);
    assert_eq!(enc(b"n"), "skiplist", "never back");
    let mut v = ZSet::open_or_create(&tx, 0, b"v").unwrap();
    add(&mut v, &[(1.0, "12345678")], PLAIN);
    assert_eq!(enc(b"v"), "listpack");
    add(&mut v, &[(1.0, "123456789")], PLAIN);
    assert_eq!(enc(b"v"), "skiplist");
}

#[test]
fn removal_pops_and_ranges() {
    let store = mem_store(2);
    let tx = store.front();
    let mut z = ZSet::open_or_create(&tx, 0, b"z").unwrap();
    let all = [(1.0, "a"), (2.0, "b"), (3.0, "c"), (4.0, "d"), (5.0, "e")];
    add(&mut z, &all, PLAIN);
    // ZREM counts each member in the set once.
    assert_eq!(z.remove(&[&b"a"[..], b"a", b"nope"]).unwrap(), 1);
    assert_eq!(z.len(), 4);
    // Ranges by rank (negative from the end), score and lex, with offset and limit.
    let rank = Range::Rank(1, -2);
    assert_eq!(names(&z.range(&rank, false, 0, -1).unwrap()), ["c", "d"]);
    assert_eq!(names(&z.range(&rank, true, 0, -1).unwrap()), ["d", "c"]);
    let score = Range::Score(ScoreRange {
        min: 2.0,
        minex: true,
        max: f64::INFINITY,
        maxex: false,
    });
    assert_eq!(
        names(&z.range(&score, false, 0, -1).unwrap()),
        ["c", "d", "e"]
    );
    assert_eq!(names(&z.range(&score, false, 1, 1).unwrap()), ["d"]);
    assert!(
        z.range(&score, false, -1, 5).unwrap().is_empty(),
        "negative offset"
    );
    assert!(
        z.range(&score, false, 3, 5).unwrap().is_empty(),
        "offset past the end"
    );
    let lex = Range::Lex(LexRange {
        min: Lex::Incl(b"c".to_vec()),
        max: Lex::PosInf,
    });
    // Mixed scores: BYLEX walks the score order, as Redis's listpack does.
    assert_eq!(
        names(&z.range(&lex, false, 0, -1).unwrap()),
        ["c", "d", "e"]
    );
    // Pops take the ends; removal by range counts what it removed.
    assert_eq!(names(&z.pop(false, 1).unwrap()), ["b"]);
    assert_eq!(names(&z.pop(true, 2).unwrap()), ["e", "d"]);
    assert_eq!(z.remove_range(&Range::Rank(5, 9)).unwrap(), 0);
    assert_eq!(z.remove_range(&Range::Rank(0, -1)).unwrap(), 1);
    // The last member takes the key with it.
    assert_eq!(z.len(), 0);
    assert_eq!(tx.get(0, b"z").unwrap(), None);
    assert!(z.pop(false, 3).unwrap().is_empty());
}

#[test]
fn ranks_clamp_as_redis() {
    assert_eq!(clamp_ranks(0, -1, 3), Some((0, 2)));
    assert_eq!(clamp_ranks(-100, 100, 3), Some((0, 2)));
    assert_eq!(clamp_ranks(2, 1, 3), None);
    assert_eq!(clamp_ranks(3, 5, 3), None);
    assert_eq!(clamp_ranks(-1, -1, 3), Some((2, 2)));
    assert_eq!(clamp_ranks(0, -4, 3), None);
    assert_eq!(clamp_ranks(i64::MIN, i64::MAX, 3), Some((0, 2)));
    assert_eq!(clamp_ranks(0, 0, 0), None);
}

#[test]
fn another_type_is_wrongtype_and_is_left_alone() {
    let store = mem_store(2);
    let tx = store.front();
    let s = put_string(&tx, b"s", b"v");
    assert!(matches!(
        ZSet::open(&tx, 0, b"s"),
        Err(TypeError::WrongType)
    ));
    assert!(matches!(
        ZSet::open_or_create(&tx, 0, b"s"),
        Err(TypeError::WrongType)
    ));
    assert_eq!(tx.get(0, b"s").unwrap(), Some(s));
}

#[test]
fn replace_writes_a_new_incarnation_or_deletes() {
    let store = mem_store(2);
    let tx = store.front();
    put_string(&tx, b"d", b"v");
    // Over a key of another type; small enough for a listpack, which turns -0 into 0.
    let entries: Vec<Entry> = vec![(b"a".to_vec(), -0.0), (b"b".to_vec(), 1.0)];
    assert_eq!(
        replace(&tx, 0, b"d", &entries, SMALL).unwrap(),
        Replaced::Written
    );
    let z = ZSet::open(&tx, 0, b"d").unwrap().unwrap();
    assert_eq!((z.len(), encoding(z.meta())), (2, "listpack"));
    assert!(z.score(b"a").unwrap().unwrap().is_sign_positive());
    // Too many members for a listpack: a skiplist, keeping -0.
    let many: Vec<Entry> = (0..4u8).map(|i| (vec![b'w' + i], -0.0)).collect();
    assert_eq!(
        replace(&tx, 0, b"d", &many, SMALL).unwrap(),
        Replaced::Written
    );
    let z = ZSet::open(&tx, 0, b"d").unwrap().unwrap();
    assert_eq!((z.len(), encoding(z.meta())), (4, "skiplist"));
    assert_eq!(z.score(b"b").unwrap(), None, "the old incarnation is gone");
    assert!(z.score(b"w").unwrap().unwrap().is_sign_negative());
    // An empty result deletes the key, and does nothing where there is none.
    assert_eq!(
        replace(&tx, 0, b"d", &[], SMALL).unwrap(),
        Replaced::Deleted
    );
    assert_eq!(tx.get(0, b"d").unwrap(), None);
    assert_eq!(
        replace(&tx, 0, b"d", &[], SMALL).unwrap(),
        Replaced::Nothing
    );
}

#[test]
fn an_exec_transaction_buffers_until_applied() {
    let store = mem_store(2);
    in_exec(&store, |tx| {
        let mut z = ZSet::open_or_create(tx, 0, b"z").unwrap();
        add(&mut z, &[(1.0, "a"), (2.0, "b")], PLAIN);
        assert_eq!(names(&z.pop(false, 1).unwrap()), ["a"]);
        // The transaction reads its own writes; the front does not yet.
        let z = ZSet::open(tx, 0, b"z").unwrap().unwrap();
        assert_eq!(names(&z.all().unwrap()), ["b"]);
        assert!(ZSet::open(&store.front(), 0, b"z").unwrap().is_none());
    });
    let front = store.front();
    let z = ZSet::open(&front, 0, b"z").unwrap().unwrap();
    assert_eq!((z.len(), z.score(b"b").unwrap()), (1, Some(2.0)));
}

#[test]
fn aggregate_keeps_redis_conventions() {
    let mut t = f64::INFINITY;
    Aggregate::Sum.apply(&mut t, f64::NEG_INFINITY);
    assert_eq!(t, 0.0);
    let mut t = 1.0;
    Aggregate::Min.apply(&mut t, f64::NAN);
    assert_eq!(t, 1.0);
    Aggregate::Max.apply(&mut t, 3.0);
    assert_eq!(t, 3.0);
}
