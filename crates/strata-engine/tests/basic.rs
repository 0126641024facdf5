//! End-to-end basics on a real directory: write enough to flush and compact, reopen, read
//! back through get, multi_get and iterators.

use strata_engine::{Db, Options, ReadOptions};

fn small_options() -> Options {
    Options {
        write_buffer_bytes: 64 << 10,
        target_file_size_bytes: 32 << 10,
        max_bytes_for_level_base: 256 << 10,
        l0_compaction_trigger: 2,
        block_size_bytes: 1024,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:08}", (i * 7919) % 20_000).into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

#[test]
fn write_flush_compact_reopen_read() {
    let dir = tempfile::tempdir().unwrap();
    let n = 20_000u32;
    {
        let db = Db::open(dir.path(), small_options()).unwrap();
        for round in 0..2 {
            for i in 0..n {
                db.put(&key(i), &value(i, round)).unwrap();
            }
        }
        for i in (0..n).step_by(3) {
            db.delete(&key(i)).unwrap();
        }
        db.wait_idle().unwrap();
        let s = db.stats();
        assert!(s.flushes > 0, "{s}");
        assert!(s.compactions + s.trivial_moves > 0, "{s}");
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), small_options()).unwrap();
    let check = |i: u32, got: Option<Vec<u8>>| {
        if i.is_multiple_of(3) {
            assert_eq!(got, None, "key {i} was deleted");
        } else {
            assert_eq!(got, Some(value(i, 1)), "key {i}");
        }
    };
    for i in 0..n {
        check(i, db.get(&key(i)).unwrap());
    }
    let keys: Vec<Vec<u8>> = (0..n).map(key).collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    for (i, r) in db
        .multi_get(&ReadOptions::default(), &refs)
        .into_iter()
        .enumerate()
    {
        check(i as u32, r.unwrap());
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut count = 0;
    let mut last: Vec<u8> = Vec::new();
    while it.valid() {
        assert!(it.key() > last.as_slice());
        last = it.key().to_vec();
        count += 1;
        it.next();
    }
    it.status().unwrap();
    assert_eq!(count, (0..n).filter(|i| !i.is_multiple_of(3)).count());
    it.seek_to_last();
    let mut back = 0;
    while it.valid() {
        back += 1;
        it.prev();
    }
    it.status().unwrap();
    assert_eq!(back, count);
    db.compact_range(None, None).unwrap();
    for i in (0..n).step_by(97) {
        check(i, db.get(&key(i)).unwrap());
    }
    let report = Db::check(dir.path(), small_options());
    assert!(
        report.is_err(),
        "check must refuse while the database is open (lock)"
    );
    db.close().unwrap();
    let report = Db::check(dir.path(), small_options()).unwrap();
    assert!(report.is_ok(), "{report}");
    assert!(report.tables > 0);
}
