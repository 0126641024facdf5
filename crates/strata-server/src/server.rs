//! The server: opens the database, listens, accepts clients and shuts down cleanly.
//!
//! **Threads and runtime.** Networking runs on a tokio *multi-thread* runtime. A command whose
//! keys share a shard is queued to that shard's worker and awaited as a future (`exec.rs`);
//! the others call `strata::Db`'s blocking API and take the store's stripe locks, inside
//! `tokio::task::block_in_place`, which hands the runtime worker's other tasks to another
//! thread while this one blocks; that is only possible on the multi-thread runtime (a
//! current-thread runtime would stall every client behind one cold multi-shard read). One
//! more thread, `strata-fsync`, makes the logs durable every second under
//! `appendfsync everysec`, and another, `strata-expire`, runs the active expiry cycle
//! ten times a second (`expire.rs`).
//!
//! **Shutdown.** SHUTDOWN, SIGINT/SIGTERM (with [`StartOptions::handle_signals`]) or
//! [`ServerHandle::shutdown`] flip one watch channel. Accept loops stop; each connection
//! finishes the commands it has read, writes their replies and closes; then the database is
//! closed (every queued write applied, every shard closed).
//!
//! Layer: connection and server (the top).

use crate::clients::{ClientInfo, Registry};
use crate::cmd::ConnState;
use crate::config::{AppendFsync, Config, ConfigError};
use crate::conn;
use crate::keys::MAX_DATABASES;
use crate::slowlog::SlowLog;
use crate::store::Store;
use parking_lot::RwLock;
use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The Redis version whose behaviour we implement, reported by HELLO and INFO (clients use
/// it to pick features).
pub const REDIS_VERSION: &str = "7.0.0";

const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is \
enabled and no password is set for the default user. In this mode connections are only \
accepted from the loopback interface. If you want to connect from external computers to \
Redis you may adopt one of the following solutions: 1) Just disable protected mode sending \
the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis \
from the same host the server is running, however MAKE SURE Redis is not publicly accessible \
from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) \
Alternatively you can just disable the protected mode by editing the Redis configuration \
file, and setting the protected mode option to 'no', and then restarting the server. 3) If \
you started the server manually just for testing, restart it with the '--protected-mode no' \
option. 4) Setup a an authentication password for the default user. NOTE: You only need to \
do one of the above things in order for the server to start accepting connections from the \
outside.\r\n";

