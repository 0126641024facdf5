//! The per-table filter: a binary fuse filter (xorf `BinaryFuse8`) over the XXH3-64 hashes of
//! the table's distinct user keys.
//!
//! About 9 bits per key for large tables (fingerprint array ≈ 1.125 × keys bytes, plus a
//! 21-byte header), a false-positive rate of about 2⁻⁸ ≈ 0.4%, no false negatives, and a probe
//! costs one hash and three byte loads. A table with no keys, or whose filter could not be
//! built, stores "no filter", which answers "may contain" for everything.
//!
//! Block contents: `kind: u8` then, for kind 1, the 20-byte fuse descriptor (seed u64,
//! segment_length u32, segment_length_mask u32, segment_count_length u32, all LE) and the
//! fingerprint bytes. Specification: `docs/format/sstable.md`.

use crate::error::{Error, Result};
use std::path::Path;
use xorf::{BinaryFuse8, BinaryFuse8Ref, DmaSerializable, Filter as _, FilterRef as _};
use xxhash_rust::xxh3::xxh3_64;

/// Filter kind byte: no filter, every probe says "may contain".
pub const FILTER_NONE: u8 = 0;
/// Filter kind byte: `BinaryFuse8` over XXH3-64 (seed 0) of user keys.
pub const FILTER_FUSE8_XXH3: u8 = 1;

const DESCRIPTOR_LEN: usize = <BinaryFuse8 as DmaSerializable>::DESCRIPTOR_LEN;

/// Collects user-key hashes while a table is built.
#[derive(Default)]
pub struct FilterBuilder {
    hashes: Vec<u64>,
}

impl FilterBuilder {
    /// Adds a user key. Consecutive repeats (versions of one key) cost nothing.
    pub fn add(&mut self, user_key: &[u8]) {
        let h = xxh3_64(user_key);
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    /// Appends the filter block contents to `out` and empties the builder.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.sort_unstable();
        hashes.dedup();
        let filter = if hashes.is_empty() {
            None
        } else {
            BinaryFuse8::try_from(&hashes).ok()
        };
        match filter {
            None => out.push(FILTER_NONE),
            Some(f) => {
                out.push(FILTER_FUSE8_XXH3);
                let mut d = [0u8; DESCRIPTOR_LEN];
                f.dma_copy_descriptor_to(&mut d);
                out.extend_from_slice(&d);
                out.extend_from_slice(f.dma_fingerprints());
            }
        }
    }
}

/// A loaded filter.
pub struct Filter {
    /// Filter block contents, validated; empty for "no filter".
    bytes: Vec<u8>,
}

impl Filter {
    /// Parses filter block contents read from `offset` of `path`. The descriptor is checked so
    /// that every probe stays inside the fingerprint array whatever the bytes are.
    pub fn decode(bytes: Vec<u8>, path: &Path, offset: u64) -> Result<Filter> {
        let corrupt =
            |reason: &str| Error::corruption(path, offset, format!("filter block: {reason}"));
        match bytes.first() {
            Some(&FILTER_NONE) if bytes.len() == 1 => Ok(Filter { bytes: Vec::new() }),
            Some(&FILTER_FUSE8_XXH3) if bytes.len() > 1 + DESCRIPTOR_LEN => {
                let u32_at = |i: usize| {
                    let mut x = [0u8; 4];
                    x.copy_from_slice(&bytes[1 + i..1 + i + 4]);
                    u32::from_le_bytes(x) as u64
                };
                let (seg_len, mask, seg_count_len) = (u32_at(8), u32_at(12), u32_at(16));
                let fingerprints = (bytes.len() - 1 - DESCRIPTOR_LEN) as u64;
                // Probes hit segments s, s+1, s+2 with s < segment_count: the array must hold
                // segment_count + 2 whole, power-of-two-sized segments.
                let sane = seg_len.is_power_of_two()
                    && mask == seg_len - 1
                    && seg_count_len >= seg_len
                    && seg_count_len % seg_len == 0
                    && seg_count_len + 2 * seg_len == fingerprints
                    && fingerprints <= u32::MAX as u64;
                if sane {
                    Ok(Filter { bytes })
                } else {
                    Err(corrupt("inconsistent binary fuse descriptor"))
                }
            }
            Some(&k) if k > FILTER_FUSE8_XXH3 => Err(corrupt(&format!("unknown filter kind {k}"))),
            _ => Err(corrupt("bad length")),
        }
    }

    /// False only if `user_key` is certainly not in the table.
    #[inline]
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        if self.bytes.is_empty() {
            return true;
        }
        let (descriptor, fingerprints) = self.bytes[1..].split_at(DESCRIPTOR_LEN);
        BinaryFuse8Ref::from_dma(descriptor, fingerprints).contains(&xxh3_64(user_key))
    }

    /// Whether a real filter is loaded.
    pub fn is_present(&self) -> bool {
        !self.bytes.is_empty()
    }

    /// Bytes held in memory.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
        let mut b = FilterBuilder::default();
        for k in keys {
            b.add(&k);
        }
        let mut out = Vec::new();
        b.finish(&mut out);
        out
    }

    #[test]
    fn no_false_negatives_and_low_fpr_on_100k_keys() {
        let n = 100_000u32;
        let bytes = build((0..n).map(|i| format!("user{i:08}").into_bytes()));
        let bits_per_key = (bytes.len() * 8) as f64 / n as f64;
        assert!(bits_per_key < 10.0, "{bits_per_key} bits/key");
        let f = Filter::decode(bytes, Path::new("t"), 0).unwrap();
        assert!(f.is_present());
        for i in 0..n {
            assert!(f.may_contain(format!("user{i:08}").as_bytes()));
        }
        let fp = (0..n)
            .filter(|i| f.may_contain(format!("absent{i:08}").as_bytes()))
            .count();
        let rate = fp as f64 / n as f64;
        assert!(rate < 0.01, "false-positive rate {rate}");
    }

    #[test]
    fn empty_single_and_duplicate_keys() {
        let none = Filter::decode(build(std::iter::empty()), Path::new("t"), 0).unwrap();
        assert!(!none.is_present());
        assert!(none.may_contain(b"anything"));
        let one = Filter::decode(build([b"k".to_vec()].into_iter()), Path::new("t"), 0).unwrap();
        assert!(one.may_contain(b"k"));
        let dups = build((0..1000).map(|i| format!("{}", i % 10).into_bytes()));
        let f = Filter::decode(dups, Path::new("t"), 0).unwrap();
        assert!((0..10).all(|i| f.may_contain(format!("{i}").as_bytes())));
    }

    #[test]
    fn corrupt_descriptors_are_rejected_or_harmless() {
        let good = build((0..500u32).map(|i| i.to_be_bytes().to_vec()));
        for i in 0..1 + DESCRIPTOR_LEN {
            for x in [1u8, 0x80, 0xff] {
                let mut b = good.clone();
                b[i] ^= x;
                if let Ok(f) = Filter::decode(b, Path::new("t"), 0) {
                    for k in 0..2000u32 {
                        f.may_contain(&k.to_be_bytes());
                    }
                }
            }
        }
        for bad in [vec![], vec![0, 0], vec![1], vec![7]] {
            assert!(Filter::decode(bad, Path::new("t"), 0).is_err());
        }
    }
}
