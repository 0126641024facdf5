//! A full sync's RDB, from the spooled file into a new generation of the keyspace:
//! physical databases that no logical database maps to (`dbmap.rs`), which nothing reads or
//! writes until the link switches every logical database to them in one write (`link.rs`,
//! design §13.25). Clients read the old dataset meanwhile.
//!
//! One pass over the file, and no write through the engines' write path: since the
//! generation is private until the switch, its records are written as tables and added to
//! each shard's tree in one edit (the engine's ingestion, `strata_engine::Ingest`). The
//! link's thread decodes the file and encodes each key's records (`cmd::dump::put_value`,
//! as RESTORE does) into one buffer per shard (the shard the front routes each record to);
//! a full buffer goes, as a run, to a writer thread that sorts it and writes it as tables,
//! so decoding and table writing share the work. There is a writer per shard, up to the
//! cores' count (shard `s` is written by writer `s % writers`): each shard's tables are its
//! own, so the writers share nothing, and a load is not bound by one core's table writing. When the whole file has
//! been read and its checksum verified, each shard installs its runs. A file that ends
//! short, fails its checksum, names a database this server lacks or holds a value the codec
//! refuses stops the load before anything is installed: its tables are removed and the old
//! dataset stays. The installed tables are durable before the switch's synced write; a
//! crash between the two leaves them in databases nothing maps to, which the cleaner
//! empties (`garbage.rs`).
//! Bypassing the write path also bypasses the shards' hot tiers (`strata::hot`), which is
//! safe: they hold only values read, the deletes that empty the targets first go through
//! them, and nothing reads the targets until the switch.
//!
//! Memory: each shard's buffer is written once it holds [`LOAD_BUFFER_BYTES`] divided
//! among the shards (at least [`MIN_RUN_BYTES`]), its index entries counted; at most one
//! more run waits for each writer and one is being written by each.

use crate::cmd::dump::{put_value, Limits};
use crate::cmd::Ctx;
use crate::rdb::file::{FileReader, Item};
use crate::store::Writes;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::mpsc;

/// Items read between two calls of the caller's `tick`.
pub(super) const TICK_ITEMS: u64 = 1024;
/// Why a load ended early: `tick` said stop.
pub const STOPPED: &str = "replication was reconfigured during the load";
/// Bytes of records (keys, values and their index entries) buffered over all shards before
/// a shard's buffer is written as a run. Larger buffers make fewer, larger runs (fewer
/// levels of the shard's tree take one, less compaction after the load) at the cost of
/// memory during the load: this much being filled, plus a run waiting and a run being
/// written.
pub(super) const LOAD_BUFFER_BYTES: usize = 256 << 20;
/// The reader's error when a writer thread has stopped (the writer's own is reported).
pub(super) const WRITER_STOPPED: &str = "the table writer stopped";
/// The least a run holds (many shards would otherwise make tiny runs).
pub(super) const MIN_RUN_BYTES: usize = 8 << 20;

/// What a file held.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub keys: u64,
    pub functions: u64,
    /// Records written (a string is one, a collection one plus one per member).
    pub records: u64,
    /// The aux field `repl-stream-db`: the database the master's stream has selected.
    pub stream_db: Option<u8>,
}

/// Why a load failed: the file (the master's RDB is unusable here) or the writing.
#[derive(Debug, PartialEq, Eq)]
pub enum LoadError {
    /// A file that cannot be read, is damaged or holds what this server cannot load.
    File(String),
    /// Writing the loaded data failed.
    Write(String),
    /// `tick` said stop.
    Stopped,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::File(e) => write!(f, "the master's RDB does not load: {e}"),
            LoadError::Write(e) => write!(f, "writing the loaded data: {e}"),
            LoadError::Stopped => f.write_str(STOPPED),
        }
    }
}

fn open(path: &Path) -> Result<FileReader<BufReader<File>>, LoadError> {
    let f = File::open(path)
        .map_err(|e| LoadError::File(format!("opening {}: {e}", path.display())))?;
    FileReader::open(BufReader::with_capacity(1 << 16, f))
        .map_err(|e| LoadError::File(e.to_string()))
}

