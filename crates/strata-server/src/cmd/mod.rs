//! Commands: the declarative command table (each family module registers its own entries)
//! and the one dispatch function that holds the order Redis's `processCommand` (server.c)
//! checks things in: lookup (unknown command / subcommand), arity, authentication, then the
//! command, which parses its arguments through [`Args`] and replies through the reply
//! builder.
//!
//! Layer: commands (the table and the families); its dispatcher (`dispatch`, `run_locked`) is execution.

mod acl;
mod admin;
pub mod args;
mod bitfield;
mod bits;
mod client;
mod cluster;
mod cluster_views;
mod command;
mod connection;
pub(crate) mod dump;
pub(crate) mod functions;
mod geo;
mod hashes;
mod hll;
mod keyspace;
mod latency;
mod lists;
mod lolwut;
pub(crate) mod members;
mod memory;
pub(crate) mod migrate;
pub mod multi;
mod protected;
pub(crate) mod pubsub;
pub(crate) mod replication;
mod save;
pub(crate) mod scripting;
mod server;
mod sets;
mod sort;
mod stream_groups;
mod stream_info;
mod stream_read;
mod streams;
mod strings;
mod swapdb;
pub mod table;
mod tracking;
mod zblocking;
mod zsetops;
pub mod zsets;

// Each family's tests over a whole in-memory server (`test_server.rs`), beside the family.
#[cfg(test)]
mod bits_tests;
#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod effects_streams_tests;
#[cfg(test)]
mod effects_tests;
#[cfg(test)]
mod effects_walk_tests;
#[cfg(test)]
mod geo_tests;
#[cfg(test)]
mod hashes_tests;
#[cfg(test)]
mod hll_tests;
#[cfg(test)]
mod keyspace_tests;
#[cfg(test)]
mod lists_tests;
#[cfg(test)]
mod migrate_tests;
#[cfg(test)]
mod multi_tests;
#[cfg(test)]
mod pubsub_tests;
#[cfg(test)]
mod scripting_tests;
#[cfg(test)]
mod sets_tests;
#[cfg(test)]
mod sort_tests;
#[cfg(test)]
mod streams_tests;
#[cfg(test)]
mod strings_tests;
#[cfg(test)]
mod zsets_tests;

use crate::clients::ClientInfo;
use crate::protocol::reply::ReplyBuf;
use crate::server::Shared;
pub use args::Args;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// A command's flags (Redis's `CMD_*`), as COMMAND INFO names them.
pub mod flag {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const NOSCRIPT: u32 = 1 << 4;
    pub const LOADING: u32 = 1 << 5;
    pub const STALE: u32 = 1 << 6;
    pub const FAST: u32 = 1 << 7;
    pub const NO_AUTH: u32 = 1 << 8;
    pub const SENTINEL: u32 = 1 << 9;
    pub const ALLOW_BUSY: u32 = 1 << 10;
    pub const NO_MULTI: u32 = 1 << 11;
    pub const BLOCKING: u32 = 1 << 12;
    pub const NO_ASYNC_LOADING: u32 = 1 << 13;
    /// Not logged in the slow log itself (EXEC: its commands are).
    pub const SKIP_SLOWLOG: u32 = 1 << 14;
    pub const PUBSUB: u32 = 1 << 15;
    pub const SKIP_MONITOR: u32 = 1 << 16;
    /// Writes although read-only to clients (PFCOUNT stores its recomputed count); COMMAND
    /// INFO does not list it, as Redis 7.0 does not: routing finds it in the key specs (RW).
    pub const MAY_REPLICATE: u32 = 1 << 17;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 18;
    /// Redis computes it: keys that the legacy `(first, last, step)` range cannot find.
    pub const MOVABLE_KEYS: u32 = 1 << 19;
    pub const ASKING: u32 = 1 << 20;
    pub const ONLY_SENTINEL: u32 = 1 << 21;
    pub const PROTECTED: u32 = 1 << 22;

