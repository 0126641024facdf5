//! Crash-point enumeration on MemFs + FaultFs.
//!
//! A seeded workload (synced and unsynced puts, deletes, batches, explicit flushes; tiny
//! options so that it flushes and compacts many times) is first run without faults to count
//! its file-system operations N. Then, for crash points k in 0..N, it is replayed on a fresh
//! MemFs whose FaultFs fails every operation from the (k+1)-th on; the acknowledged history is
//! recorded; the machine "loses power" (`MemFs::crash_with`: by `k % 3`, every unsynced
//! write is lost, the last one is torn, or each unsynced write independently survives, is
//! lost or is torn, leaving holes); the database is reopened on the bare MemFs. Open must succeed and the database
//! must hold exactly the state after some prefix P of the history, with P covering every op
//! up to the last acknowledged sync (synced write or flush) and nothing past the op that
//! failed.
//!
//! Every scenario runs twice: on the plain engine (WAL) and with key-value separation, where
//! almost every value goes to the value log (which is then also the log), its files are a few
//! KiB so they rotate often, and the workload also runs GC.
//!
//! Default run (8,000 plain and 4,000 separated crash points; prints "checked N crash points"):
//!     cargo test -p strata-engine --test crash -- --nocapture
//! `crash_points_during_recovery` also crashes inside the recovery of a sample of those points
//! (STRATA_RECOVERY_CRASH_FIRST_POINTS first points, default 120; every recovery operation).
//! Long run (STRATA_CRASH_POINTS points per engine, default 30,000, over longer workloads of
//! STRATA_CRASH_OPS ops, default 600):
//!     STRATA_CRASH_POINTS=30000 STRATA_CRASH_OPS=600 \
//!         cargo test -p strata-engine --test crash -- --ignored --nocapture
//! With STRATA_CRASH_MODE=scattered every crash scatters the unsynced writes (the
//! scattered-writeback mode; each run prints how many points scattered).

mod common;

use common::{crash_mode, diff, env_usize, key, mem_dir, show, value, Engine};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata_engine::io::{CrashMode, FaultFs, Fs, MemFs, UnsyncedWrites};
use strata_engine::{Db, Options, WriteBatch, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

const SYNC: WriteOptions = WriteOptions {
    sync: true,
    disable_wal: false,
};

#[derive(Clone, Debug)]
enum WOp {
    Put {
        k: Vec<u8>,
        v: Vec<u8>,
        sync: bool,
    },
    Delete {
        k: Vec<u8>,
        sync: bool,
    },
    Batch {
        items: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        sync: bool,
    },
    Flush,
    Gc,
}

impl WOp {
    /// Whether an acknowledged op makes itself and everything before it durable.
    fn is_durable_point(&self) -> bool {
        match self {
            WOp::Put { sync, .. } | WOp::Delete { sync, .. } | WOp::Batch { sync, .. } => *sync,
            WOp::Flush => true,
            WOp::Gc => false,
        }
    }

    fn apply_model(&self, m: &mut Map) {
        match self {
            WOp::Put { k, v, .. } => {
                m.insert(k.clone(), v.clone());
            }
            WOp::Delete { k, .. } => {
                m.remove(k);
            }
            WOp::Batch { items, .. } => {
                for (k, v) in items {
                    match v {
                        Some(v) => m.insert(k.clone(), v.clone()),
                        None => m.remove(k),
                    };
                }
            }
            WOp::Flush | WOp::Gc => {}
        }
    }

    fn apply_db(&self, db: &Db) -> strata_engine::Result<()> {
        let wo = |sync: bool| WriteOptions {
            sync,
            ..Default::default()
        };
        match self {
            WOp::Put { k, v, sync } => db.put_opt(&wo(*sync), k, v),
            WOp::Delete { k, sync } => db.delete_opt(&wo(*sync), k),
            WOp::Batch { items, sync } => {
                let mut b = WriteBatch::new();
                for (k, v) in items {
                    match v {
                        Some(v) => b.put(k, v),
                        None => b.delete(k),
                    }
                }
                db.write(&wo(*sync), b)
            }
            WOp::Flush => db.flush(),
            WOp::Gc => db.gc().map(|_| ()),
        }
    }
}

fn workload(seed: u64, n: usize, engine: Engine) -> Vec<WOp> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let keys = 60u32;
    (0..n)
        .map(|i| {
            let sync = rng.gen_bool(0.2);
            let r = rng.gen_range(0..100);
            let tag = (seed as u32) * 100_000 + i as u32;
            if r < 55 {
                let k = key(rng.gen_range(0..keys));
                let v = value(&k, tag, rng.gen_range(20..400));
                WOp::Put { k, v, sync }
            } else if r < 70 {
                WOp::Delete {
                    k: key(rng.gen_range(0..keys)),
                    sync,
                }
            } else if r < 97 {
                let items = (0..rng.gen_range(2..6))
                    .map(|j| {
                        let k = key(rng.gen_range(0..keys));
                        let v = rng
                            .gen_bool(0.75)
                            .then(|| value(&k, tag * 8 + j, rng.gen_range(0..300)));
                        (k, v)
                    })
                    .collect();
                WOp::Batch { items, sync }
            } else if engine == Engine::Separated && rng.gen_bool(0.5) {
                WOp::Gc
            } else {
                WOp::Flush
            }
        })
        .collect()
}

