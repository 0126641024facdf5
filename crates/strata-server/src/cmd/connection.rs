//! Connection commands: PING, ECHO, QUIT, HELLO, AUTH, SELECT.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::table::traits::*;
use super::{cmd, cmd_with, Args, CmdError, CmdResult, Ctx, Entry};
use crate::protocol::reply::Proto;
use crate::server::REDIS_VERSION;

pub static COMMANDS: &[Entry] = &[
    cmd_with("ping", ping, WHILE_SUBSCRIBED),
    cmd("echo", echo),
    cmd_with("quit", quit, RUNS_IN_MULTI | WHILE_SUBSCRIBED),
    cmd("hello", hello),
    cmd("auth", auth),
    cmd("select", select),
];

fn ping(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if ctx.conn.in_pubsub_mode() && ctx.reply.proto == Proto::Resp2 && args.remaining() <= 1 {
        // Redis's pingCommand for a RESP2 subscriber: ["pong", message or ""].
        let msg = if args.is_done() {
            bytes::Bytes::new()
        } else {
            args.next_bytes()?
        };
        ctx.reply.array(2);
        ctx.reply.bulk(b"pong");
        ctx.reply.bulk(&msg);
        return Ok(());
    }
    match args.remaining() {
        0 => ctx.reply.simple("PONG"),
        1 => {
            let a = args.next_bytes()?;
            ctx.reply.bulk(&a);
        }
        _ => {
            return Err(CmdError::reply(
                "ERR wrong number of arguments for 'ping' command",
            ))
        }
    }
    Ok(())
}

fn echo(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let a = args.next_bytes()?;
    ctx.reply.bulk(&a);
    Ok(())
}

fn quit(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.ok();
    ctx.conn.close_after_reply = true;
    Ok(())
}

use super::acl::authenticate;

/// The command's name as the client sent it (ACL LOG's object of a failed AUTH).
fn sent_name(args: &Args) -> bytes::Bytes {
    args.sent(0).cloned().unwrap_or_default()
}

fn auth(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    match args.remaining() {
        1 => {
            if ctx.shared.acl.default_user().read().nopass {
                return Err(CmdError::reply(
                    "ERR AUTH <password> called without any password configured for the \
                     default user. Are you sure your configuration is correct?",
                ));
            }
            let pass = args.next_bytes()?;
            authenticate(ctx, &sent_name(args), b"default", &pass)?;
        }
        2 => {
            let user = args.next_bytes()?;
            let pass = args.next_bytes()?;
            authenticate(ctx, &sent_name(args), &user, &pass)?;
        }
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    }
    ctx.reply.ok();
    Ok(())
}

fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn hello(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let mut proto = None;
    if !args.is_done() {
        let v = args.next_i64().map_err(|_| {
            CmdError::reply("ERR Protocol version is not an integer or out of range")
        })?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::reply("NOPROTO unsupported protocol version"));
        }
        proto = Some(if v == 2 { Proto::Resp2 } else { Proto::Resp3 });
    }
    let mut creds = None;
    let mut name = None;
    while !args.is_done() {
        let opt = args.next_bytes()?;
        let more = args.remaining();
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            creds = Some((args.next_bytes()?, args.next_bytes()?));
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            let n = args.next_bytes()?;
            if !valid_client_name(&n) {
                return Err(CmdError::reply(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                ));
            }
            name = Some(n);
        } else {
            let mut msg = b"ERR Syntax error in HELLO option '".to_vec();
            msg.extend_from_slice(super::cstr(&opt, usize::MAX));
            msg.push(b'\'');
            return Err(CmdError::reply_bytes(msg));
        }
    }
    if let Some((user, pass)) = creds {
        authenticate(ctx, &sent_name(args), &user, &pass)?;
    }
    if ctx.auth_required() {
        return Err(CmdError::reply(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client \
             and select the RESP protocol version at the same time",
        ));
    }
    if let Some(n) = name {
        ctx.conn.name = (!n.is_empty()).then_some(n);
    }
    if let Some(p) = proto {
        ctx.reply.proto = p;
        for mailbox in [&ctx.conn.sub, &ctx.conn.push].into_iter().flatten() {
            mailbox.set_resp3(p == Proto::Resp3);
        }
    }
    let r = &mut *ctx.reply;
    r.map(7);
    r.bulk(b"server");
    r.bulk(b"redis");
    r.bulk(b"version");
    r.bulk(REDIS_VERSION.as_bytes());
    r.bulk(b"proto");
    r.int(if r.proto == Proto::Resp3 { 3 } else { 2 });
    r.bulk(b"id");
    r.int(ctx.conn.id as i64);
    r.bulk(b"mode");
    r.bulk(b"standalone");
    r.bulk(b"role");
    r.bulk(b"master");
    r.bulk(b"modules");
    r.array(0);
    Ok(())
}

fn select(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let n = args.next_i64()?;
    if n < i64::from(i32::MIN) || n > i64::from(i32::MAX) {
        // Redis's getIntFromObjectOrReply (through getRangeLongFromObjectOrReply).
        return Err(CmdError::reply(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    if ctx.shared.cluster.is_some() && n != 0 {
        return Err(CmdError::reply("ERR SELECT is not allowed in cluster mode"));
    }
    let dbs = ctx.shared.config.read().databases as i64;
    if n < 0 || n >= dbs {
        return Err(CmdError::reply("ERR DB index is out of range"));
    }
    ctx.conn.selected = n as u8;
    ctx.conn.db = ctx.tx.dbs.physical(n as u8);
    if ctx.conn.master {
        // The replica's stream position records the database (`position.rs`).
        crate::position::select(n as u8);
    }
    ctx.reply.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_names() {
        assert!(valid_client_name(b"my-client"));
        assert!(!valid_client_name(b"a b"));
    }
}
