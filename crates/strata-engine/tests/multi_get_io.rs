//! Batched reads: `get`, and `multi_get` over io_uring, the thread pool and the
//! sync backend, with direct I/O on and off, must give identical results; a failed or
//! corrupt block must fail exactly the keys that needed it.
//!
//! io_uring must be available (it is on the project's machines); on a machine without it set
//! `STRATA_ALLOW_NO_URING=1`, and the io_uring runs then check the thread-pool fallback.
//!
//! Every configuration runs with each of `VALUE_LAYOUTS`: values in the tables, every value
//! in the value log (key-value separation, threshold 0: the value-log stage of `multi_get`
//! and direct reads of value-log files), and page-aligned table blocks.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_engine::io::{FaultFs, FaultKind, FaultOp, FaultRule, Fs, IoBackend, MemFs, RealFs};
use strata_engine::key::{seek_key, MAX_SEQ};
use strata_engine::sst::{BlockHandle, Table, BLOCK_TRAILER_LEN};
use strata_engine::{Db, Error, Options, ReadOptions};

type Oracle = BTreeMap<Vec<u8>, Vec<u8>>;

fn small_options() -> Options {
    Options {
        write_buffer_bytes: 64 << 10,
        target_file_size_bytes: 64 << 10,
        max_bytes_for_level_base: 256 << 10,
        l0_compaction_trigger: 2,
        block_size_bytes: 1024,
        ..Options::default()
    }
}

/// Sets the options of one value layout.
type Layout = fn(&mut Options);

/// Value layouts every configuration runs with (see the module docs).
const VALUE_LAYOUTS: [(&str, Layout); 3] = [
    ("values in tables", |_| {}),
    ("values in the value log", |o| o.sep_threshold_bytes = 0),
    ("page-aligned blocks", |o| o.block_align = Some(true)),
];