    /// Names as COMMAND INFO prints them.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (SENTINEL, "sentinel"),
        (ONLY_SENTINEL, "only_sentinel"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (PROTECTED, "protected"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
        (ASKING, "asking"),
    ];
}

/// A command's implementation.
pub type Handler = fn(&mut Ctx<'_>, &mut Args) -> CmdResult;

pub use table::{cmd, cmd_with, Entry, Spec};

/// Per-connection state commands may read and change.
#[derive(Clone)]
pub struct ConnState {
    pub id: u64,
    /// This client's registry entry (what CLIENT LIST shows of it).
    pub info: Arc<ClientInfo>,
    /// The physical database this client's commands use now: [`ConnState::selected`]
    /// through the database map, fixed when a request is routed (design §13.19).
    pub db: u8,
    /// The logical database SELECT chose (what clients see: CLIENT LIST, MONITOR).
    pub selected: u8,
    pub authenticated: bool,
    /// The ACL user this connection runs as (`default` until AUTH).
    pub user: crate::acl::UserRef,
    pub name: Option<Bytes>,
    /// Close the connection once the pending replies are written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// CLIENT REPLY OFF: replies are dropped until CLIENT REPLY ON.
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: the next command's reply is dropped.
    pub skip_next: bool,
    /// After MULTI: the queued commands (`None` outside a transaction).
    pub multi: Option<multi::MultiState>,
    /// EXEC is running the queued commands: blocking commands must not block.
    pub in_exec: bool,
    /// A script is running this command (MONITOR shows it as `lua`).
    pub in_script: bool,
    /// This connection's pub/sub mailbox while it holds a subscription (Redis's
    /// `CLIENT_PUBSUB`); `None` otherwise.
    pub sub: Option<Arc<crate::pubsub::Subscriber>>,
    /// This connection's mailbox for client-side caching's pushes (`tracking.rs`), made by
    /// CLIENT TRACKING ON.
    pub push: Option<Arc<crate::pubsub::Subscriber>>,
    /// The replication link's client (Redis's `CLIENT_MASTER`): its writes are the master's,
    /// never refused as READONLY, MASTERDOWN or LOADING (`crate::replica`).
    pub master: bool,
    /// Effects of the running unit to append to the replication log (`repl/`): `Some`
    /// while the unit holds a sequencer guard; each entry is (logical database, argv).
    pub repl_pending: Option<Vec<(u8, crate::repl::Argv)>>,
    /// What this client said with REPLCONF, and the PSYNC hand-off once it asked to sync.
    pub replica: Option<Box<ReplicaConn>>,
    /// ASKING was sent: the next command (or the next EXEC) may use an importing slot.
    pub asking: bool,
    /// READONLY: a replica in cluster mode serves this client's reads of its master's
    /// slots.
    pub readonly: bool,
}

impl ConnState {
    /// Whether the connection is held to the subscriber's commands, PING reply and output
    /// class: it has a mailbox (a subscription or MONITOR) and, but while monitoring, the
    /// registry still counts a subscription of it (a cluster slot leaving this shard ends
    /// shard channel subscriptions, `pubsub.rs`, while the connection keeps its mailbox).
    pub fn in_pubsub_mode(&self) -> bool {
        self.sub.is_some()
            && (self.info.is_subscriber() || self.info.monitor.load(Ordering::Relaxed))
    }
}

/// A connection that talks to this server as a replica.
#[derive(Default)]
pub struct ReplicaConn {
    pub conf: crate::repl::psync::ReplConf,
    /// Set by PSYNC/SYNC: the connection becomes the replica's feed after the reply.
    pub handoff: Option<crate::repl::serve::Handoff>,
}

impl Clone for ReplicaConn {
    /// A worker's copy of the connection never carries the hand-off.
    fn clone(&self) -> Self {
        ReplicaConn {
            conf: self.conf.clone(),
            handoff: None,
        }
    }
}

/// What a command runs with.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    /// Where the command's reads and writes go (`store/tx.rs`): a worker's group, an EXEC's
    /// buffered writes, or the front; chosen once by whoever runs the command.
    pub tx: &'a crate::store::Tx<'a>,
    pub conn: &'a mut ConnState,
    pub reply: &'a mut ReplyBuf,
    /// Keys beyond those the command's key specs name whose stripes the dispatcher holds
    /// for this run, because the command asked for them ([`CmdError::NeedKeys`]); empty
    /// for almost every command.
    pub extra_keys: Vec<Bytes>,
    /// The wait a blocking command leaves for its connection when it blocks
    /// (`blocking::Registry::block`); the connection awaits it after the dispatch.
    pub blocked: Option<crate::blocking::Wait>,
    /// Set by a command on a worker that cannot finish there (a script reaching a key it
    /// did not declare): it rolled its writes back and replied nothing; the connection runs
    /// it again on its own thread (`exec::submit`).
    pub rerun_inline: bool,
    /// What this run propagates to replicas and the replication log (`effects.rs`).
    pub effects: crate::effects::Effects,
    /// Blocked clients this run served on a worker, whose replies wait for the group's
    /// write (`blocking.rs`); the runner hands them over after it.
    pub wakes: crate::blocking::Wakes,
}

impl<'a> Ctx<'a> {
    /// The context of one command run: the per-run fields start empty.
    pub fn new(
        shared: &'a Shared,
        tx: &'a crate::store::Tx<'a>,
        conn: &'a mut ConnState,
        reply: &'a mut ReplyBuf,
    ) -> Ctx<'a> {
        Ctx {
            shared,
            tx,
            conn,
            reply,
            extra_keys: Vec::new(),
            blocked: None,
            rerun_inline: false,
            effects: Default::default(),
            wakes: Default::default(),
        }
    }
}

