//! Strata as a replica of a Redis master (Redis's `replication.c`, the replica side):
//! REPLICAOF starts a link thread that connects, handshakes, receives the RDB, loads it and
//! applies the master's command stream (`docs/design.md` §13.23).
//!
//! - `handshake.rs`: the master's PSYNC answer and payload header, parsed without I/O;
//! - `stream.rs`: the command stream's requests and the stream bytes each covers;
//! - `load.rs`: an RDB file checked whole, then loaded into a new generation of the
//!   keyspace (switched in by `link.rs`);
//! - `ship.rs`: a Strata master's snapshot stream, loaded the same way while it arrives
//!   (`spool.rs`: the file between its receiver and its loader);
//! - `link.rs`: the thread that talks to the master (`reply.rs`: its replies read back);
//! - `garbage.rs`: the old generations of the keyspace, deleted in the background.
//!
//! The stream position is persisted with the effects it covers (`position.rs`, a store
//! layer module); [`Replication::restore`] reads it back at start.
//!
//! **Protocol between threads.** [`Replication`] is shared by every connection and the link
//! thread. REPLICAOF and REPLICAOF NO ONE bump `epoch` under the state lock; a link thread
//! remembers the epoch it was started for and stops at its next step once the epoch moved
//! (it never writes the state or the store after that: every state change it makes checks
//! the epoch under the lock, and the store is written only while the epoch is checked before
//! each batch). The dispatcher reads three atomics on every command (`replica`, `loading`,
//! `link_up`) and the state lock never.
//!
//! Layer: connection and server (the link to the master is a client of the dispatcher, as
//! a connection is).

mod batch;
mod garbage;
pub mod handshake;
mod link;
mod load;
mod reply;
mod ship;
mod spool;
pub mod stream;

use crate::server::Shared;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The tuning directives (`tuning.rs`) the replica side reads; the other replication
/// directives are the master side's (`repl/`).
pub const DIRECTIVES: &[&str] = &[
    "masterauth",
    "masteruser",
    "repl-timeout",
    "replica-announce-ip",
    "replica-announce-port",
    "replica-announced",
    "replica-priority",
    "replica-read-only",
    "replica-serve-stale-data",
];

/// Redis's answers to what a replica refuses.
pub const ERR_READONLY: &str = "READONLY You can't write against a read only replica.";
pub const ERR_LOADING: &str = "LOADING Redis is loading the dataset in memory";
pub const ERR_MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// Where the link is (Redis's `repl_state`, as ROLE names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Waiting to connect (after a failure, before the next attempt).
    Connect,
    Connecting,
    Handshake,
    /// Receiving or loading the RDB.
    Sync,
    Connected,
}

impl LinkState {
    /// ROLE's name for it.
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// A transfer in progress (INFO's `master_sync_*`).
#[derive(Clone, Debug)]
pub struct SyncProgress {
    /// Payload size; `None` for a diskless transfer (size unknown until the mark).
    pub total: Option<u64>,
    pub read: u64,
    pub last_io: Instant,
    /// Bytes of the payload the load has read, for a load that runs while the payload
    /// arrives (the snapshot stream, `spool.rs`); `None` before such a load.
    pub loaded: Option<u64>,
}

/// The replication state behind the lock.
#[derive(Debug)]
pub struct State {
    /// The master's address while this server is a replica.
    pub master: Option<(String, u16)>,
    pub link: LinkState,
    /// The replication id this server's data follows, and the one before it.
    pub replid: String,
    pub replid2: String,
    /// The offset up to which `replid2` is valid, plus one (-1: none).
    pub second_offset: i64,
    /// Stream bytes applied (`slave_repl_offset`, `master_repl_offset`).
    pub offset: u64,
    /// Stream bytes read from the master, applied or not (`slave_read_repl_offset`).
    pub read_offset: u64,
    pub last_io: Option<Instant>,
    pub down_since: Option<Instant>,
    pub sync: Option<SyncProgress>,
    /// Why the link last went down (INFO `master_link_down_reason`, Strata's field).
    pub last_error: Option<String>,
    /// Replication stopped on an error (no retry): REPLICAOF, even of the same master,
    /// starts it again.
    pub stopped: bool,
    /// The data follows `replid` up to `offset` (a full sync completed, and replication has
    /// not stopped on an error since): the next PSYNC asks to resume.
    pub resumable: bool,
    /// The logical database the master's stream has selected (kept across sessions and
    /// restarts: a partial resync sends no SELECT).
    pub db: u8,
    /// While not following: the store's write count when the data stopped following a
    /// stream (REPLICAOF NO ONE, a start as a master); a later REPLICAOF resumes the stream
    /// only if nothing was written since (`Store::writes`).
    pub writes_mark: Option<u64>,
    /// A master became a replica (`follow`) and its log still takes its own commands: the
    /// link thread's first step switches it to the master's stream
    /// ([`Replication::switch_to_following`]). `Some(true)`: the data then continues its
    /// own stream up to the log's end.
    pub pending_switch: Option<bool>,
}

/// Replication state shared by every connection (`Shared::replication`).
pub struct Replication {
    state: Mutex<State>,
    epoch: AtomicU64,
    replica: AtomicBool,
    loading: AtomicBool,
    link_up: AtomicBool,
    /// Link threads started and not yet seen finished (joined at shutdown).
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Held by the link thread while it applies one request (or switches a loaded dataset
    /// in) and records the offset, and by REPLICAOF NO ONE: the offset a promotion persists
    /// is exactly the data's.
    applying: Mutex<()>,
    /// Physical databases a load writes or the cleaner deletes (`garbage.rs`).
    busy: Mutex<Vec<u8>>,
}

/// A physical database claimed (busy) until dropped.
pub struct Claim<'a> {
    r: &'a Replication,
    dbs: Vec<u8>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.r.busy.lock().retain(|p| !self.dbs.contains(p));
    }
}

