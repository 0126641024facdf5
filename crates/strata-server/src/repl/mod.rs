//! Strata as a replication master (Redis's `replication.c`, the master side): the
//! replication log on SSD, the sequencer that orders effects into it, and the feeders that
//! serve replicas (`docs/design.md` §13.29).
//!
//! - `log.rs`: the backlog, RESP bytes of the stream addressed by offset, in segment files;
//! - `sequencer.rs`: the order of appends and the full sync's cut;
//! - `psync.rs`: PSYNC's decision and REPLCONF's arguments, without I/O;
//! - `failover.rs`: FAILOVER, the hand-over to a replica that has the whole stream;
//! - `quorum.rs`: `min-replicas-to-write`, the good replicas a write needs;
//! - `serve.rs`: a replica's connection once it sent PSYNC (full sync, then the feed);
//! - `history.rs`: the ids and offset a restarted master keeps.
//!
//! **A replica's log** is a copy of its master's stream: while this server follows a
//! master (`following`), commands append nothing and the link thread appends the bytes it
//! applied ([`Master::append_raw`]), at the master's offsets, so sub-replicas are served
//! from it (chained replication) and a promoted replica keeps the history.
//!
//! **Protocol between threads.** [`Master`] is shared (`Shared::master`). Commands append
//! through [`Master::append_unit`] while they hold a [`sequencer::SeqGuard`]; the stream's
//! selected database lives under `stream_db`'s mutex, held across the append so SELECT and
//! the command it precedes are one append. The log is created when the first replica asks
//! for a full sync and kept afterwards; a background thread (`upkeep`) flushes it every
//! [`FLUSH_EVERY`] and PINGs the replicas every `repl-ping-replica-period`.
//!
//! Layer: services (above store and types; below commands). One edge points up:
//! `failover.rs` switches the node's role through `cmd/replication.rs`.

pub mod failover;
pub mod frames;
pub mod history;
pub mod log;
pub mod psync;
pub mod quorum;
pub mod sequencer;
pub mod serve;
pub mod ship;

use crate::server::Shared;
use log::ReplLog;
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One command's arguments.
pub type Argv = crate::effects::Argv;

/// The log's directory under `dir`.
pub const LOG_DIR: &str = "repl-log";
/// Segment files roll at this size (or an eighth of `repl-backlog-size` if smaller).
const SEGMENT_BYTES: u64 = 64 << 20;
/// How often the in-memory tail is written to the segment files.
const FLUSH_EVERY: Duration = Duration::from_millis(10);

