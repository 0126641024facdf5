//! The L0 tier through `Db` (the NVM seed): flushes write mapped L0 tables into
//! `l0_tier_dir`; every read path (get, multi_get, iterators, compaction) reads them in place;
//! progressive compaction moves them down; a reopen, `check`, damaged tables and a missing
//! directory behave as the design says (`docs/design.md` §2.9).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use strata_engine::{Db, Options, ReadOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Memtables that flush only when told to (or at 1 MiB); a tier of 4 MiB.
fn tier_opts(tier: &Path) -> Options {
    Options {
        write_buffer_bytes: 1 << 20,
        target_file_size_bytes: 32 << 10,
        max_bytes_for_level_base: 256 << 10,
        l0_tier_dir: Some(tier.to_path_buf()),
        l0_tier_bytes: TIER_BYTES,
        ..Options::default()
    }
}

const TIER_BYTES: u64 = 4 << 20;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("v{i}-{round}-{}", "x".repeat((i % 90) as usize)).into_bytes()
}

fn tier_files(tier: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(tier)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "l0t"))
        .collect();
    v.sort();
    v
}

fn sst_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|e| e == "sst")
        })
        .count()
}

/// Writes keys `0..n` into a new database, flushes them into one tier table and closes it;
/// what was written.
fn one_flushed_table(dir: &Path, tier: &Path, n: u32) -> Map {
    let db = Db::open(dir, tier_opts(tier)).unwrap();
    let mut want = Map::new();
    for i in 0..n {
        db.put(&key(i), &value(i, 0)).unwrap();
        want.insert(key(i), value(i, 0));
    }
    db.flush().unwrap();
    db.close().unwrap();
    want
}

/// Every key of `want` through get, multi_get and a full scan.
fn assert_reads(db: &Db, want: &Map, what: &str) {
    let got = common::scan_all(db).unwrap();
    assert!(got == *want, "{what}: scan: {}", common::diff(&got, want));
    let keys: Vec<&[u8]> = want.keys().map(|k| k.as_slice()).collect();
    for (k, r) in keys
        .iter()
        .zip(db.multi_get(&ReadOptions::default(), &keys))
    {
        assert_eq!(
            r.unwrap().as_deref(),
            want.get(*k).map(|v| v.as_slice()),
            "{what}"
        );
    }
    for (k, v) in want.iter().step_by(5) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(v.as_slice()), "{what}");
    }
    assert_eq!(db.get(b"key-absent").unwrap(), None, "{what}");
}

#[test]
fn flush_writes_tier_tables_that_every_read_path_and_reopen_see() {
    let dir = tempfile::tempdir().unwrap();
    let tier = common::tier_tempdir();
    let mut want = Map::new();
    {
        let db = Db::open(dir.path(), tier_opts(tier.path())).unwrap();
        for i in 0..600 {
            db.put(&key(i), &value(i, 0)).unwrap();
            want.insert(key(i), value(i, 0));
        }
        db.flush().unwrap();
        // Overwrites and deletes in a second table that shadows the first.
        for i in (0..600).step_by(3) {
            db.put(&key(i), &value(i, 1)).unwrap();
            want.insert(key(i), value(i, 1));
        }
        for i in (1..600).step_by(7) {
            db.delete(&key(i)).unwrap();
            want.remove(&key(i));
        }
        db.flush().unwrap();
        let s = db.stats();
        assert_eq!(s.l0_tier_tables, 2, "{s:?}");
        assert_eq!(s.levels[0].0, 2);
        assert!(s.l0_tier_bytes > 0 && s.l0_tier_flushes == 2);
        assert_eq!(tier_files(tier.path()).len(), 2);
        assert_eq!(
            sst_files(dir.path()),
            0,
            "no SSTable in L0 with the tier on"
        );
        assert_reads(&db, &want, "after two flushes");
        // Unflushed writes over the tier tables.
        db.put(&key(5), b"in the memtable").unwrap();
        want.insert(key(5), b"in the memtable".to_vec());
        assert_reads(&db, &want, "memtable over the tier");
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), tier_opts(tier.path())).unwrap();
    assert_reads(&db, &want, "after reopen");
    let report = Db::check(dir.path(), tier_opts(tier.path()));
    // The database is open (locked): check refuses politely rather than read under it.
    assert!(report.is_err());
    db.close().unwrap();
    let report = Db::check(dir.path(), tier_opts(tier.path())).unwrap();
    assert!(report.is_ok(), "{report}");
    assert!(report.tables >= 2 && report.entries > 600, "{report}");
}

