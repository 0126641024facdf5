//! Model test of the sharded database, driven from several threads, and metamorphic: the same
//! seeded operations must give the same results with 1 and 4 shards.
//!
//! Each thread owns a slice of the key space (its own prefix) and keeps its own `BTreeMap`
//! model, so every result is deterministic whatever the interleaving: a thread checks each of
//! its reads against its model at once (per-key order holds for sync and async calls alike),
//! and at quiescent points (all threads joined) the main thread checks the whole database
//! (iterators both ways, range, both scan modes) against the union of the models. Each thread
//! also logs its read results; the logs and the final contents of the 1-shard and 4-shard runs
//! must be identical.
//!
//! Long version: `cargo test -p strata --release --test model -- --ignored`

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use strata::{Db, DbOptions, EngineIter, IterOptions, ScanMode, WriteBatch, WriteOptions};
use strata_engine::io::{Fs, MemFs};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// `max_batch` 0 stands for "batching 32 with direct reads and writes".
fn opts(fs: Arc<dyn Fs>, shards: usize, max_batch: usize) -> DbOptions {
    let mut o = DbOptions {
        shards: Some(shards),
        max_batch: if max_batch == 0 { 32 } else { max_batch },
        direct_reads: max_batch == 0,
        direct_writes: max_batch == 0,
        queue_depth: 64,
        ..DbOptions::default()
    };
    o.engine.fs = fs;
    o.engine.background_threads = 1;
    o.engine.write_buffer_bytes = 32 << 10;
    o.engine.l0_compaction_trigger = 2;
    o
}

fn key(t: usize, i: u32) -> Vec<u8> {
    format!("t{t}/{i:04}").into_bytes()
}

/// One thread's share of a round: random operations on its own keys.
fn thread_round(
    db: &Db,
    t: usize,
    seed: u64,
    ops: usize,
    model: &mut Model,
    log: &mut Vec<String>,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let space = 60u32;
    for n in 0..ops {
        let k = key(t, rng.gen_range(0..space));
        let v = format!("{seed}-{n}-{}", "v".repeat(rng.gen_range(0..40))).into_bytes();
        match rng.gen_range(0..100) {
            0..=29 => {
                let wo = WriteOptions {
                    sync: rng.gen_bool(0.1),
                };
                db.put_opt(&wo, &k, &v).unwrap();
                model.insert(k, v);
            }
            30..=39 => {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            40..=49 => {
                // Asynchronous put, then a read of the same key before waiting: per-key order.
                let p = db.put_future(&WriteOptions::default(), &k, &v);
                model.insert(k.clone(), v);
                let got = db.get(&k).unwrap();
                assert_eq!(got.as_ref(), model.get(&k), "read after async put");
                p.wait().unwrap();
            }
            50..=59 => {
                // A batch over several keys: usually spans shards.
                let mut b = WriteBatch::new();
                for j in 0..rng.gen_range(1..6) {
                    let k = key(t, rng.gen_range(0..space));
                    if rng.gen_bool(0.8) {
                        let v = format!("{seed}-{n}-b{j}").into_bytes();
                        b.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        b.delete(&k);
                        model.remove(&k);
                    }
                }
                db.write(b).unwrap();
            }
            60..=79 => {
                let got = db.get(&k).unwrap();
                assert_eq!(got.as_ref(), model.get(&k), "get {k:?}");
                log.push(format!("get {k:?} {got:?}"));
            }
            80..=89 => {
                let ks: Vec<Vec<u8>> = (0..rng.gen_range(1..12))
                    .map(|_| key(t, rng.gen_range(0..space)))
                    .collect();
                let got: Vec<Option<Vec<u8>>> =
                    db.multi_get(&ks).into_iter().map(|r| r.unwrap()).collect();
                let want: Vec<Option<Vec<u8>>> = ks.iter().map(|k| model.get(k).cloned()).collect();
                assert_eq!(got, want, "multi_get");
                log.push(format!("multi_get {got:?}"));
            }
            _ => {
                // A snapshot sees this thread's keys as they were, whatever happens later.
                let snap = db.snapshot().unwrap();
                let frozen = model.clone();
                db.put(&k, b"after-snapshot").unwrap();
                model.insert(k.clone(), b"after-snapshot".to_vec());
                assert_eq!(snap.get(&k).unwrap().as_ref(), frozen.get(&k));
                let lo = key(t, 0);
                let hi = key(t, space);
                let mut it = snap
                    .iter_opt(&IterOptions {
                        lower_bound: Some(lo.clone()),
                        upper_bound: Some(hi.clone()),
                    })
                    .unwrap();
                it.seek_to_first();
                let mut got = Vec::new();
                while it.valid() {
                    got.push((it.key().to_vec(), it.value().to_vec()));
                    it.next();
                }
                it.status().unwrap();
                let want: Vec<_> = frozen
                    .range(lo..hi)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "snapshot iterator");
                log.push(format!("snapshot {}", got.len()));
            }
        }
    }
}

