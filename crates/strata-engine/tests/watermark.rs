//! The sync watermark end to end (`docs/format/wal.md` section 3, `docs/design.md` §7.6):
//! damage in synced log bytes (below a later record's watermark) fails the open with the file
//! and offset, for the WAL, the value log and the MANIFEST; damage in the unsynced tail opens
//! with every synced write present and reports the bytes dropped, per file, in
//! `recovery_info`, in `stats` and in `check`.

mod common;

use common::{key, mem_dir, value, Engine};
use std::path::PathBuf;
use std::sync::Arc;
use strata_engine::io::MemFs;
use strata_engine::{Db, Error, Options, WriteOptions};

const SYNCED: u32 = 20;
const UNSYNCED: u32 = 10;

fn opts(mem: &MemFs, engine: Engine) -> Options {
    let base = Options {
        // Everything stays in one log file.
        write_buffer_bytes: 1 << 20,
        l0_tier_bytes: 4 << 20,
        ..common::tiny_opts(Arc::new(mem.clone()))
    };
    Options {
        vlog_file_bytes: 1 << 20,
        ..engine.options(base)
    }
}

/// The files of a database after `SYNCED` synced puts and `UNSYNCED` unsynced ones, copied
/// while it is open (the unsynced bytes all reached the disk), and the log file holding them.
fn written(engine: Engine) -> (Vec<(PathBuf, Vec<u8>)>, PathBuf) {
    let mem = MemFs::new();
    let db = Db::open(mem_dir(), opts(&mem, engine)).unwrap();
    // A flush first, so that the MANIFEST holds several edits.
    db.put(b"flushed", b"1").unwrap();
    db.flush().unwrap();
    for i in 0..SYNCED + UNSYNCED {
        let k = key(i);
        let wo = WriteOptions {
            sync: i < SYNCED,
            ..Default::default()
        };
        db.put_opt(&wo, &k, &value(&k, 1, 40)).unwrap();
    }
    let files = common::copy_files(&mem);
    drop(db);
    let log = files
        .iter()
        .filter(|(p, d)| {
            p.to_string_lossy().ends_with(engine.log_suffix()) && find(d, &key(0)).is_some()
        })
        .map(|(p, _)| p.clone())
        .next()
        .expect("the log holding the puts");
    (files, log)
}

fn find(data: &[u8], k: &[u8]) -> Option<usize> {
    data.windows(k.len()).position(|w| w == k)
}

fn open_with_flip(
    files: &[(PathBuf, Vec<u8>)],
    path: &PathBuf,
    at: usize,
    engine: Engine,
) -> (MemFs, strata_engine::Result<Db>) {
    let mut files = files.to_vec();
    let f = files.iter_mut().find(|(p, _)| p == path).unwrap();
    f.1[at] ^= 0x20;
    let mem = common::restore_files(&files);
    let r = Db::open(mem_dir(), opts(&mem, engine));
    (mem, r)
}

#[test]
fn a_flip_below_a_later_watermark_is_refused_with_file_and_offset() {
    for engine in Engine::ALL {
        let (files, log) = written(engine);
        let data = &files.iter().find(|(p, _)| *p == log).unwrap().1;
        for i in [0, 7, SYNCED - 2] {
            let at = find(data, &key(i)).unwrap();
            let (mem, r) = open_with_flip(&files, &log, at, engine);
            match r {
                Err(Error::Corruption {
                    file,
                    offset,
                    reason,
                }) => {
                    assert_eq!(file, log, "{engine:?} key {i}");
                    assert!(offset <= at as u64, "{engine:?} key {i}: offset {offset}");
                    assert!(reason.contains("synced"), "{reason}");
                }
                Err(e) => panic!("{engine:?} key {i}: {e}"),
                Ok(_) => panic!("{engine:?} key {i}: opened over damaged synced bytes"),
            }
            // `check` names it too.
            let report = Db::check(mem_dir(), opts(&mem, engine)).unwrap();
            assert!(!report.is_ok(), "{engine:?}: {report}");
        }
    }
}

