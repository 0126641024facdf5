//! Power loss at a random moment under concurrent writers, readers and value-log GC.
//!
//! Each round runs, on one `MemFs`, several writer threads (each on its own key range:
//! synced and unsynced puts, puts with `disable_wal`, deletes, batches), reader threads
//! (`get`, `multi_get`, iterators) and background GC, with separation on, small value-log
//! files and a low GC ratio. A controller thread sleeps a random time, marks the crash and
//! calls `MemFs::crash`: from then on every file handle of the "dead" process fails.
//!
//! Invariants:
//! - Before the crash no read fails (a failure on a healthy file system is false
//!   corruption), and at any time every value read is one that was written for its key
//!   (values name their key and a version, and the rest of their bytes derive from both).
//! - After the crash `Db::check` passes and the database opens. For each writer thread the
//!   recovered keys equal its state before the round plus its ops `[0, F)` plus its logged
//!   (not `disable_wal`) ops in `[F, P)`, for some `F <= P` with `P` covering its last
//!   acknowledged synced logged op: the value log is one sequential log, so what survives of
//!   it is a prefix that covers every synced write; `disable_wal` writes survive only in a
//!   flushed memtable, and a memtable is flushed only after the log behind it is synced.
//! - Every recovered value reads back (no dangling pointer), and after `gc_opt(0.0)` no
//!   value-log file is in the directory that the database does not know (no orphan).
//!
//! The next round continues on the recovered database, so recovery of a recovered database
//! is covered too.
//!
//! Default (prints "checked N crash points"):
//!     cargo test -p strata-engine --test vlog_concurrent_crash -- --nocapture
//! STRATA_VLOG_CONC_NO_WAL_PERCENT sets the share of `disable_wal` writes (default 10).
//! Long run (STRATA_VLOG_CONC_SEEDS seeds of STRATA_VLOG_CONC_ROUNDS crash points each):
//!     STRATA_VLOG_CONC_SEEDS=2000 STRATA_VLOG_CONC_ROUNDS=10 cargo test -p strata-engine \
//!         --test vlog_concurrent_crash -- --ignored --nocapture

mod common;

use common::{env_usize, mem_dir, scan_all, show, value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use strata_engine::io::{Fs, MemFs};
use strata_engine::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

const WRITERS: usize = 3;
const READERS: usize = 2;
const KEYS_PER_WRITER: u32 = 16;

fn options(fs: Arc<dyn Fs>) -> Options {
    Options {
        fs,
        write_buffer_bytes: 8 << 10,
        target_file_size_bytes: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        l0_compaction_trigger: 2,
        block_size_bytes: 512,
        background_threads: 2,
        sep_threshold_bytes: 32,
        vlog_file_bytes: 2 << 10,
        vlog_buffer_bytes: 512,
        gc_garbage_ratio: 0.2,
        gc_interval_ms: 1,
        vlog_prefetch: 4,
        ..Options::default()
    }
}

/// Key `i` of writer `t` (nine bytes or more: see `common::key`).
fn wkey(t: usize, i: u32) -> Vec<u8> {
    format!("w{t}-key-{i:03}").into_bytes()
}

/// The writer and index of a key made by `wkey`.
fn parse_key(k: &[u8]) -> Option<(usize, u32)> {
    let s = std::str::from_utf8(k).ok()?;
    let (t, i) = s.strip_prefix('w')?.split_once("-key-")?;
    Some((t.parse().ok()?, i.parse().ok()?))
}

/// Length of version `tag` of a key: mostly separated, some inline (below the threshold).
fn value_len(k: &[u8], tag: u32) -> usize {
    let h = k.iter().fold(
        u64::from(tag).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3),
    );
    if h % 5 == 0 {
        20
    } else {
        40 + (h % 200) as usize
    }
}

/// Version `tag` of key `k`.
fn wvalue(k: &[u8], tag: u32) -> Vec<u8> {
    value(k, tag, value_len(k, tag))
}

/// The version a value claims to be, if it is exactly that version of `k`.
fn parse_value(k: &[u8], v: &[u8]) -> Option<u32> {
    let rest = v.strip_prefix(k)?.strip_prefix(b"#")?;
    let end = rest.iter().position(|&b| b == b':')?;
    let tag: u32 = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    (wvalue(k, tag) == v).then_some(tag)
}

