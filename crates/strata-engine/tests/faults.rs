//! Injected I/O errors reach the caller, make the instance refuse writes until it is reopened,
//! and never lose an acknowledged write.
//!
//! Every scenario runs on the plain engine (`plain::*`) and with key-value separation
//! (`separated::*`, where the value log is the commit log and rules aimed at the log name its
//! files).
//!
//!     cargo test -p strata-engine --test faults

#[macro_use]
mod common;

use common::{diff, key, mem_dir, value, Engine};
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_engine::io::{FaultFs, FaultKind, FaultOp, FaultRule, MemFs};
use strata_engine::{Db, Error, Options, WriteBatch, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

const SYNC: WriteOptions = WriteOptions {
    sync: true,
    disable_wal: false,
};

on_each_engine!(
    eio_on_wal_sync_fails_the_write_and_poisons_until_reopen,
    eio_on_unsynced_wal_append_poisons,
    enospc_during_flush_surfaces_and_poisons_reads_still_work,
    enospc_in_background_flush_reaches_later_writes,
    failed_manifest_sync_is_sticky,
    failed_manifest_sync_without_crash_loses_nothing,
    failed_compaction_is_sticky_and_loses_nothing,
    short_wal_write_then_crash_loses_no_synced_write,
    faults_during_open_are_reported,
    regression_close_after_background_error_reports_it_and_keeps_acknowledged_writes,
);

fn setup(engine: Engine) -> (MemFs, FaultFs, Options) {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let opts = engine.options(common::tiny_opts(Arc::new(fault.clone())));
    (mem, fault, opts)
}

fn is_poisoned(e: &Error) -> bool {
    matches!(e, Error::Poisoned(_))
}

/// Every kind of write fails, and the failure says the instance is poisoned.
fn assert_writes_refused(db: &Db, what: &str) {
    let e = db.put(b"after", b"x").unwrap_err();
    assert!(is_poisoned(&e), "{what}: put after the failure: {e:?}");
    let e = db.put_opt(&SYNC, b"after", b"x").unwrap_err();
    assert!(
        is_poisoned(&e),
        "{what}: synced put after the failure: {e:?}"
    );
    let e = db.delete(b"after").unwrap_err();
    assert!(is_poisoned(&e), "{what}: delete after the failure: {e:?}");
    let mut b = WriteBatch::new();
    b.put(b"after", b"x");
    let e = db.write(&WriteOptions::default(), b).unwrap_err();
    assert!(is_poisoned(&e), "{what}: batch after the failure: {e:?}");
    assert!(db.flush().is_err(), "{what}: flush after the failure");
    assert!(
        db.stats().background_error.is_some(),
        "{what}: stats do not show the error"
    );
}

fn assert_reads(db: &Db, want: &Map, what: &str) {
    for (k, v) in want {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{what}: get {k:?}");
    }
    let got = common::scan_all(db).unwrap();
    assert!(&got == want, "{what}: {}", diff(&got, want));
}

fn put_n(db: &Db, want: &mut Map, range: std::ops::Range<u32>, tag: u32, wo: &WriteOptions) {
    for i in range {
        let k = key(i);
        let v = value(&k, tag, 100 + (i as usize % 7) * 30);
        db.put_opt(wo, &k, &v).unwrap();
        want.insert(k, v);
    }
}

fn eio_on_wal_sync_fails_the_write_and_poisons_until_reopen(engine: Engine) {
    let (mem, fault, opts) = setup(engine);
    let db = Db::open(mem_dir(), opts.clone()).unwrap();
    let mut want = Map::new();
    put_n(&db, &mut want, 0..50, 1, &SYNC);
    let log = engine.log_suffix();
    fault.add_rule(FaultRule::new(FaultOp::Sync, 1, FaultKind::Eio).path_contains(log));
    let e = db.put_opt(&SYNC, b"doomed", b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "the EIO reaches the caller: {e}");
    assert!(e.to_string().contains(log), "the error names the log: {e}");
    assert_writes_refused(&db, "after a WAL sync EIO");
    // Reads still work, and see every acknowledged write.
    assert_reads(&db, &want, "reads after a WAL sync EIO");
    drop(db);
    fault.clear();
    // Power loss: every acknowledged (synced) write survives; the failed one is in doubt.
    mem.crash(true);
    let db = Db::open(mem_dir(), opts).unwrap();
    let mut got = common::scan_all(&db).unwrap();
    if let Some(v) = got.remove(&b"doomed"[..]) {
        assert_eq!(v, b"x");
    }
    assert!(got == want, "after reopen: {}", diff(&got, &want));
    // And the reopened instance works.
    db.put_opt(&SYNC, b"later", b"y").unwrap();
    assert_eq!(db.get(b"later").unwrap().as_deref(), Some(&b"y"[..]));
}

fn eio_on_unsynced_wal_append_poisons(engine: Engine) {
    let (_mem, fault, opts) = setup(engine);
    let db = Db::open(mem_dir(), opts.clone()).unwrap();
    let mut want = Map::new();
    put_n(&db, &mut want, 0..10, 1, &WriteOptions::default());
    let mut history: Vec<(Vec<u8>, Vec<u8>)> = want.clone().into_iter().collect();
    fault.add_rule(
        FaultRule::new(FaultOp::Write, 1, FaultKind::Eio).path_contains(engine.log_suffix()),
    );
    // Each write group reaches the log file (WAL, or value log: its buffer is handed to the
    // OS per group) before it is acknowledged; the put that meets the failed write may come
    // a little after the rule (the loop bounds a miss).
    let e = loop {
        let k = format!("doomed-{:03}", history.len()).into_bytes();
        let v = value(&k, 9, 100);
        history.push((k.clone(), v.clone()));
        match db.put(&k, &v) {
            Ok(()) if history.len() < 200 => {}
            Ok(()) => panic!("190 puts and the log append rule never fired"),
            Err(e) => break e,
        }
    };
    assert_eq!(e.raw_os_error(), Some(5), "{e}");
    assert_writes_refused(&db, "after a log append EIO");
    let acked: Map = history[..history.len() - 1].iter().cloned().collect();
    assert_reads(&db, &acked, "reads after a log append EIO");
    drop(db);
    fault.clear();
    let db = Db::open(mem_dir(), opts).unwrap();
    let got = common::scan_all(&db).unwrap();
    // The state after some prefix of the puts (the failed one is in doubt) covering every
    // acknowledged one: each reached the OS before it was acknowledged.
    let min = history.len() - 1;
    let prefixes: Vec<usize> = (min..=history.len())
        .filter(|&p| history[..p].iter().cloned().collect::<Map>() == got)
        .collect();
    assert!(
        !prefixes.is_empty(),
        "after reopen: not the state after any prefix of at least {min} puts; against the \
         writes before the rule: {}",
        diff(&got, &want)
    );
}

fn enospc_during_flush_surfaces_and_poisons_reads_still_work(engine: Engine) {
    let (mem, fault, opts) = setup(engine);
    let db = Db::open(mem_dir(), opts.clone()).unwrap();
    let mut want = Map::new();
    // Below the write buffer: nothing flushed yet.
    put_n(&db, &mut want, 0..40, 1, &WriteOptions::default());
    assert_eq!(db.stats().flushes, 0);
    fault.add_rule(
        FaultRule::new(FaultOp::Write, 1, FaultKind::Enospc)
            .path_contains(".sst")
            .persistent(),
    );
    let e = db.flush().unwrap_err();
    assert!(
        e.to_string().contains("os error 28") || e.raw_os_error() == Some(28),
        "flush reports the ENOSPC: {e}"
    );
    assert_writes_refused(&db, "after ENOSPC in a flush");
    assert_reads(&db, &want, "reads after ENOSPC in a flush");
    assert!(
        db.multi_get(&Default::default(), &[&key(3)[..], b"missing"])
            .iter()
            .all(|r| r.is_ok()),
        "multi_get after ENOSPC"
    );
    drop(db);
    fault.clear();
    let db = Db::open(mem_dir(), opts).unwrap();
    assert_reads(&db, &want, "after reopen");
    db.wait_idle().unwrap();
    // No half-written table is left behind.
    assert_eq!(
        common::sst_files(&mem, &mem_dir()),
        common::live_tables(&db),
        "orphan tables after a failed flush: {:?}",
        mem.dump()
    );
    // The reopened instance flushes fine.
    db.flush().unwrap();
    assert_reads(&db, &want, "after a flush on the reopened db");
}

fn enospc_in_background_flush_reaches_later_writes(engine: Engine) {
    let (_mem, fault, opts) = setup(engine);
    let db = Db::open(mem_dir(), opts.clone()).unwrap();
    fault.add_rule(
        FaultRule::new(FaultOp::Write, 1, FaultKind::Enospc)
            .path_contains(".sst")
            .persistent(),
    );
    // Keep writing until the background flush fails and writes are refused.
    let mut want = Map::new();
    let mut refused = None;
    for i in 0..5000u32 {
        let k = key(i);
        let v = value(&k, 1, 200);
        match db.put(&k, &v) {
            Ok(()) => {
                want.insert(k, v);
            }
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("writes must eventually be refused once flushes cannot write");
    assert!(
        is_poisoned(&e) && e.to_string().contains("os error 28"),
        "the refusal carries the ENOSPC: {e}"
    );
    assert_reads(&db, &want, "reads after a background ENOSPC");
    drop(db);
    fault.clear();
    let db = Db::open(mem_dir(), opts).unwrap();
    assert_reads(&db, &want, "after reopen");
}

fn failed_manifest_sync_is_sticky(engine: Engine) {
    let (mem, fault, opts) = setup(engine);
    let db = Db::open(mem_dir(), opts.clone()).unwrap();
    let mut want = Map::new();
    put_n(&db, &mut want, 0..40, 1, &SYNC);
    fault.add_rule(FaultRule::new(FaultOp::Sync, 1, FaultKind::Eio).path_contains("MANIFEST"));
    let e = db.flush().unwrap_err();
    assert!(
        e.to_string().contains("MANIFEST"),
        "names the MANIFEST: {e}"
    );
    // The rule was one-shot: a later MANIFEST sync would succeed, but the instance must not
    // try — the MANIFEST's state is unknown.
    assert_writes_refused(&db, "after a MANIFEST sync EIO");
    assert!(db.compact_range(None, None).is_err());
    assert_reads(&db, &want, "reads after a MANIFEST sync EIO");
    mem.crash(true);
    drop(db);
    fault.clear();
    let db = Db::open(mem_dir(), opts).unwrap();
    assert_reads(&db, &want, "after crash and reopen");
    db.put_opt(&SYNC, b"later", b"y").unwrap();
}

fn failed_manifest_sync_without_crash_loses_nothing(engine: Engine) {
    let (_mem, fault, opts) = setup(engine);
    let db = Db::open(mem_dir(), opts.clone()).unwrap();
    let mut want = Map::new();
    put_n(&db, &mut want, 0..40, 1, &SYNC);
    fault.add_rule(FaultRule::new(FaultOp::Sync, 1, FaultKind::Eio).path_contains("MANIFEST"));
    assert!(db.flush().is_err());
    drop(db);
    fault.clear();
    let db = Db::open(mem_dir(), opts).unwrap();
    assert_reads(&db, &want, "after reopen");
}

fn failed_compaction_is_sticky_and_loses_nothing(engine: Engine) {
    let (mem, fault, opts) = setup(engine);
    let db = Db::open(mem_dir(), opts.clone()).unwrap();
    let mut want = Map::new();
    put_n(&db, &mut want, 0..100, 1, &SYNC);
    db.flush().unwrap();
    put_n(&db, &mut want, 50..150, 2, &SYNC);
    db.flush().unwrap();
    db.wait_idle().unwrap();
    put_n(&db, &mut want, 100..200, 3, &SYNC);
    // Every table write fails from now on: the manual compaction cannot succeed.
    fault.add_rule(
        FaultRule::new(FaultOp::Sync, 1, FaultKind::Eio)
            .path_contains(".sst")
            .persistent(),
    );
    assert!(db.compact_range(None, None).is_err());
    assert_writes_refused(&db, "after a failed compaction");
    assert_reads(&db, &want, "reads after a failed compaction");
    drop(db);
    fault.clear();
    mem.crash(true);
    let db = Db::open(mem_dir(), opts).unwrap();
    assert_reads(&db, &want, "after crash and reopen");
    db.compact_range(None, None).unwrap();
    assert_reads(&db, &want, "after a compaction on the reopened db");
}

/// A short write in the WAL (half a record reaches the file) followed by a power loss: open
/// succeeds and every acknowledged synced write survives; no write is accepted after the
/// short write (appending after half a record would make the log unreadable).
fn short_wal_write_then_crash_loses_no_synced_write(engine: Engine) {
    for nth in 1..=12u64 {
        for crash in [false, true] {
            let (mem, fault, opts) = setup(engine);
            let db = Db::open(mem_dir(), opts.clone()).unwrap();
            let mut want = Map::new();
            put_n(&db, &mut want, 0..20, 1, &SYNC);
            fault.add_rule(
                FaultRule::new(FaultOp::Write, nth, FaultKind::ShortWrite)
                    .path_contains(engine.log_suffix()),
            );
            let mut failed = None;
            for i in 20..60u32 {
                let k = key(i);
                let v = value(&k, 2, 150);
                match db.put_opt(&SYNC, &k, &v) {
                    Ok(()) => {
                        want.insert(k, v);
                    }
                    Err(_) => {
                        failed = Some(k);
                        assert!(
                            db.put_opt(&SYNC, b"after", b"x").is_err(),
                            "nth={nth}: a write was accepted after a short WAL write"
                        );
                        break;
                    }
                }
            }
            let failed = failed.unwrap_or_else(|| panic!("nth={nth}: the rule never fired"));
            if crash {
                mem.crash(true);
            }
            drop(db);
            fault.clear();
            let db = Db::open(mem_dir(), opts.clone()).unwrap_or_else(|e| {
                panic!("nth={nth} crash={crash}: open after a short WAL write failed: {e}")
            });
            let mut got = common::scan_all(&db).unwrap();
            got.remove(&failed);
            assert!(
                got == want,
                "nth={nth} crash={crash}: {} (recovery {:?})",
                diff(&got, &want),
                db.recovery_info()
            );
            // Writable again, and the new writes survive another crash.
            db.put_opt(&SYNC, b"later", b"y").unwrap();
            mem.crash(false);
            drop(db);
            let db = Db::open(mem_dir(), opts).unwrap();
            assert_eq!(db.get(b"later").unwrap().as_deref(), Some(&b"y"[..]));
            let mut got = common::scan_all(&db).unwrap();
            got.remove(&b"later"[..]);
            got.remove(&failed);
            assert!(
                got == want,
                "nth={nth} crash={crash} second reopen: {}",
                diff(&got, &want)
            );
        }
    }
}

/// Errors while opening reach the caller (no panic, no half-open instance), and a clean retry
/// works.
fn faults_during_open_are_reported(engine: Engine) {
    let (mem, fault, opts) = setup(engine);
    let db = Db::open(mem_dir(), opts.clone()).unwrap();
    let mut want = Map::new();
    put_n(&db, &mut want, 0..30, 1, &SYNC);
    drop(db);
    for op in [
        FaultOp::Create,
        FaultOp::Write,
        FaultOp::Sync,
        FaultOp::Rename,
        FaultOp::Read,
        FaultOp::Open,
    ] {
        fault.add_rule(FaultRule::new(op, 1, FaultKind::Eio).persistent());
        let r = Db::open(mem_dir(), opts.clone());
        fault.clear();
        match r {
            Err(e) => assert!(e.raw_os_error() == Some(5), "{op:?}: {e}"),
            Ok(db) => {
                // Some faults may not touch open at all (e.g. reads when nothing is read).
                assert_reads(&db, &want, &format!("open despite {op:?}"));
            }
        }
        mem.crash(false);
        let db = Db::open(mem_dir(), opts.clone()).unwrap();
        assert_reads(&db, &want, &format!("retry after {op:?}"));
    }
}

/// Regression: `close` (and drop) skipped the final log sync when a background error was
/// pending, and `close` still returned `Ok`, so writes acknowledged before the background
/// failure (unsynced, which `close` promises to sync) were lost in a power loss. Now `close`
/// syncs the log anyway and then reports the background error: it must return the error,
/// and after a crash every acknowledged write must be there.
fn regression_close_after_background_error_reports_it_and_keeps_acknowledged_writes(
    engine: Engine,
) {
    let (mem, fault, opts) = setup(engine);
    let db = Db::open(mem_dir(), opts.clone()).unwrap();
    // Every table sync fails from now on: the next background flush fails.
    fault.add_rule(
        FaultRule::new(FaultOp::Sync, 1, FaultKind::Eio)
            .path_contains(".sst")
            .persistent(),
    );
    // Unsynced writes until the memtable switches; the write that switches it is acknowledged
    // (it lands in the new log) and the flush of the old memtable fails in the background.
    let mut want = Map::new();
    let mut i = 0u32;
    while db.stats().immutable_memtables == 0 && db.stats().background_error.is_none() {
        let k = key(i);
        let v = value(&k, 1, 200);
        db.put(&k, &v).unwrap();
        want.insert(k, v);
        i += 1;
    }
    while db.stats().background_error.is_none() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let closed = db.close();
    let e = closed.expect_err("close returned Ok although a background flush had failed");
    assert!(
        is_poisoned(&e) && e.to_string().contains("os error 5"),
        "close reports the background EIO: {e}"
    );
    mem.crash(false);
    fault.clear();
    let db = Db::open(mem_dir(), opts).unwrap();
    let got = common::scan_all(&db).unwrap();
    assert!(
        got == want,
        "acknowledged writes were lost in a crash after close: {}",
        diff(&got, &want)
    );
}
