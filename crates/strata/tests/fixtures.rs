//! Databases written by earlier versions must stay readable: the checked-in databases under
//! `tests/fixtures/` (repository root) are opened and verified key by key against the
//! deterministic content that wrote them, and checked with `check`. A format change that
//! breaks them fails here.
//!
//! The fixtures live at the repository root and this test in the `strata` crate because one
//! of them is a sharded database, which only this crate (over `strata-engine`) can open.
//!
//! Regenerate them (only when a new fixture is wanted: the point is that old files stay as
//! they were written) with
//! `STRATA_FIXTURES_ONLY=NAME,... cargo test -p strata --test fixtures -- --ignored generate_fixtures`
//! (`STRATA_FIXTURES_ONLY` names the fixtures to write; without it every one is rewritten by
//! the current build, which turns the old-format fixtures into new-format ones).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use strata::{Db, DbOptions, EngineIter, WriteBatch};
use strata_engine::Options;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One step of a fixture's content.
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// Several puts applied atomically (cross-shard in the sharded fixture).
    Batch(Vec<(Vec<u8>, Vec<u8>)>),
    /// Write the memtable(s) out as tables.
    Flush,
    /// Compact everything (tables into lower levels).
    Compact,
}

/// A value of `len` bytes derived from `i` (deterministic, not compressible to nothing).
fn value(i: u32, len: usize) -> Vec<u8> {
    let mut x = u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x % 26) as u8
        })
        .collect()
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The content of fixture `name`: what was written, in order. Values of `big` bytes go to the
/// value log when separation is on.
fn ops(name: &str) -> Vec<Op> {
    let big = if name.starts_with("vlog") { 200 } else { 24 };
    let mut v = Vec::new();
    // A first table: 200 keys.
    for i in 0..200 {
        v.push(Op::Put(key(i), value(i, 8 + (i as usize % 3) * big / 2)));
    }
    v.push(Op::Flush);
    // Overwrites and deletes, compacted with the first table into a lower level.
    for i in (0..200).step_by(7) {
        v.push(Op::Put(key(i), value(i + 1000, big)));
    }
    for i in (3..200).step_by(11) {
        v.push(Op::Delete(key(i)));
    }
    v.push(Op::Flush);
    v.push(Op::Compact);
    // An L0 table over the compacted level.
    for i in 150..260 {
        v.push(Op::Put(key(i), value(i + 2000, 8 + (i as usize % 2) * big)));
    }
    v.push(Op::Flush);
    // Atomic batches (cross-shard in the sharded fixture) and a tail left in the WAL.
    for b in 0..4u32 {
        v.push(Op::Batch(
            (0..6)
                .map(|j| (key(300 + b * 6 + j), value(3000 + b * 6 + j, big)))
                .collect(),
        ));
    }
    for i in (0..260).step_by(13) {
        v.push(Op::Delete(key(i)));
    }
    for i in 400..420 {
        v.push(Op::Put(key(i), value(i, big)));
    }
    v.push(Op::Put(vec![0, 0xff, 0x7f], b"binary key".to_vec()));
    v.push(Op::Put(b"empty".to_vec(), Vec::new()));
    v
}

fn model(name: &str) -> (Model, Vec<Vec<u8>>) {
    let mut m = Model::new();
    let mut deleted = Vec::new();
    for op in ops(name) {
        match op {
            Op::Put(k, v) => {
                m.insert(k, v);
            }
            Op::Delete(k) => {
                m.remove(&k);
                deleted.push(k);
            }
            Op::Batch(kvs) => m.extend(kvs),
            Op::Flush | Op::Compact => {}
        }
    }
    deleted.retain(|k| !m.contains_key(k));
    (m, deleted)
}