/// Whether a layout separates values.
fn opts_separated(layout: Layout) -> bool {
    let mut o = Options::default();
    layout(&mut o);
    o.sep_threshold_bytes != Options::default().sep_threshold_bytes
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn uring_required() -> bool {
    match strata_engine::io::uring_status() {
        Ok(()) => true,
        Err(e) if std::env::var_os("STRATA_ALLOW_NO_URING").is_some() => {
            eprintln!("io_uring unavailable ({e}); its runs check the thread-pool fallback");
            false
        }
        Err(e) => panic!("io_uring unavailable: {e} (set STRATA_ALLOW_NO_URING=1 to accept)"),
    }
}

/// Random puts, overwrites and deletes over 4000 keys with flushes and compactions on the
/// way, the last writes left in the memtable (replayed from the WAL on every reopen).
fn build(dir: &Path, layout: Layout) -> Oracle {
    let mut opts = small_options();
    layout(&mut opts);
    let db = Db::open(dir, opts).unwrap();
    let mut rng = StdRng::seed_from_u64(6);
    let mut oracle = Oracle::new();
    for op in 0..24_000u32 {
        let k = key(rng.gen_range(0..4000));
        if rng.gen_bool(0.15) {
            db.delete(&k).unwrap();
            oracle.remove(&k);
        } else {
            let len = if rng.gen_bool(0.05) {
                3000
            } else {
                rng.gen_range(1..300)
            };
            let v: Vec<u8> = (0..len).map(|j| (op as usize + j) as u8).collect();
            db.put(&k, &v).unwrap();
            oracle.insert(k, v);
        }
        if op == 20_000 {
            db.wait_idle().unwrap();
        }
    }
    let s = db.stats();
    assert!(s.levels.iter().skip(1).any(|&(n, _)| n > 0), "{s}");
    db.close().unwrap();
    oracle
}

/// The lookups of one run: every key (and some that never existed) through `get`, then
/// through `multi_get` in batches of assorted sizes, shuffled, with duplicates.
fn run(dir: &Path, opts: Options) -> (Vec<Option<Vec<u8>>>, strata_engine::Stats) {
    let db = Db::open(dir, opts).unwrap();
    let keys: Vec<Vec<u8>> = (0..4100).map(key).collect();
    let mut got = Vec::new();
    for k in &keys {
        got.push(db.get(k).unwrap());
    }
    let mut rng = StdRng::seed_from_u64(7);
    let mut order: Vec<usize> = (0..keys.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    order.extend((0..300).map(|_| rng.gen_range(0..keys.len())));
    let ro = ReadOptions::default();
    let mut at = 0;
    for size in [1usize, 2, 7, 32, 64, 200].iter().cycle() {
        if at >= order.len() {
            break;
        }
        let batch = &order[at..(at + size).min(order.len())];
        at += batch.len();
        let refs: Vec<&[u8]> = batch.iter().map(|&i| keys[i].as_slice()).collect();
        for (&i, r) in batch.iter().zip(db.multi_get(&ro, &refs)) {
            let r = r.unwrap();
            assert_eq!(r, got[i], "multi_get and get differ on key {i}");
        }
    }
    let stats = db.stats();
    db.close().unwrap();
    (got, stats)
}

#[test]
fn get_and_multi_get_agree_on_every_backend_with_and_without_direct_io() {
    let uring = uring_required();
    for (layout_name, layout) in VALUE_LAYOUTS {
        let dir = tempfile::tempdir().unwrap();
        let oracle = build(dir.path(), layout);
        let want: Vec<Option<Vec<u8>>> = (0..4100).map(|i| oracle.get(&key(i)).cloned()).collect();
        for direct_io in [false, true] {
            for backend in [IoBackend::Uring, IoBackend::Threads, IoBackend::Sync] {
                // No block cache: every stage reads from the files. A small one: a mix.
                for cache in [0, 128 << 10] {
                    let mut opts = Options {
                        io_backend: backend,
                        direct_io,
                        block_cache_bytes: cache,
                        ..small_options()
                    };
                    layout(&mut opts);
                    let what =
                        format!("{layout_name}, {backend:?}, direct {direct_io}, cache {cache}");
                    let (got, s) = run(dir.path(), opts);
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(g, w, "{what}: key {i}");
                    }
                    // The batches ran where they should have.
                    let on = |b: IoBackend| match b {
                        IoBackend::Uring if uring => s.read_batches_uring,
                        IoBackend::Uring | IoBackend::Threads => s.read_batches_threads,
                        _ => s.read_batches_sync,
                    };
                    assert!(on(backend) > 0, "{what}: {s}");
                    let total = s.read_batches_uring + s.read_batches_threads + s.read_batches_sync;
                    // Batches of one read run in place (sync) on every backend.
                    assert!(s.read_batches_sync <= total, "{what}: {s}");
                    if backend != IoBackend::Uring || !uring {
                        assert_eq!(s.read_batches_uring, 0, "{what}: {s}");
                    }
                    if backend == IoBackend::Sync {
                        assert_eq!(s.read_batches_threads, 0, "{what}: {s}");
                    }
                    if opts_separated(layout) {
                        assert!(s.vlog_bytes > 0, "{what}: no value log: {s}");
                    }
                    assert_eq!(s.direct_io, direct_io, "{what}");
                    assert_eq!(s.direct_io_refusals, 0, "{what}: O_DIRECT refused");
                    assert!(s.batched_reads >= total, "{what}: {s}");
                    assert!(s.to_string().contains("Batched reads: backend"), "{s}");
                }
            }
        }
    }
}

/// A database whose keys all sit in one table, and that table's block of each key.
struct OneTable {
    dir: PathBuf,
    table: PathBuf,
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u8>>,
    blocks: Vec<BlockHandle>,
}

fn one_table(fs: Arc<dyn Fs>, dir: PathBuf) -> OneTable {
    let opts = Options {
        fs: fs.clone(),
        write_buffer_bytes: 8 << 20,
        block_size_bytes: 1024,
        ..Options::default()
    };
    let keys: Vec<Vec<u8>> = (0..3000).map(key).collect();
    let values: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| format!("value-{i}-{}", "v".repeat((i % 90) as usize)).into_bytes())
        .collect();
    let db = Db::open(&dir, opts).unwrap();
    for (k, v) in keys.iter().zip(&values) {
        db.put(k, v).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let mut tables: Vec<String> = fs
        .list(&dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .collect();
    assert_eq!(tables.len(), 1, "{tables:?}");
    let table = dir.join(tables.pop().unwrap());
    let t = Table::open(fs.open(&table).unwrap(), 1, None).unwrap();
    let blocks = keys
        .iter()
        .map(|k| t.find_block(&seek_key(k, MAX_SEQ)).unwrap())
        .collect();
    assert!(t.num_blocks() > 50, "{}", t.num_blocks());
    OneTable {
        dir,
        table,
        keys,
        values,
        blocks,
    }
}

impl OneTable {
    /// A block in the middle of the table with several keys.
    fn victim(&self) -> BlockHandle {
        self.blocks[self.blocks.len() / 2]
    }

    /// Flips a byte in the middle of the victim block in the table file; returns the block.
    fn damage_victim(&self) -> BlockHandle {
        let v = self.victim();
        let mut bytes = std::fs::read(&self.table).unwrap();
        bytes[(v.offset + v.size / 2) as usize] ^= 0x5a;
        std::fs::write(&self.table, &bytes).unwrap();
        v
    }

    /// Checks a `multi_get` of every key: the victim block's keys fail with `is_expected`,
    /// every other key reads its value.
    fn check(&self, db: &Db, is_expected: impl Fn(&Error) -> bool) {
        let refs: Vec<&[u8]> = self.keys.iter().map(|k| k.as_slice()).collect();
        let victim = self.victim();
        let mut failed = 0;
        for (i, r) in db
            .multi_get(&ReadOptions::default(), &refs)
            .into_iter()
            .enumerate()
        {
            if self.blocks[i] == victim {
                let e = r.expect_err("a key of the failed block read fine");
                assert!(is_expected(&e), "key {i}: {e:?}");
                failed += 1;
            } else {
                assert_eq!(r.unwrap().as_deref(), Some(&self.values[i][..]), "key {i}");
            }
        }
        assert!(failed >= 2, "the victim block holds {failed} keys");
        // `get` agrees, key by key.
        for i in [0, self.keys.len() / 2, self.keys.len() - 1] {
            let r = db.get(&self.keys[i]);
            assert_eq!(r.is_err(), self.blocks[i] == victim, "get of key {i}");
        }
    }
}

fn faulted_db(kind: FaultKind, backend: IoBackend) -> (OneTable, Db, FaultFs) {
    let mem: Arc<dyn Fs> = Arc::new(MemFs::new());
    let t = one_table(mem.clone(), PathBuf::from("/db"));
    let ffs = FaultFs::new(mem);
    let v = t.victim();
    let end = v.offset + v.size + BLOCK_TRAILER_LEN as u64;
    ffs.add_rule(
        FaultRule::new(FaultOp::Read, 1, kind)
            .path_contains(".sst")
            .read_range(v.offset, end)
            .persistent(),
    );
    let opts = Options {
        fs: Arc::new(ffs.clone()),
        io_backend: backend,
        block_cache_bytes: 0,
        ..Options::default()
    };
    let db = Db::open(&t.dir, opts).unwrap();
    (t, db, ffs)
}

#[test]
fn an_io_error_on_one_block_fails_exactly_its_keys() {
    // FaultFs files have no raw descriptor: `Uring` runs on the pool, as `Threads` does.
    for backend in [IoBackend::Uring, IoBackend::Threads, IoBackend::Sync] {
        let (t, db, ffs) = faulted_db(FaultKind::Eio, backend);
        t.check(&db, |e| e.raw_os_error() == Some(5));
        assert!(ffs.injected_count() > 0);
        let s = db.stats();
        let pooled = s.read_batches_threads > 0;
        assert_eq!(pooled, backend != IoBackend::Sync, "{backend:?}: {s}");
        assert_eq!(s.read_batches_uring, 0, "{s}");
    }
}

#[test]
fn a_short_read_on_one_block_fails_exactly_its_keys() {
    for backend in [IoBackend::Threads, IoBackend::Sync] {
        let (t, db, _ffs) = faulted_db(FaultKind::ShortRead, backend);
        t.check(&db, |e| match e {
            Error::Io { source, .. } => source.kind() == std::io::ErrorKind::UnexpectedEof,
            _ => false,
        });
    }
}

#[test]
fn corruption_in_one_block_on_disk_fails_exactly_its_keys_on_io_uring() {
    let uring = uring_required();
    let dir = tempfile::tempdir().unwrap();
    let t = one_table(Arc::new(RealFs::new()), dir.path().join("db"));
    let v = t.damage_victim();
    for direct_io in [false, true] {
        let opts = Options {
            io_backend: IoBackend::Uring,
            direct_io,
            block_cache_bytes: 0,
            ..Options::default()
        };
        let db = Db::open(&t.dir, opts).unwrap();
        t.check(&db, |e| match e {
            Error::Corruption { file, offset, .. } => *file == t.table && *offset == v.offset,
            _ => false,
        });
        let s = db.stats();
        if uring {
            assert!(s.read_batches_uring > 0, "{s}");
        }
        db.close().unwrap();
    }
}

/// `keys` cut into batches of assorted sizes (1 to 200 keys).
fn cut<'k>(keys: &'k [&'k [u8]]) -> Vec<&'k [&'k [u8]]> {
    let mut out = Vec::new();
    let mut at = 0;
    for size in [1usize, 32, 7, 200, 2, 64].iter().cycle() {
        if at >= keys.len() {
            break;
        }
        let end = (at + size).min(keys.len());
        out.push(&keys[at..end]);
        at = end;
    }
    out
}

#[test]
fn pipelined_batches_agree_with_the_model_on_every_backend() {
    let uring = uring_required();
    for (layout_name, layout) in VALUE_LAYOUTS {
        let dir = tempfile::tempdir().unwrap();
        let oracle = build(dir.path(), layout);
        let mut rng = StdRng::seed_from_u64(8);
        // Every key once and some twice (the same block wanted by two batches at once),
        // shuffled, plus keys that never existed.
        let mut ids: Vec<u32> = (0..4100)
            .chain((0..500).map(|_| rng.gen_range(0..4100)))
            .collect();
        for i in (1..ids.len()).rev() {
            ids.swap(i, rng.gen_range(0..=i));
        }
        let keys: Vec<Vec<u8>> = ids.iter().map(|&i| key(i)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let batches = cut(&refs);
        for direct_io in [false, true] {
            for backend in [IoBackend::Uring, IoBackend::Threads, IoBackend::Sync] {
                for (cache, in_flight) in [(0, 1), (0, 32), (128 << 10, 4), (0, usize::MAX)] {
                    let mut opts = Options {
                        io_backend: backend,
                        direct_io,
                        block_cache_bytes: cache,
                        ..small_options()
                    };
                    layout(&mut opts);
                    let what = format!(
                        "{layout_name}, {backend:?}, direct {direct_io}, cache {cache}, \
                         {in_flight} in flight"
                    );
                    let db = Db::open(dir.path(), opts).unwrap();
                    let got = db.multi_get_batches(&ReadOptions::default(), &batches, in_flight);
                    assert_eq!(got.len(), batches.len(), "{what}");
                    for (b, rs) in batches.iter().zip(&got) {
                        assert_eq!(b.len(), rs.len(), "{what}");
                        for (k, r) in b.iter().zip(rs) {
                            let r = r.as_ref().unwrap_or_else(|e| panic!("{what}: {e}"));
                            assert_eq!(r.as_ref(), oracle.get(*k), "{what}: key {k:?}");
                        }
                    }
                    let s = db.stats();
                    assert_eq!(s.multi_gets, batches.len() as u64, "{what}: {s}");
                    if backend == IoBackend::Uring
                        && uring
                        && (in_flight > 1 || opts_separated(layout))
                    {
                        assert!(s.read_batches_uring > 0, "{what}: {s}");
                    } else if in_flight == 1 && !opts_separated(layout) {
                        // One block read at a time: nothing to overlap, each is read in
                        // place (value-log records are read per batch, without the cap).
                        let pooled = s.read_batches_uring + s.read_batches_threads;
                        assert_eq!(pooled, 0, "{what}: {s}");
                    } else {
                        assert_eq!(s.read_batches_uring, 0, "{what}: {s}");
                    }
                    db.close().unwrap();
                }
            }
        }
    }
}

/// Groups of keys are rewritten whole by one write batch each, with the round number as
/// value, while `multi_get_batches` reads them from the files (no block cache): every batch
/// must see one round per group (its own snapshot), and a later batch of the same call never
/// an older round than an earlier one (each batch takes its view when it starts).
#[test]
fn pipelined_batches_are_snapshots_under_concurrent_writes() {
    uring_required();
    const GROUPS: u32 = 40;
    const PER_GROUP: u32 = 25;
    for backend in [IoBackend::Uring, IoBackend::Threads] {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            io_backend: backend,
            block_cache_bytes: 0,
            ..small_options()
        };
        let db = Arc::new(Db::open(dir.path(), opts).unwrap());
        fn gkey(g: u32, j: u32) -> Vec<u8> {
            format!("g{g:03}-{j:03}-{}", "p".repeat(40)).into_bytes()
        }
        fn write_round(db: &Db, g: u32, round: u64) {
            let mut wb = strata_engine::WriteBatch::new();
            for j in 0..PER_GROUP {
                let mut v = round.to_be_bytes().to_vec();
                v.extend_from_slice(&[b'v'; 60]);
                wb.put(&gkey(g, j), &v);
            }
            db.write(&strata_engine::WriteOptions::default(), wb)
                .unwrap();
        }
        for g in 0..GROUPS {
            write_round(&db, g, 0);
        }
        db.flush().unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut round = 1u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for g in 0..GROUPS {
                        write_round(&db, g, round);
                    }
                    round += 1;
                }
                round
            })
        };
        // Each batch holds two whole groups, in an order that spreads them over the table.
        let keys: Vec<Vec<u8>> = (0..GROUPS)
            .flat_map(|g| (0..PER_GROUP).map(move |j| (g, j)))
            .map(|(g, j)| gkey(g, j))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let per_batch = (2 * PER_GROUP) as usize;
        let mut batches: Vec<&[&[u8]]> = refs.chunks(per_batch).collect();
        batches.extend(refs.chunks(per_batch).rev().collect::<Vec<_>>());
        let mut checked = 0;
        while checked < 60 {
            let got = db.multi_get_batches(&ReadOptions::default(), &batches, 8);
            let mut newest_seen = vec![0u64; GROUPS as usize];
            for (b, rs) in batches.iter().zip(&got) {
                let mut round_of: BTreeMap<u32, u64> = BTreeMap::new();
                for (k, r) in b.iter().zip(rs) {
                    let v = r
                        .as_ref()
                        .unwrap()
                        .as_ref()
                        .expect("a written key is absent");
                    let round = u64::from_be_bytes(v[..8].try_into().unwrap());
                    let g: u32 = std::str::from_utf8(&k[1..4]).unwrap().parse().unwrap();
                    let first = *round_of.entry(g).or_insert(round);
                    assert_eq!(first, round, "{backend:?}: group {g} torn within a batch");
                }
                for (g, round) in round_of {
                    let seen = &mut newest_seen[g as usize];
                    assert!(round >= *seen, "{backend:?}: group {g} went back in time");
                    *seen = round;
                }
            }
            checked += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rounds = writer.join().unwrap();
        assert!(rounds > 1, "the writer never overlapped the reads");
        let s = db.stats();
        assert!(s.levels.iter().any(|&(n, _)| n > 0), "no tables: {s}");
    }
}

