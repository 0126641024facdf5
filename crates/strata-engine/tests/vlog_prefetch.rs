//! The range prefetch of separated values (`Options::vlog_prefetch`,
//! `Options::vlog_prefetch_background`) on a real directory: iterators return exactly what
//! they return without prefetch over random ranges and random moves (a model: the
//! no-prefetch iterator), a damaged value is an error at its own entry and never data, and
//! no prefetched read runs after the iterator is dropped.

use rand::{Rng, SeedableRng};
use std::path::Path;
use strata_engine::{Db, DbIterator, Options, ReadOptions};

fn opts(prefetch: usize, background: bool, mmap: bool) -> Options {
    Options {
        sep_threshold_bytes: 64,
        // Small files: values spread over many sealed files and the head.
        vlog_file_bytes: 64 << 10,
        write_buffer_bytes: 128 << 10,
        gc_interval_ms: 0,
        vlog_prefetch: prefetch,
        vlog_prefetch_background: background,
        vlog_mmap: mmap,
        ..Options::default()
    }
}

/// The prefetch settings compared, the first being the model (no prefetch).
fn variants() -> Vec<(&'static str, Options)> {
    vec![
        ("none", opts(0, false, true)),
        ("sync-32", opts(32, false, true)),
        ("background-32", opts(32, true, true)),
        ("background-3", opts(3, true, true)),
        ("background-32-pread", opts(32, true, false)),
    ]
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// Random puts (a third below the separation threshold), overwrites and deletes, part of it
/// flushed and compacted, part left in the memtable.
fn load(dir: &Path, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let db = Db::open(dir, opts(0, false, true)).unwrap();
    for round in 0..3 {
        for _ in 0..1500 {
            let k = key(rng.gen_range(0..2000));
            if rng.gen_ratio(1, 8) {
                db.delete(&k).unwrap();
                continue;
            }
            let len = if rng.gen_ratio(1, 3) {
                rng.gen_range(0..64)
            } else {
                rng.gen_range(64..700)
            };
            let v: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            db.put(&k, &v).unwrap();
        }
        if round == 0 {
            db.compact_range(None, None).unwrap();
        } else if round == 1 {
            db.flush().unwrap();
        }
    }
    // The last round is not flushed explicitly.
    db.close().unwrap();
}

/// One step of a trace: the entry an iterator is at, or how it ended.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    At(Vec<u8>, Option<Vec<u8>>),
    End(Option<String>),
}

fn at(it: &DbIterator, read_value: bool) -> Step {
    if !it.valid() {
        return Step::End(it.status().err().map(|e| e.to_string()));
    }
    let k = it.key().to_vec();
    if !read_value {
        return Step::At(k, None);
    }
    match it.try_value() {
        Ok(v) => Step::At(k, Some(v.to_vec())),
        Err(e) => Step::End(Some(format!("at {}: {e}", String::from_utf8_lossy(&k)))),
    }
}

/// A scripted walk: random seeks, runs of `next` reading values (so that prefetch starts),
/// some positions whose value is not read, a few `prev`s.
fn walk(db: &Db, seed: u64) -> Vec<Step> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut trace = Vec::new();
    for _ in 0..20 {
        let mut it = db.iter(&ReadOptions::default()).unwrap();
        if rng.gen_ratio(1, 5) {
            it.seek_to_first();
        } else {
            it.seek(&key(rng.gen_range(0..2100)));
        }
        for _ in 0..rng.gen_range(0..250) {
            let read = !rng.gen_ratio(1, 10);
            let s = at(&it, read);
            let end = matches!(s, Step::End(_));
            trace.push(s);
            if end {
                break;
            }
            if rng.gen_ratio(1, 40) {
                it.prev();
            } else {
                it.next();
            }
        }
        if rng.gen_ratio(1, 3) {
            // Some walks stop mid-batch: the iterator is dropped with a batch in flight.
            drop(it);
        }
    }
    trace
}

