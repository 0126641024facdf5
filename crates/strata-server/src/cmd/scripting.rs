//! Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT (Redis's `eval.c`). The
//! interpreter and the conversions are in `scripting/`.
//!
//! FCALL and FCALL_RO (`cmd/functions.rs`) run a library's function through the same path
//! ([`run`] takes either as its [`Target`]): what is said here of a script holds for them.
//!
//! **A script runs atomically, as EXEC does** (`cmd/multi.rs`). On the connection's thread
//! it takes the stripes of its declared keys (`KEYS`) exclusively
//! (`Store::lock_for_exec`), then runs in a front transaction (`Tx::run_exec_then`):
//! each `redis.call` goes through the normal dispatch, reads see the script's earlier
//! writes, writes are buffered, and when the script ends they are applied as one write,
//! atomic across shards. Nobody sees part of a script's effect, and after a crash either
//! all of it is there or none. A script that fails at run time keeps the writes it made
//! before the error (Redis has no rollback): they are applied too.
//!
//! **Undeclared keys.** Outside cluster mode a script may touch keys it did not declare
//! (or run commands that touch the keyspace without naming keys). The first such call
//! stops the run: its buffered writes are dropped (nothing was visible), the script is
//! marked, and it runs again from the start under every stripe, the exclusive turn of the
//! whole keyspace; a marked script takes every stripe at once from then on. A run that
//! only touches its declared keys never stops the rest of the server.
//! The discarded run's effects outside the keyspace (a PUBLISH before the undeclared key,
//! say) happen twice; scripts that declare their keys never see this.
//!
//! Inside MULTI, EXEC already holds every stripe for a queued EVAL (`lock_plan`) and its
//! transaction buffers the script's writes with the others: the script runs in it as is.
//!
//! **On its shard.** A cached script whose declared keys share a shard and that never
//! reached an undeclared key ([`may_run_on_shard`]) is routed to that shard's worker like a
//! single-shard command: it runs in the shard's group transaction (its writes are part of
//! the group's one engine write). If such a run does reach an undeclared key, its writes are
//! rolled back to the savepoint taken before it and it asks the connection to run it again
//! here (`Ctx::rerun_inline`). `docs/design.md` §13.11.
//!
//! Layer: commands (above services; below execution).

use super::flag::*;
use super::table::{
    self,
    traits::{MAY_REPLICATE, SCRIPT},
};
use super::{
    cmd, cmd_with, dispatch_found, find_command, reply_help, Args, CmdError, CmdResult, ConnState,
    Ctx, Entry, Found, Spec,
};
use crate::protocol::reply::{Proto, ReplyBuf};
use crate::scripting::functions::Library;
use crate::scripting::vm::Host;
use crate::scripting::{library, FunctionRun, KillError, Running, Script, ScriptFlags};
use crate::server::Shared;
use bytes::{Bytes, BytesMut};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub static COMMANDS: &[Entry] = &[
    cmd_with("eval", eval, SCRIPT | MAY_REPLICATE),
    cmd_with("evalsha", evalsha, SCRIPT | MAY_REPLICATE),
    cmd_with("eval_ro", eval_ro, SCRIPT),
    cmd_with("evalsha_ro", evalsha_ro, SCRIPT),
    cmd("script|load", script_load),
    cmd("script|exists", script_exists),
    cmd("script|flush", script_flush),
    cmd("script|kill", script_kill),
    cmd("script|debug", script_debug),
    cmd("script|help", script_help),
];

const ERR_NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

fn eval(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    eval_body(ctx, args, false)
}

fn eval_ro(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    eval_body(ctx, args, true)
}

fn evalsha(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    eval_sha(ctx, args, false)
}

fn evalsha_ro(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    eval_sha(ctx, args, true)
}

fn eval_body(ctx: &mut Ctx<'_>, args: &mut Args, read_only: bool) -> CmdResult {
    let body = args.next_bytes()?;
    let (keys, argv) = keys_and_args(args)?;
    let script = ctx
        .shared
        .scripts
        .insert(body, false)
        .map_err(CmdError::reply)?;
    run(ctx, Target::Script(&script), keys, argv, read_only)
}

