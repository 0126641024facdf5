//! Model-based tests: random operation sequences checked against a `BTreeMap`.
//!
//! Default run (96 deterministic + 48 racing cases x 300-600 ops on MemFs, one fixed-seed
//! case on a real directory, one multi-threaded run):
//!     cargo test -p strata-engine --test model
//! Long run (thousands of ops per case; cases from STRATA_MODEL_CASES, default 100):
//!     STRATA_MODEL_CASES=200 cargo test -p strata-engine --test model -- --ignored
//! The multi-threaded test's ops per writer can be raised with STRATA_MT_OPS (default 600);
//! it runs on the plain engine and with key-value separation (4 KiB value-log files, GC in
//! the background every 2 ms and called by a writer, readers racing with rotation and GC;
//! STRATA_MT_SEPARATED_RUNS runs, default 6).
//! A failing case prints its minimal op list; rerun a run exactly with PROPTEST_RNG_SEED=N.
//! STRATA_MODEL_UNBOUNDED_COMPACTIONS=1 turns every CompactRange into a full one (to look past
//! a bounded-compact_range bug, as api::regression_bounded_compact_range_... once needed).

mod common;

use common::{diff, env_usize, key, show, value, Engine};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use strata_engine::io::{Fs, MemFs, RealFs};
use strata_engine::{Db, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys are `key(0..KEYS)`; bounds and seek targets range a little beyond.
const KEYS: u16 = 200;

#[derive(Clone, Debug)]
enum Op {
    Put {
        k: u16,
        len: u16,
        sync: bool,
    },
    Delete {
        k: u16,
    },
    /// `(key, Some(value length))` = put, `(key, None)` = delete.
    Batch(Vec<(u16, Option<u16>)>),
    Get {
        k: u16,
    },
    ScanForward {
        lo: Option<u16>,
        hi: Option<u16>,
    },
    ScanBackward {
        lo: Option<u16>,
        hi: Option<u16>,
    },
    /// `seek` (or `seek_for_prev`) to `target` (between keys when `mid`), then `next` (true)
    /// or `prev` (false) steps.
    Walk {
        target: u16,
        mid: bool,
        for_prev: bool,
        lo: Option<u16>,
        hi: Option<u16>,
        steps: Vec<bool>,
    },
    TakeSnapshot,
    ReadAtSnapshot {
        idx: usize,
        k: u16,
        scan: bool,
    },
    ReleaseSnapshot {
        idx: usize,
    },
    MultiGet {
        ks: Vec<u16>,
    },
    Flush,
    CompactRange {
        lo: Option<u16>,
        hi: Option<u16>,
    },
    Reopen,
}

fn k_strategy() -> impl Strategy<Value = u16> {
    0..KEYS
}

fn len_strategy() -> impl Strategy<Value = u16> {
    prop_oneof![1 => Just(0u16), 6 => 1..300u16]
}

fn bound_strategy() -> impl Strategy<Value = Option<u16>> {
    prop_oneof![2 => Just(None), 1 => (0..KEYS + 5).prop_map(Some)]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (k_strategy(), len_strategy(), prop::bool::weighted(0.1))
            .prop_map(|(k, len, sync)| Op::Put { k, len, sync }),
        10 => k_strategy().prop_map(|k| Op::Delete { k }),
        8 => prop::collection::vec(
            (k_strategy(), prop::option::weighted(0.7, len_strategy())),
            1..8
        )
        .prop_map(Op::Batch),
        10 => k_strategy().prop_map(|k| Op::Get { k }),
        3 => (bound_strategy(), bound_strategy()).prop_map(|(lo, hi)| Op::ScanForward { lo, hi }),
        3 => (bound_strategy(), bound_strategy()).prop_map(|(lo, hi)| Op::ScanBackward { lo, hi }),
        8 => (
            0..KEYS + 5,
            any::<bool>(),
            any::<bool>(),
            bound_strategy(),
            bound_strategy(),
            prop::collection::vec(any::<bool>(), 0..6)
        )
            .prop_map(|(target, mid, for_prev, lo, hi, steps)| Op::Walk {
                target,
                mid,
                for_prev,
                lo,
                hi,
                steps
            }),
        3 => Just(Op::TakeSnapshot),
        5 => (any::<usize>(), k_strategy(), prop::bool::weighted(0.3))
            .prop_map(|(idx, k, scan)| Op::ReadAtSnapshot { idx, k, scan }),
        2 => any::<usize>().prop_map(|idx| Op::ReleaseSnapshot { idx }),
        5 => prop::collection::vec(k_strategy(), 1..20).prop_map(|ks| Op::MultiGet { ks }),
        2 => Just(Op::Flush),
        1 => (bound_strategy(), bound_strategy()).prop_map(|(lo, hi)| Op::CompactRange { lo, hi }),
        1 => Just(Op::Reopen),
    ]
}

