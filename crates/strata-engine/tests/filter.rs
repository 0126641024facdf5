//! The compaction filter (`Options::compaction_filter`, `docs/design.md` §6.4).
//!
//! * `model`: seeded random puts, deletes, snapshots, flushes, compactions, GC and reopens
//!   under a filter that removes keys by a key rule and values by a value rule, checked against
//!   a model that allows a removal only where the rules allow one: the latest read of a key is
//!   its latest write, or nothing if that write is removable, never an older version; a key
//!   once read as removed stays removed until written again; a snapshot reads exactly what it
//!   read when it was taken.
//! * `crash`: crash points (MemFs + FaultFs, as `crash.rs`) through a workload whose filtered
//!   records shadow older versions: recovery never brings an older version back.
//!
//! Default run: `cargo test -p strata-engine --test filter`. More model seeds:
//!     STRATA_FILTER_SEEDS=200 cargo test -p strata-engine --test filter

#[macro_use]
mod common;

use common::{crash_mode, env_usize, key, mem_dir, show, tiny_opts, Engine};
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use strata_engine::compaction::{CompactionFilter, Decision, FilterContext, FilterValue};
use strata_engine::io::{FaultFs, Fs, MemFs};
use strata_engine::{Db, Options, ReadOptions, Snapshot, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Removes keys whose number is a multiple of 5 (decided from the key alone) and values that
/// start with `drop` (asks for the value).
struct Rule {
    by_value: bool,
}

fn key_removable(k: &[u8]) -> bool {
    matches!(k.last(), Some(b'0' | b'5'))
}

fn removable(k: &[u8], v: &[u8]) -> bool {
    key_removable(k) || v.starts_with(b"drop")
}

impl CompactionFilter for Rule {
    fn filter(&self, _cx: &FilterContext<'_>, key: &[u8], value: &mut FilterValue<'_>) -> Decision {
        if key_removable(key) {
            return Decision::Remove;
        }
        if !self.by_value {
            return Decision::Keep;
        }
        match value.get() {
            Ok(v) if v.starts_with(b"drop") => Decision::Remove,
            _ => Decision::Keep,
        }
    }
}

fn opts(fs: Arc<dyn Fs>, engine: Engine, filter: Arc<dyn CompactionFilter>) -> Options {
    Options {
        compaction_filter: Some(filter),
        ..engine.options(tiny_opts(fs))
    }
}

fn val(rng: &mut impl Rng, i: u32, tag: u32) -> Vec<u8> {
    let head = if rng.gen_bool(0.3) { "drop" } else { "keep" };
    let len = rng.gen_range(8..200);
    let mut v = format!("{head}-{i}-{tag}-").into_bytes();
    v.resize(len.max(v.len()), b'x');
    v
}

/// One live snapshot and what it read when it was taken.
struct Snap {
    snap: Snapshot,
    view: Map,
}

/// Checks one read of the latest state of `k` against the model: its latest write, or nothing
/// if that write is removable (and then nothing until it is written again).
fn check_read(
    k: &[u8],
    got: Option<&Vec<u8>>,
    model: &Map,
    gone: &mut BTreeSet<Vec<u8>>,
    ctx: &str,
) -> Result<(), String> {
    match (got, model.get(k)) {
        (Some(v), Some(m)) if v == m => {
            if gone.contains(k) {
                return Err(format!("{ctx}: {} came back after it was removed", show(k)));
            }
        }
        (Some(v), Some(m)) => {
            return Err(format!(
                "{ctx}: {} reads {} but its latest write is {}",
                show(k),
                show(v),
                show(m)
            ))
        }
        (Some(v), None) => {
            return Err(format!(
                "{ctx}: {} reads {} but it was deleted",
                show(k),
                show(v)
            ))
        }
        (None, Some(m)) => {
            if !removable(k, m) {
                return Err(format!(
                    "{ctx}: {} is missing; its latest write {} is not removable",
                    show(k),
                    show(m)
                ));
            }
            gone.insert(k.to_vec());
        }
        (None, None) => {}
    }
    Ok(())
}

/// Checks the latest state (a scan, then point reads: background compactions may remove
/// records in between) against the model; returns the scan.
fn check_latest(
    db: &Db,
    model: &Map,
    gone: &mut BTreeSet<Vec<u8>>,
    ctx: &str,
) -> Result<Map, String> {
    let got = common::scan_all(db).map_err(|e| format!("{ctx}: scan: {e}"))?;
    let keys: BTreeSet<&Vec<u8>> = got.keys().chain(model.keys()).collect();
    for k in keys {
        check_read(k, got.get(k), model, gone, &format!("{ctx} (scan)"))?;
    }
    for k in model.keys().step_by(3) {
        let g = db.get(k).map_err(|e| format!("{ctx}: get: {e}"))?;
        check_read(k, g.as_ref(), model, gone, &format!("{ctx} (get)"))?;
    }
    Ok(got)
}

fn run_model(seed: u64, ops: usize, engine: Engine) -> Result<(), String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mem = MemFs::new();
    let filter: Arc<dyn CompactionFilter> = Arc::new(Rule { by_value: true });
    let o = opts(Arc::new(mem.clone()), engine, filter);
    let mut db = Db::open(mem_dir(), o.clone()).map_err(|e| e.to_string())?;
    let mut model = Map::new();
    let mut gone = BTreeSet::new();
    let mut snaps: Vec<Snap> = Vec::new();
    let keys = 60u32;
    for step in 0..ops {
        let ctx = format!("{engine:?} seed {seed} step {step}");
        let i = rng.gen_range(0..keys);
        let k = key(i);
        match rng.gen_range(0..100) {
            0..=54 => {
                let v = val(&mut rng, i, step as u32);
                db.put(&k, &v).map_err(|e| format!("{ctx}: put: {e}"))?;
                model.insert(k.clone(), v);
                gone.remove(&k);
            }
            55..=64 => {
                db.delete(&k).map_err(|e| format!("{ctx}: delete: {e}"))?;
                model.remove(&k);
                gone.remove(&k);
            }
            65..=70 => {
                if snaps.len() < 3 {
                    let snap = db.snapshot();
                    let ro = ReadOptions {
                        snapshot: Some(snap.clone()),
                        ..ReadOptions::default()
                    };
                    let view = common::scan(&db, &ro).map_err(|e| format!("{ctx}: {e}"))?;
                    snaps.push(Snap { snap, view });
                }
            }
            71..=75 => {
                if !snaps.is_empty() {
                    let n = rng.gen_range(0..snaps.len());
                    snaps.remove(n);
                }
            }
            76..=82 => db.flush().map_err(|e| format!("{ctx}: flush: {e}"))?,
            83..=87 => db
                .compact_range(None, None)
                .map_err(|e| format!("{ctx}: compact: {e}"))?,
            88..=90 => {
                let a = key(rng.gen_range(0..keys));
                let b = key(rng.gen_range(0..keys));
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                db.compact_range(Some(&a), Some(&b))
                    .map_err(|e| format!("{ctx}: compact range: {e}"))?;
            }
            91..=93 => {
                if engine == Engine::Separated {
                    db.gc_opt(0.0).map_err(|e| format!("{ctx}: gc: {e}"))?;
                }
            }
            94 => {
                snaps.clear();
                db.close().map_err(|e| format!("{ctx}: close: {e}"))?;
                db = Db::open(mem_dir(), o.clone()).map_err(|e| format!("{ctx}: reopen: {e}"))?;
            }
            _ => {
                check_latest(&db, &model, &mut gone, &ctx)?;
                for (n, s) in snaps.iter().enumerate() {
                    let ro = ReadOptions {
                        snapshot: Some(s.snap.clone()),
                        ..ReadOptions::default()
                    };
                    let got = common::scan(&db, &ro).map_err(|e| format!("{ctx}: {e}"))?;
                    if got != s.view {
                        return Err(format!(
                            "{ctx}: snapshot {n} changed: {}",
                            common::diff(&got, &s.view)
                        ));
                    }
                }
            }
        }
    }
    let ctx = format!("{engine:?} seed {seed} end");
    check_latest(&db, &model, &mut gone, &ctx)?;
    // With no snapshot left, a full compaction shows the filter every record: nothing
    // removable is left, and nothing else went.
    snaps.clear();
    db.compact_range(None, None).map_err(|e| e.to_string())?;
    let got = check_latest(&db, &model, &mut gone, &ctx)?;
    let want: Map = model
        .iter()
        .filter(|(k, v)| !removable(k, v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if got != want {
        return Err(format!(
            "{ctx}: after a full compaction: {}",
            common::diff(&got, &want)
        ));
    }
    db.close().map_err(|e| e.to_string())?;
    let db = Db::open(mem_dir(), o).map_err(|e| e.to_string())?;
    let again = common::scan_all(&db).map_err(|e| e.to_string())?;
    if again != want {
        return Err(format!(
            "{ctx}: after reopen: {}",
            common::diff(&again, &want)
        ));
    }
    Ok(())
}

fn model(engine: Engine) {
    let seeds = env_usize("STRATA_FILTER_SEEDS", 12) as u64;
    for seed in 0..seeds {
        if let Err(e) = run_model(seed, 500, engine) {
            panic!("{e}");
        }
    }
}

/// A filter that decides from keys alone costs no value-log reads; one that asks for values
/// gets them.
fn key_only_filter_reads_no_values(engine: Engine) {
    for by_value in [false, true] {
        let mem = MemFs::new();
        let o = opts(Arc::new(mem.clone()), engine, Arc::new(Rule { by_value }));
        let db = Db::open(mem_dir(), o).unwrap();
        for i in 0..200u32 {
            db.put(&key(i), format!("drop-{i:0>100}").as_bytes())
                .unwrap();
        }
        db.compact_range(None, None).unwrap();
        let s = db.stats();
        let left = common::scan_all(&db).unwrap();
        if by_value {
            assert!(left.is_empty(), "{} left", left.len());
            if engine == Engine::Separated {
                assert!(s.filter_value_reads > 0);
            }
        } else {
            assert_eq!(left.len(), 160);
            assert!(left.keys().all(|k| !key_removable(k)));
            assert_eq!(s.filter_value_reads, 0, "a key-only filter read values");
        }
        assert!(s.filter_removed >= 40, "{}", s.filter_removed);
    }
}

/// Older versions below a removed record stay hidden: in deeper levels, in the same
/// compaction, and for a snapshot that needs them (which still reads them).
fn removed_record_does_not_uncover_older_versions(engine: Engine) {
    let mem = MemFs::new();
    let o = opts(
        Arc::new(mem.clone()),
        engine,
        Arc::new(Rule { by_value: true }),
    );
    let db = Db::open(mem_dir(), o.clone()).unwrap();
    let k = key(1);
    db.put(&k, b"keep-old-version-bottom").unwrap();
    db.compact_range(None, None).unwrap();
    db.put(&k, b"keep-middle-version").unwrap();
    db.flush().unwrap();
    let snap = db.snapshot();
    db.put(&k, b"drop-newest-version").unwrap();
    db.flush().unwrap();
    // The flush saw the newest version above every snapshot: removed.
    assert_eq!(db.get(&k).unwrap(), None);
    let ro = ReadOptions {
        snapshot: Some(snap.clone()),
        ..ReadOptions::default()
    };
    assert_eq!(
        db.get_opt(&ro, &k).unwrap().as_deref(),
        Some(&b"keep-middle-version"[..])
    );
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&k).unwrap(), None);
    assert_eq!(
        db.get_opt(&ro, &k).unwrap().as_deref(),
        Some(&b"keep-middle-version"[..])
    );
    drop(ro);
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&k).unwrap(), None);
    db.close().unwrap();
    let db = Db::open(mem_dir(), o).unwrap();
    assert_eq!(db.get(&k).unwrap(), None);
    assert!(common::scan_all(&db).unwrap().is_empty());
}

