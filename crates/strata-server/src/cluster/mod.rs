//! Redis Cluster mode (`cluster-enabled yes`; `docs/design.md` §13.26, §13.31): the
//! cluster state (`slots.rs`), its file (`nodes_conf.rs`), the routing check (`route.rs`),
//! and the cluster bus: its wire format (`bus/`), the state transitions of received
//! messages (`packet.rs`), of the cron (`cron.rs`), of elections (`failover.rs`) and of
//! replica migration (`replica_migration.rs`), the messages sent (`outgoing.rs`) and the
//! links (`link.rs`).
//!
//! **Concurrency.** The state lives in one `RwLock`: the dispatcher's routing check and
//! the read-only CLUSTER subcommands take it shared; a change ([`Cluster::update`]) takes
//! it exclusively, applies the change, and writes nodes.conf before releasing it, so the
//! file is always written in the order of the changes and a change is on disk before it
//! is answered (Redis saves before replying too, in `beforeSleep`). Nothing else is held
//! while the lock is held, but for a moment the pub/sub registry's lock, to learn which
//! slots have shard channel subscriptions (`shard_channels.rs`); the subscriptions of
//! slots a change took from this node's shard are ended after the lock is released
//! (`pubsub.rs` never waits for the cluster's lock, so the order cannot deadlock).
//!
//! Layer: cluster (a building block below commands).

pub mod bus;
pub mod cron;
pub mod failover;
#[cfg(test)]
mod failover_tests;
#[cfg(test)]
mod fuzz_tests;
pub mod health;
pub mod link;
pub mod nodes_conf;
pub mod outgoing;
pub mod packet;
#[cfg(test)]
mod packet_tests;
pub mod replica_migration;
#[cfg(test)]
mod replica_migration_tests;
pub mod route;
pub mod scan_hint;
pub mod shard_channels;
pub mod slots;
#[cfg(test)]
mod test_fixtures;

use crate::config::Config;
use parking_lot::{RwLock, RwLockReadGuard};
use slots::{node_flag, State};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use strata_engine::io::{FileLock, Fs};

/// Where this node is reached, from the configuration (`cluster-announce-*`, `port`,
/// `cluster-port`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announce {
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub hostname: String,
}

impl Announce {
    /// `port` is the TCP port actually served (`port 0` picks one).
    pub fn from_config(c: &Config, port: u16) -> Announce {
        let get = |n: &str| c.tuning.get(n).cloned().unwrap_or_default();
        let num = |n: &str| get(n).parse::<u16>().unwrap_or(0);
        let port = match num("cluster-announce-port") {
            0 => port,
            p => p,
        };
        let cport = match (num("cluster-announce-bus-port"), c.cluster_port) {
            (0, 0) => port.wrapping_add(10000),
            (0, p) | (p, _) => p,
        };
        Announce {
            ip: get("cluster-announce-ip"),
            port,
            cport,
            hostname: get("cluster-announce-hostname"),
        }
    }
}

/// The cluster state of this node and the file it is kept in.
pub struct Cluster {
    state: RwLock<State>,
    fs: Arc<dyn Fs>,
    path: PathBuf,
    /// Held while the server runs: two servers cannot share one nodes.conf.
    _lock: Box<dyn FileLock>,
    /// Bus messages sent and received, by type (CLUSTER INFO's counters).
    pub stats: BusStats,
    /// [`State::is_ok`] as of the last change: bit 0 with `cluster-require-full-coverage`,
    /// bit 1 without. Kept up to date by every change (`update`, `bus_update`), as Redis
    /// recomputes its state after changes rather than per command: routing reads it with
    /// one atomic load where computing it walks the owners of all 16384 slots.
    ok: AtomicU8,
    /// What delays `ok` after a minority or a restart (`health.rs`); locked by
    /// `refresh_ok` (under the state's lock) and by the bus's cron to set the node timeout
    /// (without it), never the other way round, so the two locks cannot deadlock.
    health: parking_lot::Mutex<health::Health>,
    /// Messages published here that the bus is to carry to the other nodes (set when the
    /// bus starts; bounded: see [`Cluster::publish`]).
    published: std::sync::OnceLock<tokio::sync::mpsc::Sender<Published>>,
    /// The bus's links with the node at their other end (CLUSTER LINKS), as the bus task
    /// last published them.
    pub links: parking_lot::Mutex<Vec<LinkView>>,
    /// Where GETKEYSINSLOT starts scanning a migrating slot (`scan_hint.rs`).
    pub scan_hints: scan_hint::ScanHints,
    /// The text nodes.conf was last written with (`None` after a failed write). Locked
    /// only under the state's write lock, so it is the file's text as of the last save: a
    /// change compares its rendering with it instead of rendering the state before it too.
    saved: parking_lot::Mutex<Option<String>>,
    /// The shard channel subscriptions to end when their slot leaves this node's shard
    /// (set when the server starts).
    subscriptions: std::sync::OnceLock<Arc<dyn shard_channels::SlotSubscriptions>>,
}

