//! Crash points under concurrent writers (the crash test of `crash.rs` with 4 writer threads).
//!
//! Four threads write at once, each its own keys (synced and unsynced puts, deletes, batches,
//! an occasional flush, and with separation an occasional GC), so their records are
//! interleaved in one commit log by the commit pipeline. A fault-free run counts the
//! file-system operations N; then for crash points k sampled in 0..N the workload is rerun on
//! a fresh MemFs whose FaultFs fails every operation from the (k+1)-th on (the interleaving
//! differs from run to run, so k is only a point in time), each thread stops at its first
//! error, the machine loses power (`crash_mode(k)`: unsynced writes lost, torn or scattered)
//! and the database is reopened. For each thread the recovered keys must be the state after
//! some prefix of its own history, covering its last acknowledged durable op (a synced
//! write or a flush) and nothing past the op that failed. The log is one sequence, so what a
//! crash keeps of it is a prefix of the global order, hence a prefix of each thread's.
//!
//! Default run (prints "checked N crash points"):
//!     cargo test -p strata-engine --test crash_concurrent -- --nocapture
//! Long run (STRATA_CONC_CRASH_POINTS points per engine, default 5,000):
//!     STRATA_CONC_CRASH_POINTS=5000 cargo test -p strata-engine --test crash_concurrent \
//!         -- --ignored --nocapture

mod common;

use common::{crash_mode, diff, env_usize, mem_dir, value, Engine};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_engine::io::{FaultFs, Fs, MemFs};
use strata_engine::{Db, Options, WriteBatch, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

const THREADS: usize = 4;
const OPS_PER_THREAD: usize = 60;
const KEYS_PER_THREAD: u32 = 20;

#[derive(Clone, Debug)]
enum WOp {
    Put(Vec<u8>, Vec<u8>, bool),
    Delete(Vec<u8>, bool),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>, bool),
    Flush,
    Gc,
}

impl WOp {
    /// Whether an acknowledged op makes itself and every earlier op of its thread durable.
    fn is_durable_point(&self) -> bool {
        match self {
            WOp::Put(_, _, sync) | WOp::Delete(_, sync) | WOp::Batch(_, sync) => *sync,
            WOp::Flush => true,
            WOp::Gc => false,
        }
    }

