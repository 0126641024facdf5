//! The HyperLogLog module against values captured from redis-server 7.0.15: `elem-N.hll` is
//! the GET of a key after `PFADD key elem:0 .. elem:N-1` (in batches of 1000) and PFCOUNT
//! (so the cache holds the count); `merge-A-500.hll` is `PFMERGE m elem-A other-500` then
//! PFCOUNT, where `other-500` holds `other:0 .. other:499`.

use super::sparse::{self, Ops};
use super::*;

const SPARSE_MAX: usize = 3000;

/// (fixture, elements, PFCOUNT on redis-server, encoding)
const FIXTURES: &[(&str, usize, u64, Encoding)] = &[
    ("elem-1", 1, 1, Encoding::Sparse),
    ("elem-10", 10, 10, Encoding::Sparse),
    ("elem-100", 100, 100, Encoding::Sparse),
    ("elem-1000", 1000, 1005, Encoding::Sparse),
    ("elem-2000", 2000, 1994, Encoding::Dense),
    ("elem-20000", 20000, 19603, Encoding::Dense),
    ("elem-100000", 100000, 99904, Encoding::Dense),
];

fn fixture(name: &str) -> Vec<u8> {
    match name {
        "elem-1" => include_bytes!("fixtures/elem-1.hll").to_vec(),
        "elem-10" => include_bytes!("fixtures/elem-10.hll").to_vec(),
        "elem-100" => include_bytes!("fixtures/elem-100.hll").to_vec(),
        "elem-1000" => include_bytes!("fixtures/elem-1000.hll").to_vec(),
        "elem-2000" => include_bytes!("fixtures/elem-2000.hll").to_vec(),
        "elem-20000" => include_bytes!("fixtures/elem-20000.hll").to_vec(),
        "elem-100000" => include_bytes!("fixtures/elem-100000.hll").to_vec(),
        "merge-100-500" => include_bytes!("fixtures/merge-100-500.hll").to_vec(),
        "merge-2000-500" => include_bytes!("fixtures/merge-2000-500.hll").to_vec(),
        _ => panic!("no fixture {name}"),
    }
}

/// What PFADD then PFCOUNT leave: the elements added, the cache filled.
fn built(prefix: &str, n: usize) -> Hll {
    let mut h = Hll::new();
    for i in 0..n {
        h.add(format!("{prefix}:{i}").as_bytes(), SPARSE_MAX)
            .unwrap();
    }
    h.invalidate_cache();
    let c = h.count().unwrap();
    h.set_cached_count(c);
    h
}

#[test]
fn murmur_tails_all_count() {
    // The empty input with seed 0 hashes to 0 by construction; the fixtures' elements
    // (6 to 11 bytes) check the hash against redis-server's registers.
    assert_eq!(murmur64a(b"", 0), 0);
    assert_ne!(murmur64a(b"a", HASH_SEED), murmur64a(b"b", HASH_SEED));
    // Every tail length goes through its own branch: each must change the hash.
    let data = b"0123456789abcdef";
    let hashes: std::collections::HashSet<u64> =
        (0..=16).map(|n| murmur64a(&data[..n], HASH_SEED)).collect();
    assert_eq!(hashes.len(), 17);
}

#[test]
fn empty_value_is_redis_bytes() {
    let h = Hll::new();
    assert_eq!(
        h.as_bytes(),
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff"
    );
    assert_eq!(h.cached_count(), Some(0));
    assert_eq!(h.count(), Ok(0));
    assert_eq!(h.decode().unwrap(), "Z:16384");
}

