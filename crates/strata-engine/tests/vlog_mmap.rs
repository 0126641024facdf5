//! Scans and point reads read sealed value-log files through memory mappings
//! (`Options::vlog_mmap`, on by default) on a real directory: they return what `pread`
//! returns, `multi_get` keeps its batched reads, and a damaged value is reported, never
//! returned.

mod common;

use std::collections::BTreeMap;
use strata_engine::{Db, Options, ReadOptions};

fn opts(mmap: bool) -> Options {
    Options {
        sep_threshold_bytes: 64,
        // Small files: most values end up in sealed (mapped) files.
        vlog_file_bytes: 64 << 10,
        write_buffer_bytes: 256 << 10,
        vlog_mmap: mmap,
        gc_interval_ms: 0,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:08}", (i * 7919) % 5000).into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("{i:06}-{}", "v".repeat(100 + (i % 300) as usize)).into_bytes()
}

fn load(dir: &std::path::Path, mmap: bool) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, opts(mmap)).unwrap();
    let mut want = BTreeMap::new();
    for i in 0..5000 {
        db.put(&key(i), &value(i)).unwrap();
        want.insert(key(i), value(i));
    }
    db.flush().unwrap();
    db.close().unwrap();
    want
}

#[test]
fn mapped_reads_match_and_damage_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let want = load(dir.path(), true);
    for mmap in [true, false] {
        let db = Db::open(dir.path(), opts(mmap)).unwrap();
        assert!(db.stats().vlog_files > 3, "several sealed files");
        let got = common::scan_all(&db).unwrap();
        assert!(got == want, "mmap {mmap}: {}", common::diff(&got, &want));
        let keys: Vec<&[u8]> = want.keys().map(|k| k.as_slice()).collect();
        for (k, r) in keys
            .iter()
            .zip(db.multi_get(&ReadOptions::default(), &keys))
        {
            assert_eq!(r.unwrap().as_deref(), want.get(*k).map(|v| v.as_slice()));
        }
        // The scan maps, `multi_get` does not: most of the scan's 5,000 values are in
        // sealed files.
        let mapped = db.stats().vlog_mapped_reads;
        let gets = want.len().div_ceil(3) as u64;
        for (k, v) in want.iter().step_by(3) {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "mmap {mmap}");
        }
        // Point reads map too.
        let by_gets = db.stats().vlog_mapped_reads - mapped;
        if mmap {
            assert!(
                (2500..=5000).contains(&mapped),
                "values read through mappings: {mapped}"
            );
            assert!(
                (gets / 2..=gets).contains(&by_gets),
                "point reads through mappings: {by_gets} of {gets}"
            );
        } else {
            assert_eq!(mapped + by_gets, 0);
        }
        db.close().unwrap();
    }
    // Flip a byte inside the values of the first (sealed) value-log file.
    let mut vlogs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "vlog"))
        .collect();
    vlogs.sort();
    let mut bytes = std::fs::read(&vlogs[0]).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&vlogs[0], &bytes).unwrap();
    let db = Db::open(dir.path(), opts(true)).unwrap();
    // A scan over the damaged file stops with the error instead of returning the value.
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut seen = 0;
    while it.valid() {
        match it.try_value() {
            Ok(v) => assert_eq!(Some(&v.to_vec()), want.get(it.key()), "a damaged value"),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                break;
            }
        }
        seen += 1;
        it.next();
    }
    assert!(seen < want.len() && it.status().unwrap_err().is_corruption());
    assert!(db.stats().vlog_mapped_reads > 0);
    drop(it);
    let mut errors = 0;
    for (k, v) in &want {
        match db.get(k) {
            Ok(Some(got)) => assert_eq!(&got, v, "a damaged value was returned"),
            Ok(None) => panic!("a key vanished"),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors >= 1, "the flipped byte went unnoticed");
}

/// Copies every file of `from` into `to`: while the database is open and idle, what a crash
/// of the process would leave (the page cache's bytes, synced or not).
fn copy_files(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn vlog_lengths(dir: &std::path::Path) -> BTreeMap<u64, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let n = e.file_name().into_string().ok()?;
            Some((
                n.strip_suffix(".vlog")?.parse().ok()?,
                e.metadata().unwrap().len(),
            ))
        })
        .collect()
}

/// The mapped value-log head (`vlog_head_mmap`, the default) against `write` calls: unsynced
/// writes acknowledged before a crash of the process are all there after it, the head left
/// by the crash ends in its zero-filled reserve (the mapped one) and recovers cleanly, and
/// sealed files end at their sync mark in both modes.
#[test]
fn mapped_head_keeps_unsynced_writes_through_a_process_crash() {
    for head_mmap in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live");
        let o = Options {
            vlog_head_mmap: head_mmap,
            // A memtable that holds everything: no background work while the files are copied.
            write_buffer_bytes: 64 << 20,
            ..opts(true)
        };
        let db = Db::open(&live, o.clone()).unwrap();
        let mut want = BTreeMap::new();
        for i in 0..3000 {
            db.put(&key(i), &value(i)).unwrap();
            want.insert(key(i), value(i));
        }
        let lens = vlog_lengths(&live);
        let newest = *lens.keys().max().unwrap();
        assert!(lens.len() > 3, "rotated several times: {lens:?}");
        for (n, len) in &lens {
            if *n == newest {
                // The head: reserved ahead when mapped.
                assert_eq!(*len >= 4 << 20, head_mmap, "head {n}: {len} bytes");
            } else {
                // Sealed: trimmed to the frames and their sync mark.
                assert!(*len < 4 << 20 && *len >= 64 << 10, "file {n}: {len} bytes");
            }
        }
        let crashed = dir.path().join("crashed");
        copy_files(&live, &crashed);
        drop(db);
        let db = Db::open(&crashed, o).unwrap();
        let got = common::scan_all(&db).unwrap();
        assert!(
            got == want,
            "head_mmap {head_mmap}: {}",
            common::diff(&got, &want)
        );
        let s = db.stats();
        db.put(b"after", b"recovery").unwrap();
        db.close().unwrap();
        // A clean close trims the new head too. The crashed head keeps its reserve, which
        // counts as garbage of that file (GC collects it like any other garbage).
        for (n, len) in vlog_lengths(&crashed) {
            if n != newest {
                assert!(len < 4 << 20, "file {n} after close: {len} bytes");
            }
        }
        if head_mmap {
            assert!(s.vlog_garbage_bytes >= (4 << 20) - (64 << 10), "{s:?}");
        }
    }
}