impl Ctx<'_> {
    /// Redis's `authRequired`: the default user needs a password and this client has not
    /// authenticated.
    pub fn auth_required(&self) -> bool {
        !self.conn.authenticated && self.shared.acl.auth_required()
    }

    /// Whether the `lazyfree-lazy-*` directive `name` is on: a deletion it governs
    /// propagates as UNLINK instead of DEL (`effects.rs`).
    pub fn lazyfree(&self, name: &str) -> bool {
        crate::effects::lazy(&self.shared.config.read(), name)
    }
}

pub use crate::error::{CmdError, CmdResult, ERR_WRONGTYPE};

/// The live metadata of `key` in the client's database if it is of type `t`; `None` if the
/// key does not exist; `WRONGTYPE` if it holds another type. Counts a keyspace hit or miss.
pub fn lookup_typed(
    ctx: &Ctx<'_>,
    key: &[u8],
    t: crate::store::RType,
) -> Result<Option<crate::store::Meta>, CmdError> {
    Ok(ctx.tx.lookup_read_typed(ctx.conn.db, key, t)?)
}

/// The command table: Redis's metadata joined with the families' handlers (`table.rs`).
pub fn table() -> &'static table::Table {
    static TABLE: OnceLock<table::Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        table::build(&[
            connection::COMMANDS,
            acl::COMMANDS,
            client::COMMANDS,
            tracking::COMMANDS,
            server::COMMANDS,
            command::COMMANDS,
            admin::COMMANDS,
            strings::COMMANDS,
            bits::COMMANDS,
            keyspace::COMMANDS,
            hashes::COMMANDS,
            sets::COMMANDS,
            save::COMMANDS,
            lists::COMMANDS,
            multi::COMMANDS,
            pubsub::COMMANDS,
            zsets::COMMANDS,
            dump::COMMANDS,
            hll::COMMANDS,
            scripting::COMMANDS,
            functions::COMMANDS,
            geo::COMMANDS,
            sort::COMMANDS,
            protected::COMMANDS,
            latency::COMMANDS,
            lolwut::COMMANDS,
            memory::COMMANDS,
            streams::COMMANDS,
            replication::COMMANDS,
            swapdb::COMMANDS,
            cluster::COMMANDS,
        ])
    })
}

/// Every top-level command Strata implements.
pub fn all_commands() -> &'static [&'static Spec] {
    &table().commands
}

/// What a request's name (and subcommand) finds in the table.
#[derive(Clone, Copy)]
pub enum Found {
    /// The command (subcommand resolved) and how many leading arguments name it.
    Command(&'static Spec, usize),
    UnknownCommand,
    /// A container without the subcommand named by `argv[1]`.
    UnknownSubcommand(&'static Spec),
}

/// Looks `argv`'s command up: the name, then a container's subcommand.
pub fn find_command(argv: &[Bytes]) -> Found {
    let Some(spec) = argv.first().and_then(|n| table().get(n)) else {
        return Found::UnknownCommand;
    };
    if spec.subcommands.is_empty() || argv.len() < 2 {
        return Found::Command(spec, 1);
    }
    match spec.subcommand(&argv[1]) {
        Some(sub) => Found::Command(sub, 2),
        None => Found::UnknownSubcommand(spec),
    }
}

/// The table entry (subcommand resolved) `argv` runs, if it names one and has its arity.
pub fn lookup_argv(argv: &[Bytes]) -> Option<&'static Spec> {
    match find_command(argv) {
        Found::Command(spec, _) if spec.arity_ok(argv.len()) => Some(spec),
        _ => None,
    }
}

/// An argument as C's `%.*s` prints it (Redis formats its errors with it): up to the first
/// NUL byte and at most `max` bytes.
pub fn cstr(b: &[u8], max: usize) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(max);
    &b[..end]
}

/// Redis's unknown-command error: the name and the first arguments, up to 128 bytes.
fn unknown_command(argv: &[Bytes]) -> Vec<u8> {
    let mut args = Vec::new();
    for a in &argv[1..] {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push(b'\'');
        args.extend_from_slice(cstr(a, room));
        args.extend_from_slice(b"' ");
    }
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend_from_slice(cstr(&argv[0], 128));
    msg.extend_from_slice(b"', with args beginning with: ");
    msg.extend_from_slice(&args);
    msg
}

