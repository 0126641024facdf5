//! The same sharded front over RocksDB (cargo feature `rocksdb`):
//! `ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu cargo test -p strata --features rocksdb --test rocks`
#![cfg(feature = "rocksdb")]

use strata::rocks::{RocksConfig, RocksEngine};
use strata::{EngineIter, Options, ScanMode, ShardedDb, WriteBatch};

#[test]
fn sharded_rocksdb_basics() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        shards: Some(3),
        ..Options::with_engine(RocksConfig::default())
    };
    let db = ShardedDb::<RocksEngine>::open(dir.path(), opts()).unwrap();
    for i in 0..500u32 {
        db.put(format!("{i:05}").as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    let mut b = WriteBatch::new();
    b.put(b"00001", b"x").put(b"00002", b"y").delete(b"00003");
    db.write(b).unwrap();
    assert!(db.committed_gsn() >= 1);
    let snap = db.snapshot().unwrap();
    db.put(b"00001", b"later").unwrap();
    assert_eq!(snap.get(b"00001").unwrap(), Some(b"x".to_vec()));
    assert_eq!(db.get(b"00001").unwrap(), Some(b"later".to_vec()));
    assert_eq!(db.get(b"00003").unwrap(), None);
    let all = snap.range(b"", None).unwrap();
    assert_eq!(all.len(), 499);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    let merged = snap.scan(b"00100", 20, ScanMode::Merged).unwrap();
    let parallel = snap.scan(b"00100", 20, ScanMode::Parallel).unwrap();
    assert_eq!(merged, parallel);
    assert_eq!(merged[0].0, b"00100");
    let mut it = snap.iter().unwrap();
    it.seek_to_last();
    assert_eq!(it.key(), b"00499");
    it.prev();
    assert_eq!(it.key(), b"00498");
    drop(it);
    drop(snap);
    let got = db.multi_get(&[&b"00010"[..], b"nope"]);
    assert_eq!(
        got[0].as_ref().unwrap(),
        &Some(10u32.to_le_bytes().to_vec())
    );
    assert_eq!(got[1].as_ref().unwrap(), &None);
    db.close().unwrap();

    let db = ShardedDb::<RocksEngine>::open(dir.path(), opts()).unwrap();
    assert_eq!(db.get(b"00002").unwrap(), Some(b"y".to_vec()));
    assert_eq!(db.range(b"", None).unwrap().len(), 499);
    // A Strata-engine front refuses a RocksDB-sharded directory.
    drop(db);
    let err = strata::Db::open(dir.path(), strata::DbOptions::default()).err();
    assert!(err.is_some());
}

#[test]
fn sharded_rocksdb_checkpoint_opens_as_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        shards: Some(3),
        ..Options::with_engine(RocksConfig::default())
    };
    let db = ShardedDb::<RocksEngine>::open(dir.path().join("db"), opts()).unwrap();
    let mut b = WriteBatch::new();
    for i in 0..50u32 {
        b.put(format!("{i:05}").as_bytes(), b"v");
    }
    db.write(b).unwrap();
    db.checkpoint(dir.path().join("cp")).unwrap();
    db.put(b"00000", b"after").unwrap();
    drop(db);
    let cp = ShardedDb::<RocksEngine>::open(dir.path().join("cp"), opts()).unwrap();
    assert_eq!(cp.get(b"00000").unwrap(), Some(b"v".to_vec()));
    assert_eq!(cp.range(b"", None).unwrap().len(), 50);
    cp.close().unwrap();
}