/// Why the server could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("database: {0}")]
    Store(#[from] strata_engine::Error),
    /// The function libraries stored in the database do not load.
    #[error("{0}")]
    Functions(String),
    /// The stored replication position does not read.
    #[error("{0}")]
    Replication(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// Server-wide counters (INFO clients and stats).
#[derive(Default)]
pub struct Stats {
    pub connected_clients: AtomicUsize,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands_processed: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
}

impl Stats {
    /// CONFIG RESETSTAT: the counters INFO stats shows go back to zero.
    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.commands_processed,
            &self.net_input_bytes,
            &self.net_output_bytes,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// State shared by every connection.
pub struct Shared {
    /// ACL users and the ACL log (`acl/`).
    pub acl: crate::acl::Acl,
    pub config: RwLock<Config>,
    pub store: Store,
    pub stats: Stats,
    /// INFO commandstats and errorstats.
    pub cmdstats: crate::cmdstats::CommandStats,
    pub started: Instant,
    pub run_id: String,
    pub local_addrs: Vec<SocketAddr>,
    /// The Unix socket served, if any.
    pub unix_path: Option<PathBuf>,
    pub clients: Registry,
    /// Clients blocked on keys (`blocking.rs`).
    pub blocked: crate::blocking::Registry,
    pub slowlog: SlowLog,
    /// The latency monitor (LATENCY LATEST, HISTORY, RESET).
    pub latency: crate::latency::Monitor,
    /// Encoding limits and node sizes, parsed when set (`tuning.rs`).
    pub limits: crate::tuning::Limits,
    /// SCAN positions too long for a cursor (`cursor.rs`).
    pub scan_bounds: crate::cursor::ScanBounds,
    /// Clients in MONITOR mode (`monitor.rs`).
    pub monitors: crate::monitor::Monitors,
    /// CLIENT PAUSE's state (`pause.rs`).
    pub pause: crate::pause::Pause,
    /// Channel and pattern subscriptions (`pubsub.rs`).
    pub pubsub: Arc<crate::pubsub::PubSub>,
    /// SAVE and BGSAVE state; LASTSAVE reads `saves.last_save_unix()`.
    pub saves: crate::save::Saves,
    /// The Lua script cache and interpreters (`scripting/`).
    pub scripts: crate::scripting::Scripts,
    /// The function libraries (FUNCTION, FCALL: `scripting/functions.rs`), read from the
    /// database before clients are served.
    pub functions: crate::scripting::functions::Functions,
    /// Replication: this server as a replica (`replica/`).
    pub replication: crate::replica::Replication,
    /// Replication: this server as a master (`repl/`).
    pub master: crate::repl::Master,
    /// Where commands' effects go (`effects.rs`): the replication log's sink.
    pub propagation: crate::effects::Propagation,
    /// MIGRATE's cached connections to its targets (`cmd/migrate.rs`).
    pub migrate_sockets: crate::cmd::migrate::Sockets,
    /// Cluster mode's state (`cluster/`); `None` unless `cluster-enabled yes`.
    pub cluster: Option<crate::cluster::Cluster>,
    /// This value's own `Arc`, for work that outlives a command (BGSAVE's thread).
    pub me: std::sync::Weak<Shared>,
    next_client_id: AtomicU64,
    shutdown: watch::Sender<bool>,
}

impl Shared {
    /// Asks the server to stop (SHUTDOWN, signals).
    pub fn request_shutdown(&self) {
        // A busy script stops (its writes dropped) so its connection can close.
        self.scripts.abort_all();
        self.shutdown.send_replace(true);
    }

    /// The TCP port clients reach: the one bound (`port 0` picks one), else `port`.
    pub fn served_port(&self, c: &Config) -> u16 {
        self.local_addrs.first().map_or(c.port, |a| a.port())
    }

    pub fn shutdown_receiver(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Publishes a configuration changed by CONFIG SET.
    pub fn apply_config(&self, c: Config) {
        self.store
            .set_sync_writes(c.appendfsync == AppendFsync::Always);
        if c.hot_memory_bytes != self.config.read().hot_memory_bytes {
            self.store.db().set_hot_bytes(c.hot_memory_bytes);
        }
        self.slowlog.trim(c.slowlog_max_len);
        self.slowlog.set_threshold(c.slowlog_log_slower_than);
        self.acl.log.trim(c.acllog_max_len as usize);
        if c.requirepass != self.config.read().requirepass {
            self.acl.set_default_password(c.requirepass.as_deref());
        }
        set_lfu_params(&self.store, &c);
        self.store
            .set_unlink_expired(crate::effects::lazy(&c, "lazyfree-lazy-expire"));
        configure_notify(&self.store, &c);
        self.limits.set(&c.tuning);
        self.master.min_replicas.set(&c.tuning);
        // CONFIG SET repl-backlog-size resizes the replication log's retention at once.
        if let (Some(log), Some(limit)) = (
            self.master.log(),
            c.get("repl-backlog-size")
                .and_then(|v| v.parse::<u64>().ok()),
        ) {
            log.set_limit(limit);
        }
        self.latency.set_threshold(
            c.tuning
                .get("latency-monitor-threshold")
                .map(String::as_str),
        );
        self.latency
            .set_tracking(c.tuning.get("latency-tracking").map(String::as_str));
        if let Some(cluster) = &self.cluster {
            cluster.announce(&crate::cluster::Announce::from_config(
                &c,
                self.served_port(&c),
            ));
        }
        *self.config.write() = c;
    }

    /// Registers a new client: `addr` and `laddr` in CLIENT LIST's form.
    pub fn register_client(
        &self,
        addr: String,
        laddr: String,
        fd: i64,
        unix: bool,
    ) -> Arc<ClientInfo> {
        let id = self.next_client_id.fetch_add(1, Ordering::Relaxed) + 1;
        let info = Arc::new(ClientInfo::new(id, addr, laddr, fd, unix));
        self.clients.add(info.clone());
        info
    }

    /// State of a new client connection.
    pub fn new_conn(&self, info: Arc<ClientInfo>) -> ConnState {
        ConnState {
            id: info.id,
            info,
            db: self.store.dbs.physical(0),
            selected: 0,
            // As Redis: clients start authenticated (as `default`) while the default user
            // needs no password.
            authenticated: !self.acl.auth_required(),
            user: self.acl.default_user(),
            name: None,
            close_after_reply: false,
            reply_off: false,
            skip_next: false,
            multi: None,
            in_exec: false,
            in_script: false,
            sub: None,
            push: None,
            master: false,
            repl_pending: None,
            replica: None,
            asking: false,
            readonly: false,
        }
    }
}

/// How [`start`] runs the server.
#[derive(Clone, Default)]
pub struct StartOptions {
    /// Shut down on SIGINT and SIGTERM (the `strata serve` process; not in tests).
    pub handle_signals: bool,
    /// The file system the database's files go through; `None`: the real one. Tests pass a
    /// fault-injecting file system here (`strata_engine::io::FaultFs`) to fail syncs.
    pub fs: Option<Arc<dyn strata_engine::io::Fs>>,
}

impl std::fmt::Debug for StartOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartOptions")
            .field("handle_signals", &self.handle_signals)
            .field("fs", &self.fs.as_ref().map(|_| "custom"))
            .finish()
    }
}

/// A running server.
pub struct ServerHandle {
    addrs: Vec<SocketAddr>,
    unix_path: Option<PathBuf>,
    shards: usize,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<Result<(), ServerError>>>,
}

impl ServerHandle {
    /// The first address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The Unix socket the server also serves on, if any.
    pub fn unix_path(&self) -> Option<&std::path::Path> {
        self.unix_path.as_deref()
    }

    /// Stops the server and waits until the database is closed.
    pub fn shutdown(mut self) -> Result<(), ServerError> {
        self.stop.send_replace(true);
        self.join()
    }

    /// Waits until the server stops (SHUTDOWN or a signal).
    pub fn wait(mut self) -> Result<(), ServerError> {
        self.join()
    }

    fn join(&mut self) -> Result<(), ServerError> {
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| {
                Err(ServerError::Io {
                    what: "server thread".to_string(),
                    source: std::io::Error::other("panicked"),
                })
            }),
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop.send_replace(true);
            let _ = self.join();
        }
    }
}

