//! Shard routing: which shard owns a key. Pure functions, no I/O.
//!
//! The function is persisted by its id in the `SHARDS` file (`docs/format/shards.md`) and must
//! never change for an id: a key routed differently after an upgrade would be invisible.
//!
//! Id 1 (the only one): `shard = xxh3_64(key, seed 0) mod shard_count`, where `xxh3_64` is
//! XXH3's 64-bit hash (a stable, specified function) of the whole user key.

use xxhash_rust::xxh3::xxh3_64;

/// On-disk id of the hash function (`SHARDS` file). On-disk: do not renumber.
pub const HASH_XXH3_MOD: u32 = 1;

/// The shard that owns `key` among `shards` (`shards >= 1`).
#[inline]
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    debug_assert!(shards >= 1);
    (xxh3_64(key) % shards as u64) as usize
}

/// Splits positions `0..keys.len()` by owning shard: `plan[s]` lists, in request order, the
/// indexes of the keys shard `s` owns.
pub fn split_by_shard<K: AsRef<[u8]>>(keys: &[K], shards: usize) -> Vec<Vec<usize>> {
    let mut plan = vec![Vec::new(); shards];
    for (i, k) in keys.iter().enumerate() {
        plan[shard_of(k.as_ref(), shards)].push(i);
    }
    plan
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
    fn keys_spread_over_shards() {
        let keys: Vec<Vec<u8>> = (0u32..4000).map(|i| i.to_be_bytes().to_vec()).collect();
        let plan = split_by_shard(&keys, 4);
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
