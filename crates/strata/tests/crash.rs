//! Crash test of cross-shard batches on the crash-simulating file system.
//!
//! A seeded sequence of synced operations (cross-shard batches over a few hot keys, so parts
//! overwrite each other, and single-shard puts) runs against a database on `FaultFs` over
//! `MemFs`; the file system dies after `k` mutating operations (every `k` up to the workload's
//! count: crashes between the shards' part writes, around the commit record, in flushes and
//! compactions), the machine "loses power" (unsynced writes lost, the last one torn, or
//! scattered: each survives, is lost or is torn, leaving holes), and the database is
//! reopened; a refused open is a failure. The recovered contents must equal the model after a
//! prefix of the operations that includes every acknowledged one: no torn batch, no lost
//! acknowledged write, no hole.
//!
//! Long version (more seeds, longer workloads):
//! `cargo test -p strata --release --test crash -- --ignored`; with
//! `STRATA_CRASH_MODE=scattered` every crash scatters the unsynced writes.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use strata::{Db, DbOptions, ScanMode, WriteBatch, WriteOptions};
use strata_engine::io::{CrashMode, FaultFs, Fs, MemFs, UnsyncedWrites};

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
/// How the power loss treats unsynced writes: lost, the last one torn, and scattered (the
/// most hostile: directories not synced into their parent vanish too); only scattered with
/// `STRATA_CRASH_MODE=scattered`.
fn crash_modes() -> Vec<CrashMode> {
    match std::env::var("STRATA_CRASH_MODE").as_deref() {
        Ok("scattered") => vec![CrashMode::adversarial()],
        Ok("") | Ok("mixed") | Err(_) => vec![
            CrashMode::tear_last(false),
            CrashMode::tear_last(true),
            CrashMode::adversarial(),
        ],
        Ok(m) => panic!("STRATA_CRASH_MODE={m}: expected \"scattered\" or \"mixed\""),
    }
}

