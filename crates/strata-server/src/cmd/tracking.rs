//! CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO: client-side caching's commands over
//! the tracking state (`tracking.rs`), with Redis 7.0's replies and errors (networking.c's
//! `clientCommand`).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::protocol::parse::parse_i64;
use crate::protocol::reply::Proto;
use crate::tracking::{Enable, BCAST, BROKEN_REDIR, CACHING, NOLOOP, ON, OPTIN, OPTOUT};

pub static COMMANDS: &[Entry] = &[
    cmd("client|tracking", client_tracking),
    cmd("client|caching", client_caching),
    cmd("client|getredir", client_getredir),
    cmd("client|trackinginfo", client_trackinginfo),
];

fn err(msg: &str) -> CmdError {
    CmdError::reply(format!("ERR {msg}"))
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP].
fn client_tracking(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let mode = args.next_bytes()?;
    let mut redirect: u64 = 0;
    let mut options = 0;
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    // Options first, as Redis: a bad option answers before a bad ON|OFF.
    while !args.is_done() {
        let more = args.remaining() > 1;
        let opt = args.next_bytes()?;
        if opt.eq_ignore_ascii_case(b"redirect") && more {
            let id = args.next_bytes()?;
            if redirect != 0 {
                return Err(err("A client can only redirect to a single other client"));
            }
            let id = parse_i64(&id).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?;
            // The id as Redis's uint64 client id: a negative one names nobody.
            if id <= 0 || !ctx.shared.clients.contains(id as u64) {
                return Err(err("The client ID you want redirect to does not exist"));
            }
            redirect = id as u64;
        } else if opt.eq_ignore_ascii_case(b"bcast") {
            options |= BCAST;
        } else if opt.eq_ignore_ascii_case(b"optin") {
            options |= OPTIN;
        } else if opt.eq_ignore_ascii_case(b"optout") {
            options |= OPTOUT;
        } else if opt.eq_ignore_ascii_case(b"noloop") {
            options |= NOLOOP;
        } else if opt.eq_ignore_ascii_case(b"prefix") && more {
            prefixes.push(args.next_bytes()?.to_vec());
        } else {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    let tracking = &ctx.tx.tracking;
    let info = ctx.conn.info.clone();
    if mode.eq_ignore_ascii_case(b"off") {
        tracking.disable(&info);
        ctx.reply.ok();
        return Ok(());
    }
    if !mode.eq_ignore_ascii_case(b"on") {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    let now = info.tracking_flags();
    if options & BCAST == 0 && !prefixes.is_empty() {
        return Err(err("PREFIX option requires BCAST mode to be enabled"));
    }
    if now & ON != 0 && (now & BCAST != 0) != (options & BCAST != 0) {
        return Err(err(
            "You can't switch BCAST mode on/off before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        ));
    }
    if options & BCAST != 0 && options & (OPTIN | OPTOUT) != 0 {
        return Err(err("OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if options & OPTIN != 0 && options & OPTOUT != 0 {
        return Err(err("You can't specify both OPTIN mode and OPTOUT mode"));
    }
    if (options & OPTIN != 0 && now & OPTOUT != 0) || (options & OPTOUT != 0 && now & OPTIN != 0) {
        return Err(err(
            "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        ));
    }
    if options & BCAST != 0 {
        if let Some(msg) = tracking.prefix_collision(info.id, &prefixes) {
            return Err(CmdError::reply(msg));
        }
    }
    let resp3 = ctx.reply.proto == Proto::Resp3;
    let mailbox = ctx
        .conn
        .push
        .get_or_insert_with(|| crate::pubsub::Subscriber::new(info.clone(), resp3))
        .clone();
    // The tracking state reads the protocol from the published state: this command may
    // follow HELLO in the same pipeline.
    info.published.lock().resp = if resp3 { 3 } else { 2 };
    tracking.enable(
        &info,
        mailbox,
        Enable {
            redirect,
            options,
            prefixes,
        },
    );
    ctx.reply.ok();
    Ok(())
}

/// CLIENT CACHING YES|NO: whether the next command's reads are remembered, under OPTIN
/// (YES) or OPTOUT (NO).
fn client_caching(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let info = &ctx.conn.info;
    let flags = info.tracking_flags();
    if flags & ON == 0 {
        return Err(err(
            "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN \
             or OPTOUT mode enabled",
        ));
    }
    let opt = args.next_bytes()?;
    if opt.eq_ignore_ascii_case(b"yes") {
        if flags & OPTIN == 0 {
            return Err(err(
                "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if opt.eq_ignore_ascii_case(b"no") {
        if flags & OPTOUT == 0 {
            return Err(err(
                "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::reply(ERR_SYNTAX));
    }
    info.add_tracking_flags(CACHING);
    ctx.reply.ok();
    Ok(())
}

/// CLIENT GETREDIR: the redirect id while tracking (0: none), else -1.
fn client_getredir(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.int(ctx.conn.info.tracking_redirect());
    Ok(())
}

/// CLIENT TRACKINGINFO: flags (a set), redirect and prefixes, as Redis 7.0 lists them.
fn client_trackinginfo(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let info = ctx.conn.info.clone();
    let flags = info.tracking_flags();
    let mut names = vec![if flags & ON != 0 { "on" } else { "off" }];
    if flags & BCAST != 0 {
        names.push("bcast");
    }
    if flags & OPTIN != 0 {
        names.push("optin");
        if flags & CACHING != 0 {
            names.push("caching-yes");
        }
    }
    if flags & OPTOUT != 0 {
        names.push("optout");
        if flags & CACHING != 0 {
            names.push("caching-no");
        }
    }
    if flags & NOLOOP != 0 {
        names.push("noloop");
    }
    if flags & BROKEN_REDIR != 0 {
        names.push("broken_redirect");
    }
    let prefixes = ctx.tx.tracking.prefixes_of(info.id);
    let r = &mut *ctx.reply;
    r.map(3);
    r.bulk(b"flags");
    r.set(names.len());
    for n in names {
        r.bulk(n.as_bytes());
    }
    r.bulk(b"redirect");
    r.int(info.tracking_redirect());
    r.bulk(b"prefixes");
    r.array(prefixes.len());
    for p in prefixes {
        r.bulk(&p);
    }
    Ok(())
}

/// Before a command runs: remembers the keys a tracking client's read-only command reads
/// (Redis's `trackingRememberKeys`, called from `call()`); the `_RO` script commands are
/// not, the commands their scripts run are.
pub fn before_command(ctx: &Ctx<'_>, spec: &super::Spec, argv: &[bytes::Bytes]) {
    let flags = ctx.conn.info.tracking_flags();
    if flags & ON == 0 || flags & BCAST != 0 || !spec.has(super::flag::READONLY) {
        return;
    }
    let caching = flags & CACHING != 0;
    if (flags & OPTIN != 0 && !caching) || (flags & OPTOUT != 0 && caching) {
        return;
    }
    if matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro") || spec.has(super::flag::PUBSUB) {
        return;
    }
    let Some(keys) = super::table::keys(spec, argv) else {
        return;
    };
    if keys.is_empty() {
        return;
    }
    ctx.tx
        .tracking
        .remember(ctx.conn.id, keys.iter().map(|k| &argv[k.pos][..]));
}

/// After a command: CLIENT CACHING applies to one command, or one transaction (Redis's
/// `resetClient`), and CLIENT's own subcommands keep it.
pub fn after_command(ctx: &Ctx<'_>, spec: &super::Spec) {
    let info = &ctx.conn.info;
    let flags = info.tracking_flags();
    if flags & CACHING == 0
        || ctx.conn.multi.is_some()
        || ctx.conn.in_exec
        || spec.name.starts_with("client|")
    {
        return;
    }
    info.remove_tracking_flags(CACHING);
}