fn bind_all(cfg: &Config) -> Result<Vec<StdListener>, ServerError> {
    let mut out = Vec::new();
    for b in &cfg.bind {
        // Redis: a leading '-' marks an address that may be unavailable.
        let (optional, host) = match b.strip_prefix('-') {
            Some(h) => (true, h),
            None => (false, b.as_str()),
        };
        let io = |source| ServerError::Io {
            what: format!("cannot listen on {host}:{}", cfg.port),
            source,
        };
        let addrs = match (host, cfg.port).to_socket_addrs() {
            Ok(a) => a,
            Err(_) if optional => continue,
            Err(e) => return Err(io(e)),
        };
        for a in addrs {
            match StdListener::bind(a) {
                Ok(l) => {
                    l.set_nonblocking(true).map_err(io)?;
                    out.push(l);
                }
                Err(_) if optional => {}
                Err(e) => return Err(io(e)),
            }
        }
    }
    if out.is_empty() {
        return Err(ServerError::Io {
            what: "no address to listen on (bind)".to_string(),
            source: std::io::Error::other("empty bind list"),
        });
    }
    Ok(out)
}

/// In cluster mode, the cluster bus's listeners: `cluster-port` (default: the served port
/// + 10000) on every address served.
fn bind_bus(shared: &Shared, addrs: &[SocketAddr]) -> Result<Vec<StdListener>, ServerError> {
    if shared.cluster.is_none() {
        return Ok(Vec::new());
    }
    let c = shared.config.read();
    let port = shared.served_port(&c);
    let cport = match c.cluster_port {
        0 => port.checked_add(10000).ok_or_else(|| {
            ConfigError(format!(
                "Redis port number too high. Cluster communication port is 10,000 port numbers \
                 higher than your Redis port. Your Redis port number must be 55535 or less, \
                 but {port} was specified."
            ))
        })?,
        p => p,
    };
    crate::cluster::link::bind(addrs, cport).map_err(|source| ServerError::Io {
        what: format!("cannot listen on the cluster bus port {cport}"),
        source,
    })
}