/// `models[i]` = state after the first `i` ops.
fn prefix_models(ops: &[WOp]) -> Vec<Map> {
    let mut m = Map::new();
    let mut out = vec![m.clone()];
    for op in ops {
        op.apply_model(&mut m);
        out.push(m.clone());
    }
    out
}

fn crash_opts(fs: Arc<dyn Fs>, engine: Engine, tier: Option<&Path>) -> Options {
    let plain = Options {
        write_buffer_bytes: 4096,
        target_file_size_bytes: 4096,
        max_bytes_for_level_base: 8 << 10,
        level_size_multiplier: 2,
        ..common::tiny_opts(fs)
    };
    let plain = Options {
        l0_tier_dir: tier.map(Path::to_path_buf),
        // Four memtables: the tier compacts progressively from two.
        l0_tier_bytes: 16 << 10,
        ..plain
    };
    match engine {
        Engine::Plain => plain,
        // A user-space log buffer too: unsynced writes in it may be lost, synced ones never.
        Engine::Separated => Options {
            vlog_buffer_bytes: 1 << 10,
            ..engine.options(plain)
        },
    }
}

/// What one replay under a crash point did.
struct Replay {
    /// Ops acknowledged (a prefix of the workload: the replay stops at the first error).
    acked: usize,
    /// Ops up to and including the last acknowledged durable point.
    durable: usize,
    /// Whether an op was attempted and failed (it is in doubt: it may or may not survive).
    failed_op: bool,
    /// The workload finished and `close` succeeded: everything is durable.
    clean_close: bool,
    /// Counted file-system operations the replay attempted.
    fs_ops: u64,
    /// Value-log files collected by GC, and the number of the head value-log file, at the end
    /// (to check that a separated workload exercises rotation and GC).
    gc_files_collected: u64,
    vlog_head_file: u64,
    /// Flushes that wrote an L0 tier table.
    tier_flushes: u64,
}

fn replay(
    mem: &MemFs,
    ops: &[WOp],
    crash_after: Option<u64>,
    engine: Engine,
    tier: Option<&Path>,
) -> Replay {
    let fault = FaultFs::new(Arc::new(mem.clone()));
    if let Some(k) = crash_after {
        fault.fail_after(k);
    }
    let mut r = Replay {
        acked: 0,
        durable: 0,
        failed_op: false,
        clean_close: false,
        fs_ops: 0,
        gc_files_collected: 0,
        vlog_head_file: 0,
        tier_flushes: 0,
    };
    if let Ok(db) = Db::open(mem_dir(), crash_opts(Arc::new(fault.clone()), engine, tier)) {
        for (i, op) in ops.iter().enumerate() {
            if op.apply_db(&db).is_err() {
                r.failed_op = true;
                break;
            }
            r.acked = i + 1;
            if op.is_durable_point() {
                r.durable = i + 1;
            }
        }
        let stats = db.stats();
        r.gc_files_collected = stats.gc_files_collected;
        r.vlog_head_file = stats.vlog_head_file;
        r.tier_flushes = stats.l0_tier_flushes;
        if r.failed_op {
            drop(db);
        } else {
            r.clean_close = db.close().is_ok();
        }
    }
    r.fs_ops = fault.op_count();
    r
}

