//! Executions on shard workers (`ShardedDb::exec`) and slot routing.

use std::sync::mpsc;
use std::sync::Arc;
use strata::{Db, DbOptions, Error, Routing, ShardTxn, StrataEngine};
use strata_engine::io::{Fs, MemFs};

fn opts(fs: &Arc<dyn Fs>, shards: usize, routing: Option<Routing>) -> DbOptions {
    let mut o = DbOptions {
        shards: Some(shards),
        routing,
        ..DbOptions::default()
    };
    o.engine.fs = fs.clone();
    o.engine.background_threads = 1;
    o
}

/// The execution that increments the decimal counter at `key`; its completion sends the new
/// value once the group's write is applied (or the error).
fn incr_fn(
    key: &'static [u8],
    tx: mpsc::Sender<Result<u64, Error>>,
) -> impl FnOnce(Result<&mut ShardTxn<StrataEngine>, Error>) -> Option<strata::Callback<()>> + Send
{
    move |txn| {
        let step = |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
            let txn = txn?;
            let cur = txn
                .get(key)?
                .map(|v| String::from_utf8(v).unwrap().parse::<u64>().unwrap())
                .unwrap_or(0);
            txn.put(key, (cur + 1).to_string().as_bytes())?;
            Ok(cur + 1)
        };
        match step(txn) {
            Ok(next) => Some(Box::new(move |r: Result<(), Error>| {
                let _ = tx.send(r.map(|()| next));
            })),
            Err(e) => {
                let _ = tx.send(Err(e));
                None
            }
        }
    }
}

/// Increments the decimal counter at `key` on its shard's worker.
fn incr(db: &Db, key: &'static [u8], tx: mpsc::Sender<Result<u64, Error>>) {
    db.exec(db.shard_of(key), incr_fn(key, tx));
}

#[test]
fn read_modify_writes_on_workers_are_atomic_and_merged() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Arc::new(Db::open("/db", opts(&fs, 2, None)).unwrap());
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                for _ in 0..500 {
                    incr(&db, b"counter", tx.clone());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(tx);
    let mut seen: Vec<u64> = rx.iter().map(|r| r.unwrap()).collect();
    seen.sort_unstable();
    // Every increment saw the one before it: the values are exactly 1..=2000.
    assert_eq!(seen, (1..=2000).collect::<Vec<u64>>());
    assert_eq!(db.get(b"counter").unwrap(), Some(b"2000".to_vec()));
    let stats = db.batch_stats();
    let writes: u64 = stats.write_sizes.iter().sum();
    assert!(writes <= 2000, "{writes} engine writes for 2000 executions");
}

#[test]
fn executions_in_one_group_see_each_others_writes() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 1, None)).unwrap();
    db.put(b"k", b"zero").unwrap();
    // A slow first execution lets the next ones queue up behind it, so they share a group.
    let (tx, rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    db.exec(0, move |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
        txn.unwrap();
        go_rx.recv().unwrap();
        None
    });
    let reads = vec![b"k".to_vec()];
    db.exec_reading(
        0,
        reads,
        |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
            let txn = txn.unwrap();
            assert_eq!(txn.get(b"k").unwrap(), Some(b"zero".to_vec()));
            txn.put(b"k", b"first").unwrap();
            None
        },
    );
    for _ in 0..10 {
        let tx = tx.clone();
        // Declared reads are fetched before the group's first execution writes: what the
        // group wrote must still win over them.
        let reads = vec![b"k".to_vec(), b"absent".to_vec()];
        db.exec_reading(
            0,
            reads,
            move |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
                let txn = txn.unwrap();
                let v = txn.get(b"k").unwrap().unwrap();
                let mut next = v.clone();
                next.push(b'+');
                txn.put(b"k", &next).unwrap();
                let got = txn.multi_get(&[&b"k"[..], b"absent"]);
                assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&next[..]));
                assert_eq!(got[1].as_ref().unwrap(), &None);
                Some(Box::new(move |r: Result<(), Error>| {
                    tx.send((v, r.is_ok())).unwrap();
                }))
            },
        );
    }
    go_tx.send(()).unwrap();
    drop(tx);
    let got: Vec<(Vec<u8>, bool)> = rx.iter().collect();
    assert_eq!(got.len(), 10);
    for (i, (v, ok)) in got.iter().enumerate() {
        assert!(ok);
        assert_eq!(v.len(), 5 + i, "execution {i} saw {v:?}");
    }
    assert_eq!(db.get(b"k").unwrap(), Some(b"first++++++++++".to_vec()));
    let merged = db.batch_stats().write_sizes;
    assert!(
        merged.iter().enumerate().any(|(n, &c)| n > 1 && c > 0),
        "no group merged more than one execution: {merged:?}"
    );
}