/// A random-enough 40-hex-digit run id (Redis's `run_id`: differs at every start).
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let seed = [
        nanos.to_le_bytes(),
        u128::from(std::process::id()).to_le_bytes(),
    ]
    .concat();
    format!(
        "{:032x}{:08x}",
        xxhash_rust::xxh3::xxh3_128(&seed),
        std::process::id()
    )
}

/// Stack of each network thread (where scripts run): twice Linux's default main-thread
/// stack, which redis-server's Lua runs on, so that what Lua 5.1 lets a script recurse in C
/// (200 nested C calls; pattern matching, which Lua 5.1 does not bound, e.g.
/// `string.find(s, string.rep('a?', 100000))`) fits as it does in redis-server, unoptimized
/// builds included. (Address space only: pages are committed as they are touched.)
const NET_THREAD_STACK_BYTES: usize = 16 << 20;

/// Opens the database in `config.dir`, listens, and serves on a thread of its own.
pub fn start(config: Config, opts: StartOptions) -> Result<ServerHandle, ServerError> {
    let listeners = bind_all(&config)?;
    let local_addrs: Vec<SocketAddr> = listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .collect();
    let unixsocket = config.unixsocket.clone();
    let unixsocketperm = config.unixsocketperm;
    let shared = open_shared(config, opts.fs.clone(), local_addrs.clone())?;
    let bus = bind_bus(&shared, &local_addrs)?;
    let shards = shared.store.db().shard_count();
    // The stream position persisted with the data (a replica resumes it).
    shared
        .replication
        .restore(&shared)
        .map_err(ServerError::Replication)?;
    let follow = shared.config.read().replicaof.clone();
    if let Some((host, port)) = follow {
        shared.replication.follow(&shared, host, port);
    }
    let unix = match &unixsocket {
        Some(path) => Some(bind_unix(path, unixsocketperm)?),
        None => None,
    };
    let unix_path = unixsocket;
    let stop = shared.shutdown.clone();
    let runtime = net_runtime(None)?;
    let thread = std::thread::Builder::new()
        .name("strata-server".to_string())
        .spawn(move || run(runtime, shared, listeners, bus, unix, opts))
        .map_err(|source| ServerError::Io {
            what: "cannot start the server thread".to_string(),
            source,
        })?;
    Ok(ServerHandle {
        unix_path,
        addrs: local_addrs,
        shards,
        stop,
        thread: Some(thread),
    })
}

/// Opens the database in `config.dir` (through `fs`; `None`: the real file system) and
/// builds the state every connection shares, before any client is served. [`start`] serves
/// it on its listeners; the in-process test harness (`test_server.rs`) on in-memory streams.
pub(crate) fn open_shared(
    config: Config,
    fs: Option<Arc<dyn strata_engine::io::Fs>>,
    local_addrs: Vec<SocketAddr>,
) -> Result<Arc<Shared>, ServerError> {
    if config.databases > MAX_DATABASES {
        return Err(ConfigError(format!("databases must be at most {MAX_DATABASES}")).into());
    }
    let acl = crate::acl::from_config(&config).map_err(ConfigError)?;
    let mut db_opts = strata::DbOptions {
        shards: config.shards,
        // Shards own slot ranges: a key's records share its slot, so they share a shard.
        routing: Some(strata::Routing::Slot),
        hot_bytes: config.hot_memory_bytes,
        ..strata::DbOptions::with_engine(config.engine.options())
    };
    if let Some(fs) = fs {
        db_opts.engine.fs = fs;
    }
    let fs = db_opts.engine.fs.clone();
    // Reclaims the records of deleted and expired keys as compactions run (`filter.rs`).
    let db = strata::Db::open(&config.dir, crate::filter::with_filter(db_opts))?;
    // Cluster mode's nodes.conf lives in `dir` beside the database (opened first: a new
    // database wants an empty directory).
    let cluster = if config.cluster_enabled {
        let port = local_addrs.first().map_or(config.port, |a| a.port());
        Some(crate::cluster::Cluster::open(&config, fs, port).map_err(ConfigError)?)
    } else {
        None
    };
    let (stop, _) = watch::channel(false);
    let store = Store::open(db, config.appendfsync == AppendFsync::Always)?;
    set_lfu_params(&store, &config);
    store.set_unlink_expired(crate::effects::lazy(&config, "lazyfree-lazy-expire"));
    let pubsub = Arc::new(crate::pubsub::PubSub::default());
    store.notify.attach(pubsub.clone());
    store.tracking.attach(pubsub.clone());
    configure_notify(&store, &config);
    let functions = crate::cmd::functions::open(&store).map_err(ServerError::Functions)?;
    let limits = crate::tuning::Limits::new(&config.tuning);
    let latency = crate::latency::Monitor::default();
    latency.set_threshold(
        config
            .tuning
            .get("latency-monitor-threshold")
            .map(String::as_str),
    );
    latency.set_tracking(config.tuning.get("latency-tracking").map(String::as_str));
    let slowlog = SlowLog::default();
    slowlog.set_threshold(config.slowlog_log_slower_than);
    let unix_path = config.unixsocket.clone();
    let master = crate::repl::Master::default();
    master.min_replicas.set(&config.tuning);
    let shared = Arc::new_cyclic(|me| Shared {
        acl,
        store,
        functions,
        pubsub,
        pause: Default::default(),
        monitors: Default::default(),
        saves: crate::save::Saves::default(),
        scripts: Default::default(),
        replication: Default::default(),
        master,
        propagation: Default::default(),
        cluster,
        migrate_sockets: Default::default(),
        me: me.clone(),
        config: RwLock::new(config),
        stats: Stats::default(),
        cmdstats: Default::default(),
        started: Instant::now(),
        run_id: run_id(),
        local_addrs,
        unix_path,
        clients: Registry::default(),
        blocked: Default::default(),
        slowlog,
        latency,
        limits,
        scan_bounds: Default::default(),
        next_client_id: AtomicU64::new(0),
        shutdown: stop,
    });
    if let Some(c) = &shared.cluster {
        let subs = crate::cmd::pubsub::SlotSubscriptions(Arc::downgrade(&shared));
        c.attach_subscriptions(Arc::new(subs));
    }
    Ok(shared)
}

