//! Helpers shared by the integration tests (each test file compiles this module on its own,
//! so not every helper is used by every file).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_engine::io::{CrashMode, Fs, MemFs};
use strata_engine::{Db, Options, ReadOptions, Result};

/// The database directory used on a `MemFs`.
pub fn mem_dir() -> PathBuf {
    PathBuf::from("/db")
}

/// Options small enough that a few hundred writes flush and compact several times.
pub fn tiny_opts(fs: Arc<dyn Fs>) -> Options {
    Options {
        fs,
        write_buffer_bytes: 16 << 10,
        max_immutable_memtables: 2,
        l0_compaction_trigger: 2,
        l0_slowdown_writes_trigger: 8,
        l0_stop_writes_trigger: 12,
        max_bytes_for_level_base: 64 << 10,
        level_size_multiplier: 4,
        target_file_size_bytes: 16 << 10,
        block_size_bytes: 512,
        block_restart_interval: 4,
        block_cache_bytes: 256 << 10,
        max_open_files: 64,
        background_threads: 2,
        compaction_readahead_bytes: 16 << 10,
        ..Options::default()
    }
}

/// The engine configurations the crash, fault and corruption scenarios run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// A plain LSM with a write-ahead log.
    Plain,
    /// Key-value separation: values of 8 bytes or more go to the value log (which is then
    /// also the log), whose files rotate every 4 KiB; GC runs only when called; no
    /// user-space log buffer (the default).
    Separated,
}

impl Engine {
    pub const ALL: [Engine; 2] = [Engine::Plain, Engine::Separated];

    /// `base` as this engine: unchanged for `Plain`.
    pub fn options(self, base: Options) -> Options {
        match self {
            Engine::Plain => base,
            Engine::Separated => Options {
                sep_threshold_bytes: 8,
                vlog_file_bytes: 4 << 10,
                gc_garbage_ratio: 0.25,
                gc_interval_ms: 0,
                ..base
            },
        }
    }

    /// What the name of each file of the commit log contains: the WAL or the value log.
    pub fn log_suffix(self) -> &'static str {
        match self {
            Engine::Plain => ".log",
            Engine::Separated => ".vlog",
        }
    }
}

/// Runs each listed `fn name(engine: Engine)` as two tests, `plain::name` and
/// `separated::name` (so a failure names its engine and either set can be filtered).
#[allow(unused_macros)]
macro_rules! on_each_engine {
    ($($name:ident),* $(,)?) => {
        mod plain {
            $(#[test]
            fn $name() {
                super::$name(super::common::Engine::Plain)
            })*
        }
        mod separated {
            $(#[test]
            fn $name() {
                super::$name(super::common::Engine::Separated)
            })*
        }
    };
}

/// The crash at point `k`: every third one loses unsynced writes, tears the last one, or
/// scatters them (each survives, is lost or is torn; holes read as zeros or garbage) and
/// drops every directory whose parent was not synced since it was created. With
/// `STRATA_CRASH_MODE=scattered` every crash scatters (the long runs' scattered-writeback
/// mode: `README.md`, "Long-running tests").
pub fn crash_mode(k: u64) -> CrashMode {
    if scattered_only() {
        return CrashMode::adversarial();
    }
    match k % 3 {
        0 => CrashMode::tear_last(false),
        1 => CrashMode::tear_last(true),
        _ => CrashMode::adversarial(),
    }
}

/// Whether `STRATA_CRASH_MODE=scattered` asks for every crash to scatter unsynced writes.
/// Any other value of the variable is refused, so a typo cannot quietly run the mixed mode.
pub fn scattered_only() -> bool {
    match std::env::var("STRATA_CRASH_MODE") {
        Ok(m) if m == "scattered" => true,
        Ok(m) if m.is_empty() || m == "mixed" => false,
        Ok(m) => panic!("STRATA_CRASH_MODE={m}: expected \"scattered\" or \"mixed\""),
        Err(_) => false,
    }
}

/// A fresh directory for the L0 tier's tables: on the tmpfs `/dev/shm` where there is one
/// (the tier's intended home, and fast), else in the system's temporary directory.
#[allow(dead_code)]
pub fn tier_tempdir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().expect("a temporary directory")
}

/// `tiny_opts` on a shared `MemFs`.
pub fn mem_opts(mem: &MemFs) -> Options {
    tiny_opts(Arc::new(mem.clone()))
}

