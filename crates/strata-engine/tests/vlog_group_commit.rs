//! Unsynced writers grouped behind a leader on the value log (`Options::vlog_group_unsynced`)
//! on a real directory: with the option on and off, through the mapped head and through
//! `write` calls, many threads writing separated and inline values (and deletes, and a few
//! synced puts among them) must leave the same database: every acknowledged write readable
//! at once by its writer, and everything there after a clean close and reopen.

mod common;

use std::collections::BTreeMap;
use strata_engine::{Db, Options, WriteBatch, WriteOptions};

const THREADS: usize = 6;
const PER_THREAD: usize = 600;

fn opts(grouped: bool, mapped: bool) -> Options {
    Options {
        sep_threshold_bytes: 512,
        // Small files and memtables: rotations and switches (exclusive turns) happen while
        // groups are being written.
        vlog_file_bytes: 1 << 20,
        write_buffer_bytes: 256 << 10,
        vlog_group_unsynced: grouped,
        vlog_head_mmap: mapped,
        gc_interval_ms: 0,
        ..Options::default()
    }
}

fn key(t: usize, i: usize) -> Vec<u8> {
    format!("t{t}-{:05}", (i * 37) % 400).into_bytes()
}

/// Separated (4 KiB and 1 KiB) and inline values, each naming its writer and step.
fn value(t: usize, i: usize) -> Vec<u8> {
    let len = [4096, 100, 1024, 700][i % 4];
    let mut v = format!("{t}:{i}:").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// Runs the writers and returns what the database must hold.
fn write_all(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let per_thread: Vec<BTreeMap<Vec<u8>, Option<Vec<u8>>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut want = BTreeMap::new();
                    for i in 0..PER_THREAD {
                        let k = key(t, i);
                        if i % 11 == 10 {
                            db.delete(&k).unwrap();
                            want.insert(k.clone(), None);
                        } else if i % 13 == 12 {
                            // A batch of two puts, one of them separated.
                            let mut b = WriteBatch::new();
                            b.put(&k, &value(t, i));
                            let k2 = key(t, i + 1);
                            b.put(&k2, &value(t, i + 2));
                            db.write(&WriteOptions::default(), b).unwrap();
                            want.insert(k.clone(), Some(value(t, i)));
                            want.insert(k2, Some(value(t, i + 2)));
                        } else {
                            let wo = WriteOptions {
                                sync: i % 50 == 49,
                                ..WriteOptions::default()
                            };
                            db.put_opt(&wo, &k, &value(t, i)).unwrap();
                            want.insert(k.clone(), Some(value(t, i)));
                        }
                        // An acknowledged write is visible to its writer.
                        assert_eq!(db.get(&k).unwrap(), want[&k], "thread {t} step {i}");
                    }
                    want
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    per_thread
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

#[test]
fn grouped_and_lone_unsynced_writers_leave_the_same_database() {
    for mapped in [true, false] {
        let mut results = Vec::new();
        for grouped in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let want = {
                let db = Db::open(dir.path(), opts(grouped, mapped)).unwrap();
                let want = write_all(&db);
                let got = common::scan_all(&db).unwrap();
                assert!(
                    got == want,
                    "grouped {grouped}, mapped {mapped}, before reopening: {}",
                    common::diff(&got, &want)
                );
                let st = db.stats();
                assert!(st.vlog_values_written > 0, "separated values were written");
                db.close().unwrap();
                want
            };
            let report = Db::check(dir.path(), opts(grouped, mapped)).unwrap();
            assert!(report.problems.is_empty(), "{:?}", report.problems);
            assert!(report.vlog_frames > 0);
            let db = Db::open(dir.path(), opts(grouped, mapped)).unwrap();
            let got = common::scan_all(&db).unwrap();
            assert!(
                got == want,
                "grouped {grouped}, mapped {mapped}, after reopening: {}",
                common::diff(&got, &want)
            );
            results.push(got);
        }
        assert!(
            results[0] == results[1],
            "mapped {mapped}: grouping changed the result"
        );
    }
}
