//! Internal keys: a user key followed by an 8-byte trailer `(seq << 8) | kind`, little-endian.
//!
//! Internal keys sort by user key ascending (bytewise), then by trailer descending, so the
//! newest version of a user key comes first. This is LevelDB's layout; see
//! `docs/format/sstable.md`.

use std::cmp::Ordering;

/// A sequence number. Only the low 56 bits are usable.
pub type SeqNo = u64;

/// The largest sequence number that fits in a trailer.
pub const MAX_SEQ: SeqNo = (1 << 56) - 1;

/// Bytes of the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// What an entry is. On-disk: do not renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone.
    Delete = 0,
    /// A value stored inline.
    Value = 1,
    /// A value stored in the value log: the entry's value is an encoded
    /// [`crate::vlog::ValuePointer`] (`docs/format/vlog.md`).
    Pointer = 2,
}

impl ValueKind {
    /// Decodes a kind byte; `None` for unknown kinds (the caller reports corruption).
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::Pointer),
            _ => None,
        }
    }
}

/// The kind used when seeking: the highest kind number, so that a seek key for `(k, seq)`
/// sorts before every entry of `k` with sequence `<= seq`.
pub const KIND_FOR_SEEK: ValueKind = ValueKind::Pointer;

/// Packs sequence and kind into a trailer.
#[inline]
pub fn pack_trailer(seq: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQ);
    (seq << 8) | kind as u64
}

/// Appends the internal key `(user_key, seq, kind)` to `out`.
#[inline]
pub fn encode_internal_key(out: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    out.extend_from_slice(user_key);
    out.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Returns a freshly allocated internal key.
#[inline]
pub fn make_internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    encode_internal_key(&mut v, user_key, seq, kind);
    v
}

/// The seek key that finds the newest version of `user_key` visible at `seq`.
#[inline]
pub fn seek_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    make_internal_key(user_key, seq, KIND_FOR_SEEK)
}

/// A seek key kept on the stack for user keys up to 56 bytes: a point lookup builds one per
/// call, and a heap allocation there was most of what a cached hit allocated.
pub type InlineSeekKey = smallvec::SmallVec<[u8; 64]>;

/// [`seek_key`] without a heap allocation for keys up to 56 bytes.
#[inline]
pub fn seek_key_inline(user_key: &[u8], seq: SeqNo) -> InlineSeekKey {
    let mut k = InlineSeekKey::with_capacity(user_key.len() + TRAILER_LEN);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&pack_trailer(seq, KIND_FOR_SEEK).to_le_bytes());
    k
}

/// A parsed internal key borrowing its user key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub seq: SeqNo,
    pub kind: ValueKind,
}

/// Splits an internal key. `None` if it is shorter than a trailer or has an unknown kind; the
/// caller turns that into `Error::Corruption` with its file and offset.
#[inline]
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    if ikey.len() < TRAILER_LEN {
        return None;
    }
    let (user_key, t) = ikey.split_at(ikey.len() - TRAILER_LEN);
    let trailer = u64::from_le_bytes(t.try_into().ok()?);
    let kind = ValueKind::from_u8((trailer & 0xff) as u8)?;
    Some(ParsedKey {
        user_key,
        seq: trailer >> 8,
        kind,
    })
}

/// The user-key part of an internal key (the whole slice if it is too short).
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

#[inline]
fn trailer(ikey: &[u8]) -> u64 {
    if ikey.len() < TRAILER_LEN {
        return 0;
    }
    let mut t = [0u8; 8];
    t.copy_from_slice(&ikey[ikey.len() - TRAILER_LEN..]);
    u64::from_le_bytes(t)
}

/// The internal-key order: user key ascending, then trailer (sequence) descending.
#[inline]
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_user_key_then_newest_first() {
        let a1 = make_internal_key(b"a", 1, ValueKind::Value);
        let a2 = make_internal_key(b"a", 2, ValueKind::Value);
        let b1 = make_internal_key(b"b", 1, ValueKind::Delete);
        assert_eq!(compare_internal(&a2, &a1), Ordering::Less);
        assert_eq!(compare_internal(&a1, &b1), Ordering::Less);
        assert_ne!(compare_internal(&seek_key(b"a", 1), &a1), Ordering::Greater);
        assert_eq!(compare_internal(&a2, &seek_key(b"a", 1)), Ordering::Less);
        for uk in [&b""[..], b"a", &[7u8; 56], &[9u8; 57], &[1u8; 300]] {
            assert_eq!(&seek_key_inline(uk, 42)[..], &seek_key(uk, 42)[..]);
        }
    }

    #[test]
    fn parse_round_trip_and_rejects_garbage() {
        let k = make_internal_key(b"key", 42, ValueKind::Delete);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(p.user_key, b"key");
        assert_eq!(p.seq, 42);
        assert_eq!(p.kind, ValueKind::Delete);
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = k.clone();
        *bad.last_mut().unwrap() = 0; // byte 7 of trailer; kind is byte 0
        let n = bad.len();
        bad[n - 8] = 9;
        assert!(parse_internal_key(&bad).is_none());
    }
}