fn eval_sha(ctx: &mut Ctx<'_>, args: &mut Args, read_only: bool) -> CmdResult {
    let sha = String::from_utf8_lossy(&args.next_bytes()?).to_ascii_lowercase();
    let (keys, argv) = keys_and_args(args)?;
    if sha.len() != 40 {
        return Err(CmdError::reply(ERR_NOSCRIPT));
    }
    let script = ctx
        .shared
        .scripts
        .get(&sha)
        .ok_or_else(|| CmdError::reply(ERR_NOSCRIPT))?;
    run(ctx, Target::Script(&script), keys, argv, read_only)
}

/// Whether the script or function `argv` (EVAL, EVALSHA, FCALL and their `_RO`) may run on
/// the worker of its declared keys' shard (`exec::route`): it is known (a cached script, a
/// loaded function) and no run of it has reached a key it did not declare. A script's first
/// EVAL runs on the connection's thread.
pub fn may_run_on_shard(shared: &Shared, spec: &Spec, argv: &[Bytes]) -> bool {
    let Some(arg) = argv.get(1) else {
        return false;
    };
    let unmarked = |m: &std::sync::atomic::AtomicBool| !m.load(Ordering::Relaxed);
    match spec.name {
        "fcall" | "fcall_ro" => shared.functions.find(arg).is_some_and(|(library, name)| {
            library
                .functions
                .get(&name)
                .is_some_and(|f| unmarked(&f.undeclared_keys))
        }),
        "eval" | "eval_ro" => shared
            .scripts
            .get(&crate::scripting::sha1hex(arg))
            .is_some_and(|s| unmarked(&s.undeclared_keys)),
        _ => shared
            .scripts
            .get(&String::from_utf8_lossy(arg).to_ascii_lowercase())
            .is_some_and(|s| unmarked(&s.undeclared_keys)),
    }
}

/// `numkeys key... arg...`.
pub(super) fn keys_and_args(args: &mut Args) -> Result<(Vec<Bytes>, Vec<Bytes>), CmdError> {
    let n = args.next_i64()?;
    split_keys(n, args)
}

/// The keys and arguments after a `numkeys` of `n`.
pub(super) fn split_keys(n: i64, args: &mut Args) -> Result<(Vec<Bytes>, Vec<Bytes>), CmdError> {
    if n < 0 {
        return Err(CmdError::reply("ERR Number of keys can't be negative"));
    }
    let rest = args.rest();
    if n as u64 > rest.len() as u64 {
        return Err(CmdError::reply(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let n = n as usize;
    Ok((rest[..n].to_vec(), rest[n..].to_vec()))
}

/// The script's side of the dispatch: its `redis.call`s, checked as Redis's `scriptCall`
/// checks them, then run as the script's own client.
struct ScriptHost<'a> {
    shared: &'a Shared,
    /// The transaction the script's calls run in.
    tx: &'a crate::store::Tx<'a>,
    conn: &'a mut ConnState,
    read_only: bool,
    /// The declared keys when only their stripes are held; `None` when every stripe is.
    declared: Option<&'a HashSet<(u8, Bytes)>>,
    /// A call touched a key outside `declared`: the run is dropped and made again.
    undeclared: bool,
    running: &'a Running,
    /// Cluster mode: the slot the script's keys are in (its declared keys', or the first
    /// call's that named keys), and whether it may reach others (`allow-cross-slot-keys`,
    /// or an EVAL script without a shebang).
    slot: Option<u16>,
    cross_slot_ok: bool,
}

impl Host for ScriptHost<'_> {
    fn call(&mut self, argv: Vec<Bytes>, proto: Proto) -> Result<BytesMut, String> {
        if self.undeclared {
            return Err(ERR_RERUN.to_string());
        }
        let found = find_command(&argv);
        let spec = match found {
            Found::Command(spec, _) if spec.handler.is_some() => spec,
            _ => return Err("ERR Unknown Redis command called from script".to_string()),
        };
        if !spec.arity_ok(argv.len()) {
            return Err("ERR Wrong number of args calling Redis command from script".to_string());
        }
        if spec.flags & NOSCRIPT != 0 {
            return Err("ERR This Redis command is not allowed from script".to_string());
        }
        super::acl::permit_script(self.shared, self.conn, spec, &argv)?;
        if spec.flags & WRITE != 0 && self.read_only {
            return Err("ERR Write commands are not allowed from read-only scripts.".to_string());
        }
        super::cluster::script_access(
            self.shared,
            self.conn,
            self.tx,
            spec,
            &argv,
            &mut self.slot,
            self.cross_slot_ok,
        )?;
        if let Some(declared) = self.declared {
            let db = self.conn.db;
            let touches_keyspace = spec.flags & (WRITE | READONLY) != 0;
            let named = spec
                .names_all_keys()
                .then(|| table::keys(spec, &argv))
                .flatten();
            let outside = match named {
                Some(keys) if spec.has_keys() => keys
                    .iter()
                    .any(|k| !declared.contains(&(db, argv[k.pos].clone()))),
                _ => touches_keyspace,
            };
            if outside {
                self.undeclared = true;
                // The instruction hook ends the run even if the script catches the error.
                self.running.kill.store(true, Ordering::SeqCst);
                return Err(ERR_RERUN.to_string());
            }
        }
        if spec.flags & WRITE != 0 {
            self.running.wrote.store(true, Ordering::SeqCst);
        }
        let mut reply = ReplyBuf::with_capacity(proto, 64);
        let mut c = Ctx::new(self.shared, self.tx, &mut *self.conn, &mut reply);
        let was = std::mem::replace(&mut c.conn.in_script, true);
        dispatch_found(&mut c, argv, found);
        c.conn.in_script = was;
        Ok(reply.take())
    }
}

/// What the calls of a run that is to be made again get (the client never sees it).
const ERR_RERUN: &str = "ERR the script touched a key it did not declare";

/// What runs: an EVAL's script or an FCALL's function.
#[derive(Clone, Copy)]
pub(super) enum Target<'a> {
    Script(&'a Script),
    Function {
        library: &'a Library,
        name: &'a str,
        /// The FCALL as sent (FUNCTION STATS shows it).
        argv: &'a [Bytes],
    },
}

impl Target<'_> {
    fn flags(&self) -> ScriptFlags {
        match self {
            Target::Script(s) => s.flags,
            Target::Function { library, name, .. } => library
                .functions
                .get(*name)
                .map(|f| f.flags)
                .unwrap_or_default(),
        }
    }

    fn undeclared_keys(&self) -> Option<&std::sync::atomic::AtomicBool> {
        match self {
            Target::Script(s) => Some(&s.undeclared_keys),
            Target::Function { library, name, .. } => {
                library.functions.get(*name).map(|f| &f.undeclared_keys)
            }
        }
    }
}

