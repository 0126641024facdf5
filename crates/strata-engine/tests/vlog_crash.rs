//! Crash points through value-log writes and GC, on MemFs + FaultFs.
//!
//! Phase A (no faults) loads a database whose value log has garbage (overwrites, deletes,
//! a flush and a full compaction). Phase B runs GC, writes (synced and not), flushes and
//! more GC with a crash point: the first `k` mutating or syncing file operations succeed,
//! every later one fails, then the machine loses power (`MemFs::crash_with`: by `k % 3`,
//! unsynced writes are lost, the last one is torn, or they are scattered with holes and
//! unsynced new directories vanish). Enumerating `k` over every operation of phase B crashes at
//! each GC step: copying live values, syncing the log that makes the new pointers durable,
//! the MANIFEST edit marking the file obsolete, the removal, and the edit forgetting it.
//!
//! After each crash the database must open, hold exactly the state after some prefix of the
//! acknowledged operations that covers every synced write, read every value (no dangling
//! pointer), and after a full compaction and one GC hold no value-log file below the
//! durable head that no key points at.
//!
//! Default: `cargo test -p strata-engine --test vlog_crash -- --nocapture`
//! Long run (more seeds): `STRATA_VLOG_CRASH_SEEDS=20 cargo test -p strata-engine --test
//! vlog_crash -- --ignored --nocapture`

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use strata_engine::io::{FaultFs, Fs, MemFs};
use strata_engine::{Db, Options, ReadOptions, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Odd seeds write the value log without a buffer (the default: each group reaches the file
/// at once, separated values straight from the batch), even seeds through a 1 KiB buffer.
fn options(fs: Arc<dyn Fs>, seed: u64) -> Options {
    Options {
        fs,
        write_buffer_bytes: 8 << 10,
        target_file_size_bytes: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        l0_compaction_trigger: 2,
        block_size_bytes: 512,
        background_threads: 1,
        sep_threshold_bytes: 48,
        vlog_file_bytes: 3 << 10,
        vlog_buffer_bytes: if seed % 2 == 1 { 0 } else { 1 << 10 },
        gc_garbage_ratio: 0.25,
        gc_interval_ms: 0,
        vlog_prefetch: 4,
        ..Options::default()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>, bool),
    Delete(Vec<u8>),
    Flush,
    Gc,
}

impl Op {
    fn apply_model(&self, m: &mut Map) {
        match self {
            Op::Put(k, v, _) => {
                m.insert(k.clone(), v.clone());
            }
            Op::Delete(k) => {
                m.remove(k);
            }
            Op::Flush | Op::Gc => {}
        }
    }

    fn durable(&self) -> bool {
        matches!(self, Op::Put(_, _, true) | Op::Flush)
    }

    fn run(&self, db: &Db) -> strata_engine::Result<()> {
        match self {
            Op::Put(k, v, sync) => db.put_opt(
                &WriteOptions {
                    sync: *sync,
                    disable_wal: false,
                },
                k,
                v,
            ),
            Op::Delete(k) => db.delete(k),
            Op::Flush => db.flush(),
            Op::Gc => db.gc().map(|_| ()),
        }
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

fn val(rng: &mut StdRng, tag: &str) -> Vec<u8> {
    let mut v = tag.as_bytes().to_vec();
    let len = if rng.gen_bool(0.2) {
        rng.gen_range(0..40)
    } else {
        rng.gen_range(60..260)
    };
    v.resize(len.max(v.len()), b'.');
    v
}

/// Phase A: a loaded database with garbage in its value log.
fn phase_a(db: &Db, rng: &mut StdRng, m: &mut Map) {
    for round in 0..3 {
        for i in 0..30u64 {
            if round > 0 && rng.gen_bool(0.4) {
                continue;
            }
            let op = if round == 2 && i % 5 == 0 {
                Op::Delete(key(i))
            } else {
                Op::Put(key(i), val(rng, &format!("a{round}.{i}")), i % 7 == 0)
            };
            op.run(db).unwrap();
            op.apply_model(m);
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
}

/// Phase B's operations.
fn phase_b_ops(rng: &mut StdRng) -> Vec<Op> {
    let mut ops = vec![Op::Gc];
    for step in 0..4 {
        for j in 0..6 {
            let k = key(rng.gen_range(0..36));
            if rng.gen_bool(0.15) {
                ops.push(Op::Delete(k));
            } else {
                ops.push(Op::Put(
                    k,
                    val(rng, &format!("b{step}.{j}")),
                    rng.gen_bool(0.3),
                ));
            }
        }
        ops.push(if step % 2 == 0 { Op::Flush } else { Op::Gc });
    }
    ops.push(Op::Gc);
    ops
}

/// Runs phases A and B with a crash point after `k` operations of phase B (`None`: no
/// crash). Returns the fault file system's view, the acknowledged ops of B, the index of
/// the op that failed, and the model after A.
struct Outcome {
    mem: MemFs,
    acked: Vec<Op>,
    failed_at: Option<usize>,
    model_a: Map,
    ops_b: u64,
}

fn run_once(seed: u64, crash_after: Option<u64>) -> Outcome {
    let mem = MemFs::with_seed(seed);
    let ffs = FaultFs::new(Arc::new(mem.clone()));
    let dir = Path::new("/db");
    let mut rng = StdRng::seed_from_u64(seed);
    let db = Db::open(dir, options(Arc::new(ffs.clone()), seed)).unwrap();
    let mut model_a = Map::new();
    phase_a(&db, &mut rng, &mut model_a);
    db.wait_idle().unwrap();
    let start = ffs.op_count();
    if let Some(k) = crash_after {
        ffs.fail_after(k);
    }
    let ops = phase_b_ops(&mut rng);
    let mut acked = Vec::new();
    let mut failed_at = None;
    for (i, op) in ops.iter().enumerate() {
        match op.run(&db) {
            Ok(()) => acked.push(op.clone()),
            Err(_) => {
                failed_at = Some(i);
                acked.push(op.clone()); // may or may not have happened
                break;
            }
        }
    }
    if crash_after.is_none() {
        db.wait_idle().unwrap();
    }
    let ops_b = ffs.op_count() - start;
    drop(db);
    Outcome {
        mem,
        acked,
        failed_at,
        model_a,
        ops_b,
    }
}

fn scan_all(db: &Db, ctx: &str) -> Map {
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut out = Map::new();
    while it.valid() {
        let v = it
            .try_value()
            .unwrap_or_else(|e| panic!("{ctx}: dangling or damaged value: {e}"))
            .to_vec();
        out.insert(it.key().to_vec(), v);
        it.next();
    }
    it.status().unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    out
}

/// Checks one crash: returns whether the failing operation was a GC.
fn check_crash(seed: u64, k: u64) -> bool {
    let o = run_once(seed, Some(k));
    let mode = common::crash_mode(k);
    o.mem.crash_with(mode);
    let ctx = format!(
        "seed {seed} crash after {k} ops (failed op {:?})",
        o.failed_at
    );
    let dir = Path::new("/db");
    let db = Db::open(dir, options(Arc::new(o.mem.clone()), seed))
        .unwrap_or_else(|e| panic!("{ctx} ({:?}): open failed: {e}", mode.unsynced_writes));
    let got = scan_all(&db, &ctx);
    for (k, v) in &got {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{ctx}: get {k:?}");
    }
    // The state is the model after some prefix P of the acknowledged ops, with P covering
    // every durable one; the failed op (last in `acked`) may be in it or not.
    let last_durable = o
        .acked
        .iter()
        .enumerate()
        .filter(|(i, op)| op.durable() && Some(*i) != o.failed_at)
        .map(|(i, _)| i + 1)
        .max()
        .unwrap_or(0);
    let mut m = o.model_a.clone();
    let mut matched = false;
    for p in 0..=o.acked.len() {
        if p > 0 {
            o.acked[p - 1].apply_model(&mut m);
        }
        if p >= last_durable && m == got {
            matched = true;
            break;
        }
    }
    assert!(
        matched,
        "{ctx}: state is no allowed prefix (last durable op {last_durable} of {})",
        o.acked.len()
    );
    // No orphan after compaction and one GC.
    db.compact_range(None, None).unwrap();
    db.gc()
        .unwrap_or_else(|e| panic!("{ctx}: gc after reopen: {e}"));
    let stats = db.stats();
    let used: BTreeSet<u64> = got
        .keys()
        .filter_map(|k| db.value_location(k).unwrap().map(|p| p.file))
        .collect();
    for (path, _) in o.mem.dump() {
        let name = path.file_name().unwrap().to_str().unwrap();
        if let Some(n) = name.strip_suffix(".vlog") {
            let n: u64 = n.parse().unwrap();
            assert!(
                n >= stats.vlog_head_file || used.contains(&n),
                "{ctx}: orphan value-log file {name}\n{stats}"
            );
        }
    }
    assert_eq!(scan_all(&db, &ctx), got, "{ctx}: GC changed the contents");
    db.close().unwrap();
    matches!(o.failed_at.map(|i| &o.acked[i]), Some(Op::Gc))
}

fn enumerate(seed: u64) -> (u64, u64) {
    let clean = run_once(seed, None);
    assert!(clean.failed_at.is_none());
    let n = clean.ops_b;
    let mut in_gc = 0;
    for k in 0..=n {
        if check_crash(seed, k) {
            in_gc += 1;
        }
    }
    (n, in_gc)
}

#[test]
fn crash_points_through_gc() {
    let mut total = 0;
    let mut in_gc = 0;
    for seed in [1, 2, 3, 4, 5, 6] {
        let (n, g) = enumerate(seed);
        total += n;
        in_gc += g;
    }
    println!("checked {total} crash points, {in_gc} of them inside GC");
    assert!(in_gc >= 10, "too few crash points fell inside GC: {in_gc}");
}

#[test]
#[ignore]
fn crash_points_through_gc_long() {
    let seeds = std::env::var("STRATA_VLOG_CRASH_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20u64);
    let mut total = 0;
    for seed in 100..100 + seeds {
        total += enumerate(seed).0;
    }
    println!("checked {total} crash points");
}