/// `len` ops. Each slot is an `Option` that shrinks to `None` (dropped), so a failing case
/// shrinks below the minimum length a plain `vec(op, len)` would keep.
fn ops_strategy(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(prop::option::weighted(0.98, op_strategy()), len)
        .prop_map(|v| v.into_iter().flatten().collect())
}

/// Options that make a few hundred small writes flush and compact into several levels.
fn model_opts(fs: Arc<dyn Fs>) -> Options {
    Options {
        write_buffer_bytes: 8 << 10,
        target_file_size_bytes: 4 << 10,
        max_bytes_for_level_base: 16 << 10,
        level_size_multiplier: 2,
        // Several overlapping L0 tables at a time.
        l0_compaction_trigger: 4,
        ..common::tiny_opts(fs)
    }
}

/// Table-format knobs varied per case (shrinks towards the defaults of `model_opts`).
#[derive(Clone, Debug)]
struct Knobs {
    lz4: bool,
    no_filter: bool,
    no_block_cache: bool,
    block_size: usize,
    restart_interval: usize,
    block_align: bool,
}

fn knobs_strategy() -> impl Strategy<Value = Knobs> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(512usize), Just(256), Just(4096)],
        prop_oneof![Just(4usize), Just(1), Just(16)],
        any::<bool>(),
    )
        .prop_map(
            |(lz4, no_filter, no_block_cache, block_size, restart_interval, block_align)| Knobs {
                lz4,
                no_filter,
                no_block_cache,
                block_size,
                restart_interval,
                block_align,
            },
        )
}

fn knob_opts(fs: Arc<dyn Fs>, k: &Knobs) -> Options {
    Options {
        compression: if k.lz4 {
            strata_engine::Compression::Lz4
        } else {
            strata_engine::Compression::None
        },
        filter: !k.no_filter,
        block_cache_bytes: if k.no_block_cache { 0 } else { 256 << 10 },
        block_size_bytes: k.block_size,
        block_restart_interval: k.restart_interval,
        block_align: Some(k.block_align),
        ..model_opts(fs)
    }
}

fn bkey(b: Option<u16>) -> Option<Vec<u8>> {
    b.map(|b| key(b as u32))
}

/// The model's entries within `[lo, hi)`.
fn in_bounds(m: &Map, lo: &Option<Vec<u8>>, hi: &Option<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    if let (Some(l), Some(h)) = (lo, hi) {
        if l >= h {
            return Vec::new();
        }
    }
    let lo_b = lo
        .as_ref()
        .map_or(Bound::Unbounded, |l| Bound::Included(l.clone()));
    let hi_b = hi
        .as_ref()
        .map_or(Bound::Unbounded, |h| Bound::Excluded(h.clone()));
    m.range((lo_b, hi_b))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

struct Harness {
    dir: PathBuf,
    opts: Options,
    db: Option<Db>,
    model: Map,
    snaps: Vec<(Snapshot, Map)>,
    tag: u32,
    /// Wait for background work after every mutating op: the run is then deterministic, so a
    /// failure reproduces and shrinks.
    settle: bool,
}

macro_rules! check {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(TestCaseError::fail(format!($($fmt)*)));
        }
    };
}

fn fail(step: usize, op: &Op, e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(format!("op #{step} {op:?}: {e}"))
}