/// One EVAL or FCALL: what runs, its keys and arguments, the client's protocol, and
/// whether it may write.
struct Invocation<'a> {
    target: Target<'a>,
    keys: &'a [Bytes],
    argv: &'a [Bytes],
    proto: Proto,
    read_only: bool,
}

/// Runs the script once in `conn` (the script's client); whether it touched an undeclared
/// key (then its reply means nothing).
fn run_once(
    shared: &Shared,
    tx: &crate::store::Tx<'_>,
    conn: &mut ConnState,
    inv: &Invocation<'_>,
    declared: Option<&HashSet<(u8, Bytes)>>,
    running: &Arc<Running>,
) -> (BytesMut, bool) {
    let mut vm = match shared.scripts.take_vm() {
        Ok(v) => v,
        Err(e) => {
            let mut r = ReplyBuf::new(inv.proto);
            r.error(&e);
            return (r.take(), false);
        }
    };
    let mut host = ScriptHost {
        shared,
        tx,
        conn,
        read_only: inv.read_only,
        declared,
        undeclared: false,
        running,
        slot: inv.keys.first().map(|k| crate::keys::hash_slot(k)),
        // Redis allows it to EVAL scripts without a shebang (its compatibility mode).
        cross_slot_ok: match inv.target {
            Target::Script(s) => !s.flags.shebang || s.flags.allow_cross_slot_keys,
            Target::Function { .. } => inv.target.flags().allow_cross_slot_keys,
        },
    };
    let out = match inv.target {
        Target::Script(script) => vm.run(
            script,
            inv.keys,
            inv.argv,
            inv.proto,
            &mut host,
            running.clone(),
        ),
        Target::Function { library, name, .. } => {
            let live = |id| shared.functions.is_live(id);
            let target = library::Target {
                library_id: library.id,
                body: library.body(),
                function: name,
                generation: shared.functions.generation(),
                live: &live,
            };
            library::call(
                &mut vm,
                &target,
                inv.keys,
                inv.argv,
                inv.proto,
                &mut host,
                running.clone(),
            )
        }
    };
    shared.scripts.give_vm(vm);
    (out.reply, host.undeclared)
}

