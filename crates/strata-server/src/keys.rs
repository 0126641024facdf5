//! How Redis keys become keys of the ordered store: `docs/format/redis-keys.md`.
//!
//! ```text
//! metadata record:  db (1) | slot (2, BE) | 0x00 | user key
//! subkey record:    db (1) | slot (2, BE) | 0x01 | key length (4, BE) | user key
//!                   | version (8, BE) | subkey            (collection members)
//! score record:     db (1) | slot (2, BE) | 0x02 | key length (4, BE) | user key
//!                   | version (8, BE) | score (8) | member (sorted-set score index)
//! server records:   0xfe | ...                           (server-internal, e.g. sync marks)
//! ```
//!
//! Layer: store and types (above configuration; no services, commands or execution).

/// Number of Redis Cluster hash slots.
pub const SLOTS: u16 = 16384;
/// Record kind byte after `db | slot`: on-disk, do not renumber.
pub const KIND_META: u8 = 0x00;
/// Record kind of collection members (hash fields, list elements, set and sorted-set
/// members).
pub const KIND_SUBKEY: u8 = 0x01;
/// Record kind of the sorted-set score index (`score | member` after the version).
pub const KIND_SCORE: u8 = 0x02;
/// First byte of server-internal records; database indexes stay below it.
pub const SERVER_PREFIX: u8 = 0xfe;
/// Most logical databases (`databases` directive): indexes 0..=253 fit in the first byte
/// below [`SERVER_PREFIX`].
pub const MAX_DATABASES: usize = SERVER_PREFIX as usize;

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis's `crc16.c`.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The Redis Cluster hash slot of `key` (Redis's `keyHashSlot`): the CRC16 of the key, or of
/// the part between its first `{` and the next `}` when that part is not empty, mod 16384.
pub fn hash_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&c| c == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        match rest.iter().position(|&c| c == b'}') {
            Some(0) | None => None,
            Some(close) => Some(&rest[..close]),
        }
    });
    crc16(tagged.unwrap_or(key)) & (SLOTS - 1)
}

/// The first bytes of [`meta_key`] (database, slot, kind): enough to route the record to
/// its shard without building the whole key.
pub fn meta_key_head(db: u8, key: &[u8]) -> [u8; 4] {
    let [hi, lo] = hash_slot(key).to_be_bytes();
    [db, hi, lo, KIND_META]
}

/// The store key of the metadata record of Redis key `key` in database `db`.
pub fn meta_key(db: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + key.len());
    k.push(db);
    k.extend_from_slice(&hash_slot(key).to_be_bytes());
    k.push(KIND_META);
    k.extend_from_slice(key);
    k
}

/// The Redis key of a metadata record's store key, if `k` is one.
pub fn user_key_of_meta(k: &[u8]) -> Option<&[u8]> {
    if k.len() >= 4 && k[0] < SERVER_PREFIX && k[3] == KIND_META {
        Some(&k[4..])
    } else {
        None
    }
}

/// The common prefix of the records of kind `kind` ([`KIND_SUBKEY`], [`KIND_SCORE`]) of
/// incarnation `version` of collection `key` in database `db`:
/// `db | slot | kind | key length | key | version`.
pub fn sub_prefix(kind: u8, db: u8, key: &[u8], version: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + 4 + key.len() + 8 + 16);
    k.push(db);
    k.extend_from_slice(&hash_slot(key).to_be_bytes());
    k.push(kind);
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

/// The store key of member `sub` (a hash field, a set member, a list index, ...) of
/// incarnation `version` of collection `key`.
pub fn sub_key(db: u8, key: &[u8], version: u64, sub: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(KIND_SUBKEY, db, key, version);
    k.extend_from_slice(sub);
    k
}

/// The smallest key above every key that starts with `prefix` (the exclusive upper bound of
/// a prefix scan). `prefix` must contain a byte below 0xff (every record key here does: its
/// first byte is a database index).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xff; prefix.len() + 1]
}