#[test]
fn prefetch_returns_what_the_model_returns() {
    let dir = tempfile::tempdir().unwrap();
    load(dir.path(), 7);
    let mut traces = Vec::new();
    for (name, o) in variants() {
        let db = Db::open(dir.path(), o).unwrap();
        let trace: Vec<Step> = (0..4).flat_map(|s| walk(&db, 100 + s)).collect();
        traces.push((name, trace));
        db.close().unwrap();
    }
    let (_, model) = &traces[0];
    let read = model
        .iter()
        .filter(|s| matches!(s, Step::At(_, Some(_))))
        .count();
    assert!(read > 2000, "the walks read values: {read}");
    for (name, t) in &traces[1..] {
        assert_eq!(t.len(), model.len(), "{name}: trace length");
        for (i, (a, b)) in t.iter().zip(model).enumerate() {
            assert_eq!(a, b, "{name}: step {i} differs from the model");
        }
    }
}

/// Full forward scans reading every value, until the end or the first error.
fn scan(db: &Db) -> Vec<Step> {
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut trace = Vec::new();
    loop {
        let s = at(&it, true);
        let end = matches!(s, Step::End(_));
        trace.push(s);
        if end {
            return trace;
        }
        it.next();
    }
}

#[test]
fn a_damaged_value_is_an_error_at_its_entry_with_and_without_prefetch() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts(0, false, true)).unwrap();
        for i in 0..1000 {
            db.put(&key(i), &vec![b'a' + (i % 26) as u8; 1500]).unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    // Damage one byte in the middle of a sealed value-log file: inside a value.
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "vlog"))
        .collect();
    files.sort();
    let victim = &files[files.len() / 2];
    let mut bytes = std::fs::read(victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(victim, &bytes).unwrap();

    let mut traces = Vec::new();
    for (name, o) in variants() {
        let db = Db::open(dir.path(), o).unwrap();
        traces.push((name, scan(&db)));
        db.close().unwrap();
    }
    let (_, model) = &traces[0];
    match model.last() {
        Some(Step::End(Some(e))) => assert!(e.contains("at k"), "an entry's error: {e}"),
        other => panic!("the damage was not found: {other:?}"),
    }
    assert!(model.len() > 100, "the error is not at the first entry");
    for (name, t) in &traces[1..] {
        assert_eq!(t, model, "{name}: the same entries, then the same error");
    }
}

#[test]
fn no_prefetched_read_runs_after_the_iterator_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts(0, false, true)).unwrap();
        for i in 0..2000 {
            db.put(&key(i), &[b'v'; 400]).unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    // Reopened: every value is in a sealed, mapped file, so each value read counts.
    let db = Db::open(dir.path(), opts(32, true, true)).unwrap();
    for start in [0u32, 500, 1000, 1500] {
        let before = db.stats().vlog_mapped_reads;
        let mut it = db.iter(&ReadOptions::default()).unwrap();
        it.seek(&key(start));
        for _ in 0..3 {
            assert_eq!(it.value().len(), 400);
            it.next();
        }
        drop(it);
        let after_drop = db.stats().vlog_mapped_reads;
        // 2 values read one by one, then a batch read for the scan, and at most the batch
        // ahead of it (read, or cancelled before it started).
        assert!(
            after_drop - before <= 2 + 2 * 32,
            "{before} -> {after_drop}"
        );
        assert!(
            after_drop - before >= 2 + 32,
            "the first batch was read: {before} -> {after_drop}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(
            db.stats().vlog_mapped_reads,
            after_drop,
            "a read after the drop (start {start})"
        );
    }
    db.close().unwrap();
}

