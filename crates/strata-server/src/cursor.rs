//! SCAN cursors: positions in the ordered key space of a database, as Redis's unsigned 64-bit
//! integers (`docs/design.md` §13.4.2 has the guarantee and its argument).
//!
//! A position is "the first metadata record of hash slot `slot` whose user key is not below
//! `bound`". Bits of a cursor, high to low:
//!
//! ```text
//! slot (14) | len (3) | payload (47)
//!   len 0..=5: payload = bound bytes (40 bits, zero-padded) << 7; an inline cursor
//!   len 7:     payload = id of a bound kept in the server's ScanBounds table
//!   len 6:     read as len 5 (unused; any integer is a cursor, as in Redis)
//! ```
//!
//! Cursor 0 is slot 0 with an empty bound: the start of the database. Bounds that fit in 5
//! bytes need no server state; longer ones (many keys of one slot sharing their first 5
//! bytes) go into a bounded table, and a cursor whose entry is gone (evicted, or from before
//! a restart) resumes at the start of its slot: duplicates, never a missed key.
//!
//! Layer: services (above store and types; below commands).

use crate::keys::SLOTS;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};

/// Longest bound an inline cursor holds, in bytes of the user key.
pub const INLINE_BOUND_BYTES: usize = 5;
/// Most bounds the table keeps; the oldest go first.
pub const TABLE_ENTRIES: usize = 4096;
const LEN_TABLE: u64 = 7;
const ID_BITS: u32 = 47;

/// A decoded cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cursor {
    Inline { slot: u16, bound: Vec<u8> },
    Table { slot: u16, id: u64 },
}

pub fn encode_inline(slot: u16, bound: &[u8]) -> u64 {
    debug_assert!(slot < SLOTS && bound.len() <= INLINE_BOUND_BYTES);
    let mut bytes = [0u8; 8];
    bytes[3..3 + bound.len()].copy_from_slice(bound);
    (u64::from(slot) << 50) | ((bound.len() as u64) << 47) | (u64::from_be_bytes(bytes) << 7)
}

fn encode_table(slot: u16, id: u64) -> u64 {
    (u64::from(slot) << 50) | (LEN_TABLE << 47) | (id & ((1 << ID_BITS) - 1))
}

/// Any 64-bit value decodes (as in Redis, an unknown cursor resumes somewhere).
pub fn decode(c: u64) -> Cursor {
    let slot = (c >> 50) as u16;
    let len = (c >> 47) & 7;
    if len == LEN_TABLE {
        return Cursor::Table {
            slot,
            id: c & ((1 << ID_BITS) - 1),
        };
    }
    let len = (len as usize).min(INLINE_BOUND_BYTES);
    let bytes = ((c >> 7) & ((1 << 40) - 1)).to_be_bytes();
    Cursor::Inline {
        slot,
        bound: bytes[3..3 + len].to_vec(),
    }
}

/// The shortest bound `b` with `prev < b <= next` (keys ordered by slot, then bytes): the
/// next slot with an empty bound, or the first byte where `next` differs from `prev` and
/// what precedes it. Fits inline when it is at most 5 bytes long.
pub fn between(prev: (u16, &[u8]), next: (u16, &[u8])) -> (u16, Vec<u8>) {
    if next.0 > prev.0 {
        return (next.0, Vec::new());
    }
    let common = prev
        .1
        .iter()
        .zip(next.1)
        .take_while(|(a, b)| a == b)
        .count();
    (next.0, next.1[..(common + 1).min(next.1.len())].to_vec())
}

/// Redis's `parseScanCursorOrReply`: C's `strtoul` over the whole argument (an optional
/// sign, a negative value wrapping around; the empty string is 0), no leading space.
pub fn parse(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { n.wrapping_neg() } else { n })
}

struct Entry {
    /// Whose iteration the bound belongs to: the database index for SCAN, the collection's
    /// metadata record key and version for HSCAN and SSCAN.
    owner: Vec<u8>,
    slot: u16,
    bound: Vec<u8>,
}

struct Table {
    next_id: u64,
    entries: HashMap<u64, Entry>,
    order: VecDeque<u64>,
}

/// The server's table of bounds too long for an inline cursor.
pub struct ScanBounds {
    table: Mutex<Table>,
}