/// Runs crash point `k` and returns a description of what went wrong, if anything.
fn check_point(
    seed: u64,
    ops: &[WOp],
    models: &[Map],
    k: u64,
    deep: bool,
    engine: Engine,
    with_tier: bool,
) -> Result<(), String> {
    let mode = crash_mode(k);
    // The L0 tier's tables are real files (they are mapped): a directory per point. The
    // simulated power loss does not touch them, which is faithful: a table is synced before
    // the MANIFEST edit that adds it, so only a table nothing references can be torn.
    let tier_dir = with_tier.then(common::tier_tempdir);
    let tier = tier_dir.as_ref().map(|t| t.path().to_path_buf());
    let mem = MemFs::with_seed(seed * 1_000_003 + k);
    let r = replay(&mem, ops, Some(k), engine, tier.as_deref());
    mem.crash_with(mode);
    let ctx = format!(
        "{engine:?} seed {seed} crash point k={k} {:?}: acked {} ops, durable through {}, failed op: {}, clean close: {}",
        mode.unsynced_writes, r.acked, r.durable, r.failed_op, r.clean_close
    );
    let opts = crash_opts(Arc::new(mem.clone()), engine, tier.as_deref());
    let db = Db::open(mem_dir(), opts.clone()).map_err(|e| {
        format!(
            "{ctx}: reopen after crash failed: {e}; files {:?}",
            mem.dump()
        )
    })?;
    let got = common::scan_all(&db).map_err(|e| format!("{ctx}: scan failed: {e}"))?;
    let (lo, hi) = if r.clean_close {
        (r.acked, r.acked)
    } else if r.failed_op {
        (r.durable, r.acked + 1)
    } else {
        (r.durable, r.acked)
    };
    if !(lo..=hi).any(|p| models[p] == got) {
        // Find the closest prefix anywhere, for the message.
        let best = (0..models.len())
            .min_by_key(|&p| diff_count(&got, &models[p]))
            .unwrap();
        let matches: Vec<usize> = (0..models.len()).filter(|&p| models[p] == got).collect();
        // Classify: a clean close followed by an older (but durable-consistent) state is the
        // close-without-sync bug (faults::regression_close_reports_ok_without_syncing_...).
        let tag = if r.clean_close && matches.iter().any(|&p| p >= r.durable && p < r.acked) {
            "[close Ok but WAL not synced]"
        } else {
            "[state not a valid prefix]"
        };
        return Err(format!(
            "{tag} {ctx}: recovered state is not the state after any allowed prefix {lo}..={hi}; \
             exact matches at prefixes {matches:?}; closest prefix {best}: {}; recovery info {:?}",
            diff(&got, &models[best]),
            db.recovery_info()
        ));
    }
    // Point reads agree with the scan.
    for (kk, v) in got.iter().step_by(7) {
        match db.get(kk) {
            Ok(Some(g)) if &g == v => {}
            other => {
                return Err(format!(
                    "{ctx}: get({}) = {:?} but the scan returned {}",
                    show(kk),
                    other.map(|o| o.map(|g| show(&g))),
                    show(v)
                ))
            }
        }
    }
    // The recovered database accepts writes and survives a second crash.
    if deep {
        db.put_opt(
            &WriteOptions {
                sync: true,
                ..Default::default()
            },
            b"zz-after-crash",
            b"1",
        )
        .map_err(|e| format!("{ctx}: write after recovery failed: {e}"))?;
        mem.crash_with(crash_mode(k + 1));
        drop(db);
        let db =
            Db::open(mem_dir(), opts).map_err(|e| format!("{ctx}: second reopen failed: {e}"))?;
        let mut got2 = common::scan_all(&db).map_err(|e| format!("{ctx}: second scan: {e}"))?;
        if got2.remove(&b"zz-after-crash"[..]).as_deref() != Some(&b"1"[..]) || got2 != got {
            return Err(format!(
                "{ctx}: after a synced write and a second crash the state changed: {}",
                diff(&got2, &got)
            ));
        }
    }
    Ok(())
}

