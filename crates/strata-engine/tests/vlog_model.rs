//! Key-value separation against a `BTreeMap` oracle, and metamorphic runs.
//!
//! - Model: seeded random operations (puts of small, medium and large values, deletes,
//!   batches, gets, multi_gets, forward and reverse scans with bounds, snapshots, flushes,
//!   compactions, value-log GC, reopen) on a `MemFs` database with tiny options so that
//!   files rotate, flush, compact and get collected many times. Every read is checked
//!   against the oracle; at the end no value-log file is left that nothing needs.
//! - Metamorphic: the same seeded operations with `sep_threshold_bytes` 0, 1 KiB and
//!   infinity (a plain LSM with a WAL) must give identical results.
//!
//! Default: `cargo test -p strata-engine --test vlog_model`
//! Long run (more seeds and operations):
//!     STRATA_VLOG_SEEDS=200 STRATA_VLOG_OPS=3000 \
//!         cargo test -p strata-engine --test vlog_model -- --ignored --nocapture

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use strata_engine::io::{Fs, MemFs};
use strata_engine::{Db, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The value-log buffer of most runs; 0 (the default) writes each group at once, separated
/// values straight from the batch.
const BUFFER: usize = 2 << 10;

fn options(fs: Arc<dyn Fs>, threshold: usize, background_gc: bool) -> Options {
    options_buffered(fs, threshold, background_gc, BUFFER)
}

fn options_buffered(
    fs: Arc<dyn Fs>,
    threshold: usize,
    background_gc: bool,
    buffer: usize,
) -> Options {
    Options {
        fs,
        write_buffer_bytes: 16 << 10,
        target_file_size_bytes: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        l0_compaction_trigger: 2,
        block_size_bytes: 512,
        block_cache_bytes: 64 << 10,
        background_threads: 2,
        sep_threshold_bytes: threshold,
        vlog_file_bytes: 6 << 10,
        vlog_buffer_bytes: buffer,
        gc_garbage_ratio: 0.3,
        gc_interval_ms: if background_gc { 1 } else { 0 },
        gc_bytes_per_sec: 0,
        vlog_prefetch: 4,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn value(rng: &mut StdRng, tag: u64) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0..=3 => rng.gen_range(0..24),
        4..=6 => rng.gen_range(100..400),
        7..=8 => rng.gen_range(900..1200),
        _ => rng.gen_range(2000..5000),
    };
    let mut v = format!("{tag}:").into_bytes();
    v.resize(len.max(v.len()), b'a' + (tag % 26) as u8);
    v
}

/// Everything a read returned, in order: the metamorphic runs compare these.
#[derive(Default)]
struct Trace(Vec<String>);

impl Trace {
    fn push(&mut self, s: String) {
        self.0.push(s);
    }
}

fn show(v: &Option<Vec<u8>>) -> String {
    match v {
        Some(v) => format!(
            "{}#{}",
            v.len(),
            String::from_utf8_lossy(&v[..v.len().min(12)])
        ),
        None => "-".into(),
    }
}

struct Run {
    fs: MemFs,
    dir: &'static Path,
    threshold: usize,
    background_gc: bool,
    buffer: usize,
    db: Option<Db>,
    /// Files GC collected over all opens.
    collected: u64,
}

impl Run {
    fn new(threshold: usize, background_gc: bool) -> Run {
        Run::with_buffer(threshold, background_gc, BUFFER)
    }

    fn with_buffer(threshold: usize, background_gc: bool, buffer: usize) -> Run {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let opts = options_buffered(Arc::new(fs.clone()), threshold, background_gc, buffer);
        let db = Db::open(dir, opts).unwrap();
        Run {
            fs,
            dir,
            threshold,
            background_gc,
            buffer,
            db: Some(db),
            collected: 0,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn reopen(&mut self) {
        let db = self.db.take().unwrap();
        self.collected += db.stats().gc_files_collected;
        db.close().unwrap();
        self.db = Some(
            Db::open(
                self.dir,
                options_buffered(
                    Arc::new(self.fs.clone()),
                    self.threshold,
                    self.background_gc,
                    self.buffer,
                ),
            )
            .unwrap(),
        );
    }
}

fn scan(db: &Db, ro: &ReadOptions, reverse: bool, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ro).unwrap();
    let mut out = Vec::new();
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    while it.valid() && out.len() < limit {
        let v = it.try_value().unwrap().to_vec();
        out.push((it.key().to_vec(), v));
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().unwrap();
    out
}

fn model_scan(
    m: &Map,
    lo: &Option<Vec<u8>>,
    hi: &Option<Vec<u8>>,
    reverse: bool,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let iter = m.iter().filter(|(k, _)| {
        lo.as_ref().is_none_or(|l| k.as_slice() >= l.as_slice())
            && hi.as_ref().is_none_or(|h| k.as_slice() < h.as_slice())
    });
    let all: Vec<_> = iter.map(|(k, v)| (k.clone(), v.clone())).collect();
    if reverse {
        all.into_iter().rev().take(limit).collect()
    } else {
        all.into_iter().take(limit).collect()
    }
}

/// Runs `ops` seeded operations on `run`, checking every read against the oracle.
fn run_ops(run: &mut Run, seed: u64, ops: usize, trace: &mut Trace) -> Map {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut m = Map::new();
    let mut snaps: Vec<(Snapshot, Map)> = Vec::new();
    let keys = 300u64;
    for op in 0..ops as u64 {
        let ctx = format!("seed {seed} op {op} threshold {}", run.threshold);
        match rng.gen_range(0..100) {
            0..=39 => {
                let k = key(rng.gen_range(0..keys));
                let v = value(&mut rng, op);
                let wo = WriteOptions {
                    sync: rng.gen_bool(0.1),
                    disable_wal: false,
                };
                run.db().put_opt(&wo, &k, &v).unwrap();
                m.insert(k, v);
            }
            40..=47 => {
                let k = key(rng.gen_range(0..keys));
                run.db().delete(&k).unwrap();
                m.remove(&k);
            }
            48..=53 => {
                let mut b = WriteBatch::new();
                for j in 0..rng.gen_range(1..6) {
                    let k = key(rng.gen_range(0..keys));
                    if rng.gen_bool(0.25) {
                        b.delete(&k);
                        m.remove(&k);
                    } else {
                        let v = value(&mut rng, op * 10 + j);
                        b.put(&k, &v);
                        m.insert(k, v);
                    }
                }
                run.db().write(&WriteOptions::default(), b).unwrap();
            }
            54..=67 => {
                let k = key(rng.gen_range(0..keys));
                let got = run.db().get(&k).unwrap();
                assert_eq!(got.as_ref(), m.get(&k), "{ctx}: get {k:?}");
                trace.push(format!(
                    "get {} {}",
                    String::from_utf8_lossy(&k),
                    show(&got)
                ));
            }
            68..=71 => {
                let ks: Vec<Vec<u8>> = (0..rng.gen_range(1..20))
                    .map(|_| key(rng.gen_range(0..keys)))
                    .collect();
                let refs: Vec<&[u8]> = ks.iter().map(|k| k.as_slice()).collect();
                let got = run.db().multi_get(&ReadOptions::default(), &refs);
                for (k, r) in ks.iter().zip(got) {
                    let r = r.unwrap();
                    assert_eq!(r.as_ref(), m.get(k), "{ctx}: multi_get {k:?}");
                    trace.push(format!("mget {}", show(&r)));
                }
            }
            72..=77 => {
                let lo = rng.gen_bool(0.5).then(|| key(rng.gen_range(0..keys)));
                let hi = rng.gen_bool(0.5).then(|| key(rng.gen_range(0..keys)));
                let reverse = rng.gen_bool(0.3);
                let limit = rng.gen_range(1..120);
                let ro = ReadOptions {
                    lower_bound: lo.clone(),
                    upper_bound: hi.clone(),
                    ..ReadOptions::default()
                };
                let got = scan(run.db(), &ro, reverse, limit);
                let want = model_scan(&m, &lo, &hi, reverse, limit);
                assert_eq!(got.len(), want.len(), "{ctx}: scan length");
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g, w, "{ctx}: scan entry");
                }
                trace.push(format!("scan {} {}", got.len(), reverse));
            }
            78..=80 => {
                if snaps.len() >= 2 || (rng.gen_bool(0.5) && !snaps.is_empty()) {
                    snaps.remove(0);
                } else {
                    snaps.push((run.db().snapshot(), m.clone()));
                }
            }
            81..=84 => {
                if let Some((s, sm)) = snaps.last() {
                    let ro = ReadOptions {
                        snapshot: Some(s.clone()),
                        ..ReadOptions::default()
                    };
                    let k = key(rng.gen_range(0..keys));
                    let got = run.db().get_opt(&ro, &k).unwrap();
                    assert_eq!(got.as_ref(), sm.get(&k), "{ctx}: snapshot get {k:?}");
                    let all = scan(run.db(), &ro, false, usize::MAX);
                    assert_eq!(
                        all,
                        model_scan(sm, &None, &None, false, usize::MAX),
                        "{ctx}: snapshot scan"
                    );
                    trace.push(format!("sget {}", show(&got)));
                }
            }
            85..=88 => run.db().flush().unwrap(),
            89 => run.db().compact_range(None, None).unwrap(),
            90..=95 => {
                run.db().gc().unwrap();
            }
            96 => {
                let ratio = rng.gen_range(0.0..0.9);
                run.db().gc_opt(ratio).unwrap();
            }
            _ => {
                // Reopen drops every snapshot.
                snaps.clear();
                run.reopen();
            }
        }
    }
    for (k, v) in &m {
        assert_eq!(
            run.db().get(k).unwrap().as_ref(),
            Some(v),
            "seed {seed} final {k:?}"
        );
    }
    assert_eq!(
        scan(run.db(), &ReadOptions::default(), false, usize::MAX),
        model_scan(&m, &None, &None, false, usize::MAX),
        "seed {seed}: final scan"
    );
    m
}

/// After compacting everything and one GC, every value-log file below the durable head holds
/// a value some key points at: nothing is left that nothing needs.
fn assert_no_orphans(run: &Run, m: &Map) {
    let db = run.db();
    db.compact_range(None, None).unwrap();
    db.gc().unwrap();
    let stats = db.stats();
    let mut used = std::collections::BTreeSet::new();
    let mut live_below_head = 0u64;
    for k in m.keys() {
        if let Some(p) = db.value_location(k).unwrap() {
            used.insert(p.file);
            if p.file < stats.vlog_head_file {
                live_below_head += u64::from(p.len);
            }
        }
    }
    let mut size_below_head = 0u64;
    for (path, size) in run.fs.dump() {
        let name = path.file_name().unwrap().to_str().unwrap();
        let Some(n) = name.strip_suffix(".vlog") else {
            continue;
        };
        let n: u64 = n.parse().unwrap();
        if n < stats.vlog_head_file {
            assert!(used.contains(&n), "orphan value-log file {name}\n{stats}");
            size_below_head += size;
        }
    }
    // After a GC round has measured every file, the garbage figures are exact: counted
    // once per dropped value, never twice.
    assert_eq!(
        stats.vlog_garbage_bytes,
        size_below_head - live_below_head,
        "garbage figures\n{stats}"
    );
    assert_eq!(stats.gc_files_pending, 0, "{stats}");
}

#[test]
fn model_with_separation_and_gc() {
    for (seed, threshold, buffer) in [(1, 0, BUFFER), (2, 200, 0), (3, 1024, BUFFER), (4, 64, 0)] {
        let mut run = Run::with_buffer(threshold, false, buffer);
        let mut t = Trace::default();
        let m = run_ops(&mut run, seed, 1500, &mut t);
        let s = run.db().stats();
        assert!(
            run.collected + s.gc_files_collected > 0,
            "seed {seed}: GC never collected\n{s}"
        );
        let separated = m
            .keys()
            .filter(|k| run.db().value_location(k).unwrap().is_some())
            .count();
        if threshold <= 200 {
            assert!(separated > m.len() / 4, "{separated} of {}", m.len());
        }
        assert_no_orphans(&run, &m);
        run.reopen();
        assert_no_orphans(&run, &m);
    }
}

#[test]
fn model_with_background_gc() {
    let mut run = Run::with_buffer(100, true, 0);
    let mut t = Trace::default();
    let m = run_ops(&mut run, 11, 1500, &mut t);
    assert!(run.db().stats().gc_runs > 0);
    assert_no_orphans(&run, &m);
}

#[test]
fn model_without_separation() {
    let mut run = Run::new(usize::MAX, false);
    let mut t = Trace::default();
    run_ops(&mut run, 5, 1000, &mut t);
    let s = run.db().stats();
    assert_eq!(s.vlog_files, 0, "{s}");
    assert!(s.wal_bytes_written > 0, "{s}");
}

#[test]
fn metamorphic_thresholds_give_identical_results() {
    for seed in [21, 22] {
        let mut traces = Vec::new();
        let mut finals = Vec::new();
        for threshold in [0, 1024, usize::MAX] {
            let mut run = Run::new(threshold, false);
            let mut t = Trace::default();
            finals.push(run_ops(&mut run, seed, 1200, &mut t));
            traces.push(t.0);
        }
        for t in &traces[1..] {
            assert_eq!(t.len(), traces[0].len(), "seed {seed}");
            for (i, (a, b)) in traces[0].iter().zip(t).enumerate() {
                assert_eq!(a, b, "seed {seed}: read {i} differs between thresholds");
            }
        }
        assert!(finals.windows(2).all(|w| w[0] == w[1]), "seed {seed}");
    }
}

/// A database written with separation on opens and reads the same with it off, and back.
#[test]
fn switching_separation_between_opens() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let mut rng = StdRng::seed_from_u64(9);
    let mut m = Map::new();
    for (round, threshold) in [64, usize::MAX, 0, usize::MAX, 512].into_iter().enumerate() {
        let db = Db::open(dir, options(Arc::new(fs.clone()), threshold, false)).unwrap();
        for (k, v) in &m {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "round {round}");
        }
        for i in 0..300u64 {
            let k = key(rng.gen_range(0..200));
            let v = value(&mut rng, i);
            db.put(&k, &v).unwrap();
            m.insert(k, v);
        }
        if round % 2 == 0 {
            db.flush().unwrap();
        }
        db.gc_opt(0.2).unwrap();
        db.close().unwrap();
    }
    let db = Db::open(dir, options(Arc::new(fs.clone()), 100, false)).unwrap();
    assert_eq!(
        scan(&db, &ReadOptions::default(), false, usize::MAX),
        model_scan(&m, &None, &None, false, usize::MAX)
    );
}