/// Runs a script or function atomically (see the module comment); `read_only` for the
/// `_RO` commands.
pub(super) fn run(
    ctx: &mut Ctx<'_>,
    target: Target<'_>,
    keys: Vec<Bytes>,
    argv: Vec<Bytes>,
    read_only: bool,
) -> CmdResult {
    let shared = ctx.shared;
    let proto = ctx.reply.proto;
    let flags = target.flags();
    // Redis's scriptPrepareForRun: `no-cluster` (a flag only a shebang or a function sets)
    // refuses the run in cluster mode.
    if flags.no_cluster && shared.cluster.is_some() {
        return Err(CmdError::reply(
            "ERR Can not run script on cluster, 'no-cluster' flag is set.",
        ));
    }
    // Redis's scriptPrepareForRun: a script with flags that may write is refused by the
    // `_RO` commands before it runs.
    if read_only && flags.shebang && !flags.no_writes {
        return Err(CmdError::reply(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    let read_only = read_only || flags.no_writes;
    // The script's own client: its SELECT does not change the caller's database, and its
    // blocking commands do not block (as inside EXEC).
    let mut conn = ctx.conn.clone();
    conn.in_exec = true;
    conn.multi = None;
    conn.sub = None;
    conn.reply_off = false;
    conn.skip_next = false;
    let threshold = busy_threshold(shared);
    let function = match target {
        Target::Script(_) => None,
        Target::Function { name, argv, .. } => Some(FunctionRun {
            name: name.to_string(),
            argv: argv.to_vec(),
        }),
    };
    let guard = shared.scripts.begin_as(threshold, function);
    let running = guard.running.clone();
    let inv = Invocation {
        target,
        keys: &keys,
        argv: &argv,
        proto,
        read_only,
    };
    if ctx.conn.in_exec {
        let (reply, _) = run_once(shared, ctx.tx, &mut conn, &inv, None, &running);
        // The script's writes join the transaction's effects (`repl/`).
        pass_effects(&mut conn, ctx.conn);
        ctx.reply.raw(&reply);
        return Ok(());
    }
    let store = ctx.tx;
    let db = ctx.conn.db;
    let declared: HashSet<(u8, Bytes)> = keys.iter().map(|k| (db, k.clone())).collect();
    let marked = target.undeclared_keys();
    let mut every_stripe = marked.is_some_and(|m| m.load(Ordering::Relaxed));
    if let Some(savepoint) = store.savepoint() {
        // On the worker of the shard that owns every declared key (`exec::route`), with
        // their stripes held: the script runs in the shard's transaction, its writes join
        // the group's one engine write, so it is atomic as on the connection's thread
        // without a second write or a hand-off.
        let (reply, undeclared) =
            run_once(shared, store, &mut conn, &inv, Some(&declared), &running);
        if undeclared || running.aborted.load(Ordering::SeqCst) {
            store.rollback_to(savepoint);
        } else {
            // Appended by the group's completion with the command's unit (`exec.rs`).
            pass_effects(&mut conn, ctx.conn);
        }
        if undeclared {
            if let Some(m) = marked {
                m.store(true, Ordering::Relaxed);
            }
            ctx.rerun_inline = true;
        } else {
            ctx.reply.raw(&reply);
        }
        return Ok(());
    }
    loop {
        let plan: Vec<(u8, &[u8])> = keys.iter().map(|k| (db, &k[..])).collect();
        let locks = store.lock_for_exec((!every_stripe).then_some(&plan[..]));
        let mut run_conn = conn.clone();
        // The script's writes go to the replication log as one unit before its stripes
        // are released (`repl/sequencer.rs`); the caller's run appends nothing more.
        let effects = std::cell::RefCell::new(None);
        let ((reply, rerun), written) = store.run_exec_then(
            locks,
            |tx| {
                let held = (!every_stripe).then_some(&declared);
                let r = run_once(shared, tx, &mut run_conn, &inv, held, &running);
                // A run stopped by SHUTDOWN leaves nothing behind.
                let apply = !r.1 && !running.aborted.load(Ordering::SeqCst);
                if apply {
                    *effects.borrow_mut() = run_conn.repl_pending.take();
                }
                (r, apply)
            },
            |w| {
                if let (Ok(()), Some(unit)) = (w, effects.borrow_mut().take()) {
                    shared.master.append_unit(&unit, unit.len() > 1);
                }
            },
        );
        if rerun {
            running.kill.store(false, Ordering::SeqCst);
            running.wrote.store(false, Ordering::SeqCst);
            if let Some(m) = marked {
                m.store(true, Ordering::Relaxed);
            }
            every_stripe = true;
            continue;
        }
        match written {
            Ok(()) => ctx.reply.raw(&reply),
            Err(e) => ctx.reply.raw(&crate::exec::failed_reply(shared, proto, &e)),
        }
        return Ok(());
    }
}

fn script_load(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let body = args.next_bytes()?;
    let script = ctx
        .shared
        .scripts
        .insert(body, true)
        .map_err(CmdError::reply)?;
    ctx.reply.bulk(script.sha.as_bytes());
    Ok(())
}

fn script_exists(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let shas: Vec<Bytes> = args.rest().to_vec();
    ctx.reply.array(shas.len());
    for s in shas {
        let sha = String::from_utf8_lossy(&s).to_ascii_lowercase();
        ctx.reply.int(i64::from(ctx.shared.scripts.exists(&sha)));
    }
    Ok(())
}

fn script_flush(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest = args.rest();
    let ok = match rest {
        [] => true,
        [mode] => mode.eq_ignore_ascii_case(b"sync") || mode.eq_ignore_ascii_case(b"async"),
        _ => false,
    };
    if !ok {
        return Err(CmdError::reply(
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
        ));
    }
    ctx.shared.scripts.flush();
    ctx.reply.ok();
    Ok(())
}

fn script_kill(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    kill(ctx, false)
}

/// SCRIPT KILL (`functions` false) or FUNCTION KILL.
pub(super) fn kill(ctx: &mut Ctx<'_>, functions: bool) -> CmdResult {
    match ctx.shared.scripts.kill(functions) {
        Ok(()) => {
            ctx.reply.ok();
            Ok(())
        }
        Err(KillError::NotBusy) => Err(CmdError::reply(
            "NOTBUSY No scripts in execution right now.",
        )),
        Err(KillError::Unkillable) => Err(CmdError::reply(
            "UNKILLABLE Sorry the script already executed write commands against the \
             dataset. You can either wait the script termination or kill the server in a \
             hard way using the SHUTDOWN NOSAVE command.",
        )),
        // The busy script is of the other kind: the error names the command that stops it.
        Err(KillError::OtherKind) => Err(CmdError::reply(busy_text(!functions))),
    }
}

/// Redis's `-BUSY` text for a busy EVAL (`function` false) or FCALL.
pub(super) fn busy_text(function: bool) -> &'static str {
    if function {
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    } else {
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    }
}

/// `busy-reply-threshold` (alias `lua-time-limit`), in milliseconds; 5000 by default.
fn busy_threshold(shared: &Shared) -> std::time::Duration {
    let ms = shared
        .config
        .read()
        .tuning
        .get("busy-reply-threshold")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(5000);
    std::time::Duration::from_millis(ms)
}

/// Redis's `-BUSY` for a command that may not run while a script is busy (anything but
/// the `allow_busy` commands: SCRIPT KILL, SHUTDOWN, AUTH, HELLO, MULTI...); `None` when no
/// script is busy. The script's own calls (in `in_exec` state) are never refused.
pub fn busy_error(shared: &Shared, spec: &Spec, conn: &ConnState) -> Option<&'static str> {
    if spec.flags & ALLOW_BUSY != 0 || conn.in_exec {
        return None;
    }
    shared.scripts.busy_kind().map(busy_text)
}

fn script_debug(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let mode = String::from_utf8_lossy(&args.next_bytes()?).to_ascii_lowercase();
    match mode.as_str() {
        "no" => {
            ctx.reply.ok();
            Ok(())
        }
        // The Lua debugger (LDB) is not built: a debugging session cannot start.
        "yes" | "sync" => Err(CmdError::reply(
            "ERR The Lua debugger is not available on this server",
        )),
        _ => Err(CmdError::reply("ERR Use SCRIPT DEBUG YES/SYNC/NO")),
    }
}

fn script_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
}

/// Moves the effects a script's own client collected to its caller's (`repl/`).
fn pass_effects(script: &mut ConnState, caller: &mut ConnState) {
    if let (Some(from), Some(to)) = (script.repl_pending.as_mut(), caller.repl_pending.as_mut()) {
        to.append(from);
    }
}
