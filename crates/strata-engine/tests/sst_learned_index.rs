//! `Options::sst_learned_index` through the whole engine: write, flush and compact so the
//! data lives in L1 and below, read every key back often enough that the tables build their
//! learned indexes, and check every value, a scan with seeks, and that models were built.
//! Runs alone in its process, so the process-wide model counter counts only this test.

#[macro_use]
mod common;

use common::{key, mem_dir, tiny_opts, value};
use std::sync::Arc;
use strata_engine::io::MemFs;
use strata_engine::sst::learned::{
    learned_models_built, learned_models_rejected, BUILD_AFTER_LOOKUPS,
};
use strata_engine::{Db, Options, ReadOptions};

const KEYS: u32 = 12_000;

#[test]
fn reads_through_learned_indexes_match_what_was_written() {
    let mem = MemFs::new();
    let opts = Options {
        sst_learned_index: true,
        // About 150 blocks of 256 bytes per table: enough for a model.
        block_size_bytes: 256,
        target_file_size_bytes: 40 << 10,
        ..tiny_opts(Arc::new(mem))
    };
    let db = Db::open(mem_dir(), opts).unwrap();
    // In a scattered order, so that flushed tables overlap and compaction rewrites them into
    // tables of the target size (disjoint ones would move down as they are, too small).
    for j in 0..KEYS {
        let k = key((j * 7919 % KEYS) * 3);
        db.put(&k, &value(&k, 0, 20)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let stats = db.stats();
    assert_eq!(stats.levels[0].0, 0, "{stats}");
    let tables: usize = stats.levels.iter().map(|(n, _)| n).sum();
    assert!(tables >= 4, "{stats}");
    let reader_bytes = stats.table_reader_bytes;

    let built_before = learned_models_built();
    let rejected_before = learned_models_rejected();
    // Enough reads that every table serves more than BUILD_AFTER_LOOKUPS lookups.
    let passes = 1 + BUILD_AFTER_LOOKUPS as usize * tables / KEYS as usize;
    for _ in 0..passes {
        for i in 0..KEYS {
            let k = key(i * 3);
            assert_eq!(db.get(&k).unwrap(), Some(value(&k, 0, 20)), "key {i}");
            // Keys between and after the written ones are absent.
            assert_eq!(db.get(&key(i * 3 + 1)).unwrap(), None);
        }
    }
    assert_eq!(db.get(b"").unwrap(), None);
    assert_eq!(db.get(b"zzz").unwrap(), None);
    let built = learned_models_built() - built_before;
    assert!(
        built as usize >= tables / 2 && built as usize <= tables,
        "{built} models for {tables} tables"
    );
    // Each table timed its model against the binary search and kept it only if faster; a
    // kept model adds at least a segment (24 bytes) to the table readers' memory.
    let kept = built - (learned_models_rejected() - rejected_before);
    assert!(
        db.stats().table_reader_bytes >= reader_bytes + kept * 24,
        "{kept} models kept"
    );

    // Seeks go through the models too.
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    for i in (0..KEYS * 3).step_by(101) {
        it.seek(&key(i));
        let want = i.div_ceil(3) * 3;
        if want < KEYS * 3 {
            assert!(it.valid(), "seek {i}");
            assert_eq!(it.key(), key(want), "seek {i}");
        } else {
            assert!(!it.valid(), "seek {i}");
        }
    }
    drop(it);
    db.close().unwrap();
}
