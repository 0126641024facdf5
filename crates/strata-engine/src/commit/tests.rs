//! The commit pipeline over a fake log and a fake memtable: ordering and visibility under
//! many threads, failures of the log's append and sync, and durability of synced writes
//! among unsynced ones; each with unsynced writers appending alone (the WAL's way) and
//! grouped behind a leader (the value log's).

use super::{Appended, CommitEnv, CommitLog, CommitPipeline};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::vlog::ValuePointer;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// A record of the fake log.
#[derive(Clone, Debug)]
struct Record {
    first_seq: SeqNo,
    keys: Vec<Vec<u8>>,
}

/// A log in memory that can fail its n-th append or sync.
#[derive(Default)]
struct FakeLog {
    records: Mutex<Vec<Record>>,
    /// Records covered by the last successful sync.
    durable: AtomicUsize,
    appends: AtomicUsize,
    syncs: AtomicUsize,
    /// Fail the append (or sync) whose 1-based count is this (0: never).
    fail_append: AtomicUsize,
    fail_sync: AtomicUsize,
    /// Keys of the record whose append failed.
    failed: Mutex<Vec<Vec<u8>>>,
    /// Unsynced writers share appends ([`CommitLog::groups_unsynced`]).
    grouped: bool,
    /// Each append sleeps this long (a slow system call), so writers pile up behind it.
    append_micros: u64,
}

impl FakeLog {
    fn grouped(grouped: bool) -> FakeLog {
        FakeLog {
            grouped,
            ..FakeLog::default()
        }
    }
}

fn injected() -> Error {
    Error::io("append", "fake.log", std::io::Error::other("injected"))
}

fn keys_of(batch: &WriteBatch) -> Vec<Vec<u8>> {
    batch.iter().map(|r| r.unwrap().key.to_vec()).collect()
}

impl CommitLog for FakeLog {
    fn append(&self, batches: &[WriteBatch], disable_wal: bool) -> Result<Appended> {
        assert!(!batches.is_empty(), "a record holds at least one batch");
        for w in batches.windows(2) {
            assert_eq!(
                w[0].seq() + u64::from(w[0].count()),
                w[1].seq(),
                "a record's batches have consecutive sequence numbers"
            );
        }
        if self.append_micros > 0 {
            std::thread::sleep(std::time::Duration::from_micros(self.append_micros));
        }
        let keys: Vec<Vec<u8>> = batches.iter().flat_map(keys_of).collect();
        let n = self.appends.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_append.load(Ordering::SeqCst) {
            *self.failed.lock() = keys;
            return Err(injected());
        }
        if !disable_wal {
            let mut r = self.records.lock();
            if let Some(last) = r.last() {
                assert_eq!(
                    last.first_seq + last.keys.len() as u64,
                    batches[0].seq(),
                    "the log holds records in sequence order, without gaps"
                );
            }
            r.push(Record {
                first_seq: batches[0].seq(),
                keys,
            });
        }
        Ok(Appended::default())
    }

    fn groups_unsynced(&self, _: &WriteBatch) -> bool {
        self.grouped
    }

    fn sync(&self) -> Result<()> {
        // What this sync covers: every record appended before it started.
        let covered = self.records.lock().len();
        let n = self.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_sync.load(Ordering::SeqCst) {
            return Err(injected());
        }
        self.durable.fetch_max(covered, Ordering::SeqCst);
        Ok(())
    }
}

impl FakeLog {
    /// The last sequence number a crash now would keep.
    fn durable_seq(&self) -> SeqNo {
        let d = self.durable.load(Ordering::SeqCst);
        let r = self.records.lock();
        r[..d]
            .last()
            .map_or(0, |r| r.first_seq + r.keys.len() as u64 - 1)
    }
}

/// A memtable that records what was applied: sequence number → (key, last sequence number
/// of its batch).
#[derive(Default)]
struct FakeEnv {
    applied: Mutex<BTreeMap<SeqNo, (Vec<u8>, SeqNo)>>,
    error: Mutex<Option<Error>>,
    has_error: AtomicBool,
    before_writes: AtomicU64,
    make_rooms: AtomicU64,
}

impl CommitEnv for FakeEnv {
    fn check_error(&self) -> Result<()> {
        if self.has_error.load(Ordering::Acquire) {
            let e = self.error.lock();
            return Err(Error::Poisoned(e.as_ref().unwrap().to_string()));
        }
        Ok(())
    }