#[test]
fn executions_are_durable_after_reopen_and_fail_cleanly() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    {
        let db = Db::open("/db", opts(&fs, 2, None)).unwrap();
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            incr(&db, b"n", tx.clone());
        }
        assert_eq!(rx.iter().take(3).map(|r| r.unwrap()).max(), Some(3));
        // A shard that does not exist: the closure hears the error.
        let (etx, erx) = mpsc::channel();
        db.exec(7, move |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
            etx.send(txn.is_err()).unwrap();
            None
        });
        assert!(erx.recv().unwrap());
        db.close().unwrap();
    }
    let db = Db::open("/db", opts(&fs, 2, None)).unwrap();
    assert_eq!(db.get(b"n").unwrap(), Some(b"3".to_vec()));
}

#[test]
fn slot_routing_is_persisted_and_checked() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let key = |slot: u16| {
        let mut k = vec![0u8];
        k.extend_from_slice(&slot.to_be_bytes());
        k.extend_from_slice(b"\x00key");
        k
    };
    {
        let db = Db::open("/db", opts(&fs, 4, Some(Routing::Slot))).unwrap();
        assert_eq!(db.routing(), Routing::Slot);
        assert_eq!(db.shard_of(&key(0)), 0);
        assert_eq!(db.shard_of(&key(16383)), 3);
        for slot in (0..16384u16).step_by(97) {
            db.put(&key(slot), &slot.to_be_bytes()).unwrap();
        }
        db.close().unwrap();
    }
    // Reopened without saying: the persisted routing.
    let db = Db::open("/db", opts(&fs, 4, None)).unwrap();
    assert_eq!(db.routing(), Routing::Slot);
    for slot in (0..16384u16).step_by(97) {
        assert_eq!(
            db.get(&key(slot)).unwrap(),
            Some(slot.to_be_bytes().to_vec())
        );
        // Each key is in the shard its slot range names, read from that engine directly.
        let shard = usize::from(slot) * 4 / 16384;
        assert!(db.engine(shard).db().get(&key(slot)).unwrap().is_some());
    }
    db.close().unwrap();
    match Db::open("/db", opts(&fs, 4, Some(Routing::Hash))) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("routing"), "{m}"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened with another routing"),
    }
}

