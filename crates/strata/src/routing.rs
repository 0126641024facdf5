//! Shard routing: which shard owns a key. Pure functions, no I/O.
//!
//! The function is persisted by its id in the `SHARDS` file (`docs/format/shards.md`) and must
//! never change for an id: a key routed differently after an upgrade would be invisible.
//!
//! - Id 1, [`Routing::Hash`]: `shard = xxh3_64(key, seed 0) mod shard_count`, where `xxh3_64`
//!   is XXH3's 64-bit hash (a stable, specified function) of the whole user key. Spreads any
//!   key space evenly; the default.
//! - Id 2, [`Routing::Slot`]: bytes 1 and 2 of the key are a big-endian hash slot (its low 14
//!   bits, 0..16384) and shards own equal contiguous slot ranges:
//!   `shard = slot * shard_count / 16384`; keys shorter than 3 bytes live in shard 0. This is
//!   the Redis server's layout (`docs/format/redis-keys.md`: database byte, then the key's
//!   Redis Cluster slot), where a key's metadata and its collection members share the slot,
//!   so they share a shard, and a slot is a contiguous key range of one shard.

use xxhash_rust::xxh3::xxh3_64;

/// On-disk id of [`Routing::Hash`] (`SHARDS` file). On-disk: do not renumber.
pub const HASH_XXH3_MOD: u32 = 1;
/// On-disk id of [`Routing::Slot`]. On-disk: do not renumber.
pub const SLOT_PREFIX: u32 = 2;
/// Number of slots of [`Routing::Slot`] (Redis Cluster's).
pub const SLOTS: usize = 16384;

/// How keys map to shards; fixed when a database is created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Routing {
    /// XXH3 of the whole key, mod the shard count (id 1).
    #[default]
    Hash,
    /// The slot in bytes 1..3 of the key, by contiguous slot ranges (id 2).
    Slot,
}

impl Routing {
    /// The id persisted in the `SHARDS` file.
    pub fn id(self) -> u32 {
        match self {
            Routing::Hash => HASH_XXH3_MOD,
            Routing::Slot => SLOT_PREFIX,
        }
    }

    /// The routing persisted as `id`, if known.
    pub fn from_id(id: u32) -> Option<Routing> {
        match id {
            HASH_XXH3_MOD => Some(Routing::Hash),
            SLOT_PREFIX => Some(Routing::Slot),
            _ => None,
        }
    }

    /// The shard that owns `key` among `shards` (`shards >= 1`).
    #[inline]
    pub fn shard_of(self, key: &[u8], shards: usize) -> usize {
        match self {
            Routing::Hash => shard_of(key, shards),
            Routing::Slot => match key {
                [_, hi, lo, ..] => {
                    let slot = (usize::from(*hi) << 8 | usize::from(*lo)) & (SLOTS - 1);
                    slot * shards / SLOTS
                }
                _ => 0,
            },
        }
    }

    /// Splits positions `0..keys.len()` by owning shard: `plan[s]` lists, in request order,
    /// the indexes of the keys shard `s` owns.
    pub fn split<K: AsRef<[u8]>>(self, keys: &[K], shards: usize) -> Vec<Vec<usize>> {
        let mut plan = vec![Vec::new(); shards];
        for (i, k) in keys.iter().enumerate() {
            plan[self.shard_of(k.as_ref(), shards)].push(i);
        }
        plan
    }
}

/// The shard that owns `key` among `shards` under [`Routing::Hash`] (`shards >= 1`).
#[inline]
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    debug_assert!(shards >= 1);
    (xxh3_64(key) % shards as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_is_stable_across_versions() {
        // Pinned values: if these change, existing databases route keys to the wrong shard.
        assert_eq!(xxh3_64(b""), 0x2D06_8005_38D3_94C2);
        assert_eq!(shard_of(b"", 7), (0x2D06_8005_38D3_94C2u64 % 7) as usize);
        let a = shard_of(b"user:1", 4);
        assert_eq!(a, shard_of(b"user:1", 4));
        assert_eq!(shard_of(b"anything", 1), 0);
    }

    #[test]
    fn slot_routing_owns_contiguous_ranges() {
        let r = Routing::Slot;
        let key = |slot: u16| {
            let mut k = vec![0u8];
            k.extend_from_slice(&slot.to_be_bytes());
            k.extend_from_slice(b"\x00user");
            k
        };
        assert_eq!(r.shard_of(&key(0), 4), 0);
        assert_eq!(r.shard_of(&key(4095), 4), 0);
        assert_eq!(r.shard_of(&key(4096), 4), 1);
        assert_eq!(r.shard_of(&key(16383), 4), 3);
        assert_eq!(r.shard_of(&key(16383), 3), 2);
        // Only the low 14 bits count; short keys go to shard 0.
        assert_eq!(r.shard_of(&key(16384 + 4096), 4), 1);
        assert_eq!(r.shard_of(b"ab", 4), 0);
        let mut last = 0;
        for slot in 0..16384u16 {
            let s = r.shard_of(&key(slot), 7);
            assert!(s >= last && s < 7, "slot {slot} -> shard {s}");
            last = s;
        }
        assert_eq!(last, 6);
        assert_eq!(Routing::from_id(r.id()), Some(r));
        assert_eq!(Routing::from_id(Routing::Hash.id()), Some(Routing::Hash));
        assert_eq!(Routing::from_id(3), None);
    }

    #[test]
    fn keys_spread_over_shards() {
        let keys: Vec<Vec<u8>> = (0u32..4000).map(|i| i.to_be_bytes().to_vec()).collect();
        let plan = Routing::Hash.split(&keys, 4);
        for part in &plan {
            assert!(part.len() > 800, "unbalanced split: {}", part.len());
        }
        let total: usize = plan.iter().map(|p| p.len()).sum();
        assert_eq!(total, keys.len());
        for (s, part) in plan.iter().enumerate() {
            assert!(part.windows(2).all(|w| w[0] < w[1]));
            for &i in part {
                assert_eq!(shard_of(&keys[i], 4), s);
            }
        }
    }
}