/// How long shutdown waits for link threads to notice it.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// A fresh replication id: 40 hex digits. Drawn from the OS-seeded generator, not the
/// server's own (`random.rs`, seeded from the clock): ids must differ between processes
/// started at the same moment, as Redis's from `/dev/urandom` do.
pub fn new_replid() -> String {
    let mut out = String::with_capacity(handshake::ID_LEN);
    while out.len() < handshake::ID_LEN {
        out.push_str(&format!("{:016x}", rand::random::<u64>()));
    }
    out.truncate(handshake::ID_LEN);
    out
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            state: Mutex::new(State {
                master: None,
                link: LinkState::Connect,
                replid: new_replid(),
                replid2: "0".repeat(handshake::ID_LEN),
                second_offset: -1,
                offset: 0,
                read_offset: 0,
                last_io: None,
                down_since: None,
                sync: None,
                last_error: None,
                stopped: false,
                resumable: false,
                db: 0,
                writes_mark: None,
                pending_switch: None,
            }),
            epoch: AtomicU64::new(0),
            replica: AtomicBool::new(false),
            loading: AtomicBool::new(false),
            link_up: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            applying: Mutex::new(()),
            busy: Mutex::new(Vec::new()),
        }
    }
}

/// What the dispatcher asks of a command about to run.
pub struct Check {
    pub writes: bool,
    /// The command is flagged `stale` (served while the link is down).
    pub stale_ok: bool,
    /// The command is flagged `no_async_loading` (refused while an RDB loads beside the
    /// served dataset, as Redis refuses it during its swapdb load).
    pub async_loading_denied: bool,
    /// The client is the master's link (Redis's `CLIENT_MASTER`).
    pub from_master: bool,
}

