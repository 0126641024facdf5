//! CLIENT (ID, SETNAME, GETNAME, LIST, INFO, KILL, SETINFO, NO-EVICT, NO-TOUCH, REPLY, PAUSE,
//! UNPAUSE, HELP)
//! and RESET, over the client registry (`clients.rs`).
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::table::traits::*;
use super::{cmd, cmd_with, reply_help, Args, CmdError, CmdResult, Ctx, Entry};
use crate::clients::ClientInfo;
use crate::protocol::parse::parse_i64;
use crate::protocol::reply::Proto;
use std::sync::Arc;

pub static COMMANDS: &[Entry] = &[
    cmd("client|id", client_id),
    cmd("client|setname", client_setname),
    cmd("client|getname", client_getname),
    cmd("client|list", client_list),
    cmd("client|info", client_info),
    cmd("client|kill", client_kill),
    cmd("client|setinfo", client_setinfo),
    cmd("client|no-evict", client_no_evict),
    cmd("client|no-touch", client_no_touch),
    cmd("client|reply", client_reply),
    cmd("client|unblock", client_unblock),
    cmd("client|pause", client_pause),
    cmd("monitor", monitor),
    cmd("client|unpause", client_unpause),
    cmd("client|help", client_help),
    cmd_with("reset", reset, RUNS_IN_MULTI | WHILE_SUBSCRIBED),
];

const ERR_NAME: &str = "ERR Client names cannot contain spaces, newlines or special characters.";

/// Redis's `validateClientName`: printable ASCII without spaces.
pub fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn client_id(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.int(ctx.conn.id as i64);
    Ok(())
}

fn client_setname(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let name = args.next_bytes()?;
    if !valid_name(&name) {
        return Err(CmdError::reply(ERR_NAME));
    }
    ctx.conn.name = (!name.is_empty()).then_some(name);
    ctx.reply.ok();
    Ok(())
}

fn client_getname(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let name = ctx.conn.name.clone();
    ctx.reply.opt_bulk(name.as_deref());
    Ok(())
}

/// This client's line as others would see it now (its name and database may have changed
/// in this very pipeline).
fn own_line(ctx: &Ctx<'_>) -> String {
    {
        let mut p = ctx.conn.info.published.lock();
        p.db = ctx.conn.selected;
        p.name.clone_from(&ctx.conn.name);
        p.resp = if ctx.reply.proto == Proto::Resp3 {
            3
        } else {
            2
        };
    }
    ctx.conn.info.line()
}