/// The fixtures: name and the engine options that wrote them.
fn fixtures() -> Vec<(&'static str, Options)> {
    let small = |o: &mut Options| {
        o.write_buffer_bytes = 1 << 20;
        o.gc_interval_ms = 0;
    };
    let mut format1 = Options::default();
    small(&mut format1);
    let mut format2 = format1.clone();
    format2.block_align = Some(true);
    let mut vlog = format1.clone();
    vlog.sep_threshold_bytes = 100;
    vlog.vlog_file_bytes = 16 << 10;
    let sharded = format1.clone();
    // Written by a build whose logs are in format 2 (records carry the sync watermark, a
    // rotated value-log file and a cleanly closed log end with a sync mark), with the options
    // of the format-1 ones: every log kind in the new format.
    let wal2 = format2.clone();
    let vlog2 = vlog.clone();
    let sharded2 = sharded.clone();
    vec![
        ("format1", format1),
        ("format2", format2),
        ("vlog", vlog),
        ("sharded", sharded),
        ("wal2", wal2),
        ("vlog2", vlog2),
        ("sharded2", sharded2),
    ]
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Either kind of database, for the generator and the checks.
enum Store {
    Engine(strata_engine::Db),
    Sharded(Db),
}

fn sharded_opts(o: Options, shards: Option<usize>) -> DbOptions {
    DbOptions {
        shards,
        ..DbOptions::with_engine(o)
    }
}

impl Store {
    fn open(name: &str, dir: &Path, o: Options) -> Store {
        if name.starts_with("sharded") {
            Store::Sharded(Db::open(dir, sharded_opts(o, Some(3))).unwrap())
        } else {
            Store::Engine(strata_engine::Db::open(dir, o).unwrap())
        }
    }

    fn apply(&self, op: Op) {
        match (self, op) {
            (Store::Engine(db), Op::Put(k, v)) => db.put(&k, &v).unwrap(),
            (Store::Engine(db), Op::Delete(k)) => db.delete(&k).unwrap(),
            (Store::Engine(db), Op::Batch(kvs)) => {
                let mut b = strata_engine::WriteBatch::default();
                for (k, v) in kvs {
                    b.put(&k, &v);
                }
                db.write(&strata_engine::WriteOptions::default(), b)
                    .unwrap()
            }
            (Store::Engine(db), Op::Flush) => db.flush().unwrap(),
            (Store::Engine(db), Op::Compact) => db.compact_range(None, None).unwrap(),
            (Store::Sharded(db), Op::Put(k, v)) => db.put(&k, &v).unwrap(),
            (Store::Sharded(db), Op::Delete(k)) => db.delete(&k).unwrap(),
            (Store::Sharded(db), Op::Batch(kvs)) => {
                let mut b = WriteBatch::new();
                for (k, v) in &kvs {
                    b.put(k, v);
                }
                db.write(b).unwrap()
            }
            (Store::Sharded(db), Op::Flush) => db.flush().unwrap(),
            (Store::Sharded(db), Op::Compact) => db.compact().unwrap(),
        }
    }

    fn get(&self, k: &[u8]) -> Option<Vec<u8>> {
        match self {
            Store::Engine(db) => db.get(k).unwrap(),
            Store::Sharded(db) => db.get(k).unwrap(),
        }
    }

    fn all(&self) -> Model {
        let mut m = Model::new();
        match self {
            Store::Engine(db) => {
                let mut it = db.iter(&strata_engine::ReadOptions::default()).unwrap();
                it.seek_to_first();
                while it.valid() {
                    m.insert(it.key().to_vec(), it.value().to_vec());
                    it.next();
                }
                it.status().unwrap();
            }
            Store::Sharded(db) => {
                let mut it = db.iter().unwrap();
                it.seek_to_first();
                while it.valid() {
                    m.insert(it.key().to_vec(), it.value().to_vec());
                    it.next();
                }
                it.status().unwrap();
            }
        }
        m
    }

    fn close(self) {
        match self {
            Store::Engine(db) => db.close().unwrap(),
            Store::Sharded(db) => db.close().unwrap(),
        }
    }
}

/// `check` of the (closed) database at `dir` finds nothing wrong; returns the entries it
/// counted in tables.
fn check(name: &str, dir: &Path, o: Options) -> u64 {
    if name.starts_with("sharded") {
        let r = Db::check(dir, sharded_opts(o, None)).unwrap();
        assert!(r.is_ok(), "{name}: {r:?}");
        assert_eq!(r.shard_count, 3);
        assert!(
            r.committed_gsn >= 4,
            "{name}: cross-shard batches lost: {r:?}"
        );
        r.shards.iter().map(|s| s.entries).sum()
    } else {
        let r = strata_engine::Db::check(dir, o).unwrap();
        assert!(r.is_ok(), "{name}: {r}");
        r.entries
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

fn verify(name: &str, db: &Store) {
    let (want, deleted) = model(name);
    assert_eq!(
        db.all(),
        want,
        "{name}: the iteration differs from the written content"
    );
    for (k, v) in &want {
        assert_eq!(db.get(k).as_ref(), Some(v), "{name}: key {k:?}");
    }
    for k in &deleted {
        assert_eq!(db.get(k), None, "{name}: deleted key {k:?} is back");
    }
}

#[test]
fn checked_in_databases_open_verify_and_check() {
    let root = fixtures_dir();
    for (name, o) in fixtures() {
        let src = root.join(name);
        assert!(
            src.is_dir(),
            "fixture {} is missing (see tests/fixtures/README.md)",
            src.display()
        );
        // Never touch the checked-in files: everything runs on a copy.
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join(name);
        copy_dir(&src, &dir);
        assert!(check(name, &dir, o.clone()) > 0, "{name}: no table entries");
        // Opened with default options: what a database was written with is on disk.
        let plain = Options {
            gc_interval_ms: 0,
            ..Options::default()
        };
        let db = Store::open(name, &dir, plain.clone());
        verify(name, &db);
        db.close();
        check(name, &dir, plain.clone());
        let db = Store::open(name, &dir, plain);
        verify(name, &db);
        db.close();
    }
}

/// What each fixture must contain for the test to mean something: tables of the format it
/// is named after, value-log files, shard directories.
#[test]
fn fixtures_hold_what_they_are_named_after() {
    let root = fixtures_dir();
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let table_versions = |dir: &Path| -> Vec<u32> {
        names(dir)
            .iter()
            .filter(|n| n.ends_with(".sst"))
            .map(|n| {
                let b = std::fs::read(dir.join(n)).unwrap();
                let f = &b[b.len() - FOOTER_LEN..];
                u32::from_le_bytes(f[VERSION_AT..VERSION_AT + 4].try_into().unwrap())
            })
            .collect()
    };
    let v1 = table_versions(&root.join("format1"));
    let v2 = table_versions(&root.join("format2"));
    assert!(!v1.is_empty() && v1.iter().all(|&v| v == 1), "{v1:?}");
    assert!(!v2.is_empty() && v2.iter().all(|&v| v == 2), "{v2:?}");
    assert!(
        names(&root.join("vlog"))
            .iter()
            .any(|n| n.ends_with(".vlog")),
        "the vlog fixture has no value-log file"
    );
    let sharded = names(&root.join("sharded"));
    for f in ["SHARDS", "TXLOG", "shard-000", "shard-001", "shard-002"] {
        assert!(sharded.iter().any(|n| n == f), "sharded fixture lacks {f}");
    }
    // Every log in them is in the first log formats, before records carried a sync
    // watermark: these fixtures are what keeps those formats readable.
    let mut logs = 0;
    for dir in [
        "format1",
        "format2",
        "vlog",
        "sharded/shard-000",
        "sharded/shard-001",
    ] {
        let dir = root.join(dir);
        for n in names(&dir) {
            let b = std::fs::read(dir.join(&n)).unwrap();
            let version = if n.ends_with(".log") || n.starts_with("MANIFEST-") {
                u16::from_le_bytes([b[15], b[16]])
            } else if n.ends_with(".vlog") {
                u16::from_le_bytes([b[8], b[9]])
            } else {
                continue;
            };
            assert_eq!(version, 1, "{}/{n}", dir.display());
            logs += 1;
        }
    }
    assert!(logs >= 8, "{logs} log files");
    let txlog = std::fs::read(root.join("sharded/TXLOG")).unwrap();
    assert_eq!(u32::from_le_bytes(txlog[8..12].try_into().unwrap()), 1);
    assert!(
        names(&root.join("format1"))
            .iter()
            .any(|n| n.ends_with(".log"))
            && names(&root.join("vlog"))
                .iter()
                .filter(|n| n.ends_with(".vlog"))
                .count()
                >= 2,
        "the fixtures should hold a WAL and value-log files to replay"
    );
}

/// The log-format-2 fixtures hold every log kind in format 2: WALs and MANIFESTs (file header
/// version 2, `docs/format/wal.md`), value-log files (version 2, `docs/format/vlog.md`) of
/// which the rotated ones end with their sync mark, and a `TXLOG` in version 2
/// (`docs/format/shards.md`); each cleanly closed WAL ends with its sync mark.
#[test]
fn log_format_2_fixtures_hold_every_log_kind_in_format_2() {
    let root = fixtures_dir();
    let files = |dir: &str| -> Vec<(String, Vec<u8>)> {
        let dir = root.join(dir);
        let mut v: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !std::fs::metadata(dir.join(n)).unwrap().is_dir())
            .map(|n| {
                let b = std::fs::read(dir.join(&n)).unwrap();
                (n, b)
            })
            .collect();
        v.sort();
        v
    };
    // A version-2 WAL sync mark: a FULL fragment of 8 bytes (only the watermark).
    let wal_ends_sealed = |b: &[u8]| b.len() >= 15 && b[b.len() - 11..b.len() - 8] == [8, 0, 1];
    let mut kinds = BTreeMap::new();
    for dir in [
        "wal2",
        "vlog2",
        "sharded2/shard-000",
        "sharded2/shard-001",
        "sharded2/shard-002",
    ] {
        let vlogs: Vec<_> = files(dir)
            .into_iter()
            .filter(|(n, _)| n.ends_with(".vlog"))
            .collect();
        for (i, (n, b)) in vlogs.iter().enumerate() {
            assert_eq!(u16::from_le_bytes([b[8], b[9]]), 2, "{dir}/{n}");
            // Every value-log file but the newest was rotated (or closed): its last 32 bytes
            // are a sync mark, a frame of no entries whose watermark is its own offset.
            if i + 1 < vlogs.len() {
                let m = &b[b.len() - 32..];
                let wm = u64::from_le_bytes(m[24..32].try_into().unwrap());
                assert!(
                    m[4] == 1 && m[8..24].iter().all(|&x| x == 0) && wm == b.len() as u64 - 32,
                    "{dir}/{n} does not end with a sync mark"
                );
                *kinds.entry("sealed vlog").or_insert(0) += 1;
            }
            *kinds.entry("vlog").or_insert(0) += 1;
        }
        for (n, b) in files(dir) {
            let kind = if n.ends_with(".log") {
                assert!(
                    wal_ends_sealed(&b),
                    "{dir}/{n} does not end with a sync mark"
                );
                "wal"
            } else if n.starts_with("MANIFEST-") {
                "manifest"
            } else {
                continue;
            };
            assert_eq!(u16::from_le_bytes([b[15], b[16]]), 2, "{dir}/{n}");
            *kinds.entry(kind).or_insert(0) += 1;
        }
    }
    for k in ["wal", "manifest", "vlog", "sealed vlog"] {
        assert!(
            kinds.get(k).is_some_and(|&n| n > 0),
            "no {k} file: {kinds:?}"
        );
    }
    let txlog = std::fs::read(root.join("sharded2/TXLOG")).unwrap();
    assert_eq!(u32::from_le_bytes(txlog[8..12].try_into().unwrap()), 2);
}

/// Footer size and the offset of the format version in it (docs/format/sstable.md).
const FOOTER_LEN: usize = 56;
const VERSION_AT: usize = 44;

/// Writes the fixtures (replacing any there). See the module docs for when to run it. With
/// `STRATA_FIXTURES_OUT=DIR` it writes them under `DIR` instead (the checked-in ones stay
/// untouched): how CI runs it, to keep the generator working.
#[test]
#[ignore]
fn generate_fixtures() {
    let root = std::env::var_os("STRATA_FIXTURES_OUT").map_or_else(fixtures_dir, PathBuf::from);
    let only = std::env::var("STRATA_FIXTURES_ONLY").ok();
    let wanted = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|n| n.trim() == name))
    };
    for (name, o) in fixtures().into_iter().filter(|(n, _)| wanted(n)) {
        let dir = root.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        std::fs::create_dir_all(&root).unwrap();
        let db = Store::open(name, &dir, o.clone());
        for op in ops(name) {
            db.apply(op);
        }
        verify(name, &db);
        db.close();
        check(name, &dir, o);
        // Lock files are recreated at open; leave them out of the repository.
        for lock in [dir.join("LOCK")]
            .into_iter()
            .chain((0..3).map(|i| dir.join(format!("shard-{i:03}/LOCK"))))
        {
            let _ = std::fs::remove_file(lock);
        }
    }
}
