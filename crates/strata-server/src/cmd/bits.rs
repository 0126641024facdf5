//! Bitmap commands (Redis's bitops.c): SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO over string values (BITOP and BITFIELD in `bitfield.rs`): their arguments,
//! replies and events. The bits themselves (bit 0 is the most significant bit of the first
//! byte), SETBIT's read-modify-write and the ranges are the string type's (`string.rs`).
//!
//! Redis 7.0's argument order is kept exactly, as it decides which error a bad request gets:
//! BITCOUNT reads start and end, answers 0 for a negative empty range, then reads BYTE|BIT; BITPOS start, BYTE|BIT, then end; both answer
//! a missing key (0, or BITPOS's -1/0) before looking at the range arguments.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::bitfield;
use super::strings::max_len;
use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::string::{bit_range, count_ones, find_bit, Str};
use bytes::Bytes;

pub static COMMANDS: &[Entry] = &[
    cmd("setbit", setbit),
    cmd("getbit", getbit),
    cmd("bitcount", bitcount),
    cmd("bitpos", bitpos),
    cmd("bitop", bitfield::bitop),
    cmd("bitfield", bitfield::bitfield),
    cmd("bitfield_ro", bitfield::bitfield_ro),
];

pub(super) const ERR_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const ERR_BIT: &str = "ERR bit is not an integer or out of range";

/// Redis's `getBitOffsetFromArgument`: a non-negative integer whose byte lies within
/// proto-max-bulk-len (with the default 512 MB: below 2^32).
fn bit_offset(ctx: &Ctx<'_>, arg: &[u8]) -> Result<u64, CmdError> {
    let max_bytes = ctx.shared.config.read().proto_max_bulk_len;
    match parse_i64(arg) {
        Some(n) if n >= 0 && (n >> 3) < max_bytes => Ok(n as u64),
        _ => Err(CmdError::reply(ERR_OFFSET)),
    }
}

fn setbit(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let offset = bit_offset(ctx, &args.next_bytes()?)?;
    let on = match parse_i64(&args.next_bytes()?) {
        Some(b @ (0 | 1)) => b == 1,
        _ => return Err(CmdError::reply(ERR_BIT)),
    };
    let max = max_len(ctx);
    let done = Str::open(ctx.tx, ctx.conn.db, &key)?.set_bit(offset, on, max)?;
    // As Redis: only a SETBIT that created, grew or changed the value is notified.
    if done.written {
        notify(ctx, Class::String, "setbit", ctx.conn.db, &key);
    }
    ctx.reply.int(i64::from(done.was));
    Ok(())
}

fn getbit(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let offset = bit_offset(ctx, &args.next_bytes()?)?;
    let s = Str::open(ctx.tx, ctx.conn.db, &key)?;
    ctx.reply.int(i64::from(s.get_bit(offset)));
    Ok(())
}

/// BYTE or BIT: whether a range counts bits.
fn unit_is_bit(arg: &Bytes) -> Result<bool, CmdError> {
    if arg.eq_ignore_ascii_case(b"bit") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"byte") {
        Ok(false)
    } else {
        Err(CmdError::reply(ERR_SYNTAX))
    }
}

fn int(arg: &[u8]) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or_else(|| CmdError::reply(ERR_NOT_INT))
}

fn bitcount(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let rest = args.rest().to_vec();
    let s = Str::open(ctx.tx, ctx.conn.db, &key)?;
    let Some(v) = s.value() else {
        ctx.reply.int(0);
        return Ok(());
    };
    let range = match rest.len() {
        0 => bit_range(v.len(), 0, -1, false),
        2 | 3 => {
            let start = int(&rest[0])?;
            let end = int(&rest[1])?;
            if start < 0 && end < 0 && start > end {
                // Empty whatever the unit, and answered before the unit is read.
                ctx.reply.int(0);
                return Ok(());
            }
            let bits = match rest.get(2) {
                Some(u) => unit_is_bit(u)?,
                None => false,
            };
            bit_range(v.len(), start, end, bits)
        }
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    ctx.reply.int(range.map_or(0, |(s, e)| count_ones(v, s, e)));
    Ok(())
}

fn bitpos(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let bit = match int(&args.next_bytes()?)? {
        b @ (0 | 1) => b == 1,
        _ => return Err(CmdError::reply("ERR The bit argument must be 1 or 0.")),
    };
    let rest = args.rest().to_vec();
    // A missing key is an endless run of zeros.
    let s = Str::open(ctx.tx, ctx.conn.db, &key)?;
    let Some(v) = s.value() else {
        ctx.reply.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let len = v.len();
    let (range, end_given) = match rest.len() {
        0 => (bit_range(len, 0, -1, false), false),
        1..=3 => {
            let start = int(&rest[0])?;
            let bits = match rest.get(2) {
                Some(u) => unit_is_bit(u)?,
                None => false,
            };
            let end = match rest.get(1) {
                Some(e) => Some(int(e)?),
                None => None,
            };
            (
                bit_range(len, start, end.unwrap_or(-1), bits),
                end.is_some(),
            )
        }
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    let pos = match range {
        // An empty range holds neither a 0 nor a 1.
        None => -1,
        Some((s, e)) => match find_bit(v, bit, s, e) {
            Some(p) => p as i64,
            // Without an explicit end the string continues with zeros to the right.
            None if !bit && !end_given => e as i64 + 1,
            None => -1,
        },
    };
    ctx.reply.int(pos);
    Ok(())
}
