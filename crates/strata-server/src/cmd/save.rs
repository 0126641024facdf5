//! Persistence commands: SAVE, BGSAVE (checkpoints of the database; `save.rs`).
//!
//! Layer: commands (above services; below execution).

use super::args::ERR_SYNTAX;
use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};

pub static COMMANDS: &[Entry] = &[cmd("save", save), cmd("bgsave", bgsave)];

fn save(ctx: &mut Ctx<'_>, _args: &mut Args) -> CmdResult {
    let (dir, name) = {
        let c = ctx.shared.config.read();
        (c.dir.clone(), c.dbfilename.clone())
    };
    let db = ctx.tx.db();
    ctx.shared
        .saves
        .save(db, &dir, &name)
        .map_err(|e| CmdError::reply(&e))?;
    ctx.reply.ok();
    Ok(())
}

/// `BGSAVE [SCHEDULE]`. Nothing else runs a child here, so SCHEDULE starts the save at once,
/// as Redis does when no child is active.
fn bgsave(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    if !args.is_done() {
        let schedule = args.eat("schedule");
        if !schedule || !args.is_done() {
            return Err(CmdError::reply(ERR_SYNTAX));
        }
    }
    let saves = &ctx.shared.saves;
    if !saves.begin_background() {
        return Err(CmdError::reply(crate::save::ERR_IN_PROGRESS));
    }
    let Some(shared) = ctx.shared.me.upgrade() else {
        saves.run_background_failed();
        return Err(CmdError::reply("ERR"));
    };
    let spawned = std::thread::Builder::new()
        .name("strata-bgsave".to_string())
        .spawn(move || {
            let (dir, name) = {
                let c = shared.config.read();
                (c.dir.clone(), c.dbfilename.clone())
            };
            shared.saves.run_background(shared.store.db(), &dir, &name);
        });
    match spawned {
        Ok(t) => {
            saves.set_thread(t);
            ctx.reply.simple("Background saving started");
            Ok(())
        }
        Err(e) => {
            eprintln!("strata-server: cannot start the background save: {e}");
            saves.run_background_failed();
            Err(CmdError::reply("ERR"))
        }
    }
}
