//! A failing worker (injected I/O error, or a panic inside the engine) surfaces as errors to
//! every waiting and later caller, and the database reports itself unhealthy. "Within a bounded
//! time" is checked by waiting for the callers with a generous timeout, so a hang fails the
//! test instead of stalling the suite.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use strata::engine::{Engine, StrataEngine};
use strata::{Db, DbOptions, Options, ShardedDb};
use strata_engine::io::{FaultFs, FaultKind, FaultOp, FaultRule, Fs, MemFs};

const BOUND: Duration = Duration::from_secs(120);

fn opts(fs: Arc<dyn Fs>, shards: usize) -> DbOptions {
    let mut o = DbOptions {
        shards: Some(shards),
        ..DbOptions::default()
    };
    o.engine.fs = fs;
    o.engine.background_threads = 1;
    o
}

#[test]
fn io_error_in_one_shard_fails_every_caller_in_bounded_time() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let db = Arc::new(Db::open("/db", opts(Arc::new(fault.clone()), 4)).unwrap());
    db.put(b"before", b"1").unwrap();
    fault.add_rule(
        FaultRule::new(FaultOp::Write, 1, FaultKind::Eio)
            .path_contains("shard-001")
            .persistent(),
    );
    let (tx, rx) = mpsc::channel();
    for t in 0..8u32 {
        let db = db.clone();
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut errors = 0;
            for i in 0..300u32 {
                let k = format!("t{t}-{i}");
                if db.put(k.as_bytes(), b"v").is_err() {
                    errors += 1;
                }
            }
            tx.send(errors).unwrap();
        });
    }
    drop(tx);
    let mut errors = 0;
    for _ in 0..8 {
        errors += rx
            .recv_timeout(BOUND)
            .expect("a caller hung after the worker failed");
    }
    assert!(errors > 0, "the injected error surfaced nowhere");
    assert!(db.health().is_err());
    // Every later write fails, whatever its shard; reads go on (a failed write is not
    // applied, so every shard still shows exactly what it acknowledged), on every shard.
    for i in 0..20u32 {
        let k = format!("later-{i}");
        assert!(db.put(k.as_bytes(), b"v").is_err());
        assert_eq!(db.get(k.as_bytes()).unwrap(), None);
    }
    assert_eq!(db.get(b"before").unwrap(), Some(b"1".to_vec()));
    let snap = db.snapshot().unwrap();
    assert_eq!(snap.get(b"before").unwrap(), Some(b"1".to_vec()));
    drop(snap);
    let scanned = db.scan(b"", 10_000, strata::ScanMode::Parallel).unwrap();
    assert!(scanned.iter().any(|(k, _)| k == b"before"));
    assert!(scanned.iter().all(|(k, _)| db.get(k).unwrap().is_some()));
    // An execution that only reads runs; one that writes is refused, its write not applied.
    let shard = db.shard_of(b"before");
    let (tx, rx) = mpsc::channel();
    for write in [false, true] {
        let tx = tx.clone();
        db.exec(shard, move |txn| {
            let txn = txn.expect("reads are healthy");
            let seen = txn.get(b"before").unwrap();
            if write {
                txn.put(b"before", b"2").unwrap();
            }
            Some(Box::new(move |r: strata::Result<()>| {
                tx.send((write, seen, r.is_ok())).unwrap()
            }))
        });
    }
    let mut got = vec![
        rx.recv_timeout(BOUND).unwrap(),
        rx.recv_timeout(BOUND).unwrap(),
    ];
    got.sort();
    assert_eq!(
        got,
        vec![
            (false, Some(b"1".to_vec()), true),
            (true, Some(b"1".to_vec()), false)
        ]
    );
    assert_eq!(db.get(b"before").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn queued_async_requests_are_all_answered_after_a_failure() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let db = Db::open("/db", opts(Arc::new(fault.clone()), 2)).unwrap();
    let answered = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let n = 5000;
    for i in 0..n {
        if i == 100 {
            fault.add_rule(FaultRule::new(FaultOp::Write, 1, FaultKind::Eio).persistent());
        }
        let (a, f, tx) = (answered.clone(), failed.clone(), tx.clone());
        db.put_async(format!("k{i}").as_bytes(), b"v", move |r| {
            if r.is_err() {
                f.fetch_add(1, Ordering::SeqCst);
            }
            if a.fetch_add(1, Ordering::SeqCst) + 1 == n {
                tx.send(()).unwrap();
            }
        });
    }
    rx.recv_timeout(BOUND)
        .expect("some callbacks never ran after the failure");
    assert_eq!(answered.load(Ordering::SeqCst), n);
    assert!(failed.load(Ordering::SeqCst) > 0);
    assert!(db.health().is_err());
    assert!(db.close().is_err(), "close reports the failure");
}

/// Strata's engine, except that writing the key `boom` panics.
struct Boom(StrataEngine);

impl Engine for Boom {
    type Config = strata_engine::Options;
    type Batch = strata_engine::WriteBatch;
    type Snapshot = strata_engine::Snapshot;
    type Iter = strata_engine::DbIterator;
    const NAME: &'static str = "strata";

    fn fs(cfg: &Self::Config) -> Arc<dyn Fs> {
        StrataEngine::fs(cfg)
    }
    fn open(dir: &Path, cfg: &Self::Config) -> strata::Result<Self> {
        StrataEngine::open(dir, cfg).map(Boom)
    }
    fn write(&self, batch: Self::Batch, sync: bool) -> strata::Result<()> {
        if batch
            .iter()
            .any(|r| r.map(|r| r.key == b"boom").unwrap_or(false))
        {
            panic!("boom");
        }
        self.0.write(batch, sync)
    }
    fn get(&self, s: Option<&Self::Snapshot>, key: &[u8]) -> strata::Result<Option<Vec<u8>>> {
        self.0.get(s, key)
    }
    fn snapshot(&self) -> Self::Snapshot {
        self.0.snapshot()
    }
    fn iter(
        &self,
        s: Option<&Self::Snapshot>,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> strata::Result<Self::Iter> {
        self.0.iter(s, lower, upper)
    }
    fn flush(&self) -> strata::Result<()> {
        self.0.flush()
    }
    fn compact(&self) -> strata::Result<()> {
        self.0.compact()
    }
    fn wait_idle(&self) -> strata::Result<()> {
        self.0.wait_idle()
    }
    fn checkpoint(&self, dir: &Path) -> strata::Result<()> {
        self.0.checkpoint(dir)
    }
    fn stats(&self) -> String {
        self.0.stats()
    }
    fn close(self) -> strata::Result<()> {
        self.0.close()
    }
}

#[test]
fn a_panicking_worker_fails_callers_instead_of_hanging() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let mut o: Options<strata_engine::Options> = opts(fs, 2);
    o.max_batch = 1;
    let db = Arc::new(ShardedDb::<Boom>::open("/db", o).unwrap());
    db.put(b"fine", b"1").unwrap();
    let (tx, rx) = mpsc::channel();
    let d = db.clone();
    std::thread::spawn(move || tx.send(d.put(b"boom", b"1")).unwrap());
    let r = rx
        .recv_timeout(BOUND)
        .expect("caller hung on a panicked worker");
    assert!(r.is_err());
    assert!(db.health().is_err());
    assert!(db.put(b"fine", b"2").is_err());
    assert!(db.get(b"fine").is_err());
}