/// The runtime connections run on (`workers`: `None`, one per core).
pub(crate) fn net_runtime(workers: Option<usize>) -> Result<tokio::runtime::Runtime, ServerError> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        b.worker_threads(n);
    }
    b.thread_name("strata-net")
        // Scripts run on these threads, and Lua's C functions recurse (200 nested
        // `string.gsub` calls with 8 KiB buffers each, as Lua allows): more than tokio's
        // 2 MiB.
        .thread_stack_size(NET_THREAD_STACK_BYTES)
        .enable_all()
        .build()
        .map_err(|source| ServerError::Io {
            what: "cannot start the network runtime".to_string(),
            source,
        })
}

/// The server thread: serves until shutdown, then closes the database.
fn run(
    runtime: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    listeners: Vec<StdListener>,
    bus: Vec<StdListener>,
    unix: Option<UnixStdListener>,
    opts: StartOptions,
) -> Result<(), ServerError> {
    let fsync = spawn_fsync_thread(shared.clone());
    let expire = spawn_expire_thread(shared.clone());
    if shared.cluster.is_some() {
        runtime.spawn(crate::cluster::link::run(shared.clone(), bus));
    }
    let served = runtime.block_on(serve(shared.clone(), listeners, unix, opts));
    if let Some(p) = &shared.unix_path {
        let _ = std::fs::remove_file(p);
    }
    runtime.shutdown_timeout(Duration::from_secs(5));
    shared.request_shutdown();
    shared.replication.shutdown();
    let _ = fsync.join();
    let _ = expire.join();
    shared.saves.join();
    // A clean stop: the master's ids and offset stay with its log (`repl/history.rs`).
    if let Err(e) = shared.master.mark_history(&shared, true) {
        eprintln!("strata-server: replication: writing the history file: {e}");
    }
    served?;
    // If a connection outlived the runtime's shutdown, the database is dropped with the
    // last reference instead (its workers stop; acknowledged writes are in the logs).
    if let Ok(s) = Arc::try_unwrap(shared) {
        s.store.into_db().close()?;
    }
    Ok(())
}

