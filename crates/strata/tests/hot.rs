//! The hot tier (`hot.rs`): a record cache per shard, filled by reads, that must never serve
//! a value the engine no longer holds.

use rand::{Rng, SeedableRng};
use std::sync::Arc;
use strata::{Db, DbOptions, WriteBatch};
use strata_engine::io::{Fs, MemFs};

fn opts(fs: &Arc<dyn Fs>, hot_bytes: u64) -> DbOptions {
    let mut o = DbOptions {
        shards: Some(2),
        hot_bytes,
        ..DbOptions::default()
    };
    o.engine.fs = fs.clone();
    o.engine.background_threads = 1;
    o
}

#[test]
fn reads_are_served_from_ram_and_follow_every_write() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 1 << 20)).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i}").as_bytes(), format!("v{i}").as_bytes())
            .unwrap();
    }
    // Writes insert nothing.
    let s = db.hot_stats().unwrap();
    assert_eq!((s.records, s.used_bytes), (0, 0), "{s:?}");
    db.flush().unwrap();
    // The first pass misses and fills the tier, the second is served from it.
    for round in 0..2 {
        for i in 0..500u32 {
            assert_eq!(
                db.get(format!("k{i}").as_bytes()).unwrap(),
                Some(format!("v{i}").into_bytes())
            );
        }
        let s = db.hot_stats().unwrap();
        assert_eq!(
            (s.misses, s.hits),
            (500, 500 * round),
            "round {round}: {s:?}"
        );
    }
    assert_eq!(db.hot_stats().unwrap().records, 500);
    // Writes of cached keys replace or drop them: no read sees the old value.
    let mut b = WriteBatch::new();
    b.put(b"k1", b"new");
    b.delete(b"k2");
    db.write(b).unwrap();
    // k1 was cached: the write replaced it there (a hit with the new value).
    let hits = db.hot_stats().unwrap().hits;
    assert_eq!(db.get(b"k1").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.hot_stats().unwrap().hits, hits + 1);
    assert_eq!(db.get(b"k2").unwrap(), None);
    assert_eq!(
        db.multi_get(&[&b"k1"[..], b"k2", b"k3"])
            .into_iter()
            .map(|r| r.unwrap())
            .collect::<Vec<_>>(),
        vec![Some(b"new".to_vec()), None, Some(b"v3".to_vec())]
    );
    // Shrinking the tier live evicts; switching it off bypasses it.
    db.set_hot_bytes(16 * 1024);
    let s = db.hot_stats().unwrap();
    assert!(s.used_bytes <= 16 * 1024 && s.evictions > 0, "{s:?}");
    db.set_hot_bytes(0);
    let before = db.hot_stats().unwrap();
    assert_eq!(db.get(b"k1").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.hot_stats().unwrap().hits, before.hits);
    db.close().unwrap();
}

/// Writers and readers race on a few keys; afterwards every read through the tier equals a
/// snapshot read (which bypasses it). A promotion that lost the race to a write would leave
/// an old value cached and fail this.
#[test]
fn racing_reads_never_leave_an_old_value_cached() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Arc::new(Db::open("/db", opts(&fs, 1 << 20)).unwrap());
    for round in 0..20u64 {
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut r = rand::rngs::StdRng::seed_from_u64(round * 10 + t);
                    for i in 0..400u64 {
                        let k = format!("key{}", r.gen_range(0..8));
                        match r.gen_range(0..10) {
                            0..=3 => db.put(k.as_bytes(), format!("{t}-{i}").as_bytes()),
                            4 => db.delete(k.as_bytes()),
                            _ => db.get(k.as_bytes()).map(|_| ()),
                        }
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let snap = db.snapshot().unwrap();
        for i in 0..8 {
            let k = format!("key{i}");
            assert_eq!(
                db.get(k.as_bytes()).unwrap(),
                snap.get(k.as_bytes()).unwrap(),
                "round {round}: {k}"
            );
        }
    }
    assert!(db.hot_stats().unwrap().hits > 0);
}

/// The same race on one shard's engine directly, with no front serializing reads behind
/// writes: one writer (the front serializes a shard's writes) puts ever larger numbers on
/// 8 keys while three readers read them, through a tier too small to hold them all (so
/// reads miss and promote). A reader must never see a key's number go
/// down (a promotion that lost the race would serve an old value until the key's next
/// write), and at the end what the tier serves equals what the engine holds. The race's
/// window is a few instructions wide, so this is a smoke test under real concurrency; the
/// interleavings themselves are tested one by one in `hot.rs`.
#[test]
fn an_engine_with_racing_readers_keeps_its_tier_coherent() {
    use strata::{Engine, EngineBatch, StrataEngine};
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let cfg = strata_engine::Options {
        fs: fs.clone(),
        background_threads: 1,
        ..Default::default()
    };
    let e = Arc::new(StrataEngine::open(std::path::Path::new("/e"), &cfg).unwrap());
    // Room for about 16 records of 120 bytes (a 4-byte key and a 5-byte value in one
    // 48-byte allocation, plus the entry): the smallest tier that admits them (a record may
    // take 1/16 of it), and small enough that the cache's small cold section keeps evicting.
    e.set_hot_bytes(16 * 120);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (e, stop) = (e.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = [0u64; 8];
                let mut i = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let k = i * 7 % 8;
                    if let Some(v) = e.get(None, format!("key{k}").as_bytes()).unwrap() {
                        let n: u64 = String::from_utf8(v).unwrap().parse().unwrap();
                        assert!(n >= seen[k], "key{k} went back from {} to {n}", seen[k]);
                        seen[k] = n;
                    }
                    i += 1;
                }
            })
        })
        .collect();
    let mut r = rand::rngs::StdRng::seed_from_u64(7);
    for i in 1..=30_000u64 {
        let mut b = strata_engine::WriteBatch::new();
        let k = format!("key{}", r.gen_range(0..8));
        EngineBatch::put(&mut b, k.as_bytes(), i.to_string().as_bytes());
        e.write(b, false).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in readers {
        t.join().unwrap();
    }
    let snap = e.snapshot();
    for i in 0..8 {
        let k = format!("key{i}");
        assert_eq!(
            e.get(None, k.as_bytes()).unwrap(),
            e.get(Some(&snap), k.as_bytes()).unwrap(),
            "{k}"
        );
    }
    let s = e.hot_stats().unwrap();
    assert!(
        s.hits > 1000 && s.evictions > 0,
        "the race was exercised: {s:?}"
    );
}