fn diff_count(a: &Map, b: &Map) -> usize {
    a.iter().filter(|(k, v)| b.get(*k) != Some(v)).count()
        + b.keys().filter(|k| !a.contains_key(*k)).count()
}

/// Enumerates crash points over successive seeds until `target` points are checked.
fn crash_points(target: usize, ops_per_workload: usize, engine: Engine, with_tier: bool) {
    let checked = AtomicUsize::new(0);
    // Points whose crash scattered unsynced writes (holes, stale bytes, later writes kept).
    let scattered = AtomicUsize::new(0);
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let failure_count = AtomicUsize::new(0);
    let kinds: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());
    let mut seed = 1u64;
    while checked.load(Ordering::Relaxed) < target {
        let ops = workload(seed, ops_per_workload, engine);
        let models = prefix_models(&ops);
        // Fault-free run: count the operations and check the clean result.
        let mem = MemFs::new();
        let free_tier = with_tier.then(common::tier_tempdir);
        let r = replay(
            &mem,
            &ops,
            None,
            engine,
            free_tier.as_ref().map(|t| t.path()),
        );
        assert!(
            r.clean_close && r.acked == ops.len(),
            "seed {seed}: the workload fails without faults"
        );
        if engine == Engine::Separated {
            assert!(
                r.gc_files_collected > 0 && r.vlog_head_file > 5,
                "seed {seed}: the separated workload should rotate value-log files and collect \
                 some: {} collected, head file {}",
                r.gc_files_collected,
                r.vlog_head_file
            );
        }
        if with_tier {
            assert!(
                r.tier_flushes > 0,
                "seed {seed}: the workload should flush into the L0 tier"
            );
        }
        let n = r.fs_ops;
        let db = Db::open(
            mem_dir(),
            crash_opts(
                Arc::new(mem.clone()),
                engine,
                free_tier.as_ref().map(|t| t.path()),
            ),
        )
        .unwrap();
        let got = common::scan_all(&db).unwrap();
        assert!(
            got == models[ops.len()],
            "seed {seed}: fault-free run: {}",
            diff(&got, &models[ops.len()])
        );
        drop(db);
        // Every point, or an even sample of the budget left.
        let left = (target - checked.load(Ordering::Relaxed)) as u64;
        let points: Vec<u64> = if n <= left {
            (0..n).collect()
        } else {
            (0..left).map(|i| i * n / left).collect()
        };
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&k) = points.get(i) else { return };
                    let deep = i.is_multiple_of(10);
                    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        check_point(seed, &ops, &models, k, deep, engine, with_tier)
                    }))
                    .unwrap_or_else(|p| {
                        Err(format!(
                            "{engine:?} seed {seed} crash point k={k}: panic: {}",
                            p.downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default()
                        ))
                    });
                    if let Err(e) = res {
                        failure_count.fetch_add(1, Ordering::Relaxed);
                        let kind = if e.starts_with('[') {
                            e.split(']').next().unwrap_or_default().to_string() + "]"
                        } else {
                            "[other]".to_string()
                        };
                        let mut f = failures.lock().unwrap();
                        // Keep the first two examples of each kind.
                        let mut k = kinds.lock().unwrap();
                        let seen = k.entry(kind).or_default();
                        *seen += 1;
                        if *seen <= 2 && f.len() < 8 {
                            f.push(e);
                        }
                    }
                    checked.fetch_add(1, Ordering::Relaxed);
                    if crash_mode(k).unsynced_writes == UnsyncedWrites::Scattered {
                        scattered.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        eprintln!(
            "seed {seed}: {} ops, {n} file-system operations, {} points checked so far",
            ops.len(),
            checked.load(Ordering::Relaxed)
        );
        seed += 1;
    }
    let n = checked.load(Ordering::Relaxed);
    let tier = if with_tier { " with the L0 tier" } else { "" };
    eprintln!(
        "{engine:?}{tier}: checked {n} crash points ({} with scattered unsynced writes)",
        scattered.load(Ordering::Relaxed)
    );
    let f = failures.into_inner().unwrap();
    let by_kind = kinds.into_inner().unwrap();
    assert!(
        f.is_empty(),
        "{} of {n} crash points failed ({by_kind:?}); first ones:\n{}",
        failure_count.load(Ordering::Relaxed),
        f.join("\n")
    );
}

