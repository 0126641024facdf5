//! Quick fillrandom through the sharded front (the full benchmark is `strata bench`):
//! `cargo run --release -p strata --example fill -- THREADS OPS SHARDS MAX_BATCH [async]`
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn main() -> strata::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: u64| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (threads, ops, shards, batch) = (arg(1, 8), arg(2, 1_000_000), arg(3, 2), arg(4, 32));
    let asynchronous = a.get(5).is_some_and(|s| s == "async");
    let direct = a.get(5).is_some_and(|s| s == "direct");
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = strata::DbOptions {
        shards: Some(shards as usize),
        max_batch: batch as usize,
        ..strata::DbOptions::default()
    };
    let db = strata::Db::open(dir.path(), opts)?;
    let plain = direct
        .then(|| strata_engine::Db::open(dir.path().join("plain"), Default::default()))
        .transpose()?;
    let per = ops / threads;
    let t0 = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..threads {
            let (db, done, plain) = (&db, done.clone(), &plain);
            s.spawn(move || {
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let value = [7u8; 128];
                for _ in 0..per {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let mut key = [b'0'; 16];
                    key[..8].copy_from_slice(&(x % ops).to_be_bytes());
                    if let Some(p) = plain {
                        p.put(&key, &value).expect("put");
                    } else if asynchronous {
                        let d = done.clone();
                        db.put_async(&key, &value, move |r| {
                            r.expect("put");
                            d.fetch_add(1, Ordering::Relaxed);
                        });
                    } else {
                        db.put(&key, &value).expect("put");
                    }
                }
            });
        }
    });
    while asynchronous && done.load(Ordering::Relaxed) < per * threads {
        std::thread::yield_now();
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "fillrandom threads={threads} shards={shards} max_batch={batch} async={asynchronous}: {:.0} ops/s\n{}",
        (per * threads) as f64 / secs,
        db.batch_stats()
    );
    db.close()
}