fn check_whole(db: &Db, models: &[Model], rng: &mut StdRng) {
    let all: Model = models.iter().flat_map(|m| m.clone()).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = all.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(db.range(b"", None).unwrap(), want, "range over everything");
    let mut it = db.iter().unwrap();
    it.seek_to_last();
    let mut back = Vec::new();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    back.reverse();
    assert_eq!(back, want, "reverse iteration");
    for _ in 0..5 {
        let start = key(rng.gen_range(0..models.len()), rng.gen_range(0..70));
        let count = rng.gen_range(0..40);
        let want: Vec<_> = all
            .range(start.clone()..)
            .take(count)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(db.scan(&start, count, ScanMode::Merged).unwrap(), want);
        assert_eq!(db.scan(&start, count, ScanMode::Parallel).unwrap(), want);
        let end = key(rng.gen_range(0..models.len()), rng.gen_range(0..70));
        let want: Vec<_> = all
            .iter()
            .filter(|(k, _)| **k >= start && **k < end)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(db.range(&start, Some(&end)).unwrap(), want);
    }
}

/// Runs the seeded workload; returns every thread's read log and the final contents.
fn run(
    seed: u64,
    shards: usize,
    max_batch: usize,
    threads: usize,
    rounds: usize,
    ops: usize,
) -> (Vec<Vec<String>>, strata::KvPairs) {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let mut db = Db::open("/db", opts(fs.clone(), shards, max_batch)).unwrap();
    let mut models = vec![Model::new(); threads];
    let mut logs = vec![Vec::new(); threads];
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..rounds {
        std::thread::scope(|s| {
            for (t, (model, log)) in models.iter_mut().zip(logs.iter_mut()).enumerate() {
                let db = &db;
                let seed = seed * 1_000_003 + (round * threads + t) as u64;
                s.spawn(move || thread_round(db, t, seed, ops, model, log));
            }
        });
        check_whole(&db, &models, &mut rng);
        match rng.gen_range(0..4) {
            0 => db.flush().unwrap(),
            1 => db.compact().unwrap(),
            2 => {
                db.close().unwrap();
                db = Db::open("/db", opts(fs.clone(), shards, max_batch)).unwrap();
                check_whole(&db, &models, &mut rng);
            }
            _ => {}
        }
    }
    let contents = db.range(b"", None).unwrap();
    db.close().unwrap();
    (logs, contents)
}

#[test]
fn model_and_metamorphic_1_vs_4_shards() {
    let one = run(7, 1, 32, 3, 4, 250);
    let four = run(7, 4, 32, 3, 4, 250);
    assert_eq!(one.0, four.0, "read logs differ between 1 and 4 shards");
    assert_eq!(
        one.1, four.1,
        "final contents differ between 1 and 4 shards"
    );
    let unbatched = run(7, 4, 1, 3, 2, 250);
    let batched = run(7, 4, 32, 3, 2, 250);
    assert_eq!(unbatched, batched, "batching changed results");
    let direct = run(7, 4, 0, 3, 2, 250);
    assert_eq!(direct, batched, "direct reads changed results");
}

#[test]
#[ignore = "long: cargo test -p strata --release --test model -- --ignored"]
fn model_and_metamorphic_long() {
    // Size knobs (the defaults are the long run; `scripts/ignored-reduced.sh` turns them down).
    let knob = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let seeds = knob("STRATA_SHARD_MODEL_SEEDS", 10);
    let ops = knob("STRATA_SHARD_MODEL_OPS", 2000) as usize;
    for seed in 100..100 + seeds {
        let one = run(seed, 1, 32, 4, 8, ops);
        let four = run(seed, 4, 32, 4, 8, ops);
        assert_eq!(one, four, "seed {seed}");
    }
}