#[test]
fn corruption_in_one_block_fails_exactly_its_keys_in_pipelined_batches() {
    let uring = uring_required();
    let dir = tempfile::tempdir().unwrap();
    let t = one_table(Arc::new(RealFs::new()), dir.path().join("db"));
    let v = t.damage_victim();
    let refs: Vec<&[u8]> = t.keys.iter().map(|k| k.as_slice()).collect();
    // The victim's keys in several batches at once: they share its one read.
    let batches: Vec<&[&[u8]]> = refs.chunks(3).collect();
    for backend in [IoBackend::Uring, IoBackend::Threads] {
        for direct_io in [false, true] {
            let opts = Options {
                io_backend: backend,
                direct_io,
                block_cache_bytes: 0,
                ..Options::default()
            };
            let db = Db::open(&t.dir, opts).unwrap();
            let got = db.multi_get_batches(&ReadOptions::default(), &batches, 32);
            let mut failed = 0;
            for (i, r) in got.into_iter().flatten().enumerate() {
                if t.blocks[i] == v {
                    match r {
                        Err(Error::Corruption { file, offset, .. }) => {
                            assert_eq!((file, offset), (t.table.clone(), v.offset));
                        }
                        other => panic!("{backend:?}: key {i} of the corrupt block: {other:?}"),
                    }
                    failed += 1;
                } else {
                    assert_eq!(r.unwrap().as_deref(), Some(&t.values[i][..]), "key {i}");
                }
            }
            assert!(failed >= 2, "the victim block holds {failed} keys");
            let s = db.stats();
            if backend == IoBackend::Uring && uring {
                assert!(s.read_batches_uring > 0, "{s}");
            }
            db.close().unwrap();
        }
    }
}

#[test]
fn an_io_error_fails_exactly_its_keys_in_pipelined_batches_on_the_pool() {
    // FaultFs files have no descriptor: io_uring's stream hands them to the pool.
    for backend in [IoBackend::Uring, IoBackend::Threads] {
        let (t, db, ffs) = faulted_db(FaultKind::Eio, backend);
        let refs: Vec<&[u8]> = t.keys.iter().map(|k| k.as_slice()).collect();
        let batches: Vec<&[&[u8]]> = refs.chunks(5).collect();
        let got = db.multi_get_batches(&ReadOptions::default(), &batches, 16);
        for (i, r) in got.into_iter().flatten().enumerate() {
            if t.blocks[i] == t.victim() {
                assert_eq!(r.unwrap_err().raw_os_error(), Some(5), "key {i}");
            } else {
                assert_eq!(r.unwrap().as_deref(), Some(&t.values[i][..]), "key {i}");
            }
        }
        assert!(ffs.injected_count() > 0);
        let s = db.stats();
        assert!(s.read_batches_threads > 0, "{backend:?}: {s}");
        assert_eq!(s.read_batches_uring, 0, "{s}");
    }
}