    fn set_error(&self, e: &Error) {
        self.error.lock().get_or_insert_with(|| e.clone());
        self.has_error.store(true, Ordering::Release);
    }

    fn before_write(&self) -> bool {
        // Every 64th write finds the memtable full.
        self.before_writes.fetch_add(1, Ordering::Relaxed) % 64 == 63
    }

    fn make_room(&self) -> Result<()> {
        // An exclusive turn: nothing reserved is unpublished.
        let applied = self.applied.lock();
        assert_eq!(
            applied.keys().next_back().copied().unwrap_or(0),
            applied.len() as u64,
            "no batch is in flight while room is made"
        );
        self.make_rooms.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn apply(&self, batch: &WriteBatch, _: &[Option<ValuePointer>], _: bool) -> Result<()> {
        let last = batch.seq() + u64::from(batch.count()) - 1;
        let mut m = self.applied.lock();
        for (i, k) in keys_of(batch).into_iter().enumerate() {
            assert!(m.insert(batch.seq() + i as u64, (k, last)).is_none());
        }
        Ok(())
    }

    fn committed(&self, _: usize, _: bool, _: &Appended) {}
}

fn batch_of(keys: &[Vec<u8>]) -> WriteBatch {
    let mut b = WriteBatch::new();
    for k in keys {
        b.put(k, b"v");
    }
    b
}

fn key(t: usize, i: usize, j: usize) -> Vec<u8> {
    format!("{t:02}-{i:05}-{j}").into_bytes()
}

/// How the writers of a run ask for sync.
#[derive(Clone, Copy)]
enum SyncMix {
    Never,
    Always,
    /// Every third write.
    Some,
}

/// Runs `threads` writers of `per_thread` batches of 1–4 puts while a reader polls the
/// visible sequence. Returns each write's key list and result.
fn run_writers(
    pipe: &CommitPipeline<FakeLog>,
    env: &FakeEnv,
    threads: usize,
    per_thread: usize,
    mix: SyncMix,
) -> Vec<(Vec<Vec<u8>>, bool, Result<()>)> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut seen = pipe.visible_seq();
            let mut polls = 0u64;
            loop {
                let stopping = stop.load(Ordering::Acquire);
                let v = pipe.visible_seq();
                assert!(v >= seen, "the visible sequence never goes back");
                if v > seen {
                    let m = env.applied.lock();
                    for s in seen + 1..=v {
                        let Some((_, last)) = m.get(&s) else {
                            // Only the group of a failed sync is skipped, after the error
                            // was made sticky.
                            assert!(
                                env.has_error.load(Ordering::Acquire),
                                "sequence {s} visible (at {v}) but not applied"
                            );
                            continue;
                        };
                        assert!(*last <= v, "batch ending at {last} partly visible at {v}");
                    }
                    seen = v;
                }
                polls += 1;
                if stopping {
                    return polls;
                }
            }
        });
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    for i in 0..per_thread {
                        let keys: Vec<_> = (0..1 + (i * 7 + t) % 4).map(|j| key(t, i, j)).collect();
                        let sync = match mix {
                            SyncMix::Never => false,
                            SyncMix::Always => true,
                            SyncMix::Some => (i + t) % 3 == 0,
                        };
                        let r = pipe.commit(env, Some(batch_of(&keys)), sync, false);
                        if r.is_ok() {
                            // Read your own write: visible once acknowledged.
                            let v = pipe.visible_seq();
                            let m = env.applied.lock();
                            let seq = m.iter().find(|(_, (k, _))| *k == keys[0]).map(|(s, _)| *s);
                            let seq = seq.expect("an acknowledged write is applied");
                            assert!(seq <= v, "an acknowledged write is visible");
                            drop(m);
                            if sync {
                                assert!(
                                    seq <= pipe.log().durable_seq(),
                                    "an acknowledged synced write is durable"
                                );
                            }
                        }
                        out.push((keys, sync, r));
                    }
                    out
                })
            })
            .collect();
        let out: Vec<_> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        stop.store(true, Ordering::Release);
        assert!(reader.join().unwrap() > 0);
        out
    })
}

