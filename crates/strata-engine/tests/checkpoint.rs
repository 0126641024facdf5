//! `Db::checkpoint`: a copy of one moment that opens as a database of its own, while writers
//! run, on real files (hard links) and on `MemFs` (copies, and a power loss right after).

mod common;

use common::{mem_dir, tiny_opts, Engine};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use strata_engine::io::{Fs, MemFs, RealFs};
use strata_engine::{Db, Options, WriteBatch, WriteOptions};

const COUNTER: &[u8] = b"counter-key";
const MARKER: &[u8] = b"marker--key";

fn read_u64(db: &Db, key: &[u8]) -> u64 {
    db.get(key)
        .unwrap()
        .map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap())
}

/// A writer bumps `COUNTER` and `MARKER` to `i` in one batch (with filler keys so flushes,
/// compactions and value-log rotations happen) while checkpoints are taken; each checkpoint
/// must open, pass `check`, agree on both keys, and lie between the writes acknowledged
/// before the call and those acknowledged after it.
fn checkpoints_while_writing(opts: Options, fs: &Arc<dyn Fs>, root: &Path, after: impl Fn()) {
    let db = Arc::new(Db::open(root.join("db"), opts.clone()).unwrap());
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let mut b = WriteBatch::new();
                let v = i.to_string();
                b.put(COUNTER, v.as_bytes());
                b.put(MARKER, v.as_bytes());
                let filler = format!("filler-{:06}", i % 500);
                b.put(filler.as_bytes(), &vec![b'x'; 40 + (i % 200) as usize]);
                db.write(&WriteOptions::default(), b).unwrap();
                acked.store(i, Ordering::Release);
            }
        })
    };
    let mut taken: Vec<(PathBuf, u64, u64)> = Vec::new();
    for k in 0..6 {
        std::thread::sleep(std::time::Duration::from_millis(15));
        let dir = root.join(format!("cp-{k}"));
        let before = acked.load(Ordering::Acquire);
        db.checkpoint(&dir).unwrap();
        let after = acked.load(Ordering::Acquire);
        taken.push((dir, before, after));
    }
    // A second checkpoint into an existing directory is refused, not merged.
    let again = db.checkpoint(&taken[0].0).unwrap_err();
    assert!(again.to_string().contains("already exists"), "{again}");
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let db = Arc::try_unwrap(db).ok().expect("the writer is gone");
    let final_count = read_u64(&db, COUNTER);
    assert!(final_count > 0);
    after();
    for (dir, before, after) in &taken {
        let report = Db::check(dir, opts.clone()).unwrap();
        assert!(
            report.problems.is_empty(),
            "{}: {:?}",
            dir.display(),
            report.problems
        );
        let cp = Db::open(
            dir,
            Options {
                create_if_missing: false,
                ..opts.clone()
            },
        )
        .unwrap();
        let (c, m) = (read_u64(&cp, COUNTER), read_u64(&cp, MARKER));
        assert_eq!(
            c,
            m,
            "{}: counter and marker written together",
            dir.display()
        );
        // The writer stores its count after `write` returns: the write in flight when the
        // call returned may be in the checkpoint and not yet counted.
        assert!(
            *before <= c && c <= *after + 1,
            "{}: holds {c}, acknowledged {before}..={after}",
            dir.display()
        );
        // The checkpoint is a database of its own: writing it leaves the source alone.
        cp.put(COUNTER, b"0").unwrap();
        cp.close().unwrap();
    }
    // Writing the checkpoints left the source alone.
    assert_eq!(read_u64(&db, COUNTER), final_count);
    assert!(fs.exists(&root.join("db")).unwrap());
    drop(db);
}

#[test]
fn checkpoint_on_real_files_is_consistent_while_writing() {
    for engine in Engine::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Fs> = Arc::new(RealFs::default());
        let opts = engine.options(tiny_opts(fs.clone()));
        checkpoints_while_writing(opts, &fs, tmp.path(), || {});
    }
}

#[test]
fn checkpoint_on_memfs_survives_a_power_loss_right_after() {
    for engine in Engine::ALL {
        let mem = MemFs::new();
        let fs: Arc<dyn Fs> = Arc::new(mem.clone());
        let opts = engine.options(tiny_opts(fs.clone()));
        // MemFs has no hard links: every file is copied. The crash keeps only what was
        // synced, so a checkpoint that forgot a sync loses files or bytes here.
        checkpoints_while_writing(opts, &fs, &mem_dir(), || mem.crash(false));
    }
}

#[test]
fn checkpoint_links_immutable_files_on_real_files() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let fs: Arc<dyn Fs> = Arc::new(RealFs::default());
    let db = Db::open(tmp.path().join("db"), tiny_opts(fs)).unwrap();
    for i in 0..2000u32 {
        db.put(format!("key-{i:05}").as_bytes(), &[b'v'; 64])
            .unwrap();
    }
    db.flush().unwrap();
    // No compaction may delete a source table between the checkpoint and the count.
    db.wait_idle().unwrap();
    db.checkpoint(tmp.path().join("cp")).unwrap();
    let tables: Vec<_> = std::fs::read_dir(tmp.path().join("cp"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    assert!(!tables.is_empty());
    for t in &tables {
        assert_eq!(
            std::fs::metadata(t).unwrap().nlink(),
            2,
            "{} is a link",
            t.display()
        );
    }
    drop(db);
    let cp = Db::open(
        tmp.path().join("cp"),
        tiny_opts(Arc::new(RealFs::default())),
    )
    .unwrap();
    assert_eq!(cp.get(b"key-01999").unwrap(), Some(vec![b'v'; 64]));
}
