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
    let v = t.victim();
    let mut bytes = std::fs::read(&t.table).unwrap();
    bytes[(v.offset + v.size / 2) as usize] ^= 0x5a;
    std::fs::write(&t.table, &bytes).unwrap();
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
