//! Unit tests of the store and its transactions over a real database in a temporary
//! directory.

use super::*;

/// A store over a new slot-routed database of `shards` shards in `dir` (or the one there):
/// the unit tests' store, here and in the other modules.
pub(crate) fn open_store(dir: &std::path::Path, shards: usize) -> Store {
    let opts = strata::DbOptions {
        shards: Some(shards),
        routing: Some(strata::Routing::Slot),
        ..Default::default()
    };
    Store::open(Db::open(dir, opts).unwrap(), false).unwrap()
}

/// A store over a new slot-routed database of `shards` shards in memory (`MemFs`): the
/// type modules' unit tests' store.
pub(crate) fn mem_store(shards: usize) -> Store {
    let mut opts = strata::DbOptions {
        shards: Some(shards),
        routing: Some(strata::Routing::Slot),
        ..Default::default()
    };
    opts.engine.fs = Arc::new(strata_engine::io::MemFs::new());
    Store::open(Db::open("/strata-test", opts).unwrap(), false).unwrap()
}

/// Runs `f` as an EXEC's queued commands run (every stripe held, writes buffered in the
/// EXEC's transaction), then applies its writes: the type modules' tests of the EXEC route.
pub(crate) fn in_exec<R>(store: &Store, f: impl FnOnce(&Tx<'_>) -> R) -> R {
    let locks = store.lock_for_exec(None);
    let (r, written) = store.front().run_exec(locks, f);
    written.unwrap();
    r
}

/// Runs `f` as a command on the worker of the shard of `key` (database 0) runs, in the
/// group's transaction (the shard idle, so in place), then applies the group's write: the
/// type modules' tests of the worker route.
pub(crate) fn on_worker<R>(store: &Store, key: &[u8], f: impl FnOnce(&Tx<'_>) -> R) -> R {
    let shard = store.db().shard_of(&crate::keys::meta_key(0, key));
    let (r, written) = store
        .db()
        .try_exec_here(shard, |txn| {
            store.with_shard_txn(txn, |tx| {
                assert!(tx.on_worker());
                f(tx)
            })
        })
        .expect("the shard is idle");
    written.unwrap();
    r
}

/// Writes string `value` at `key` of database 0 as its bare record (version 1, no expiry)
/// and returns the record: a key of another type for the collections' WRONGTYPE tests.
pub(crate) fn put_string(tx: &Tx<'_>, key: &[u8], value: &[u8]) -> Meta {
    let m = Meta {
        rtype: RType::String,
        expire_ms: 0,
        version: 1,
        size: value.len() as u64,
        value: value.to_vec(),
    };
    tx.put(0, key, &m).unwrap();
    m
}

#[test]
fn sparse_collections_are_rewritten_with_their_live_members() {
    use crate::keys::{sub_key, sub_prefix, KIND_SUBKEY};
    let dir = tempfile::tempdir().unwrap();
    let s = open_store(dir.path(), 2);
    let (db, key) = (0u8, &b"set"[..]);
    let mut m = Meta::collection(RType::Set, s.next_version());
    m.value = vec![1];
    m.size = 200;
    let mut w = Writes::new();
    for i in 0..200u32 {
        w.put_member(db, key, &sub_key(db, key, m.version, &i.to_be_bytes()), b"");
    }
    w.meta(db, key, Some(&m));
    s.front().apply(w).unwrap();
    // Delete 190 members, ten per command: each apply adds its deletes to the count.
    for i in (0..190u32).step_by(10) {
        let mut w = Writes::new();
        for j in i..i + 10 {
            w.delete_member(db, key, &sub_key(db, key, m.version, &j.to_be_bytes()));
        }
        m = s.front().get(db, key).unwrap().unwrap();
        m.size -= 10;
        w.meta(db, key, Some(&m));
        s.front().apply(w).unwrap();
        let now = s.front().get(db, key).unwrap().unwrap();
        assert_eq!(now.dead_members(), u64::from(i + 10));
        assert_eq!(now.value[0], 1, "the flags byte is kept");
        // Not sparse yet: no rewrite below twice the live members plus the slack.
        if now.dead_members() < 2 * now.size + REWRITE_SLACK {
            assert_eq!(
                s.front().rewrite_if_sparse(db, key, now.clone()).unwrap(),
                now
            );
        }
    }
    let m = s.front().get(db, key).unwrap().unwrap();
    assert_eq!((m.size, m.dead_members()), (10, 190));
    let fresh = s.front().rewrite_if_sparse(db, key, m.clone()).unwrap();
    assert!(fresh.version > m.version);
    assert_eq!(
        (fresh.size, fresh.dead_members(), fresh.value[0]),
        (10, 0, 1)
    );
    assert_eq!(s.front().get(db, key).unwrap().unwrap(), fresh);
    let mut live = Vec::new();
    let p = sub_prefix(KIND_SUBKEY, db, key, fresh.version);
    s.front()
        .scan_prefix(&p, false, |k, _| {
            live.push(u32::from_be_bytes(k[p.len()..].try_into().unwrap()));
            true
        })
        .unwrap();
    assert_eq!(live, (190..200).collect::<Vec<u32>>());
    // A list keeps no count: its deletes are at its ends.
    let mut l = Meta::collection(RType::List, 1);
    l.value = vec![0; 16];
    l.set_dead_members(5);
    assert_eq!((l.dead_members(), l.value.len()), (0, 16));
}

#[test]
fn expiry_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_store(dir.path(), 2);
    let (a, b) = (s.next_version(), s.next_version());
    assert!(b > a);
    let m = Meta {
        rtype: RType::String,
        expire_ms: now_ms() - 1,
        version: a,
        size: 1,
        value: b"v".to_vec(),
    };
    s.front().put(0, b"k", &m).unwrap();
    assert_eq!(s.front().get(0, b"k").unwrap(), None);
    assert_eq!(s.stats.expired_keys.load(Ordering::Relaxed), 1);
    assert_eq!(s.db().get(&meta_key(0, b"k")).unwrap(), None);
    s.sync_if_dirty().unwrap();
    s.into_db().close().unwrap();
}

#[test]
fn collections_apply_copy_and_versions_survive_reopen() {
    use crate::keys::{sub_key, sub_prefix, KIND_SUBKEY};
    let dir = tempfile::tempdir().unwrap();
    let s = open_store(dir.path(), 2);
    let mut m = Meta::collection(RType::Hash, s.next_version());
    let mut w = Writes::new();
    for f in [&b"f1"[..], b"f2"] {
        w.put_member(0, b"h", &sub_key(0, b"h", m.version, f), b"v");
        m.size += 1;
    }
    w.meta(0, b"h", Some(&m));
    s.front().apply(w).unwrap();
    let members = |db: u8, key: &[u8], version: u64| {
        let p = sub_prefix(KIND_SUBKEY, db, key, version);
        let mut out = Vec::new();
        s.front()
            .scan_prefix(&p, false, |k, v| {
                out.push((k[p.len()..].to_vec(), v.to_vec()));
                true
            })
            .unwrap();
        out
    };
    assert_eq!(members(0, b"h", m.version).len(), 2);
    // Copy to another database under another name and a new version.
    let v2 = s.next_version();
    let mut w = Writes::new();
    s.front()
        .copy_members(&mut w, (0, b"h"), &m, (5, b"copy"), v2)
        .unwrap();
    let mut c = m.clone();
    c.version = v2;
    w.meta(5, b"copy", Some(&c));
    s.front().apply(w).unwrap();
    assert_eq!(members(5, b"copy", v2), members(0, b"h", m.version));
    assert_eq!(
        s.front().get(5, b"copy").unwrap().unwrap().rtype,
        RType::Hash
    );
    // Members outlive their deleted key (for the compaction filter to drop); a new
    // incarnation after a reopen gets a version above theirs even so.
    let mut w = Writes::new();
    w.meta(5, b"copy", None);
    s.front().apply(w).unwrap();
    s.into_db().close().unwrap();
    let s = open_store(dir.path(), 2);
    assert!(
        s.next_version_at(0) > v2,
        "as if the clock went back to 1970"
    );
    s.into_db().close().unwrap();
}

#[test]
fn exec_reads_its_own_writes_and_applies_them_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_store(dir.path(), 4);
    s.front().put(0, b"old", &string(0, b"1")).unwrap();
    s.front().put(0, b"gone", &string(0, b"1")).unwrap();
    let keys: Vec<Vec<u8>> = (0..8).map(|i| format!("k{{{i}}}").into_bytes()).collect();
    let mks: Vec<Vec<u8>> = keys.iter().map(|k| meta_key(0, k)).collect();
    assert!(mks
        .iter()
        .any(|k| s.db.shard_of(k) != s.db.shard_of(&mks[0])));
    let dirty = Arc::new(AtomicBool::new(false));
    s.watches.watch(7, &dirty, 0, b"gone", false);
    let locks = s.lock_for_exec(None);
    let ((), written) = s.front().run_exec(locks, |t| {
        for k in &keys {
            t.put(0, k, &string(0, b"v")).unwrap();
        }
        t.delete(0, b"gone").unwrap();
        // Not applied yet: other readers see nothing of it, the front's included (where a
        // read goes is the transaction it is made through, not the thread it runs on).
        assert_eq!(s.db.get(&mks[0]).unwrap(), None);
        assert_eq!(s.front().get(0, &keys[3]).unwrap(), None);
        assert!(s.front().get(0, b"gone").unwrap().is_some());
        // The transaction's reads see its writes: point reads, batched reads, scans.
        assert_eq!(t.get(0, &keys[3]).unwrap(), Some(string(0, b"v")));
        assert_eq!(t.get(0, b"gone").unwrap(), None);
        let got = t.multi_get(0, &[&keys[0][..], b"old", b"gone"]).unwrap();
        assert_eq!(got.iter().filter(|m| m.is_some()).count(), 2);
        let mut n = 0;
        t.scan_db(0, |_, _| n += 1).unwrap();
        assert_eq!(n, keys.len() + 1);
        // FLUSHDB inside sees them too, and a write after it survives.
        t.flush_db(0).unwrap();
        t.scan_db(0, |_, _| panic!("flushed")).unwrap();
        t.put(0, b"after", &string(0, b"2")).unwrap();
    });
    written.unwrap();
    assert!(dirty.load(Ordering::SeqCst), "the watched key was deleted");
    assert_eq!(s.db.get(&mks[0]).unwrap(), None);
    assert_eq!(s.front().get(0, b"old").unwrap(), None);
    assert_eq!(s.front().get(0, b"after").unwrap(), Some(string(0, b"2")));
    // The thread is back to plain front writes.
    s.front().put(0, b"x", &string(0, b"3")).unwrap();
    assert!(s.db.get(&meta_key(0, b"x")).unwrap().is_some());
    s.into_db().close().unwrap();
}

