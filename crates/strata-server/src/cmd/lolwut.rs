//! LOLWUT [VERSION v] [arguments]: Redis 7.0's lolwut.c dispatch. VERSION 5 draws
//! Schotter, VERSION 6 a skyline (`crate::lolwut`); any other version, and no VERSION,
//! answers the server's version line only, as Redis 7.0 (whose own art is version 6's).

use super::args::ERR_NOT_INT;
use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::protocol::parse::parse_i64;
use crate::server::REDIS_VERSION;

pub static COMMANDS: &[Entry] = &[cmd("lolwut", lolwut)];

fn lolwut(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let rest: Vec<_> = args.rest().to_vec();
    let mut version = None;
    let mut params = &rest[..];
    if rest.len() >= 2 && rest[0].eq_ignore_ascii_case(b"version") {
        let v = parse_i64(&rest[1]).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?;
        version = Some(v);
        params = &rest[2..];
    }
    let num = |i: usize, default: i64| -> Result<i64, CmdError> {
        match params.get(i) {
            Some(a) => parse_i64(a).ok_or_else(|| CmdError::reply(ERR_NOT_INT)),
            None => Ok(default),
        }
    };
    let text = match version {
        Some(5) => crate::lolwut::schotter(num(0, 66)?, num(1, 8)?, num(2, 12)?, REDIS_VERSION),
        Some(6) => crate::lolwut::skyline(num(0, 80)?, num(1, 20)?, REDIS_VERSION),
        _ => format!("Redis ver. {REDIS_VERSION}\n"),
    };
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}
