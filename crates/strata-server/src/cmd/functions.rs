//! Function commands: FUNCTION LOAD/DELETE/FLUSH/LIST/STATS/KILL/DUMP/RESTORE/HELP, FCALL,
//! FCALL_RO (Redis's `functions.c`). The registry and the libraries' Lua are in
//! `scripting/functions.rs` and `scripting/library.rs`; an FCALL runs as an EVAL runs
//! (`cmd/scripting.rs`: atomic, its declared keys' stripes, busy and kill handling).
//!
//! **Stored in the database.** The libraries are one server record, `0xfe "functions"`,
//! whose value is FUNCTION DUMP's payload (`docs/format/functions.md`); each change writes
//! it, synced, before it takes effect, and the server reads it before serving clients
//! ([`open`]).
//!
//! Layer: commands (above services; below execution).

use super::scripting::{self, Target};
use super::table::traits::{MAY_REPLICATE, SCRIPT};
use super::{cmd, cmd_with, reply_help, Args, CmdError, CmdResult, Ctx, Entry};
use crate::keys::SERVER_PREFIX;
use crate::scripting::functions::{Functions, RestorePolicy, ENGINE};
use crate::server::Shared;
use bytes::Bytes;

pub static COMMANDS: &[Entry] = &[
    cmd_with("fcall", fcall, SCRIPT | MAY_REPLICATE),
    cmd_with("fcall_ro", fcall_ro, SCRIPT),
    cmd("function|load", function_load),
    cmd("function|delete", function_delete),
    cmd("function|flush", function_flush),
    cmd("function|list", function_list),
    cmd("function|stats", function_stats),
    cmd("function|kill", function_kill),
    cmd("function|dump", function_dump),
    cmd("function|restore", function_restore),
    cmd("function|help", function_help),
];

/// The server record holding the libraries. On-disk: do not change.
pub fn record_key() -> Vec<u8> {
    let mut k = vec![SERVER_PREFIX];
    k.extend_from_slice(b"functions");
    k
}

/// The libraries stored in `store` (none in a new database); an error names what is wrong
/// with a stored library.
pub fn open(store: &crate::store::Store) -> Result<Functions, String> {
    let stored = store
        .db()
        .get(&record_key())
        .map_err(|e| format!("reading the function libraries: {e}"))?;
    Functions::open(stored.as_deref())
        .map_err(|e| format!("the stored function libraries do not load: {e}"))
}

/// Writes a registry's payload, synced, before the change takes effect.
pub(crate) fn save(shared: &Shared) -> impl Fn(&[u8]) -> Result<(), String> + '_ {
    move |payload: &[u8]| {
        let mut b = strata::WriteBatch::new();
        b.put(&record_key(), payload);
        shared
            .store
            .write_server_records(b)
            .map_err(|e| format!("ERR storing the function libraries failed: {e}"))
    }
}