#[test]
fn progressive_compaction_moves_tables_down_and_frees_the_tier() {
    let dir = tempfile::tempdir().unwrap();
    let tier = common::tier_tempdir();
    // A small tier: compaction from 128 KiB, about 8 tables of the ones below.
    let opts = Options {
        write_buffer_bytes: 64 << 10,
        l0_tier_bytes: 256 << 10,
        ..tier_opts(tier.path())
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let mut want = Map::new();
    // Sequential ranges, one table each: nothing overlaps, so tables move down one by one.
    for t in 0..24u32 {
        for i in t * 300..(t + 1) * 300 {
            db.put(&key(i), &value(i, t)).unwrap();
            want.insert(key(i), value(i, t));
        }
        db.flush().unwrap();
        db.wait_idle().unwrap();
        let s = db.stats();
        assert!(
            s.l0_tier_bytes < 128 << 10,
            "compaction keeps the tier under half its capacity: {s:?}"
        );
    }
    let s = db.stats();
    assert!(s.compactions > 0 && s.l0_tier_tables > 1, "{s:?}");
    assert!(
        s.levels.iter().skip(1).any(|(n, _)| *n > 0),
        "tables reached L1 or below: {:?}",
        s.levels
    );
    // Compacted tables are gone from the tier directory.
    assert_eq!(tier_files(tier.path()).len(), s.l0_tier_tables);
    assert_reads(&db, &want, "after progressive compactions");
    // Everything down: the tier empties.
    db.compact_range(None, None).unwrap();
    let s = db.stats();
    assert_eq!(s.l0_tier_tables, 0, "{s:?}");
    assert!(tier_files(tier.path()).is_empty());
    assert_reads(&db, &want, "after compact_range");
}

#[test]
fn progressive_compaction_prefers_tables_that_overlap_nothing_below() {
    let dir = tempfile::tempdir().unwrap();
    let tier = common::tier_tempdir();
    let opts = Options {
        // Compaction from 80 KiB of tables.
        write_buffer_bytes: 64 << 10,
        l0_tier_bytes: 160 << 10,
        ..tier_opts(tier.path())
    };
    let db = Db::open(dir.path(), opts).unwrap();
    // A base in L1 over keys 0..1000.
    for i in 0..1000 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let before = db.stats();
    let below: usize = before.levels.iter().skip(1).map(|l| l.0).sum();
    assert!(below > 0 && before.l0_tier_tables == 0);
    // Then new tables far above that range, which move down without touching L1's tables.
    let mut want = common::scan_all(&db).unwrap();
    for t in 0..6u32 {
        for i in 10_000 + t * 400..10_000 + (t + 1) * 400 {
            db.put(&key(i), &value(i, t)).unwrap();
            want.insert(key(i), value(i, t));
        }
        db.flush().unwrap();
        db.wait_idle().unwrap();
    }
    let after = db.stats();
    assert!(after.compactions > before.compactions, "{after:?}");
    // The old L1 tables were not rewritten: compaction read only what it moved.
    assert!(
        after.compaction_bytes_read - before.compaction_bytes_read
            <= after.compaction_bytes_written - before.compaction_bytes_written + (64 << 10),
        "read {} wrote {}",
        after.compaction_bytes_read - before.compaction_bytes_read,
        after.compaction_bytes_written - before.compaction_bytes_written
    );
    assert_reads(&db, &want, "after moving new ranges down");
}

#[test]
fn separated_values_stay_in_the_value_log_as_pointers() {
    let dir = tempfile::tempdir().unwrap();
    let tier = common::tier_tempdir();
    let opts = Options {
        // The seed's layout: values of 32 bytes and more are pointers.
        sep_threshold_bytes: 32,
        ..tier_opts(tier.path())
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut want = Map::new();
    for i in 0..800 {
        let v = value(i, 0);
        db.put(&key(i), &v).unwrap();
        want.insert(key(i), v);
    }
    db.flush().unwrap();
    let t = strata_engine::l0tier::L0Table::open(&tier_files(tier.path())[0]).unwrap();
    assert!(t.inline_threshold() == 32);
    // Values under 32 bytes inline, the rest pointers: the table is far smaller than the
    // values it serves.
    let value_bytes: usize = want.values().map(|v| v.len()).sum();
    assert!(
        (t.file_size() as usize) < value_bytes,
        "table {} bytes for {value_bytes} bytes of values",
        t.file_size()
    );
    assert_reads(&db, &want, "pointers through the tier");
    // Overwrite half, flush and collect value-log garbage: the tier's pointers still resolve.
    for i in (0..800).step_by(2) {
        db.put(&key(i), &value(i, 1)).unwrap();
        want.insert(key(i), value(i, 1));
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    db.gc().unwrap();
    assert_reads(&db, &want, "after GC");
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    assert_reads(&db, &want, "after reopen");
}

/// Without separation (the default), the tier still keeps values of
/// `l0_inline_threshold_bytes` (32) and more where the log put them; compaction copies them
/// into SSTables, and GC then reclaims the log. With separation at 64 bytes, values from 32 to
/// 63 bytes are copied and longer ones stay pointers.
#[test]
fn tier_pointers_into_the_log_are_copied_into_sstables_by_compaction() {
    for sep in [usize::MAX, 64] {
        let dir = tempfile::tempdir().unwrap();
        let tier = common::tier_tempdir();
        let opts = Options {
            sep_threshold_bytes: sep,
            vlog_file_bytes: 64 << 10,
            gc_interval_ms: 0,
            ..tier_opts(tier.path())
        };
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let mut want = Map::new();
        for i in 0..2000 {
            db.put(&key(i), &value(i, 0)).unwrap();
            want.insert(key(i), value(i, 0));
        }
        db.flush().unwrap();
        let mut logged = want.values().filter(|v| v.len() >= 32).count() as u64;
        // A second table shadows a third of the first one's keys.
        for i in (0..2000).step_by(3) {
            let v = value(i, 1);
            logged += u64::from(v.len() >= 32);
            db.put(&key(i), &v).unwrap();
            want.insert(key(i), v);
        }
        db.flush().unwrap();
        let s = db.stats();
        // The compaction copies the newest versions and drops the shadowed ones.
        let copied = want
            .values()
            .filter(|v| v.len() >= 32 && v.len() < sep)
            .count() as u64;
        assert!(copied > 0 && copied <= logged, "sep {sep}");
        assert_eq!(
            s.wal_bytes_written, 0,
            "sep {sep}: the value log is the commit log"
        );
        assert_eq!(s.vlog_values_written, logged, "sep {sep}: {s:?}");
        let t = strata_engine::l0tier::L0Table::open(&tier_files(tier.path())[0]).unwrap();
        assert_eq!(t.inline_threshold(), 32);
        let value_bytes: usize = want.values().map(|v| v.len()).sum();
        assert!(
            (t.file_size() as usize) < value_bytes,
            "sep {sep}: table {} bytes for {value_bytes} bytes of values",
            t.file_size()
        );
        assert!(
            s.l0_tier_bytes > t.file_size(),
            "sep {sep}: the log the table points at counts toward the tier: {s:?}"
        );
        assert_reads(&db, &want, "pointers into the log through the tier");

        db.compact_range(None, None).unwrap();
        let s = db.stats();
        assert_eq!(s.l0_tier_tables, 0, "sep {sep}: {s:?}");
        assert_eq!(s.l0_tier_values_copied, copied, "sep {sep}: {s:?}");
        assert_reads(&db, &want, "values copied into SSTables");
        if sep == usize::MAX {
            // Each tier pointer was counted as garbage exactly once, by the compaction that
            // copied or dropped it: no pointer is left, and no file below the durable head
            // (the head file, whose garbage is not counted yet) has live bytes left.
            // (Sealed files end at their sync mark; the head's length on disk may include
            // the mapped head's reserve, so it is not used.)
            let below_head: u64 = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap())
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let n: u64 = name.strip_suffix(".vlog")?.parse().ok()?;
                    (n < s.vlog_head_file).then(|| e.metadata().unwrap().len())
                })
                .sum();
            assert_eq!(s.vlog_garbage_bytes, below_head, "{s:?}");
        }
        let files_before = s.vlog_files;
        db.gc().unwrap();
        let s = db.stats();
        if sep == usize::MAX {
            // Nothing in the tree points into the log any more: every sealed file goes.
            assert_eq!(s.vlog_files, 1, "only the head is left: {s:?}");
        } else {
            assert!(s.vlog_files <= files_before, "{s:?}");
        }
        assert_reads(&db, &want, "after GC");
        db.close().unwrap();
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        assert_reads(&db, &want, "after reopen");
        db.close().unwrap();
        if sep == usize::MAX {
            // No tier table and no pointer left: the database opens without the tier.
            let plain = Options {
                l0_tier_dir: None,
                ..opts
            };
            let db = Db::open(dir.path(), plain.clone()).unwrap();
            assert_reads(&db, &want, "without the tier");
            db.close().unwrap();
            let report = Db::check(dir.path(), plain).unwrap();
            assert!(report.is_ok(), "{report}");
        }
    }
}

