//! Keys, values and random numbers for the benchmarks.
//!
//! Key layout (db_bench's): the key index `i` in `[0, num)` as an 8-byte big-endian integer,
//! followed by `'0'` bytes up to `key_size`. With `key_size < 8` the key is the low
//! `key_size` bytes of that integer (so `num` must fit in them). Either way byte order equals
//! numeric order, so sequential indexes give increasing keys.
//!
//! Values: slices of a pool of random bytes generated once per thread. They are
//! incompressible, unlike db_bench's default values (compression_ratio 0.5); Strata's default
//! is no compression, and a benchmark that wants to measure compression should say so.

/// A small, fast, reproducible generator (SplitMix64). The benchmarks need speed and
/// determinism from a seed, not statistical perfection.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The generator for one thread of one benchmark: streams differ between threads and
    /// between benchmarks of one run (so readrandom does not replay fillrandom's keys).
    pub fn for_thread(seed: u64, benchmark_index: usize, thread: usize) -> Self {
        let mut mix = Rng::new(seed ^ ((benchmark_index as u64) << 32) ^ thread as u64);
        Rng::new(mix.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` (multiply-shift; the bias is below 2^-64 * n, negligible here).
    /// `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
}

/// Builds benchmark keys from indexes.
#[derive(Clone, Copy, Debug)]
pub struct KeyGen {
    key_size: usize,
}

impl KeyGen {
    pub fn new(key_size: usize) -> Self {
        KeyGen { key_size }
    }

    /// Checks that `num` distinct indexes fit in keys of `key_size` bytes.
    pub fn check(key_size: usize, num: u64) -> Result<(), String> {
        if key_size == 0 {
            return Err("--key-size must be at least 1".into());
        }
        if key_size < 8 && num > 1u64 << (8 * key_size) {
            return Err(format!(
                "--num {num} does not fit in --key-size {key_size} \
                 (at most {} distinct keys)",
                1u64 << (8 * key_size)
            ));
        }
        Ok(())
    }

    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// A buffer to pass to [`KeyGen::fill`].
    pub fn buffer(&self) -> Vec<u8> {
        vec![b'0'; self.key_size]
    }

    /// Writes the key of index `i` into `buf` (which has `key_size` bytes).
    pub fn fill(&self, i: u64, buf: &mut [u8]) {
        let be = i.to_be_bytes();
        if self.key_size >= 8 {
            buf[..8].copy_from_slice(&be);
            buf[8..].fill(b'0');
        } else {
            buf.copy_from_slice(&be[8 - self.key_size..]);
        }
    }

    /// Writes the key of YCSB record `k` into `buf`. YCSB inserts records in hashed order
    /// (its default `insertorder=hashed`), so that record numbers and key order are unrelated
    /// and inserts of new records land all over the key space. Here record `k` is stored
    /// under the index [`scramble`]`(k)`, a bijection, so keys stay unique; with keys shorter
    /// than 8 bytes the record number is used as is (a bijection could overflow them).
    pub fn fill_ycsb(&self, k: u64, buf: &mut [u8]) {
        if self.key_size >= 8 {
            self.fill(scramble(k), buf)
        } else {
            self.fill(k, buf)
        }
    }

    #[cfg(test)]
    pub fn key(&self, i: u64) -> Vec<u8> {
        let mut b = self.buffer();
        self.fill(i, &mut b);
        b
    }

    /// A buffer for keys that no benchmark writes (readmissing): fill its first `key_size`
    /// bytes with [`KeyGen::fill`]; the extra last byte (`.`) makes it one byte longer than
    /// every stored key.
    pub fn missing_key_buffer(&self) -> Vec<u8> {
        let mut b = self.buffer();
        b.push(b'.');
        b
    }
}

/// A bijection on u64 that scatters consecutive integers (SplitMix64's finalizer: each
/// step, xor-shift or multiplication by an odd constant, is invertible).
pub fn scramble(k: u64) -> u64 {
    let mut z = k;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hands out values: consecutive slices of a pool of random bytes, each of a fixed size or,
/// with a range of sizes, of a size drawn uniformly from it.
pub struct ValueGen {
    pool: Vec<u8>,
    pos: usize,
    min: usize,
    max: usize,
    sizes: Rng,
}

impl ValueGen {
    /// Pool size: large enough that repeats are far apart (1 MiB, or two values if larger).
    const POOL_BYTES: usize = 1 << 20;

    /// Values of `min..=max` bytes (`max` below `min` counts as `min`: a fixed size).
    pub fn new(min: usize, max: usize, rng: &mut Rng) -> Self {
        let max = max.max(min);
        let mut pool = vec![0u8; Self::POOL_BYTES.max(2 * max)];
        rng.fill(&mut pool);
        ValueGen {
            pool,
            pos: 0,
            min,
            max,
            sizes: Rng::new(rng.next_u64()),
        }
    }

    pub fn next_value(&mut self) -> &[u8] {
        let size = if self.max > self.min {
            self.min + self.sizes.below((self.max - self.min + 1) as u64) as usize
        } else {
            self.min
        };
        if self.pos + size > self.pool.len() {
            self.pos = 0;
        }
        let v = &self.pool[self.pos..self.pos + size];
        // Move by an amount that is not a multiple of the value size so that the pool's
        // slices do not line up again after one lap.
        self.pos += size + 1;
        v
    }
}

/// The share of `[0, num)` that thread `t` of `threads` writes in fillseq: contiguous,
/// disjoint ranges covering everything.
pub fn thread_range(num: u64, threads: usize, t: usize) -> std::ops::Range<u64> {
    let part = |t: usize| (num as u128 * t as u128 / threads as u128) as u64;
    part(t)..part(t + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_big_endian_and_padded() {
        let g = KeyGen::new(16);
        let k = g.key(0x0102);
        assert_eq!(k.len(), 16);
        assert_eq!(&k[..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&k[8..], b"00000000");
    }

    #[test]
    fn sequential_keys_increase() {
        for size in [3usize, 8, 16, 24] {
            let g = KeyGen::new(size);
            let mut prev = g.key(0);
            for i in 1..70_000u64 {
                let k = g.key(i);
                assert_eq!(k.len(), size);
                assert!(k > prev, "key size {size}: key {i} not above key {}", i - 1);
                prev = k;
            }
        }
    }

    #[test]
    fn short_keys_take_low_bytes() {
        let g = KeyGen::new(2);
        assert_eq!(g.key(0x0102), vec![1, 2]);
        assert!(KeyGen::check(2, 65_536).is_ok());
        let e = KeyGen::check(2, 65_537).unwrap_err();
        assert!(e.contains("does not fit"), "{e}");
        assert!(KeyGen::check(0, 1).is_err());
        assert!(KeyGen::check(8, u64::MAX).is_ok());
    }

    #[test]
    fn fill_reuses_buffer() {
        let g = KeyGen::new(16);
        let mut b = g.buffer();
        g.fill(7, &mut b);
        assert_eq!(b, g.key(7));
        g.fill(u64::MAX, &mut b);
        assert_eq!(&b[..8], &[0xff; 8]);
    }

    #[test]
    fn fillseq_keys_are_unique_across_threads() {
        let g = KeyGen::new(16);
        let mut all = std::collections::HashSet::new();
        for t in 0..3 {
            for i in thread_range(10_000, 3, t) {
                assert!(all.insert(g.key(i)), "key {i} written twice");
            }
        }
        assert_eq!(all.len(), 10_000);
    }

    #[test]
    fn ycsb_keys_are_unique_and_scattered() {
        let g = KeyGen::new(16);
        let mut keys = std::collections::HashSet::new();
        let mut b = g.buffer();
        let mut increasing = 0;
        let mut prev = Vec::new();
        for k in 0..50_000u64 {
            g.fill_ycsb(k, &mut b);
            assert!(keys.insert(b.clone()), "record {k} collides");
            if b > prev {
                increasing += 1;
            }
            prev = b.clone();
        }
        // Consecutive records are not in key order (about half the steps go down).
        assert!((20_000..30_000).contains(&increasing), "{increasing}");
        // Short keys: the record number itself.
        let short = KeyGen::new(4);
        let mut s = short.buffer();
        short.fill_ycsb(258, &mut s);
        assert_eq!(s, vec![0, 0, 1, 2]);
    }

    #[test]
    fn unit_is_in_range_and_averages_a_half() {
        let mut r = Rng::new(4);
        let mut sum = 0.0;
        for _ in 0..100_000 {
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        assert!((sum / 100_000.0 - 0.5).abs() < 0.01);
    }

    #[test]
    fn missing_keys_are_one_byte_longer() {
        let g = KeyGen::new(16);
        let mut m = g.missing_key_buffer();
        g.fill(5, &mut m[..16]);
        assert_eq!(m.len(), 17);
        assert_eq!(m[16], b'.');
        assert_eq!(&m[..16], &g.key(5)[..]);
    }

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut r = Rng::new(1);
        let mut seen = [false; 10];
        for _ in 0..10_000 {
            let x = r.below(10);
            assert!(x < 10);
            seen[x as usize] = true;
        }
        assert!(
            seen.iter().all(|&s| s),
            "some value of [0, 10) never came up"
        );
        assert_eq!(Rng::new(3).below(1), 0);
    }

    #[test]
    fn thread_streams_differ() {
        let x = Rng::for_thread(7, 0, 0).next_u64();
        assert_ne!(x, Rng::for_thread(7, 0, 1).next_u64());
        assert_ne!(x, Rng::for_thread(7, 1, 0).next_u64());
        assert_ne!(x, Rng::for_thread(8, 0, 0).next_u64());
        assert_eq!(x, Rng::for_thread(7, 0, 0).next_u64());
    }

    #[test]
    fn random_keys_cover_the_keyspace_uniformly() {
        let mut r = Rng::new(99);
        let mut buckets = [0u32; 4];
        for _ in 0..40_000 {
            buckets[(r.below(1000) / 250) as usize] += 1;
        }
        for b in buckets {
            assert!((9_000..11_000).contains(&b), "{buckets:?}");
        }
    }

    #[test]
    fn values_have_the_right_size_and_vary() {
        let mut rng = Rng::new(5);
        let mut g = ValueGen::new(100, 0, &mut rng);
        let a = g.next_value().to_vec();
        let b = g.next_value().to_vec();
        assert_eq!(a.len(), 100);
        assert_ne!(a, b);
        for _ in 0..100_000 {
            assert_eq!(g.next_value().len(), 100);
        }
        let mut big = ValueGen::new(3 << 20, 3 << 20, &mut rng);
        assert_eq!(big.next_value().len(), 3 << 20);
        assert_eq!(big.next_value().len(), 3 << 20);
        let mut empty = ValueGen::new(0, 0, &mut rng);
        assert!(empty.next_value().is_empty());
    }

    #[test]
    fn a_size_range_draws_every_size_uniformly() {
        let mut rng = Rng::new(9);
        let mut g = ValueGen::new(10, 19, &mut rng);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let n = g.next_value().len();
            assert!((10..=19).contains(&n), "{n}");
            counts[n - 10] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn thread_ranges_partition_the_keyspace() {
        for (num, threads) in [(10u64, 3usize), (1, 4), (1_000_003, 7), (5, 1)] {
            let mut next = 0;
            for t in 0..threads {
                let r = thread_range(num, threads, t);
                assert_eq!(r.start, next);
                next = r.end;
            }
            assert_eq!(next, num);
        }
    }
}
