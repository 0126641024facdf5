//! Bitmap commands (Redis's bitops.c): SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO over string values (BITOP and BITFIELD in `bitfield.rs`).
//! Bit 0 is the most significant bit of the first byte. SETBIT is a read-modify-write under
//! its key's stripe lock (see `store.rs`); the read commands take the lock too, as the other
//! string reads do, so lazy expiry and the read see one state.
//!
//! Redis 7.0's argument order is kept exactly, as it decides which error a bad request gets:
//! BITCOUNT reads start and end, answers 0 for a negative empty range, then reads BYTE|BIT; BITPOS start, BYTE|BIT, then end; both answer
//! a missing key (0, or BITPOS's -1/0) before looking at the range arguments.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::bitfield;
use super::strings::{check_len, modify, read_string};
use super::{cmd, Args, CmdError, CmdResult, Ctx, Entry};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
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

fn bit_at(v: &[u8], bit: u64) -> bool {
    let byte = (bit >> 3) as usize;
    byte < v.len() && v[byte] & (0x80 >> (bit & 7)) != 0
}

fn setbit(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let offset = bit_offset(ctx, &args.next_bytes()?)?;
    let on = match parse_i64(&args.next_bytes()?) {
        Some(b @ (0 | 1)) => b == 1,
        _ => return Err(CmdError::reply(ERR_BIT)),
    };
    let byte = (offset >> 3) as usize;
    let mask = 0x80u8 >> (offset & 7);
    let mut was = false;
    let mut wrote = false;
    modify(ctx, &key, |ctx, old| {
        // A missing key is created (zeros) even when the bit written is 0, as Redis's
        // `lookupStringForBitCommand` does; the offset check keeps the length within
        // proto-max-bulk-len, which `check_len` states again for the growth.
        let mut v = match old {
            Some(m) => {
                was = bit_at(&m.value, offset);
                if was == on && byte < m.value.len() {
                    return Ok(None); // neither grows nor changes
                }
                m.value.clone()
            }
            None => Vec::new(),
        };
        if v.len() <= byte {
            check_len(ctx, byte as u64 + 1)?;
            v.resize(byte + 1, 0);
        }
        if on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        wrote = true;
        Ok(Some(v))
    })?;
    // As Redis: only a SETBIT that created, grew or changed the value is notified.
    if wrote {
        notify(ctx, Class::String, "setbit", ctx.conn.db, &key);
    }
    ctx.reply.int(i64::from(was));
    Ok(())
}

fn getbit(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let offset = bit_offset(ctx, &args.next_bytes()?)?;
    let m = read_string(ctx, &key)?;
    ctx.reply
        .int(i64::from(m.is_some_and(|m| bit_at(&m.value, offset))));
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

/// A start..=end range in a string of `len` bytes (in bits when `bits`), Redis's way:
/// negative indexes count from the end, then both are clamped into the string. Returns the
/// range in bits, or `None` when it is empty.
fn bit_range(len: usize, start: i64, end: i64, bits: bool) -> Option<(u64, u64)> {
    let total = if bits { len as i64 * 8 } else { len as i64 };
    let fix = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let start = fix(start);
    let end = fix(end).min(total - 1);
    if start > end {
        return None;
    }
    let (s, e) = (start as u64, end as u64);
    Some(if bits { (s, e) } else { (s * 8, e * 8 + 7) })
}

fn count_ones(v: &[u8], first: u64, last: u64) -> i64 {
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    let mut n: i64 = v[fb..=lb].iter().map(|b| i64::from(b.count_ones())).sum();
    // Take off the bits of the edge bytes that lie outside the range.
    n -= i64::from((v[fb] & !(0xffu8 >> (first & 7))).count_ones());
    n -= i64::from((v[lb] & (0x7fu8 >> (last & 7))).count_ones());
    n
}

fn bitcount(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let rest = args.rest().to_vec();
    let Some(m) = read_string(ctx, &key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let range = match rest.len() {
        0 => bit_range(m.value.len(), 0, -1, false),
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
            bit_range(m.value.len(), start, end, bits)
        }
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    ctx.reply
        .int(range.map_or(0, |(s, e)| count_ones(&m.value, s, e)));
    Ok(())
}

/// The first bit equal to `bit` in `first..=last`.
fn find_bit(v: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    let skip = if bit { 0x00 } else { 0xff };
    let mut i = first;
    while i <= last {
        if i & 7 == 0 && i + 7 <= last && v[(i >> 3) as usize] == skip {
            i += 8;
            continue;
        }
        if bit_at(v, i) == bit {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn bitpos(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let key = args.next_bytes()?;
    let bit = match int(&args.next_bytes()?)? {
        b @ (0 | 1) => b == 1,
        _ => return Err(CmdError::reply("ERR The bit argument must be 1 or 0.")),
    };
    let rest = args.rest().to_vec();
    // A missing key is an endless run of zeros.
    let Some(m) = read_string(ctx, &key)? else {
        ctx.reply.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let len = m.value.len();
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
        Some((s, e)) => match find_bit(&m.value, bit, s, e) {
            Some(p) => p as i64,
            // Without an explicit end the string continues with zeros to the right.
            None if !bit && !end_given => e as i64 + 1,
            None => -1,
        },
    };
    ctx.reply.int(pos);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_clamp_as_redis() {
        assert_eq!(bit_range(3, 0, -1, false), Some((0, 23)));
        assert_eq!(bit_range(3, -100, 100, false), Some((0, 23)));
        assert_eq!(bit_range(3, 2, 1, false), None);
        assert_eq!(bit_range(3, 5, 100, true), Some((5, 23)));
        assert_eq!(bit_range(0, 0, -1, false), None);
        assert_eq!(bit_range(2, -3, -1, true), Some((13, 15)));
    }

    #[test]
    fn counting_and_finding_bits() {
        let v = [0b1010_0000u8, 0xff, 0x01];
        assert_eq!(count_ones(&v, 0, 23), 11);
        assert_eq!(count_ones(&v, 1, 2), 1);
        assert_eq!(count_ones(&v, 2, 2), 1);
        assert_eq!(count_ones(&v, 9, 22), 7);
        assert_eq!(find_bit(&v, true, 1, 23), Some(2));
        assert_eq!(find_bit(&v, false, 8, 15), None);
        assert_eq!(find_bit(&v, true, 16, 23), Some(23));
        assert_eq!(find_bit(&v, false, 3, 23), Some(3));
    }
}