#[test]
fn crash_points_default() {
    crash_points(8000, 250, Engine::Plain, false);
}

#[test]
fn crash_points_separated() {
    crash_points(4000, 250, Engine::Separated, false);
}

/// With the L0 tier on: flushes write mapped L0 tables, compaction moves them down
/// progressively.
#[test]
fn crash_points_l0_tier() {
    crash_points(2000, 250, Engine::Plain, true);
}

#[test]
fn crash_points_l0_tier_separated() {
    crash_points(1500, 250, Engine::Separated, true);
}

#[test]
#[ignore = "long: STRATA_CRASH_POINTS=N STRATA_CRASH_OPS=M cargo test -p strata-engine --test crash -- --ignored"]
fn crash_points_l0_tier_long() {
    for engine in [Engine::Plain, Engine::Separated] {
        crash_points(
            env_usize("STRATA_CRASH_POINTS", 30_000),
            env_usize("STRATA_CRASH_OPS", 600),
            engine,
            true,
        );
    }
}

#[test]
#[ignore = "long: STRATA_CRASH_POINTS=N STRATA_CRASH_OPS=M cargo test -p strata-engine --test crash -- --ignored"]
fn crash_points_long() {
    crash_points(
        env_usize("STRATA_CRASH_POINTS", 30_000),
        env_usize("STRATA_CRASH_OPS", 600),
        Engine::Plain,
        false,
    );
}

#[test]
#[ignore = "long: STRATA_CRASH_POINTS=N STRATA_CRASH_OPS=M cargo test -p strata-engine --test crash -- --ignored"]
fn crash_points_separated_long() {
    crash_points(
        env_usize("STRATA_CRASH_POINTS", 30_000),
        env_usize("STRATA_CRASH_OPS", 600),
        Engine::Separated,
        false,
    );
}

/// A crash right after each acknowledged synced put, with nothing else going on: the put
/// survives, torn tail or not.
#[test]
fn crash_after_each_synced_put_keeps_it() {
    for (engine, m) in [Engine::Plain, Engine::Separated]
        .into_iter()
        .flat_map(|e| (0..3).map(move |m| (e, m)))
    {
        let mode = crash_mode(m);
        let tear = format!("{engine:?} {:?}", mode.unsynced_writes);
        let mem = MemFs::with_seed(m);
        let opts = crash_opts(Arc::new(mem.clone()), engine, None);
        let mut want = Map::new();
        for round in 0..30u32 {
            let db = Db::open(mem_dir(), opts.clone()).unwrap();
            let got = common::scan_all(&db).unwrap();
            assert!(got == want, "{tear} round {round}: {}", diff(&got, &want));
            for i in 0..5u32 {
                let k = key(round * 3 + i);
                let v = value(&k, round, 200);
                db.put_opt(&SYNC, &k, &v).unwrap();
                want.insert(k, v);
            }
            // An unsynced write after the last synced one may be lost (or kept).
            let extra = key(10_000 + round);
            db.put(&extra, b"unsynced").unwrap();
            // Power loss first, so that the dying instance cannot sync anything on its way out.
            mem.crash_with(mode);
            drop(db);
            let db = Db::open(mem_dir(), opts.clone()).unwrap();
            let mut got = common::scan_all(&db).unwrap();
            if let Some(v) = got.remove(&extra) {
                assert_eq!(v, b"unsynced");
                want.insert(extra, v);
            }
            let got_all = common::scan_all(&db).unwrap();
            assert!(
                got_all == want,
                "{tear} round {round}: {}",
                diff(&got_all, &want)
            );
        }
    }
}