/// Percent of writes with `disable_wal` (STRATA_VLOG_CONC_NO_WAL_PERCENT, default 10; 0
/// takes them out of the run, to tell their problems from the others).
fn no_wal_percent() -> usize {
    env_usize("STRATA_VLOG_CONC_NO_WAL_PERCENT", 10)
}

/// Versions issued so far, per key: a reader may see only these.
type Issued = Mutex<HashMap<Vec<u8>, BTreeSet<u32>>>;

/// One operation of a writer: `(key index, Some(version) or None for a delete)` entries.
#[derive(Clone, Debug)]
struct WOp {
    items: Vec<(u32, Option<u32>)>,
    sync: bool,
    disable_wal: bool,
    acked: bool,
}

/// What a writer's keys hold: key index → version.
type State = BTreeMap<u32, u32>;

fn apply(s: &mut State, op: &WOp) {
    for (i, v) in &op.items {
        match v {
            Some(v) => s.insert(*i, *v),
            None => s.remove(i),
        };
    }
}

/// Writes until the crash (or a write failing because of it); returns the ops issued (the last one, if not
/// acknowledged, may or may not have happened).
fn writer(
    db: &Db,
    t: usize,
    seed: u64,
    first_tag: u32,
    crashed: &AtomicBool,
    issued: &Issued,
) -> Vec<WOp> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ops = Vec::new();
    let mut tag = first_tag;
    loop {
        let n = if rng.gen_bool(0.15) {
            rng.gen_range(2..5)
        } else {
            1
        };
        let mut items = Vec::new();
        for _ in 0..n {
            let i = rng.gen_range(0..KEYS_PER_WRITER);
            if items.iter().any(|(j, _)| *j == i) {
                continue;
            }
            tag += 1;
            let v = (!rng.gen_bool(0.1)).then_some(tag);
            items.push((i, v));
        }
        let disable_wal = rng.gen_range(0..100) < no_wal_percent();
        let sync = !disable_wal && rng.gen_bool(0.3);
        let mut batch = WriteBatch::new();
        {
            let mut iss = issued.lock().unwrap();
            for (i, v) in &items {
                let k = wkey(t, *i);
                match v {
                    Some(v) => {
                        iss.entry(k.clone()).or_default().insert(*v);
                        batch.put(&k, &wvalue(&k, *v));
                    }
                    None => batch.delete(&k),
                }
            }
        }
        let wo = WriteOptions { sync, disable_wal };
        let r = if items.len() == 1 {
            let k = wkey(t, items[0].0);
            match items[0].1 {
                Some(v) => db.put_opt(&wo, &k, &wvalue(&k, v)),
                None => db.delete_opt(&wo, &k),
            }
        } else {
            db.write(&wo, batch)
        };
        ops.push(WOp {
            items,
            sync,
            disable_wal,
            acked: r.is_ok(),
        });
        if r.is_err() || crashed.load(Ordering::SeqCst) {
            return ops;
        }
        if rng.gen_bool(0.02) && db.flush().is_err() {
            return ops;
        }
    }
}

/// Checks a value read for `k`: it must be a version issued for `k`.
fn check_read(k: &[u8], v: &[u8], issued: &Issued) -> Result<(), String> {
    let tag = parse_value(k, v)
        .ok_or_else(|| format!("read {}: not a value of this key: {}", show(k), show(v)))?;
    let ok = issued
        .lock()
        .unwrap()
        .get(k)
        .is_some_and(|s| s.contains(&tag));
    if ok {
        Ok(())
    } else {
        Err(format!("read {}: version {tag} was never written", show(k)))
    }
}