fn check_all_committed(pipe: &CommitPipeline<FakeLog>, env: &FakeEnv, n: usize) {
    let m = env.applied.lock();
    assert_eq!(m.len(), n);
    assert_eq!(pipe.visible_seq(), n as u64);
    assert_eq!(
        m.keys().copied().collect::<Vec<_>>(),
        (1..=n as u64).collect::<Vec<_>>()
    );
    let logged: usize = pipe.log().records.lock().iter().map(|r| r.keys.len()).sum();
    assert_eq!(logged, n, "every applied write was logged");
}

#[test]
fn unsynced_writers_publish_in_order_without_gaps() {
    for grouped in [false, true] {
        let (pipe, env) = (
            CommitPipeline::new(FakeLog::grouped(grouped), 0),
            FakeEnv::default(),
        );
        let out = run_writers(&pipe, &env, 8, 400, SyncMix::Never);
        assert!(out.iter().all(|(_, _, r)| r.is_ok()));
        let n = out.iter().map(|(k, _, _)| k.len()).sum();
        check_all_committed(&pipe, &env, n);
    }
}

/// Unsynced writers that find an append running share the next one: fewer records than
/// writes, each record's batches consecutive (checked by the log), every write applied and
/// visible once acknowledged (checked by `run_writers`). Appending alone, every write is a
/// record of its own.
#[test]
fn grouped_unsynced_writers_share_appends() {
    for grouped in [false, true] {
        let log = FakeLog {
            append_micros: 300,
            ..FakeLog::grouped(grouped)
        };
        let (pipe, env) = (CommitPipeline::new(log, 0), FakeEnv::default());
        let out = run_writers(&pipe, &env, 6, 60, SyncMix::Never);
        assert!(out.iter().all(|(_, _, r)| r.is_ok()));
        let n = out.iter().map(|(k, _, _)| k.len()).sum();
        check_all_committed(&pipe, &env, n);
        let records = pipe.log().records.lock().len();
        if grouped {
            assert!(
                records < out.len() / 2,
                "{records} records for {} writes: writers did not share appends",
                out.len()
            );
        } else {
            assert_eq!(records, out.len(), "one record per unsynced write");
        }
    }
}

#[test]
fn mixed_synced_and_unsynced_writers_lose_no_synced_write() {
    for grouped in [false, true] {
        let (pipe, env) = (
            CommitPipeline::new(FakeLog::grouped(grouped), 0),
            FakeEnv::default(),
        );
        let out = run_writers(&pipe, &env, 8, 300, SyncMix::Some);
        assert!(out.iter().all(|(_, _, r)| r.is_ok()));
        let n = out.iter().map(|(k, _, _)| k.len()).sum();
        check_all_committed(&pipe, &env, n);
        assert!(pipe.log().syncs.load(Ordering::SeqCst) > 0);
    }
}

#[test]
fn synced_writers_share_syncs() {
    let (pipe, env) = (
        CommitPipeline::new(FakeLog::default(), 0),
        FakeEnv::default(),
    );
    let out = run_writers(&pipe, &env, 8, 200, SyncMix::Always);
    assert!(out.iter().all(|(_, _, r)| r.is_ok()));
    let n = out.iter().map(|(k, _, _)| k.len()).sum();
    check_all_committed(&pipe, &env, n);
    assert_eq!(pipe.log().durable_seq(), n as u64);
}