/// A snapshot taken while a job runs (here: from inside the filter) would read what the job
/// removed: the job is redone without the filter, and the snapshot's reads never change.
struct SnapshotTaker {
    db: OnceLock<Weak<Db>>,
    taken: Mutex<Vec<Snapshot>>,
}

impl CompactionFilter for SnapshotTaker {
    fn filter(&self, _cx: &FilterContext<'_>, _key: &[u8], _v: &mut FilterValue<'_>) -> Decision {
        let mut t = self.taken.lock().unwrap();
        if t.is_empty() {
            if let Some(db) = self.db.get().and_then(|w| w.upgrade()) {
                t.push(db.snapshot());
            }
        }
        Decision::Remove
    }
}

fn snapshot_taken_during_a_job_is_respected(engine: Engine) {
    let mem = MemFs::new();
    let f = Arc::new(SnapshotTaker {
        db: OnceLock::new(),
        taken: Mutex::new(Vec::new()),
    });
    let o = opts(Arc::new(mem.clone()), engine, f.clone());
    let db = Arc::new(Db::open(mem_dir(), o).unwrap());
    f.db.set(Arc::downgrade(&db)).ok();
    db.put(&key(1), b"value-one-abcdefgh").unwrap();
    db.flush().unwrap();
    let snap = f
        .taken
        .lock()
        .unwrap()
        .pop()
        .expect("the filter took a snapshot");
    let ro = ReadOptions {
        snapshot: Some(snap),
        ..ReadOptions::default()
    };
    assert_eq!(db.stats().filter_retries, 1);
    assert_eq!(
        db.get_opt(&ro, &key(1)).unwrap().as_deref(),
        Some(&b"value-one-abcdefgh"[..])
    );
    assert!(db.get(&key(1)).unwrap().is_some());
    // The snapshot still lives: the next compaction must keep the record.
    *f.taken.lock().unwrap() = vec![db.snapshot()];
    db.compact_range(None, None).unwrap();
    assert_eq!(
        db.get_opt(&ro, &key(1)).unwrap().as_deref(),
        Some(&b"value-one-abcdefgh"[..])
    );
    assert!(db.get(&key(1)).unwrap().is_some());
    // With the snapshot gone, a newer version above a snapshot held below it goes (the
    // filter takes no snapshot of its own while one is in `taken`).
    drop(ro);
    let below = db.snapshot();
    db.put(&key(1), b"value-two-abcdefgh").unwrap();
    f.taken.lock().unwrap().clear();
    f.taken.lock().unwrap().push(below.clone());
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&key(1)).unwrap(), None);
    assert_eq!(db.stats().filter_retries, 1);
    let ro = ReadOptions {
        snapshot: Some(below),
        ..ReadOptions::default()
    };
    assert_eq!(
        db.get_opt(&ro, &key(1)).unwrap().as_deref(),
        Some(&b"value-one-abcdefgh"[..])
    );
    drop(ro);
    f.taken.lock().unwrap().clear();
    drop(db);
}

