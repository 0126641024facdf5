//! The learned index against the binary search: over random and adversarial separator sets
//! (one long shared prefix, dense sequential, sparse, many keys equal in their first 8 bytes
//! after the prefix, several versions of one user key), for present and absent keys and keys
//! before the first and after the last, it must return the same position every time.

use super::builder::{TableBuilder, TableOptions};
use super::learned::{Model, BUILD_AFTER_LOOKUPS, MIN_BLOCKS};
use super::testutil::{VecFile, VecReader};
use super::Table;
use crate::key::{compare_internal, make_internal_key, seek_key, user_key, ValueKind, MAX_SEQ};
use crate::options::Compression;
use proptest::prelude::*;
use std::cmp::Ordering;
use std::sync::Arc;

/// Sorted, distinct internal keys over `uks`, each user key with `versions(i)` versions.
fn internal_keys(uks: &[Vec<u8>], versions: impl Fn(usize) -> u64) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for (i, uk) in uks.iter().enumerate() {
        for v in 0..versions(i) {
            out.push(make_internal_key(uk, 100 + v * 7, ValueKind::Value));
        }
    }
    out.sort_by(|a, b| compare_internal(a, b));
    out.dedup();
    out
}

/// Seek keys around every key and outside the range.
fn queries(keys: &[Vec<u8>], extra: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut q = Vec::new();
    for k in keys {
        let uk = user_key(k);
        q.push(k.clone());
        q.push(seek_key(uk, MAX_SEQ));
        q.push(seek_key(uk, 0));
        q.push(seek_key(uk, 103));
        let mut after = uk.to_vec();
        after.push(0);
        q.push(seek_key(&after, MAX_SEQ));
        if let Some((&last, head)) = uk.split_last() {
            if last > 0 {
                let mut before = head.to_vec();
                before.push(last - 1);
                before.extend_from_slice(&[0xff; 3]);
                q.push(seek_key(&before, MAX_SEQ));
            }
            q.push(seek_key(head, MAX_SEQ));
        }
    }
    q.push(seek_key(b"", MAX_SEQ));
    q.push(seek_key(b"", 0));
    q.push(seek_key(&[0xff; 40], 0));
    q.push(seek_key(&[0xff; 40], MAX_SEQ));
    for e in extra {
        q.push(seek_key(e, MAX_SEQ));
    }
    q
}

fn binary(keys: &[Vec<u8>], target: &[u8]) -> usize {
    keys.partition_point(|k| compare_internal(k, target) == Ordering::Less)
}

fn check_model(keys: &[Vec<u8>], extra: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let Some(m) = Model::build(keys.len(), |i| &keys[i]) else {
        prop_assert!(keys.is_empty());
        return Ok(());
    };
    for q in queries(keys, extra) {
        let got = m.lower_bound(|i| &keys[i], &q);
        prop_assert_eq!(got, binary(keys, &q), "query {:?}", q);
    }
    Ok(())
}

/// User keys of the adversarial families, from `seed` values.
fn family(kind: u8, xs: &[u64], tails: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let long_prefix = b"tenant:0042:collection:sessions:shard-7:".to_vec();
    xs.iter()
        .zip(tails.iter().cycle())
        .enumerate()
        .map(|(i, (&x, tail))| {
            let mut k = Vec::new();
            match kind {
                // One long shared prefix, then random bytes.
                0 => {
                    k.extend_from_slice(&long_prefix);
                    k.extend_from_slice(&x.to_be_bytes()[..(x % 9) as usize]);
                    k.extend_from_slice(tail);
                }
                // Dense sequential (db_bench-like counters).
                1 => {
                    k.extend_from_slice(&long_prefix[..8]);
                    k.extend_from_slice(&(i as u64).to_be_bytes());
                }
                // Sparse: a few keys spread over the whole u64 space.
                2 => k.extend_from_slice(&x.to_be_bytes()),
                // The same 8 bytes after the prefix, told apart only by what follows.
                3 => {
                    k.extend_from_slice(b"p:");
                    k.extend_from_slice(&[(x % 3) as u8; 8]);
                    k.extend_from_slice(tail);
                }
                // Random short keys of any bytes (empty too).
                _ => k.extend_from_slice(tail),
            }
            k
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn model_finds_what_binary_search_finds(
        kind in 0u8..5,
        xs in proptest::collection::vec(any::<u64>(), 1..400),
        tails in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![Just(0u8), Just(0xff), any::<u8>()], 0..12),
            1..50),
        multi in 0u64..4,
        extra in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..50), 0..10),
    ) {
        let uks = family(kind, &xs, &tails);
        // Several versions of some user keys: separators tie on the user key.
        let keys = internal_keys(&uks, |i| if multi > 0 && i % 3 == 0 { multi + 1 } else { 1 });
        check_model(&keys, &extra)?;
    }
}

