//! Server commands: DBSIZE, FLUSHDB, FLUSHALL, TIME, INFO, CONFIG, COMMAND, SHUTDOWN.

use super::args::ERR_SYNTAX;
use super::docs;
use super::flag::*;
use super::{all_commands, lookup, reply_help, Args, CmdError, CmdResult, Ctx, Spec};
use crate::glob;
use crate::info;
use std::time::{SystemTime, UNIX_EPOCH};

macro_rules! server_cmd {
    ($name:literal, $arity:expr, $flags:expr, $since:literal, $summary:literal, $h:expr) => {
        server_cmd!($name, $arity, $flags, $since, $summary, $h, &[])
    };
    ($name:literal, $arity:expr, $flags:expr, $since:literal, $summary:literal, $h:expr, $subs:expr) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: (0, 0, 0),
            group: "server",
            since: $since,
            summary: $summary,
            handler: $h,
            subcommands: $subs,
        }
    };
}

static CONFIG_SUBCOMMANDS: &[Spec] = &[
    server_cmd!(
        "get",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "2.0.0",
        "Returns the effective values of configuration parameters.",
        config_get
    ),
    server_cmd!(
        "set",
        -4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "2.0.0",
        "Sets configuration parameters in-flight.",
        config_set
    ),
    server_cmd!(
        "resetstat",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "2.0.0",
        "Resets the server's statistics.",
        config_resetstat
    ),
    server_cmd!(
        "rewrite",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "2.8.0",
        "Persists the effective configuration to file.",
        config_rewrite
    ),
    server_cmd!(
        "help",
        2,
        LOADING | STALE,
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        config_help
    ),
];

static COMMAND_SUBCOMMANDS: &[Spec] = &[
    server_cmd!(
        "count",
        2,
        LOADING | STALE,
        "2.8.13",
        "Returns a count of commands.",
        command_count
    ),
    server_cmd!(
        "info",
        -2,
        LOADING | STALE,
        "2.8.13",
        "Returns information about one, multiple or all commands.",
        command_info
    ),
    server_cmd!(
        "docs",
        -2,
        LOADING | STALE,
        "7.0.0",
        "Returns documentary information about one, multiple or all commands.",
        command_docs
    ),
    server_cmd!(
        "list",
        -2,
        LOADING | STALE,
        "7.0.0",
        "Returns a list of command names.",
        command_list
    ),
    server_cmd!(
        "help",
        2,
        LOADING | STALE,
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        command_help
    ),
];

pub static COMMANDS: &[Spec] = &[
    server_cmd!(
        "dbsize",
        1,
        READONLY | FAST,
        "1.0.0",
        "Returns the number of keys in the database.",
        dbsize
    ),
    server_cmd!(
        "flushdb",
        -1,
        WRITE,
        "1.0.0",
        "Removes all keys from the current database.",
        flushdb
    ),
    server_cmd!(
        "flushall",
        -1,
        WRITE,
        "1.0.0",
        "Removes all keys from all databases.",
        flushall
    ),
    server_cmd!(
        "time",
        1,
        LOADING | STALE | FAST,
        "2.6.0",
        "Returns the server time.",
        time
    ),
    server_cmd!(
        "info",
        -1,
        LOADING | STALE | SENTINEL,
        "1.0.0",
        "Returns information and statistics about the server.",
        info_cmd
    ),
    server_cmd!(
        "config",
        -2,
        0,
        "2.0.0",
        "A container for server configuration commands.",
        config_help,
        CONFIG_SUBCOMMANDS
    ),
    server_cmd!(
        "command",
        -1,
        LOADING | STALE | SENTINEL,
        "2.8.13",
        "Returns detailed information about all commands.",
        command,
        COMMAND_SUBCOMMANDS
    ),
    server_cmd!(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | SENTINEL | ALLOW_BUSY,
        "1.0.0",
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        shutdown
    ),
];

fn dbsize(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let mut n = 0i64;
    ctx.shared.store.scan_db(ctx.conn.db, |_, _| n += 1)?;
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
    ctx.shared.store.flush_db(ctx.conn.db)?;
    ctx.reply.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    flush_mode(args)?;
    let dbs = ctx.shared.config.read().databases;
    for db in 0..dbs {
        ctx.shared.store.flush_db(db as u8)?;
    }
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
    let text = info::render(ctx.shared, &sections)?;
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
    ctx.shared.store.stats.reset();
    ctx.shared.cmdstats.reset();
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
    crate::config_rewrite::rewrite(&cfg, &path)
        .map_err(|e| CmdError::reply(format!("ERR Rewriting config file: {e}")))?;
    ctx.reply.ok();
    Ok(())
}