/// Crashes during recovery. For a sample of first crash points k, the durable state S left by
/// the first crash is saved; a clean recovery from S gives the reference content G. Then for
/// every file-system operation j of that recovery, recovery is rerun from S with a crash after
/// j operations (torn or not), and a final clean recovery must give exactly G again: a crashed
/// recovery neither loses nor invents data.
fn crash_during_recovery(first_points: u64, ops_per_workload: usize, engine: Engine) {
    let seed = 7u64;
    let ops = workload(seed, ops_per_workload, engine);
    let mem = MemFs::new();
    let n = replay(&mem, &ops, None, engine, None).fs_ops;
    let checked = AtomicUsize::new(0);
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let failed = AtomicUsize::new(0);
    let ks: Vec<u64> = (0..first_points).map(|i| i * n / first_points).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&k) = ks.get(i) else { return };
                let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    recovery_crashes(seed, &ops, k, &checked, engine)
                }))
                .unwrap_or_else(|_| Err(format!("{engine:?} first crash k={k}: panic")));
                if let Err(e) = res {
                    failed.fetch_add(1, Ordering::Relaxed);
                    let mut f = failures.lock().unwrap();
                    if f.len() < 6 {
                        f.push(e);
                    }
                }
            });
        }
    });
    let c = checked.load(Ordering::Relaxed);
    eprintln!(
        "{engine:?}: checked {c} crash points during recovery ({first_points} first crash points)"
    );
    let f = failures.into_inner().unwrap();
    assert!(
        f.is_empty(),
        "{} of {first_points} first crash points had a bad recovery crash; first ones:\n{}",
        failed.load(Ordering::Relaxed),
        f.join("\n")
    );
}

