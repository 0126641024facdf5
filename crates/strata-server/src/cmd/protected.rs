//! MODULE, DEBUG and BGREWRITEAOF: commands of a Redis server that Strata answers as a
//! redis-server 7.0 configured as Strata is. MODULE LOAD / LOADEX / UNLOAD and DEBUG are
//! Redis's *protected* commands: they answer Redis's error for `enable-module-command no`
//! and `enable-debug-command no` (the defaults), as Strata loads no modules and has no
//! debug command. MODULE LIST is empty. BGREWRITEAOF answers as Redis does when a rewrite
//! starts: Strata has no append-only file, its write-ahead logs are the log, and the
//! equivalent durable step is to sync them (done before replying).
//!
//! Layer: commands (above services; below execution).

use super::{cmd, reply_help, Args, CmdError, CmdResult, Ctx, Entry};

pub static COMMANDS: &[Entry] = &[
    cmd("module|list", module_list),
    cmd("module|help", module_help),
    cmd("module|load", module_protected),
    cmd("module|loadex", module_protected),
    cmd("module|unload", module_protected),
    cmd("debug", debug),
    cmd("bgrewriteaof", bgrewriteaof),
];

/// Redis's `processCommand` refusal of a protected command that is not enabled.
fn not_allowed(what: &str, option: &str) -> CmdError {
    CmdError::reply(format!(
        "ERR {what} command not allowed. If the {option} option is set to \"local\", you \
         can run it from a local connection, otherwise you need to set this option in the \
         configuration file, and then restart the server."
    ))
}

fn module_list(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.array(0);
    Ok(())
}

fn module_help(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    reply_help(
        ctx,
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
    Ok(())
}

fn module_protected(_ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    Err(not_allowed("MODULE", "enable-module-command"))
}

fn debug(_ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    Err(not_allowed("DEBUG", "enable-debug-command"))
}

fn bgrewriteaof(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.tx.sync_if_dirty()?;
    ctx.reply
        .simple("Background append only file rewriting started");
    Ok(())
}