impl Default for ScanBounds {
    /// Ids start at the clock in microseconds, so that a cursor kept by a client across a
    /// restart does not name another iteration's entry.
    fn default() -> Self {
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        ScanBounds {
            table: Mutex::new(Table {
                next_id: start & ((1 << ID_BITS) - 1),
                entries: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }
}

impl ScanBounds {
    /// The cursor for position (`slot`, `bound`) of database `db`: inline if it fits, else
    /// a new table entry (evicting the oldest beyond [`TABLE_ENTRIES`]).
    pub fn cursor(&self, db: u8, slot: u16, bound: Vec<u8>) -> u64 {
        self.cursor_for(vec![db], slot, bound)
    }

    /// [`ScanBounds::cursor`] for an iteration named by `owner` (see `Entry::owner`).
    pub fn cursor_for(&self, owner: Vec<u8>, slot: u16, bound: Vec<u8>) -> u64 {
        if bound.len() <= INLINE_BOUND_BYTES {
            return encode_inline(slot, &bound);
        }
        let mut t = self.table.lock();
        let id = t.next_id;
        t.next_id = (id + 1) & ((1 << ID_BITS) - 1);
        t.entries.insert(id, Entry { owner, slot, bound });
        t.order.push_back(id);
        while t.order.len() > TABLE_ENTRIES {
            if let Some(old) = t.order.pop_front() {
                t.entries.remove(&old);
            }
        }
        encode_table(slot, id)
    }

    /// The position cursor `c` names in database `db`: a table cursor whose entry is gone
    /// or belongs elsewhere resumes at the start of its slot.
    pub fn resolve(&self, db: u8, c: u64) -> (u16, Vec<u8>) {
        self.resolve_for(&[db], c)
    }

    /// [`ScanBounds::resolve`] for an iteration named by `owner`.
    pub fn resolve_for(&self, owner: &[u8], c: u64) -> (u16, Vec<u8>) {
        match decode(c) {
            Cursor::Inline { slot, bound } => (slot, bound),
            Cursor::Table { slot, id } => {
                let t = self.table.lock();
                match t.entries.get(&id) {
                    Some(e) if e.owner == owner && e.slot == slot => (slot, e.bound.clone()),
                    _ => (slot, Vec::new()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_cursors_round_trip() {
        assert_eq!(encode_inline(0, b""), 0);
        assert_eq!(
            decode(0),
            Cursor::Inline {
                slot: 0,
                bound: vec![]
            }
        );
        for (slot, bound) in [
            (0u16, &b"a"[..]),
            (1, b""),
            (16383, b"\xff\xff\xff\xff\xff"),
            (866, b"ab\0"),
            (12182, b"user:"),
        ] {
            let c = encode_inline(slot, bound);
            assert_ne!(c, 0);
            let bound = bound.to_vec();
            assert_eq!(decode(c), Cursor::Inline { slot, bound });
        }
        // Any integer is a cursor.
        let id = (1 << 47) - 1;
        assert_eq!(decode(u64::MAX), Cursor::Table { slot: 16383, id });
        let six = (5u64 << 50) | (6 << 47);
        assert_eq!(
            decode(six),
            Cursor::Inline {
                slot: 5,
                bound: vec![0; 5]
            }
        );
    }

    #[test]
    fn bounds_separate_keys() {
        let b = |p: (u16, &[u8]), n: (u16, &[u8])| between(p, n);
        assert_eq!(b((3, b"zzz"), (4, b"a")), (4, vec![]));
        assert_eq!(b((3, b"abc"), (3, b"abd")), (3, b"abd".to_vec()));
        assert_eq!(b((3, b"ab"), (3, b"abcdefg")), (3, b"abc".to_vec()));
        assert_eq!(b((3, b""), (3, b"x")), (3, b"x".to_vec()));
        assert_eq!(b((3, b"user:1"), (3, b"user:2")), (3, b"user:2".to_vec()));
        assert_eq!(
            b((3, b"user:12"), (3, b"user:123")),
            (3, b"user:123".to_vec())
        );
        for (p, n) in [
            (&b"ab\xff"[..], &b"ac"[..]),
            (b"user:1000", b"user:1001"),
            (b"", b"\0"),
        ] {
            let (_, bound) = between((0, p), (0, n));
            assert!(p < &bound[..] && &bound[..] <= n, "{p:?} {n:?}");
        }
    }

    #[test]
    fn long_bounds_live_in_a_bounded_table() {
        let t = ScanBounds::default();
        assert_eq!(
            t.cursor(0, 9, b"short".to_vec()),
            encode_inline(9, b"short")
        );
        let c = t.cursor(2, 9, b"user:1001".to_vec());
        assert!(matches!(decode(c), Cursor::Table { slot: 9, .. }));
        assert_ne!(c, 0);
        assert_eq!(t.resolve(2, c), (9, b"user:1001".to_vec()));
        // Another database's cursor, or a lost entry: the start of the slot.
        assert_eq!(t.resolve(3, c), (9, vec![]));
        for i in 0..TABLE_ENTRIES {
            t.cursor(0, 1, format!("long-bound-{i}").into_bytes());
        }
        assert_eq!(t.resolve(2, c), (9, vec![]));
        assert_eq!(t.table.lock().entries.len(), TABLE_ENTRIES);
        assert_eq!(t.table.lock().order.len(), TABLE_ENTRIES);
    }

    #[test]
    fn member_cursors_belong_to_their_collection() {
        let t = ScanBounds::default();
        let owner = b"\x00\x01\x02\x00hash-v1".to_vec();
        let c = t.cursor_for(owner.clone(), 258, b"field:00042".to_vec());
        assert_ne!(c, 0);
        assert_eq!(t.resolve_for(&owner, c), (258, b"field:00042".to_vec()));
        // Another collection, or another incarnation of this one: from its first member.
        assert_eq!(t.resolve_for(b"\x00\x01\x02\x00hash-v2", c), (258, vec![]));
        // A SCAN cursor of database 0 is not a member cursor and the other way round.
        assert_eq!(t.resolve(0, c), (258, vec![]));
        let short = t.cursor_for(owner.clone(), 258, b"f:1".to_vec());
        assert_eq!(t.resolve_for(&owner, short), (258, b"f:1".to_vec()));
    }

    #[test]
    fn parsing_is_strtoul() {
        assert_eq!(parse(b"0"), Some(0));
        assert_eq!(parse(b""), Some(0));
        assert_eq!(parse(b"+7"), Some(7));
        assert_eq!(parse(b"007"), Some(7));
        assert_eq!(parse(b"-1"), Some(u64::MAX));
        assert_eq!(parse(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b"18446744073709551616"[..],
            b"+",
            b"-",
            b" 1",
            b"1 ",
            b"x",
            b"1.0",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