fn recovery_crashes(
    seed: u64,
    ops: &[WOp],
    k: u64,
    checked: &AtomicUsize,
    engine: Engine,
) -> Result<(), String> {
    let mem = MemFs::with_seed(seed + k);
    replay(&mem, ops, Some(k), engine, None);
    mem.crash_with(crash_mode(k));
    // After a crash every file is at its durable length: this copy is the durable state.
    let state = common::copy_files(&mem);
    let reference = |mem: &MemFs| -> Result<(Map, u64), String> {
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(mem_dir(), crash_opts(Arc::new(fault.clone()), engine, None))
            .map_err(|e| format!("{engine:?} k={k}: clean recovery failed: {e}"))?;
        let ops = fault.op_count();
        let got = common::scan_all(&db).map_err(|e| format!("k={k}: scan: {e}"))?;
        Ok((got, ops))
    };
    let (want, recovery_ops) = reference(&common::restore_files(&state))?;
    for j in 0..recovery_ops + 2 {
        let mem = common::restore_files(&state);
        let fault = FaultFs::new(Arc::new(mem.clone()));
        fault.fail_after(j);
        let opened = Db::open(mem_dir(), crash_opts(Arc::new(fault.clone()), engine, None));
        let open_result = opened.as_ref().map(|_| ()).map_err(|e| e.to_string());
        drop(opened);
        let before = mem.dump();
        mem.crash_with(crash_mode(j + 1));
        let db = Db::open(mem_dir(), crash_opts(Arc::new(mem.clone()), engine, None)).map_err(|e| {
            format!(
                "{engine:?} k={k}, crash after {j} of {recovery_ops} recovery operations: reopen failed: {e}"
            )
        })?;
        let got = common::scan_all(&db).map_err(|e| format!("k={k} j={j}: scan: {e}"))?;
        if got != want {
            return Err(format!(
                "{engine:?} k={k}, crash after {j} of {recovery_ops} recovery operations (open gave {open_result:?}): \
                 the next recovery differs from a clean one: {}\n  durable state before: {:?}\n  \
                 files at the second crash: {:?}\n  after it: {:?}\n  levels now: {:?}, recovery {:?}",
                diff(&got, &want),
                state.iter().map(|(p, d)| (p.clone(), d.len())).collect::<Vec<_>>(),
                before,
                mem.dump(),
                db.stats().levels,
                db.recovery_info()
            ));
        }
        checked.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

#[test]
fn crash_points_during_recovery() {
    crash_during_recovery(
        env_usize("STRATA_RECOVERY_CRASH_FIRST_POINTS", 120) as u64,
        250,
        Engine::Plain,
    );
}

#[test]
fn crash_points_during_recovery_separated() {
    crash_during_recovery(
        env_usize("STRATA_RECOVERY_CRASH_FIRST_POINTS", 120) as u64 / 2,
        250,
        Engine::Separated,
    );
}

/// Synced writes, then unsynced ones that reach the disk out of order (an earlier append lost,
/// a later one kept: a hole below valid records), then a power loss. Nothing unsynced was
/// promised, so open must succeed and keep every synced write and a prefix of the unsynced
/// ones. Each log record's sync watermark tells recovery that the damage lies in bytes no
/// sync covered (`docs/format/wal.md` section 3).
#[test]
fn unsynced_log_writes_reaching_disk_out_of_order_do_not_block_open() {
    const SEEDS: u64 = 60;
    let scattered = CrashMode {
        unsynced_writes: UnsyncedWrites::Scattered,
        ..CrashMode::default()
    };
    let mut refused = Vec::new();
    for engine in [Engine::Plain, Engine::Separated] {
        for seed in 0..SEEDS {
            let mem = MemFs::with_seed(seed);
            let opts = Options {
                // One memtable for the whole test: every write stays in the log.
                write_buffer_bytes: 1 << 20,
                l0_tier_bytes: 4 << 20,
                ..crash_opts(Arc::new(mem.clone()), engine, None)
            };
            let db = Db::open(mem_dir(), opts.clone()).unwrap();
            let mut history = Vec::new();
            for i in 0..16u32 {
                let k = key(i);
                let v = value(&k, 1, 300);
                let sync = i == 3;
                db.put_opt(
                    &WriteOptions {
                        sync,
                        ..Default::default()
                    },
                    &k,
                    &v,
                )
                .unwrap();
                history.push((k, v));
            }
            mem.crash_with(scattered);
            drop(db);
            let db = match Db::open(mem_dir(), opts) {
                Ok(db) => db,
                Err(e) => {
                    refused.push(format!("{engine:?} seed {seed}: {e}"));
                    continue;
                }
            };
            let got = common::scan_all(&db).unwrap();
            assert!(
                (4..=history.len()).any(|p| history[..p].iter().cloned().collect::<Map>() == got),
                "{engine:?} seed {seed}: not the state after a prefix covering the synced write: {:?}",
                got.keys().map(|k| show(k)).collect::<Vec<_>>()
            );
        }
    }
    assert!(
        refused.is_empty(),
        "{} of {} opens refused after unsynced writes reached the disk out of order:\n{}",
        refused.len(),
        2 * SEEDS,
        refused.join("\n")
    );
}

/// A database created on a fresh file system, written with synced writes, then crashed in a
/// mode where a new directory vanishes unless its parent was synced: the database directory
/// must have been made durable by the open, so reopening finds every synced write. Fails
/// while `Db::open` does not sync the parent of a directory it creates (the whole database
/// vanishes).
#[test]
fn new_database_directory_survives_a_crash() {
    for engine in [Engine::Plain, Engine::Separated] {
        let mem = MemFs::new();
        let opts = crash_opts(Arc::new(mem.clone()), engine, None);
        let db = Db::open(mem_dir(), opts.clone()).unwrap();
        let mut want = Map::new();
        for i in 0..20u32 {
            let k = key(i);
            let v = value(&k, 1, 100);
            db.put_opt(&SYNC, &k, &v).unwrap();
            want.insert(k, v);
        }
        mem.crash_with(CrashMode::adversarial());
        drop(db);
        let db = Db::open(mem_dir(), opts).unwrap();
        let got = common::scan_all(&db).unwrap();
        assert!(
            got == want,
            "{engine:?}: synced writes to a new database lost in a crash: {}",
            diff(&got, &want)
        );
    }
}

/// BUG: the number of a WAL created at a memtable switch comes from `new_file_number()` but
/// reaches the MANIFEST only with the next edit; a table number allocated for a flush that
/// has not committed yet is not recorded either. After a crash in that window the MANIFEST's
/// next file number can be below a live WAL's number. Recovery replays that WAL, writes the
/// replayed data to a table (one number), then allocates the *same number as the live WAL*
/// for its new WAL, and `create` truncates the WAL it has just replayed before the edit that
/// holds the replayed data is durable. A crash inside that window loses acknowledged synced
/// writes. (LevelDB marks every WAL number it finds as used before allocating.)
///
/// The crash test found it through timing (a flush allocated table N, a memtable switch then
/// created WAL N+1, crash before the flush committed). Here the same durable state is built
/// deterministically: the newest WAL is renamed one number up, as if a table number had been
/// allocated before it.
#[test]
fn regression_recovery_reuses_a_live_wal_number_and_a_crash_loses_synced_writes() {
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    let mem = MemFs::new();
    let db = Db::open(
        mem_dir(),
        crash_opts(Arc::new(mem.clone()), Engine::Plain, None),
    )
    .unwrap();
    let mut want = Map::new();
    for i in 0..8u32 {
        let k = key(i);
        let v = value(&k, 1, 100);
        db.put_opt(&sync, &k, &v).unwrap();
        want.insert(k, v);
    }
    mem.crash(false);
    drop(db);
    // One live WAL, not covered by any table; the MANIFEST's next file number is just above it.
    let wals: Vec<PathBuf> = mem
        .dump()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert_eq!(wals.len(), 1, "{:?}", mem.dump());
    let number: u64 = wals[0]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let base = common::copy_files(&mem);
    let mut lost = Vec::new();
    // The distance to the MANIFEST's next file number is not visible through the API: try a
    // few shifts (each builds a state the engine itself can leave behind).
    for shift in 1..=4u64 {
        let mem = common::restore_files(&base);
        let moved = mem_dir().join(format!("{:06}.log", number + shift));
        mem.rename(&wals[0], &moved).unwrap();
        mem.sync_dir(&mem_dir()).unwrap();
        let state = common::copy_files(&mem);
        // A clean recovery of that state is fine...
        {
            let mem = common::restore_files(&state);
            let db = Db::open(
                mem_dir(),
                crash_opts(Arc::new(mem.clone()), Engine::Plain, None),
            )
            .unwrap();
            let got = common::scan_all(&db).unwrap();
            assert!(got == want, "clean recovery: {}", diff(&got, &want));
        }
        // ...but a recovery that crashes after one of its first operations must be too.
        for j in 0..40u64 {
            let mem = common::restore_files(&state);
            let fault = FaultFs::new(Arc::new(mem.clone()));
            fault.fail_after(j);
            drop(Db::open(
                mem_dir(),
                crash_opts(Arc::new(fault.clone()), Engine::Plain, None),
            ));
            let files_at_crash = mem.dump();
            mem.crash(false);
            let db = Db::open(
                mem_dir(),
                crash_opts(Arc::new(mem.clone()), Engine::Plain, None),
            )
            .unwrap();
            let got = common::scan_all(&db).unwrap();
            if got != want {
                lost.push(format!(
                    "WAL {number} renamed to {}, recovery crashed after {j} operations: {}; \
                     files at the crash {files_at_crash:?}",
                    number + shift,
                    diff(&got, &want)
                ));
            }
        }
    }
    assert!(
        lost.is_empty(),
        "{} bad recoveries:\n{}",
        lost.len(),
        lost.join("\n")
    );
}