impl Harness {
    fn open(dir: &Path, opts: Options, settle: bool) -> Harness {
        let db = Db::open(dir, opts.clone()).expect("open");
        Harness {
            dir: dir.to_path_buf(),
            opts,
            db: Some(db),
            model: Map::new(),
            snaps: Vec::new(),
            tag: 0,
            settle,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("db is open")
    }

    fn next_value(&mut self, k: &[u8], len: u16) -> Vec<u8> {
        self.tag += 1;
        value(k, self.tag, len as usize)
    }

    fn run(&mut self, ops: &[Op]) -> Result<(), TestCaseError> {
        for (step, op) in ops.iter().enumerate() {
            self.apply(step, op)?;
            let mutating = matches!(
                op,
                Op::Put { .. }
                    | Op::Delete { .. }
                    | Op::Batch(_)
                    | Op::Flush
                    | Op::CompactRange { .. }
                    | Op::Reopen
            );
            if self.settle && mutating {
                self.db().wait_idle().map_err(|e| fail(step, op, e))?;
            }
        }
        // Final full check, then once more after a reopen.
        self.check_scan(
            usize::MAX,
            &Op::Reopen,
            &ReadOptions::default(),
            &self.model.clone(),
        )?;
        if std::env::var_os("STRATA_MODEL_VERBOSE").is_some() {
            let s = self.db().stats();
            eprintln!(
                "{} ops: {} flushes, {} compactions, {} trivial moves, levels {:?}",
                ops.len(),
                s.flushes,
                s.compactions,
                s.trivial_moves,
                s.levels
            );
        }
        self.apply(usize::MAX, &Op::Reopen)?;
        self.check_scan(
            usize::MAX,
            &Op::Reopen,
            &ReadOptions::default(),
            &self.model.clone(),
        )?;
        Ok(())
    }

    fn check_scan(
        &self,
        step: usize,
        op: &Op,
        ro: &ReadOptions,
        want: &Map,
    ) -> Result<(), TestCaseError> {
        let got = common::scan(self.db(), ro).map_err(|e| fail(step, op, e))?;
        check!(
            &got == want,
            "op #{step} {op:?}: full scan differs from the model: {}",
            diff(&got, want)
        );
        Ok(())
    }

    fn apply(&mut self, step: usize, op: &Op) -> Result<(), TestCaseError> {
        let f = |e: strata_engine::Error| fail(step, op, e);
        match op {
            Op::Put { k, len, sync } => {
                let kb = key(*k as u32);
                let v = self.next_value(&kb, *len);
                let wo = WriteOptions {
                    sync: *sync,
                    ..Default::default()
                };
                self.db().put_opt(&wo, &kb, &v).map_err(f)?;
                self.model.insert(kb, v);
            }
            Op::Delete { k } => {
                let kb = key(*k as u32);
                self.db().delete(&kb).map_err(f)?;
                self.model.remove(&kb);
            }
            Op::Batch(items) => {
                let mut b = WriteBatch::new();
                let mut m = self.model.clone();
                for (k, len) in items {
                    let kb = key(*k as u32);
                    match len {
                        Some(len) => {
                            let v = self.next_value(&kb, *len);
                            b.put(&kb, &v);
                            m.insert(kb, v);
                        }
                        None => {
                            b.delete(&kb);
                            m.remove(&kb);
                        }
                    }
                }
                self.db().write(&WriteOptions::default(), b).map_err(f)?;
                self.model = m;
            }
            Op::Get { k } => {
                let kb = key(*k as u32);
                let got = self.db().get(&kb).map_err(f)?;
                check!(
                    got.as_ref() == self.model.get(&kb),
                    "op #{step} {op:?}: get({}) = {:?}, model has {:?}",
                    show(&kb),
                    got.as_deref().map(show),
                    self.model.get(&kb).map(|v| show(v))
                );
            }
            Op::ScanForward { lo, hi } | Op::ScanBackward { lo, hi } => {
                let ro = ReadOptions {
                    lower_bound: bkey(*lo),
                    upper_bound: bkey(*hi),
                    ..Default::default()
                };
                let mut want = in_bounds(&self.model, &ro.lower_bound, &ro.upper_bound);
                let mut it = self.db().iter(&ro).map_err(f)?;
                let mut got = Vec::new();
                if matches!(op, Op::ScanForward { .. }) {
                    it.seek_to_first();
                    while it.valid() {
                        got.push((it.key().to_vec(), it.value().to_vec()));
                        it.next();
                    }
                } else {
                    want.reverse();
                    it.seek_to_last();
                    while it.valid() {
                        got.push((it.key().to_vec(), it.value().to_vec()));
                        it.prev();
                    }
                }
                it.status().map_err(f)?;
                let gk: Vec<String> = got.iter().map(|(k, _)| show(k)).collect();
                let wk: Vec<String> = want.iter().map(|(k, _)| show(k)).collect();
                check!(gk == wk, "op #{step} {op:?}: keys {gk:?}, model {wk:?}");
                check!(
                    got == want,
                    "op #{step} {op:?}: keys agree but some value differs"
                );
            }
            Op::Walk {
                target,
                mid,
                for_prev,
                lo,
                hi,
                steps,
            } => {
                let ro = ReadOptions {
                    lower_bound: bkey(*lo),
                    upper_bound: bkey(*hi),
                    ..Default::default()
                };
                let entries = in_bounds(&self.model, &ro.lower_bound, &ro.upper_bound);
                let mut t = key(*target as u32);
                if *mid {
                    t.push(b'm');
                }
                let mut pos: Option<usize> = if *for_prev {
                    entries.iter().rposition(|(k, _)| k <= &t)
                } else {
                    entries.iter().position(|(k, _)| k >= &t)
                };
                let mut it = self.db().iter(&ro).map_err(f)?;
                if *for_prev {
                    it.seek_for_prev(&t);
                } else {
                    it.seek(&t);
                }
                let mut i = 0;
                loop {
                    match pos {
                        None => {
                            check!(
                                !it.valid(),
                                "op #{step} {op:?}: after {i} steps the iterator is at {} but the model is exhausted",
                                show(it.key())
                            );
                            break;
                        }
                        Some(p) => {
                            check!(
                                it.valid(),
                                "op #{step} {op:?}: after {i} steps the iterator is invalid ({:?}) but the model is at {}",
                                it.status().err(),
                                show(&entries[p].0)
                            );
                            check!(
                                it.key() == entries[p].0.as_slice()
                                    && it.value() == entries[p].1.as_slice(),
                                "op #{step} {op:?}: after {i} steps the iterator is at {} = {}, model at {} = {}",
                                show(it.key()),
                                show(it.value()),
                                show(&entries[p].0),
                                show(&entries[p].1)
                            );
                        }
                    }
                    let Some(&fwd) = steps.get(i) else { break };
                    i += 1;
                    let p = pos.expect("valid here");
                    if fwd {
                        it.next();
                        pos = (p + 1 < entries.len()).then_some(p + 1);
                    } else {
                        it.prev();
                        pos = p.checked_sub(1);
                    }
                }
                it.status().map_err(f)?;
            }
            Op::TakeSnapshot => {
                let s = self.db().snapshot();
                self.snaps.push((s, self.model.clone()));
            }
            Op::ReadAtSnapshot { idx, k, scan } => {
                if self.snaps.is_empty() {
                    return Ok(());
                }
                let (s, m) = &self.snaps[idx % self.snaps.len()];
                let ro = ReadOptions {
                    snapshot: Some(s.clone()),
                    ..Default::default()
                };
                let kb = key(*k as u32);
                let got = self.db().get_opt(&ro, &kb).map_err(f)?;
                check!(
                    got.as_ref() == m.get(&kb),
                    "op #{step} {op:?}: get({}) at {s:?} = {:?}, snapshot model has {:?}",
                    show(&kb),
                    got.as_deref().map(show),
                    m.get(&kb).map(|v| show(v))
                );
                let ks: Vec<Vec<u8>> = (0..5)
                    .map(|d| key((*k as u32 + d * 7) % KEYS as u32))
                    .collect();
                let refs: Vec<&[u8]> = ks.iter().map(|k| k.as_slice()).collect();
                for (kk, r) in ks.iter().zip(self.db().multi_get(&ro, &refs)) {
                    let r = r.map_err(f)?;
                    check!(
                        r.as_ref() == m.get(kk),
                        "op #{step} {op:?}: multi_get at {s:?} of {} = {:?}, snapshot model has {:?}",
                        show(kk),
                        r.as_deref().map(show),
                        m.get(kk).map(|v| show(v))
                    );
                }
                if *scan {
                    let m = m.clone();
                    self.check_scan(step, op, &ro, &m)?;
                }
            }
            Op::ReleaseSnapshot { idx } => {
                if !self.snaps.is_empty() {
                    let n = self.snaps.len();
                    self.snaps.remove(idx % n);
                }
            }
            Op::MultiGet { ks } => {
                let kbs: Vec<Vec<u8>> = ks.iter().map(|k| key(*k as u32)).collect();
                let refs: Vec<&[u8]> = kbs.iter().map(|k| k.as_slice()).collect();
                let rs = self.db().multi_get(&ReadOptions::default(), &refs);
                check!(
                    rs.len() == kbs.len(),
                    "op #{step} {op:?}: {} results for {} keys",
                    rs.len(),
                    kbs.len()
                );
                for (kb, r) in kbs.iter().zip(rs) {
                    let r = r.map_err(f)?;
                    check!(
                        r.as_ref() == self.model.get(kb),
                        "op #{step} {op:?}: multi_get of {} = {:?}, model has {:?}",
                        show(kb),
                        r.as_deref().map(show),
                        self.model.get(kb).map(|v| show(v))
                    );
                }
            }
            Op::Flush => self.db().flush().map_err(f)?,
            Op::CompactRange { lo, hi } => {
                let (mut lo, mut hi) = (bkey(*lo), bkey(*hi));
                if std::env::var_os("STRATA_MODEL_UNBOUNDED_COMPACTIONS").is_some() {
                    (lo, hi) = (None, None);
                }
                self.db()
                    .compact_range(lo.as_deref(), hi.as_deref())
                    .map_err(f)?;
            }
            Op::Reopen => {
                self.snaps.clear();
                let db = self.db.take().expect("open");
                db.close().map_err(f)?;
                self.db = Some(Db::open(&self.dir, self.opts.clone()).map_err(f)?);
            }
        }
        Ok(())
    }
}

fn run_on_memfs(ops: &[Op], settle: bool) -> Result<(), TestCaseError> {
    let mem = MemFs::new();
    let mut h = Harness::open(&common::mem_dir(), model_opts(Arc::new(mem)), settle);
    h.run(ops)
}

fn run_with_knobs(knobs: &Knobs, ops: &[Op], settle: bool) -> Result<(), TestCaseError> {
    let mem = MemFs::new();
    let mut h = Harness::open(&common::mem_dir(), knob_opts(Arc::new(mem), knobs), settle);
    h.run(ops)
}

/// `run_with_knobs` with the L0 tier on: flushes write mapped L0 tables into a real
/// directory (the rest stays on `MemFs`), compacted down progressively from 32 KiB. Point
/// reads of the log's values go through the verified-value cache: its default size, or
/// (with the block cache off) 4 KiB, so that values are evicted and read again.
fn run_with_tier(knobs: &Knobs, ops: &[Op], settle: bool) -> Result<(), TestCaseError> {
    let tier = common::tier_tempdir();
    let opts = Options {
        l0_tier_dir: Some(tier.path().to_path_buf()),
        l0_tier_bytes: 64 << 10,
        vlog_value_cache_bytes: knobs.no_block_cache.then_some(4096),
        ..knob_opts(Arc::new(MemFs::new()), knobs)
    };
    let mut h = Harness::open(&common::mem_dir(), opts, settle);
    h.run(ops)?;
    // A database created with the tier on has only L0 tier tables in L0.
    let stats = h.db.as_ref().expect("open").stats();
    check!(
        stats.levels[0].0 == stats.l0_tier_tables,
        "L0 holds SSTables with the tier on: {} tables, {} in the tier",
        stats.levels[0].0,
        stats.l0_tier_tables
    );
    Ok(())
}

/// Shrinking drops one op per step, so a long failing case needs many steps; they are
/// bounded by time (90 s) rather than by count.
fn config(cases: u32) -> ProptestConfig {
    config_shrink(cases, 90)
}

fn config_shrink(cases: u32, shrink_secs: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        max_shrink_iters: 1_000_000,
        max_shrink_time: shrink_secs * 1000,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(96))]
    /// Deterministic (background work settles after each write), so failures shrink. Table
    /// format knobs (compression, filter, block cache, block size) vary per case.
    #[test]
    fn model_memfs(knobs in knobs_strategy(), ops in ops_strategy(300..600)) {
        run_with_knobs(&knobs, &ops, true)?;
    }
}