/// Reads until `stop`; returns the first bad read. An error is bad only if the crash had not
/// happened when it was seen.
fn reader(
    db: &Db,
    seed: u64,
    crashed: &AtomicBool,
    stop: &AtomicBool,
    issued: &Issued,
) -> Option<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let err = |what: &str, e: strata_engine::Error| -> Option<String> {
        (!crashed.load(Ordering::SeqCst)).then(|| {
            format!(
                "{what} failed before the crash (false corruption): {e} (known value-log \
                     files {:?}, head {})",
                db.vlog_file_numbers(),
                db.stats().vlog_head_file
            )
        })
    };
    while !stop.load(Ordering::SeqCst) {
        let t = rng.gen_range(0..WRITERS);
        match rng.gen_range(0..3) {
            0 => {
                let k = wkey(t, rng.gen_range(0..KEYS_PER_WRITER));
                match db.get(&k) {
                    Ok(Some(v)) => {
                        if let Err(e) = check_read(&k, &v, issued) {
                            return Some(e);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        if let Some(m) = err("get", e) {
                            return Some(m);
                        }
                    }
                }
            }
            1 => {
                let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..8))
                    .map(|_| wkey(t, rng.gen_range(0..KEYS_PER_WRITER)))
                    .collect();
                let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
                for (k, r) in keys
                    .iter()
                    .zip(db.multi_get(&ReadOptions::default(), &refs))
                {
                    match r {
                        Ok(Some(v)) => {
                            if let Err(e) = check_read(k, &v, issued) {
                                return Some(e);
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            if let Some(m) = err("multi_get", e) {
                                return Some(m);
                            }
                        }
                    }
                }
            }
            _ => {
                let mut it = match db.iter(&ReadOptions::default()) {
                    Ok(it) => it,
                    Err(e) => match err("iter", e) {
                        Some(m) => return Some(m),
                        None => continue,
                    },
                };
                it.seek(&wkey(t, rng.gen_range(0..KEYS_PER_WRITER)));
                let mut n = 0;
                while it.valid() && n < 20 {
                    let k = it.key().to_vec();
                    match it.try_value() {
                        Ok(v) => {
                            if let Err(e) = check_read(&k, v, issued) {
                                return Some(e);
                            }
                        }
                        Err(e) => {
                            if let Some(m) = err("iterator value", e) {
                                return Some(m);
                            }
                            break;
                        }
                    }
                    it.next();
                    n += 1;
                }
                if let Err(e) = it.status() {
                    if let Some(m) = err("iterator", e) {
                        return Some(m);
                    }
                }
            }
        }
    }
    None
}

/// Whether `got` is `base` plus `ops[..f]` plus the logged ops of `ops[f..p]` for some
/// `f <= p` with `p >= must`.
fn explained(base: &State, ops: &[WOp], must: usize, got: &State) -> bool {
    let mismatches = |s: &State| {
        let keys: BTreeSet<&u32> = s.keys().chain(got.keys()).collect();
        keys.into_iter().filter(|k| s.get(k) != got.get(k)).count()
    };
    let mut at_f = base.clone();
    for f in 0..=ops.len() {
        if f > 0 {
            apply(&mut at_f, &ops[f - 1]);
        }
        // Walk p from f, tracking the number of mismatched keys incrementally.
        let mut s = at_f.clone();
        let mut bad = mismatches(&s);
        for p in f..=ops.len() {
            if p > f && !ops[p - 1].disable_wal {
                for (i, v) in &ops[p - 1].items {
                    let before = s.get(i) != got.get(i);
                    match v {
                        Some(v) => s.insert(*i, *v),
                        None => s.remove(i),
                    };
                    let after = s.get(i) != got.get(i);
                    bad = bad + usize::from(after) - usize::from(before);
                }
            }
            if p >= must && bad == 0 {
                return true;
            }
        }
    }
    false
}

/// Runs `f` on a thread and fails the test if it takes longer than `secs`.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what} did not finish within {secs} s"))
}

/// The recovered state of every writer's keys, checking each value.
fn recovered(db: &Db, ctx: &str) -> Vec<State> {
    let all = scan_all(db).unwrap_or_else(|e| panic!("{ctx}: scan after reopen: {e}"));
    let mut out = vec![State::new(); WRITERS];
    for (k, v) in &all {
        let (t, i) = parse_key(k).unwrap_or_else(|| panic!("{ctx}: unknown key {}", show(k)));
        let tag = parse_value(k, v)
            .unwrap_or_else(|| panic!("{ctx}: wrong value for {}: {}", show(k), show(v)));
        assert_eq!(
            db.get(k)
                .unwrap_or_else(|e| panic!("{ctx}: get {}: {e}", show(k))),
            Some(v.clone()),
            "{ctx}: get and scan disagree on {}",
            show(k)
        );
        out[t].insert(i, tag);
    }
    out
}