#[test]
#[ignore]
fn model_long() {
    let seeds = env_usize("STRATA_VLOG_SEEDS", 50) as u64;
    let ops = env_usize("STRATA_VLOG_OPS", 3000);
    for seed in 0..seeds {
        for threshold in [0, 128, 1024] {
            let mut run = Run::new(threshold, seed % 2 == 1);
            let mut t = Trace::default();
            let m = run_ops(&mut run, 1000 + seed, ops, &mut t);
            assert_no_orphans(&run, &m);
        }
    }
    println!("checked {seeds} seeds x 3 thresholds x {ops} ops");
}

/// Random walks over an iterator (next, prev, seeks, reading values or not) against the
/// sorted model: the prefetch look-ahead must never change what the iterator shows.
#[test]
fn iterator_walks_with_prefetch() {
    for (seed, threshold, prefetch) in [(31, 0, 3), (32, 100, 2), (33, 0, 1), (34, 500, 8)] {
        let fs = MemFs::new();
        let opts = Options {
            vlog_prefetch: prefetch,
            ..options(Arc::new(fs.clone()), threshold, false)
        };
        let db = Db::open("/db", opts).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut m = Map::new();
        for i in 0..400u64 {
            let k = key(rng.gen_range(0..300));
            if rng.gen_bool(0.1) {
                db.delete(&k).unwrap();
                m.remove(&k);
            } else {
                let v = value(&mut rng, i);
                db.put(&k, &v).unwrap();
                m.insert(k, v);
            }
            if i == 200 {
                db.flush().unwrap();
            }
        }
        let lo = key(20);
        let hi = key(280);
        let ro = ReadOptions {
            lower_bound: Some(lo.clone()),
            upper_bound: Some(hi.clone()),
            ..ReadOptions::default()
        };
        let sorted: Vec<(Vec<u8>, Vec<u8>)> = m
            .range(lo.clone()..hi.clone())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut it = db.iter(&ro).unwrap();
        let mut pos: Option<usize> = None;
        for step in 0..3000 {
            let ctx = format!("seed {seed} step {step}");
            match rng.gen_range(0..20) {
                0 => {
                    it.seek_to_first();
                    pos = (!sorted.is_empty()).then_some(0);
                }
                1 => {
                    it.seek_to_last();
                    pos = sorted.len().checked_sub(1);
                }
                2 => {
                    let t = key(rng.gen_range(0..300));
                    it.seek(&t);
                    let t = t.max(lo.clone());
                    let i = sorted.partition_point(|(k, _)| *k < t);
                    pos = (i < sorted.len()).then_some(i);
                }
                3..=5 if pos.is_some() => {
                    it.prev();
                    pos = pos.and_then(|p| p.checked_sub(1));
                }
                _ if pos.is_some() => {
                    it.next();
                    pos = pos.map(|p| p + 1).filter(|p| *p < sorted.len());
                }
                _ => {
                    it.seek_to_first();
                    pos = (!sorted.is_empty()).then_some(0);
                }
            }
            assert_eq!(it.valid(), pos.is_some(), "{ctx}");
            if let Some(p) = pos {
                assert_eq!(it.key(), sorted[p].0.as_slice(), "{ctx}");
                if rng.gen_bool(0.8) {
                    assert_eq!(it.try_value().unwrap(), sorted[p].1.as_slice(), "{ctx}");
                }
            }
            it.status().unwrap();
        }
    }
}