proptest! {
    #![proptest_config(config_shrink(48, 20))]
    /// Background flushes and compactions race with the operations (a failure may not
    /// reproduce while shrinking, so shrinking is short: rerun with PROPTEST_RNG_SEED=N).
    #[test]
    fn model_memfs_racing_background(knobs in knobs_strategy(), ops in ops_strategy(300..600)) {
        run_with_knobs(&knobs, &ops, false)?;
    }
}

proptest! {
    #![proptest_config(config(48))]
    /// The same operations with the L0 tier on (deterministic background work).
    #[test]
    fn model_memfs_l0_tier(knobs in knobs_strategy(), ops in ops_strategy(300..600)) {
        run_with_tier(&knobs, &ops, true)?;
    }
}

proptest! {
    #![proptest_config(config_shrink(24, 20))]
    /// The L0 tier with background flushes and progressive compactions racing the operations.
    #[test]
    fn model_memfs_l0_tier_racing_background(
        knobs in knobs_strategy(),
        ops in ops_strategy(300..600)
    ) {
        run_with_tier(&knobs, &ops, false)?;
    }
}

proptest! {
    #![proptest_config(config(env_usize("STRATA_MODEL_CASES", 100) as u32))]
    #[test]
    #[ignore = "long: STRATA_MODEL_CASES=N cargo test -p strata-engine --test model -- --ignored"]
    fn model_memfs_long(knobs in knobs_strategy(), ops in ops_strategy(2000..5000)) {
        run_with_knobs(&knobs, &ops, true)?;
    }

    #[test]
    #[ignore = "long: STRATA_MODEL_CASES=N cargo test -p strata-engine --test model -- --ignored"]
    fn model_memfs_racing_background_long(
        knobs in knobs_strategy(),
        ops in ops_strategy(2000..5000)
    ) {
        run_with_knobs(&knobs, &ops, false)?;
    }

    #[test]
    #[ignore = "long: STRATA_MODEL_CASES=N cargo test -p strata-engine --test model -- --ignored"]
    fn model_memfs_l0_tier_long(knobs in knobs_strategy(), ops in ops_strategy(2000..5000)) {
        run_with_tier(&knobs, &ops, false)?;
    }
}