/// ACL categories of a command, from its flags and group (Redis keeps them in the JSON
/// files; these follow the same rules for the commands we have), in the order of Redis's
/// category table, which is the order COMMAND INFO lists them in.
fn acl_categories(s: &Spec) -> Vec<&'static str> {
    let has = |f: u32| s.flags & f != 0;
    [
        ("@keyspace", s.group == "generic"),
        ("@read", has(READONLY)),
        ("@write", has(WRITE)),
        ("@set", s.group == "set"),
        ("@sortedset", s.group == "sorted-set"),
        ("@list", s.group == "list"),
        ("@hash", s.group == "hash"),
        ("@string", s.group == "string"),
        ("@bitmap", s.group == "bitmap"),
        ("@hyperloglog", s.group == "hyperloglog"),
        ("@pubsub", has(PUBSUB)),
        ("@admin", has(ADMIN)),
        ("@fast", has(FAST)),
        ("@slow", !has(FAST)),
        ("@blocking", has(BLOCKING)),
        ("@dangerous", has(ADMIN)),
        ("@connection", s.group == "connection"),
        ("@transaction", s.group == "transactions"),
    ]
    .into_iter()
    .filter(|(_, on)| *on)
    .map(|(c, _)| c)
    .collect()
}

/// One COMMAND INFO entry: name, arity, flags, first key, last key, step, ACL categories,
/// tips, key specifications, subcommands.
fn reply_command_info(ctx: &mut Ctx<'_>, s: &Spec, full_name: &str) {
    let r = &mut *ctx.reply;
    r.array(10);
    r.bulk(full_name.as_bytes());
    r.int(i64::from(s.arity));
    let flags: Vec<&str> = NAMES
        .iter()
        .filter(|(f, _)| s.flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    r.set(flags.len());
    for f in flags {
        r.simple(f);
    }
    r.int(i64::from(s.keys.0));
    r.int(i64::from(s.keys.1));
    r.int(i64::from(s.keys.2));
    let cats = acl_categories(s);
    r.set(cats.len());
    for c in cats {
        r.simple(c);
    }
    r.set(0); // tips
    r.array(0); // key specifications (not modelled yet)
    r.array(s.subcommands.len());
    for sub in s.subcommands {
        reply_command_info(ctx, sub, &format!("{full_name}|{}", sub.name));
    }
}

fn command(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let all = all_commands();
    ctx.reply.array(all.len());
    for s in all {
        reply_command_info(ctx, s, s.name);
    }
    Ok(())
}

fn command_count(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.int(all_commands().len() as i64);
    Ok(())
}

/// A command or `container|sub` by name.
fn find(name: &[u8]) -> Option<(&'static Spec, String)> {
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    match name.split_once('|') {
        None => lookup(&name).map(|s| (s, name.clone())),
        Some((c, sub)) => lookup(c)?
            .subcommands
            .iter()
            .find(|s| s.name == sub)
            .map(|s| (s, name.clone())),
    }
}

fn command_info(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let names = args.rest().to_vec();
    if names.is_empty() {
        return command(ctx, args);
    }
    ctx.reply.array(names.len());
    for n in names {
        match find(&n) {
            Some((s, full)) => reply_command_info(ctx, s, &full),
            None => ctx.reply.null_array(),
        }
    }
    Ok(())
}

fn reply_command_doc(ctx: &mut Ctx<'_>, s: &Spec, full_name: &str) {
    let has_subs = !s.subcommands.is_empty();
    let args = docs::arguments(full_name).unwrap_or(&[]);
    let deprecation = docs::deprecation(full_name);
    let fields = 3
        + 3 * usize::from(deprecation.is_some())
        + usize::from(!args.is_empty())
        + usize::from(has_subs);
    ctx.reply.map(fields);
    ctx.reply.bulk(b"summary");
    ctx.reply.bulk(s.summary.as_bytes());
    ctx.reply.bulk(b"since");
    ctx.reply.bulk(s.since.as_bytes());
    ctx.reply.bulk(b"group");
    ctx.reply.bulk(s.group.as_bytes());
    if let Some(d) = deprecation {
        ctx.reply.bulk(b"doc_flags");
        ctx.reply.set(1);
        ctx.reply.simple("deprecated");
        ctx.reply.bulk(b"deprecated_since");
        ctx.reply.bulk(d.since.as_bytes());
        ctx.reply.bulk(b"replaced_by");
        ctx.reply.bulk(d.replaced_by.as_bytes());
    }
    if !args.is_empty() {
        ctx.reply.bulk(b"arguments");
        reply_doc_args(ctx, args);
    }
    if has_subs {
        ctx.reply.bulk(b"subcommands");
        ctx.reply.map(s.subcommands.len());
        for sub in s.subcommands {
            let name = format!("{full_name}|{}", sub.name);
            ctx.reply.bulk(name.as_bytes());
            reply_command_doc(ctx, sub, &name);
        }
    }
}

/// Redis's `addReplyCommandArgList`: each argument a map, optional fields left out.
fn reply_doc_args(ctx: &mut Ctx<'_>, args: &[docs::DocArg]) {
    ctx.reply.array(args.len());
    for a in args {
        let fields = 2
            + usize::from(a.key_spec_index.is_some())
            + usize::from(a.token.is_some())
            + usize::from(a.since.is_some())
            + usize::from(a.deprecated_since.is_some())
            + usize::from(!a.flags.is_empty())
            + usize::from(!a.args.is_empty());
        ctx.reply.map(fields);
        ctx.reply.bulk(b"name");
        ctx.reply.bulk(a.name.as_bytes());
        ctx.reply.bulk(b"type");
        ctx.reply.bulk(a.kind.as_bytes());
        if let Some(i) = a.key_spec_index {
            ctx.reply.bulk(b"key_spec_index");
            ctx.reply.int(i64::from(i));
        }
        if let Some(t) = a.token {
            ctx.reply.bulk(b"token");
            ctx.reply.bulk(t.as_bytes());
        }
        if let Some(v) = a.since {
            ctx.reply.bulk(b"since");
            ctx.reply.bulk(v.as_bytes());
        }
        if let Some(v) = a.deprecated_since {
            ctx.reply.bulk(b"deprecated_since");
            ctx.reply.bulk(v.as_bytes());
        }
        if !a.flags.is_empty() {
            ctx.reply.bulk(b"flags");
            ctx.reply.set(a.flags.len());
            for f in &a.flags {
                ctx.reply.simple(f);
            }
        }
        if !a.args.is_empty() {
            ctx.reply.bulk(b"arguments");
            reply_doc_args(ctx, &a.args);
        }
    }
}

fn command_docs(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let names = args.rest().to_vec();
    let specs: Vec<(&Spec, String)> = if names.is_empty() {
        all_commands()
            .iter()
            .map(|s| (*s, s.name.to_string()))
            .collect()
    } else {
        names.iter().filter_map(|n| find(n)).collect()
    };
    ctx.reply.map(specs.len());
    for (s, name) in specs {
        ctx.reply.bulk(name.as_bytes());
        reply_command_doc(ctx, s, &name);
    }
    Ok(())
}

fn command_list(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let mut names: Vec<(String, &Spec)> = Vec::new();
    for s in all_commands() {
        names.push((s.name.to_string(), s));
        for sub in s.subcommands {
            names.push((format!("{}|{}", s.name, sub.name), sub));
        }
    }
    if !args.is_done() {
        if !args.eat("FILTERBY") {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
        let kind = args
            .next_keyword()
            .ok_or_else(|| CmdError::reply(ERR_SYNTAX))?;
        let arg = args.next_bytes()?;
        args.finish()?;
        match kind.as_str() {
            "MODULE" => names.clear(),
            "ACLCAT" => {
                let cat = format!("@{}", String::from_utf8_lossy(&arg).to_ascii_lowercase());
                names.retain(|(_, s)| acl_categories(s).contains(&cat.as_str()));
            }
            "PATTERN" => names.retain(|(n, _)| glob::matches(&arg, n.as_bytes(), true)),
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        }
    }
    ctx.reply.array(names.len());
    for (n, _) in names {
        ctx.reply.bulk(n.as_bytes());
    }
    Ok(())
}

fn command_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
        ],
    );
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