/// `appendfsync everysec`: once a second, make written data durable.
fn spawn_fsync_thread(shared: Arc<Shared>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("strata-fsync".to_string())
        .spawn(move || {
            let rx = shared.shutdown_receiver();
            let mut last = Instant::now();
            while !*rx.borrow() {
                std::thread::sleep(Duration::from_millis(50));
                if last.elapsed() < Duration::from_secs(1) {
                    continue;
                }
                last = Instant::now();
                if shared.config.read().appendfsync == AppendFsync::Everysec {
                    if let Err(e) = shared.store.sync_if_dirty() {
                        eprintln!("strata-server: background sync failed: {e}");
                    }
                }
            }
            let _ = shared.store.sync_if_dirty();
        })
        .unwrap_or_else(|_| std::thread::spawn(|| {}))
}

/// Active expiry (`expire.rs`): one cycle every 100 ms until shutdown.
fn spawn_expire_thread(shared: Arc<Shared>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("strata-expire".to_string())
        .spawn(move || {
            let rx = shared.shutdown_receiver();
            while !*rx.borrow() {
                std::thread::sleep(crate::expire::PERIOD);
                // As Redis: no active expiry while clients are paused.
                // A replica leaves expiry to its master's DELs.
                if shared.pause.expiry_paused() || shared.store.keeps_expired() {
                    continue;
                }
                if let Err(e) =
                    crate::expire::active_expire_cycle(&shared.store, crate::expire::CYCLE_BUDGET)
                {
                    eprintln!("strata-server: active expiry failed: {e}");
                }
            }
        })
        .unwrap_or_else(|_| std::thread::spawn(|| {}))
}

async fn serve(
    shared: Arc<Shared>,
    listeners: Vec<StdListener>,
    unix: Option<UnixStdListener>,
    opts: StartOptions,
) -> Result<(), ServerError> {
    let mut accepts = Vec::new();
    #[cfg(unix)]
    if let Some(u) = unix {
        let u = tokio::net::UnixListener::from_std(u).map_err(|source| ServerError::Io {
            what: "cannot register the unix socket".to_string(),
            source,
        })?;
        accepts.push(tokio::spawn(unix_accept_loop(shared.clone(), u)));
    }
    #[cfg(not(unix))]
    let _ = unix;
    for l in listeners {
        let l = TcpListener::from_std(l).map_err(|source| ServerError::Io {
            what: "cannot register the listener".to_string(),
            source,
        })?;
        accepts.push(tokio::spawn(accept_loop(shared.clone(), l)));
    }
    let mut stop = shared.shutdown_receiver();
    if opts.handle_signals {
        let s = shared.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            s.request_shutdown();
        });
    }
    stopped(&mut stop).await;
    for a in accepts {
        let _ = a.await;
    }
    // Connections finish what they read; give them a few seconds.
    let deadline = Instant::now() + Duration::from_secs(5);
    while shared.stats.connected_clients.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Resolves once shutdown was requested.