/// Appends `argv` in Redis's multibulk form.
pub fn encode(out: &mut Vec<u8>, argv: &[impl AsRef<[u8]>]) {
    out.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
    for a in argv {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// A connected replica, as INFO, ROLE and WAIT see it.
pub struct ReplicaLink {
    pub client_id: u64,
    pub ip: String,
    pub port: u16,
    /// `wait_bgsave`, `send_bulk` or `online`.
    pub state: Mutex<&'static str>,
    /// The offset the replica acknowledged (`REPLCONF ACK`), 0-based bytes.
    pub ack: AtomicU64,
    pub last_ack: Mutex<Instant>,
}

/// The master side's state (see the module documentation).
#[derive(Default)]
pub struct Master {
    pub seq: sequencer::Sequencer,
    log: RwLock<Option<Arc<ReplLog>>>,
    /// The database the stream has selected (`None`: the next append selects).
    stream_db: Mutex<Option<u8>>,
    pub replicas: Mutex<Vec<Arc<ReplicaLink>>>,
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// `min-replicas-to-write` / `min-replicas-max-lag` (`quorum.rs`).
    pub min_replicas: quorum::MinReplicas,
    /// FAILOVER's state (`failover.rs`).
    pub failover: failover::Failover,
    /// Serializes log creation and the upkeep thread's start.
    init: Mutex<()>,
    /// This server follows a master: its log takes the master's bytes, not its commands'.
    following: AtomicBool,
}

impl Master {
    /// The log, once a replica has connected.
    pub fn log(&self) -> Option<Arc<ReplLog>> {
        self.log.read().clone()
    }

    /// Appends one unit of effects (a command's, a transaction's, a group member's) as
    /// `(database, argv)` pairs: SELECT before a command of another database than the
    /// stream's, and MULTI/EXEC around them if `wrap`. The caller holds a sequencer guard.
    pub fn append_unit(&self, unit: &[(u8, Argv)], wrap: bool) {
        if unit.is_empty() || self.is_following() {
            return;
        }
        let Some(log) = self.log() else { return };
        let mut db = self.stream_db.lock();
        let mut out = Vec::new();
        let select = |out: &mut Vec<u8>, d: u8, db: &mut Option<u8>| {
            if *db != Some(d) {
                encode(out, &[b"SELECT".as_slice(), d.to_string().as_bytes()]);
                *db = Some(d);
            }
        };
        if wrap {
            // The transaction's first database is selected before MULTI, as Redis does.
            select(&mut out, unit[0].0, &mut db);
            encode(&mut out, &[b"MULTI"]);
        }
        for (d, argv) in unit {
            select(&mut out, *d, &mut db);
            encode(&mut out, argv);
        }
        if wrap {
            encode(&mut out, &[b"EXEC"]);
        }
        log.append(&out);
    }

    /// Propagates writes made outside any command (the active expiry cycle's deletes, for
    /// example) in database `db` (logical, as SELECT names it): appended in order as one
    /// unit (wrapped in MULTI/EXEC if more than one). The caller must have made the writes
    /// under the exclusion of their keys and call this before releasing it, so that the
    /// stream orders them as the store did. Nothing happens while no replica ever connected.
    pub fn propagate(&self, db: u8, cmds: &[Vec<Vec<u8>>]) {
        if self.is_following() {
            return;
        }
        let Some(_g) = self.seq.enter() else { return };
        let unit: Vec<(u8, Argv)> = cmds.iter().map(|c| (db, c.clone())).collect();
        self.append_unit(&unit, unit.len() > 1);
    }

    /// `-NOREPLICAS` if `min-replicas-to-write` is on and fewer replicas are good (a
    /// write on a master asks; `quorum.rs`).
    pub fn quorum_refusal(&self) -> Option<&'static str> {
        let (n, lag) = self.min_replicas.active()?;
        let good = quorum::good_count(&self.replicas.lock(), lag);
        (good < n as usize).then_some(quorum::ERR_NOREPLICAS)
    }

    /// The stream's end (`master_repl_offset`) if the log exists.
    pub fn offset(&self) -> Option<u64> {
        self.log().map(|l| l.end())
    }

    /// Makes sure the log exists and continues `offset` (this server's replication offset);
    /// on the first call starts appending (the sequencer's activation) and the upkeep.
    pub fn ensure_log(&self, shared: &Shared, offset: u64) -> std::io::Result<Arc<ReplLog>> {
        let _init = self.init.lock();
        if let Some(l) = self.log() {
            return Ok(l);
        }
        self.install_log(shared, offset, false)
    }

    /// A new empty log at `offset` in place of the current one (a replica's full sync, or a
    /// log that does not end where the data is): the replicas fed from the old one are
    /// disconnected (they resync from the new one).
    pub fn replace_log(&self, shared: &Shared, offset: u64) -> std::io::Result<Arc<ReplLog>> {
        let _init = self.init.lock();
        if self.log().is_some() {
            self.log.write().take();
            self.disconnect_replicas(&shared.clients);
        }
        self.install_log(shared, offset, false)
    }

    /// At start: the log a previous run left in `dir/repl-log/`, recovered, if it ends at
    /// `offset` (the history file's); `None` otherwise (the caller starts a new history).
    pub fn reopen_log(
        &self,
        shared: &Shared,
        offset: u64,
    ) -> std::io::Result<Option<Arc<ReplLog>>> {
        let _init = self.init.lock();
        let log = self.install_log(shared, offset, true)?;
        if log.end() == offset && log.first() <= offset {
            return Ok(Some(log));
        }
        self.log.write().take();
        Ok(None)
    }

    /// Opens (`recover`) or creates the log, publishes it, and on the first call starts
    /// appending and the upkeep. The caller holds `init`.
    fn install_log(
        &self,
        shared: &Shared,
        offset: u64,
        recover: bool,
    ) -> std::io::Result<Arc<ReplLog>> {
        let (dir, limit) = {
            let c = shared.config.read();
            let limit = c
                .get("repl-backlog-size")
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(1 << 30);
            (c.dir.join(LOG_DIR), limit)
        };
        let seg = SEGMENT_BYTES.min((limit / 8).max(1 << 20));
        let log = if recover {
            ReplLog::open(&dir, offset, limit, seg)?
        } else {
            // A new history: the file naming the old one goes first.
            history::remove(&dir)?;
            self.seq.quiet.clear();
            ReplLog::create(&dir, offset, limit, seg)?
        };
        let log = Arc::new(log);
        *self.stream_db.lock() = None;
        *self.log.write() = Some(log.clone());
        if self.seq.active() {
            return Ok(log);
        }
        self.seq.activate();
        // From now on commands compute their effects (`effects.rs`): the units collected
        // under the sequencer take them; what is propagated apart from a unit (a read's lazy
        // expiry, pops served to blocked clients, the active expiry cycle) is appended here.
        let me = shared.me.clone();
        shared.propagation.set_sink(Box::new(move |db, argv| {
            if let Some(s) = me.upgrade() {
                s.master.propagate(db, &[argv]);
            }
        }));
        let me = shared.me.clone();
        crate::effects::set_outside_sink(Box::new(move |db, argv| {
            if let Some(s) = me.upgrade() {
                s.master.propagate(db, &[argv]);
            }
        }));
        // A command that saw the sequencer inactive holds its stripes until its write is
        // done: once every stripe was free, every write from now on is appended.
        drop(shared.store.front().lock_every_stripe_for_command());
        let me = shared.me.clone();
        let spawned = std::thread::Builder::new()
            .name("strata-repl-log".into())
            .spawn(move || upkeep(me));
        if let Err(e) = spawned {
            eprintln!("strata-server: starting the replication log thread: {e}");
        }
        Ok(log)
    }

    /// Whether this server follows a master (its log takes the master's bytes).
    pub fn is_following(&self) -> bool {
        self.following.load(Ordering::Acquire)
    }

    /// This server starts (or stops) following a master. Starting (under the sequencer's
    /// cut, by the link thread: `Replication::switch_to_following`) removes the history
    /// file: the data will move with the master's stream, not this log's appends.
    pub fn set_following(&self, dir: &std::path::Path, on: bool) {
        self.following.store(on, Ordering::Release);
        if on {
            self.seq.quiet.busy();
            if let Err(e) = history::remove(&dir.join(LOG_DIR)) {
                eprintln!("strata-server: replication: {e}");
            }
            self.seq.quiet.clear();
        } else {
            // A promoted server's stream selects its database again before its first write.
            self.reselect();
        }
    }

    /// The link thread's append: `bytes` of the master's stream, applied (the log of a
    /// replica is its master's stream, at the same offsets). The caller holds the replica
    /// side's `applying` lock, which a full sync's cut on a replica takes.
    pub fn append_raw(&self, bytes: &[u8]) {
        if bytes.is_empty() || !self.is_following() {
            return;
        }
        if let Some(log) = self.log() {
            log.append(bytes);
        }
    }

    /// Appends `argv`, which writes no data (PING, `REPLCONF GETACK`): the history file
    /// stays, rewritten with the new end.
    fn append_control(&self, shared: &Shared, argv: &[&[u8]]) {
        if self.is_following() {
            return;
        }
        let Some(_g) = self.seq.enter_quiet() else {
            return;
        };
        let Some(log) = self.log() else { return };
        let mut out = Vec::new();
        encode(&mut out, argv);
        self.seq.quiet.control(
            || {
                log.append(&out);
            },
            || {
                log.flush().ok()?;
                Some(self.history(shared, log.end()))
            },
        );
    }

    /// The history this server's data is at if its log ends at `offset`.
    fn history(&self, shared: &Shared, offset: u64) -> history::History {
        let (replid, replid2, second_offset, _) = shared.replication.ids();
        history::History {
            replid,
            replid2,
            second_offset,
            offset,
        }
    }

    /// Writes the history file (no command between its write and its append meanwhile):
    /// the log's tail goes to its files first (`sync`: synced, at shutdown). Nothing
    /// happens on a replica or before the log exists.
    pub fn mark_history(&self, shared: &Shared, sync: bool) -> std::io::Result<()> {
        self.seq.cut(|| {
            if self.is_following() {
                return Ok(());
            }
            let Some(log) = self.log() else { return Ok(()) };
            log.flush()?;
            if sync {
                log.sync()?;
            }
            let h = self.history(shared, log.end());
            self.seq.quiet.mark(log.dir(), &h, sync)
        })
    }

    /// Forces a SELECT before the next command (a new full sync's stream starts with one).
    pub fn reselect(&self) {
        *self.stream_db.lock() = None;
    }

    /// Disconnects the replicas (Redis's `disconnectSlaves`): they reconnect and learn
    /// the new replication id, or resync from a new log.
    pub fn disconnect_replicas(&self, clients: &crate::clients::Registry) {
        let ids: Vec<u64> = self.replicas.lock().iter().map(|r| r.client_id).collect();
        for c in clients.all().into_iter().filter(|c| ids.contains(&c.id)) {
            c.request_kill();
        }
    }

    /// `REPLCONF GETACK *` into the stream (WAIT asks the replicas where they are).
    pub fn propagate_getack(&self, shared: &Shared) {
        self.append_control(shared, &[b"REPLCONF".as_slice(), b"GETACK", b"*"]);
    }

    pub fn add_replica(&self, r: Arc<ReplicaLink>) {
        self.replicas.lock().push(r);
    }

    pub fn remove_replica(&self, client_id: u64) {
        self.replicas.lock().retain(|r| r.client_id != client_id);
    }

    /// INFO replication's master part, after `role` (Redis 7.0.15's order from
    /// `connected_slaves` to `repl_backlog_histlen`).
    pub fn info_fields(
        &self,
        f: &mut Vec<(&'static str, String)>,
        ids: (&str, &str, i64, u64),
        backlog_size: String,
    ) {
        let (replid, replid2, second, offset) = ids;
        let replicas = self.replicas.lock().clone();
        f.push(("connected_slaves", replicas.len().to_string()));
        // Printed while `min-replicas-to-write` is on, as Redis prints it.
        if let Some((_, lag)) = self.min_replicas.active() {
            let good = quorum::good_count(&replicas, lag);
            f.push(("min_slaves_good_slaves", good.to_string()));
        }
        let lines: Vec<String> = replicas
            .iter()
            .map(|r| {
                format!(
                    "ip={},port={},state={},offset={},lag={}",
                    r.ip,
                    r.port,
                    r.state.lock(),
                    r.ack.load(Ordering::Relaxed),
                    r.last_ack.lock().elapsed().as_secs()
                )
            })
            .collect();
        // INFO's field names are static; the replica lines are numbered.
        const NAMES: [&str; 16] = [
            "slave0", "slave1", "slave2", "slave3", "slave4", "slave5", "slave6", "slave7",
            "slave8", "slave9", "slave10", "slave11", "slave12", "slave13", "slave14", "slave15",
        ];
        for (i, l) in lines.into_iter().enumerate().take(NAMES.len()) {
            f.push((NAMES[i], l));
        }
        let log = self.log();
        let offset = log.as_ref().map_or(offset, |l| l.end());
        f.push(("master_failover_state", self.failover.phase().name().into()));
        f.push(("master_replid", replid.to_string()));
        f.push(("master_replid2", replid2.to_string()));
        f.push(("master_repl_offset", offset.to_string()));
        f.push(("second_repl_offset", second.to_string()));
        let (active, first, histlen) = match &log {
            Some(l) => {
                let (first, end) = l.bounds();
                (1, first + 1, end - first)
            }
            None => (0, 0, 0),
        };
        f.push(("repl_backlog_active", active.to_string()));
        f.push(("repl_backlog_size", backlog_size));
        f.push(("repl_backlog_first_byte_offset", first.to_string()));
        f.push(("repl_backlog_histlen", histlen.to_string()));
    }
}

/// The log's background work: flushes the tail, PINGs the replicas into the stream every
/// `repl-ping-replica-period`, and writes the history file once no write came for
/// [`history::QUIET_AFTER`]. Ends with the server.
fn upkeep(me: std::sync::Weak<Shared>) {
    let mut last_ping = Instant::now();
    // The log's end when last seen, and since when it has not moved.
    let mut seen = (u64::MAX, Instant::now());
    loop {
        std::thread::sleep(FLUSH_EVERY);
        let Some(shared) = me.upgrade() else { return };
        let master = &shared.master;
        let Some(log) = master.log() else { continue };
        let period = shared
            .config
            .read()
            .get("repl-ping-replica-period")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(10);
        if last_ping.elapsed() >= Duration::from_secs(period) {
            last_ping = Instant::now();
            if !master.replicas.lock().is_empty() {
                master.append_control(&shared, &[b"PING"]);
            }
        }
        if let Err(e) = log.flush() {
            eprintln!("strata-server: replication log: {e}");
        }
        let end = log.end();
        if end != seen.0 {
            seen = (end, Instant::now());
        } else if seen.1.elapsed() >= history::QUIET_AFTER
            && !master.seq.quiet.is_marked()
            && !master.is_following()
        {
            if let Err(e) = master.mark_history(&shared, false) {
                eprintln!("strata-server: replication: writing the history file: {e}");
            }
        }
        if *shared.shutdown_receiver().borrow() {
            return;
        }
    }
}