fn crash_once(ops: &[Op], states: &[State], k: u64, mode: CrashMode, seed: u64) -> bool {
    let tear = mode.unsynced_writes;
    let mem = MemFs::with_seed(seed ^ k);
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", opts(Arc::new(fault.clone()))).expect("first open");
    fault.fail_after(k);
    let acked = run(&db, ops);
    drop(db);
    let reached = fault.is_dead();
    mem.crash_with(mode);

    let db = Db::open("/db", opts(Arc::new(mem.clone())))
        .unwrap_or_else(|e| panic!("reopen after crash point {k} ({tear:?}): {e}"));
    let got = contents(&db);
    let candidates = acked..=(acked + 1).min(ops.len());
    let p = candidates.clone().find(|&p| states[p] == got);
    assert!(
        p.is_some(),
        "crash point {k} ({tear:?}): recovered state matches no prefix in {candidates:?} \
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

/// Every crash point of `ops`, in each of `crash_modes`. Returns the number of crash points
/// that were reached, and how many of those scattered the unsynced writes.
fn crash_all(seed: u64, n_ops: usize) -> (usize, usize) {
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
    let (mut reached, mut scattered) = (0, 0);
    for k in 0..total {
        for mode in crash_modes() {
            if crash_once(&ops, &states, k, mode, seed) {
                reached += 1;
                if mode.unsynced_writes == UnsyncedWrites::Scattered {
                    scattered += 1;
                }
            }
        }
    }
    eprintln!(
        "seed {seed}: {n_ops} ops, {reached} crash points reached ({scattered} with scattered \
         unsynced writes)"
    );
    (reached, scattered)
}

#[test]
fn cross_shard_batches_survive_every_crash_point() {
    let (reached, scattered) = crash_all(1, 64);
    assert!(
        scattered > 0,
        "no crash point scattered the unsynced writes"
    );
    assert!(
        reached >= 500 * crash_modes().len(),
        "only {reached} crash points reached; lengthen the workload"
    );
}

#[test]
#[ignore = "long: cargo test -p strata --release --test crash -- --ignored"]
fn cross_shard_batches_survive_every_crash_point_long() {
    // Size knobs (the defaults are the long run; `scripts/ignored-reduced.sh` turns them down).
    let knob = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let seeds = knob("STRATA_SHARD_CRASH_SEEDS", 6) as u64;
    let ops = knob("STRATA_SHARD_CRASH_OPS", 150);
    let (mut total, mut total_scattered) = (0, 0);
    for seed in 2..2 + seeds {
        let (reached, scattered) = crash_all(seed, ops);
        // The full workload reaches over 1000 points per crash mode; a shorter one
        // proportionally fewer.
        assert!(
            reached >= 1000 * crash_modes().len() * ops / 150,
            "seed {seed}: {reached} crash points"
        );
        total += reached;
        total_scattered += scattered;
    }
    eprintln!(
        "checked {total} crash points ({total_scattered} with scattered unsynced writes) over \
         {seeds} seeds"
    );
}

/// A new sharded database's directory is synced into its parent when it is created: a power
/// loss that drops directories not synced into their parent keeps it, and every synced write
/// in it (found by the scattered crash mode: the root was created without that sync, and the
/// whole database vanished).
#[test]
fn new_sharded_database_directory_survives_a_crash() {
    let mem = MemFs::new();
    let db = Db::open("/data/db", opts(Arc::new(mem.clone()))).unwrap();
    let mut b = WriteBatch::new();
    for i in 0..8 {
        b.put(format!("key{i}").as_bytes(), b"v");
    }
    db.write_opt(&WriteOptions { sync: true }, b).unwrap();
    mem.crash_with(CrashMode::adversarial());
    drop(db);
    let db = Db::open("/data/db", opts(Arc::new(mem.clone()))).unwrap();
    assert_eq!(
        contents(&db).len(),
        8,
        "synced writes of a new database lost"
    );
}

/// Concurrent transfers: `THREADS` threads each run `per_thread` cross-shard batches that move
/// one unit between two of 8 accounts and write the batch's marker key; parts of different
/// threads' batches queue behind each other, so workers apply several in one engine write.
/// The file system dies after `k` mutating operations and loses power. After recovery every
/// acknowledged batch is present, each thread's batches are a prefix of its sequence, and the
/// balances are exactly what the present batches made them (no batch half applied).
fn concurrent_transfers_crash_once(k: u64, tear: bool, per_thread: usize) -> bool {
    const THREADS: usize = 6;
    const ACCOUNTS: usize = 8;
    let transfer = |t: usize, i: usize| {
        let from = (t * 7 + i * 3) % ACCOUNTS;
        let to = (from + 1 + (t + i) % (ACCOUNTS - 1)) % ACCOUNTS;
        (from, to)
    };
    let account = |a: usize| format!("acct{a}").into_bytes();
    let marker = |t: usize, i: usize| format!("m{t}-{i:04}").into_bytes();
    let mem = MemFs::with_seed(k.wrapping_mul(31) ^ u64::from(tear));
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", opts(Arc::new(fault.clone()))).expect("first open");
    let mut b = WriteBatch::new();
    for a in 0..ACCOUNTS {
        b.put(&account(a), b"1000");
    }
    db.write_opt(&WriteOptions { sync: true }, b)
        .expect("setup");
    fault.fail_after(k);
    let db = Arc::new(db);
    let acked: Vec<usize> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let db = db.clone();
                s.spawn(move || {
                    for i in 0..per_thread {
                        let (from, to) = transfer(t, i);
                        // Balances are read and written blindly as deltas in the marker:
                        // the check recomputes them from the markers present.
                        let mut b = WriteBatch::new();
                        b.put(&marker(t, i), format!("{from}>{to}").as_bytes());
                        b.put(&account(from), format!("-{t}-{i}").as_bytes());
                        b.put(&account(to), format!("+{t}-{i}").as_bytes());
                        if db.write_opt(&WriteOptions { sync: true }, b).is_err() {
                            return i;
                        }
                    }
                    per_thread
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    drop(db);
    let reached = fault.is_dead();
    mem.crash(tear);
    let db = Db::open("/db", opts(Arc::new(mem.clone())))
        .unwrap_or_else(|e| panic!("reopen after crash point {k} (tear {tear}): {e}"));
    let got = contents(&db);
    // Each thread's batches: a prefix covering every acknowledged one.
    let mut present = Vec::new();
    for (t, &acked) in acked.iter().enumerate() {
        let n = (0..per_thread)
            .take_while(|&i| got.contains_key(&marker(t, i)))
            .count();
        assert!(
            n >= acked,
            "crash point {k} (tear {tear}): thread {t} acknowledged {acked} batches, {n} survived"
        );
        for i in n..per_thread {
            assert!(
                !got.contains_key(&marker(t, i)),
                "crash point {k} (tear {tear}): thread {t} has a hole before batch {i}"
            );
        }
        present.extend((0..n).map(|i| (t, i)));
    }
    // Every account holds the value its last present writer put; a batch that is present
    // must have left both its accounts (unless a later present batch overwrote them), and
    // an absent batch none.
    for a in 0..ACCOUNTS {
        let v = got.get(&account(a)).expect("account survives");
        if v.as_slice() == b"1000" {
            continue;
        }
        let s = String::from_utf8(v.clone()).unwrap();
        let (t, i) = {
            let mut it = s[1..].split('-');
            let t: usize = it.next().unwrap().parse().unwrap();
            let i: usize = it.next().unwrap().parse().unwrap();
            (t, i)
        };
        assert!(
            present.contains(&(t, i)),
            "crash point {k} (tear {tear}): account {a} holds {s} from a batch that is not \
             present: a torn batch"
        );
    }
    for &(t, i) in &present {
        let (from, to) = transfer(t, i);
        for (a, sign) in [(from, '-'), (to, '+')] {
            // The account shows this batch or a later present batch touching it.
            let v = String::from_utf8(got[&account(a)].clone()).unwrap();
            assert!(
                v != "1000",
                "crash point {k} (tear {tear}): batch {t}-{i} present but account {a} ({sign}) \
                 was never written"
            );
        }
    }
    db.close().expect("close after recovery");
    reached
}

#[test]
fn concurrent_cross_shard_batches_merged_by_workers_survive_crashes() {
    // Without faults: the workers do merge parts (fewer part writes than parts).
    let db = Arc::new(Db::open("/db", opts(Arc::new(MemFs::new()))).unwrap());
    std::thread::scope(|s| {
        for t in 0..6 {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..100 {
                    let mut b = WriteBatch::new();
                    for k in 0..4 {
                        b.put(format!("t{t}-{i}-{k}").as_bytes(), b"v");
                    }
                    db.write_opt(&WriteOptions { sync: true }, b).unwrap();
                }
            });
        }
    });
    let st = db.batch_stats();
    assert!(
        st.cross_shard_part_writes < st.cross_shard_parts,
        "no parts were merged: {} parts in {} writes",
        st.cross_shard_parts,
        st.cross_shard_part_writes
    );
    let mut reached = 0;
    for k in (0..400).step_by(7) {
        for tear in [false, true] {
            if concurrent_transfers_crash_once(k, tear, 40) {
                reached += 1;
            }
        }
    }
    assert!(reached >= 50, "only {reached} crash points reached");
}
