//! BITOP, BITFIELD and BITFIELD_RO (Redis's bitops.c), registered in `bits.rs`'s table.
//!
//! BITOP pads shorter sources with zero bytes, writes a result as long as the longest
//! source (its TTL dropped, as SET drops it) and deletes the destination when every source
//! is missing or empty.
//!
//! BITFIELD parses every subcommand before it touches the key, in Redis's order (the
//! subcommand and its argument count, the type, the offset, the value), so a bad request
//! gets Redis's error and changes nothing. Fields are big-endian bit strings from bit
//! `offset`, bit 0 being the most significant bit of the first byte; bits past the end of
//! the string read as 0. A request with any SET or INCRBY creates the key or grows it to
//! its highest written bit even if every write fails under OVERFLOW FAIL, as Redis does.
//!
//! Layer: commands (above services; below execution).

use super::args::{ERR_NOT_INT, ERR_SYNTAX};
use super::bits::ERR_OFFSET;
use super::{Args, CmdError, CmdResult, Ctx};
use crate::notify::{keyspace_event as notify, Class};
use crate::protocol::parse::parse_i64;
use crate::string::{self, Str};
use bytes::Bytes;

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

pub(super) fn bitop(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    let op = args.next_bytes()?;
    let dest = args.next_bytes()?;
    let sources = args.rest().to_vec();
    let op = match op.to_ascii_lowercase().as_slice() {
        b"and" => BitOp::And,
        b"or" => BitOp::Or,
        b"xor" => BitOp::Xor,
        b"not" => BitOp::Not,
        _ => return Err(CmdError::reply(ERR_SYNTAX)),
    };
    if op == BitOp::Not && sources.len() != 1 {
        return Err(CmdError::reply(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let db = ctx.conn.db;
    let store = ctx.tx;
    let mut keys = vec![dest.clone()];
    keys.extend(sources.iter().cloned());
    let mut values: Vec<Vec<u8>> = Vec::with_capacity(sources.len());
    for k in &sources {
        let v = Str::open(store, db, k)?;
        values.push(v.value().unwrap_or_default().to_vec());
    }
    let len = values.iter().map(Vec::len).max().unwrap_or(0);
    if len == 0 {
        if store.get(db, &dest)?.is_some() {
            store.delete(db, &dest)?;
            notify(ctx, Class::Generic, "del", db, &dest);
        }
    } else {
        let byte = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
        let result: Vec<u8> = (0..len)
            .map(|i| {
                let mut it = values.iter().map(|v| byte(v, i));
                let first = it.next().unwrap_or(0);
                match op {
                    BitOp::And => it.fold(first, |a, b| a & b),
                    BitOp::Or => it.fold(first, |a, b| a | b),
                    BitOp::Xor => it.fold(first, |a, b| a ^ b),
                    BitOp::Not => !first,
                }
            })
            .collect();
        store.put(db, &dest, &string::new_meta(store, result, 0))?;
        notify(ctx, Class::String, "set", db, &dest);
    }
    ctx.reply.int(len as i64);
    Ok(())
}

/// OVERFLOW's modes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One GET, SET or INCRBY of a BITFIELD.
#[derive(Clone, Copy, Debug)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

const ERR_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// `i1`..`i64` or `u1`..`u63` (lower case only, as Redis): (signed, bits).
fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let bad = || CmdError::reply(ERR_TYPE);
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(bad()),
    };
    let bits = parse_i64(&arg[1..]).ok_or_else(bad)?;
    let max = if signed { 64 } else { 63 };
    if !(1..=max).contains(&bits) {
        return Err(bad());
    }
    Ok((signed, bits as u32))
}

/// A field's bit offset: a number, or `#N` for the N-th field of this width; its byte must
/// lie within proto-max-bulk-len (Redis's `getBitOffsetFromArgument`).
fn field_offset(ctx: &Ctx<'_>, arg: &[u8], bits: u32) -> Result<u64, CmdError> {
    let bad = || CmdError::reply(ERR_OFFSET);
    let by_index = arg.first() == Some(&b'#');
    let mut n = parse_i64(&arg[usize::from(by_index)..]).ok_or_else(bad)?;
    if by_index {
        // C multiplies in `long long`; an overflow wraps there, and is then out of range.
        n = n.wrapping_mul(i64::from(bits));
    }
    if n < 0 || (n >> 3) >= ctx.shared.config.read().proto_max_bulk_len {
        return Err(bad());
    }
    Ok(n as u64)
}

/// Parses BITFIELD's subcommands (after the key).
fn parse_fields(ctx: &Ctx<'_>, rest: &[Bytes]) -> Result<Vec<Field>, CmdError> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 0;
    while j < rest.len() {
        let left = rest.len() - j - 1;
        let sub = rest[j].to_ascii_lowercase();
        let has_value = match sub.as_slice() {
            b"get" if left >= 2 => false,
            b"set" | b"incrby" if left >= 3 => true,
            b"overflow" if left >= 1 => {
                overflow = match rest[j + 1].to_ascii_lowercase().as_slice() {
                    b"wrap" => Overflow::Wrap,
                    b"sat" => Overflow::Sat,
                    b"fail" => Overflow::Fail,
                    _ => return Err(CmdError::reply("ERR Invalid OVERFLOW type specified")),
                };
                j += 2;
                continue;
            }
            _ => return Err(CmdError::reply(ERR_SYNTAX)),
        };
        let (signed, bits) = field_type(&rest[j + 1])?;
        let offset = field_offset(ctx, &rest[j + 2], bits)?;
        let op = if has_value {
            let v = parse_i64(&rest[j + 3]).ok_or_else(|| CmdError::reply(ERR_NOT_INT))?;
            if sub.as_slice() == b"set" {
                FieldOp::Set(v)
            } else {
                FieldOp::IncrBy(v)
            }
        } else {
            FieldOp::Get
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        j += if has_value { 4 } else { 3 };
    }
    Ok(fields)
}

/// `bits` bits from bit `offset` of `v` as an unsigned number (bits past the end are 0).
fn get_bits(v: &[u8], offset: u64, bits: u32) -> u64 {
    let mut x = 0u64;
    for i in 0..u64::from(bits) {
        let at = offset + i;
        let bit = v
            .get((at >> 3) as usize)
            .is_some_and(|b| b & (0x80 >> (at & 7)) != 0);
        x = (x << 1) | u64::from(bit);
    }
    x
}

/// Writes the low `bits` bits of `x` from bit `offset` (which lies within `v`).
fn set_bits(v: &mut [u8], offset: u64, bits: u32, x: u64) {
    for i in 0..u64::from(bits) {
        let at = offset + i;
        let mask = 0x80u8 >> (at & 7);
        let b = &mut v[(at >> 3) as usize];
        if (x >> (u64::from(bits) - 1 - i)) & 1 == 1 {
            *b |= mask;
        } else {
            *b &= !mask;
        }
    }
}

fn get_signed(v: &[u8], offset: u64, bits: u32) -> i64 {
    let x = get_bits(v, offset, bits);
    if bits < 64 && x & (1 << (bits - 1)) != 0 {
        (x | (u64::MAX << bits)) as i64
    } else {
        x as i64
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: whether `value + incr` leaves the `bits`-bit
/// range, and the value OVERFLOW WRAP or SAT gives then (`None` for FAIL or no overflow).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, mode: Overflow) -> (bool, Option<u64>) {
    let max = (1u64 << bits) - 1; // bits <= 63
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = (value as i64).wrapping_neg();
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX << bits);
    let limit = |sat: u64| match mode {
        Overflow::Wrap => Some(wrap()),
        Overflow::Sat => Some(sat),
        Overflow::Fail => None,
    };
    if value > max || (incr > 0 && incr > max_incr) {
        (true, limit(max))
    } else if incr < 0 && incr < min_incr {
        (true, limit(0))
    } else {
        (false, None)
    }
}

/// Redis's `checkSignedBitfieldOverflow`, with its wrapping arithmetic.
fn signed_overflow(value: i64, incr: i64, bits: u32, mode: Overflow) -> (bool, Option<i64>) {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    let limit = |sat: i64| match mode {
        Overflow::Wrap => Some(wrap()),
        Overflow::Sat => Some(sat),
        Overflow::Fail => None,
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr)
    {
        (true, limit(max))
    } else if value < min
        || (bits != 64 && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        (true, limit(min))
    } else {
        (false, None)
    }
}

/// Runs a SET or INCRBY on `v`: the reply (`None`: failed under OVERFLOW FAIL).
fn write_field(v: &mut [u8], f: &Field) -> Option<i64> {
    // SET checks its value as an increment of 0 to it; INCRBY the increment to the old value.
    let (is_set, arg) = match f.op {
        FieldOp::Set(x) => (true, x),
        FieldOp::IncrBy(x) => (false, x),
        FieldOp::Get => return None,
    };
    if f.signed {
        let old = get_signed(v, f.offset, f.bits);
        let (base, add) = if is_set { (arg, 0) } else { (old, arg) };
        let (over, limit) = signed_overflow(base, add, f.bits, f.overflow);
        let new = match (over, limit) {
            (false, _) => base.wrapping_add(add),
            (true, Some(l)) => l,
            (true, None) => return None,
        };
        set_bits(v, f.offset, f.bits, new as u64);
        Some(if is_set { old } else { new })
    } else {
        let old = get_bits(v, f.offset, f.bits);
        let (base, add) = if is_set { (arg as u64, 0) } else { (old, arg) };
        let (over, limit) = unsigned_overflow(base, add, f.bits, f.overflow);
        let new = match (over, limit) {
            (false, _) => base.wrapping_add(add as u64),
            (true, Some(l)) => l,
            (true, None) => return None,
        };
        set_bits(v, f.offset, f.bits, new);
        Some(if is_set { old as i64 } else { new as i64 })
    }
}

fn read_field(v: &[u8], f: &Field) -> i64 {
    if f.signed {
        get_signed(v, f.offset, f.bits)
    } else {
        get_bits(v, f.offset, f.bits) as i64
    }
}

pub(super) fn bitfield(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

pub(super) fn bitfield_ro(ctx: &mut Ctx<'_>, args: &mut Args) -> CmdResult {
    bitfield_generic(ctx, args, true)
}

fn bitfield_generic(ctx: &mut Ctx<'_>, args: &mut Args, read_only: bool) -> CmdResult {
    let key = args.next_bytes()?;
    let fields = parse_fields(ctx, args.rest())?;
    let highest = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.offset + u64::from(f.bits) - 1)
        .max();
    let db = ctx.conn.db;
    let Some(highest) = highest else {
        let s = Str::open(ctx.tx, db, &key)?;
        let v = s.value().unwrap_or_default();
        ctx.reply.array(fields.len());
        for f in &fields {
            ctx.reply.int(read_field(v, f));
        }
        return Ok(());
    };
    if read_only {
        return Err(CmdError::reply(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let mut s = Str::open_write(ctx.tx, db, &key)?;
    let mut v = s.value().unwrap_or_default().to_vec();
    let need = (highest >> 3) as usize + 1;
    if v.len() < need {
        v.resize(need, 0);
    }
    ctx.reply.array(fields.len());
    // Writes that took effect (an OVERFLOW FAIL that fails does not): Redis notifies
    // `setbit` once if there was any.
    let mut changes = 0;
    for f in &fields {
        match f.op {
            FieldOp::Get => ctx.reply.int(read_field(&v, f)),
            _ => match write_field(&mut v, f) {
                Some(n) => {
                    changes += 1;
                    ctx.reply.int(n)
                }
                None => ctx.reply.null(),
            },
        }
    }
    s.write(v)?;
    if changes > 0 {
        notify(ctx, Class::String, "setbit", db, &key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_and_write_big_endian_bits() {
        let mut v = vec![0u8; 3];
        set_bits(&mut v, 4, 8, 0xab);
        assert_eq!(v, [0x0a, 0xb0, 0]);
        assert_eq!(get_bits(&v, 4, 8), 0xab);
        assert_eq!(get_signed(&v, 4, 8), 0xab_u8 as i8 as i64);
        assert_eq!(get_bits(&v, 20, 12), 0); // past the end
        assert_eq!(get_signed(&[0xff; 8], 0, 64), -1);
    }

    #[test]
    fn overflow_rules() {
        use Overflow::*;
        assert_eq!(unsigned_overflow(250, 10, 8, Wrap), (true, Some(4)));
        assert_eq!(unsigned_overflow(250, 10, 8, Sat), (true, Some(255)));
        assert_eq!(unsigned_overflow(5, -10, 8, Sat), (true, Some(0)));
        assert_eq!(unsigned_overflow(5, -10, 8, Fail), (true, None));
        assert_eq!(unsigned_overflow(5, -5, 8, Fail), (false, None));
        assert_eq!(signed_overflow(120, 10, 8, Wrap), (true, Some(-126)));
        assert_eq!(signed_overflow(120, 10, 8, Sat), (true, Some(127)));
        assert_eq!(signed_overflow(-120, -10, 8, Sat), (true, Some(-128)));
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Wrap),
            (true, Some(i64::MIN))
        );
        assert_eq!(
            signed_overflow(-1, i64::MIN, 64, Sat),
            (true, Some(i64::MIN))
        );
        assert_eq!(signed_overflow(0, i64::MIN, 64, Fail), (false, None));
    }

    #[test]
    fn types_parse_as_redis() {
        assert_eq!(field_type(b"i64").unwrap(), (true, 64));
        assert_eq!(field_type(b"u63").unwrap(), (false, 63));
        for bad in [
            &b"u64"[..],
            b"U8",
            b"I8",
            b"i0",
            b"i65",
            b"x8",
            b"",
            b"i",
            b"i08",
            b"u-1",
        ] {
            assert!(field_type(bad).is_err(), "{bad:?}");
        }
    }
}
