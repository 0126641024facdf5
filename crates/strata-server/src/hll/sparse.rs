//! The sparse representation: after the header, run-length opcodes cover the registers in
//! order (`docs/format/hyperloglog.md`):
//!
//! - ZERO  `00xxxxxx`: `xxxxxx + 1` (1..=64) registers at 0;
//! - XZERO `01xxxxxx yyyyyyyy`: `xxxxxxyyyyyyyy + 1` (1..=16384) registers at 0;
//! - VAL   `1vvvvvxx`: `xx + 1` (1..=4) registers at `vvvvv + 1` (1..=32).
//!
//! Setting a register splits the opcode that covers it into at most three and then merges
//! neighbouring VALs of one value, exactly as Redis does, so the bytes are Redis's.
//!
//! A value may come from a client (SET), so opcodes are read defensively: the second byte
//! of an XZERO cut off at the end reads as 0, as Redis reads the string's terminator (Redis
//! may instead read a byte its own earlier split left past the end; that byte is not part
//! of the value, so it is not reproduced).

use super::{HllError, HDR_SIZE};

const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;

/// What an opcode holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Zero,
    XZero,
    Val(u8),
}

/// One opcode: what it holds, how many registers, where it starts, its length in bytes.
#[derive(Debug, Clone, Copy)]
pub struct Opcode {
    pub kind: Op,
    pub len: usize,
    pub at: usize,
    pub width: usize,
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}

/// The opcode at `at` (which is within `v`).
fn opcode_at(v: &[u8], at: usize) -> Opcode {
    let b = v[at];
    let (kind, len, width) = if is_zero(b) {
        (Op::Zero, usize::from(b & 0x3f) + 1, 1)
    } else if is_xzero(b) {
        let lo = v.get(at + 1).copied().unwrap_or(0);
        let len = ((usize::from(b & 0x3f) << 8) | usize::from(lo)) + 1;
        (Op::XZero, len, 2)
    } else {
        (Op::Val(((b >> 2) & 0x1f) + 1), usize::from(b & 0x3) + 1, 1)
    };
    Opcode {
        kind,
        len,
        at,
        width,
    }
}

/// The opcodes of a sparse value (header included in `v`).
pub struct Ops<'a> {
    v: &'a [u8],
    at: usize,
}

impl<'a> Ops<'a> {
    pub fn new(v: &'a [u8]) -> Ops<'a> {
        Ops { v, at: HDR_SIZE }
    }
}

impl Iterator for Ops<'_> {
    type Item = Opcode;

    fn next(&mut self) -> Option<Opcode> {
        if self.at >= self.v.len() {
            return None;
        }
        let op = opcode_at(self.v, self.at);
        self.at += op.width;
        Some(op)
    }
}

fn zero_op(out: &mut Vec<u8>, len: usize) {
    debug_assert!((1..=XZERO_MAX_LEN).contains(&len));
    if len > ZERO_MAX_LEN {
        let n = len - 1;
        out.push(0x40 | (n >> 8) as u8);
        out.push((n & 0xff) as u8);
    } else {
        out.push((len - 1) as u8);
    }
}

fn val_op(value: u8, len: usize) -> u8 {
    debug_assert!((1..=VAL_MAX_VALUE).contains(&value) && (1..=VAL_MAX_LEN).contains(&len));
    0x80 | ((value - 1) << 2) | (len - 1) as u8
}

/// Appends XZERO opcodes for `n` zero registers (a new value's body).
pub fn push_zeros(out: &mut Vec<u8>, mut n: usize) {
    while n > 0 {
        let len = n.min(XZERO_MAX_LEN);
        let m = len - 1;
        out.push(0x40 | (m >> 8) as u8);
        out.push((m & 0xff) as u8);
        n -= len;
    }
}

/// What [`set`] did.
pub enum SetResult {
    Unchanged,
    Changed,
    /// The value must become dense first (a value over 32, or the opcodes would grow past
    /// the limit); nothing was changed.
    NeedsDense,
}

/// Raises register `index` to `count` in the sparse value `v` (Redis's `hllSparseSet`).
/// Marks the cache stale when it changes something.
pub fn set(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<SetResult, HllError> {
    if count > VAL_MAX_VALUE {
        return Ok(SetResult::NeedsDense);
    }
    // The opcode covering `index`, the one before it, and the first register it covers.
    let mut first = 0;
    let mut prev = None;
    let mut found = None;
    for op in Ops::new(v) {
        if index < first + op.len {
            found = Some(op);
            break;
        }
        prev = Some(op.at);
        first += op.len;
    }
    let Some(op) = found else {
        return Err(HllError::Corrupt);
    };
    match op.kind {
        Op::Val(old) if old >= count => return Ok(SetResult::Unchanged),
        Op::Val(_) | Op::Zero if op.len == 1 => v[op.at] = val_op(count, 1),
        kind => {
            // Split into (run before) VAL(count) (run after).
            let last = first + op.len - 1;
            let mut seq = Vec::with_capacity(5);
            let run = |seq: &mut Vec<u8>, len: usize| match kind {
                Op::Val(cur) => seq.push(val_op(cur, len)),
                _ => zero_op(seq, len),
            };
            if index != first {
                run(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                run(&mut seq, last - index);
            }
            let old_len = v.len();
            let new_len = (old_len + seq.len()).saturating_sub(op.width);
            if new_len > old_len && new_len > sparse_max_bytes {
                return Ok(SetResult::NeedsDense);
            }
            let tail_at = (op.at + op.width).min(old_len);
            let tail = v.split_off(tail_at);
            v.truncate(op.at);
            v.extend_from_slice(&seq);
            v.extend_from_slice(&tail);
            // An XZERO cut off at the end counted a byte that was not there.
            v.truncate(new_len);
        }
    }
    merge_vals(v, prev.unwrap_or(HDR_SIZE));
    v[15] |= super::CACHE_STALE;
    Ok(SetResult::Changed)
}

/// Merges neighbouring VAL opcodes of one value whose lengths fit one opcode, looking at up
/// to five opcodes from `at`.
fn merge_vals(v: &mut Vec<u8>, mut at: usize) {
    let mut scan = 5;
    while at < v.len() && scan > 0 {
        scan -= 1;
        let b = v[at];
        if is_xzero(b) {
            at += 2;
            continue;
        }
        if is_zero(b) {
            at += 1;
            continue;
        }
        if let Some(&next) = v.get(at + 1) {
            if !is_zero(next) && !is_xzero(next) {
                let (a, c) = (opcode_at(v, at), opcode_at(v, at + 1));
                if a.kind == c.kind && a.len + c.len <= VAL_MAX_LEN {
                    if let Op::Val(value) = a.kind {
                        v[at + 1] = val_op(value, a.len + c.len);
                        v.remove(at);
                        // Try the merged opcode with the one after it.
                        continue;
                    }
                }
            }
        }
        at += 1;
    }
}

/// Whether `v`'s opcodes cover exactly the registers (for tests and checks).
#[cfg(test)]
pub fn covers_all(v: &[u8]) -> bool {
    Ops::new(v).map(|op| op.len).sum::<usize>() == super::REGISTERS
}