/// Checks that after `gc_opt(0.0)` every value-log file in the directory is one the database
/// knows.
fn no_orphans(db: Arc<Db>, mem: &MemFs, ctx: &str) {
    let d = db.clone();
    within(60, "gc_opt(0.0)", move || d.gc_opt(0.0).map(|_| ()))
        .unwrap_or_else(|e| panic!("{ctx}: gc after reopen: {e}"));
    // What the database knows first: a file it drops later is removed before the listing.
    let known = known_vlog_files(&db);
    let on_disk = vlog_files_on_disk(mem);
    let orphans: Vec<&u64> = on_disk.difference(&known).collect();
    assert!(
        orphans.is_empty(),
        "{ctx}: orphan value-log files {orphans:?} (known: {known:?})"
    );
    no_missing(&db, mem, ctx);
}

/// The value-log files the database knows.
fn known_vlog_files(db: &Db) -> BTreeSet<u64> {
    db.vlog_file_numbers().into_iter().collect()
}

/// The value-log files in the directory.
fn vlog_files_on_disk(mem: &MemFs) -> BTreeSet<u64> {
    mem.list(&mem_dir())
        .unwrap()
        .iter()
        .filter_map(|n| n.strip_suffix(".vlog")?.parse().ok())
        .collect()
}

/// Checks that every value-log file the database knows is in the directory. Background work
/// runs meanwhile: GC drops a file from what the database knows, then removes it; a log
/// rotation or GC's output registers a new file around its creation. One look can catch
/// either half-way, so a file counts as missing only if it is known and absent at every look
/// for a second.
fn no_missing(db: &Db, mem: &MemFs, ctx: &str) {
    let missing_now = || -> BTreeSet<u64> {
        let on_disk = vlog_files_on_disk(mem);
        known_vlog_files(db).difference(&on_disk).copied().collect()
    };
    let mut missing = missing_now();
    for _ in 0..20 {
        if missing.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        missing = missing.intersection(&missing_now()).copied().collect();
    }
    assert!(
        missing.is_empty(),
        "{ctx}: value-log files {missing:?} are known but not in the directory"
    );
}

/// What a run did, to show that it exercised something.
#[derive(Default)]
struct Figures {
    acked: usize,
    acked_synced: usize,
    gc_files_collected: u64,
}