/// Loads the file into `targets`, physical databases that no logical database maps to
/// (`dbmap::spare`), one per logical database; a database number in the file at or above
/// `targets.len()` fails the load. `ctx` is the master link's client; `tick` is called every
/// [`TICK_ITEMS`] items (the link's keepalive) and says whether the link is still wanted.
/// The file's function libraries are compiled into a registry of their own and returned as
/// its payload. Failed or stopped, nothing was installed (the targets hold at most the
/// leftovers the cleaner removes); the old dataset is as it was.
pub fn load(
    ctx: &mut Ctx<'_>,
    path: &Path,
    targets: &[u8],
    tick: &mut dyn FnMut() -> bool,
) -> Result<(Counts, Vec<u8>), LoadError> {
    let store = ctx.tx;
    let db = store.db();
    clear_targets(store, targets)?;
    let mut r = open(path)?;
    let run_bytes = run_bytes(db);
    ingest_runs(db, tick, |writers, tick| {
        read_file(ctx, &mut r, targets, run_bytes, writers, tick)
    })
}

/// Empties the targets of what a load that stopped left (the cleaner skips databases being
/// loaded); their deletes are older than anything ingested, so the runs shadow them.
pub(super) fn clear_targets(store: &crate::store::Tx<'_>, targets: &[u8]) -> Result<(), LoadError> {
    for &t in targets {
        store
            .flush_db(t)
            .map_err(|e| LoadError::Write(e.to_string()))?;
    }
    Ok(())
}

/// Bytes one shard's buffer holds before it is written as a run.
pub(super) fn run_bytes(db: &strata::Db) -> usize {
    (LOAD_BUFFER_BYTES / db.shard_count()).max(MIN_RUN_BYTES)
}

/// The table writers' queues: shard `s`'s runs go to writer `s % writers`, through a queue
/// of one run (the memory bound). A written run's buffers come back to [`Writers::spare`],
/// so the reader fills memory that is already allocated and mapped instead of growing a
/// new buffer (copies and page faults) for every run.
pub(super) struct Writers<'a> {
    queues: Vec<mpsc::SyncSender<(usize, Run)>>,
    pool: &'a RunPool,
}

impl Writers<'_> {
    /// Hands shard `shard`'s run to its writer, waiting while the writer's queue is full.
    pub(super) fn send(&self, shard: usize, run: Run) -> Result<(), LoadError> {
        self.queues[shard % self.queues.len()]
            .send((shard, run))
            .map_err(|_| LoadError::Write(WRITER_STOPPED.into()))
    }

    /// An empty run to fill: a written one's buffers, or new ones of a run's size.
    pub(super) fn spare(&self) -> Run {
        self.pool.take()
    }
}

/// Written runs' buffers, emptied, for the reader to fill again; bounded (two per writer:
/// the runs in flight), the rest freed.
struct RunPool {
    runs: parking_lot::Mutex<Vec<Run>>,
    bound: usize,
    run_bytes: usize,
}

impl RunPool {
    fn take(&self) -> Run {
        self.runs.lock().pop().unwrap_or_else(|| Run {
            bytes: Vec::with_capacity(self.run_bytes),
            index: Vec::new(),
        })
    }

    fn give_back(&self, run: Run) {
        debug_assert!(run.is_empty(), "a run comes back written and emptied");
        let mut runs = self.runs.lock();
        if runs.len() < self.bound {
            runs.push(run);
        }
    }
}

/// Table writers for `db`: one per shard, up to the cores' count (more would only share
/// the same cores, each with its runs in memory).
fn writer_count(db: &strata::Db) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    db.shard_count().min(cores).max(1)
}