/// One fixed-seed case on the operating system's file system.
#[test]
fn model_real_dir_fixed_seed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut runner = TestRunner::new_with_rng(
        config(1),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[0x5a; 32]),
    );
    let ops = ops_strategy(500..501)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let fs: Arc<dyn Fs> = Arc::new(RealFs::new());
    let mut h = Harness::open(&tmp.path().join("db"), model_opts(fs), true);
    h.run(&ops).unwrap();
}

/// Small regression: overwrite, delete and re-put the same key across flushes and
/// compactions, read through every path.
#[test]
fn model_fixed_overwrite_delete_sequence() {
    let mut ops = Vec::new();
    for round in 0..6u16 {
        for k in 0..KEYS {
            if (k + round) % 3 == 0 {
                ops.push(Op::Delete { k });
            } else {
                ops.push(Op::Put {
                    k,
                    len: (k * 7 + round * 13) % 300,
                    sync: false,
                });
            }
        }
        ops.push(Op::TakeSnapshot);
        if round % 2 == 0 {
            ops.push(Op::Flush);
        } else {
            ops.push(Op::CompactRange { lo: None, hi: None });
        }
        ops.push(Op::ScanBackward { lo: None, hi: None });
        ops.push(Op::ReadAtSnapshot {
            idx: 0,
            k: round,
            scan: true,
        });
    }
    run_on_memfs(&ops, true).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Multi-threaded: 4 writers on disjoint key ranges and one reader checking consistent views.

const WRITERS: usize = 4;
const MT_KEYS: u32 = 150;

/// One writer op: key index and `Some(value length)` (put) or `None` (delete), plus sync.
type MtOp = (u32, Option<usize>, bool);

fn mt_key(t: usize, i: u32) -> Vec<u8> {
    format!("t{t}-k{i:04}").into_bytes()
}

fn mt_progress_key(t: usize) -> Vec<u8> {
    format!("p{t}").into_bytes()
}

fn mt_ops(t: usize, n: usize) -> Vec<MtOp> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(1000 + t as u64);
    (0..n)
        .map(|_| {
            let k = rng.gen_range(0..MT_KEYS);
            let v = if rng.gen_bool(0.8) {
                Some(rng.gen_range(0..400))
            } else {
                None
            };
            (k, v, rng.gen_bool(0.05))
        })
        .collect()
}

