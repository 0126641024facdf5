//! The replica side's commands (Redis's `replication.c`): REPLICAOF and its old name
//! SLAVEOF, and ROLE. The link itself is `crate::replica`.

use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::replica::Role;

pub static COMMANDS: &[Entry] = &[
    cmd("replicaof", replicaof),
    cmd("slaveof", replicaof),
    cmd("role", role),
];

/// REPLICAOF host port | NO ONE.
fn replicaof(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let host = args.next_bytes()?;
    let port = args.next_bytes()?;
    let r = &ctx.shared.replication;
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        if r.is_replica() {
            r.promote(&ctx.shared.store);
            ctx.shared.config.write().replicaof = None;
            eprintln!("strata-server: MASTER MODE enabled (REPLICAOF NO ONE)");
        }
        ctx.reply.ok();
        return Ok(());
    }
    let port = std::str::from_utf8(&port)
        .ok()
        .and_then(|p| p.parse::<i64>().ok())
        .filter(|p| (0..=65535).contains(p))
        .ok_or_else(|| CmdError::reply("ERR Invalid master port"))?;
    let host = String::from_utf8_lossy(&host).into_owned();
    let Some(shared) = ctx.shared.me.upgrade() else {
        return Err(CmdError::reply("ERR the server is shutting down"));
    };
    if r.follow(&shared, host.clone(), port as u16) {
        ctx.shared.config.write().replicaof = Some((host.clone(), port as u16));
        eprintln!("strata-server: REPLICAOF {host}:{port} enabled");
        ctx.reply.ok();
    } else {
        ctx.reply.simple("OK Already connected to specified master");
    }
    Ok(())
}

/// ROLE: `master offset replicas` or `slave host port state offset`.
fn role(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    args.finish()?;
    match ctx.shared.replication.role() {
        Role::Master { offset } => {
            ctx.reply.array(3);
            ctx.reply.bulk(b"master");
            ctx.reply.int(offset as i64);
            ctx.reply.array(0);
        }
        Role::Replica {
            host,
            port,
            state,
            offset,
        } => {
            ctx.reply.array(5);
            ctx.reply.bulk(b"slave");
            ctx.reply.bulk(host.as_bytes());
            ctx.reply.int(i64::from(port));
            ctx.reply.bulk(state.as_bytes());
            ctx.reply.int(offset);
        }
    }
    Ok(())
}
