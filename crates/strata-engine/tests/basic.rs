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

/// Writers commit concurrently (unsynced ones without a leader): every batch becomes visible
/// all at once and in order. Four threads each write batches setting both of their keys `a`
/// and `b` to a counter that only grows (every fifth batch synced, some with `disable_wal`),
/// on a small memtable so that switches and flushes happen meanwhile; a reader takes
/// snapshots and must see `a == b` for every thread and no counter go back.
#[test]
fn concurrent_batches_become_visible_whole_and_in_order() {
    use strata_engine::{WriteBatch, WriteOptions};
    let dir = tempfile::tempdir().unwrap();
    for separated in [false, true] {
        let path = dir.path().join(if separated { "sep" } else { "plain" });
        let opts = Options {
            write_buffer_bytes: 16 << 10,
            sep_threshold_bytes: if separated { 8 } else { usize::MAX },
            vlog_file_bytes: 64 << 10,
            ..small_options()
        };
        let db = Db::open(&path, opts).unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        let counter = |v: Option<Vec<u8>>| -> u64 {
            v.map_or(0, |v| String::from_utf8(v).unwrap()[..10].parse().unwrap())
        };
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..4)
                .map(|t| {
                    let db = &db;
                    s.spawn(move || {
                        for n in 1..=1500u64 {
                            let v = format!("{n:010}-{}", "v".repeat(20 + t * 10));
                            let mut b = WriteBatch::new();
                            b.put(format!("{t}-a").as_bytes(), v.as_bytes());
                            b.put(format!("{t}-b").as_bytes(), v.as_bytes());
                            let wo = WriteOptions {
                                sync: n % 5 == 0,
                                disable_wal: n % 7 == 0 && n % 5 != 0,
                            };
                            db.write(&wo, b).unwrap();
                            // Read your own write.
                            let got = db.get(format!("{t}-a").as_bytes()).unwrap();
                            assert_eq!(got.as_deref(), Some(v.as_bytes()));
                        }
                    })
                })
                .collect();
            let reader = s.spawn(|| {
                let mut last = [0u64; 4];
                let mut reads = 0;
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    let ro = ReadOptions {
                        snapshot: Some(db.snapshot()),
                        ..Default::default()
                    };
                    for (t, last) in last.iter_mut().enumerate() {
                        let a = counter(db.get_opt(&ro, format!("{t}-a").as_bytes()).unwrap());
                        let b = counter(db.get_opt(&ro, format!("{t}-b").as_bytes()).unwrap());
                        assert_eq!(a, b, "thread {t}: half a batch visible");
                        assert!(a >= *last, "thread {t}: {a} visible after {last}");
                        *last = a;
                    }
                    reads += 1;
                }
                reads
            });
            for w in writers {
                w.join().unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::Release);
            assert!(reader.join().unwrap() > 0);
        });
        for t in 0..4 {
            let a = db.get(format!("{t}-a").as_bytes()).unwrap();
            assert_eq!(counter(a), 1500);
        }
        assert!(db.stats().flushes > 0, "the memtable switched meanwhile");
        db.close().unwrap();
    }
}
