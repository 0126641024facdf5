//! Commands: the declarative command table (each family module registers its own entries)
//! and the one dispatch function that holds the order Redis's `processCommand` (server.c)
//! checks things in: lookup (unknown command / subcommand), arity, authentication, then the
//! command, which parses its arguments through [`Args`] and replies through the reply
//! builder.

mod admin;
pub mod args;
mod bits;
mod client;
mod connection;
mod docs;
mod hashes;
mod keyspace;
mod lists;
pub(crate) mod members;
pub mod multi;
mod pubsub;
mod save;
mod scripting;
mod server;
mod sets;
mod strings;
mod zblocking;
mod zsetops;
pub mod zsets;

use crate::clients::ClientInfo;
use crate::protocol::reply::ReplyBuf;
use crate::server::Shared;
pub use args::Args;
use bytes::Bytes;
use std::collections::HashMap;
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

    /// Names in COMMAND INFO order.
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
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (SENTINEL, "sentinel"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// A command's implementation.
pub type Handler = fn(&mut Ctx<'_>, &mut Args) -> CmdResult;

/// One entry of the command table (Redis's `commands/*.json`, Kvrocks' `MakeCmdAttr`).
pub struct Spec {
    /// Lower-case name (subcommands: without the container's name).
    pub name: &'static str,
    /// Redis arity: `n` exactly n arguments (name included), `-n` at least n.
    pub arity: i32,
    pub flags: u32,
    /// First key, last key (negative: from the end), step; 0, 0, 0 without keys.
    pub keys: (i32, i32, i32),
    /// Command group (COMMAND DOCS): "string", "bitmap", "hash", "set", "generic",
    /// "connection", "server".
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub handler: Handler,
    pub subcommands: &'static [Spec],
}

/// Per-connection state commands may read and change.
#[derive(Clone)]
pub struct ConnState {
    pub id: u64,
    /// This client's registry entry (what CLIENT LIST shows of it).
    pub info: Arc<ClientInfo>,
    /// Selected database.
    pub db: u8,
    pub authenticated: bool,
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
    /// This connection's pub/sub mailbox while it holds a subscription (Redis's
    /// `CLIENT_PUBSUB`); `None` otherwise.
    pub sub: Option<Arc<crate::pubsub::Subscriber>>,
}

/// What a command runs with.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub conn: &'a mut ConnState,
    pub reply: &'a mut ReplyBuf,
}

impl Ctx<'_> {
    /// Redis's `authRequired`: a password is set and this client has not authenticated.
    pub fn auth_required(&self) -> bool {
        !self.conn.authenticated && self.shared.config.read().requirepass.is_some()
    }
}

/// Why a command failed; written to the client as an error reply.
#[derive(Debug)]
pub enum CmdError {
    /// A Redis error reply, code included (`ERR syntax error`, `WRONGTYPE ...`); bytes, as
    /// texts that quote arguments hold them as sent.
    Reply(Vec<u8>),
    /// The store failed.
    Store(strata_engine::Error),
}

impl CmdError {
    pub fn reply(msg: impl Into<String>) -> CmdError {
        CmdError::Reply(msg.into().into_bytes())
    }

    /// An error text that quotes arguments (which need not be UTF-8).
    pub fn reply_bytes(msg: Vec<u8>) -> CmdError {
        CmdError::Reply(msg)
    }

    pub fn message(&self) -> String {
        match self {
            CmdError::Reply(m) => String::from_utf8_lossy(m).into_owned(),
            CmdError::Store(e) => format!("ERR {e}"),
        }
    }
}

impl From<strata_engine::Error> for CmdError {
    fn from(e: strata_engine::Error) -> Self {
        CmdError::Store(e)
    }
}

pub type CmdResult = Result<(), CmdError>;

pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The live metadata of `key` in the client's database if it is of type `t`; `None` if the
/// key does not exist; `WRONGTYPE` if it holds another type. Counts a keyspace hit or miss.
pub fn lookup_typed(
    ctx: &Ctx<'_>,
    key: &[u8],
    t: crate::store::RType,
) -> Result<Option<crate::store::Meta>, CmdError> {
    match ctx.shared.store.lookup_read(ctx.conn.db, key)? {
        Some(m) if m.rtype != t => Err(CmdError::reply(ERR_WRONGTYPE)),
        m => Ok(m),
    }
}

/// Every command, from the families' tables.
pub fn all_commands() -> &'static [&'static Spec] {
    static ALL: OnceLock<Vec<&'static Spec>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v: Vec<&'static Spec> = Vec::new();
        for family in [
            connection::COMMANDS,
            client::COMMANDS,
            server::COMMANDS,
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
            scripting::COMMANDS,
        ] {
            v.extend(family.iter());
        }
        v
    })
}