/// A fresh database on a fresh `MemFs`.
pub fn mem_db() -> (MemFs, Db) {
    let mem = MemFs::new();
    let db = Db::open(mem_dir(), mem_opts(&mem)).expect("open on a fresh MemFs");
    (mem, db)
}

/// Key number `i` as a fixed-width key, so byte order is numeric order. Nine bytes: keys
/// shorter than eight bytes hit a known MANIFEST bug (see
/// `api::regression_short_user_key_compact_pointer_breaks_reopen`), which would mask
/// everything else the broad tests look for.
pub fn key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

/// A value of `len` bytes derived from `(key, tag)`: different tags give different values,
/// and the first bytes name the key so a value returned for the wrong key is recognizable.
pub fn value(k: &[u8], tag: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let head = format!("{}#{tag}:", String::from_utf8_lossy(k));
    let mut x = (tag as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ fxhash(k);
    while v.len() < len {
        if v.len() < head.len() {
            v.push(head.as_bytes()[v.len()]);
        } else {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(b'a' + (x % 26) as u8);
        }
    }
    v
}

fn fxhash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
        (h ^ c as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Every key and value, forward, through a fresh iterator; checks the iterator's status.
pub fn scan(db: &Db, ro: &ReadOptions) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut it = db.iter(ro)?;
    it.seek_to_first();
    let mut last: Option<Vec<u8>> = None;
    while it.valid() {
        let k = it.key().to_vec();
        if let Some(l) = &last {
            assert!(
                l < &k,
                "iterator not strictly increasing: {:?} then {:?}",
                show(l),
                show(&k)
            );
        }
        out.insert(k.clone(), it.value().to_vec());
        last = Some(k);
        it.next();
    }
    it.status()?;
    Ok(out)
}

/// `scan` at the latest state with default read options.
pub fn scan_all(db: &Db) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    scan(db, &ReadOptions::default())
}

/// Printable form of a key or value (truncated).
pub fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned();
    if b.len() > 40 {
        format!("{s}..({} bytes)", b.len())
    } else {
        s
    }
}

/// Describes how two maps differ (first few differences), for assertion messages.
pub fn diff(got: &BTreeMap<Vec<u8>, Vec<u8>>, want: &BTreeMap<Vec<u8>, Vec<u8>>) -> String {
    let mut out = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => out.push(format!("missing {}", show(k))),
            Some(g) if g != v => out.push(format!(
                "wrong value for {}: got {} want {}",
                show(k),
                show(g),
                show(v)
            )),
            _ => {}
        }
    }
    for k in got.keys() {
        if !want.contains_key(k) {
            out.push(format!("unexpected {}", show(k)));
        }
    }
    let n = out.len();
    out.truncate(8);
    format!("{n} differences: {}", out.join("; "))
}

/// Every file of a `MemFs` with its bytes (the live view).
pub fn copy_files(mem: &MemFs) -> Vec<(PathBuf, Vec<u8>)> {
    mem.dump()
        .into_iter()
        .map(|(p, _)| {
            let data = mem.read_all(&p).expect("read a live file");
            (p, data)
        })
        .collect()
}

/// A new `MemFs` holding `files`, all synced and durable.
pub fn restore_files(files: &[(PathBuf, Vec<u8>)]) -> MemFs {
    let mem = MemFs::new();
    let mut dirs: Vec<&Path> = files.iter().filter_map(|(p, _)| p.parent()).collect();
    dirs.sort();
    dirs.dedup();
    for d in &dirs {
        mem.create_dir_all(d).unwrap();
    }
    for (p, data) in files {
        mem.write_all_synced(p, data).unwrap();
    }
    for d in &dirs {
        mem.sync_dir(d).unwrap();
        // The directory's own entry too (a crash may drop unsynced new directories).
        if let Some(parent) = d.parent() {
            mem.sync_dir(parent).unwrap();
        }
    }
    mem
}

/// Number of `.sst` files in the live view of directory `dir`.
pub fn sst_files(mem: &MemFs, dir: &Path) -> usize {
    mem.dump()
        .iter()
        .filter(|(p, _)| p.parent() == Some(dir) && p.extension().is_some_and(|e| e == "sst"))
        .count()
}

/// Number of tables the database says it has (all levels).
pub fn live_tables(db: &Db) -> usize {
    db.stats().levels.iter().map(|(n, _)| n).sum()
}

/// Reads an environment knob, with a default.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
