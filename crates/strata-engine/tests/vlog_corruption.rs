//! Byte flips in value-log files: every read gives the right value or `Corruption`, never a
//! wrong value or a false not-found; GC refuses to collect a damaged file rather than drop
//! what it holds.
//!
//! Sealed files (below the durable head): every byte of the first file and a stride of the
//! others is flipped in turn; each trial opens the database and reads every key through
//! get, multi_get and an iterator, then runs GC and reads again. Replayed files (after the
//! durable head): a flip either fails the open with `Corruption` or is a dropped torn tail;
//! values that are returned are right.
//!
//! `cargo test -p strata-engine --test vlog_corruption`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_engine::io::{Fs, MemFs};
use strata_engine::{Db, Error, Options, ReadOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        write_buffer_bytes: 8 << 10,
        sep_threshold_bytes: 32,
        vlog_file_bytes: 2 << 10,
        vlog_buffer_bytes: 512,
        gc_interval_ms: 0,
        background_threads: 1,
        vlog_prefetch: 3,
        ..Options::default()
    }
}

fn load(fs: &MemFs) -> Map {
    let db = Db::open("/db", options(fs)).unwrap();
    let mut m = Map::new();
    for round in 0..2u32 {
        for i in 0..40u32 {
            let k = format!("key{i:03}").into_bytes();
            let v = format!("{round}-{i}-{}", "v".repeat((i as usize * 13) % 200)).into_bytes();
            db.put(&k, &v).unwrap();
            m.insert(k, v);
        }
    }
    db.close().unwrap();
    // Reopening flushes what the log held: every value-log file is below the durable head.
    Db::open("/db", options(fs)).unwrap().close().unwrap();
    m
}

fn vlog_files(fs: &MemFs) -> Vec<(PathBuf, u64)> {
    fs.dump()
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "vlog"))
        .collect()
}

fn right_or_corruption(
    ctx: &str,
    k: &[u8],
    want: Option<&Vec<u8>>,
    got: Result<Option<Vec<u8>>, Error>,
) {
    match got {
        Ok(v) => assert_eq!(v.as_ref(), want, "{ctx}: wrong value for {k:?}"),
        Err(e) => assert!(e.is_corruption(), "{ctx}: {k:?}: not corruption: {e}"),
    }
}