#[test]
fn a_flipped_byte_in_a_tier_table_is_reported_never_returned() {
    let dir = tempfile::tempdir().unwrap();
    let tier = common::tier_tempdir();
    let want = one_flushed_table(dir.path(), tier.path(), 400);
    let files = tier_files(tier.path());
    assert_eq!(files.len(), 1, "one flushed table");
    let clean = std::fs::read(&files[0]).unwrap();
    // Flip bytes across the entry blocks (the super block, meta and index are checked at
    // open, covered by the table's own tests). Recovery maps every tier table and checks
    // every block: the open reports it, and `check` too.
    let mut reported = 0;
    for at in (100..clean.len() / 2).step_by(clean.len() / 40) {
        let mut bad = clean.clone();
        bad[at] ^= 0x20;
        std::fs::write(&files[0], &bad).unwrap();
        match Db::open(dir.path(), tier_opts(tier.path())) {
            Ok(db) => {
                // Only a flip the format tolerates could open: then no read may differ.
                for (k, v) in &want {
                    match db.get(k) {
                        Ok(got) => assert_eq!(got.as_ref(), Some(v), "byte {at}: wrong data"),
                        Err(e) => assert!(e.is_corruption(), "byte {at}: {e}"),
                    }
                }
                panic!("byte {at}: a flipped byte in an entry block was not noticed at open");
            }
            Err(e) => assert!(e.is_corruption(), "byte {at}: open: {e}"),
        }
        let report = Db::check(dir.path(), tier_opts(tier.path())).unwrap();
        assert!(!report.is_ok(), "byte {at}: check found nothing");
        reported += 1;
    }
    assert!(reported >= 10);
    std::fs::write(&files[0], &clean).unwrap();
    let db = Db::open(dir.path(), tier_opts(tier.path())).unwrap();
    assert_reads(&db, &want, "restored");
}

fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "vlog"))
        .collect();
    v.sort();
    v
}

/// Flips every `step`-th byte of `path` from `from` on, in place (as a device returning other
/// bytes would show them); the file's bytes before.
fn damage_in_place(path: &Path, from: usize, step: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let clean = std::fs::read(path).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    for at in (from..clean.len()).step_by(step) {
        f.write_at(&[clean[at] ^ 0x04], at as u64).unwrap();
    }
    clean
}

/// A value read (and verified) once, then damaged on disk: the tier's table is a private
/// copy verified at open, and the log's value either comes from the verified-value cache
/// (a private copy) or is checked again; either way a read returns the right value or
/// reports corruption, never the damaged bytes. After a restart the damage is reported.
#[test]
fn bytes_damaged_on_disk_after_a_read_are_reported_never_returned() {
    for cache in [Some(64 << 20), Some(0)] {
        let dir = tempfile::tempdir().unwrap();
        let tier = common::tier_tempdir();
        let want = one_flushed_table(dir.path(), tier.path(), 400);
        let opts = Options {
            vlog_value_cache_bytes: cache,
            ..tier_opts(tier.path())
        };
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        // Keys of even index are read twice (the cache admits on the second read).
        let read_before: Vec<&Vec<u8>> = want.keys().step_by(2).collect();
        for k in &read_before {
            for _ in 0..2 {
                assert_eq!(db.get(k).unwrap().as_ref(), want.get(*k));
            }
        }
        let table = tier_files(tier.path()).remove(0);
        let clean_table = damage_in_place(&table, 100, 13);
        let logs = log_files(dir.path());
        let clean_logs: Vec<Vec<u8>> = logs.iter().map(|l| damage_in_place(l, 64, 29)).collect();
        let (mut right, mut reported) = (0, 0);
        for (k, v) in &want {
            match db.get(k) {
                Ok(got) => {
                    assert_eq!(got.as_ref(), Some(v), "{cache:?}: damaged bytes returned");
                    right += 1;
                }
                Err(e) => {
                    assert!(e.is_corruption(), "{cache:?}: {e}");
                    reported += 1;
                }
            }
        }
        assert!(reported > 0, "{cache:?}: the damage reached no read");
        if cache != Some(0) {
            // Every pointer read before was answered from its verified copy.
            let s = db.stats();
            assert!(s.vlog_value_cache_hits > 0, "{s:?}");
            for k in &read_before {
                assert_eq!(
                    db.get(k).unwrap().as_ref(),
                    want.get(*k),
                    "cached, then damaged"
                );
            }
        } else {
            assert!(right > 0);
        }
        drop(db);
        // A restart reads the damaged table from the device: refused as corruption.
        let e = Db::open(dir.path(), opts.clone())
            .err()
            .expect("damaged table opened");
        assert!(e.is_corruption(), "{e}");
        // With the table restored, the damaged log values are reported at their reads.
        std::fs::write(&table, &clean_table).unwrap();
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let mut reported_after = 0;
        for (k, v) in &want {
            match db.get(k) {
                Ok(got) => assert_eq!(got.as_ref(), Some(v), "{cache:?}: after restart"),
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    reported_after += 1;
                }
            }
        }
        assert!(reported_after > 0);
        drop(db);
        for (l, clean) in logs.iter().zip(clean_logs) {
            std::fs::write(l, clean).unwrap();
        }
        let db = Db::open(dir.path(), opts).unwrap();
        assert_reads(&db, &want, "restored");
    }
}

