//! Quick fillrandom through the sharded front (the full benchmark is `strata bench`):
//! `cargo run --release -p strata --example fill -- THREADS OPS SHARDS MAX_BATCH [MODE]`
//! MODE: `sync` (default), `async`, `direct` (Strata's engine without the front), and with
//! `--features rocksdb`: `rocks` (the front over RocksDB), `rocksplain` (RocksDB alone).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use strata::{Engine, Options, ShardedDb};

trait Put: Sync {
    fn put(&self, key: &[u8], value: &[u8]);
    fn put_async(&self, key: &[u8], value: &[u8], done: Arc<AtomicU64>);
}

impl<E: Engine> Put for ShardedDb<E> {
    fn put(&self, key: &[u8], value: &[u8]) {
        ShardedDb::put(self, key, value).expect("put");
    }
    fn put_async(&self, key: &[u8], value: &[u8], done: Arc<AtomicU64>) {
        ShardedDb::put_async(self, key, value, move |r| {
            r.expect("put");
            done.fetch_add(1, Ordering::Relaxed);
        });
    }
}

impl Put for strata_engine::Db {
    fn put(&self, key: &[u8], value: &[u8]) {
        strata_engine::Db::put(self, key, value).expect("put");
    }
    fn put_async(&self, _: &[u8], _: &[u8], _: Arc<AtomicU64>) {
        unimplemented!("no async API")
    }
}

#[cfg(feature = "rocksdb")]
impl Put for rocksdb::DB {
    fn put(&self, key: &[u8], value: &[u8]) {
        rocksdb::DB::put(self, key, value).expect("put");
    }
    fn put_async(&self, _: &[u8], _: &[u8], _: Arc<AtomicU64>) {
        unimplemented!("no async API")
    }
}

fn fill(db: &dyn Put, threads: u64, ops: u64, asynchronous: bool) -> f64 {
    let per = ops / threads;
    let t0 = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..threads {
            let done = done.clone();
            s.spawn(move || {
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let value = [7u8; 128];
                for _ in 0..per {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let mut key = [b'0'; 16];
                    key[..8].copy_from_slice(&(x % ops).to_be_bytes());
                    if asynchronous {
                        db.put_async(&key, &value, done.clone());
                    } else {
                        db.put(&key, &value);
                    }
                }
            });
        }
    });
    while asynchronous && done.load(Ordering::Relaxed) < per * threads {
        std::thread::yield_now();
    }
    (per * threads) as f64 / t0.elapsed().as_secs_f64()
}

fn main() -> strata::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: u64| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (threads, ops, shards, batch) = (arg(1, 8), arg(2, 1_000_000), arg(3, 2), arg(4, 32));
    let mode = a.get(5).map(String::as_str).unwrap_or("sync");
    let dir = tempfile::tempdir().expect("tempdir");
    fn front<C>(engine: C, shards: u64, batch: u64) -> Options<C> {
        Options {
            shards: Some(shards as usize),
            max_batch: batch as usize,
            ..Options::with_engine(engine)
        }
    }
    let (rate, stats) = match mode {
        "sync" | "async" => {
            let db = strata::Db::open(dir.path(), front(Default::default(), shards, batch))?;
            let r = fill(&db, threads, ops, mode == "async");
            let s = db.batch_stats().to_string();
            db.close()?;
            (r, s)
        }
        "direct" => {
            let db = strata_engine::Db::open(dir.path(), Default::default())?;
            (fill(&db, threads, ops, false), String::new())
        }
        #[cfg(feature = "rocksdb")]
        "rocks" => {
            let cfg = strata::rocks::RocksConfig::default();
            let db = ShardedDb::<strata::rocks::RocksEngine>::open(
                dir.path(),
                front(cfg, shards, batch),
            )?;
            let r = fill(&db, threads, ops, false);
            (r, db.batch_stats().to_string())
        }
        #[cfg(feature = "rocksdb")]
        "rocksplain" => {
            let mut o = strata::rocks::RocksConfig::default().options;
            o.create_if_missing(true);
            let db = rocksdb::DB::open(&o, dir.path()).expect("open rocksdb");
            (fill(&db, threads, ops, false), String::new())
        }
        m => panic!("unknown mode {m}"),
    };
    println!("fillrandom mode={mode} threads={threads} shards={shards} max_batch={batch}: {rate:.0} ops/s");
    if !stats.is_empty() {
        println!("{stats}");
    }
    Ok(())
}