fn mt_value(t: usize, j: usize, k: &[u8], len: usize) -> Vec<u8> {
    value(k, (j * WRITERS + t) as u32, len)
}

/// Thread `t`'s key range after its first `n` ops.
fn mt_model(t: usize, ops: &[MtOp], n: usize) -> Map {
    let mut m = Map::new();
    for (j, (k, v, _)) in ops[..n].iter().enumerate() {
        let kb = mt_key(t, *k);
        match v {
            Some(len) => {
                let val = mt_value(t, j, &kb, *len);
                m.insert(kb, val);
            }
            None => {
                m.remove(&kb);
            }
        }
    }
    m
}

/// Checks one consistent view (`view` = every key and value): each writer's range must equal
/// that writer's model after the number of ops its progress key says.
fn mt_check_view(view: &Map, all_ops: &[Vec<MtOp>], what: &str) {
    for (t, ops) in all_ops.iter().enumerate() {
        let n: usize = view
            .get(&mt_progress_key(t))
            .map(|v| String::from_utf8(v.clone()).unwrap().parse().unwrap())
            .unwrap_or(0);
        assert!(
            n <= ops.len(),
            "{what}: writer {t} progress {n} out of range"
        );
        let want = mt_model(t, ops, n);
        let prefix = format!("t{t}-").into_bytes();
        let got: Map = view
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert!(
            got == want,
            "{what}: writer {t} at progress {n}: {}",
            diff(&got, &want)
        );
    }
    for k in view.keys() {
        let ok = (0..WRITERS)
            .any(|t| k.starts_with(format!("t{t}-").as_bytes()) || k == &mt_progress_key(t));
        assert!(ok, "{what}: unexpected key {}", show(k));
    }
}