fn string(expire_ms: u64, v: &[u8]) -> Meta {
    Meta {
        rtype: RType::String,
        expire_ms,
        version: 1,
        size: v.len() as u64,
        value: v.to_vec(),
    }
}

#[test]
fn active_expiry_rechecks_the_record_and_survives_reopen() {
    use crate::expire::active_expire_cycle;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let s = open_store(dir.path(), 2);
    let past = now_ms() - 1;
    s.front().put(0, b"due", &string(past, b"v")).unwrap();
    s.front().put(0, b"replaced", &string(past, b"v")).unwrap();
    s.front()
        .put(1, b"later", &string(now_ms() + 3_600_000, b"v"))
        .unwrap();
    s.front()
        .put(0, b"cleared", &string(now_ms() + 3_600_000, b"v"))
        .unwrap();
    s.front().put(0, b"cleared", &string(0, b"v")).unwrap();
    // A write the index does not see (as a SET racing with the cycle): the cycle must
    // read the record, not trust the index.
    s.db.put(&meta_key(0, b"replaced"), &string(0, b"new").encode())
        .unwrap();
    assert_eq!(s.expires.len(0), 2);
    assert_eq!(active_expire_cycle(&s, Duration::from_secs(1)).unwrap(), 1);
    assert_eq!(s.stats.expired_keys.load(Ordering::Relaxed), 1);
    assert_eq!(s.db().get(&meta_key(0, b"due")).unwrap(), None);
    assert_eq!(
        s.front().get(0, b"replaced").unwrap(),
        Some(string(0, b"new"))
    );
    assert_eq!((s.expires.len(0), s.expires.len(1)), (0, 1));

    // Reopen: the index is rebuilt from the records, expired keys included.
    s.front()
        .put(2, b"due2", &string(now_ms() + 50, b"v"))
        .unwrap();
    s.into_db().close().unwrap();
    std::thread::sleep(Duration::from_millis(60));
    let s = open_store(dir.path(), 2);
    assert_eq!(
        (s.expires.len(0), s.expires.len(1), s.expires.len(2)),
        (0, 1, 1)
    );
    assert_eq!(active_expire_cycle(&s, Duration::from_secs(1)).unwrap(), 1);
    assert_eq!(s.db().get(&meta_key(2, b"due2")).unwrap(), None);
    s.front().flush_db(1).unwrap();
    assert_eq!(s.expires.len(1), 0, "FLUSHDB empties the index");
    s.into_db().close().unwrap();
}