/// The two halves of a load: `read` (on this thread) sends each full shard buffer to its
/// table writer ([`Writers`]), which writes it as a run of that shard's ingestion; once
/// `read` has succeeded, every shard's ingestion is installed while `tick` keeps the link
/// alive. Whatever fails, nothing is installed.
pub(super) fn ingest_runs<T>(
    db: &strata::Db,
    tick: &mut dyn FnMut() -> bool,
    read: impl FnOnce(&Writers<'_>, &mut dyn FnMut() -> bool) -> Result<T, LoadError>,
) -> Result<T, LoadError> {
    let write_err = |e: strata_engine::Error| LoadError::Write(e.to_string());
    let n = writer_count(db);
    let started = std::time::Instant::now();
    let pool = RunPool {
        runs: parking_lot::Mutex::new(Vec::new()),
        bound: 2 * n,
        run_bytes: run_bytes(db),
    };
    std::thread::scope(|s| {
        let mut queues = Vec::with_capacity(n);
        let mut writers = Vec::with_capacity(n);
        let pool = &pool;
        for i in 0..n {
            let (send, receive) = mpsc::sync_channel::<(usize, Run)>(1);
            queues.push(send);
            let writer = std::thread::Builder::new()
                .name(format!("strata-load-w{i}"))
                .spawn_scoped(s, move || write_runs(db, receive, i, n, pool))
                .map_err(|e| LoadError::Write(format!("starting a table writer: {e}")))?;
            writers.push(writer);
        }
        let queues = Writers { queues, pool };
        let read = read(&queues, tick);
        let read_s = started.elapsed().as_secs_f64();
        drop(queues);
        // Every writer is joined (a failed one's siblings end when their queues close);
        // the first failure is the load's.
        let mut ingests = Vec::new();
        let mut failed = None;
        for w in writers {
            match w.join().unwrap_or(Err(strata_engine::Error::Closed)) {
                Ok(mine) => ingests.extend(mine),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        let written = failed.map_or(Ok(ingests), Err);
        let written_s = started.elapsed().as_secs_f64();
        // The reader's error, unless the reader stopped because the writer had failed.
        let out = match (read, written) {
            (Err(LoadError::Write(m)), Err(e)) if m == WRITER_STOPPED => return Err(write_err(e)),
            (Err(e), _) => return Err(e),
            (Ok(_), Err(e)) => return Err(write_err(e)),
            (Ok(r), Ok(ingests)) => {
                // Installing may wait for a flush and for running compactions: on a thread
                // of its own, while this one keeps the link alive. An install is not
                // stopped halfway; a stop is seen by the link before its switch.
                let install = std::thread::Builder::new()
                    .name("strata-rdb-install".into())
                    .spawn_scoped(s, move || {
                        ingests.into_iter().try_for_each(|i| i.finish().map(drop))
                    })
                    .map_err(|e| LoadError::Write(format!("starting the install: {e}")))?;
                while !install.is_finished() {
                    tick();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                install
                    .join()
                    .unwrap_or(Err(strata_engine::Error::Closed))
                    .map_err(write_err)?;
                // The load's stages, for an operator (and for finding which one bounds a
                // full sync): each figure is from the load's start.
                eprintln!(
                    "strata-server: replication: load: read at {read_s:.2} s, tables \
                     written at {written_s:.2} s, installed at {:.2} s",
                    started.elapsed().as_secs_f64()
                );
                r
            }
        };
        Ok(out)
    })
}

/// The reader's side: decodes every item, encodes each key's records into its shard's
/// buffer, sends full buffers to the writer. Returns what the file held and the function
/// libraries' payload once the file has been read to its verified end.
fn read_file(
    ctx: &mut Ctx<'_>,
    r: &mut FileReader<BufReader<File>>,
    targets: &[u8],
    run_bytes: usize,
    writers: &Writers<'_>,
    tick: &mut dyn FnMut() -> bool,
) -> Result<(Counts, Vec<u8>), LoadError> {
    let store = ctx.tx;
    let functions = crate::scripting::functions::Functions::open(None).map_err(LoadError::Write)?;
    let limits = Limits::of(ctx);
    let db = store.db();
    let mut bufs: Vec<Run> = (0..db.shard_count()).map(|_| writers.spare()).collect();
    let mut n = Counts::default();
    let mut items = 0u64;
    while let Some(item) = r.next_item().map_err(|e| LoadError::File(e.to_string()))? {
        items += 1;
        if items.is_multiple_of(TICK_ITEMS) && !tick() {
            return Err(LoadError::Stopped);
        }
        match item {
            Item::SelectDb(d) if d >= targets.len() as u64 => {
                return Err(LoadError::File(format!(
                    "the RDB selects database {d}; this server has {} (databases)",
                    targets.len()
                )));
            }
            Item::Key(e) => {
                // The file names logical databases (bounded above).
                let target = usize::try_from(e.db)
                    .ok()
                    .and_then(|l| targets.get(l).copied())
                    .ok_or_else(|| LoadError::File(format!("database {}", e.db)))?;
                let mut w = Writes::new();
                let expire_ms = e.expire_ms.unwrap_or(0);
                put_value(store, &mut w, target, &e.key, e.value, expire_ms, &limits);
                let records = store.take_loaded(w);
                n.keys += 1;
                for (k, v) in records.ops() {
                    // A new incarnation in an empty database only puts.
                    let v = v.ok_or_else(|| {
                        LoadError::Write(format!("a loaded key wrote a delete of {k:?}"))
                    })?;
                    // Each record to the shard the front routes it to (with the server's
                    // slot routing, all of a key's records share one).
                    bufs[db.shard_of(k)].push(k, v);
                    n.records += 1;
                }
                for (shard, buf) in bufs.iter_mut().enumerate() {
                    if buf.memory() >= run_bytes {
                        writers.send(shard, std::mem::replace(buf, writers.spare()))?;
                    }
                }
            }
            Item::Aux(k, v) if k.as_slice() == b"repl-stream-db" => {
                n.stream_db = std::str::from_utf8(&v).ok().and_then(|d| d.parse().ok());
            }
            Item::Function(code) => {
                functions
                    .load(code.into(), true, &|_| Ok(()))
                    .map_err(LoadError::File)?;
                n.functions += 1;
            }
            _ => {}
        }
    }
    for (shard, buf) in bufs.into_iter().enumerate() {
        if !buf.index.is_empty() {
            writers.send(shard, buf)?;
        }
    }
    Ok((n, functions.payload()))
}

/// The writer's side: one ingestion per shard, each run written as it arrives. Returns the
/// ingestions, to be installed once the reader has read the whole file.
/// Writer `i` of `n`: writes the runs of shards `i`, `i + n`, ... into their ingestions,
/// and gives each run's buffers back to `pool`.
fn write_runs<'d>(
    db: &'d strata::Db,
    runs: mpsc::Receiver<(usize, Run)>,
    i: usize,
    n: usize,
    pool: &RunPool,
) -> strata_engine::Result<Vec<strata_engine::Ingest<'d>>> {
    let mut ingests: Vec<_> = (i..db.shard_count())
        .step_by(n)
        .map(|s| db.engine(s).db().ingest())
        .collect();
    for (shard, mut run) in runs {
        debug_assert_eq!(shard % n, i, "a run sent to another shard's writer");
        run.write(&mut ingests[shard / n])?;
        pool.give_back(run);
    }
    Ok(ingests)
}

/// One shard's records waiting to be written as a run: keys and values back to back in
/// `bytes`, found through `index`.
#[derive(Default)]
pub(super) struct Run {
    bytes: Vec<u8>,
    index: Vec<Rec>,
}

/// One record of a [`Run`].
#[derive(Clone, Copy)]
struct Rec {
    /// The key's first 16 bytes, big-endian, zero-padded: most comparisons end here,
    /// without a visit to the key's bytes (a metadata record's are its database, slot, kind
    /// and the Redis key's first 12 bytes).
    prefix: u128,
    start: usize,
    key_len: u32,
    value_len: u32,
}

impl Run {
    pub(super) fn push(&mut self, key: &[u8], value: &[u8]) {
        let mut p = [0u8; 16];
        let n = key.len().min(16);
        p[..n].copy_from_slice(&key[..n]);
        self.index.push(Rec {
            prefix: u128::from_be_bytes(p),
            start: self.bytes.len(),
            // Keys and values read from an RDB are far below 4 GiB (Redis's 512 MB limit).
            key_len: key.len() as u32,
            value_len: value.len() as u32,
        });
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Bytes the run holds: its records and their index entries.
    pub(super) fn memory(&self) -> usize {
        self.bytes.len() + self.index.len() * std::mem::size_of::<Rec>()
    }

    fn key(&self, r: &Rec) -> &[u8] {
        &self.bytes[r.start..r.start + r.key_len as usize]
    }

    fn value(&self, r: &Rec) -> &[u8] {
        let at = r.start + r.key_len as usize;
        &self.bytes[at..at + r.value_len as usize]
    }

    /// The records in key order; of a key pushed twice only the later (as two writes
    /// would leave it).
    fn sorted(&mut self) -> Vec<Rec> {
        let mut index = std::mem::take(&mut self.index);
        // A snapshot stream's runs come sorted (`replica/ship.rs`): one pass says so.
        if index.is_sorted_by(|a, b| (a.prefix, self.key(a)) < (b.prefix, self.key(b))) {
            return index;
        }
        // Equal keys: the later record (larger start) first, so `dedup_by` keeps it.
        index.sort_unstable_by(|a, b| {
            a.prefix
                .cmp(&b.prefix)
                .then_with(|| self.key(a).cmp(self.key(b)))
                .then_with(|| b.start.cmp(&a.start))
        });
        index.dedup_by(|later, kept| self.key(later) == self.key(kept));
        index
    }

    /// Writes the records, sorted, as runs of `ing`, one per database (a record key's first
    /// byte): each run's key range then lies inside one database of the new generation.
    /// Writes the run into `ing` and empties it, its buffers kept for the next.
    fn write(&mut self, ing: &mut strata_engine::Ingest<'_>) -> strata_engine::Result<()> {
        let mut index = self.sorted();
        for db in index.chunk_by(|a, b| self.key(a).first() == self.key(b).first()) {
            ing.add_run(db.iter().map(|r| (self.key(r), self.value(r))))?;
        }
        index.clear();
        self.index = index;
        self.bytes.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::reply::{Proto, ReplyBuf};
    use crate::test_server::{Reply, TestServer};

    /// An expiry far in the future (2100-01-01).
    const FAR_MS: u64 = 4_102_444_800_000;

    fn run(t: &mut TestServer, args: &[&str]) {
        if let Reply::Error(e) = t.cmd(args) {
            panic!("{args:?}: {e}");
        }
    }

    /// An RDB file (Strata's dataset writer) of every type in databases 0 and 2, with an
    /// expiry and collections in both of Redis's encodings.
    fn rdb_file(dir: &Path) -> std::path::PathBuf {
        let mut a = TestServer::in_memory();
        run(&mut a, &["SET", "s", "v"]);
        run(&mut a, &["SET", "ttl", "x", "PXAT", &FAR_MS.to_string()]);
        run(&mut a, &["RPUSH", "l", "a", "b", "a"]);
        run(&mut a, &["HSET", "h", "f1", "v1", "f2", "v2"]);
        let fields: Vec<String> = (0..300).map(|i| format!("field-{i}")).collect();
        let mut args = vec!["HSET", "big"];
        for f in &fields {
            args.extend([f.as_str(), f.as_str()]);
        }
        run(&mut a, &args);
        run(&mut a, &["SADD", "set", "x", "y", "1"]);
        run(&mut a, &["ZADD", "z", "1", "a", "2.5", "b"]);
        run(&mut a, &["SELECT", "2"]);
        run(&mut a, &["SET", "s", "in two"]);
        let shared = a.shared();
        let snap = shared.store.db().snapshot().unwrap();
        let mut out = Vec::new();
        crate::rdb::dataset::write_dataset(&snap, shared, &mut out).unwrap();
        let path = dir.join("full-sync.rdb");
        std::fs::write(&path, out).unwrap();
        path
    }

    fn load_into(t: &TestServer, path: &Path, targets: &[u8]) -> Result<Counts, LoadError> {
        let shared = t.shared();
        let info = shared.register_client(String::new(), String::new(), -1, false);
        let mut conn = shared.new_conn(info);
        let tx = shared.store.front();
        let mut reply = ReplyBuf::with_capacity(Proto::Resp2, 64);
        let mut ctx = Ctx::new(shared, &tx, &mut conn, &mut reply);
        load(&mut ctx, path, targets, &mut || true).map(|(c, _)| c)
    }

    use crate::rdb::tests::sorted;

    #[test]
    fn a_file_loads_into_the_target_databases_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = rdb_file(dir.path());
        let mut b = TestServer::in_memory();
        run(&mut b, &["SET", "mine", "kept"]);
        let targets: Vec<u8> = (16..32).collect();
        let n = load_into(&b, &path, &targets).unwrap();
        assert_eq!((n.keys, n.functions), (8, 0));
        // Every key of the file, in its logical database's target, equal to the file's.
        let tx = b.shared().store.front();
        let mut r = open(&path).unwrap();
        let mut seen = 0;
        while let Some(item) = r.next_item().unwrap() {
            let Item::Key(e) = item else { continue };
            let t = targets[e.db as usize];
            let m = tx.get(t, &e.key).unwrap().expect("loaded");
            assert_eq!(m.expire_ms, e.expire_ms.unwrap_or(0), "{:?}", e.key);
            let got = crate::cmd::dump::load(&tx, t, &e.key, &m).unwrap();
            assert_eq!(sorted(got), sorted(e.value), "{:?}", e.key);
            seen += 1;
        }
        assert_eq!(seen, 8);
        // Nothing outside the targets: the served database is as it was.
        assert_eq!(b.cmd(&["DBSIZE"]), Reply::Int(1));
        assert_eq!(b.cmd(&["GET", "s"]), Reply::NilBulk);
        // Still there after a reopen (the tables are in the shards' versions).
        let b = b.reopen();
        let tx = b.shared().store.front();
        assert!(tx.get(16, b"big").unwrap().is_some());
        assert!(tx.get(18, b"s").unwrap().is_some());
    }

    #[test]
    fn a_damaged_file_installs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = rdb_file(dir.path());
        let data = std::fs::read(&path).unwrap();
        // Cut short, and a flipped bit in the checksummed body.
        let cut = dir.path().join("cut.rdb");
        std::fs::write(&cut, &data[..data.len() - 3]).unwrap();
        let mut flipped = data.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x10;
        let bad = dir.path().join("flipped.rdb");
        std::fs::write(&bad, &flipped).unwrap();
        let b = TestServer::in_memory();
        let targets: Vec<u8> = (16..32).collect();
        for p in [&cut, &bad] {
            let e = load_into(&b, p, &targets).unwrap_err();
            assert!(matches!(e, LoadError::File(_)), "{e}");
            let tx = b.shared().store.front();
            for &t in &targets {
                let (lo, hi) = crate::keys::db_range(t);
                let mut any = false;
                tx.scan_range(&lo, &hi, false, |_, _| {
                    any = true;
                    false
                })
                .unwrap();
                assert!(!any, "database {t} holds records after a failed load");
            }
        }
        // A database the server lacks.
        let e = load_into(&b, &path, &targets[..2]).unwrap_err();
        assert!(e.to_string().contains("database 2"), "{e}");
    }

    #[test]
    fn a_run_sorts_keeps_the_last_of_equal_keys_and_splits_by_database() {
        let mut r = Run::default();
        // Keys that tie on their 16-byte prefix, one shorter than it, two databases.
        for (k, v) in [
            (&b"\x02zzzzzzzzzzzzzzzz-b"[..], &b"1"[..]),
            (b"\x01aaaaaaaaaaaaaaaa-b", b"2"),
            (b"\x01aaaaaaaaaaaaaaaa-a", b"3"),
            (b"\x01a", b"4"),
            (b"\x01aaaaaaaaaaaaaaaa-b", b"5"),
            (b"\x01", b"6"),
        ] {
            r.push(k, v);
        }
        let index = r.sorted();
        let got: Vec<(&[u8], &[u8])> = index.iter().map(|x| (r.key(x), r.value(x))).collect();
        let want: Vec<(&[u8], &[u8])> = vec![
            (b"\x01", b"6"),
            (b"\x01a", b"4"),
            (b"\x01aaaaaaaaaaaaaaaa-a", b"3"),
            (b"\x01aaaaaaaaaaaaaaaa-b", b"5"),
            (b"\x02zzzzzzzzzzzzzzzz-b", b"1"),
        ];
        assert_eq!(got, want);
        let dbs: Vec<usize> = index
            .chunk_by(|a, b| r.key(a).first() == r.key(b).first())
            .map(|c| c.len())
            .collect();
        assert_eq!(dbs, [4, 1]);
    }
}