/// Forward scans from random places over a live database (values in sealed, mapped files,
/// in the head file, and in its buffer; overwrites and deletes in the memtable and in
/// tables) return exactly the model's keys and values, with every prefetch setting. The
/// model is a `BTreeMap` of what was written, not another iterator.
#[test]
fn scans_return_exactly_the_models_values() {
    use std::collections::BTreeMap;
    for (name, o) in variants() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(21);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let db = Db::open(dir.path(), o).unwrap();
        for round in 0..4 {
            for _ in 0..1200 {
                let k = key(rng.gen_range(0..1500));
                if rng.gen_ratio(1, 10) {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                    continue;
                }
                // Mostly separated values (at least 64 bytes), some inline.
                let len = if rng.gen_ratio(1, 5) {
                    rng.gen_range(0..64)
                } else {
                    rng.gen_range(64..1500)
                };
                let v: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            if round == 1 {
                db.flush().unwrap();
            }
            // Scans after every round: the newest values are in the head file.
            for _ in 0..15 {
                let start = key(rng.gen_range(0..1600));
                let n = rng.gen_range(1..300);
                let mut it = db.iter(&ReadOptions::default()).unwrap();
                it.seek(&start);
                let want: Vec<_> = model.range(start.clone()..).take(n).collect();
                for (i, (k, v)) in want.iter().enumerate() {
                    assert!(it.valid(), "{name}: scan from {start:?} ended at {i}");
                    assert_eq!(it.key(), k.as_slice(), "{name}: key {i} from {start:?}");
                    assert_eq!(
                        it.try_value().unwrap(),
                        v.as_slice(),
                        "{name}: value of {k:?}"
                    );
                    it.next();
                }
                if want.len() < n {
                    assert!(!it.valid(), "{name}: a key past the model's last");
                }
                it.status().unwrap();
            }
        }
        db.close().unwrap();
    }
}

/// A value byte damaged on disk while the database is open, after a scan has mapped and
/// read the file: the next scan over it reports corruption at that entry and never returns
/// the damaged bytes (the mapping shows the page cache, which the damage changed; only a
/// copy verified after it was taken may be returned), and healthy entries around it are
/// returned intact.
#[test]
fn a_value_damaged_under_an_open_database_is_reported_by_the_next_scan() {
    use std::os::unix::fs::FileExt;
    for (name, o) in variants() {
        let dir = tempfile::tempdir().unwrap();
        let value = |i: u32| vec![b'a' + (i % 26) as u8; 900];
        {
            let db = Db::open(dir.path(), opts(0, false, true)).unwrap();
            for i in 0..600 {
                db.put(&key(i), &value(i)).unwrap();
            }
            db.close().unwrap();
        }
        // Reopened: the values are in sealed files.
        let db = Db::open(dir.path(), o).unwrap();
        let full = scan(&db);
        assert_eq!(full.len(), 601, "{name}: every entry, then the end");
        assert_eq!(full.last(), Some(&Step::End(None)));
        // Damage the value of one key in the middle: find its entry by its bytes.
        let victim = 300u32;
        let mut files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "vlog"))
            .collect();
        files.sort();
        let needle: Vec<u8> = [key(victim), value(victim)].concat();
        let (path, at) = files
            .iter()
            .find_map(|p| {
                let bytes = std::fs::read(p).unwrap();
                let at = bytes.windows(needle.len()).position(|w| w == needle)?;
                Some((p.clone(), at + key(victim).len() + 450))
            })
            .expect("the victim's entry is in a log file");
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(b"Z", at as u64).unwrap();
        drop(f);

        let trace = scan(&db);
        match trace.last() {
            Some(Step::End(Some(e))) => assert!(
                e.contains(&format!("at {}", String::from_utf8_lossy(&key(victim))))
                    && e.contains("checksum"),
                "{name}: the victim's corruption: {e}"
            ),
            other => panic!("{name}: the damage was not reported: {other:?}"),
        }
        assert_eq!(
            trace.len(),
            victim as usize + 1,
            "{name}: stopped at the victim"
        );
        for (i, s) in trace[..victim as usize].iter().enumerate() {
            assert_eq!(
                s,
                &Step::At(key(i as u32), Some(value(i as u32))),
                "{name}: entry {i}"
            );
        }
        // Point reads agree: corruption, not data.
        let err = db.get(&key(victim)).unwrap_err();
        assert!(err.is_corruption(), "{name}: {err}");
        db.close().unwrap();
    }
}
