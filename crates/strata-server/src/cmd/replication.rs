//! The replication commands (Redis's `replication.c`): REPLICAOF and its old name
//! SLAVEOF, ROLE, FAILOVER; the master side's PSYNC, SYNC, REPLCONF and WAIT. The link
//! itself is `crate::replica`, the master side `crate::repl`.

use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::repl::failover::{self, Phase};
use crate::repl::psync::{self, Decision, Ids};
use crate::repl::serve::{Handoff, Start};
use crate::replica::Role;
use crate::server::Shared;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub static COMMANDS: &[Entry] = &[
    cmd("replicaof", replicaof),
    cmd("slaveof", replicaof),
    cmd("role", role),
    cmd("psync", psync),
    cmd("sync", sync),
    cmd("replconf", replconf),
    cmd("wait", wait),
    cmd("failover", failover),
];

/// REPLICAOF host port | NO ONE.
fn replicaof(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    // As Redis's replicaofCommand: a cluster node follows the master CLUSTER REPLICATE
    // names, at the address the bus keeps current; a REPLICAOF would fight it.
    if ctx.shared.cluster.is_some() {
        return Err(CmdError::reply(
            "ERR REPLICAOF not allowed in cluster mode.",
        ));
    }
    let host = args.next_bytes()?;
    let port = args.next_bytes()?;
    // As Redis: neither form while a FAILOVER runs (FAILOVER ABORT ends it).
    if ctx.shared.master.failover.phase() != Phase::None {
        return Err(CmdError::reply(
            "ERR REPLICAOF not allowed while failing over.",
        ));
    }
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        if let Some(shared) = ctx.shared.me.upgrade() {
            become_master(&shared);
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
    if become_replica(&shared, host, port as u16) {
        ctx.reply.ok();
    } else {
        ctx.reply.simple("OK Already connected to specified master");
    }
    Ok(())
}

/// REPLICAOF NO ONE's work (also FAILOVER's abort): stops following, the data stays.
pub(crate) fn become_master(shared: &Arc<Shared>) {
    let r = &shared.replication;
    if r.is_replica() {
        // The log (its master's stream) is kept; the id shifts (`Replication::promote`).
        r.promote(shared);
        shared.config.write().replicaof = None;
        eprintln!("strata-server: MASTER MODE enabled (REPLICAOF NO ONE)");
    }
}

/// REPLICAOF host port's work (also FAILOVER's hand-over). As Redis 7: it asks its new
/// master from where its own stream is (`Replication::follow`), so a new master that was
/// its replica continues it; its own replicas stay until its replication id changes.
/// False if it already follows that master.
pub(crate) fn become_replica(shared: &Arc<Shared>, host: String, port: u16) -> bool {
    if shared.replication.follow(shared, host.clone(), port) {
        shared.config.write().replicaof = Some((host.clone(), port));
        eprintln!("strata-server: REPLICAOF {host}:{port} enabled");
        true
    } else {
        false
    }
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] (`repl/failover.rs`).
fn failover(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if ctx.shared.cluster.is_some() {
        return Err(CmdError::reply("ERR FAILOVER not allowed in cluster mode."));
    }
    let rest: Vec<&[u8]> = args.rest().iter().map(|a| &a[..]).collect();
    let f = &ctx.shared.master.failover;
    if let [only] = rest[..] {
        if only.eq_ignore_ascii_case(b"abort") {
            if !f.abort_requested(ctx.shared) {
                return Err(CmdError::reply("ERR No failover in progress."));
            }
            ctx.reply.ok();
            return Ok(());
        }
    }
    let req = failover::parse(&rest).map_err(CmdError::reply)?;
    let Some(shared) = ctx.shared.me.upgrade() else {
        return Err(CmdError::reply("ERR the server is shutting down"));
    };
    f.start(&shared, req).map_err(CmdError::reply)?;
    ctx.reply.ok();
    Ok(())
}

/// ROLE: `master offset replicas` or `slave host port state offset`.
fn role(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    args.finish()?;
    match ctx.shared.replication.role() {
        Role::Master { offset } => {
            let master = &ctx.shared.master;
            let offset = master.offset().unwrap_or(offset);
            let replicas = master.replicas.lock().clone();
            let online: Vec<_> = replicas
                .iter()
                .filter(|r| *r.state.lock() == "online")
                .collect();
            ctx.reply.array(3);
            ctx.reply.bulk(b"master");
            ctx.reply.int(offset as i64);
            ctx.reply.array(online.len());
            for r in online {
                ctx.reply.array(3);
                ctx.reply.bulk(r.ip.as_bytes());
                ctx.reply.bulk(r.port.to_string().as_bytes());
                ctx.reply
                    .bulk(r.ack.load(Ordering::Relaxed).to_string().as_bytes());
            }
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

/// PSYNC replid offset: a partial resync from the log if it covers the offset, else a full
/// sync (`repl/psync.rs` decides, `repl/serve.rs` serves).
fn psync(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let id = args.next_bytes()?;
    let off = args.next_bytes()?;
    let Some((id, off)) = psync::parse_psync(&id, &off) else {
        return Err(CmdError::reply(
            "ERR value is not an integer or out of range",
        ));
    };
    // `PSYNC <replid> <offset> FAILOVER` from a master handing over (its FAILOVER): this
    // replica of it becomes the master first, if it follows that very stream.
    let handing_over = args
        .rest()
        .first()
        .is_some_and(|a| a.eq_ignore_ascii_case(b"failover"));
    if handing_over && !ctx.conn.info.is_replica() {
        if id != ctx.shared.replication.ids().0 {
            return Err(CmdError::reply(
                "ERR PSYNC FAILOVER replid must match my replid.",
            ));
        }
        if let Some(shared) = ctx.shared.me.upgrade() {
            eprintln!(
                "strata-server: Failover request received for replid {id}, promoting to master."
            );
            become_master(&shared);
        }
    }
    start_sync(ctx, Some((id, off)))
}

/// SYNC: the old full sync (no `+FULLRESYNC` line, never partial).
fn sync(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let _ = args.rest();
    start_sync(ctx, None)
}

fn start_sync(ctx: &mut Ctx<'_>, asked: Option<(String, i64)>) -> CmdResult {
    if ctx.conn.info.is_replica() {
        return Ok(()); // already a replica: ignored, as Redis does
    }
    // A replica serves replicas from its log, a copy of its master's stream, once its
    // link is up (Redis's rule).
    if !ctx.shared.replication.serves_replicas() {
        return Err(CmdError::reply(
            "NOMASTERLINK Can't SYNC while not connected with my master",
        ));
    }
    let shared = ctx.shared;
    let master = &shared.master;
    let (replid, replid2, second_offset, offset) = shared.replication.ids();
    let ids = Ids {
        replid: &replid,
        replid2: &replid2,
        second_offset,
    };
    let log = master.log();
    let decision = match &asked {
        Some((id, off)) => psync::decide(&ids, id, *off, log.as_ref().map(|l| l.bounds())),
        None => Decision::Full { partial_err: false },
    };
    let conf = ctx.conn.replica.take().map(|r| r.conf).unwrap_or_default();
    if let (Decision::Continue { from }, Some(log)) = (&decision, &log) {
        let pin = log.pin(*from);
        // Pruned between the decision and the pin: a full sync after all.
        if log.first() <= *from {
            master.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            if conf.capa_psync2 {
                ctx.reply.simple(&format!("CONTINUE {replid}"));
            } else {
                ctx.reply.simple("CONTINUE");
            }
            let start = Start::Continue { from: *from, pin };
            let log = log.clone();
            ctx.conn.replica = Some(Box::new(super::ReplicaConn {
                conf: conf.clone(),
                handoff: Some(Handoff { start, conf, log }),
            }));
            return Ok(());
        }
        log.unpin(pin);
    }
    if asked.as_ref().is_some_and(|(id, _)| id != "?") {
        master.sync_partial_err.fetch_add(1, Ordering::Relaxed);
    }
    let log = master
        .ensure_log(shared, offset)
        .map_err(|e| CmdError::reply(format!("ERR replication log: {e}")))?;
    let start = Start::Full {
        psync: asked.is_some(),
    };
    ctx.conn.replica = Some(Box::new(super::ReplicaConn {
        conf: conf.clone(),
        handoff: Some(Handoff { start, conf, log }),
    }));
    Ok(())
}

/// REPLCONF option value ...: what a replica tells its master before PSYNC. ACK and GETACK
/// get no reply (a replica's ACKs are read by its feed, `repl/serve.rs`).
fn replconf(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest: Vec<&[u8]> = args.rest().iter().map(|a| &a[..]).collect();
    let opts = psync::parse_replconf(&rest).map_err(|e| CmdError::reply(&e))?;
    if opts
        .iter()
        .any(|o| matches!(o, psync::ReplConfOpt::Ack(_) | psync::ReplConfOpt::GetAck))
    {
        return Ok(());
    }
    ctx.conn
        .replica
        .get_or_insert_with(Default::default)
        .conf
        .apply(&opts);
    ctx.reply.ok();
    Ok(())
}

/// WAIT numreplicas timeout: blocks until that many replicas acknowledged the stream up to
/// where it is now (which covers this client's writes), or the timeout (ms; 0: for ever).
/// Asks the replicas for an ACK (`REPLCONF GETACK *` in the stream) as Redis does.
fn wait(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let n = args.next_i64()?;
    let t = args.next_bytes()?;
    args.finish()?;
    let timeout = crate::protocol::parse::parse_i64(&t)
        .ok_or_else(|| CmdError::reply("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::reply("ERR timeout is negative"));
    }
    if ctx.shared.replication.is_replica() {
        return Err(CmdError::reply(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis \
             4.0 if a replica is configured to be writable (which is not the default) writes to \
             replicas are just local and are not propagated.",
        ));
    }
    let master = &ctx.shared.master;
    let target = master.offset().unwrap_or(0);
    let acked = || {
        master
            .replicas
            .lock()
            .iter()
            .filter(|r| r.ack.load(Ordering::Relaxed) >= target)
            .count() as i64
    };
    let deadline = (timeout > 0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout as u64));
    if acked() < n {
        master.propagate_getack(ctx.shared);
    }
    let mut got = acked();
    while got < n {
        if deadline.is_some_and(|d| std::time::Instant::now() >= d)
            || ctx.conn.info.is_killed()
            || *ctx.shared.shutdown_receiver().borrow()
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        got = acked();
    }
    ctx.reply.int(got);
    Ok(())
}