#[test]
fn idle_shards_run_executions_on_the_calling_thread_busy_ones_queue() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Arc::new(Db::open("/db", opts(&fs, 1, None)).unwrap());
    let here = std::thread::current().id();
    let (tx, rx) = mpsc::channel();
    let t = tx.clone();
    db.exec_here_or_queued(
        0,
        vec![],
        move |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
            txn.unwrap().put(b"k", b"1").unwrap();
            let ran = std::thread::current().id();
            Some(Box::new(move |r: Result<(), Error>| {
                t.send((ran, r.is_ok())).unwrap();
            }))
        },
    );
    assert_eq!(
        rx.recv().unwrap(),
        (here, true),
        "an idle shard runs it here"
    );
    assert_eq!(db.get(b"k").unwrap(), Some(b"1".to_vec()));
    // While the worker handles a request, the shard is busy: the execution queues behind it.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    db.exec(0, move |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
        txn.unwrap();
        go_rx.recv().unwrap();
        None
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    let t = tx.clone();
    db.exec_here_or_queued(
        0,
        vec![],
        move |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
            let txn = txn.unwrap();
            assert_eq!(txn.get(b"k").unwrap(), Some(b"1".to_vec()));
            txn.put(b"k", b"2").unwrap();
            let ran = std::thread::current().id();
            Some(Box::new(move |r: Result<(), Error>| {
                t.send((ran, r.is_ok())).unwrap();
            }))
        },
    );
    go_tx.send(()).unwrap();
    let (ran, ok) = rx.recv().unwrap();
    assert!(ok);
    assert_ne!(ran, here, "a busy shard runs it on its worker");
    assert_eq!(db.get(b"k").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn direct_and_queued_executions_together_lose_no_update() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Arc::new(Db::open("/db", opts(&fs, 2, None)).unwrap());
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let db = db.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                for _ in 0..500 {
                    let key: &'static [u8] = b"counter";
                    let f = incr_fn(key, tx.clone());
                    if i % 2 == 0 {
                        db.exec_here_or_queued(db.shard_of(key), vec![key.to_vec()], f);
                    } else {
                        db.exec(db.shard_of(key), f);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(tx);
    let mut seen: Vec<u64> = rx.iter().map(|r| r.unwrap()).collect();
    seen.sort_unstable();
    assert_eq!(seen, (1..=2000).collect::<Vec<u64>>());
    assert_eq!(db.get(b"counter").unwrap(), Some(b"2000".to_vec()));
}

#[test]
fn a_scan_in_an_execution_sees_the_groups_writes_over_the_engine() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 1, None)).unwrap();
    for k in ["a", "c", "e", "g"] {
        db.put(k.as_bytes(), b"engine").unwrap();
    }
    db.put(b"z", b"outside").unwrap();
    let (tx, rx) = mpsc::channel();
    db.exec(0, move |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
        let txn = txn.unwrap();
        txn.put(b"b", b"mine").unwrap();
        txn.put(b"c", b"mine").unwrap();
        txn.delete(b"e").unwrap();
        txn.put(b"h", b"mine").unwrap();
        txn.put(b"y", b"mine").unwrap(); // outside [a, i)
        let mut scans = Vec::new();
        for reverse in [false, true] {
            let mut seen = Vec::new();
            txn.scan(b"a", b"i", reverse, |k, v| {
                seen.push(format!(
                    "{}={}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                ));
                true
            })
            .unwrap();
            scans.push(seen);
        }
        // Stopping early.
        let mut first = Vec::new();
        txn.scan(b"a", b"i", false, |k, _| {
            first.push(k.to_vec());
            first.len() < 2
        })
        .unwrap();
        scans.push(
            first
                .iter()
                .map(|k| String::from_utf8_lossy(k).into())
                .collect(),
        );
        tx.send(scans).unwrap();
        None
    });
    let scans = rx.recv().unwrap();
    let forward = ["a=engine", "b=mine", "c=mine", "g=engine", "h=mine"];
    assert_eq!(scans[0], forward);
    let mut backward = forward.to_vec();
    backward.reverse();
    assert_eq!(scans[1], backward);
    assert_eq!(scans[2], ["a", "b"]);
}

#[test]
fn rollback_to_a_savepoint_drops_only_the_later_writes() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 1, None)).unwrap();
    db.put(b"kept", b"old").unwrap();
    db.put(b"undone", b"old").unwrap();
    let (tx, rx) = mpsc::channel();
    db.exec(0, move |txn: Result<&mut ShardTxn<StrataEngine>, Error>| {
        let txn = txn.unwrap();
        txn.put(b"kept", b"new").unwrap();
        let sp = txn.savepoint();
        txn.put(b"undone", b"new").unwrap();
        txn.delete(b"kept").unwrap();
        txn.put(b"fresh", b"new").unwrap();
        assert_eq!(txn.get(b"kept").unwrap(), None);
        txn.rollback_to(sp);
        // Reads after the rollback see the writes before the savepoint and the engine.
        let seen = (
            txn.get(b"kept").unwrap(),
            txn.get(b"undone").unwrap(),
            txn.get(b"fresh").unwrap(),
        );
        assert!(txn.has_writes());
        Some(Box::new(move |r: Result<(), Error>| {
            tx.send((seen, r.is_ok())).unwrap();
        }))
    });
    let (seen, ok) = rx.recv().unwrap();
    assert!(ok);
    assert_eq!(seen, (Some(b"new".to_vec()), Some(b"old".to_vec()), None));
    assert_eq!(db.get(b"kept").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.get(b"undone").unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get(b"fresh").unwrap(), None);
}

