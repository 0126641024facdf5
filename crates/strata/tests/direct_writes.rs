//! Writes applied in the caller's thread (`Options::direct_writes`): they never land while a
//! cross-shard part on their shard may still be rolled back, they keep a caller's order with
//! its queued writes, and many of them at once, beside cross-shard batches, lose nothing.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use strata::{Db, DbOptions, Engine, WriteBatch, WriteOptions};
use strata_engine::io::{Fs, MemFs};

fn opts(fs: &Arc<dyn Fs>, shards: usize) -> DbOptions {
    let mut o = DbOptions {
        shards: Some(shards),
        ..DbOptions::default()
    };
    o.engine.fs = fs.clone();
    o.engine.background_threads = 1;
    o.engine.write_buffer_bytes = 64 << 10;
    o
}

/// A key of shard `s`.
fn key_in(db: &Db, s: usize, tag: &str) -> Vec<u8> {
    (0..)
        .map(|i| format!("{tag}{i}").into_bytes())
        .find(|k| db.shard_of(k) == s)
        .unwrap()
}

/// A cross-shard batch's part on shard A is applied and waits for its commit, which waits for
/// shard B's worker (held in an execution). A put of a key of shard A must not land until the
/// batch commits: a rollback would restore the before-image over it.
#[test]
fn a_direct_write_waits_for_a_part_in_doubt_on_its_shard() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Arc::new(Db::open("/db", opts(&fs, 2)).unwrap());
    let (ka, kb) = (key_in(&db, 0, "a"), key_in(&db, 1, "b"));
    db.put(&ka, b"before").unwrap();
    let direct_before = db.batch_stats().direct_writes;
    assert!(direct_before > 0, "puts did not go direct");

    // Hold shard B's worker.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (inside_tx, inside_rx) = mpsc::channel::<()>();
    db.exec(1, move |_| {
        inside_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        None
    });
    inside_rx.recv().unwrap();

    let (done_tx, done_rx) = mpsc::channel::<&'static str>();
    let batch = {
        let (db, ka, kb, done) = (db.clone(), ka.clone(), kb.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let mut b = WriteBatch::new();
            b.put(&ka, b"batch").put(&kb, b"batch");
            db.write(b).unwrap();
            done.send("batch").unwrap();
        })
    };
    // Shard A's part is applied (its engine shows it) and its worker waits for the commit.
    let start = std::time::Instant::now();
    while db.engine(0).get(None, &ka).unwrap().as_deref() != Some(&b"batch"[..]) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "part never applied"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    let committed_before = db.committed_gsn();
    let put = {
        let (db, ka, done) = (db.clone(), ka.clone(), done_tx.clone());
        std::thread::spawn(move || {
            db.put(&ka, b"direct").unwrap();
            // Landed only once the batch had committed.
            assert!(db.committed_gsn() > committed_before);
            done.send("put").unwrap();
        })
    };
    assert!(
        done_rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "something finished while the batch was in doubt"
    );
    release_tx.send(()).unwrap();
    let mut done: Vec<&str> = (0..2)
        .map(|_| done_rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    done.sort_unstable();
    assert_eq!(done, ["batch", "put"]);
    batch.join().unwrap();
    put.join().unwrap();
    assert_eq!(db.get(&ka).unwrap(), Some(b"direct".to_vec()));
    assert_eq!(db.get(&kb).unwrap(), Some(b"batch".to_vec()));
    // The put went direct (it would also have waited had it been queued behind the part).
    assert_eq!(db.batch_stats().direct_writes, direct_before + 1);
}

/// A caller's write never overtakes its own queued asynchronous write of the key: while
/// that one is pending the write is queued behind it, once it is done the write goes direct.
#[test]
fn a_direct_write_follows_the_callers_queued_writes() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 2)).unwrap();
    for i in 0..2000u32 {
        let p = db.put_future(&WriteOptions::default(), b"k", &i.to_le_bytes());
        if i % 2 == 0 {
            p.wait().unwrap();
            db.put(b"k", &(i + 1_000_000).to_le_bytes()).unwrap();
        } else {
            db.put(b"k", &(i + 1_000_000).to_le_bytes()).unwrap();
            p.wait().unwrap();
        }
        assert_eq!(
            db.get(b"k").unwrap(),
            Some((i + 1_000_000).to_le_bytes().to_vec())
        );
    }
    let s = db.batch_stats();
    assert!(s.direct_writes >= 1000 && s.write_requests() >= 2000, "{s}");
}

/// Threads putting their own keys directly (synced and not) while others move amounts with
/// cross-shard batches: after a reopen every acknowledged put is there and the total holds.
#[test]
fn direct_writes_beside_cross_shard_batches_lose_nothing() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 3)).unwrap();
    let accounts: Vec<Vec<u8>> = (0..6).map(|i| format!("acct{i}").into_bytes()).collect();
    let mut b = WriteBatch::new();
    for a in &accounts {
        b.put(a, &100i64.to_le_bytes());
    }
    db.write(b).unwrap();
    let read = |v: Vec<u8>| i64::from_le_bytes(v.try_into().unwrap());
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let db = &db;
            s.spawn(move || {
                for i in 0..500u32 {
                    let wo = WriteOptions { sync: i % 7 == 0 };
                    let k = format!("t{t}-{i}");
                    db.put_opt(&wo, k.as_bytes(), &i.to_le_bytes()).unwrap();
                    if i % 5 == 0 {
                        db.delete(k.as_bytes()).unwrap();
                    }
                }
            });
        }
        let (db, accounts) = (&db, &accounts);
        s.spawn(move || {
            for i in 0..200usize {
                let (from, to) = (&accounts[i % 6], &accounts[(i * 5 + 1) % 6]);
                if from == to {
                    continue;
                }
                let f = read(db.get(from).unwrap().unwrap());
                let t = read(db.get(to).unwrap().unwrap());
                let mut b = WriteBatch::new();
                b.put(from, &(f - 3).to_le_bytes())
                    .put(to, &(t + 3).to_le_bytes());
                db.write(b).unwrap();
            }
        });
    });
    assert!(db.batch_stats().direct_writes >= 2000);
    db.close().unwrap();
    let db = Db::open("/db", opts(&fs, 3)).unwrap();
    for t in 0..4u32 {
        for i in 0..500u32 {
            let want = (i % 5 != 0).then(|| i.to_le_bytes().to_vec());
            assert_eq!(db.get(format!("t{t}-{i}").as_bytes()).unwrap(), want);
        }
    }
    let total: i64 = accounts
        .iter()
        .map(|a| read(db.get(a).unwrap().unwrap()))
        .sum();
    assert_eq!(total, 600);
}
