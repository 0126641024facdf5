//! Server commands: DBSIZE, FLUSHDB, FLUSHALL, TIME, INFO, CONFIG, SHUTDOWN.
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::{cmd, reply_help, Args, CmdError, CmdResult, Ctx, Entry};
use crate::glob;
use crate::info;
use std::time::{SystemTime, UNIX_EPOCH};

pub static COMMANDS: &[Entry] = &[
    cmd("config|get", config_get),
    cmd("config|set", config_set),
    cmd("config|resetstat", config_resetstat),
    cmd("config|rewrite", config_rewrite),
    cmd("config|help", config_help),
    cmd("dbsize", dbsize),
    cmd("flushdb", flushdb),
    cmd("flushall", flushall),
    cmd("time", time),
    cmd("info", info_cmd),
    cmd("shutdown", shutdown),
];

fn dbsize(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let mut n = 0i64;
    ctx.tx.scan_db(ctx.conn.db, |_, _| n += 1)?;
    ctx.reply.int(n);
    Ok(())
}

/// `[ASYNC|SYNC]`: both flush synchronously here.
fn flush_mode(args: &mut Args) -> CmdResult {
    let _either = args.eat("ASYNC") || args.eat("SYNC");
    args.finish()
}

fn flushdb(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    flush_mode(args)?;
    // Tracking clients get one null instead of each key (`tracking.rs`).
    ctx.tx.tracking.flushed();
    crate::tracking::quietly(|| ctx.tx.flush_db(ctx.conn.db))?;
    // Propagated as called even when the database was empty (Redis 7.0).
    ctx.effects.dirty();
    ctx.reply.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    flush_mode(args)?;
    let dbs = ctx.shared.config.read().databases;
    ctx.tx.tracking.flushed();
    crate::tracking::quietly(|| (0..dbs).try_for_each(|db| ctx.tx.flush_db(db as u8)))?;
    ctx.effects.dirty();
    ctx.reply.ok();
    Ok(())
}

fn time(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    ctx.reply.array(2);
    ctx.reply.bulk(d.as_secs().to_string().as_bytes());
    ctx.reply.bulk(d.subsec_micros().to_string().as_bytes());
    Ok(())
}

fn info_cmd(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let sections: Vec<String> = args
        .rest()
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    let text = info::render(ctx.shared, ctx.tx, &sections)?;
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

fn config_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}

fn config_get(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let patterns: Vec<Vec<u8>> = args.rest().iter().map(|p| p.to_vec()).collect();
    let cfg = ctx.shared.config.read().clone();
    let hits: Vec<(&str, String)> = crate::config::all_names()
        .filter(|(name, _)| {
            patterns
                .iter()
                .any(|p| glob::matches(p, name.as_bytes(), true))
        })
        .map(|(name, canonical)| (name, cfg.get(canonical).unwrap_or_default()))
        .collect();
    ctx.reply.map(hits.len());
    for (name, value) in hits {
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.bulk(value.as_bytes());
    }
    Ok(())
}

fn config_set(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest = args.rest();
    if !rest.len().is_multiple_of(2) {
        return Err(CmdError::reply(
            "ERR wrong number of arguments for 'config|set' command",
        ));
    }
    // All or nothing, as Redis 7: apply to a copy, publish it only if every pair applied.
    let mut next = ctx.shared.config.read().clone();
    let mut seen = Vec::new();
    for pair in rest.chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
        if seen.contains(&name) {
            return Err(CmdError::reply(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - duplicate \
                 parameter"
            )));
        }
        next.set(&name, &String::from_utf8_lossy(&pair[1]))
            .map_err(|e| CmdError::reply(format!("ERR {e}")))?;
        seen.push(name);
    }
    ctx.shared.apply_config(next);
    ctx.reply.ok();
    Ok(())
}

fn config_resetstat(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    // As Redis's configResetStatCommand: INFO's counters, not the slow log.
    ctx.shared.stats.reset();
    ctx.tx.stats.reset();
    ctx.shared.cmdstats.reset();
    ctx.shared.latency.histograms.reset();
    ctx.reply.ok();
    Ok(())
}

fn config_rewrite(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let cfg = ctx.shared.config.read().clone();
    let Some(path) = cfg.config_file.clone() else {
        return Err(CmdError::reply(
            "ERR The server is running without a config file",
        ));
    };
    // Users from `user` directives are written back; an aclfile keeps its own.
    let users: Option<Vec<String>> = cfg.aclfile.is_none().then(|| {
        let users = ctx.shared.acl.users();
        users.iter().map(|u| u.read().describe()).collect()
    });
    crate::config_rewrite::rewrite(&cfg, &path, users.as_deref())
        .map_err(|e| CmdError::reply(format!("ERR Rewriting config file: {e}")))?;
    ctx.reply.ok();
    Ok(())
}

fn shutdown(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    while let Some(opt) = args.next_keyword() {
        match opt.as_str() {
            "NOSAVE" | "SAVE" | "NOW" | "FORCE" => {}
            "ABORT" => return Err(CmdError::reply("ERR No shutdown in progress.")),
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
    }
    // As Redis: no reply on success; the connection closes as the server stops.
    ctx.conn.close_after_reply = true;
    ctx.shared.request_shutdown();
    Ok(())
}