fn client_list(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let mut ids: Option<Vec<u64>> = None;
    // TYPE pubsub (`Some(true)`) or normal (`Some(false)`).
    let mut subscribers: Option<bool> = None;
    // TYPE master (`Some(true)`), or normal or pubsub (`Some(false)`).
    let mut masters: Option<bool> = None;
    // TYPE replica (`Some(true)`), or any other type (`Some(false)`).
    let mut replicas: Option<bool> = None;
    while let Some(opt) = args.next_keyword() {
        match opt.as_str() {
            "TYPE" => {
                let t = args.next_bytes()?;
                match String::from_utf8_lossy(&t).to_ascii_lowercase().as_str() {
                    "normal" => {
                        (subscribers, masters, replicas) = (Some(false), Some(false), Some(false))
                    }
                    "pubsub" => {
                        (subscribers, masters, replicas) = (Some(true), Some(false), Some(false))
                    }
                    "master" => (masters, replicas) = (Some(true), Some(false)),
                    "replica" | "slave" => replicas = Some(true),
                    _ => {
                        let mut msg = b"ERR Unknown client type '".to_vec();
                        msg.extend_from_slice(&t);
                        msg.push(b'\'');
                        return Err(CmdError::reply_bytes(msg));
                    }
                }
            }
            "ID" => {
                let rest = args.rest();
                if rest.is_empty() {
                    return Err(CmdError::reply(ERR_SYNTAX));
                }
                let mut v = Vec::new();
                for a in rest {
                    match parse_i64(a) {
                        Some(n) if n > 0 => v.push(n as u64),
                        Some(_) => {}
                        None => return Err(CmdError::reply("ERR Invalid client ID")),
                    }
                }
                ids = Some(v);
            }
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
    }
    let me = own_line(ctx);
    let mut text = String::new();
    for c in ctx.shared.clients.all() {
        if ids.as_ref().is_some_and(|v| !v.contains(&c.id))
            || subscribers.is_some_and(|s| s != c.is_subscriber())
            || masters.is_some_and(|m| m != c.is_master())
            || replicas.is_some_and(|r| r != c.is_replica())
        {
            continue;
        }
        if c.id == ctx.conn.id {
            text.push_str(&me);
        } else {
            text.push_str(&c.line());
        }
        text.push('\n');
    }
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

fn client_info(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let mut line = own_line(ctx);
    line.push('\n');
    ctx.reply.verbatim(line.as_bytes());
    Ok(())
}

/// CLIENT KILL's filters (Redis's `clientKillCommand`).
#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    /// Authenticated as this ACL user.
    user: Option<Vec<u8>>,
    /// TYPE replica (`Some(true)`), or another type (`Some(false)`).
    replica: Option<bool>,
    /// TYPE master (`Some(true)`), or normal or pubsub (`Some(false)`).
    master: Option<bool>,
    /// TYPE pubsub (`Some(true)`) or normal (`Some(false)`).
    subscribers: Option<bool>,
    skipme: bool,
}

impl KillFilter {
    fn matches(&self, c: &ClientInfo, me: u64) -> bool {
        !(self.replica.is_some_and(|r| r != c.is_replica())
            || self.id.is_some_and(|id| id != c.id)
            || self.subscribers.is_some_and(|s| s != c.is_subscriber())
            || self.master.is_some_and(|m| m != c.is_master())
            || self.addr.as_ref().is_some_and(|a| a != c.addr.as_bytes())
            || self.laddr.as_ref().is_some_and(|a| a != c.laddr.as_bytes())
            || self.user.as_ref().is_some_and(|u| {
                let p = c.published.lock();
                p.user.as_ref().map_or(&b"default"[..], |x| &x[..]) != &u[..]
            })
            || (self.skipme && c.id == me))
    }
}

fn client_kill(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest = args.rest().to_vec();
    let old_form = rest.len() == 1;
    let f = if old_form {
        KillFilter {
            addr: Some(rest[0].to_vec()),
            ..Default::default()
        }
    } else {
        if !rest.len().is_multiple_of(2) {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        let mut f = KillFilter {
            skipme: true,
            ..Default::default()
        };
        for pair in rest.chunks(2) {
            let (opt, val) = (&pair[0], &pair[1]);
            match String::from_utf8_lossy(opt).to_ascii_uppercase().as_str() {
                "ID" => match parse_i64(val) {
                    Some(n) if n > 0 => f.id = Some(n as u64),
                    _ => return Err(CmdError::reply("ERR client-id should be greater than 0")),
                },
                "TYPE" => match String::from_utf8_lossy(val).to_ascii_lowercase().as_str() {
                    "normal" => {
                        (f.subscribers, f.master, f.replica) =
                            (Some(false), Some(false), Some(false))
                    }
                    "pubsub" => {
                        (f.subscribers, f.master, f.replica) =
                            (Some(true), Some(false), Some(false))
                    }
                    "master" => (f.master, f.replica) = (Some(true), Some(false)),
                    "replica" | "slave" => f.replica = Some(true),
                    _ => {
                        let mut msg = b"ERR Unknown client type '".to_vec();
                        msg.extend_from_slice(val);
                        msg.push(b'\'');
                        return Err(CmdError::reply_bytes(msg));
                    }
                },
                "ADDR" => f.addr = Some(val.to_vec()),
                "LADDR" => f.laddr = Some(val.to_vec()),
                "USER" => {
                    if ctx.shared.acl.get(val).is_none() {
                        let mut msg = b"ERR No such user '".to_vec();
                        msg.extend_from_slice(val);
                        msg.push(b'\'');
                        return Err(CmdError::reply_bytes(msg));
                    }
                    f.user = Some(val.to_vec());
                }
                "SKIPME" => {
                    f.skipme = match String::from_utf8_lossy(val).to_ascii_lowercase().as_str() {
                        "yes" => true,
                        "no" => false,
                        _ => return Err(CmdError::reply(ERR_SYNTAX)),
                    }
                }
                _ => return Err(CmdError::reply(ERR_SYNTAX)),
            }
        }
        f
    };
    let victims: Vec<Arc<ClientInfo>> = ctx
        .shared
        .clients
        .all()
        .into_iter()
        .filter(|c| !c.is_killed() && f.matches(c, ctx.conn.id))
        .collect();
    for c in &victims {
        if c.id == ctx.conn.id {
            // As Redis: the caller gets its reply first.
            ctx.conn.close_after_reply = true;
        } else {
            c.request_kill();
        }
    }
    if old_form {
        if victims.is_empty() {
            return Err(CmdError::reply("ERR No such client"));
        }
        ctx.reply.ok();
    } else {
        ctx.reply.int(victims.len() as i64);
    }
    Ok(())
}

fn client_setinfo(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let attr = args.next_bytes()?;
    let val = args.next_bytes()?;
    let attr_name = String::from_utf8_lossy(&attr).to_ascii_lowercase();
    if attr_name != "lib-name" && attr_name != "lib-ver" {
        let mut msg = b"ERR Unrecognized option '".to_vec();
        msg.extend_from_slice(&attr);
        msg.push(b'\'');
        return Err(CmdError::reply_bytes(msg));
    }
    // Redis 7.2's `validateClientAttr`: printable ASCII without spaces.
    if !valid_name(&val) {
        return Err(CmdError::reply(format!(
            "ERR {attr_name} cannot contain spaces, newlines or special characters."
        )));
    }
    let v = (!val.is_empty()).then_some(val);
    let mut p = ctx.conn.info.published.lock();
    if attr_name == "lib-name" {
        p.lib_name = v;
    } else {
        p.lib_ver = v;
    }
    drop(p);
    ctx.reply.ok();
    Ok(())
}

/// `ON` or `OFF`, else Redis's syntax error.
fn on_off(args: &mut Args) -> Result<bool, CmdError> {
    match args.next_keyword().as_deref() {
        Some("ON") => Ok(true),
        Some("OFF") => Ok(false),
        _ => Err(CmdError::reply(ERR_SYNTAX)),
    }
}

/// NO-EVICT: recorded and shown in CLIENT LIST's flags; no client is evicted here.
fn client_no_evict(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let on = on_off(args)?;
    ctx.conn.info.published.lock().no_evict = on;
    ctx.reply.ok();
    Ok(())
}

/// NO-TOUCH: recorded and shown in CLIENT LIST's flags; no access times are kept here.
fn client_no_touch(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let on = on_off(args)?;
    ctx.conn.info.published.lock().no_touch = on;
    ctx.reply.ok();
    Ok(())
}

fn client_reply(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    match args.next_keyword().as_deref() {
        Some("ON") => {
            ctx.conn.reply_off = false;
            ctx.conn.skip_next = false;
            ctx.reply.ok();
        }
        Some("OFF") => ctx.conn.reply_off = true,
        Some("SKIP") => {
            if !ctx.conn.reply_off {
                ctx.conn.skip_next = true;
            }
        }
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    }
    Ok(())
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR] (Redis's order: the reason, then the id).
fn client_unblock(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if args.remaining() > 2 {
        return Err(CmdError::reply(
            "ERR unknown subcommand or wrong number of arguments for 'unblock'. Try CLIENT HELP.",
        ));
    }
    let id = args.next_bytes()?;
    let error = match args.next_keyword().as_deref() {
        None | Some("TIMEOUT") => false,
        Some("ERROR") => true,
        Some(_) => {
            return Err(CmdError::reply(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let id = parse_i64(&id).ok_or_else(|| CmdError::reply(super::args::ERR_NOT_INT))?;
    let done = id > 0 && ctx.shared.blocked.unblock(ctx.tx, id as u64, error);
    ctx.reply.int(i64::from(done));
    Ok(())
}

fn client_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "CLIENT",
        &[
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
        ],
    );
    Ok(())
}

/// RESET (Redis's `resetCommand`): the connection's state back to a new connection's:
/// no subscriptions, database 0, no name, RESP2, replies on, and not authenticated while a
/// password is set.
fn reset(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    super::multi::discard_transaction(ctx);
    if let Some(sub) = ctx.conn.sub.take() {
        // Leaves every channel and pattern, without confirmations; messages published
        // before still arrive, ahead of the reply.
        let pending = ctx.shared.pubsub.leave(ctx.conn.id, &ctx.conn.info);
        drop(sub);
        ctx.reply.raw(&pending);
    }
    ctx.tx.tracking.disable(&ctx.conn.info);
    ctx.conn.selected = 0;
    ctx.conn.db = ctx.tx.dbs.physical(0);
    ctx.conn.name = None;
    ctx.conn.reply_off = false;
    ctx.conn.skip_next = false;
    {
        let mut p = ctx.conn.info.published.lock();
        p.no_evict = false;
        p.no_touch = false;
    }
    ctx.conn.authenticated = !ctx.shared.acl.auth_required();
    ctx.conn.user = ctx.shared.acl.default_user();
    ctx.conn.info.published.lock().user = None;
    ctx.reply.proto = Proto::Resp2;
    ctx.reply.simple("RESET");
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE|ALL] (`pause.rs`); the timeout in milliseconds, as Redis's
/// `getTimeoutFromObjectOrReply`.
fn client_pause(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let ms = parse_i64(&args.next_bytes()?)
        .ok_or_else(|| CmdError::reply("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CmdError::reply("ERR timeout is negative"));
    }
    let mode = if args.is_done() {
        crate::pause::Mode::All
    } else {
        let m = args.next_bytes()?;
        if m.eq_ignore_ascii_case(b"write") {
            crate::pause::Mode::Write
        } else if m.eq_ignore_ascii_case(b"all") {
            crate::pause::Mode::All
        } else {
            return Err(CmdError::reply(
                "ERR CLIENT PAUSE mode must be WRITE or ALL",
            ));
        }
    };
    if !args.is_done() {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    let until = std::time::Instant::now()
        .checked_add(std::time::Duration::from_millis(ms as u64))
        .ok_or_else(|| CmdError::reply("ERR timeout is not an integer or out of range"))?;
    ctx.shared.pause.pause(until, mode);
    ctx.reply.ok();
    Ok(())
}

fn client_unpause(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.shared.pause.unpause();
    ctx.reply.ok();
    Ok(())
}

/// MONITOR (`monitor.rs`): this client receives every command's line from now on; again
/// in monitor mode, no reply, as Redis.
fn monitor(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    if ctx.shared.monitors.contains(ctx.conn.id) {
        return Ok(());
    }
    let resp3 = ctx.reply.proto == Proto::Resp3;
    let info = ctx.conn.info.clone();
    let sub = ctx
        .conn
        .sub
        .get_or_insert_with(|| crate::pubsub::Subscriber::new(info, resp3))
        .clone();
    ctx.shared.monitors.add(sub);
    ctx.conn
        .info
        .monitor
        .store(true, std::sync::atomic::Ordering::Relaxed);
    ctx.reply.ok();
    Ok(())
}