/// What became of a request, for INFO commandstats.
enum Outcome {
    /// No such command or subcommand, or queued in MULTI: no command statistics.
    Uncounted,
    /// Refused before it ran (`rejected_calls`).
    Rejected(&'static str),
    /// Ran for this many microseconds.
    Ran(&'static str, u64),
}

/// Runs one request (`argv` is not empty) and writes its reply; in MULTI, checks and queues
/// it instead (`multi.rs`). Counts it and its error replies for INFO commandstats and
/// errorstats (`cmdstats.rs`).
pub fn dispatch(ctx: &mut Ctx<'_>, argv: Vec<Bytes>) {
    let found = find_command(&argv);
    dispatch_found(ctx, argv, found);
}

/// [`dispatch`] for a request already looked up (a connection resolves each request once,
/// to route it, and hands the result on).
pub fn dispatch_found(ctx: &mut Ctx<'_>, argv: Vec<Bytes>, found: Found) {
    // Errors written before this request (none in the normal course) are not its own.
    let _ = ctx.reply.take_errors();
    let asking = matches!(found, Found::Command(s, _) if s.name == "asking");
    let outcome = run(ctx, argv, found);
    // Redis's resetClient: ASKING holds for one command, or until EXEC.
    if !asking && ctx.conn.multi.is_none() {
        ctx.conn.asking = false;
    }
    let (errors, codes) = ctx.reply.take_errors();
    let stats = &ctx.shared.cmdstats;
    match outcome {
        Outcome::Uncounted => {}
        Outcome::Rejected(name) => stats.rejected(name),
        Outcome::Ran(name, micros) => {
            stats.call(name, micros, errors > 0);
            ctx.shared.latency.histograms.record(name, micros);
        }
    }
    stats.errors(errors, codes);
}

fn run(ctx: &mut Ctx<'_>, argv: Vec<Bytes>, found: Found) -> Outcome {
    let queueing = ctx.conn.multi.is_some()
        && !matches!(found, Found::Command(s, _) if s.has_trait(table::traits::RUNS_IN_MULTI));
    if !queueing {
        ctx.shared
            .stats
            .commands_processed
            .fetch_add(1, Ordering::Relaxed);
    }
    let (spec, skip) = match found {
        Found::Command(spec, skip) => (spec, skip),
        Found::UnknownCommand => {
            multi::reject(ctx, false, &unknown_command(&argv));
            return Outcome::Uncounted;
        }
        Found::UnknownSubcommand(container) => {
            let mut msg = b"ERR unknown subcommand '".to_vec();
            msg.extend_from_slice(cstr(&argv[1], 128));
            msg.extend_from_slice(
                format!("'. Try {} HELP.", container.name.to_ascii_uppercase()).as_bytes(),
            );
            multi::reject(ctx, false, &msg);
            return Outcome::Uncounted;
        }
    };
    let is_exec = spec.name == "exec";
    let full_name = spec.name;
    if !spec.arity_ok(argv.len()) {
        let msg = format!("ERR wrong number of arguments for '{full_name}' command");
        multi::reject(ctx, is_exec, msg.as_bytes());
        return Outcome::Rejected(full_name);
    }
    // A container called with its arity but no subcommand has nothing to run (Redis's
    // containers all need one, so the arity check above answers first).
    let Some(handler) = spec.handler else {
        let msg = format!("ERR wrong number of arguments for '{full_name}' command");
        multi::reject(ctx, is_exec, msg.as_bytes());
        return Outcome::Rejected(full_name);
    };
    if spec.flags & flag::NO_AUTH == 0 && ctx.auth_required() {
        multi::reject(ctx, is_exec, b"NOAUTH Authentication required.");
        return Outcome::Rejected(full_name);
    }
    if ctx.conn.multi.is_some() && spec.flags & flag::NO_MULTI != 0 {
        multi::reject(ctx, false, b"ERR Command not allowed inside a transaction");
        return Outcome::Rejected(full_name);
    }
    // The user's permissions (`cmd/acl.rs`), before anything else may refuse the command.
    if let Err(msg) = acl::permit(ctx, spec, &argv) {
        multi::reject(ctx, is_exec, &msg);
        return Outcome::Rejected(full_name);
    }
    // Cluster mode: is the request's slot served here (`cluster/route.rs`)? One pointer
    // test otherwise.
    if ctx.shared.cluster.is_some() {
        if let Some(msg) = cluster::redirect(ctx, spec, &argv) {
            if is_exec {
                multi::discard_transaction(ctx);
                ctx.reply.error(&msg);
            } else {
                multi::reject(ctx, false, msg.as_bytes());
            }
            return Outcome::Rejected(full_name);
        }
    }
    // Redis's processCommand: no writes (nor PING, nor an EXEC of writes) while the log
    // cannot be written.
    let refuses_when_misconf = spec.flags & flag::WRITE != 0
        || spec.name == "ping"
        || (is_exec && multi::queued_writes(ctx));
    if refuses_when_misconf {
        if let Some(m) = misconf(ctx.shared) {
            multi::reject(ctx, is_exec, m.as_bytes());
            return Outcome::Rejected(full_name);
        }
    }
    // A replica's refusals (READONLY, MASTERDOWN, LOADING), in Redis's processCommand order.
    let replica_check = crate::replica::Check {
        writes: spec.flags & flag::WRITE != 0 || (is_exec && multi::queued_writes(ctx)),
        stale_ok: spec.flags & flag::STALE != 0,
        async_loading_denied: spec.flags & flag::NO_ASYNC_LOADING != 0,
        from_master: ctx.conn.master,
    };
    if let Some(msg) = ctx.shared.replication.refusal(ctx.shared, &replica_check) {
        multi::reject(ctx, is_exec, msg.as_bytes());
        return Outcome::Rejected(full_name);
    }
    if let Some(busy) = scripting::busy_error(ctx.shared, spec, ctx.conn) {
        multi::reject(ctx, is_exec, busy.as_bytes());
        return Outcome::Rejected(full_name);
    }
    if queueing {
        multi::queue(ctx, argv);
        return Outcome::Uncounted;
    }
    let info = ctx.conn.info.clone();
    info.touch();
    // Inside EXEC, CLIENT LIST shows EXEC's name and arguments, as Redis.
    let nested = ctx.conn.in_exec;
    if !nested {
        let mut p = info.published.lock();
        // The name is copied only when it changes (a pipeline of one command: never).
        if p.cmd != full_name {
            p.cmd.clear();
            p.cmd.push_str(full_name);
        }
        drop(p);
        info.argv_mem
            .store(argv.iter().map(|a| a.len()).sum(), Ordering::Relaxed);
    }
    // The slow log copies the arguments only for a command it logs (`args` keeps them).
    let loggable = full_name != "auth" && full_name != "hello" && !spec.has(flag::SKIP_SLOWLOG);
    // Redis's processCommand: a RESP2 subscriber may only (un)subscribe, ping, quit, reset.
    if ctx.conn.in_pubsub_mode()
        && ctx.reply.proto == crate::protocol::reply::Proto::Resp2
        && !spec.has_trait(table::traits::WHILE_SUBSCRIBED)
    {
        let shown = info.published.lock().cmd.clone();
        ctx.reply.error(&format!(
            "ERR Can't execute '{shown}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / \
             QUIT / RESET are allowed in this context"
        ));
        return Outcome::Rejected(full_name);
    }
    // Kept for MONITOR only while a client monitors (`monitor.rs`). Scripts (flagged
    // `skip_monitor`) are shown as they start, so that their commands follow them, as
    // Redis's evalCommand and fcallCommand feed the monitors themselves.
    let mut monitored = (ctx.shared.monitors.any() && spec.flags & flag::ADMIN == 0)
        .then(|| crate::monitor::redacted(full_name, &argv));
    if spec.has(flag::SKIP_MONITOR) {
        if let Some(argv) = monitored.take() {
            feed_monitors(ctx, &argv);
        }
    }
    // Client-side caching (`cmd/tracking.rs`): one atomic load while no client tracks.
    let tracking_state = &ctx.tx.tracking;
    let tracking = if tracking_state.active() {
        tracking::before_command(ctx, spec, &argv);
        Some(crate::tracking::Current::enter(tracking_state, ctx.conn.id))
    } else {
        None
    };
    let mut args = Args::new(argv, skip);
    let started = Instant::now();
    // Clients blocked on keys the command wrote are served as it ends (`blocking.rs`); for
    // the commands of an EXEC, once the whole EXEC has been applied (as Redis serves them
    // after EXEC: `MULTI; LPUSH k a; LLEN k; EXEC` sees the element).
    let shared = ctx.shared;
    // What the command propagates (`effects.rs`): its group is handed on before the clients
    // it unblocks are served, whose pops follow as groups of their own.
    // Effects the replication log collected in `run_locked` are gone from the pending
    // list by then; what is left (a read's lazy expiry, a test's recorder) goes to the sink.
    let _scope = crate::effects::enter();
    let result = if nested {
        run_locked(ctx, spec, handler, &mut args, skip)
    } else {
        let tx = ctx.tx;
        let (r, wakes) = crate::blocking::around_command(shared, tx, || {
            let r = run_locked(ctx, spec, handler, &mut args, skip);
            let group = crate::effects::take_pending();
            shared.propagation.emit(crate::effects::wrap(group));
            r
        });
        ctx.wakes.append(wakes);
        for served in crate::effects::take_pending() {
            shared.propagation.emit(vec![served]);
        }
        r
    };
    let micros = started.elapsed().as_micros() as u64;
    if tracking.is_some() {
        tracking::after_command(ctx, spec);
    }
    drop(tracking);
    if let Err(e) = result {
        match e {
            CmdError::Reply(m) => ctx.reply.error_bytes(&m),
            // The write that found the log failing gets the same answer as the ones after it.
            CmdError::Store(_) if refuses_when_misconf && misconf(ctx.shared).is_some() => {
                ctx.reply.error(&misconf(ctx.shared).unwrap_or_default())
            }
            CmdError::Store(_) | CmdError::NeedKeys(_) => ctx.reply.error(&e.message()),
        }
    }
    {
        let mut p = info.published.lock();
        p.db = ctx.conn.selected;
        p.name.clone_from(&ctx.conn.name);
        p.resp = if ctx.reply.proto == crate::protocol::reply::Proto::Resp3 {
            3
        } else {
            2
        };
    }
    if !nested {
        info.argv_mem.store(0, Ordering::Relaxed);
    }
    if let Some(argv) = monitored {
        feed_monitors(ctx, &argv);
    }
    let latency_ms = ctx.shared.latency.threshold_ms();
    // Redis's latencyAddSampleIfNeeded in call(): whole milliseconds.
    if latency_ms > 0 && micros / 1000 >= latency_ms {
        let event = if spec.has(flag::FAST) {
            "fast-command"
        } else {
            "command"
        };
        let now_s = crate::store::now_ms() / 1000;
        ctx.shared.latency.add(event, now_s, micros / 1000);
    }
    if loggable && ctx.shared.slowlog.logs(micros) {
        let max_len = ctx.shared.config.read().slowlog_max_len;
        let name = ctx.conn.name.clone().unwrap_or_default();
        ctx.shared
            .slowlog
            .push(args.argv(), micros, info.addr.clone(), name, max_len);
    }
    Outcome::Ran(full_name, micros)
}

/// Runs `handler` holding the stripes of the keys the command names (`docs/design.md`
/// §13.2): taken here, from the key specs, never by a handler. Exclusive, or shared for a
/// blind write (`BLIND_WRITE`). None on a worker (the command's group holds them shared),
/// nor for a script (its transaction takes its declared keys' stripes, planned from the same
/// specs), a snapshot read (MGET) or a command without keys (FLUSHDB, KEYS, SCAN: as
/// before, they exclude no writer). Every stripe when the specs cannot parse the arguments
/// (a malformed count: the command replies its error). In an EXEC or a script, the stripes
/// are the transaction's (`Tx::lock_for_command`). Released when the handler returns:
/// on the connection's thread its write is done by then. The stripes are taken in
/// ascending order, each command's at once, and workers never wait for one: no deadlock.
fn run_locked(
    ctx: &mut Ctx<'_>,
    spec: &'static Spec,
    handler: Handler,
    args: &mut Args,
    skip: usize,
) -> CmdResult {
    let on_worker = ctx.tx.on_worker();
    let direct = on_worker
        || spec.has_trait(table::traits::SCRIPT | table::traits::SNAPSHOT_READ)
        || !spec.has_keys();
    let top = !ctx.conn.in_exec && !ctx.conn.in_script;
    loop {
        let _guard = if direct {
            crate::store::KeyGuard::default()
        } else {
            lock_keys(ctx, spec, args.argv())
        };
        // SWAPDB changes the database map only under every stripe: once a command holds its
        // stripes, the client's physical database stays what it is for the run (§13.19).
        let db = ctx.tx.dbs.physical(ctx.conn.selected);
        if top && !on_worker && db != ctx.conn.db {
            ctx.conn.db = db;
            continue;
        }
        // The sequencer (`repl/sequencer.rs`): a top-level command on this thread holds its
        // guard from before its write to after its append, taken after its stripes; on a
        // worker the group's completion appends (`exec.rs`). One atomic load while no
        // replica ever connected.
        // Only what may write takes it: a command that waits (WAIT) must not hold off a
        // full sync's cut.
        let may_write = spec.has(flag::WRITE)
            || spec.has_trait(table::traits::MAY_REPLICATE | table::traits::SCRIPT)
            || spec.name == "exec";
        let seq = if top && may_write && !on_worker && !ctx.conn.master {
            ctx.shared.master.seq.enter()
        } else {
            None
        };
        if seq.is_some() {
            ctx.conn.repl_pending = Some(Vec::new());
        }
        let writes_before = crate::effects::writes();
        let r = handler(ctx, args);
        // What it propagates (`effects.rs`), computed while its stripes are held; the unit
        // being collected for the replication log (this command's, its EXEC's or script's,
        // its worker group's) takes it here, before the stripes are released.
        finish_effects(ctx, spec, args.argv(), writes_before);
        if let Some(pending) = ctx.conn.repl_pending.as_mut() {
            pending.extend(crate::effects::take_pending());
        }
        if seq.is_some() {
            let unit = ctx.conn.repl_pending.take().unwrap_or_default();
            if r.is_ok() {
                ctx.shared.master.append_unit(&unit, unit.len() > 1);
            }
        }
        drop(seq);
        match r {
            Err(CmdError::NeedKeys(more)) if !more.is_empty() && ctx.extra_keys.len() < 4096 => {
                ctx.extra_keys.extend(more);
                args.restart(skip);
            }
            r => {
                ctx.extra_keys.clear();
                return r;
            }
        }
    }
}

/// Adds what the command just run propagates to its top-level command's group
/// (`effects.rs`): the keys its lookups found expired (`DEL`, or `UNLINK` under
/// `lazyfree-lazy-expire`), then its own effects, dirty if the store wrote for it. EXEC and
/// scripts never propagate themselves (their commands do), as Redis 7.0's `call()`.
fn finish_effects(ctx: &mut Ctx<'_>, spec: &Spec, argv: &[Bytes], writes_before: u64) {
    let expired = crate::effects::take_expired();
    let effects = std::mem::take(&mut ctx.effects);
    // A run whose writes were rolled back to run again elsewhere propagates nothing.
    if ctx.rerun_inline {
        let _ = crate::effects::take_pending();
        return;
    }
    if !ctx.shared.propagation.active() {
        return;
    }
    ctx.effects = effects;
    if crate::effects::writes() != writes_before {
        ctx.effects.dirty();
    }
    if spec.name == "exec" || spec.has_trait(table::traits::SCRIPT) {
        ctx.effects.prevent();
    }
    crate::effects::push_pending(expired);
    let own = ctx.effects.take(ctx.conn.selected, argv);
    crate::effects::push_pending(own);
}

/// Takes the stripes of the keys `argv` names for `spec` in the client's database (and in
/// the other database COPY ... DB and MOVE reach), with the keys the command asked for.
fn lock_keys<'s>(ctx: &Ctx<'s>, spec: &'static Spec, argv: &[Bytes]) -> crate::store::KeyGuard<'s> {
    let store = ctx.tx;
    let db = ctx.conn.db;
    let Some(keys) = table::keys(spec, argv) else {
        return store.lock_every_stripe_for_command();
    };
    let other = table::other_db_key(spec, argv).and_then(|(pos, n)| {
        let databases = ctx.shared.config.read().databases;
        (n >= 0 && (n as u64) < databases as u64)
            .then(|| (store.dbs.physical(n as u8), &argv[pos][..]))
    });
    let blind = spec.has_trait(table::traits::BLIND_WRITE);
    let named = keys.iter().map(|k| (db, &argv[k.pos][..]));
    let extra = ctx.extra_keys.iter().map(|k| (db, &k[..]));
    store.lock_for_command(named.chain(other).chain(extra), blind)
}

/// Sends a command's line to the clients in MONITOR mode (`monitor.rs`).
fn feed_monitors(ctx: &Ctx<'_>, argv: &[Bytes]) {
    let info = &ctx.conn.info;
    let origin = if ctx.conn.in_script {
        "lua".to_string()
    } else if info.unix {
        let path = ctx.shared.unix_path.as_ref();
        format!(
            "unix:{}",
            path.map_or(String::new(), |p| p.display().to_string())
        )
    } else {
        info.addr.clone()
    };
    let limit = ctx.shared.config.read().output_limits[0];
    ctx.shared
        .monitors
        .feed(ctx.conn.selected, &origin, argv, limit);
}

/// Redis's `-MISCONF` error while the database refuses writes (`error::misconf`).
pub fn misconf(shared: &Shared) -> Option<String> {
    crate::error::misconf(shared.store.db())
}

/// `HELP` subcommand replies: lines as status replies, as Redis's `addReplyHelp`.
pub fn reply_help(ctx: &mut Ctx<'_>, container: &str, lines: &[&str]) {
    ctx.reply.array(lines.len() + 3);
    ctx.reply.simple(&format!(
        "{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        ctx.reply.simple(l);
    }
    ctx.reply.simple("HELP");
    ctx.reply.simple("    Prints this help.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        // Building the table checks that every entry has Redis's metadata, once.
        let t = table();
        let mut seen = std::collections::HashSet::new();
        for s in all_commands() {
            assert!(seen.insert(s.name), "duplicate {}", s.name);
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert!(s.arity != 0, "{}", s.name);
            assert!(!(s.has(flag::WRITE) && s.has(flag::READONLY)), "{}", s.name);
            // A command either runs itself or is a container of subcommands.
            assert!(
                s.handler.is_some() || !s.subcommands.is_empty(),
                "{}",
                s.name
            );
            for (short, sub) in &s.subcommands {
                assert_eq!(sub.name, format!("{}|{short}", s.name));
                assert!(sub.handler.is_some(), "{}", sub.name);
            }
            // What lets a command run without `block_in_place` (`traits::IN_TASK`): no keys
            // (whose stripes it would wait on), no writes, and it never blocks a client.
            for e in std::iter::once(*s).chain(s.subcommands.iter().map(|(_, sub)| *sub)) {
                if e.has_trait(table::traits::IN_TASK) {
                    assert!(
                        !e.has_keys() && !e.has(flag::WRITE | flag::BLOCKING),
                        "{}",
                        e.name
                    );
                }
            }
            // Every flag Redis names is one the table understands.
            for f in &s.meta.flags {
                assert!(flag::NAMES.iter().any(|(_, n)| n == f), "{}: {f}", s.name);
            }
            for ks in s.key_specs {
                assert_eq!(ks.flags.len(), table::key_flag::names(ks.bits).count());
            }
        }
        assert!(t.get(b"get").is_some() && t.get(b"GeT").is_some());
        assert!(t.get(b"nosuch").is_none());
        assert!(
            lookup_argv(&[Bytes::from("config"), Bytes::from("GET"), Bytes::from("x")])
                .is_some_and(|s| s.name == "config|get")
        );
    }

    #[test]
    fn execution_traits_are_on_the_entries() {
        use table::traits::*;
        let t = table();
        let has = |n: &str, tr: u32| t.get(n.as_bytes()).unwrap().has_trait(tr);
        for n in ["exec", "discard", "multi", "watch", "quit", "reset"] {
            assert!(has(n, RUNS_IN_MULTI), "{n}");
        }
        for n in [
            "ping",
            "subscribe",
            "unsubscribe",
            "psubscribe",
            "punsubscribe",
        ] {
            assert!(has(n, WHILE_SUBSCRIBED), "{n}");
        }
        assert!(!has(
            "get",
            RUNS_IN_MULTI | WHILE_SUBSCRIBED | CONNECTION_THREAD
        ));
        assert!(has("copy", CONNECTION_THREAD));
    }

    /// Stripes are the dispatcher's (`run_locked`): no handler takes one by hand. Only EXEC
    /// and scripts, which own a transaction, plan theirs (from the same key specs).
    #[test]
    fn handlers_take_no_stripes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cmd");
        let mut files = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            files += 1;
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name == "mod.rs" {
                continue; // the dispatcher (and this test)
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for call in [
                "lock_for_command(",
                "lock_every_stripe_for_command(",
                "try_lock_owned(",
                "lock_owned_blocking(",
                "stripes[",
            ] {
                assert!(!text.contains(call), "{name} calls {call}");
            }
            if text.contains("lock_for_exec(") {
                assert!(
                    ["multi.rs", "scripting.rs"].contains(&name.as_str()),
                    "{name}"
                );
            }
        }
        assert!(files > 20);
    }

    #[test]
    fn unknown_command_text() {
        let argv: Vec<Bytes> = ["foo", "a", "b"].iter().map(|s| Bytes::from(*s)).collect();
        assert_eq!(
            unknown_command(&argv),
            b"ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
        assert_eq!(
            unknown_command(&argv[..1]),
            b"ERR unknown command 'foo', with args beginning with: "
        );
        assert_eq!(cstr(b"ab\0cd", 128), b"ab");
        assert_eq!(cstr(b"abcd", 2), b"ab");
    }

    #[test]
    fn arity_rules() {
        let get = table().get(b"get").unwrap(); // 2
        assert!(get.arity_ok(2) && !get.arity_ok(3));
        let del = table().get(b"del").unwrap(); // -2
        assert!(del.arity_ok(2) && del.arity_ok(9) && !del.arity_ok(1));
    }
}