/// After a failed append or sync: the writers of exactly one group get the log's error (the
/// group whose record failed to append, or one record of synced writers whose sync failed),
/// every later write gets the sticky error, every acknowledged write is applied and visible,
/// and nothing refused is applied.
fn check_failure(fail_append: usize, fail_sync: usize, mix: SyncMix, grouped: bool) {
    let log = FakeLog::grouped(grouped);
    log.fail_append.store(fail_append, Ordering::SeqCst);
    log.fail_sync.store(fail_sync, Ordering::SeqCst);
    let (pipe, env) = (CommitPipeline::new(log, 0), FakeEnv::default());
    let out = run_writers(&pipe, &env, 6, 150, mix);
    let applied: BTreeMap<Vec<u8>, SeqNo> = env
        .applied
        .lock()
        .iter()
        .map(|(s, (k, _))| (k.clone(), *s))
        .collect();
    let mut failed_keys: Vec<Vec<u8>> = Vec::new();
    for (keys, sync, r) in &out {
        match r {
            Ok(()) => assert!(keys.iter().all(|k| applied.contains_key(k))),
            Err(Error::Io { .. }) => {
                assert!(
                    fail_append > 0 || *sync,
                    "a failed sync fails only synced writers"
                );
                assert!(keys.iter().all(|k| !applied.contains_key(k)));
                failed_keys.extend(keys.iter().cloned());
            }
            Err(Error::Poisoned(_)) => assert!(keys.iter().all(|k| !applied.contains_key(k))),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    failed_keys.sort();
    assert!(!failed_keys.is_empty(), "the failure was injected");
    let mut group = if fail_append > 0 {
        pipe.log().failed.lock().clone()
    } else {
        let records = pipe.log().records.lock();
        let r = records.iter().find(|r| r.keys.contains(&failed_keys[0]));
        r.expect("the failed group was logged").keys.clone()
    };
    group.sort();
    assert_eq!(
        failed_keys, group,
        "exactly the writers of the failed group see the log's error"
    );
    assert!(env.check_error().is_err(), "the error is sticky");
    assert!(matches!(
        pipe.commit(&env, Some(batch_of(&[b"late".to_vec()])), false, false),
        Err(Error::Poisoned(_))
    ));
    let v = pipe.visible_seq();
    assert!(
        applied.values().all(|s| *s <= v),
        "every applied write is visible"
    );
}

#[test]
fn a_failed_append_fails_its_group_and_is_sticky() {
    for grouped in [false, true] {
        check_failure(200, 0, SyncMix::Some, grouped);
        check_failure(137, 0, SyncMix::Never, grouped);
    }
}

#[test]
fn a_failed_sync_fails_its_group_and_is_sticky() {
    for grouped in [false, true] {
        check_failure(0, 40, SyncMix::Some, grouped);
        check_failure(0, 25, SyncMix::Always, grouped);
    }
}

#[test]
fn exclusive_turns_see_no_write_in_flight() {
    for grouped in [false, true] {
        exclusive_turns_see_no_write_in_flight_with(grouped);
    }
}

fn exclusive_turns_see_no_write_in_flight_with(grouped: bool) {
    let (pipe, env) = (
        CommitPipeline::new(FakeLog::grouped(grouped), 0),
        FakeEnv::default(),
    );
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let excl = s.spawn(|| {
            let mut turns = 0;
            while !stop.load(Ordering::Acquire) {
                let b = batch_of(&[format!("x-{turns}").into_bytes()]);
                pipe.exclusive(&env, || {
                    // Everything logged is applied and visible: nothing is in flight.
                    let logged: usize =
                        pipe.log().records.lock().iter().map(|r| r.keys.len()).sum();
                    assert_eq!(pipe.visible_seq(), logged as u64);
                    assert_eq!(env.applied.lock().len(), logged);
                    Ok(((), Some(b)))
                })
                .unwrap();
                turns += 1;
            }
            turns
        });
        let out = run_writers(&pipe, &env, 4, 300, SyncMix::Some);
        stop.store(true, Ordering::Release);
        let turns = excl.join().unwrap();
        assert!(out.iter().all(|(_, _, r)| r.is_ok()));
        let n: usize = out.iter().map(|(k, _, _)| k.len()).sum();
        check_all_committed(&pipe, &env, n + turns);
    });
}

#[test]
fn a_reserved_sequence_number_is_published_at_once_and_never_logged() {
    let (pipe, env) = (
        CommitPipeline::new(FakeLog::default(), 0),
        FakeEnv::default(),
    );
    pipe.commit(
        &env,
        Some(batch_of(&[b"a".to_vec(), b"b".to_vec()])),
        false,
        false,
    )
    .unwrap();
    let appends = pipe.log().appends.load(Ordering::SeqCst);
    let seq = pipe.reserve_seq(&env).unwrap();
    // The next number after every committed write, visible at once, nothing appended.
    assert_eq!(seq, 3);
    assert_eq!(pipe.visible_seq(), 3);
    assert_eq!(pipe.log().appends.load(Ordering::SeqCst), appends);
    assert_eq!(env.applied.lock().len(), 2);
    // The next write comes after it (not logged here: the fake log asserts no gaps).
    pipe.commit(&env, Some(batch_of(&[b"c".to_vec()])), false, true)
        .unwrap();
    assert_eq!(env.applied.lock().keys().next_back().copied(), Some(4));
    assert_eq!(pipe.visible_seq(), 4);
    // A sticky error refuses the reservation as it refuses writes.
    env.set_error(&injected());
    assert!(pipe.reserve_seq(&env).is_err());
}