fn fcall(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    fcall_generic(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    fcall_generic(ctx, args, true)
}

fn fcall_generic(ctx: &mut Ctx<'_>, args: &mut Args, read_only: bool) -> CmdResult {
    let sent: Vec<Bytes> = (0..).map_while(|i| args.sent(i).cloned()).collect();
    let name = args.next_bytes()?;
    let (library, function) = ctx
        .shared
        .functions
        .find(&name)
        .ok_or_else(|| CmdError::reply("ERR Function not found"))?;
    let numkeys = args.next_bytes()?;
    let n = crate::protocol::parse::parse_i64(&numkeys)
        .ok_or_else(|| CmdError::reply("ERR Bad number of keys provided"))?;
    let (keys, argv) = scripting::split_keys(n, args)?;
    let target = Target::Function {
        library: &library,
        name: &function,
        argv: &sent,
    };
    scripting::run(ctx, target, keys, argv, read_only)
}

fn function_load(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest = args.rest().to_vec();
    let Some((code, options)) = rest.split_last() else {
        return Err(CmdError::reply("ERR Function code is missing"));
    };
    let mut replace = false;
    for o in options {
        if !o.eq_ignore_ascii_case(b"replace") {
            let mut m = b"ERR Unknown option given: ".to_vec();
            m.extend_from_slice(super::cstr(o, usize::MAX));
            return Err(CmdError::reply_bytes(m));
        }
        replace = true;
    }
    let shared = ctx.shared;
    let name = shared
        .functions
        .load(code.clone(), replace, &save(shared))
        .map_err(CmdError::reply)?;
    // The libraries are state replicas need: propagated as called (Redis 7.0).
    ctx.effects.dirty();
    ctx.reply.bulk(name.as_bytes());
    Ok(())
}

fn function_delete(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let name = args.next_bytes()?;
    let shared = ctx.shared;
    shared
        .functions
        .delete(&name, &save(shared))
        .map_err(CmdError::reply)?;
    ctx.effects.dirty();
    ctx.reply.ok();
    Ok(())
}

/// Redis's `addReplySubcommandSyntaxError`: the subcommand quoted as sent.
fn subcommand_syntax(args: &Args) -> CmdError {
    let mut m = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    m.extend_from_slice(super::cstr(args.sent(1).map_or(&b""[..], |b| b), 128));
    m.extend_from_slice(b"'. Try FUNCTION HELP.");
    CmdError::reply_bytes(m)
}

fn function_flush(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if args.remaining() > 1 {
        return Err(subcommand_syntax(args));
    }
    let ok = match args.rest() {
        [] => true,
        [mode] => mode.eq_ignore_ascii_case(b"sync") || mode.eq_ignore_ascii_case(b"async"),
        _ => false,
    };
    if !ok {
        return Err(CmdError::reply(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    let shared = ctx.shared;
    shared
        .functions
        .flush(&save(shared))
        .map_err(CmdError::reply)?;
    ctx.effects.dirty();
    ctx.reply.ok();
    Ok(())
}

fn function_list(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest = args.rest().to_vec();
    let (mut with_code, mut pattern) = (false, None);
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        if !with_code && a.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && a.eq_ignore_ascii_case(b"libraryname") {
            let Some(p) = rest.get(i + 1) else {
                return Err(CmdError::reply("ERR library name argument was not given"));
            };
            pattern = Some(p.clone());
            i += 1;
        } else {
            let mut m = b"ERR Unknown argument ".to_vec();
            m.extend_from_slice(super::cstr(a, usize::MAX));
            return Err(CmdError::reply_bytes(m));
        }
        i += 1;
    }
    let libs: Vec<_> = ctx
        .shared
        .functions
        .libraries()
        .into_iter()
        .filter(|l| {
            pattern
                .as_ref()
                .is_none_or(|p| crate::glob::matches(p, l.name.as_bytes(), true))
        })
        .collect();
    let r = &mut *ctx.reply;
    r.array(libs.len());
    for lib in libs {
        r.map(if with_code { 4 } else { 3 });
        r.bulk(b"library_name");
        r.bulk(lib.name.as_bytes());
        r.bulk(b"engine");
        r.bulk(ENGINE.as_bytes());
        r.bulk(b"functions");
        r.array(lib.functions.len());
        for f in lib.functions.values() {
            r.map(3);
            r.bulk(b"name");
            r.bulk(f.name.as_bytes());
            r.bulk(b"description");
            r.opt_bulk(f.description.as_deref());
            r.bulk(b"flags");
            let flags = [
                (f.flags.no_writes, "no-writes"),
                (f.flags.allow_oom, "allow-oom"),
                (f.flags.allow_stale, "allow-stale"),
                (f.flags.no_cluster, "no-cluster"),
                (f.flags.allow_cross_slot_keys, "allow-cross-slot-keys"),
            ];
            r.set(flags.iter().filter(|(on, _)| *on).count());
            for (_, name) in flags.iter().filter(|(on, _)| *on) {
                r.simple(name);
            }
        }
        if with_code {
            r.bulk(b"library_code");
            r.bulk(&lib.code);
        }
    }
    Ok(())
}

fn function_stats(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let scripts = &ctx.shared.scripts;
    if scripts.busy_kind() == Some(false) {
        return Err(CmdError::reply(scripting::busy_text(false)));
    }
    let running = scripts.busy_function();
    let (libraries, functions) = ctx.shared.functions.counts();
    let r = &mut *ctx.reply;
    r.map(2);
    r.bulk(b"running_script");
    match running {
        None => r.null(),
        Some((run, elapsed)) => {
            r.map(3);
            r.bulk(b"name");
            r.bulk(run.name.as_bytes());
            r.bulk(b"command");
            r.array(run.argv.len());
            for a in &run.argv {
                r.bulk(a);
            }
            r.bulk(b"duration_ms");
            r.int(elapsed.as_millis() as i64);
        }
    }
    r.bulk(b"engines");
    r.map(1);
    r.bulk(ENGINE.as_bytes());
    r.map(2);
    r.bulk(b"libraries_count");
    r.int(libraries as i64);
    r.bulk(b"functions_count");
    r.int(functions as i64);
    Ok(())
}

fn function_kill(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    scripting::kill(ctx, true)
}

fn function_dump(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let payload = ctx.shared.functions.payload();
    ctx.reply.bulk(&payload);
    Ok(())
}

fn function_restore(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if args.remaining() > 2 {
        return Err(subcommand_syntax(args));
    }
    let payload = args.next_bytes()?;
    let policy = match args.rest() {
        [] => RestorePolicy::Append,
        [p] if p.eq_ignore_ascii_case(b"append") => RestorePolicy::Append,
        [p] if p.eq_ignore_ascii_case(b"replace") => RestorePolicy::Replace,
        [p] if p.eq_ignore_ascii_case(b"flush") => RestorePolicy::Flush,
        _ => {
            return Err(CmdError::reply(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or \
                 REPLACE.",
            ))
        }
    };
    let shared = ctx.shared;
    shared
        .functions
        .restore(&payload, policy, &save(shared))
        .map_err(CmdError::reply)?;
    ctx.effects.dirty();
    ctx.reply.ok();
    Ok(())
}

fn function_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(ctx, "FUNCTION", HELP);
    Ok(())
}

/// FUNCTION HELP's lines (Redis 7.0.15's text).
const HELP: &[&str] = &[
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
];