/// GC rewrites a removed current value as a tombstone: the older version it shadowed (in a
/// table) stays hidden, after reopen too.
fn gc_writes_a_tombstone_for_a_removed_value(engine: Engine) {
    if engine != Engine::Separated {
        return;
    }
    let mem = MemFs::new();
    // The filter is off while the data is laid out, so GC is the one that meets it.
    let plain = engine.options(tiny_opts(Arc::new(mem.clone())));
    let db = Db::open(mem_dir(), plain.clone()).unwrap();
    db.put(&key(1), b"keep-old-version-bottom").unwrap();
    db.compact_range(None, None).unwrap();
    db.put(&key(1), b"drop-newer-version-in-the-log").unwrap();
    for i in 2..60u32 {
        db.put(&key(i), format!("keep-{i:0>60}").as_bytes())
            .unwrap();
    }
    db.flush().unwrap();
    for i in 2..60u32 {
        db.put(&key(i), format!("keep-{i:0>61}").as_bytes())
            .unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let o = opts(
        Arc::new(mem.clone()),
        engine,
        Arc::new(Rule { by_value: true }),
    );
    let db = Db::open(mem_dir(), o.clone()).unwrap();
    assert!(db.get(&key(1)).unwrap().is_some());
    let r = db.gc_opt(0.0).unwrap();
    assert!(r.values_relocated > 0, "{r:?}");
    assert_eq!(db.get(&key(1)).unwrap(), None);
    db.close().unwrap();
    for o in [o, plain] {
        let db = Db::open(mem_dir(), o).unwrap();
        assert_eq!(db.get(&key(1)).unwrap(), None);
        db.close().unwrap();
    }
}

/// Crash points through a workload whose filtered records shadow older versions: whatever
/// the crash keeps, no key reads an older version once its newer write was durable.
fn crash_never_resurrects(engine: Engine) {
    const N: u32 = 40;
    let old = |i: u32| format!("keep-old-{i:0>40}").into_bytes();
    let new = |i: u32| format!("drop-new-{i:0>40}").into_bytes();
    let sync = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    // Phase 1 (no filter needed): old versions, compacted to the bottom. Phase 2: removable
    // newer versions, synced; then flush, compactions, GC under the filter.
    let base = MemFs::new();
    {
        let db = Db::open(mem_dir(), engine.options(tiny_opts(Arc::new(base.clone())))).unwrap();
        for i in 0..N {
            db.put(&key(i), &old(i)).unwrap();
        }
        db.compact_range(None, None).unwrap();
        db.close().unwrap();
    }
    let files = common::copy_files(&base);
    let acked = std::sync::atomic::AtomicU32::new(0);
    let workload = |db: &Db| -> strata_engine::Result<()> {
        for i in 0..N {
            db.put_opt(&sync, &key(i), &new(i))?;
            acked.store(i + 1, std::sync::atomic::Ordering::Relaxed);
        }
        db.flush()?;
        for i in 0..N / 2 {
            db.put(&key(i + 1000), &old(i))?;
        }
        db.compact_range(None, None)?;
        if engine == Engine::Separated {
            db.gc_opt(0.0)?;
        }
        db.compact_range(None, None)?;
        Ok(())
    };
    // Count the workload's operations.
    let total = {
        let mem = common::restore_files(&files);
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let o = opts(
            Arc::new(fault.clone()),
            engine,
            Arc::new(Rule { by_value: true }),
        );
        let db = Db::open(mem_dir(), o).unwrap();
        workload(&db).unwrap();
        db.close().unwrap();
        fault.op_count()
    };
    let points = env_usize("STRATA_FILTER_CRASH_POINTS", 120) as u64;
    let stride = (total / points).max(1);
    let mut checked = 0;
    for k in (0..total).step_by(stride as usize) {
        let mem = common::restore_files(&files);
        let fault = FaultFs::new(Arc::new(mem.clone()));
        fault.fail_after(k);
        acked.store(0, std::sync::atomic::Ordering::Relaxed);
        let o = opts(
            Arc::new(fault.clone()),
            engine,
            Arc::new(Rule { by_value: true }),
        );
        if let Ok(db) = Db::open(mem_dir(), o) {
            let _ = workload(&db);
            drop(db);
        }
        let durable = acked.load(std::sync::atomic::Ordering::Relaxed);
        mem.crash_with(crash_mode(k));
        let o = opts(
            Arc::new(mem.clone()),
            engine,
            Arc::new(Rule { by_value: true }),
        );
        let ctx = format!("{engine:?} crash point {k} of {total} ({durable} new writes acked)");
        let db = Db::open(mem_dir(), o).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        let check = |db: &Db, when: &str| {
            for i in 0..N {
                let g = db.get(&key(i)).unwrap();
                if i < durable {
                    // Synced: the new version or its removal, never the old one.
                    assert!(
                        g.is_none() || g == Some(new(i)),
                        "{ctx} {when}: key {i} reads {:?}",
                        g.map(|v| show(&v))
                    );
                } else {
                    assert!(
                        g.is_none() || g == Some(old(i)) || g == Some(new(i)),
                        "{ctx} {when}: key {i} reads {:?}",
                        g.map(|v| show(&v))
                    );
                }
            }
        };
        check(&db, "after recovery");
        db.compact_range(None, None).unwrap();
        check(&db, "after a full compaction");
        if engine == Engine::Separated {
            db.gc_opt(0.0).unwrap();
            check(&db, "after GC");
        }
        checked += 1;
        drop(db);
    }
    assert!(checked > 50, "only {checked} crash points");
    println!("{engine:?}: checked {checked} crash points of {total}");
}

on_each_engine!(
    model,
    key_only_filter_reads_no_values,
    removed_record_does_not_uncover_older_versions,
    snapshot_taken_during_a_job_is_respected,
    gc_writes_a_tombstone_for_a_removed_value,
    crash_never_resurrects,
);