/// One seed: `rounds` crash points, each on the database recovered from the previous one.
fn run_seed(seed: u64, rounds: usize, fig: &mut Figures) {
    let mem = MemFs::with_seed(seed);
    let opts = || options(Arc::new(mem.clone()));
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5EED);
    let mut base = vec![State::new(); WRITERS];
    let mut db = Arc::new(Db::open(mem_dir(), opts()).expect("open on a fresh MemFs"));
    let mut next_tag = 0u32;
    for round in 0..rounds {
        let ctx = format!("seed {seed} round {round}");
        let issued: Arc<Issued> = Arc::new(Mutex::new(HashMap::new()));
        for (t, s) in base.iter().enumerate() {
            let mut iss = issued.lock().unwrap();
            for (i, v) in s {
                iss.entry(wkey(t, *i)).or_default().insert(*v);
            }
        }
        let crashed = AtomicBool::new(false);
        let stop = AtomicBool::new(false);
        let wait_us = rng.gen_range(0..15_000);
        let tear = rng.gen_bool(0.5);
        let mut ops = Vec::new();
        let mut bad_reads = Vec::new();
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..WRITERS)
                .map(|t| {
                    let (db, issued) = (&db, &issued);
                    let wseed = rng.gen();
                    let (first, crashed) = (next_tag, &crashed);
                    s.spawn(move || writer(db, t, wseed, first, crashed, issued))
                })
                .collect();
            let readers: Vec<_> = (0..READERS)
                .map(|_| {
                    let (db, issued, crashed, stop) = (&db, &issued, &crashed, &stop);
                    let rseed = rng.gen();
                    s.spawn(move || reader(db, rseed, crashed, stop, issued))
                })
                .collect();
            std::thread::sleep(Duration::from_micros(wait_us));
            crashed.store(true, Ordering::SeqCst);
            mem.crash(tear);
            ops = writers.into_iter().map(|h| h.join().unwrap()).collect();
            stop.store(true, Ordering::SeqCst);
            bad_reads = readers
                .into_iter()
                .filter_map(|h| h.join().unwrap())
                .collect();
        });
        next_tag += 10_000_000;
        for o in ops.iter().flatten().filter(|o| o.acked) {
            fig.acked += o.items.len();
            fig.acked_synced += usize::from(o.sync);
        }
        fig.gc_files_collected += db.stats().gc_files_collected;
        assert!(bad_reads.is_empty(), "{ctx}: {}", bad_reads.join("; "));
        // The threads are joined, so this is the last handle.
        within(60, "closing the crashed database", move || drop(db));
        let report = Db::check(mem_dir(), opts()).unwrap_or_else(|e| panic!("{ctx}: check: {e}"));
        assert!(report.is_ok(), "{ctx}: check after the crash:\n{report}");
        db = Arc::new(Db::open(mem_dir(), opts()).unwrap_or_else(|e| panic!("{ctx}: open: {e}")));
        no_missing(&db, &mem, &format!("{ctx}: right after open"));
        let got = recovered(&db, &ctx);
        for t in 0..WRITERS {
            let ops: &Vec<WOp> = &ops[t];
            let must = ops
                .iter()
                .rposition(|o| o.acked && o.sync && !o.disable_wal)
                .map_or(0, |i| i + 1);
            assert!(
                explained(&base[t], ops, must, &got[t]),
                "{ctx}: writer {t}: recovered state is not base + a flushed prefix + a logged \
                 prefix covering op {must} of {}\nbase {:?}\ngot  {:?}\nops {:?}",
                ops.len(),
                base[t],
                got[t],
                ops
            );
        }
        no_orphans(db.clone(), &mem, &ctx);
        base = got;
    }
    within(60, "closing the database", move || {
        Arc::try_unwrap(db)
            .ok()
            .expect("no other handle")
            .close()
            .map_err(|e| e.to_string())
    })
    .unwrap_or_else(|e| panic!("seed {seed}: close: {e}"));
    let report = Db::check(mem_dir(), opts()).unwrap_or_else(|e| panic!("seed {seed}: check: {e}"));
    assert!(report.is_ok(), "seed {seed}: check after close:\n{report}");
}

fn run(seeds: usize, rounds: usize, first_seed: u64) {
    let mut fig = Figures::default();
    for seed in first_seed..first_seed + seeds as u64 {
        run_seed(seed, rounds, &mut fig);
    }
    println!(
        "checked {} crash points ({} writes acknowledged, {} synced ops acknowledged, {} \
         value-log files collected by GC before a crash)",
        seeds * rounds,
        fig.acked,
        fig.acked_synced,
        fig.gc_files_collected
    );
}

#[test]
fn concurrent_crash_points() {
    run(
        env_usize("STRATA_VLOG_CONC_SEEDS", 250),
        env_usize("STRATA_VLOG_CONC_ROUNDS", 8),
        1,
    );
}

#[test]
#[ignore]
fn concurrent_crash_points_long() {
    run(
        env_usize("STRATA_VLOG_CONC_SEEDS", 2000),
        env_usize("STRATA_VLOG_CONC_ROUNDS", 10),
        100_000,
    );
}

/// A file system that holds the first `open` of one path until that path is removed (or a
/// time limit passes): it stretches the moment between a reader finding a value-log file
/// without an open handle and its own `open`, so GC can collect and remove the file there.
#[derive(Clone)]
struct GateFs {
    inner: MemFs,
    gate: Arc<Gate>,
}

#[derive(Default)]
struct Gate {
    /// (path to hold the first open of, an open of it was held, it was removed)
    state: Mutex<(Option<std::path::PathBuf>, bool, bool)>,
    cv: std::sync::Condvar,
}

