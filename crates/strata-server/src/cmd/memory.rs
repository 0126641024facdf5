//! MEMORY DOCTOR, MALLOC-STATS and PURGE (MEMORY USAGE and HELP are in `admin.rs`).
//!
//! Strata keeps its data on disk and in the engine's caches, not in allocations per key,
//! so there is no memory report of Redis's kind to make: DOCTOR gives Redis's answer for an
//! empty instance when no database holds a key and its "no issue" answer otherwise;
//! MALLOC-STATS answers as Redis built without jemalloc does (the allocator is chosen by
//! the binary, not by this crate); PURGE has nothing to purge and replies OK, as Redis.
//!
//! Layer: commands (above services; below execution).

use super::{cmd, Args, CmdResult, Ctx, Entry};

pub static COMMANDS: &[Entry] = &[
    cmd("memory|doctor", doctor),
    cmd("memory|malloc-stats", malloc_stats),
    cmd("memory|purge", purge),
];

const EMPTY: &str = "Hi Sam, this instance is empty or is using very little memory, my issues \
detector can't be used in these conditions. Please, leave for your mission on Earth and fill \
it with some data. The new Sam and I will be back to our programming as soon as I finished \
rebooting.";

const NO_ISSUE: &str = "Hi Sam, I can't find any memory issue in your instance. I can only \
account for what occurs on this base.";

fn doctor(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let dbs = ctx.shared.config.read().databases;
    let mut empty = true;
    for db in 0..dbs.min(256) {
        if ctx.shared.store.random_key(db as u8)?.is_some() {
            empty = false;
            break;
        }
    }
    ctx.reply
        .verbatim(if empty { EMPTY } else { NO_ISSUE }.as_bytes());
    Ok(())
}

fn malloc_stats(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply
        .verbatim(b"Stats not supported for the current allocator");
    Ok(())
}

fn purge(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    ctx.reply.ok();
    Ok(())
}
