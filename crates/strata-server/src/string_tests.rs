//! The string type over an in-memory store: SET and its options, the read-modify-writes
//! (APPEND, SETRANGE, INCRBY, INCRBYFLOAT, SETBIT) with Redis's error texts and nothing
//! written when they fail, GETDEL and GETEX's expiry changes, the multi-key writes, the
//! bit and range arithmetic, LCS, and the three transactions a handle may be given.

use super::*;
use crate::store::tests::{in_exec, mem_store, on_worker};

/// Redis's error reply for `e`, as the client reads it.
fn text(e: impl Into<CmdError>) -> String {
    e.into().message()
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A list at `key` of database 0 (a key of another type).
fn put_list(tx: &Tx<'_>, key: &[u8]) {
    let mut m = Meta::collection(RType::List, tx.next_version());
    m.value = crate::list::Bounds {
        head: crate::list::MID,
        tail: crate::list::MID + 1,
    }
    .encode();
    m.size = 1;
    tx.put(0, key, &m).unwrap();
}

fn value(tx: &Tx<'_>, key: &[u8]) -> Option<Vec<u8>> {
    Str::open(tx, 0, key).unwrap().value().map(<[u8]>::to_vec)
}

#[test]
fn set_with_its_conditions_get_and_expiry() {
    let store = mem_store(2);
    let tx = store.front();
    let plain = SetOptions::PLAIN;
    let set1 = |k: &[u8], v: &[u8], o: SetOptions| set(&tx, 0, k, v, &o).unwrap();
    let done = set1(b"k", b"v", plain);
    assert_eq!((done.written, done.old, done.expired), (true, None, false));
    assert_eq!(value(&tx, b"k"), Some(b"v".to_vec()));
    // NX refuses an existing key, XX a missing one; GET returns the old value either way.
    let nx = SetOptions { nx: true, ..plain };
    assert!(!set1(b"k", b"x", nx).written);
    let xx_get = SetOptions {
        xx: true,
        get: true,
        ..plain
    };
    let done = set1(b"k", b"v2", xx_get);
    assert_eq!((done.written, done.old), (true, Some(b"v".to_vec())));
    let nx_get = SetOptions {
        nx: true,
        get: true,
        ..plain
    };
    let done = set1(b"k", b"v3", nx_get);
    assert_eq!((done.written, done.old), (false, Some(b"v2".to_vec())));
    assert!(!set1(b"missing", b"x", SetOptions { xx: true, ..plain }).written);
    assert_eq!(tx.get(0, b"missing").unwrap(), None);
    // An expiry in the future is kept by KEEPTTL and cleared by a plain SET.
    let later = now_ms() as i64 + 100_000;
    set1(
        b"t",
        b"1",
        SetOptions {
            ttl: Ttl::At(later),
            ..plain
        },
    );
    assert_eq!(tx.get(0, b"t").unwrap().unwrap().expire_ms, later as u64);
    set1(
        b"t",
        b"2",
        SetOptions {
            ttl: Ttl::Keep,
            ..plain
        },
    );
    assert_eq!(tx.get(0, b"t").unwrap().unwrap().expire_ms, later as u64);
    set1(b"t", b"3", plain);
    assert_eq!(tx.get(0, b"t").unwrap().unwrap().expire_ms, 0);
    // A time already passed deletes the key instead of writing it.
    let past = SetOptions {
        ttl: Ttl::At(1),
        ..plain
    };
    assert!(past.ttl_passed() && !plain.ttl_passed());
    let done = set1(b"t", b"4", past);
    assert_eq!((done.written, done.expired), (true, true));
    assert_eq!(tx.get(0, b"t").unwrap(), None);
    // A plain SET overwrites any type; GET refuses one that is not a string.
    put_list(&tx, b"l");
    let get = SetOptions { get: true, ..plain };
    assert!(matches!(
        set(&tx, 0, b"l", b"x", &get),
        Err(TypeError::WrongType)
    ));
    assert_eq!(tx.get(0, b"l").unwrap().unwrap().rtype, RType::List);
    assert!(!set1(b"l", b"x", nx).written, "NX sees a key of any type");
    set1(b"l", b"x", plain);
    assert_eq!(value(&tx, b"l"), Some(b"x".to_vec()));
    // SETNX, likewise.
    assert!(!set_nx(&tx, 0, b"l", b"y").unwrap());
    assert!(set_nx(&tx, 0, b"n", b"y").unwrap());
    assert_eq!(value(&tx, b"n"), Some(b"y".to_vec()));
}

#[test]
fn reads_and_wrong_types() {
    let store = mem_store(2);
    let tx = store.front();
    let s = Str::open(&tx, 0, b"none").unwrap();
    assert_eq!((s.value(), s.len()), (None, 0));
    let hits = store.stats.hits.load(std::sync::atomic::Ordering::Relaxed);
    let misses = store
        .stats
        .misses
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!((hits, misses), (0, 1), "a read counts its miss");
    Str::open_write(&tx, 0, b"none").unwrap();
    let misses = store
        .stats
        .misses
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(misses, 1, "a write's lookup counts nothing");
    set(&tx, 0, b"k", b"hello", &SetOptions::PLAIN).unwrap();
    let s = Str::open(&tx, 0, b"k").unwrap();
    assert_eq!((s.value(), s.len()), (Some(&b"hello"[..]), 5));
    put_list(&tx, b"l");
    for r in [Str::open(&tx, 0, b"l"), Str::open_write(&tx, 0, b"l")] {
        assert_eq!(text(StringError::from(r.err().unwrap())), WRONGTYPE);
    }
}

#[test]
fn getrange_clamps_as_redis() {
    let v = b"hello world";
    assert_eq!(range(v, 0, 4), b"hello");
    assert_eq!(range(v, -5, -1), b"world");
    assert_eq!(range(v, 5, 1), b"");
    assert_eq!(range(v, -1, -5), b"", "a negative range backwards");
    assert_eq!(range(v, -100, 2), b"hel");
    assert_eq!(range(v, 6, 100), b"world");
    assert_eq!(range(v, 11, 20), b"");
    assert_eq!(range(b"", 0, -1), b"");
    assert_eq!(range(b"", -1, 0), b"");
}

#[test]
fn append_and_setrange_grow_within_the_limit() {
    let store = mem_store(2);
    let tx = store.front();
    let mut s = Str::open(&tx, 0, b"a").unwrap();
    assert_eq!(s.append(b"hello", 16).unwrap(), 5);
    assert_eq!(s.append(b" world", 16).unwrap(), 11);
    assert_eq!(value(&tx, b"a"), Some(b"hello world".to_vec()));
    // Past the limit: Redis's error, and nothing written.
    let mut s = Str::open(&tx, 0, b"a").unwrap();
    let e = s.append(b"123456", 16).unwrap_err();
    assert_eq!(
        text(e),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    assert_eq!(value(&tx, b"a"), Some(b"hello world".to_vec()));
    let mut s = Str::open(&tx, 0, b"a").unwrap();
    assert_eq!(s.set_range(6, b"WORLD", 16).unwrap(), 11);
    assert_eq!(value(&tx, b"a"), Some(b"hello WORLD".to_vec()));
    // Padding with zero bytes, on a new key too.
    let mut s = Str::open(&tx, 0, b"b").unwrap();
    assert_eq!(s.set_range(3, b"x", 16).unwrap(), 4);
    assert_eq!(value(&tx, b"b"), Some(b"\0\0\0x".to_vec()));
    // An empty patch writes nothing and creates no key.
    let mut s = Str::open(&tx, 0, b"c").unwrap();
    assert_eq!(s.set_range(100, b"", 16).unwrap(), 0);
    assert_eq!(tx.get(0, b"c").unwrap(), None);
    let mut s = Str::open(&tx, 0, b"b").unwrap();
    assert_eq!(s.set_range(1000, b"", 16).unwrap(), 4);
    // Past the limit, and past the offset range.
    let mut s = Str::open(&tx, 0, b"b").unwrap();
    assert!(matches!(
        s.set_range(16, b"x", 16),
        Err(StringError::TooBig)
    ));
    assert!(matches!(
        s.set_range(u64::MAX, b"x", u64::MAX),
        Err(StringError::TooBig)
    ));
    assert_eq!(value(&tx, b"b"), Some(b"\0\0\0x".to_vec()));
}

#[test]
fn read_modify_writes_keep_expiry_and_incarnation() {
    let store = mem_store(2);
    let tx = store.front();
    let later = now_ms() as i64 + 100_000;
    let o = SetOptions {
        ttl: Ttl::At(later),
        ..SetOptions::PLAIN
    };
    set(&tx, 0, b"n", b"10", &o).unwrap();
    let before = tx.get(0, b"n").unwrap().unwrap();
    assert_eq!(Str::open(&tx, 0, b"n").unwrap().incr_by(5).unwrap(), 15);
    Str::open(&tx, 0, b"n").unwrap().append(b"0", 100).unwrap();
    let after = tx.get(0, b"n").unwrap().unwrap();
    assert_eq!(
        (after.expire_ms, after.version, after.size, &after.value[..]),
        (before.expire_ms, before.version, 3, &b"150"[..])
    );
}

#[test]
fn incrby_errors_are_redis_texts_and_write_nothing() {
    let store = mem_store(2);
    let tx = store.front();
    let incr = |k: &[u8], by: i64| Str::open(&tx, 0, k).unwrap().incr_by(by);
    assert_eq!(incr(b"n", 1).unwrap(), 1);
    assert_eq!(incr(b"n", -11).unwrap(), -10);
    assert_eq!(value(&tx, b"n"), Some(b"-10".to_vec()));
    set(
        &tx,
        0,
        b"max",
        i64::MAX.to_string().as_bytes(),
        &SetOptions::PLAIN,
    )
    .unwrap();
    assert_eq!(
        text(incr(b"max", 1).unwrap_err()),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(incr(b"max", -1).unwrap(), i64::MAX - 1);
    let bad_values: [&[u8]; 5] = [b" 1", b"1.0", b"abc", b"", b"99999999999999999999"];
    for bad in bad_values {
        set(&tx, 0, b"s", bad, &SetOptions::PLAIN).unwrap();
        assert_eq!(
            text(incr(b"s", 1).unwrap_err()),
            "ERR value is not an integer or out of range",
            "{bad:?}"
        );
        assert_eq!(value(&tx, b"s"), Some(bad.to_vec()), "unchanged");
    }
    put_list(&tx, b"l");
    let e = Str::open(&tx, 0, b"l").map(|_| ()).unwrap_err();
    assert_eq!(text(e), WRONGTYPE);
}

#[test]
fn incrbyfloat_computes_in_long_double() {
    let store = mem_store(2);
    let tx = store.front();
    let incr = |k: &[u8], by: &[u8]| Str::open(&tx, 0, k).unwrap().incr_by_float(by);
    assert_eq!(incr(b"f", b"1.5").unwrap(), "1.5");
    assert_eq!(incr(b"f", b"-0.5").unwrap(), "1");
    assert_eq!(incr(b"f", b"3e2").unwrap(), "301");
    assert_eq!(value(&tx, b"f"), Some(b"301".to_vec()));
    // The examples of Redis's documentation of INCRBYFLOAT.
    set(&tx, 0, b"d", b"10.50", &SetOptions::PLAIN).unwrap();
    assert_eq!(incr(b"d", b"0.1").unwrap(), "10.6");
    assert_eq!(incr(b"d", b"-5").unwrap(), "5.6");
    set(&tx, 0, b"e", b"5.0e3", &SetOptions::PLAIN).unwrap();
    assert_eq!(incr(b"e", b"2.0e2").unwrap(), "5200");
    assert_eq!(
        text(incr(b"f", b"inf").unwrap_err()),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(
        text(incr(b"f", b"x").unwrap_err()),
        "ERR value is not a valid float"
    );
    set(&tx, 0, b"s", b"abc", &SetOptions::PLAIN).unwrap();
    // The stored value is checked before the increment.
    assert!(matches!(incr(b"s", b"x"), Err(StringError::NotFloat)));
    assert_eq!(value(&tx, b"f"), Some(b"301".to_vec()));
    assert_eq!(value(&tx, b"s"), Some(b"abc".to_vec()));
}

#[test]
fn setbit_creates_grows_and_skips_unchanged_bits() {
    let store = mem_store(2);
    let tx = store.front();
    let setbit = |k: &[u8], off: u64, on: bool, max: u64| {
        Str::open(&tx, 0, k).unwrap().set_bit(off, on, max)
    };
    // A missing key is created even by a 0 bit.
    let d = setbit(b"b", 9, false, 100).unwrap();
    assert_eq!((d.was, d.written), (false, true));
    assert_eq!(value(&tx, b"b"), Some(vec![0, 0]));
    let d = setbit(b"b", 7, true, 100).unwrap();
    assert_eq!((d.was, d.written), (false, true));
    assert_eq!(value(&tx, b"b"), Some(vec![1, 0]));
    let d = setbit(b"b", 7, true, 100).unwrap();
    assert_eq!((d.was, d.written), (true, false), "unchanged: not written");
    let d = setbit(b"b", 7, false, 100).unwrap();
    assert_eq!((d.was, d.written), (true, true));
    assert!(!Str::open(&tx, 0, b"b").unwrap().get_bit(7));
    setbit(b"b", 0, true, 100).unwrap();
    let s = Str::open(&tx, 0, b"b").unwrap();
    assert!(s.get_bit(0) && !s.get_bit(1) && !s.get_bit(1000));
    assert_eq!(s.value(), Some(&[0x80, 0][..]));
    // Growing past the limit fails and writes nothing.
    let e = setbit(b"b", 8 * 100, true, 100).unwrap_err();
    assert_eq!(
        text(e),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    assert_eq!(value(&tx, b"b"), Some(vec![0x80, 0]));
}

#[test]
fn bit_ranges_counts_and_positions() {
    assert_eq!(bit_range(3, 0, -1, false), Some((0, 23)));
    assert_eq!(bit_range(3, -100, 100, false), Some((0, 23)));
    assert_eq!(bit_range(3, 2, 1, false), None);
    assert_eq!(bit_range(3, 5, 100, true), Some((5, 23)));
    assert_eq!(bit_range(0, 0, -1, false), None);
    assert_eq!(bit_range(2, -3, -1, true), Some((13, 15)));
    let v = [0b1010_0000u8, 0xff, 0x01];
    assert_eq!(count_ones(&v, 0, 23), 11);
    assert_eq!(count_ones(&v, 1, 2), 1);
    assert_eq!(count_ones(&v, 2, 2), 1);
    assert_eq!(count_ones(&v, 9, 22), 7);
    assert_eq!(find_bit(&v, true, 1, 23), Some(2));
    assert_eq!(find_bit(&v, false, 8, 15), None);
    assert_eq!(find_bit(&v, true, 16, 23), Some(23));
    assert_eq!(find_bit(&v, false, 3, 23), Some(3));
    assert!(bit_at(&v, 0) && !bit_at(&v, 1) && bit_at(&v, 23) && !bit_at(&v, 24));
}

#[test]
fn getdel_and_getex_expiry_changes() {
    let store = mem_store(2);
    let tx = store.front();
    set(&tx, 0, b"k", b"v", &SetOptions::PLAIN).unwrap();
    let mut s = Str::open(&tx, 0, b"k").unwrap();
    assert_eq!(s.delete().unwrap(), Some(b"v".to_vec()));
    assert_eq!(tx.get(0, b"k").unwrap(), None);
    assert_eq!(Str::open(&tx, 0, b"k").unwrap().delete().unwrap(), None);
    // GETEX: set, persist, persist again (nothing), a past time (deleted).
    set(&tx, 0, b"e", b"v", &SetOptions::PLAIN).unwrap();
    let at = now_ms() + 50_000;
    let change = |t: Option<u64>| Str::open(&tx, 0, b"e").unwrap().change_expiry(t).unwrap();
    assert_eq!(change(Some(at)), ExpiryChange::Set);
    assert_eq!(tx.get(0, b"e").unwrap().unwrap().expire_ms, at);
    assert_eq!(change(None), ExpiryChange::Persisted);
    assert_eq!(tx.get(0, b"e").unwrap().unwrap().expire_ms, 0);
    assert_eq!(change(None), ExpiryChange::None);
    assert_eq!(change(Some(1)), ExpiryChange::Deleted);
    assert_eq!(tx.get(0, b"e").unwrap(), None);
    assert_eq!(change(Some(at)), ExpiryChange::None, "absent: left alone");
    assert_eq!(tx.get(0, b"e").unwrap(), None);
}

#[test]
fn mset_msetnx_and_mget() {
    let store = mem_store(2);
    let tx = store.front();
    // The last value of a repeated key wins.
    let flat: [&[u8]; 6] = [b"x", b"1", b"y", b"2", b"x", b"3"];
    mset(&tx, 0, &flat).unwrap();
    put_list(&tx, b"l");
    assert_eq!(
        mget(&tx, 0, &[b"x", b"y", b"none", b"l"]).unwrap(),
        [Some(b"3".to_vec()), Some(b"2".to_vec()), None, None]
    );
    // MSETNX sets all or nothing; a key of another type counts as existing.
    assert!(!msetnx(&tx, 0, &[&b"z"[..], b"1", b"x", b"9"]).unwrap());
    assert!(!msetnx(&tx, 0, &[&b"z"[..], b"1", b"l", b"9"]).unwrap());
    assert_eq!(tx.get(0, b"z").unwrap(), None);
    assert!(msetnx(&tx, 0, &[&b"z"[..], b"1", b"w", b"2", b"z", b"4"]).unwrap());
    assert_eq!(
        mget(&tx, 0, &[b"z", b"w"]).unwrap(),
        [Some(b"4".to_vec()), Some(b"2".to_vec())]
    );
}

#[test]
fn lcs_picks_redis_runs_and_needs_strings() {
    let (seq, runs) = lcs(b"ohmytext", b"mynewtext");
    assert_eq!(seq, b"mytext");
    let m = |a0, a1, b0, b1| Match { a0, a1, b0, b1 };
    assert_eq!(runs, vec![m(4, 7, 5, 8), m(2, 3, 0, 1)]);
    assert_eq!(lcs(b"", b"abc"), (vec![], vec![]));
    assert_eq!(lcs(b"abc", b"xyz").0, b"");
    let store = mem_store(2);
    let tx = store.front();
    set(&tx, 0, b"a", b"abc", &SetOptions::PLAIN).unwrap();
    assert_eq!(
        lcs_values(&tx, 0, b"a", b"none").unwrap(),
        (b"abc".to_vec(), Vec::new())
    );
    put_list(&tx, b"l");
    assert!(matches!(
        lcs_values(&tx, 0, b"l", b"a"),
        Err(TypeError::WrongType)
    ));
}

#[test]
fn an_exec_and_a_worker_see_their_own_writes() {
    let store = mem_store(2);
    in_exec(&store, |tx| {
        set(tx, 0, b"k", b"1", &SetOptions::PLAIN).unwrap();
        assert_eq!(Str::open(tx, 0, b"k").unwrap().incr_by(1).unwrap(), 2);
        assert_eq!(value(&store.front(), b"k"), None, "buffered");
    });
    assert_eq!(value(&store.front(), b"k"), Some(b"2".to_vec()));
    on_worker(&store, b"k", |tx| {
        let mut s = Str::open(tx, 0, b"k").unwrap();
        assert_eq!(s.append(b"0", 100).unwrap(), 2);
        assert_eq!(value(tx, b"k"), Some(b"20".to_vec()));
    });
    assert_eq!(value(&store.front(), b"k"), Some(b"20".to_vec()));
}