pub(crate) async fn stopped(rx: &mut watch::Receiver<bool>) {
    loop {
        let done = *rx.borrow_and_update();
        if done || rx.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

/// Redis's reply to a client beyond `maxclients`.
const MAXCLIENTS: &str = "-ERR max number of clients reached\r\n";

/// Whether `maxclients` clients are connected (counting the refusal if so).
fn full(shared: &Shared, maxclients: usize) -> bool {
    let full = shared.stats.connected_clients.load(Ordering::Relaxed) >= maxclients;
    if full {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
    }
    full
}

/// Writes `msg` to a refused client and closes it, without holding up the accept loop.
fn refuse<S: tokio::io::AsyncWrite + Unpin + Send + 'static>(mut sock: S, msg: &'static str) {
    tokio::spawn(async move {
        let _ = sock.write_all(msg.as_bytes()).await;
        let _ = sock.shutdown().await;
    });
}

/// Counts an accepted client.
pub(crate) fn admit(shared: &Shared) {
    shared
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    shared
        .stats
        .connected_clients
        .fetch_add(1, Ordering::Relaxed);
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut stop = shared.shutdown_receiver();
    loop {
        let (sock, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(_) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => return,
        };
        let _ = sock.set_nodelay(true);
        let (maxclients, denied, keepalive) = {
            let c = shared.config.read();
            // Redis: while the default user needs no password.
            let open = shared.acl.default_user().read().nopass;
            let denied = c.protected_mode && open && !addr.ip().is_loopback();
            (c.maxclients, denied, c.tcp_keepalive_secs)
        };
        if keepalive > 0 {
            set_keepalive(&sock, keepalive);
        }
        let refusal = if full(&shared, maxclients) {
            Some(MAXCLIENTS)
        } else if denied {
            Some(DENIED)
        } else {
            None
        };
        if let Some(msg) = refusal {
            refuse(sock, msg);
            continue;
        }
        admit(&shared);
        let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let info = shared.register_client(addr.to_string(), laddr, raw_fd(&sock), false);
        tokio::spawn(conn::serve(shared.clone(), sock, info));
    }
}

/// Redis's `anetKeepAlive`: probes after `secs` idle, then every `secs / 3`, 3 of them.
fn set_keepalive(sock: &tokio::net::TcpStream, secs: u64) {
    let ka = socket2::TcpKeepalive::new().with_time(Duration::from_secs(secs));
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd"))]
    let ka = ka
        .with_interval(Duration::from_secs((secs / 3).max(1)))
        .with_retries(3);
    let _ = socket2::SockRef::from(sock).set_tcp_keepalive(&ka);
}

#[cfg(unix)]
fn raw_fd<T: std::os::fd::AsRawFd>(s: &T) -> i64 {
    i64::from(s.as_raw_fd())
}

#[cfg(not(unix))]
fn raw_fd<T>(_: &T) -> i64 {
    -1
}

#[cfg(unix)]
type UnixStdListener = std::os::unix::net::UnixListener;
#[cfg(not(unix))]
type UnixStdListener = ();

/// Listens on `path` (a stale socket file is removed first, as Redis does), with `perm`
/// (octal; 0 leaves the umask's).
#[cfg(unix)]
fn bind_unix(path: &std::path::Path, perm: u32) -> Result<UnixStdListener, ServerError> {
    use std::os::unix::fs::PermissionsExt;
    let io = |source| ServerError::Io {
        what: format!("cannot listen on unix socket {}", path.display()),
        source,
    };
    let _ = std::fs::remove_file(path);
    let l = UnixStdListener::bind(path).map_err(io)?;
    if perm != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm)).map_err(io)?;
    }
    l.set_nonblocking(true).map_err(io)?;
    Ok(l)
}

#[cfg(not(unix))]
fn bind_unix(path: &std::path::Path, _perm: u32) -> Result<UnixStdListener, ServerError> {
    Err(ConfigError(format!(
        "unixsocket {}: no Unix sockets on this platform",
        path.display()
    ))
    .into())
}

#[cfg(unix)]
async fn unix_accept_loop(shared: Arc<Shared>, listener: tokio::net::UnixListener) {
    let mut stop = shared.shutdown_receiver();
    let path = shared
        .unix_path
        .as_ref()
        .map(|p| format!("{}:0", p.display()))
        .unwrap_or_default();
    loop {
        let sock = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => return,
        };
        let maxclients = shared.config.read().maxclients;
        if full(&shared, maxclients) {
            refuse(sock, MAXCLIENTS);
            continue;
        }
        admit(&shared);
        let info = shared.register_client(path.clone(), path.clone(), raw_fd(&sock), true);
        tokio::spawn(conn::serve(shared.clone(), sock, info));
    }
}

/// Hands `lfu-log-factor` and `lfu-decay-time` to the access table (read on every access,
/// so not through the configuration's lock).
fn set_lfu_params(store: &Store, c: &Config) {
    let int = |name: &str, default: u32| {
        c.get(name)
            .and_then(|v| v.parse::<i64>().ok())
            .map_or(default, |v| v.clamp(0, i64::from(u32::MAX)) as u32)
    };
    store
        .access
        .set_params(int("lfu-log-factor", 10), int("lfu-decay-time", 1));
}

/// Hands `notify-keyspace-events` and the subscribers' output limit to the store's
/// notifier (`notify.rs`).
fn configure_notify(store: &Store, c: &Config) {
    // Client-side caching's table bound (`tracking.rs`), validated as an integer.
    let max_keys = c
        .tuning
        .get("tracking-table-max-keys")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1_000_000);
    store.tracking.set_max_keys(max_keys);
    // The stored form: CONFIG GET's hides `n` under `A`, which still acts.
    let events = c
        .tuning
        .get("notify-keyspace-events")
        .cloned()
        .unwrap_or_default();
    store.notify.configure(&events, c.output_limits[2]);
}