#[test]
fn a_flip_in_the_unsynced_tail_opens_with_every_synced_write() {
    for engine in Engine::ALL {
        let (files, log) = written(engine);
        let data = &files.iter().find(|(p, _)| *p == log).unwrap().1;
        for i in [SYNCED + 1, SYNCED + UNSYNCED - 1] {
            let at = find(data, &key(i)).unwrap();
            let (mem, r) = open_with_flip(&files, &log, at, engine);
            let db = r.unwrap_or_else(|e| panic!("{engine:?} key {i}: {e}"));
            for j in 0..SYNCED {
                let k = key(j);
                assert_eq!(db.get(&k).unwrap(), Some(value(&k, 1, 40)), "{engine:?}");
            }
            // The writes before the flipped one survive too; it and those after are dropped.
            for j in SYNCED..SYNCED + UNSYNCED {
                assert_eq!(db.get(&key(j)).unwrap().is_some(), j < i, "{engine:?} {j}");
            }
            let info = db.recovery_info();
            let entry = info.logs.iter().find(|l| l.path == log).unwrap();
            assert!(entry.truncated_bytes > 0 && entry.tail.is_some(), "{info}");
            assert!(entry.records >= u64::from(SYNCED), "{info}");
            assert_eq!(db.stats().recovery_truncated_bytes, info.truncated_bytes());
            assert!(info.to_string().contains("bytes of unsynced tail dropped"));
            drop(db);
            // A second crash-free reopen: the dropped tail is gone, nothing more is lost.
            let db = Db::open(mem_dir(), opts(&mem, engine)).unwrap();
            assert_eq!(db.recovery_info().truncated_bytes(), 0);
            assert!(db.get(&key(SYNCED - 1)).unwrap().is_some());
        }
    }
}

/// `check` lists every log file with what an open would replay and drop.
#[test]
fn check_reports_the_unsynced_tail_per_log_file() {
    for engine in Engine::ALL {
        let (files, log) = written(engine);
        let data = &files.iter().find(|(p, _)| *p == log).unwrap().1;
        let at = find(data, &key(SYNCED + 2)).unwrap();
        let mut files = files.clone();
        files.iter_mut().find(|(p, _)| *p == log).unwrap().1[at] ^= 1;
        let mem = common::restore_files(&files);
        let report = Db::check(mem_dir(), opts(&mem, engine)).unwrap();
        assert!(report.is_ok(), "{report}");
        let entry = report.logs.iter().find(|l| l.path == log).unwrap();
        assert!(entry.truncated_bytes > 0, "{report}");
        assert!(report
            .logs
            .iter()
            .any(|l| l.path.to_string_lossy().contains("MANIFEST-")));
        assert!(
            report.to_string().contains("unsynced tail dropped"),
            "{report}"
        );
    }
}

/// Every MANIFEST edit is synced before the next is written, so a flip in any edit but the
/// last is below a later watermark.
#[test]
fn a_flip_in_an_earlier_manifest_edit_is_refused() {
    let mem = MemFs::new();
    let db = Db::open(mem_dir(), opts(&mem, Engine::Plain)).unwrap();
    for i in 0..4 {
        db.put(&key(i), b"v").unwrap();
        db.flush().unwrap();
    }
    db.close().unwrap();
    let files = common::copy_files(&mem);
    let (manifest, data) = files
        .iter()
        .find(|(p, _)| p.to_string_lossy().contains("MANIFEST-"))
        .unwrap();
    // Inside the first edit (after the 19-byte file header and the record's own header and
    // watermark).
    let at = 19 + 7 + 8 + 1;
    assert!(
        data.len() > at + 100,
        "the MANIFEST should hold several edits"
    );
    let (_, r) = open_with_flip(&files, manifest, at, Engine::Plain);
    match r {
        Err(Error::Corruption { file, .. }) => assert_eq!(&file, manifest),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened over a damaged synced MANIFEST edit"),
    }
}

/// A cleanly closed database's log ends with a sync mark: a flip in its last record before
/// the mark is refused, not dropped as an unsynced tail.
#[test]
fn a_clean_close_covers_the_last_records() {
    for engine in Engine::ALL {
        let mem = MemFs::new();
        let db = Db::open(mem_dir(), opts(&mem, engine)).unwrap();
        for i in 0..5 {
            let k = key(i);
            db.put(&k, &value(&k, 2, 40)).unwrap();
        }
        db.close().unwrap();
        let files = common::copy_files(&mem);
        let (log, data) = files
            .iter()
            .find(|(p, d)| {
                p.to_string_lossy().ends_with(engine.log_suffix()) && find(d, &key(4)).is_some()
            })
            .unwrap();
        let at = find(data, &key(4)).unwrap();
        let (_, r) = open_with_flip(&files, log, at, engine);
        assert!(
            matches!(r, Err(Error::Corruption { .. })),
            "{engine:?}: {:?}",
            r.map(|_| ())
        );
    }
}
