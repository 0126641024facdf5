//! `Db::checkpoint` of the sharded front: one cut across every shard, taken while writers run
//! cross-shard batches, that opens (after a power loss too) as a database of its own.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use strata::{Db, DbOptions, WriteBatch, WriteOptions};
use strata_engine::io::{Fs, MemFs, RealFs};

fn opts(fs: &Arc<dyn Fs>) -> DbOptions {
    let mut o = DbOptions {
        shards: Some(4),
        ..DbOptions::default()
    };
    o.engine.fs = fs.clone();
    o.engine.background_threads = 1;
    o.engine.write_buffer_bytes = 32 << 10;
    o
}

/// Keys `c-<n>` for the four writers' counters, chosen so that each writer's counter and
/// marker fall in different shards: every batch below is a cross-shard batch.
fn counter(w: usize) -> Vec<u8> {
    format!("counter-{w}").into_bytes()
}

fn marker(db: &Db, w: usize) -> Vec<u8> {
    let c = db.shard_of(&counter(w));
    (0..)
        .map(|i| format!("marker-{w}-{i}").into_bytes())
        .find(|k| db.shard_of(k) != c)
        .expect("some key lands in another shard")
}

fn read_u64(db: &Db, key: &[u8]) -> u64 {
    db.get(key)
        .unwrap()
        .map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap())
}

const WRITERS: usize = 4;

fn checkpoints_while_writing(fs: Arc<dyn Fs>, root: &Path, after: impl Fn()) {
    let db = Arc::new(Db::open(root.join("db"), opts(&fs)).unwrap());
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let m = marker(&db, w);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let v = i.to_string();
                    let mut b = WriteBatch::new();
                    b.put(&counter(w), v.as_bytes()).put(&m, v.as_bytes());
                    // Unsynced single-shard writes too, so every shard's log moves.
                    db.write(b).unwrap();
                    db.put_opt(
                        &WriteOptions::default(),
                        format!("filler-{w}-{}", i % 300).as_bytes(),
                        &[b'f'; 100],
                    )
                    .unwrap();
                    acked[w].store(i, Ordering::Release);
                }
            })
        })
        .collect();
    let mut taken: Vec<(PathBuf, Vec<u64>, Vec<u64>)> = Vec::new();
    for k in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let dir = root.join(format!("cp-{k}"));
        let load = || {
            acked
                .iter()
                .map(|a| a.load(Ordering::Acquire))
                .collect::<Vec<_>>()
        };
        let before = load();
        db.checkpoint(&dir).unwrap();
        taken.push((dir, before, load()));
    }
    let err = db.checkpoint(&taken[0].0).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let markers: Vec<Vec<u8>> = (0..WRITERS).map(|w| marker(&db, w)).collect();
    after();
    for (dir, before, after) in &taken {
        let report = Db::check(dir, opts(&fs)).unwrap();
        assert!(report.is_ok(), "{}: {report:?}", dir.display());
        let cp = Db::open(dir, opts(&fs)).unwrap();
        for w in 0..WRITERS {
            let (c, m) = (read_u64(&cp, &counter(w)), read_u64(&cp, &markers[w]));
            assert_eq!(
                c,
                m,
                "{}: writer {w}'s cross-shard batch split",
                dir.display()
            );
            assert!(
                before[w] <= c && c <= after[w] + 1,
                "{}: writer {w} holds {c}, acknowledged {}..={}",
                dir.display(),
                before[w],
                after[w]
            );
        }
        cp.close().unwrap();
    }
}

#[test]
fn checkpoint_is_one_cut_across_shards_on_real_files() {
    let tmp = tempfile::tempdir().unwrap();
    checkpoints_while_writing(Arc::new(RealFs::default()), tmp.path(), || {});
}

#[test]
fn checkpoint_survives_a_power_loss_right_after() {
    let mem = MemFs::new();
    checkpoints_while_writing(Arc::new(mem.clone()), Path::new("/root"), || {
        mem.crash(false)
    });
}