impl Replication {
    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Acquire)
    }

    /// How long ago the link last heard from the master while it is up, or how long it
    /// has been down (Redis's `data_age` in `clusterHandleSlaveFailover`, which a replica
    /// weighs before it runs for election); `None` if it never came up.
    pub fn data_age(&self) -> Option<std::time::Duration> {
        let st = self.state.lock();
        let since = if st.link == LinkState::Connected {
            st.last_io
        } else {
            st.down_since
        };
        since.map(|t| t.elapsed())
    }

    /// Claims physical database `p` (`None`: busy already).
    pub fn claim(&self, p: u8) -> Option<Claim<'_>> {
        let mut busy = self.busy.lock();
        if busy.contains(&p) {
            return None;
        }
        busy.push(p);
        Some(Claim {
            r: self,
            dbs: vec![p],
        })
    }

    /// Claims spare physical databases for a new generation of `databases` logical ones
    /// (`dbmap::spare`).
    pub fn claim_spare(
        &self,
        map: &crate::dbmap::DbMap,
        databases: usize,
    ) -> Result<Claim<'_>, String> {
        let mut busy = self.busy.lock();
        let dbs = crate::dbmap::spare(map, databases, &busy)?;
        busy.extend_from_slice(&dbs);
        Ok(Claim { r: self, dbs })
    }

    /// At start: the position persisted with the data (`position.rs`) becomes the
    /// replication state, so that INFO shows it and REPLICAOF (or `replicaof` in the
    /// configuration) resumes the stream with a partial resync; the old generations of the
    /// keyspace are deleted in the background, and a killed sync's spool files at once.
    pub fn restore(&self, shared: &Arc<Shared>) -> Result<(), String> {
        garbage::clean_unmapped(shared);
        let dir = shared.config.read().dir.clone();
        let stale = spool::remove_stale(&dir);
        if stale > 0 {
            eprintln!(
                "strata-server: replication: removed {stale} spool file(s) of a full sync \
                 that a stopped process left"
            );
        }
        self.restore_position(shared)?;
        self.restore_history(shared);
        Ok(())
    }

    /// At start: a master's history (`repl/history.rs`), if its file says the data is its
    /// log's stream and the log ends there: the ids, the offset and the log stay, so its
    /// replicas resume. Anything else starts a new history (the replicas full-sync).
    fn restore_history(&self, shared: &Arc<Shared>) {
        let dir = shared.config.read().dir.join(crate::repl::LOG_DIR);
        let h = match crate::repl::history::read(&dir) {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(e) => {
                eprintln!("strata-server: replication: {e}; a new history starts");
                return;
            }
        };
        let master = &shared.master;
        match master.reopen_log(shared, h.offset) {
            Ok(Some(_)) => {}
            Ok(None) => {
                eprintln!(
                    "strata-server: replication: the log does not end at offset {} (the \
                     history file's); a new history starts",
                    h.offset
                );
                let _ = crate::repl::history::remove(&dir);
                return;
            }
            Err(e) => {
                eprintln!(
                    "strata-server: replication: reopening the log: {e}; a new history starts"
                );
                let _ = crate::repl::history::remove(&dir);
                return;
            }
        }
        // The file stays until the first write removes it.
        if let Err(e) = master.seq.quiet.mark(&dir, &h, false) {
            eprintln!("strata-server: replication: {e}");
        }
        let mut st = self.state.lock();
        st.replid = h.replid;
        st.replid2 = h.replid2;
        st.second_offset = h.second_offset;
        st.offset = h.offset;
        st.read_offset = h.offset;
        st.resumable = false;
        st.writes_mark = None;
        eprintln!(
            "strata-server: replication: keeping replication id {} at offset {}",
            st.replid, st.offset
        );
    }

    /// At start: a replica's position persisted with its data (`position.rs`).
    fn restore_position(&self, shared: &Arc<Shared>) -> Result<(), String> {
        let Some(p) = crate::position::resume(shared.store.db())? else {
            return Ok(());
        };
        let mut st = self.state.lock();
        st.offset = p.offset;
        st.read_offset = p.offset;
        st.db = p.db;
        match p.kind {
            crate::position::Kind::Following => {
                st.replid = p.replid;
                st.resumable = true;
                st.writes_mark = Some(shared.store.writes());
            }
            crate::position::Kind::Promoted => {
                // Whether the promoted data took writes before this start is unknown: a
                // REPLICAOF full-syncs.
                st.replid2 = p.replid;
                st.second_offset = p.offset as i64 + 1;
            }
        }
        eprintln!(
            "strata-server: replication: the data follows {} up to offset {}",
            if p.kind == crate::position::Kind::Following {
                &st.replid
            } else {
                &st.replid2
            },
            st.offset
        );
        Ok(())
    }

    /// A full sync's RDB is being loaded while the old dataset serves (INFO persistence's
    /// `async_loading`, as Redis 7 names its `repl-diskless-load swapdb` load).
    pub fn is_loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    /// The error a command gets instead of running, in Redis's `processCommand` order
    /// (NOREPLICAS on a master, READONLY, MASTERDOWN, LOADING); `None`: it runs.
    pub fn refusal(&self, shared: &Shared, c: &Check) -> Option<&'static str> {
        if c.from_master {
            return None;
        }
        if c.writes && !self.is_replica() {
            if let Some(e) = shared.master.quorum_refusal() {
                return Some(e);
            }
        }
        if self.is_replica() {
            let yes = |name: &str| shared.config.read().get(name).as_deref() != Some("no");
            if c.writes && yes("replica-read-only") {
                return Some(ERR_READONLY);
            }
            if !self.link_up.load(Ordering::Acquire)
                && !c.stale_ok
                && !yes("replica-serve-stale-data")
            {
                return Some(ERR_MASTERDOWN);
            }
        }
        // Only what Redis refuses during its swapdb load gets -LOADING: a full sync loads
        // into a new generation of the keyspace while the old one serves, and the switch
        // holds every stripe (commands wait) (§13.25).
        if c.async_loading_denied && self.is_loading() {
            return Some(ERR_LOADING);
        }
        None
    }

    /// REPLICAOF host port: follows that master from now on (a new link thread; the old
    /// one stops). Returns false if it already follows it (Redis's "Already connected to
    /// specified master").
    pub fn follow(&self, shared: &Arc<Shared>, host: String, port: u16) -> bool {
        let epoch = {
            let mut st = self.state.lock();
            if self.is_replica() && !st.stopped && st.master.as_ref() == Some(&(host.clone(), port))
            {
                return false;
            }
            if st.stopped {
                // The stream stopped on a command that did not apply: start over.
                st.resumable = false;
            }
            st.stopped = false;
            let was_master = !self.is_replica();
            if was_master {
                // The data resumes the stream it followed only if nothing wrote to it since.
                let clean = st.writes_mark == Some(shared.store.writes());
                // FAILOVER hands over to its own replica, which follows the current id.
                let handing_over = shared.master.failover.handing_over();
                if clean && !st.resumable && st.second_offset > 0 && !handing_over {
                    // Promoted by REPLICAOF NO ONE and no write since: the old id is the
                    // stream's (a return to the old master continues it).
                    st.replid = std::mem::replace(&mut st.replid2, "0".repeat(handshake::ID_LEN));
                    st.second_offset = -1;
                    st.resumable = true;
                    st.pending_switch = Some(false);
                } else if shared.master.log().is_some() {
                    // A master with a log: every write since the log began is in it, so
                    // its data is its own stream up to the log's end (Redis's
                    // `replicationCacheMasterUsingMyself`), the offset the link thread's
                    // switch takes; the new master continues it if it knows the id (it
                    // was this server's replica).
                    st.resumable = true;
                    st.pending_switch = Some(true);
                } else {
                    st.resumable &= clean;
                    st.pending_switch = Some(false);
                }
                st.writes_mark = None;
            }
            st.master = Some((host, port));
            st.link = LinkState::Connect;
            st.sync = None;
            st.last_error = None;
            // Redis shows -1 until a link to this master has gone down.
            st.down_since = None;
            if was_master {
                // As Redis caches its own master state: a promoted server that follows
                // again asks from where its data is.
                st.read_offset = st.offset;
            }
            self.link_up.store(false, Ordering::Release);
            self.replica.store(true, Ordering::Release);
            shared.store.set_keep_expired(true);
            self.epoch.fetch_add(1, Ordering::AcqRel) + 1
        };
        let shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("strata-replica".to_string())
            .spawn(move || link::run(shared, epoch));
        match spawned {
            Ok(t) => {
                let mut threads = self.threads.lock();
                threads.retain(|t| !t.is_finished());
                threads.push(t);
            }
            Err(e) => self.state.lock().last_error = Some(format!("starting the link thread: {e}")),
        }
        true
    }

    /// At shutdown: the link threads stop (they check the epoch at least every 200 ms and
    /// between load batches); waits up to [`SHUTDOWN_WAIT`] for them, so that the database
    /// closes with no writer left.
    pub fn shutdown(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let threads = std::mem::take(&mut *self.threads.lock());
        let until = Instant::now() + SHUTDOWN_WAIT;
        while threads.iter().any(|t| !t.is_finished()) && Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for t in threads.into_iter().filter(|t| t.is_finished()) {
            let _ = t.join();
        }
    }

    /// The link thread's first step (`epoch` its own): a master that became a replica
    /// stops appending its commands to its log, under the sequencer's cut (no command
    /// between its write and its append), so the log's end is exactly its data's offset,
    /// which the data then continues if `follow` said so. Not in `follow`, since REPLICAOF
    /// may run inside EXEC, which holds a sequencer guard the cut waits for. False: the
    /// epoch is over.
    pub(crate) fn switch_to_following(&self, shared: &Shared, epoch: u64) -> bool {
        let dir = shared.config.read().dir.clone();
        shared.master.seq.cut(|| {
            self.if_current(epoch, |st| {
                let Some(own) = st.pending_switch.take() else {
                    return;
                };
                shared.master.set_following(&dir, true);
                if own {
                    match shared.master.log() {
                        Some(log) => {
                            st.offset = log.end();
                            st.read_offset = st.offset;
                        }
                        None => st.resumable = false,
                    }
                }
            })
            .is_some()
        })
    }

    /// REPLICAOF NO ONE: stops following; the data stays and takes writes. The replication
    /// id shifts (Redis's `shiftReplicationId`): the old one stays valid up to the offset.
    /// The log (a copy of the old master's stream) is kept and continues with this
    /// server's writes; the replicas are disconnected to learn the new id, and resume
    /// (Redis's PSYNC2).
    pub fn promote(&self, shared: &Shared) {
        let store = &shared.store;
        // Waits for the request being applied: the offset below is the data's.
        let _applying = self.applying.lock();
        let mut st = self.state.lock();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        if !self.is_replica() {
            return;
        }
        store.set_keep_expired(false);
        // Commands append to the log from now on: before writes are allowed.
        shared
            .master
            .set_following(&shared.config.read().dir, false);
        self.replica.store(false, Ordering::Release);
        self.link_up.store(false, Ordering::Release);
        self.loading.store(false, Ordering::Release);
        st.master = None;
        st.link = LinkState::Connect;
        st.sync = None;
        if st.pending_switch.take().is_some() {
            // A master a moment ago, whose link thread never switched the log: its data is
            // the log's stream up to its end.
            if let Some(log) = shared.master.log() {
                st.offset = log.end();
            }
        }
        if st.resumable {
            let pos = crate::position::Position {
                kind: crate::position::Kind::Promoted,
                replid: st.replid.clone(),
                offset: st.offset,
                db: st.db,
            };
            let mut b = strata::WriteBatch::new();
            crate::position::put_all(store.db(), &mut b, &pos);
            if let Err(e) = store.write_server_records(b) {
                eprintln!("strata-server: replication: storing the position failed: {e}");
            }
        }
        st.writes_mark = Some(store.writes());
        st.resumable = false;
        st.replid2 = std::mem::replace(&mut st.replid, new_replid());
        st.second_offset = st.offset as i64 + 1;
        let master = &shared.master;
        if master.log().is_some_and(|l| l.end() != st.offset) {
            // Not a copy of the stream up to the data's offset (never expected: the link
            // appends each request with its offset): the history restarts there.
            if let Err(e) = master.replace_log(shared, st.offset) {
                eprintln!("strata-server: replication log: {e}");
            }
        }
        master.disconnect_replicas(&shared.clients);
    }

    /// Whether PSYNC is served: a master always; a replica once its link is up (Redis
    /// answers `-NOMASTERLINK` before).
    pub fn serves_replicas(&self) -> bool {
        !self.is_replica() || self.link_up.load(Ordering::Acquire)
    }

    /// Runs `f` between two requests of the master's stream (a full sync's cut on a
    /// replica: its data and its log are at the same offset).
    pub fn at_boundary<R>(&self, f: impl FnOnce() -> R) -> R {
        let _applying = self.applying.lock();
        f()
    }

    /// The logical database the master's stream has selected (a replica's full sync to
    /// its own replicas writes it as `repl-stream-db`).
    pub fn stream_db(&self) -> u8 {
        self.state.lock().db
    }

    /// Runs `f` on the state if `epoch` is still current (a link thread's every change).
    fn if_current<T>(&self, epoch: u64, f: impl FnOnce(&mut State) -> T) -> Option<T> {
        let mut st = self.state.lock();
        (self.epoch.load(Ordering::Acquire) == epoch).then(|| f(&mut st))
    }

    fn is_current(&self, epoch: u64) -> bool {
        self.epoch.load(Ordering::Acquire) == epoch
    }

    /// `(replid, replid2, second_offset, offset)` now (the master side's PSYNC decision;
    /// `offset` is the replica side's applied offset, or the promoted one).
    pub fn ids(&self) -> (String, String, i64, u64) {
        let st = self.state.lock();
        (
            st.replid.clone(),
            st.replid2.clone(),
            st.second_offset,
            st.offset,
        )
    }

    /// ROLE's reply items: `("slave", host, port, state, offset)` or `("master", offset)`.
    pub fn role(&self) -> Role {
        let st = self.state.lock();
        match (&st.master, self.is_replica()) {
            (Some((host, port)), true) => Role::Replica {
                host: host.clone(),
                port: *port,
                state: st.link.name(),
                offset: if st.link == LinkState::Connected {
                    st.offset as i64
                } else {
                    -1
                },
            },
            _ => Role::Master { offset: st.offset },
        }
    }

    /// INFO replication's fields, in Redis 7.0.15's order.
    pub fn info_fields(&self, shared: &Shared) -> Vec<(&'static str, String)> {
        let st = self.state.lock();
        let cfg = shared.config.read();
        let get = |n: &str| cfg.get(n).unwrap_or_default();
        let mut f: Vec<(&'static str, String)> = Vec::new();
        let secs_since = |t: Option<Instant>| t.map_or(-1, |t| t.elapsed().as_secs() as i64);
        match (&st.master, self.is_replica()) {
            (Some((host, port)), true) => {
                let up = st.link == LinkState::Connected;
                f.push(("role", "slave".into()));
                f.push(("master_host", host.clone()));
                f.push(("master_port", port.to_string()));
                f.push(("master_link_status", if up { "up" } else { "down" }.into()));
                let io = if up { secs_since(st.last_io) } else { -1 };
                f.push(("master_last_io_seconds_ago", io.to_string()));
                f.push((
                    "master_sync_in_progress",
                    u8::from(st.link == LinkState::Sync).to_string(),
                ));
                f.push(("slave_read_repl_offset", st.read_offset.to_string()));
                f.push(("slave_repl_offset", st.offset.to_string()));
                if let (LinkState::Sync, Some(s)) = (st.link, &st.sync) {
                    let total = s.total.map_or(-1, |t| t as i64);
                    f.push(("master_sync_total_bytes", total.to_string()));
                    f.push(("master_sync_read_bytes", s.read.to_string()));
                    if let Some(loaded) = s.loaded {
                        // Strata's own: how far the load that runs behind the transfer
                        // has come.
                        f.push(("master_sync_loaded_bytes", loaded.to_string()));
                    }
                    let left = s.total.map_or(-1, |t| t.saturating_sub(s.read) as i64);
                    f.push(("master_sync_left_bytes", left.to_string()));
                    let perc = s
                        .total
                        .filter(|&t| t > 0)
                        .map_or(0.0, |t| s.read as f64 * 100.0 / t as f64);
                    f.push(("master_sync_perc", format!("{perc:.2}")));
                    f.push((
                        "master_sync_last_io_seconds_ago",
                        s.last_io.elapsed().as_secs().to_string(),
                    ));
                }
                if !up {
                    f.push((
                        "master_link_down_since_seconds",
                        secs_since(st.down_since).to_string(),
                    ));
                    if let Some(e) = &st.last_error {
                        // Strata's own field: why the link is down (a refused command
                        // stops replication; the reason is here and in the log).
                        f.push(("master_link_down_reason", e.replace(['\r', '\n'], " ")));
                    }
                }
                f.push(("slave_priority", get("replica-priority")));
                let ro = get("replica-read-only") == "yes";
                f.push(("slave_read_only", u8::from(ro).to_string()));
                let announced = get("replica-announced") == "yes";
                f.push(("replica_announced", u8::from(announced).to_string()));
            }
            _ => f.push(("role", "master".into())),
        }
        // The master side's fields (`repl/`): replicas, ids, offset, the log.
        let ids = (&st.replid[..], &st.replid2[..], st.second_offset, st.offset);
        shared
            .master
            .info_fields(&mut f, ids, get("repl-backlog-size"));
        f
    }
}

/// What ROLE shows.
pub enum Role {
    Master {
        offset: u64,
    },
    Replica {
        host: String,
        port: u16,
        state: &'static str,
        offset: i64,
    },
}