/// The command named `name` (lower case).
pub fn lookup(name: &str) -> Option<&'static Spec> {
    static MAP: OnceLock<HashMap<&'static str, &'static Spec>> = OnceLock::new();
    MAP.get_or_init(|| all_commands().iter().map(|s| (s.name, *s)).collect())
        .get(name)
        .copied()
}

/// The table entry (subcommand resolved) `argv` runs, if it names one and has its arity.
pub fn lookup_argv(argv: &[Bytes]) -> Option<&'static Spec> {
    let name = String::from_utf8_lossy(argv.first()?).to_ascii_lowercase();
    let mut spec = lookup(&name)?;
    if !spec.subcommands.is_empty() && argv.len() >= 2 {
        let sub = String::from_utf8_lossy(&argv[1]).to_ascii_lowercase();
        spec = spec.subcommands.iter().find(|s| s.name == sub)?;
    }
    arity_ok(spec.arity, argv.len()).then_some(spec)
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

fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = argc as i64;
    let arity = i64::from(arity);
    (arity > 0 && argc == arity) || (arity < 0 && argc >= -arity)
}

/// Runs one request (`argv` is not empty) and writes its reply; in MULTI, checks and queues
/// it instead (`multi.rs`).
pub fn dispatch(ctx: &mut Ctx<'_>, argv: Vec<Bytes>) {
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
    let queueing = ctx.conn.multi.is_some() && !multi::NOT_QUEUED.contains(&name.as_str());
    if !queueing {
        ctx.shared
            .stats
            .commands_processed
            .fetch_add(1, Ordering::Relaxed);
    }
    let Some(mut spec) = lookup(&name) else {
        return multi::reject(ctx, false, &unknown_command(&argv));
    };
    let is_exec = spec.name == "exec";
    let mut full_name = spec.name.to_string();
    let mut skip = 1;
    if !spec.subcommands.is_empty() && argv.len() >= 2 {
        let sub = String::from_utf8_lossy(&argv[1]).to_ascii_lowercase();
        match spec.subcommands.iter().find(|s| s.name == sub) {
            Some(s) => {
                full_name = format!("{}|{}", spec.name, s.name);
                spec = s;
                skip = 2;
            }
            None => {
                let mut msg = b"ERR unknown subcommand '".to_vec();
                msg.extend_from_slice(cstr(&argv[1], 128));
                msg.extend_from_slice(
                    format!("'. Try {} HELP.", spec.name.to_ascii_uppercase()).as_bytes(),
                );
                return multi::reject(ctx, false, &msg);
            }
        }
    }
    if !arity_ok(spec.arity, argv.len()) {
        let msg = format!("ERR wrong number of arguments for '{full_name}' command");
        return multi::reject(ctx, is_exec, msg.as_bytes());
    }
    if spec.flags & flag::NO_AUTH == 0 && ctx.auth_required() {
        return multi::reject(ctx, is_exec, b"NOAUTH Authentication required.");
    }
    if ctx.conn.multi.is_some() && spec.flags & flag::NO_MULTI != 0 {
        return multi::reject(ctx, false, b"ERR Command not allowed inside a transaction");
    }
    // Redis's processCommand: no writes (nor PING, nor an EXEC of writes) while the log
    // cannot be written.
    let refuses_when_misconf = spec.flags & flag::WRITE != 0
        || spec.name == "ping"
        || (is_exec && multi::queued_writes(ctx));
    if refuses_when_misconf {
        if let Some(m) = misconf(ctx.shared) {
            return multi::reject(ctx, is_exec, m.as_bytes());
        }
    }
    if let Some(busy) = scripting::busy_error(ctx.shared, spec, ctx.conn) {
        return multi::reject(ctx, is_exec, busy.as_bytes());
    }
    if queueing {
        return multi::queue(ctx, argv);
    }
    let info = ctx.conn.info.clone();
    info.touch();
    // Inside EXEC, CLIENT LIST shows EXEC's name and arguments, as Redis.
    let nested = ctx.conn.in_exec;
    if !nested {
        info.published.lock().cmd = full_name;
        info.argv_mem
            .store(argv.iter().map(|a| a.len()).sum(), Ordering::Relaxed);
    }
    // Kept for the slow log; cheap (reference-counted arguments).
    let logged = (!name.eq("auth") && !name.eq("hello") && spec.flags & flag::SKIP_SLOWLOG == 0)
        .then(|| argv.clone());
    // Redis's processCommand: a RESP2 subscriber may only (un)subscribe, ping, quit, reset.
    if ctx.conn.sub.is_some()
        && ctx.reply.proto == crate::protocol::reply::Proto::Resp2
        && !ALLOWED_SUBSCRIBED.contains(&name.as_str())
    {
        let full_name = info.published.lock().cmd.clone();
        return ctx.reply.error(&format!(
            "ERR Can't execute '{full_name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / \
             QUIT / RESET are allowed in this context"
        ));
    }
    let mut args = Args::new(argv, skip);
    let started = Instant::now();
    // Clients blocked on keys the command wrote are served as it ends (`blocking.rs`); for
    // the commands of an EXEC, once the whole EXEC has been applied (as Redis serves them
    // after EXEC: `MULTI; LPUSH k a; LLEN k; EXEC` sees the element).
    let shared = ctx.shared;
    let result = if nested {
        (spec.handler)(ctx, &mut args)
    } else {
        crate::blocking::around_command(shared, || (spec.handler)(ctx, &mut args))
    };
    let micros = started.elapsed().as_micros() as u64;
    if let Err(e) = result {
        match e {
            CmdError::Reply(m) => ctx.reply.error_bytes(&m),
            // The write that found the log failing gets the same answer as the ones after it.
            CmdError::Store(_) if refuses_when_misconf && misconf(ctx.shared).is_some() => {
                ctx.reply.error(&misconf(ctx.shared).unwrap_or_default())
            }
            CmdError::Store(_) => ctx.reply.error(&e.message()),
        }
    }
    {
        let mut p = info.published.lock();
        p.db = ctx.conn.db;
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
    if let Some(argv) = logged {
        let (threshold, max_len) = {
            let c = ctx.shared.config.read();
            (c.slowlog_log_slower_than, c.slowlog_max_len)
        };
        if threshold >= 0 && micros >= threshold as u64 {
            let name = ctx.conn.name.clone().unwrap_or_default();
            ctx.shared
                .slowlog
                .push(&argv, micros, info.addr.clone(), name, max_len);
        }
    }
}

/// Commands a RESP2 connection may run while it holds a subscription.
const ALLOWED_SUBSCRIBED: &[&str] = &[
    "ping",
    "subscribe",
    "ssubscribe",
    "unsubscribe",
    "sunsubscribe",
    "psubscribe",
    "punsubscribe",
    "quit",
    "reset",
];

/// Redis's `-MISCONF` error for a database whose log failed (a failed append or sync, in a
/// write or in the background sync of `appendfsync everysec`): writes are refused until
/// restart, reads go on (`strata::Db::health`). `None` while the database is healthy.
pub fn misconf(shared: &Shared) -> Option<String> {
    let e = shared.store.db().health().err()?;
    Some(format!(
        "MISCONF Errors writing to the AOF file: {}",
        strerror_of(&e.to_string())
    ))
}

/// The operating system's text for the error at the end of `msg` (`strerror`, as Redis
/// prints it: "Input/output error"), or `msg` itself if it names no OS error.
fn strerror_of(msg: &str) -> String {
    let code = msg
        .rsplit_once("(os error ")
        .and_then(|(_, rest)| rest.split(')').next())
        .and_then(|n| n.parse::<i32>().ok());
    match code {
        Some(n) => {
            let text = std::io::Error::from_raw_os_error(n).to_string();
            match text.rsplit_once(" (os error ") {
                Some((t, _)) => t.to_string(),
                None => text,
            }
        }
        None => msg.to_string(),
    }
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
    fn misconf_cause_is_the_os_text() {
        assert_eq!(
            strerror_of("shard 1 failed: I/O error in sync of /d/000004.log: Input/output error (os error 5)"),
            "Input/output error"
        );
        assert_eq!(
            strerror_of("no space (os error 28)"),
            "No space left on device"
        );
        assert_eq!(strerror_of("log failed"), "log failed");
    }

    #[test]
    fn table_is_consistent() {
        let mut seen = std::collections::HashSet::new();
        for s in all_commands() {
            assert!(seen.insert(s.name), "duplicate {}", s.name);
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert!(s.arity != 0, "{}", s.name);
            let (first, last, step) = s.keys;
            assert_eq!(first == 0, step == 0, "{}", s.name);
            assert!(first >= 0 && (first == 0 || last != 0), "{}", s.name);
            let writes = s.flags & flag::WRITE != 0;
            let reads = s.flags & flag::READONLY != 0;
            assert!(!(writes && reads), "{}", s.name);
        }
        assert!(lookup("get").is_some());
        assert!(lookup("GET").is_none());
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
        assert!(arity_ok(2, 2) && !arity_ok(2, 3));
        assert!(arity_ok(-3, 3) && arity_ok(-3, 9) && !arity_ok(-3, 2));
    }
}