#[test]
fn torn_unreferenced_tables_are_dropped_and_referenced_missing_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tier = common::tier_tempdir();
    let want = one_flushed_table(dir.path(), tier.path(), 300);
    // A flush cut short by a crash: its table has no super block and no MANIFEST edit.
    let torn = tier.path().join("999999.l0t");
    std::fs::write(&torn, vec![0u8; 4096]).unwrap();
    {
        let db = Db::open(dir.path(), tier_opts(tier.path())).unwrap();
        assert!(!torn.exists(), "an unreferenced table is deleted at open");
        assert_reads(&db, &want, "after dropping a torn table");
        db.close().unwrap();
    }
    // A table the MANIFEST references is gone: corruption, not silence.
    let files = tier_files(tier.path());
    let saved = std::fs::read(&files[0]).unwrap();
    std::fs::remove_file(&files[0]).unwrap();
    let e = Db::open(dir.path(), tier_opts(tier.path()))
        .err()
        .expect("refused");
    assert!(
        e.is_corruption() && e.to_string().contains("missing"),
        "{e}"
    );
    // Torn (zero super block) instead of gone: corruption too.
    std::fs::write(&files[0], vec![0u8; saved.len()]).unwrap();
    let e = Db::open(dir.path(), tier_opts(tier.path()))
        .and_then(|db| db.get(&key(1)).map(|_| db))
        .err()
        .expect("a torn referenced table is refused");
    assert!(e.is_corruption(), "{e}");
    std::fs::write(&files[0], &saved).unwrap();
    let db = Db::open(dir.path(), tier_opts(tier.path())).unwrap();
    assert_reads(&db, &want, "restored");
}

#[test]
fn opening_without_the_tier_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let tier = common::tier_tempdir();
    {
        let db = Db::open(dir.path(), tier_opts(tier.path())).unwrap();
        db.put(b"k", b"v").unwrap();
        db.flush().unwrap();
        db.close().unwrap();
    }
    let e = Db::open(dir.path(), Options::default())
        .err()
        .expect("refused");
    assert!(
        matches!(e, strata_engine::Error::InvalidArgument(_))
            && e.to_string().contains("l0_tier_dir"),
        "{e}"
    );
    // One database per tier directory.
    let db = Db::open(dir.path(), tier_opts(tier.path())).unwrap();
    let other = tempfile::tempdir().unwrap();
    let e = Db::open(other.path(), tier_opts(tier.path()))
        .err()
        .expect("locked");
    assert!(
        e.to_string().contains("L0TIER.LOCK") || e.to_string().contains("lock"),
        "{e}"
    );
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}