/// The parts of a member or score record's key: `(kind, db, user key, version, rest)`.
pub type SubKeyParts<'a> = (u8, u8, &'a [u8], u64, &'a [u8]);

/// Splits a member or score record's key into its [`SubKeyParts`].
pub fn parse_sub_key(k: &[u8]) -> Option<SubKeyParts<'_>> {
    if k.len() < 8 || k[0] >= SERVER_PREFIX || !(k[3] == KIND_SUBKEY || k[3] == KIND_SCORE) {
        return None;
    }
    let len = u32::from_be_bytes(k[4..8].try_into().ok()?) as usize;
    let key_end = 8usize.checked_add(len)?;
    let version = k.get(key_end..key_end + 8)?;
    Some((
        k[3],
        k[0],
        &k[8..key_end],
        u64::from_be_bytes(version.try_into().ok()?),
        &k[key_end + 8..],
    ))
}

/// Bounds `[start, end)` of every record of database `db`.
pub fn db_range(db: u8) -> (Vec<u8>, Vec<u8>) {
    (vec![db], vec![db + 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // The CRC-16/XMODEM check value, and Redis's own test vector in crc16.c.
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn slots_match_redis_cluster_keyslot() {
        // CLUSTER KEYSLOT in Redis.
        assert_eq!(hash_slot(b"foo"), 12182);
        assert_eq!(hash_slot(b"bar"), 5061);
        assert_eq!(hash_slot(b"hello"), 866);
        assert_eq!(hash_slot(b""), 0);
        assert_eq!(
            hash_slot(b"{user1000}.following"),
            hash_slot(b"{user1000}.followers")
        );
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        // Empty tag: the whole key is hashed; only the first tag counts.
        assert_eq!(hash_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
        assert_eq!(hash_slot(b"foo{bar}{zap}"), hash_slot(b"bar"));
        assert_eq!(hash_slot(b"{unclosed"), crc16(b"{unclosed") & 16383);
    }

    #[test]
    fn meta_key_head_is_the_head_of_the_meta_key() {
        for (db, key) in [
            (0u8, &b"foo"[..]),
            (3, b"{user1000}.x"),
            (15, b""),
            (1, b"bar"),
        ] {
            assert_eq!(
                meta_key_head(db, key)[..],
                meta_key(db, key)[..4],
                "{key:?}"
            );
        }
    }

    #[test]
    fn member_keys_layout() {
        let k = sub_key(3, b"foo", 0x0102, b"f");
        let mut want = vec![3u8, 0x2f, 0x96, KIND_SUBKEY, 0, 0, 0, 3];
        want.extend_from_slice(b"foo");
        want.extend_from_slice(&0x0102u64.to_be_bytes());
        want.push(b'f');
        assert_eq!(k, want);
        assert_eq!(
            parse_sub_key(&k),
            Some((KIND_SUBKEY, 3, &b"foo"[..], 0x0102, &b"f"[..]))
        );
        let p = sub_prefix(KIND_SUBKEY, 3, b"foo", 0x0102);
        assert!(k.starts_with(&p));
        let end = prefix_end(&p);
        assert!(k < end && p < end);
        // A longer key that extends "foo" sorts elsewhere: the length comes first.
        assert!(!sub_key(3, b"foobar", 0x0102, b"").starts_with(&p));
        assert_eq!(prefix_end(&[1, 0xff, 0xff]), vec![2]);
        assert_eq!(parse_sub_key(&meta_key(3, b"foo")), None);
        assert_eq!(parse_sub_key(&k[..12]), None, "truncated");
    }

    #[test]
    fn meta_key_layout() {
        let k = meta_key(3, b"foo");
        assert_eq!(k, [&[3u8, 0x2f, 0x96, 0][..], b"foo"].concat()); // 12182 = 0x2f96
        assert_eq!(user_key_of_meta(&k), Some(&b"foo"[..]));
        let (lo, hi) = db_range(3);
        assert!(lo <= k && k < hi);
    }
}