impl Fs for GateFs {
    fn create(
        &self,
        p: &std::path::Path,
    ) -> strata_engine::Result<Box<dyn strata_engine::io::WritableFile>> {
        self.inner.create(p)
    }
    fn open(
        &self,
        p: &std::path::Path,
    ) -> strata_engine::Result<Arc<dyn strata_engine::io::RandomAccessFile>> {
        let mut st = self.gate.state.lock().unwrap();
        if st.0.as_deref() == Some(p) && !st.1 {
            st.1 = true;
            self.gate.cv.notify_all();
            st = self
                .gate
                .cv
                .wait_timeout_while(st, Duration::from_secs(5), |s| !s.2)
                .unwrap()
                .0;
        }
        drop(st);
        self.inner.open(p)
    }
    fn rename(&self, a: &std::path::Path, b: &std::path::Path) -> strata_engine::Result<()> {
        self.inner.rename(a, b)
    }
    fn remove(&self, p: &std::path::Path) -> strata_engine::Result<()> {
        let r = self.inner.remove(p);
        let mut st = self.gate.state.lock().unwrap();
        st.2 |= st.0.as_deref() == Some(p);
        self.gate.cv.notify_all();
        r
    }
    fn list(&self, d: &std::path::Path) -> strata_engine::Result<Vec<String>> {
        self.inner.list(d)
    }
    fn exists(&self, p: &std::path::Path) -> strata_engine::Result<bool> {
        self.inner.exists(p)
    }
    fn create_dir_all(&self, d: &std::path::Path) -> strata_engine::Result<()> {
        self.inner.create_dir_all(d)
    }
    fn sync_dir(&self, d: &std::path::Path) -> strata_engine::Result<()> {
        self.inner.sync_dir(d)
    }
    fn sync_file(&self, p: &std::path::Path) -> strata_engine::Result<()> {
        self.inner.sync_file(p)
    }
    fn file_size(&self, p: &std::path::Path) -> strata_engine::Result<u64> {
        self.inner.file_size(p)
    }
    fn lock(
        &self,
        p: &std::path::Path,
    ) -> strata_engine::Result<Box<dyn strata_engine::io::FileLock>> {
        self.inner.lock(p)
    }
}

/// Found by `concurrent_crash_points` (a read failing before any crash): a reader that finds
/// a value-log file without an open handle opens it by path; if GC collects the file in
/// between (opening its own handle, relocating the values, removing the file), the reader's
/// open used to fail with "no such file". It must read through the handle GC opened.
#[test]
fn regression_reader_opening_a_file_that_gc_removes_meanwhile() {
    let gfs = GateFs {
        inner: MemFs::new(),
        gate: Arc::new(Gate::default()),
    };
    let opts = Options {
        gc_interval_ms: 3_600_000,
        ..options(Arc::new(gfs.clone()))
    };
    let db = Db::open(mem_dir(), opts).unwrap();
    let keys: Vec<Vec<u8>> = (0..40).map(|i| wkey(0, i)).collect();
    for (i, k) in keys.iter().enumerate() {
        db.put(k, &wvalue(k, i as u32 + 1000)).unwrap();
    }
    db.flush().unwrap();
    // The key whose value sits in the oldest value-log file: sealed, below the durable head.
    let (k, file) = keys
        .iter()
        .filter_map(|k| Some((k, db.value_location(k).unwrap()?.file)))
        .min_by_key(|(_, f)| *f)
        .expect("values are separated");
    assert!(file < db.stats().vlog_head_file);
    gfs.gate.state.lock().unwrap().0 = Some(mem_dir().join(format!("{file:06}.vlog")));
    std::thread::scope(|s| {
        let reader = s.spawn(|| db.get(k));
        {
            let st = gfs.gate.state.lock().unwrap();
            let (st, _) = gfs
                .gate
                .cv
                .wait_timeout_while(st, Duration::from_secs(5), |s| !s.1)
                .unwrap();
            assert!(
                st.1,
                "the reader never opened file {file}: nothing to race with"
            );
        }
        db.gc_opt(0.0).unwrap();
        assert!(
            gfs.gate.state.lock().unwrap().2,
            "GC did not remove file {file}: nothing to race with"
        );
        let got = reader.join().unwrap();
        let want = wvalue(k, keys.iter().position(|x| x == k).unwrap() as u32 + 1000);
        assert_eq!(
            got.map_err(|e| e.to_string()),
            Ok(Some(want)),
            "get of {} while GC removed file {file}",
            show(k)
        );
    });
}