/// One bus link as CLUSTER LINKS shows it.
#[derive(Clone, Debug)]
pub struct LinkView {
    /// Opened by the peer (`from`) or by this node (`to`).
    pub inbound: bool,
    pub node: slots::NodeId,
    /// When the connection was made (Unix ms).
    pub ctime_ms: u64,
    /// Bytes queued for the peer and not yet written.
    pub queued: Arc<AtomicU64>,
}

/// A PUBLISH (or SPUBLISH: `shard`) on this node, for the bus to carry (Redis's
/// `clusterPropagatePublish`).
pub struct Published {
    pub shard: bool,
    pub channel: bytes::Bytes,
    pub message: bytes::Bytes,
}

/// Bus messages sent and received by type (Redis's `stats_bus_messages_sent/received`).
#[derive(Default)]
pub struct BusStats {
    pub sent: [AtomicU64; MSG_TYPES],
    pub received: [AtomicU64; MSG_TYPES],
}

/// The message types Redis 7.0 counts.
pub const MSG_TYPES: usize = bus::message::msg_type::COUNT as usize;

impl BusStats {
    pub fn count(counters: &[AtomicU64; MSG_TYPES], msg_type: u16) {
        if let Some(c) = counters.get(usize::from(msg_type)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A change that could not be saved.
#[derive(Debug)]
pub struct SaveError(pub String);

impl Cluster {
    /// Reads `cluster-config-file` (relative to `dir`), or creates it with a fresh node id;
    /// takes its lock (`<file>.lock`). A malformed file is an error naming the line.
    pub fn open(c: &Config, fs: Arc<dyn Fs>, port: u16) -> Result<Cluster, String> {
        let path = c.dir.join(&c.cluster_config_file);
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let lock = fs.lock(&PathBuf::from(lock_path)).map_err(|e| {
            format!(
                "Sorry, the cluster configuration file {} is already used by a different \
                 Redis Cluster node ({e}). Please make sure that different nodes use \
                 different cluster configuration files.",
                path.display()
            )
        })?;
        let text = match fs.exists(&path) {
            Ok(true) => fs.read_all(&path).map_err(|e| {
                format!(
                    "Loading the cluster node config from {}: {e}",
                    path.display()
                )
            })?,
            Ok(false) => Vec::new(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let text = String::from_utf8(text)
            .map_err(|_| format!("{}: the cluster config file is not text", path.display()))?;
        let loaded = nodes_conf::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let state = loaded.unwrap_or_else(|| State::new(slots::random_id()));
        let restarted_master = {
            let me = state.me();
            me.has(slots::node_flag::MASTER) && state.slot_count(&state.myself) > 0
        };
        let node_timeout_ms = c
            .tuning
            .get("cluster-node-timeout")
            .and_then(|t| t.parse().ok())
            .unwrap_or(15000);
        let cluster = Cluster {
            state: RwLock::new(state),
            fs,
            path,
            _lock: lock,
            stats: BusStats::default(),
            ok: AtomicU8::new(0),
            health: parking_lot::Mutex::new(health::Health::new(
                link::now_ms(),
                restarted_master,
                node_timeout_ms,
            )),
            published: std::sync::OnceLock::new(),
            links: parking_lot::Mutex::new(Vec::new()),
            scan_hints: scan_hint::ScanHints::default(),
            saved: parking_lot::Mutex::new(None),
            subscriptions: std::sync::OnceLock::new(),
        };
        cluster.refresh_ok(&cluster.state.read());
        cluster.announce(&Announce::from_config(c, port));
        cluster.save(&cluster.state.read()).map_err(|e| e.0)?;
        Ok(cluster)
    }

    /// The state, shared (routing, the read-only subcommands).
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read()
    }

    /// Applies `f` to the state and saves nodes.conf if it succeeded and the file's text
    /// differs from the last one written (a change, or one the bus made without saving, such
    /// as a pong time: Redis saves on every such command); fsynced only if an epoch changed,
    /// as Redis fsyncs for commands (a SETSLOT is written without: a reshard saves several
    /// times per slot). `f`'s error (a reply text) leaves the state as `f` left it, as
    /// Redis's checks come before its changes.
    pub fn update<R>(&self, f: impl FnOnce(&mut State) -> Result<R, String>) -> Result<R, String> {
        let (r, lost) = {
            let mut st = self.state.write();
            let epochs = |st: &State| (st.current_epoch, st.last_vote_epoch, st.me().config_epoch);
            let epochs_before = epochs(&st);
            let watch = self.watch(&st);
            let r = f(&mut st);
            self.refresh_ok(&st);
            let lost = watch.map_or_else(Vec::new, |b| shard_channels::lost(&b, &st));
            let r = r.and_then(|r| {
                let text = nodes_conf::render(&st);
                if self.saved.lock().as_deref() != Some(text.as_str()) {
                    self.write(text, epochs(&st) != epochs_before)
                        .map_err(|e| e.0)?;
                }
                Ok(r)
            });
            (r, lost)
        };
        self.end_subscriptions(&lost);
        r
    }

    /// A change made by the cluster bus: `f` says whether nodes.conf is to be saved (the bus
    /// changes ping times and link states, which Redis does not save on their own). A failed
    /// save is logged: the bus has no client to answer.
    pub fn bus_update<R>(&self, f: impl FnOnce(&mut State) -> (R, bool)) -> R {
        self.bus_update_saved(f).0
    }

    /// [`Cluster::bus_update`], also saying whether the save it asked for failed.
    fn bus_update_saved<R>(
        &self,
        f: impl FnOnce(&mut State) -> (R, bool),
    ) -> (R, Result<(), SaveError>) {
        let (r, saved, lost) = {
            let mut st = self.state.write();
            let watch = self.watch(&st);
            let (r, save) = f(&mut st);
            self.refresh_ok(&st);
            let lost = watch.map_or_else(Vec::new, |b| shard_channels::lost(&b, &st));
            let saved = if save { self.save(&st) } else { Ok(()) };
            if let Err(e) = &saved {
                eprintln!("strata-server: cluster: {}", e.0);
            }
            (r, saved, lost)
        };
        self.end_subscriptions(&lost);
        (r, saved)
    }

    /// A bus message's transition (Redis's `clusterProcessPacket`), saved as it asks. A
    /// vote it grants leaves only if the `lastVoteEpoch` recording it is on disk: were the
    /// save lost, this node could vote again in the same epoch after a restart, and two
    /// replicas could both win it. Redis exits when that save fails; here the vote is
    /// withheld and the failure logged (the node still counts the epoch as voted, so it
    /// votes in none but a later one).
    pub fn process_message(
        &self,
        env: &outgoing::Env,
        link: &packet::LinkCtx,
        msg: &bus::Msg,
    ) -> packet::Outcome {
        let (mut out, saved) = self.bus_update_saved(|st| {
            let out = packet::process(st, env, link, msg);
            let save = out.save;
            (out, save)
        });
        if let Err(e) = saved {
            if out.withhold_votes() {
                eprintln!(
                    "strata-server: cluster: NOT granting a failover vote: saving \
                     lastVoteEpoch failed ({})",
                    e.0
                );
            }
        }
        out
    }

    /// Ends shard channel subscriptions through `s` from now on (set once at start).
    pub fn attach_subscriptions(&self, s: Arc<dyn shard_channels::SlotSubscriptions>) {
        let _ = self.subscriptions.set(s);
    }

    /// The owners of the slots with shard channel subscriptions, before a change (`None`:
    /// no subscriptions, nothing to compare).
    fn watch(&self, st: &State) -> Option<shard_channels::Before> {
        let watched = self.subscriptions.get()?.slots();
        (!watched.is_empty()).then(|| shard_channels::before(st, &watched))
    }

    fn end_subscriptions(&self, lost: &[u16]) {
        if let (false, Some(s)) = (lost.is_empty(), self.subscriptions.get()) {
            s.lost(lost);
        }
    }

    /// Whether the cluster is up (`cluster_state:ok`), as of the last change.
    pub fn is_ok(&self, require_full_coverage: bool) -> bool {
        let bit = if require_full_coverage { 1 } else { 2 };
        self.ok.load(Ordering::Acquire) & bit != 0
    }

    /// Takes `cluster-node-timeout` as the bus reads it (the rejoin delay follows it).
    pub fn set_node_timeout(&self, ms: u64) {
        self.health.lock().set_node_timeout(ms);
    }

    fn refresh_ok(&self, st: &State) {
        let (full, partial, minority) = st.evaluate();
        let master = st.me().has(slots::node_flag::MASTER);
        let [full, partial] =
            self.health
                .lock()
                .step(link::now_ms(), [full, partial], minority, master);
        let bits = u8::from(full) | u8::from(partial) << 1;
        self.ok.store(bits, Ordering::Release);
    }

    /// Writes nodes.conf now (CLUSTER SAVECONFIG).
    pub fn save_now(&self) -> Result<(), SaveError> {
        let st = self.state.write();
        self.save(&st)
    }

    fn save(&self, st: &State) -> Result<(), SaveError> {
        self.write(nodes_conf::render(st), true)
    }

    /// Writes `text` as nodes.conf; called under the state's write lock (the text is the
    /// state's), which is what makes `saved` the file's text.
    fn write(&self, text: String, sync: bool) -> Result<(), SaveError> {
        let mut saved = self.saved.lock();
        // A failed write may have left the file as it was or replaced it: compare with
        // nothing until a write succeeds.
        *saved = None;
        nodes_conf::save(&self.fs, &self.path, &text, sync)
            .map_err(|e| SaveError(format!("ERR Error saving the cluster node config: {e}")))?;
        *saved = Some(text);
        Ok(())
    }

    /// Hands a message published here to the bus, which sends it to every node (a shard
    /// channel's: to this node's master and replicas). The queue is bounded: a message
    /// published while it is full (a bus thousands of messages behind) reaches only this
    /// node's subscribers.
    pub fn publish(&self, p: Published) {
        if let Some(tx) = self.published.get() {
            let _ = tx.try_send(p);
        }
    }

    /// The bus's end of [`Cluster::publish`]'s queue (taken once, when the bus starts).
    pub(crate) fn take_published(
        &self,
        capacity: usize,
    ) -> Option<tokio::sync::mpsc::Receiver<Published>> {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity);
        self.published.set(tx).ok().map(|()| rx)
    }

    /// Takes this node's address from the configuration (at start and after CONFIG SET).
    pub fn announce(&self, a: &Announce) {
        let _ = self.update(|st| {
            let me = st.me_mut();
            // Without an announced address, keep the one peers told (a MEET's).
            if !a.ip.is_empty() {
                me.ip.clone_from(&a.ip);
            }
            me.port = a.port;
            me.cport = a.cport;
            me.hostname.clone_from(&a.hostname);
            me.flags |= node_flag::MYSELF;
            Ok(())
        });
    }
}
