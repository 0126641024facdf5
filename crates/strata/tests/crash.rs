//! Crash test of cross-shard batches on the crash-simulating file system.
//!
//! A seeded sequence of synced operations (cross-shard batches over a few hot keys, so parts
//! overwrite each other, and single-shard puts) runs against a database on `FaultFs` over
//! `MemFs`; the file system dies after `k` mutating operations (every `k` up to the workload's
//! count: crashes between the shards' part writes, around the commit record, in flushes and
//! compactions), the machine "loses power" (`MemFs::crash`, with and without a torn last
//! write), and the database is reopened. The recovered contents must equal the model after a
//! prefix of the operations that includes every acknowledged one: no torn batch, no lost
//! acknowledged write, no hole.
//!
//! Long version (more seeds, longer workloads):
//! `cargo test -p strata --release --test crash -- --ignored`

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use strata::{Db, DbOptions, ScanMode, WriteBatch, WriteOptions};
use strata_engine::io::{FaultFs, Fs, MemFs};

const SHARDS: usize = 4;

#[derive(Clone, Debug)]
enum Op {
    /// A batch of puts (Some) and deletes (None).
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Put(Vec<u8>, Vec<u8>),
}

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn workload(seed: u64, n: usize) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let key = |rng: &mut StdRng| format!("key{:02}", rng.gen_range(0..16)).into_bytes();
    (0..n)
        .map(|i| {
            let value = format!("op{i}-{}", "x".repeat(rng.gen_range(0..200))).into_bytes();
            if rng.gen_bool(0.75) {
                let len = rng.gen_range(2..8);
                let ops = (0..len)
                    .map(|_| {
                        let k = key(&mut rng);
                        let v = (!rng.gen_bool(0.2)).then(|| value.clone());
                        (k, v)
                    })
                    .collect();
                Op::Batch(ops)
            } else {
                Op::Put(key(&mut rng), value)
            }
        })
        .collect()
}

/// The state after each prefix of `ops`: `states[p]` after the first `p`.
fn prefix_states(ops: &[Op]) -> Vec<State> {
    let mut s = State::new();
    let mut out = vec![s.clone()];
    for op in ops {
        match op {
            Op::Batch(kvs) => {
                for (k, v) in kvs {
                    match v {
                        Some(v) => s.insert(k.clone(), v.clone()),
                        None => s.remove(k),
                    };
                }
            }
            Op::Put(k, v) => {
                s.insert(k.clone(), v.clone());
            }
        }
        out.push(s.clone());
    }
    out
}

fn opts(fs: Arc<dyn Fs>) -> DbOptions {
    let mut o = DbOptions {
        shards: Some(SHARDS),
        ..DbOptions::default()
    };
    o.engine.fs = fs;
    o.engine.background_threads = 1;
    // Small memtables so flushes (and their crash points) happen during the workload.
    o.engine.write_buffer_bytes = 8 << 10;
    o
}

/// Runs `ops` until one fails; returns how many were acknowledged.
fn run(db: &Db, ops: &[Op]) -> usize {
    let sync = WriteOptions { sync: true };
    for (i, op) in ops.iter().enumerate() {
        let r = match op {
            Op::Batch(kvs) => {
                let mut b = WriteBatch::new();
                for (k, v) in kvs {
                    match v {
                        Some(v) => b.put(k, v),
                        None => b.delete(k),
                    };
                }
                db.write_opt(&sync, b)
            }
            Op::Put(k, v) => db.put_opt(&sync, k, v),
        };
        if r.is_err() {
            return i;
        }
    }
    ops.len()
}

fn contents(db: &Db) -> State {
    db.scan(b"", usize::MAX, ScanMode::Merged)
        .expect("scan after recovery")
        .into_iter()
        .collect()
}

/// One crash point: returns whether the crash point was reached.
fn crash_once(ops: &[Op], states: &[State], k: u64, tear: bool, seed: u64) -> bool {
    let mem = MemFs::with_seed(seed ^ k);
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", opts(Arc::new(fault.clone()))).expect("first open");
    fault.fail_after(k);
    let acked = run(&db, ops);
    drop(db);
    let reached = fault.is_dead();
    mem.crash(tear);

    let db = Db::open("/db", opts(Arc::new(mem.clone())))
        .unwrap_or_else(|e| panic!("reopen after crash point {k} (tear {tear}): {e}"));
    let got = contents(&db);
    let candidates = acked..=(acked + 1).min(ops.len());
    let p = candidates.clone().find(|&p| states[p] == got);
    assert!(
        p.is_some(),
        "crash point {k} (tear {tear}): recovered state matches no prefix in {candidates:?} \
         ({acked} acknowledged); torn batch or lost write.\nrecovered: {got:?}\nexpected \
         {:?}\nor {:?}\nrecovery: {:?}",
        states[acked],
        states.get(acked + 1),
        db.recovery_report(),
    );
    // The recovered database works, and a second recovery changes nothing.
    let mut b = WriteBatch::new();
    b.put(b"after-a", b"1")
        .put(b"after-b", b"2")
        .put(b"after-c", b"3");
    db.write_opt(&WriteOptions { sync: true }, b)
        .expect("cross-shard batch after recovery");
    db.close().expect("close after recovery");
    let db = Db::open("/db", opts(Arc::new(mem.clone()))).expect("second reopen");
    let mut again = contents(&db);
    for k in [&b"after-a"[..], b"after-b", b"after-c"] {
        assert!(again.remove(k).is_some(), "batch after recovery lost");
    }
    assert_eq!(
        again, got,
        "second recovery changed the state (crash point {k})"
    );
    assert!(
        db.recovery_report().rolled_back.is_empty(),
        "nothing to roll back after a clean close"
    );
    reached
}

/// Every crash point of `ops`, with and without torn writes. Returns the number of crash
/// points that were reached.
fn crash_all(seed: u64, n_ops: usize) -> usize {
    let ops = workload(seed, n_ops);
    let states = prefix_states(&ops);
    // Count the workload's mutating operations once without faults.
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", opts(Arc::new(fault.clone()))).unwrap();
    let before = fault.op_count();
    assert_eq!(run(&db, &ops), ops.len());
    let total = fault.op_count() - before;
    drop(db);
    let mut reached = 0;
    for k in 0..total {
        for tear in [false, true] {
            if crash_once(&ops, &states, k, tear, seed) {
                reached += 1;
            }
        }
    }
    reached
}

#[test]
fn cross_shard_batches_survive_every_crash_point() {
    let reached = crash_all(1, 64);
    assert!(
        reached >= 1000,
        "only {reached} crash points reached; lengthen the workload"
    );
}

#[test]
#[ignore = "long: cargo test -p strata --release --test crash -- --ignored"]
fn cross_shard_batches_survive_every_crash_point_long() {
    for seed in 2..8 {
        let reached = crash_all(seed, 150);
        assert!(reached >= 2000, "seed {seed}: {reached} crash points");
    }
}