#[test]
fn adds_give_redis_bytes_and_counts() {
    for &(name, n, count, enc) in FIXTURES {
        let h = built("elem", n);
        assert_eq!(h.encoding(), enc, "{name}");
        assert_eq!(h.count(), Ok(count), "{name}");
        let want = fixture(name);
        assert_eq!(h.as_bytes().len(), want.len(), "{name}");
        assert!(
            h.as_bytes() == &want[..],
            "{name}: bytes differ from redis-server's"
        );
        // And the other way: redis-server's value read here.
        let theirs = Hll::from_bytes(want).unwrap();
        assert_eq!(theirs.cached_count(), Some(count), "{name}");
        assert_eq!(theirs.count(), Ok(count), "{name}");
    }
}

#[test]
fn merges_give_redis_bytes_and_counts() {
    for (name, a, count) in [("merge-100-500", 100, 600), ("merge-2000-500", 2000, 2490)] {
        let mut max = [0u8; REGISTERS];
        let (x, y) = (built("elem", a), built("other", 500));
        x.merge_into(&mut max).unwrap();
        y.merge_into(&mut max).unwrap();
        assert_eq!(count_registers(&max), count, "{name}");
        // PFMERGE into a new key: dense if any source is dense, then every register set.
        let mut m = Hll::new();
        if x.encoding() == Encoding::Dense || y.encoding() == Encoding::Dense {
            m.make_dense().unwrap();
        }
        for (i, &r) in max.iter().enumerate() {
            if r != 0 {
                m.set_register(i, r, SPARSE_MAX).unwrap();
            }
        }
        m.invalidate_cache();
        let c = m.count().unwrap();
        m.set_cached_count(c);
        assert_eq!(c, count, "{name}");
        assert!(m.as_bytes() == &fixture(name)[..], "{name}");
    }
}

#[test]
fn sparse_to_dense_keeps_registers_and_cache() {
    let mut h = Hll::from_bytes(fixture("elem-1000")).unwrap();
    let mut before = [0u8; REGISTERS];
    h.merge_into(&mut before).unwrap();
    assert_eq!(h.make_dense(), Ok(true));
    assert_eq!(h.make_dense(), Ok(false));
    assert_eq!(h.as_bytes().len(), DENSE_SIZE);
    assert_eq!(h.dense_registers().unwrap(), before.to_vec());
    assert_eq!(h.cached_count(), Some(1005));
    assert_eq!(h.count(), Ok(1005));
}

#[test]
fn dense_registers_round_trip() {
    let mut regs = vec![0u8; DENSE_SIZE - HDR_SIZE];
    for i in 0..REGISTERS {
        dense_write(&mut regs, i, (i * 7 % 64) as u8);
    }
    for i in 0..REGISTERS {
        assert_eq!(dense_get(&regs, i), (i * 7 % 64) as u8, "register {i}");
    }
    // The last register ends exactly at the last byte.
    dense_write(&mut regs, REGISTERS - 1, 63);
    assert_eq!(regs[regs.len() - 1] >> 2, 63);
    assert!(dense_raise(&mut regs, 0, 1) || dense_get(&regs, 0) >= 1);
    assert!(!dense_raise(&mut regs, REGISTERS - 1, 5));
}

#[test]
fn sparse_set_splits_and_merges_opcodes() {
    let mut h = Hll::new();
    h.set_register(100, 3, SPARSE_MAX).unwrap();
    // Runs of more than 64 zeros are XZERO opcodes.
    assert_eq!(h.decode().unwrap(), "Z:100 v:3,1 Z:16283");
    h.set_register(101, 3, SPARSE_MAX).unwrap();
    assert_eq!(h.decode().unwrap(), "Z:100 v:3,2 Z:16282");
    h.set_register(99, 3, SPARSE_MAX).unwrap();
    assert_eq!(h.decode().unwrap(), "Z:99 v:3,3 Z:16282");
    h.set_register(100, 5, SPARSE_MAX).unwrap();
    assert_eq!(h.decode().unwrap(), "Z:99 v:3,1 v:5,1 v:3,1 Z:16282");
    assert_eq!(h.set_register(100, 4, SPARSE_MAX), Ok(false));
    h.set_register(0, 32, SPARSE_MAX).unwrap();
    assert_eq!(h.decode().unwrap(), "v:32,1 Z:98 v:3,1 v:5,1 v:3,1 Z:16282");
    assert!(sparse::covers_all(h.as_bytes()));
    assert_eq!(h.cached_count(), None);
    // A value over 32 makes it dense.
    h.set_register(1, 33, SPARSE_MAX).unwrap();
    assert_eq!(h.encoding(), Encoding::Dense);
    let regs = h.dense_registers().unwrap();
    assert_eq!(
        (regs[0], regs[1], regs[99], regs[100], regs[101]),
        (32, 33, 3, 5, 3)
    );
}