/// A run of direct executions over two shards (`HeldShards`): each shard's writes are read
/// back by the run's later executions, reach the engine as one write per shard at the
/// commit, and nobody sees any of them before it; a held shard is busy for everyone else.
#[test]
fn held_shards_write_once_each_at_the_commit() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Arc::new(Db::open("/db", opts(&fs, 2, None)).unwrap());
    let key_of = |shard: usize| {
        (0u32..)
            .map(|i| format!("k{i}").into_bytes())
            .find(|k| db.shard_of(k) == shard)
            .unwrap()
    };
    let (a, b) = (key_of(0), key_of(1));
    let writes = |db: &Db| -> u64 { (0..2).map(|i| db.engine(i).db().stats().writes).sum() };
    let before = writes(&db);
    let snap = db.snapshot().unwrap();
    let mut held = db.hold_shards();
    for i in 0..10u32 {
        for k in [&a, &b] {
            let txn = held.txn(db.shard_of(k)).expect("an idle shard");
            let cur: u32 = txn
                .get(k)
                .unwrap()
                .map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap());
            assert_eq!(cur, i, "the run reads its own earlier writes");
            txn.put(k, (cur + 1).to_string().as_bytes()).unwrap();
        }
    }
    // Held: another thread can run nothing of either shard here, and its reads wait.
    let other = db.clone();
    let busy = std::thread::spawn(move || other.try_exec_here(0, |_| ()).is_none())
        .join()
        .unwrap();
    assert!(busy, "a held shard is busy for other threads");
    assert_eq!(writes(&db), before, "nothing written before the commit");
    let out = held.commit();
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|(_, r)| r.is_ok()), "{out:?}");
    assert_eq!(writes(&db) - before, 2, "one engine write per shard");
    assert_eq!(db.get(&a).unwrap(), Some(b"10".to_vec()));
    assert_eq!(db.get(&b).unwrap(), Some(b"10".to_vec()));
    assert_eq!(snap.get(&a).unwrap(), None);
    // Released: the shards run executions again.
    assert!(db.try_exec_here(1, |_| ()).is_some());
    // Dropped without a commit: nothing is written.
    let mut held = db.hold_shards();
    held.txn(0).unwrap().put(&a, b"lost").unwrap();
    drop(held);
    assert_eq!(db.get(&a).unwrap(), Some(b"10".to_vec()));
}

/// A group finds its own writes by scanning them while it has few, and through a map once
/// it has more (`SCAN_WRITES`): reads, scans and rollbacks must see the same either way.
/// Checked against a model at every step of 60 writes (puts and deletes, keys written
/// again), and after rollbacks to both sides of the switch.
#[test]
fn a_group_sees_its_own_writes_before_and_after_it_indexes_them() {
    use std::collections::BTreeMap;
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open("/db", opts(&fs, 1, None)).unwrap();
    let key = |i: usize| format!("k{:02}", i).into_bytes();
    for i in (0..30).step_by(3) {
        db.put(&key(i), b"engine").unwrap();
    }
    let engine: BTreeMap<Vec<u8>, Vec<u8>> = (0..30)
        .step_by(3)
        .map(|i| (key(i), b"engine".to_vec()))
        .collect();
    let visible = |model: &BTreeMap<Vec<u8>, Option<Vec<u8>>>| {
        let mut all: BTreeMap<Vec<u8>, Vec<u8>> = engine.clone();
        for (k, v) in model {
            match v {
                Some(v) => all.insert(k.clone(), v.clone()),
                None => all.remove(k),
            };
        }
        all
    };
    let check = |txn: &ShardTxn<StrataEngine>, model: &BTreeMap<Vec<u8>, Option<Vec<u8>>>| {
        let want = visible(model);
        for i in 0..30 {
            assert_eq!(
                txn.get(&key(i)).unwrap(),
                want.get(&key(i)).cloned(),
                "k{i}"
            );
        }
        let mut seen = Vec::new();
        txn.scan(b"k", b"l", false, |k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        assert_eq!(seen, want.into_iter().collect::<Vec<_>>());
    };
    let ran = db.try_exec_here(0, |txn| {
        let mut model = BTreeMap::new();
        let mut saved = Vec::new();
        for i in 0..60 {
            let k = key((i * 7) % 30);
            if i % 5 == 4 {
                txn.delete(&k).unwrap();
                model.insert(k, None);
            } else {
                let v = format!("v{i}").into_bytes();
                txn.put(&k, &v).unwrap();
                model.insert(k, Some(v));
            }
            check(txn, &model);
            if i == 9 || i == 39 {
                saved.push((txn.savepoint(), model.clone()));
            }
        }
        // Back past the switch (39 writes kept), then below it (9 kept).
        for (point, model) in saved.into_iter().rev() {
            txn.rollback_to(point);
            check(txn, &model);
        }
    });
    assert!(matches!(ran, Some(((), Ok(())))));
}