    fn apply_model(&self, m: &mut Map) {
        match self {
            WOp::Put(k, v, _) => {
                m.insert(k.clone(), v.clone());
            }
            WOp::Delete(k, _) => {
                m.remove(k);
            }
            WOp::Batch(items, _) => {
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
            WOp::Put(k, v, sync) => db.put_opt(&wo(*sync), k, v),
            WOp::Delete(k, sync) => db.delete_opt(&wo(*sync), k),
            WOp::Batch(items, sync) => {
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

fn tkey(t: usize, i: u32) -> Vec<u8> {
    format!("t{t}-key{i:04}").into_bytes()
}

/// Thread `t`'s ops: its own keys only.
fn workload(seed: u64, t: usize, engine: Engine) -> Vec<WOp> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed * 31 + t as u64);
    (0..OPS_PER_THREAD)
        .map(|i| {
            let sync = rng.gen_bool(0.2);
            let tag = (seed as u32) * 100_000 + (t * OPS_PER_THREAD + i) as u32;
            let k = tkey(t, rng.gen_range(0..KEYS_PER_THREAD));
            match rng.gen_range(0..100) {
                0..=54 => {
                    let v = value(&k, tag, rng.gen_range(20..300));
                    WOp::Put(k, v, sync)
                }
                55..=69 => WOp::Delete(k, sync),
                70..=97 => WOp::Batch(
                    (0..rng.gen_range(2..5))
                        .map(|j| {
                            let k = tkey(t, rng.gen_range(0..KEYS_PER_THREAD));
                            let v = rng
                                .gen_bool(0.75)
                                .then(|| value(&k, tag * 8 + j, rng.gen_range(0..200)));
                            (k, v)
                        })
                        .collect(),
                    sync,
                ),
                _ if engine == Engine::Separated && rng.gen_bool(0.5) => WOp::Gc,
                _ => WOp::Flush,
            }
        })
        .collect()
}

/// `models[i]` = the thread's keys after its first `i` ops.
fn prefix_models(ops: &[WOp]) -> Vec<Map> {
    let mut m = Map::new();
    let mut out = vec![m.clone()];
    for op in ops {
        op.apply_model(&mut m);
        out.push(m.clone());
    }
    out
}

fn options(fs: Arc<dyn Fs>, engine: Engine) -> Options {
    let plain = Options {
        write_buffer_bytes: 4096,
        target_file_size_bytes: 4096,
        max_bytes_for_level_base: 8 << 10,
        level_size_multiplier: 2,
        ..common::tiny_opts(fs)
    };
    engine.options(plain)
}

/// What one thread of a replay did.
#[derive(Clone, Copy, Debug, Default)]
struct ThreadRun {
    /// Ops acknowledged (the thread stops at its first error).
    acked: usize,
    /// Ops up to and including the last acknowledged durable point.
    durable: usize,
    /// An op was attempted and failed: it may or may not survive.
    failed: bool,
}

/// Runs the threads' workloads at once; `crash_after`: fail every file-system operation after
/// that many. Returns each thread's run, whether the close was clean, and the operations
/// counted.
fn replay(
    mem: &MemFs,
    ops: &[Vec<WOp>],
    crash_after: Option<u64>,
    engine: Engine,
) -> (Vec<ThreadRun>, bool, u64) {
    let fault = FaultFs::new(Arc::new(mem.clone()));
    if let Some(k) = crash_after {
        fault.fail_after(k);
    }
    let mut runs = vec![ThreadRun::default(); ops.len()];
    let mut clean = false;
    if let Ok(db) = Db::open(mem_dir(), options(Arc::new(fault.clone()), engine)) {
        std::thread::scope(|s| {
            let handles: Vec<_> = ops
                .iter()
                .map(|ops| {
                    let db = &db;
                    s.spawn(move || {
                        let mut r = ThreadRun::default();
                        for (i, op) in ops.iter().enumerate() {
                            if op.apply_db(db).is_err() {
                                r.failed = true;
                                break;
                            }
                            r.acked = i + 1;
                            if op.is_durable_point() {
                                r.durable = i + 1;
                            }
                        }
                        r
                    })
                })
                .collect();
            for (run, h) in runs.iter_mut().zip(handles) {
                *run = h.join().unwrap();
            }
        });
        if runs.iter().any(|r| r.failed) {
            drop(db);
        } else {
            clean = db.close().is_ok();
        }
    }
    (runs, clean, fault.op_count())
}

/// The keys of thread `t` in `m`.
fn keys_of(m: &Map, t: usize) -> Map {
    let prefix = format!("t{t}-");
    m.iter()
        .filter(|(k, _)| k.starts_with(prefix.as_bytes()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Runs crash point `k`; an error describes what went wrong.
fn check_point(
    seed: u64,
    ops: &[Vec<WOp>],
    models: &[Vec<Map>],
    k: u64,
    engine: Engine,
) -> Result<(), String> {
    let mode = crash_mode(k);
    let mem = MemFs::with_seed(seed * 1_000_003 + k);
    let (runs, clean, _) = replay(&mem, ops, Some(k), engine);
    mem.crash_with(mode);
    let ctx = format!(
        "{engine:?} seed {seed} crash point k={k} {:?}: threads {runs:?}, clean close {clean}",
        mode.unsynced_writes
    );
    let db = Db::open(mem_dir(), options(Arc::new(mem.clone()), engine))
        .map_err(|e| format!("{ctx}: reopen after crash failed: {e}"))?;
    let got = common::scan_all(&db).map_err(|e| format!("{ctx}: scan failed: {e}"))?;
    for (t, r) in runs.iter().enumerate() {
        let mine = keys_of(&got, t);
        let (lo, hi) = if clean {
            (r.acked, r.acked)
        } else if r.failed {
            (r.durable, r.acked + 1)
        } else {
            (r.durable, r.acked)
        };
        if !(lo..=hi).any(|p| models[t][p] == mine) {
            let matches: Vec<usize> = (0..models[t].len())
                .filter(|&p| models[t][p] == mine)
                .collect();
            return Err(format!(
                "{ctx}: thread {t}'s keys are not its state after any allowed prefix \
                 {lo}..={hi} (exact matches at {matches:?}); against prefix {lo}: {}",
                diff(&mine, &models[t][lo])
            ));
        }
    }
    Ok(())
}

fn crash_points(target: usize, engine: Engine) {
    let mut checked = 0usize;
    let mut failures = Vec::new();
    let mut seed = 1u64;
    while checked < target {
        let ops: Vec<Vec<WOp>> = (0..THREADS).map(|t| workload(seed, t, engine)).collect();
        let models: Vec<Vec<Map>> = ops.iter().map(|o| prefix_models(o)).collect();
        let mem = MemFs::new();
        let (runs, clean, n) = replay(&mem, &ops, None, engine);
        assert!(
            clean && runs.iter().all(|r| r.acked == OPS_PER_THREAD),
            "seed {seed}: the workload fails without faults: {runs:?}"
        );
        let db = Db::open(mem_dir(), options(Arc::new(mem.clone()), engine)).unwrap();
        let got = common::scan_all(&db).unwrap();
        for (t, m) in models.iter().enumerate() {
            assert!(keys_of(&got, t) == m[OPS_PER_THREAD]);
        }
        drop(db);
        // A sample of points per seed, spread over the run.
        let points = 50u64.min((target - checked) as u64);
        for i in 0..points {
            let k = i * n / points + seed % 7;
            match check_point(seed, &ops, &models, k, engine) {
                Ok(()) => {}
                Err(e) => {
                    if failures.len() < 6 {
                        failures.push(e);
                    } else {
                        failures.push(String::new());
                    }
                }
            }
            checked += 1;
        }
        seed += 1;
    }
    eprintln!("{engine:?}: checked {checked} crash points under {THREADS} writer threads");
    assert!(
        failures.is_empty(),
        "{} of {checked} crash points failed; first ones:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn concurrent_crash_points() {
    crash_points(1500, Engine::Plain);
}

#[test]
fn concurrent_crash_points_separated() {
    crash_points(800, Engine::Separated);
}

#[test]
#[ignore = "long: STRATA_CONC_CRASH_POINTS=N cargo test -p strata-engine --test crash_concurrent -- --ignored"]
fn concurrent_crash_points_long() {
    let n = env_usize("STRATA_CONC_CRASH_POINTS", 5_000);
    crash_points(n, Engine::Plain);
    crash_points(n, Engine::Separated);
}