#[test]
fn growth_past_the_limit_makes_it_dense() {
    let mut h = Hll::new();
    let mut i = 0;
    while h.encoding() == Encoding::Sparse {
        // Every other register: each set grows the opcodes.
        h.set_register(i * 2, 1, 100).unwrap();
        assert!(h.as_bytes().len() <= 100 || h.encoding() == Encoding::Dense);
        i += 1;
    }
    assert_eq!(h.as_bytes().len(), DENSE_SIZE);
    // With no limit at all the first growing set converts.
    let mut h = Hll::new();
    h.set_register(5, 1, 0).unwrap();
    assert_eq!(h.encoding(), Encoding::Dense);
}

#[test]
fn bad_values_are_rejected_without_panics() {
    assert_eq!(Hll::from_bytes(b"HYLL".to_vec()), Err(HllError::NotHll));
    assert_eq!(Hll::from_bytes(vec![0; 16]), Err(HllError::NotHll));
    let mut bad_enc = Hll::new().into_bytes();
    bad_enc[4] = 2;
    assert_eq!(Hll::from_bytes(bad_enc), Err(HllError::NotHll));
    let mut short_dense = Hll::new().into_bytes();
    short_dense[4] = 0;
    assert_eq!(Hll::from_bytes(short_dense), Err(HllError::NotHll));
    // Sparse opcodes that do not cover the registers: corrupt for every reader.
    let cases: Vec<Vec<u8>> = vec![
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec(),
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f".to_vec(),
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff\x00".to_vec(),
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xfe\xff\xff".to_vec(),
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f".to_vec(),
    ];
    for v in cases {
        let h = Hll::from_bytes(v.clone()).unwrap();
        assert_eq!(h.count(), Err(HllError::Corrupt), "{v:?}");
        let mut max = [0u8; REGISTERS];
        assert_eq!(h.merge_into(&mut max), Err(HllError::Corrupt), "{v:?}");
        assert_eq!(h.clone().make_dense(), Err(HllError::Corrupt), "{v:?}");
        // Adding may succeed or find the corruption, but never panics.
        let mut h2 = h.clone();
        for e in 0..200u32 {
            if h2.add(&e.to_le_bytes(), SPARSE_MAX).is_err() {
                break;
            }
        }
        let _ = h.decode();
    }
}

#[test]
fn opcodes_decode() {
    let h = Hll::from_bytes(fixture("elem-10")).unwrap();
    let ops: Vec<_> = Ops::new(h.as_bytes()).collect();
    assert_eq!(ops.iter().map(|o| o.len).sum::<usize>(), REGISTERS);
    assert_eq!(
        ops.iter()
            .filter(|o| matches!(o.kind, sparse::Op::Val(_)))
            .count(),
        10
    );
}

#[test]
fn estimator_edges() {
    let mut histo = [0u32; 64];
    histo[0] = REGISTERS as u32;
    assert_eq!(estimate(&histo), 0);
    // All registers at the maximum: Redis's overflowed rounding.
    let mut histo = [0u32; 64];
    histo[Q + 1] = REGISTERS as u32;
    assert_eq!(estimate(&histo), 1 << 63);
}

#[test]
fn self_test_passes() {
    assert_eq!(self_test(SPARSE_MAX), Ok(()));
}