#[test]
fn model_multithreaded_disjoint_writers() {
    disjoint_writers(Engine::Plain);
}

/// With separation: the readers race with value-log rotation (4 KiB files) and with GC,
/// which runs in the background every 2 ms at a low garbage ratio and is also called by a
/// writer.
#[test]
fn model_multithreaded_disjoint_writers_separated_with_gc() {
    // A run takes a fraction of a second and a race shows in few of them: several runs.
    for _ in 0..env_usize("STRATA_MT_SEPARATED_RUNS", 6) {
        disjoint_writers(Engine::Separated);
    }
}

fn disjoint_writers(engine: Engine) {
    let n = env_usize("STRATA_MT_OPS", 600);
    let mem = MemFs::new();
    let opts = match engine {
        Engine::Plain => common::mem_opts(&mem),
        Engine::Separated => Options {
            gc_interval_ms: 2,
            gc_garbage_ratio: 0.1,
            ..engine.options(common::mem_opts(&mem))
        },
    };
    let db = Arc::new(Db::open(common::mem_dir(), opts.clone()).unwrap());
    let all_ops: Arc<Vec<Vec<MtOp>>> = Arc::new((0..WRITERS).map(|t| mt_ops(t, n)).collect());
    let done = Arc::new(AtomicUsize::new(0));

    let reader = {
        let (db, all_ops, done) = (db.clone(), all_ops.clone(), done.clone());
        std::thread::spawn(move || {
            let mut round = 0usize;
            loop {
                let finished = done.load(Ordering::Acquire) == WRITERS;
                round += 1;
                if round.is_multiple_of(2) {
                    let s = db.snapshot();
                    let ro = ReadOptions {
                        snapshot: Some(s.clone()),
                        ..Default::default()
                    };
                    let view = common::scan(&db, &ro).unwrap();
                    mt_check_view(&view, &all_ops, &format!("reader round {round} (snapshot)"));
                    // Point reads at the same snapshot agree with the scan.
                    for t in 0..WRITERS {
                        for i in (0..MT_KEYS).step_by(17) {
                            let k = mt_key(t, i);
                            assert_eq!(db.get_opt(&ro, &k).unwrap().as_ref(), view.get(&k));
                        }
                    }
                } else {
                    // Backward scan through a plain iterator (pinned at creation).
                    let mut it = db.iter(&ReadOptions::default()).unwrap();
                    it.seek_to_last();
                    let mut view = Map::new();
                    while it.valid() {
                        let v = it.try_value().unwrap_or_else(|e| {
                            panic!("reader round {round}: value of {}: {e}", show(it.key()))
                        });
                        assert!(view.insert(it.key().to_vec(), v.to_vec()).is_none());
                        it.prev();
                    }
                    it.status().unwrap();
                    mt_check_view(&view, &all_ops, &format!("reader round {round} (reverse)"));
                }
                if finished {
                    return round;
                }
            }
        })
    };

    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (db, all_ops, done) = (db.clone(), all_ops.clone(), done.clone());
            std::thread::spawn(move || {
                for (j, (k, v, sync)) in all_ops[t].iter().enumerate() {
                    let kb = mt_key(t, *k);
                    let mut b = WriteBatch::new();
                    match v {
                        Some(len) => b.put(&kb, &mt_value(t, j, &kb, *len)),
                        None => b.delete(&kb),
                    }
                    b.put(&mt_progress_key(t), (j + 1).to_string().as_bytes());
                    let wo = WriteOptions {
                        sync: *sync,
                        ..Default::default()
                    };
                    db.write(&wo, b).unwrap();
                    if t == 0 && j % 150 == 149 {
                        db.flush().unwrap();
                    }
                    if t == 1 && j % 250 == 249 {
                        db.compact_range(None, None).unwrap();
                    }
                    if t == 2 && j % 100 == 99 && engine == Engine::Separated {
                        db.gc().unwrap();
                    }
                }
                done.fetch_add(1, Ordering::AcqRel);
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let rounds = reader.join().unwrap();
    assert!(rounds >= 1);

    let mut want = Map::new();
    for (t, ops) in all_ops.iter().enumerate() {
        want.extend(mt_model(t, ops, ops.len()));
        want.insert(mt_progress_key(t), ops.len().to_string().into_bytes());
    }
    let got = common::scan_all(&db).unwrap();
    assert!(got == want, "final state: {}", diff(&got, &want));
    db.wait_idle().unwrap();
    if engine == Engine::Separated {
        let st = db.stats();
        assert!(
            st.vlog_head_file > 10 && st.gc_runs > 0 && st.gc_files_collected > 0,
            "the separated run should rotate value-log files and collect some: {st}"
        );
    }
    let db = Arc::try_unwrap(db).ok().expect("threads are done");
    db.close().unwrap();
    let db = Db::open(common::mem_dir(), opts).unwrap();
    let got = common::scan_all(&db).unwrap();
    assert!(got == want, "after reopen: {}", diff(&got, &want));
}
