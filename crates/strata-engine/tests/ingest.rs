//! Ingestion (`src/ingest.rs`): sorted runs written as tables and installed in one edit.
//! Nothing is visible before `finish`; after it everything is, durably (crash and reopen);
//! later runs and later writes shadow earlier ones; tables go to the deepest level their
//! range allows; bad input, a damaged table and a write into the range are refused with
//! nothing installed and nothing left behind.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use strata_engine::io::{Fs, MemFs};
use strata_engine::{Db, Error, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Run entries for keys `range` with values of `tag`, as owned pairs.
fn run(range: std::ops::Range<u32>, tag: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    range.map(|i| (key(i), value(&key(i), tag, 40))).collect()
}

fn add(ing: &mut strata_engine::Ingest<'_>, r: &[(Vec<u8>, Vec<u8>)]) {
    ing.add_run(r.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
        .unwrap();
}

fn model_of(runs: &[&[(Vec<u8>, Vec<u8>)]]) -> Model {
    let mut m = Model::new();
    for r in runs {
        m.extend(r.iter().cloned());
    }
    m
}

fn assert_db(db: &Db, want: &Model, what: &str) {
    let got = scan_all(db).unwrap();
    assert!(got == *want, "{what}: {}", diff(&got, want));
    for (k, v) in want {
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            Some(v),
            "{what}: get {}",
            show(k)
        );
    }
}

/// Table files in the live view of the database directory.
fn tables(mem: &MemFs) -> Vec<PathBuf> {
    mem.dump()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| {
            p.parent() == Some(mem_dir().as_path()) && p.extension().is_some_and(|e| e == "sst")
        })
        .collect()
}

#[test]
fn runs_are_invisible_until_finish_then_visible_and_durable() {
    for engine in Engine::ALL {
        let mem = MemFs::new();
        let opts = engine.options(mem_opts(&mem));
        let db = Db::open(mem_dir(), opts.clone()).unwrap();
        let mut want = Model::new();
        // Synced: the crash below must keep it.
        let synced = WriteOptions {
            sync: true,
            ..WriteOptions::default()
        };
        db.put_opt(&synced, b"a-outside", b"1").unwrap();
        want.insert(b"a-outside".to_vec(), b"1".to_vec());
        let r1 = run(0..300, 1);
        let mut ing = db.ingest();
        add(&mut ing, &r1);
        // Written, not installed: not readable, not in a scan.
        assert_eq!(db.get(&key(7)).unwrap(), None, "{engine:?}");
        assert_db(&db, &want, "before finish");
        let s = ing.finish().unwrap();
        assert_eq!(s.entries, 300, "{engine:?}");
        assert!(!s.tables.is_empty());
        want.extend(r1);
        assert_db(&db, &want, "after finish");
        // Durable without a close: a power loss keeps it.
        mem.crash(false);
        drop(db);
        let db = Db::open(mem_dir(), opts.clone()).unwrap();
        assert_db(&db, &want, "after a crash");
        db.compact_range(None, None).unwrap();
        assert_db(&db, &want, "after compaction");
        db.close().unwrap();
        let db = Db::open(mem_dir(), opts).unwrap();
        assert_db(&db, &want, "after reopen");
    }
}

#[test]
fn a_crash_before_finish_leaves_nothing() {
    let (mem, db) = mem_db();
    db.put(b"a-outside", b"1").unwrap();
    db.flush().unwrap();
    let before = tables(&mem).len();
    let mut ing = db.ingest();
    add(&mut ing, &run(0..500, 1));
    assert!(tables(&mem).len() > before, "the run wrote no table");
    mem.crash(false);
    drop(ing);
    drop(db);
    let db = Db::open(mem_dir(), mem_opts(&mem)).unwrap();
    let want = Model::from([(b"a-outside".to_vec(), b"1".to_vec())]);
    assert_db(&db, &want, "after the crash");
    // The run's tables were unreferenced: the open deleted them.
    assert_eq!(tables(&mem).len(), live_tables(&db));
}

#[test]
fn later_runs_and_later_writes_shadow_earlier_ones() {
    for engine in Engine::ALL {
        let mem = MemFs::new();
        let opts = engine.options(mem_opts(&mem));
        let db = Db::open(mem_dir(), opts.clone()).unwrap();
        // Older data of the range: in a table (flushed) and in the memtable.
        db.put(&key(1), b"old-in-a-table").unwrap();
        db.put(&key(2), b"deleted").unwrap();
        db.delete(&key(2)).unwrap();
        db.put(&key(40), b"old-outside-the-runs").unwrap();
        db.flush().unwrap();
        db.put(&key(3), b"old-in-the-memtable").unwrap();
        db.delete(&key(4)).unwrap();
        let r1 = run(0..20, 1);
        let r2 = run(10..30, 2);
        let mut ing = db.ingest();
        add(&mut ing, &r1);
        add(&mut ing, &r2);
        ing.finish().unwrap();
        let mut want = model_of(&[&r1, &r2]);
        want.insert(key(40), b"old-outside-the-runs".to_vec());
        assert_db(&db, &want, &format!("{engine:?} after finish"));
        // A write after the ingestion shadows it.
        db.put(&key(15), b"newer").unwrap();
        db.delete(&key(16)).unwrap();
        want.insert(key(15), b"newer".to_vec());
        want.remove(&key(16));
        assert_db(&db, &want, &format!("{engine:?} after later writes"));
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert_db(&db, &want, &format!("{engine:?} after compaction"));
        db.close().unwrap();
        let db = Db::open(mem_dir(), opts).unwrap();
        assert_db(&db, &want, &format!("{engine:?} after reopen"));
    }
}