/// Reads every key three ways; returns how many reads reported corruption.
fn read_all(db: &Db, m: &Map, ctx: &str) -> usize {
    let mut bad = 0;
    for (k, v) in m {
        let r = db.get(k);
        bad += r.is_err() as usize;
        right_or_corruption(ctx, k, Some(v), r);
    }
    let keys: Vec<&[u8]> = m.keys().map(|k| k.as_slice()).collect();
    for (k, r) in keys
        .iter()
        .zip(db.multi_get(&ReadOptions::default(), &keys))
    {
        right_or_corruption(ctx, k, m.get(*k), r);
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut seen = 0;
    while it.valid() {
        let k = it.key().to_vec();
        match it.try_value() {
            Ok(v) => assert_eq!(
                Some(&v.to_vec()),
                m.get(&k),
                "{ctx}: iterator value of {k:?}"
            ),
            Err(e) => {
                assert!(e.is_corruption(), "{ctx}: {e}");
                break;
            }
        }
        seen += 1;
        it.next();
    }
    if it.status().is_ok() {
        assert_eq!(seen, m.len(), "{ctx}: iterator lost keys without an error");
    } else {
        assert!(it.status().unwrap_err().is_corruption(), "{ctx}");
    }
    bad
}

/// A copy of every file of `fs`, all durable.
fn copy_fs(fs: &MemFs) -> MemFs {
    let copy = MemFs::new();
    let c: &dyn Fs = &copy;
    for (p, _) in fs.dump() {
        let data = Fs::read_all(fs, &p).unwrap();
        c.create_dir_all(p.parent().unwrap()).unwrap();
        c.write_all_synced(&p, &data).unwrap();
    }
    c.sync_dir(Path::new("/db")).unwrap();
    copy
}

#[test]
fn flips_in_sealed_files_are_detected() {
    let fs = MemFs::new();
    let m = load(&fs);
    let files = vlog_files(&fs);
    assert!(files.len() >= 4, "{files:?}");
    let mut trials = 0;
    let mut detected = 0;
    let mut gc_refused = 0;
    for (fi, (path, size)) in files.iter().enumerate() {
        let stride = if fi == 0 { 2 } else { 17 };
        for off in (0..*size).step_by(stride) {
            let fs = copy_fs(&fs);
            fs.corrupt_byte(path, off, 1u8 << (off % 8)).unwrap();
            let ctx = format!("{} byte {off}", path.display());
            let db = match Db::open("/db", options(&fs)) {
                Ok(db) => db,
                // The file header of a file recovery replays from (its format version says
                // how to read the frames): damage there fails the open, as it should.
                Err(e) if e.is_corruption() && off < 16 => {
                    trials += 1;
                    detected += 1;
                    continue;
                }
                Err(e) => panic!("{ctx}: open: {e}"),
            };
            // A flip in the head file's last frame (the sync mark a clean close wrote, which
            // holds no value) is an unsynced tail to recovery: dropped and reported.
            let dropped_as_tail = db
                .recovery_info()
                .logs
                .iter()
                .any(|l| l.path == *path && l.tail.as_ref().is_some_and(|(at, _)| *at <= off));
            detected += (read_all(&db, &m, &ctx) > 0) as usize;
            match db.gc_opt(0.0) {
                Ok(_) => {}
                Err(e) => {
                    assert!(e.is_corruption(), "{ctx}: gc: {e}");
                    gc_refused += 1;
                }
            }
            read_all(&db, &m, &format!("{ctx} after GC"));
            db.close().unwrap();
            let report = Db::check("/db", options(&fs)).unwrap();
            assert!(
                dropped_as_tail || !report.is_ok(),
                "{ctx}: check missed the flip\n{report}"
            );
            trials += 1;
        }
    }
    println!("{trials} flips: {detected} detected by reads, {gc_refused} refused by GC");
    // Many flips hit overwritten values, frame headers or small-value log records, which no
    // read touches; the ones in live values must all be caught (checked above).
    assert!(
        trials > 500 && detected > trials / 10,
        "{trials} {detected}"
    );
    assert!(gc_refused > trials / 2, "{trials} {gc_refused}");
}

#[test]
fn flips_in_replayed_files_fail_open_or_are_a_torn_tail() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let mut m = Map::new();
    for i in 0..30u32 {
        let k = format!("key{i:03}").into_bytes();
        let v = format!("{i}-{}", "r".repeat(50 + i as usize)).into_bytes();
        db.put(&k, &v).unwrap();
        m.insert(k, v);
    }
    // Close syncs the log without flushing: the next open replays it.
    db.close().unwrap();
    let head: &Path = &vlog_files(&fs).last().unwrap().0.clone();
    let size = fs.dump().iter().find(|(p, _)| p == head).unwrap().1;
    let mut failed = 0;
    for off in (16..size).step_by(3) {
        // Work on a copy: the open below flushes and moves the head.
        let copy = copy_fs(&fs);
        copy.corrupt_byte(head, off, 0x20).unwrap();
        let ctx = format!("replayed byte {off}");
        match Db::open("/db", options(&copy)) {
            Err(e) => {
                assert!(e.is_corruption(), "{ctx}: {e}");
                failed += 1;
            }
            Ok(db) => {
                assert!(
                    db.recovery_info().truncated_tail.is_some(),
                    "{ctx}: flip unnoticed"
                );
                for (k, v) in &m {
                    if let Some(got) = db.get(k).unwrap() {
                        assert_eq!(&got, v, "{ctx}: wrong value");
                    }
                }
            }
        }
    }
    assert!(failed > 0);
}