#[test]
fn model_on_a_single_key_and_on_equal_mapped_values() {
    check_model(&internal_keys(&[b"only".to_vec()], |_| 1), &[]).unwrap();
    check_model(&internal_keys(&[b"only".to_vec()], |_| 5), &[]).unwrap();
    // 5,000 keys that all map to one u64: the search widens over all of them.
    let uks: Vec<Vec<u8>> = (0..5000u32)
        .map(|i| {
            let mut k = b"same8byt".to_vec();
            k.extend_from_slice(&i.to_be_bytes());
            k
        })
        .collect();
    let mut with_other = uks.clone();
    with_other.push(b"zzz".to_vec());
    for set in [uks, with_other] {
        check_model(&internal_keys(&set, |_| 1), &[b"same8byt".to_vec()]).unwrap();
    }
    assert!(Model::build(0, |_| &[][..]).is_none());
}

/// A table of `keys` with blocks of about `block_size` bytes.
fn table_bytes(keys: &[Vec<u8>], block_size: usize) -> Vec<u8> {
    let file = VecFile::new("000009.sst");
    let data = file.data.clone();
    let mut b = TableBuilder::new(
        Box::new(file),
        TableOptions {
            block_size,
            restart_interval: 4,
            compression: Compression::None,
            filter: true,
            block_align: false,
        },
    );
    for k in keys {
        b.add(k, b"value").unwrap();
    }
    b.finish().unwrap();
    let bytes = data.lock().clone();
    bytes
}

fn open(bytes: &[u8], learned: bool) -> Arc<Table> {
    Table::open_with(
        VecReader::new(bytes.to_vec(), "000009.sst"),
        9,
        None,
        learned,
    )
    .unwrap()
}

#[test]
fn table_builds_its_model_after_enough_lookups_and_finds_the_same_blocks() {
    let uks: Vec<Vec<u8>> = (0..20_000u64)
        .map(|i| format!("user:{:012}", i * i % 1_000_003).into_bytes())
        .collect();
    let keys = internal_keys(&uks, |i| if i % 50 == 0 { 3 } else { 1 });
    let bytes = table_bytes(&keys, 256);
    let plain = open(&bytes, false);
    let learned = open(&bytes, true);
    assert!(learned.num_blocks() > 1000, "{}", learned.num_blocks());
    let qs = queries(&keys[..2000], &[b"user:".to_vec(), b"user;".to_vec()]);
    let before = learned.memory_bytes();
    // The automatic build decides after exactly BUILD_AFTER_LOOKUPS lookups; whether it keeps
    // the model is a timing (`measures_faster`), the blocks found are the same either way.
    let auto = open(&bytes, true);
    for (n, q) in qs.iter().enumerate() {
        assert_eq!(
            auto.learned_index_decided(),
            n as u64 >= BUILD_AFTER_LOOKUPS,
            "after {n} lookups"
        );
        assert_eq!(auto.find_block(q), plain.find_block(q), "query {q:?}");
    }
    assert!(auto.learned_index_decided());
    // The rest of the test uses the model itself: built without the timing.
    assert!(learned.build_learned_index() && learned.has_learned_index());
    for q in &qs {
        assert_eq!(learned.find_block(q), plain.find_block(q), "query {q:?}");
    }
    assert!(!plain.has_learned_index() && !plain.build_learned_index());
    let levels = learned.learned_index_levels();
    assert!(levels[0] < learned.num_blocks() / 4, "{levels:?}");
    assert!(learned.memory_bytes() >= before + levels[0] * 24);
    assert_eq!(plain.memory_bytes(), before);
    for q in queries(&keys, &[]) {
        assert_eq!(learned.find_block(&q), plain.find_block(&q), "query {q:?}");
    }

    // Iterator seeks go through the model too.
    let (mut a, mut b) = (
        learned.iter(Default::default()),
        plain.iter(Default::default()),
    );
    use crate::iter::InternalIterator;
    for q in qs.iter().step_by(7) {
        a.seek(q);
        b.seek(q);
        assert_eq!(a.valid(), b.valid());
        if a.valid() {
            assert_eq!(a.key(), b.key());
        }
    }
}

#[test]
fn small_tables_never_build_a_model() {
    let uks: Vec<Vec<u8>> = (0..200u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let keys = internal_keys(&uks, |_| 1);
    let t = open(&table_bytes(&keys, 4096), true);
    assert!(t.num_blocks() < MIN_BLOCKS);
    for i in 0..2 * BUILD_AFTER_LOOKUPS as usize {
        let k = &keys[i % keys.len()];
        assert!(t.find_block(k).is_some());
    }
    assert!(!t.has_learned_index() && !t.build_learned_index());
}

#[test]
fn adversarial_tables_find_the_same_blocks() {
    let tails: Vec<Vec<u8>> = (0..4999u32)
        .map(|i| i.wrapping_mul(0x9e37_79b9).to_le_bytes()[..1 + i as usize % 4].to_vec())
        .collect();
    let xs: Vec<u64> = (0..6000u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    for kind in 0..5 {
        let keys = internal_keys(&family(kind, &xs, &tails), |i| 1 + (i % 4 == 0) as u64);
        let bytes = table_bytes(&keys, 256);
        let (plain, learned) = (open(&bytes, false), open(&bytes, true));
        assert!(learned.num_blocks() >= MIN_BLOCKS, "family {kind}");
        assert!(learned.build_learned_index(), "family {kind}");
        for q in queries(&keys, &[]) {
            assert_eq!(
                learned.find_block(&q),
                plain.find_block(&q),
                "family {kind}, query {q:?}"
            );
        }
    }
}