#[test]
fn runs_go_to_the_deepest_level_their_range_allows() {
    let (mem, db) = mem_db();
    let last = mem_opts(&mem).num_levels as u32 - 1;
    let mut ing = db.ingest();
    add(&mut ing, &run(0..100, 1));
    add(&mut ing, &run(50..150, 2));
    add(&mut ing, &run(1000..1100, 3));
    let s = ing.finish().unwrap();
    let mut by_level: BTreeMap<u32, usize> = BTreeMap::new();
    for (l, _) in &s.tables {
        *by_level.entry(*l).or_default() += 1;
    }
    // The first run and the disjoint third share the last level; the second overlaps the
    // first, so it sits one level above.
    assert!(by_level.contains_key(&last), "{:?}", s.tables);
    assert!(by_level.contains_key(&(last - 1)), "{:?}", s.tables);
    assert_eq!(by_level.len(), 2, "{:?}", s.tables);
    assert_db(
        &db,
        &model_of(&[&run(0..100, 1), &run(50..150, 2), &run(1000..1100, 3)]),
        "placed",
    );
    // A table of the range in L0 puts the next run in L0, above it.
    db.put(&key(60), b"in-l0").unwrap();
    db.flush().unwrap();
    let l0_before = db.stats().levels[0].0;
    assert!(l0_before >= 1);
    let mut ing = db.ingest();
    add(&mut ing, &run(55..65, 4));
    let s = ing.finish().unwrap();
    assert!(s.tables.iter().all(|(l, _)| *l == 0), "{:?}", s.tables);
    assert_eq!(
        db.get(&key(60)).unwrap(),
        Some(value(&key(60), 4, 40)),
        "the ingested L0 table must be read before the older L0 table"
    );
    drop(db);
    let db = Db::open(mem_dir(), mem_opts(&mem)).unwrap();
    assert_eq!(db.get(&key(60)).unwrap(), Some(value(&key(60), 4, 40)));
}

#[test]
fn keys_out_of_order_or_repeated_are_refused_and_leave_nothing() {
    let (mem, db) = mem_db();
    for bad in [
        vec![(key(2), b"x".to_vec()), (key(1), b"y".to_vec())],
        vec![(key(1), b"x".to_vec()), (key(1), b"y".to_vec())],
    ] {
        let mut ing = db.ingest();
        add(&mut ing, &run(100..200, 1));
        let e = ing
            .add_run(bad.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        // The ingestion is spoiled: finish refuses, and installs nothing.
        assert!(matches!(ing.finish(), Err(Error::InvalidArgument(_))));
        assert_eq!(db.get(&key(150)).unwrap(), None);
        assert_eq!(tables(&mem).len(), live_tables(&db), "tables left behind");
    }
}

#[test]
fn a_write_into_the_range_during_the_ingestion_is_refused() {
    let (mem, db) = mem_db();
    let mut ing = db.ingest();
    add(&mut ing, &run(0..100, 1));
    db.put(&key(50), b"meanwhile").unwrap();
    let e = ing.finish().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(db.get(&key(49)).unwrap(), None);
    assert_eq!(
        db.get(&key(50)).unwrap().as_deref(),
        Some(&b"meanwhile"[..])
    );
    assert_eq!(tables(&mem).len(), live_tables(&db), "tables left behind");
    // A write outside the range is none of the ingestion's business.
    let mut ing = db.ingest();
    add(&mut ing, &run(0..100, 2));
    db.put(&key(500), b"elsewhere").unwrap();
    ing.finish().unwrap();
    assert_eq!(db.get(&key(49)).unwrap(), Some(value(&key(49), 2, 40)));
}

#[test]
fn a_damaged_table_is_refused_at_finish() {
    let (mem, db) = mem_db();
    let before = tables(&mem);
    let mut ing = db.ingest();
    add(&mut ing, &run(0..300, 1));
    let new: Vec<PathBuf> = tables(&mem)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(!new.is_empty());
    // A bit of the last table's footer (its last bytes: checksummed).
    let path = new.last().unwrap();
    let len = mem.read_all(path).unwrap().len() as u64;
    mem.corrupt_byte(path, len - 3, 0x40).unwrap();
    let e = ing.finish().unwrap_err();
    assert!(matches!(e, Error::Corruption { .. }), "{e}");
    assert_eq!(db.get(&key(1)).unwrap(), None);
    assert_eq!(tables(&mem).len(), live_tables(&db), "tables left behind");
}

#[test]
fn a_table_spanning_the_range_without_its_keys_does_not_stop_the_descent() {
    let (mem, db) = mem_db();
    let last = mem_opts(&mem).num_levels as u32 - 1;
    // One L0 table whose range covers every `key-...` key, holding none of them.
    db.put(b"a-below-the-runs", b"1").unwrap();
    db.put(b"z-above-the-runs", b"2").unwrap();
    db.flush().unwrap();
    assert_eq!(db.stats().levels[0].0, 1);
    let r = run(0..100, 1);
    let mut ing = db.ingest();
    add(&mut ing, &r);
    let s = ing.finish().unwrap();
    assert!(s.tables.iter().all(|(l, _)| *l == last), "{:?}", s.tables);
    let mut want = model_of(&[&r]);
    want.insert(b"a-below-the-runs".to_vec(), b"1".to_vec());
    want.insert(b"z-above-the-runs".to_vec(), b"2".to_vec());
    assert_db(&db, &want, "after finish");
    db.compact_range(None, None).unwrap();
    assert_db(&db, &want, "after compaction");
}
