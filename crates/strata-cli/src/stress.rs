//! `strata stress`: writes with sync until stopped or killed, printing one line per
//! acknowledged write, so that a test can kill it at any moment (`kill -9`) and check that
//! every acknowledged write survived.
//!
//! Each thread owns keys `t{T}-k{I}` (I below `--keys`) and overwrites them with synced puts,
//! so the value log gathers garbage for GC; about one write in five is an unsynced put of a
//! fresh key `u{SEED}-t{T}-{N}`, which a kill may lose and which is not reported. Values are
//! self-describing: `KEY#VERSION:` then filler up to `--value-size` bytes, then the 16 hex
//! digits of the FNV-1a hash of everything before them. VERSION is `SEED.N` with fixed widths,
//! so across runs with increasing seeds a later write of a key has a larger version.
//!
//! With `--unsynced` those overwrites are unsynced too (and still reported): what a
//! crash of the process must keep.
//!
//! Output, one line per acknowledged synced write, flushed before the next write of that
//! thread: `ack KEY VERSION HASH` (HASH as in the value). A line cut by a kill is incomplete.
//!
//! Default options turn separation on with small value-log files and background GC; `--opt`
//! overrides them.

use crate::opts::build_options;
use crate::{DbArgs, Outcome};
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use strata_engine::{Db, WriteOptions};

#[derive(Args, Debug)]
pub struct StressArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Seed of this run: part of every version, so use a larger one for each run on the
    /// same database.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Bytes per value (at least the key, version and hash: about 60).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Keys each thread overwrites.
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// Stop after this many writes per thread (default: run until killed).
    #[arg(long)]
    pub ops: Option<u64>,
    /// Write the reported overwrites without sync: each is acknowledged once it reached the
    /// operating system, which is what an unsynced write promises against a crash of the
    /// process (`kill -9`), not against a power loss. Use with `--opt vlog_buffer_bytes=0`.
    #[arg(long)]
    pub unsynced: bool,
}

/// Options used unless an `--opt` says otherwise: separation on, small files, GC often.
const DEFAULT_OPTS: &[(&str, &str)] = &[
    ("sep_threshold_bytes", "16"),
    ("vlog_file_bytes", "65536"),
    ("vlog_buffer_bytes", "4096"),
    ("write_buffer_bytes", "262144"),
    ("target_file_size_bytes", "131072"),
    ("gc_garbage_ratio", "0.2"),
    ("gc_interval_ms", "20"),
];

/// The options `stress` opens with: its defaults, then `--opt` in order.
pub fn options(user: &[(String, String)]) -> Result<strata_engine::Options> {
    let mut all: Vec<(String, String)> = DEFAULT_OPTS
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    all.extend(user.iter().cloned());
    build_options(&all)
}

/// FNV-1a, 64 bits: the checksum at the end of every value.
pub fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
        (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The value of `key` at `version`, `size` bytes (or longer if the header needs it).
pub fn make_value(key: &str, version: &str, size: usize) -> Vec<u8> {
    let mut v = format!("{key}#{version}:").into_bytes();
    let mut x = fnv(&v) | 1;
    while v.len() + 16 < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b'a' + (x % 26) as u8);
    }
    let h = fnv(&v);
    v.extend_from_slice(format!("{h:016x}").as_bytes());
    v
}

pub fn run(a: StressArgs) -> Result<Outcome> {
    let opts = options(&a.db.opts)?;
    if opts.create_if_missing {
        std::fs::create_dir_all(&a.db.db)
            .with_context(|| format!("cannot create directory {}", a.db.db.display()))?;
    }
    let db = Db::open(&a.db.db, opts)
        .with_context(|| format!("cannot open database at {}", a.db.db.display()))?;
    let out = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..a.threads.max(1))
            .map(|t| {
                let (db, out, a) = (&db, &out, &a);
                s.spawn(move || writer(db, out, a, t))
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("a stress thread panicked"))
    })?;
    db.close().context("cannot close the database cleanly")?;
    Ok(Outcome::Done)
}

/// One thread's writes.
fn writer(
    db: &Db,
    out: &std::sync::Mutex<std::io::Stdout>,
    a: &StressArgs,
    t: usize,
) -> Result<()> {
    let mut x = (a.seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(t as u64 + 1) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut n = 0u64;
    while a.ops.is_none_or(|ops| n < ops) {
        n += 1;
        let version = format!("{:06}.{n:09}", a.seed);
        if next() % 5 == 0 {
            let key = format!("u{}-t{t}-{n}", a.seed);
            let v = make_value(&key, &version, a.value_size);
            db.put_opt(&WriteOptions::default(), key.as_bytes(), &v)
                .with_context(|| format!("unsynced put of {key}"))?;
            continue;
        }
        let key = format!("t{t}-k{:06}", next() % a.keys.max(1));
        let v = make_value(&key, &version, a.value_size);
        let wo = WriteOptions {
            sync: !a.unsynced,
            disable_wal: false,
        };
        db.put_opt(&wo, key.as_bytes(), &v)
            .with_context(|| format!("acknowledged put of {key}"))?;
        let h = &v[v.len() - 16..];
        let mut o = out.lock().expect("stdout lock");
        writeln!(o, "ack {key} {version} {}", String::from_utf8_lossy(h))?;
        o.flush()?;
    }
    Ok(())
}
