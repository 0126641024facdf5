//! The sync watermark end to end (`docs/format/wal.md` section 3, `docs/design.md` §7.6):
//! damage in synced log bytes (below a later record's watermark) fails the open with the file
//! and offset, for the WAL, the value log and the MANIFEST; damage in the unsynced tail opens
//! with every synced write present and reports the bytes dropped, per file, in
//! `recovery_info`, in `stats` and in `check`. A log file that is not the newest (a switched
//! WAL, a rotated value-log file) ends with a sync mark: cut at a record boundary, it is
//! refused once a later file holds records.

mod common;

use common::{key, mem_dir, value, Engine};
use std::path::PathBuf;
use std::sync::Arc;
use strata_engine::io::{FaultFs, FaultKind, FaultOp, FaultRule, Fs, MemFs};
use strata_engine::log::LogReader;
use strata_engine::vlog::FrameReader;
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

/// A database's files and their contents.
type Files = Vec<(PathBuf, Vec<u8>)>;

/// The files of a database whose commit log spans several files from the replay start: no
/// table can be written (every flush fails), so the WAL switched by a full memtable, or the
/// value-log files rotated at 4 KiB, all stay needed. Returns the files, the log files in
/// number order and the keys acknowledged.
fn several_log_files(engine: Engine) -> (Files, Vec<PathBuf>, Vec<u32>) {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    fault.add_rule(
        FaultRule::new(FaultOp::Create, 1, FaultKind::Eio)
            .path_contains(".sst")
            .persistent(),
    );
    let fs: Arc<dyn Fs> = Arc::new(fault);
    let o = Options {
        write_buffer_bytes: 4 << 10,
        max_immutable_memtables: 4,
        vlog_file_bytes: 4 << 10,
        ..opts(&mem, engine)
    };
    let db = Db::open(mem_dir(), Options { fs, ..o }).unwrap();
    let mut acked = Vec::new();
    for i in 0..120 {
        let k = key(i);
        if db.put(&k, &value(&k, 3, 100)).is_err() {
            break;
        }
        acked.push(i);
    }
    let files = common::copy_files(&mem);
    drop(db);
    let logs: Vec<PathBuf> = files
        .iter()
        .filter(|(p, _)| p.to_string_lossy().ends_with(engine.log_suffix()))
        .map(|(p, _)| p.clone())
        .collect();
    (files, logs, acked)
}

/// Record (WAL) or frame (value log) offsets of a log file, and the offset its reading ended.
fn record_offsets(data: &[u8], engine: Engine) -> Vec<u64> {
    let mem = MemFs::new();
    let p = std::path::Path::new("/log");
    mem.write_all_synced(p, data).unwrap();
    let f = mem.open(p).unwrap();
    let mut out = Vec::new();
    match engine {
        Engine::Plain => {
            let mut r = LogReader::new(f);
            while let Some((at, _)) = r.read_record().unwrap() {
                out.push(at);
            }
        }
        Engine::Separated => {
            let mut r = FrameReader::new(f, p, data.len() as u64, 0);
            while let Some(fr) = r.next_frame().unwrap() {
                out.push(fr.offset);
            }
        }
    }
    out
}

/// A switched WAL or rotated value-log file ends with a sync mark; cut at a record or frame
/// boundary (its mark, or its mark and records before it, gone), it no longer does, and the
/// open refuses it naming the file and the cut, because a later file holds records; `check`
/// reports it too. The uncut files pass `check` and open with every acknowledged write.
#[test]
fn a_log_file_that_is_not_the_newest_cut_at_a_record_boundary_is_refused() {
    for engine in Engine::ALL {
        let (files, logs, acked) = several_log_files(engine);
        assert!(logs.len() >= 2, "{engine:?}: {logs:?}");
        assert!(
            acked.len() >= 20,
            "{engine:?}: {} acknowledged",
            acked.len()
        );
        let mem = common::restore_files(&files);
        let report = Db::check(mem_dir(), opts(&mem, engine)).unwrap();
        assert!(report.is_ok(), "{engine:?}: {report}");
        let db = Db::open(mem_dir(), opts(&mem, engine)).unwrap();
        for &i in &acked {
            let k = key(i);
            assert_eq!(db.get(&k).unwrap(), Some(value(&k, 3, 100)), "{engine:?}");
        }
        drop(db);

        let first = &logs[0];
        let data = &files.iter().find(|(p, _)| p == first).unwrap().1;
        let offsets = record_offsets(data, engine);
        // The last record read is the file's seal; the mark is skipped by the WAL reader.
        let mark_len = match engine {
            Engine::Plain => 7 + 8,
            Engine::Separated => 32,
        };
        let mark_at = data.len() as u64 - mark_len;
        assert!(offsets.len() >= 3, "{engine:?}: {offsets:?}");
        let last_record = offsets[offsets.len() - 2];
        for cut in [mark_at, last_record] {
            let mut cut_files = files.clone();
            cut_files
                .iter_mut()
                .find(|(p, _)| p == first)
                .unwrap()
                .1
                .truncate(cut as usize);
            let mem = common::restore_files(&cut_files);
            // `check` reports it as the open does.
            let report = Db::check(mem_dir(), opts(&mem, engine)).unwrap();
            assert!(
                report
                    .problems
                    .iter()
                    .any(|p| p.to_string().contains("sync mark")),
                "{engine:?} cut at {cut}: {report}"
            );
            match Db::open(mem_dir(), opts(&mem, engine)) {
                Err(Error::Corruption {
                    file,
                    offset,
                    reason,
                }) => {
                    assert_eq!(&file, first, "{engine:?} cut at {cut}");
                    assert_eq!(offset, cut, "{engine:?}: {reason}");
                    assert!(reason.contains("sync mark"), "{reason}");
                }
                Err(e) => panic!("{engine:?} cut at {cut}: {e}"),
                Ok(_) => panic!("{engine:?}: opened a non-newest log file cut at {cut}"),
            }
        }
    }
}
