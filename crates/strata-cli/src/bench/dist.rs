//! Request distributions of YCSB: zipfian (scrambled), latest, uniform, and the scan
//! lengths of workload E.
//!
//! The zipfian generator is the one YCSB uses (Gray et al., "Quickly generating billion-record
//! synthetic databases", SIGMOD 1994): with zeta(n, theta) = sum over i in 1..=n of 1/i^theta,
//! item i (0-based) is drawn with probability 1/((i+1)^theta zeta(n, theta)). YCSB's
//! "zipfian" request distribution is the *scrambled* variant: a zipfian draw over 10^10 items
//! hashed with 64-bit FNV-1a into the key space, so that the popular keys are spread over the
//! key space instead of being its first keys. "latest" is a zipfian draw over the distance
//! from the most recently inserted key.
//!
//! zeta(n, theta) is summed exactly up to 10,000 terms and with the Euler-Maclaurin formula
//! beyond (error far below 1e-9), so any item count costs microseconds, not O(n).

use super::keys::Rng;

/// YCSB's skew ("zipfian constant").
pub const ZIPFIAN_THETA: f64 = 0.99;

/// The item count of YCSB's scrambled zipfian generator: draws are made over this many items
/// and then hashed into the actual key space.
pub const SCRAMBLED_ITEMS: u64 = 10_000_000_000;

/// Terms of zeta summed one by one before switching to the Euler-Maclaurin tail.
const ZETA_EXACT_TERMS: u64 = 10_000;

/// zeta(n, theta) = sum_{i=1}^{n} i^-theta.
pub fn zeta(n: u64, theta: f64) -> f64 {
    let exact = n.min(ZETA_EXACT_TERMS);
    // Smallest terms first, for accuracy.
    let mut sum: f64 = (1..=exact).rev().map(|i| (i as f64).powf(-theta)).sum();
    if n > exact {
        // sum_{i=m+1}^{n} f(i) = integral_m^n f + (f(n) - f(m))/2 + (f'(n) - f'(m))/12 + ...
        // with f(x) = x^-theta, f'(x) = -theta x^(-theta-1).
        let m = exact as f64;
        let nf = n as f64;
        let f = |x: f64| x.powf(-theta);
        let df = |x: f64| -theta * x.powf(-theta - 1.0);
        let integral = if (theta - 1.0).abs() < 1e-12 {
            (nf / m).ln()
        } else {
            (nf.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta)
        };
        sum += integral + (f(nf) - f(m)) / 2.0 + (df(nf) - df(m)) / 12.0;
    }
    sum
}

/// Zipfian integers in `[0, items)`, 0 the most popular.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

impl Zipfian {
    /// `items` must be at least 1; `theta` in (0, 1).
    pub fn new(items: u64, theta: f64) -> Zipfian {
        Self::with_zeta(items, theta, zeta(items, theta))
    }

    fn with_zeta(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = items.max(1);
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let eta = if items <= 2 {
            0.0
        } else {
            (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        };
        Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            half_pow_theta: 0.5f64.powf(theta),
        }
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    /// One draw in `[0, items)`.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 || self.items == 1 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta || self.items == 2 {
            return 1;
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }

    /// Changes the item count (for "latest", whose key space grows), recomputing zeta.
    pub fn resize(&mut self, items: u64) {
        if items != self.items {
            *self = Self::with_zeta(items, self.theta, zeta(items.max(1), self.theta));
        }
    }
}

/// YCSB's 64-bit FNV hash of a long: FNV-1a over its 8 little-endian bytes, as a
/// non-negative value.
pub fn fnv_hash64(v: u64) -> u64 {
    const OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET;
    let mut v = v;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(PRIME);
        v >>= 8;
    }
    (h as i64).unsigned_abs()
}

/// YCSB's "zipfian" request distribution: scrambled zipfian over `[0, items)`.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    gen: Zipfian,
    items: u64,
}

impl ScrambledZipfian {
    pub fn new(items: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            gen: Zipfian::new(SCRAMBLED_ITEMS, ZIPFIAN_THETA),
            items: items.max(1),
        }
    }

    pub fn next(&self, rng: &mut Rng) -> u64 {
        fnv_hash64(self.gen.next(rng)) % self.items
    }
}

/// YCSB's "latest": the most recently inserted keys are the most popular.
#[derive(Clone, Debug)]
pub struct Latest {
    gen: Zipfian,
}

impl Latest {
    pub fn new(items: u64) -> Latest {
        Latest {
            gen: Zipfian::new(items.max(1), ZIPFIAN_THETA),
        }
    }

    /// A key in `[0, count)`, skewed toward `count - 1`. The zipfian is resized (zeta
    /// recomputed, cheaply) when the key count has grown by more than 1/1000 since the last
    /// resize, which keeps the skew within 0.1% of exact.
    pub fn next(&mut self, rng: &mut Rng, count: u64) -> u64 {
        let count = count.max(1);
        let have = self.gen.items();
        if count < have || count - have > have / 1000 {
            self.gen.resize(count);
        }
        let d = self.gen.next(rng).min(count - 1);
        count - 1 - d
    }
}

/// Which keys the operations of a YCSB workload pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestDist {
    Uniform,
    Zipfian,
    Latest,
}

impl RequestDist {
    pub fn name(self) -> &'static str {
        match self {
            RequestDist::Uniform => "uniform",
            RequestDist::Zipfian => "zipfian",
            RequestDist::Latest => "latest",
        }
    }
}

/// Picks the key of each operation of one thread: a key index below `count`, the number of
/// keys known to exist.
#[derive(Clone, Debug)]
pub enum KeyChooser {
    Uniform,
    /// Scrambled zipfian over the key space expected at the end of the run; draws beyond the
    /// keys inserted so far are redrawn (as YCSB does).
    Zipfian(ScrambledZipfian),
    Latest(Latest),
}

impl KeyChooser {
    /// `expected_items`: keys at the start plus the inserts the run may add.
    pub fn new(dist: RequestDist, initial_items: u64, expected_items: u64) -> KeyChooser {
        match dist {
            RequestDist::Uniform => KeyChooser::Uniform,
            RequestDist::Zipfian => KeyChooser::Zipfian(ScrambledZipfian::new(expected_items)),
            RequestDist::Latest => KeyChooser::Latest(Latest::new(initial_items)),
        }
    }

    pub fn next(&mut self, rng: &mut Rng, count: u64) -> u64 {
        let count = count.max(1);
        match self {
            KeyChooser::Uniform => rng.below(count),
            KeyChooser::Zipfian(z) => {
                // Redraw keys not inserted yet; after many misses (a key space that grew far
                // less than expected) fall back to folding the draw into range.
                for _ in 0..64 {
                    let k = z.next(rng);
                    if k < count {
                        return k;
                    }
                }
                z.next(rng) % count
            }
            KeyChooser::Latest(l) => l.next(rng, count),
        }
    }
}

/// The default standard deviation of `--read-distribution gaussian`, as a fraction of the key
/// count: about 68% of the reads fall in the middle 20% of the keys, 95% in the middle 40%.
pub const GAUSSIAN_SIGMA_FRACTION: f64 = 0.1;

/// Which keys the reading benchmarks (readrandom, readmissing, readwhilewriting's readers,
/// multireadrandom, seekrandom) pick from the key space `[0, num)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReadDist {
    /// Every key equally likely (db_bench's readrandom).
    Uniform,
    /// Hot keys in the middle of the key space: a normal draw with mean `num / 2` and standard
    /// deviation `sigma_fraction * num`, rounded down and clamped to `[0, num - 1]` (so with a
    /// wide sigma the two end keys take the clipped tails).
    Gaussian { sigma_fraction: f64 },
}

impl ReadDist {
    pub fn name(self) -> &'static str {
        match self {
            ReadDist::Uniform => "uniform",
            ReadDist::Gaussian { .. } => "gaussian",
        }
    }

    /// A key index in `[0, num)`; `num` must be positive.
    pub fn next(self, rng: &mut Rng, num: u64) -> u64 {
        match self {
            ReadDist::Uniform => rng.below(num),
            ReadDist::Gaussian { sigma_fraction } => {
                let x = num as f64 / 2.0 + standard_normal(rng) * sigma_fraction * num as f64;
                // `as u64` saturates: negative draws become 0, NaN cannot occur.
                (x.max(0.0) as u64).min(num - 1)
            }
        }
    }
}

/// One draw of the standard normal distribution (Box-Muller; the second value of the pair is
/// dropped, which costs a logarithm and a square root per draw, far below a read's cost).
pub fn standard_normal(rng: &mut Rng) -> f64 {
    // 1 - unit() is in (0, 1], so the logarithm is finite.
    let u1 = 1.0 - rng.unit();
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Workload E's scan length: uniform in `[1, max]`.
pub fn scan_length(rng: &mut Rng, max: u64) -> u64 {
    1 + rng.below(max.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeta_matches_direct_sum_and_ycsb_constant() {
        for n in [1u64, 2, 10, 9_999, 10_000, 10_001, 123_456] {
            let direct: f64 = (1..=n).rev().map(|i| (i as f64).powf(-0.99)).sum();
            let z = zeta(n, 0.99);
            assert!((z - direct).abs() < 1e-9, "n={n}: {z} vs {direct}");
        }
        // YCSB's precomputed zeta(10^10, 0.99).
        let z = zeta(SCRAMBLED_ITEMS, ZIPFIAN_THETA);
        assert!((z - 26.46902820178302).abs() < 1e-6, "{z}");
    }

    /// The empirical frequency of the most popular items follows 1/(i+1)^theta / zeta.
    #[test]
    fn zipfian_skew_matches_theory() {
        let n = 1000u64;
        let z = Zipfian::new(n, ZIPFIAN_THETA);
        let mut rng = Rng::new(7);
        let draws = 400_000u64;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            let k = z.next(&mut rng);
            assert!(k < n);
            counts[k as usize] += 1;
        }
        // Items 0 and 1 are drawn with their exact probabilities; beyond them the method
        // (and so YCSB) approximates the law.
        let zn = zeta(n, ZIPFIAN_THETA);
        for i in [0usize, 1] {
            let expected = draws as f64 / ((i + 1) as f64).powf(ZIPFIAN_THETA) / zn;
            let got = counts[i] as f64;
            assert!(
                (got - expected).abs() < 0.03 * expected,
                "item {i}: {got} draws, expected {expected:.0}"
            );
        }
        // Heavy skew: the top 1% of items take about 40% of the draws (exact law: 0.39).
        let top: u64 = counts[..10].iter().sum();
        let share = top as f64 / draws as f64;
        assert!((0.35..0.45).contains(&share), "top-10 share {share}");
        // Popularity falls with rank: each decade of ranks is drawn less than the previous.
        let decade = |r: std::ops::Range<usize>| counts[r].iter().sum::<u64>() as f64;
        assert!(decade(10..100) / 90.0 < decade(0..10) / 10.0);
        assert!(decade(100..1000) / 900.0 < decade(10..100) / 90.0);
        // ...and the tail is still reached.
        assert!(counts[500..].iter().sum::<u64>() > 0);
    }

    #[test]
    fn scrambled_zipfian_spreads_hot_keys_and_stays_skewed() {
        let n = 10_000u64;
        let z = ScrambledZipfian::new(n);
        let mut rng = Rng::new(3);
        let mut counts = vec![0u32; n as usize];
        for _ in 0..200_000 {
            let k = z.next(&mut rng);
            assert!(k < n);
            counts[k as usize] += 1;
        }
        let hottest = (0..n as usize).max_by_key(|&i| counts[i]).unwrap();
        // The hottest key is fnv(0) mod n, not key 0.
        assert_eq!(hottest as u64, fnv_hash64(0) % n);
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        // The draws are made over 10^10 items: the 100 hottest ranks hold
        // zeta(100)/zeta(10^10) ~ 19.6% of the mass, which the top 1% of keys get (and a
        // little more, from collisions) — less skew than a zipfian over 10,000 items.
        let top1pct: u32 = sorted[..100].iter().sum();
        let share = top1pct as f64 / 200_000.0;
        assert!(
            (0.19..0.26).contains(&share),
            "top 1% of keys got {share} of the draws"
        );
        // Hot keys are spread: the hottest 100 are not clustered in the first 10% of keys.
        let mut hot: Vec<usize> = (0..n as usize).collect();
        hot.sort_unstable_by(|a, b| counts[*b].cmp(&counts[*a]));
        let low = hot[..100].iter().filter(|&&i| i < n as usize / 10).count();
        assert!(
            low < 30,
            "{low} of the 100 hottest keys are in the first 10%"
        );
    }

    #[test]
    fn fnv_hash_is_ycsbs() {
        // FNV-1a of eight zero bytes, then made non-negative.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(fnv_hash64(0), (h as i64).unsigned_abs());
        assert_ne!(fnv_hash64(1), fnv_hash64(256));
        assert!(fnv_hash64(u64::MAX) <= i64::MAX as u64 + 1);
    }

    #[test]
    fn latest_prefers_recent_keys_and_follows_growth() {
        let mut l = Latest::new(1000);
        let mut rng = Rng::new(11);
        let mut newest = 0;
        let mut old_half = 0;
        for _ in 0..100_000 {
            let k = l.next(&mut rng, 1000);
            assert!(k < 1000);
            if k == 999 {
                newest += 1;
            }
            if k < 500 {
                old_half += 1;
            }
        }
        // P(newest) = 1/zeta(1000) ~ 0.1335.
        assert!((12_000..15_000).contains(&newest), "{newest}");
        assert!(old_half < 10_000, "{old_half}");
        // After growth the newest key is the new last one.
        let mut at_top = 0;
        for _ in 0..10_000 {
            let k = l.next(&mut rng, 5000);
            assert!(k < 5000);
            if k == 4999 {
                at_top += 1;
            }
        }
        assert!(at_top > 1000, "{at_top}");
    }

    #[test]
    fn key_chooser_stays_below_the_inserted_count() {
        let mut rng = Rng::new(5);
        for dist in [
            RequestDist::Uniform,
            RequestDist::Zipfian,
            RequestDist::Latest,
        ] {
            let mut c = KeyChooser::new(dist, 1000, 2000);
            for count in [1u64, 10, 1000, 1500] {
                for _ in 0..2000 {
                    assert!(c.next(&mut rng, count) < count, "{dist:?}");
                }
            }
        }
    }

    #[test]
    fn uniform_chooser_covers_the_space_evenly() {
        let mut rng = Rng::new(9);
        let mut c = KeyChooser::new(RequestDist::Uniform, 100, 100);
        let mut buckets = [0u32; 4];
        for _ in 0..40_000 {
            buckets[(c.next(&mut rng, 100) / 25) as usize] += 1;
        }
        for b in buckets {
            assert!((9_000..11_000).contains(&b), "{buckets:?}");
        }
    }

    /// Mean, spread and range of the Gaussian reads, over a key space large enough that
    /// rounding does not matter.
    #[test]
    fn gaussian_reads_centre_on_the_middle_with_the_given_spread() {
        let num = 1_000_000u64;
        for sigma_fraction in [0.1, 0.02] {
            let d = ReadDist::Gaussian { sigma_fraction };
            let mut rng = Rng::new(21);
            let draws = 200_000;
            let xs: Vec<f64> = (0..draws)
                .map(|_| {
                    let k = d.next(&mut rng, num);
                    assert!(k < num);
                    k as f64
                })
                .collect();
            let mean = xs.iter().sum::<f64>() / draws as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / draws as f64;
            let sigma = sigma_fraction * num as f64;
            // The standard error of the mean is sigma / sqrt(200,000) ~ 0.0022 sigma.
            assert!(
                (mean - num as f64 / 2.0).abs() < 0.01 * sigma,
                "sigma {sigma_fraction}: mean {mean}"
            );
            assert!(
                (var.sqrt() / sigma - 1.0).abs() < 0.01,
                "sigma {sigma_fraction}: standard deviation {}",
                var.sqrt()
            );
            // The normal law's 1- and 2-sigma shares: 68.27% and 95.45%.
            let within = |k: f64| {
                xs.iter()
                    .filter(|&&x| (x - num as f64 / 2.0).abs() < k * sigma)
                    .count() as f64
                    / draws as f64
            };
            assert!((within(1.0) - 0.6827).abs() < 0.005, "{}", within(1.0));
            assert!((within(2.0) - 0.9545).abs() < 0.003, "{}", within(2.0));
        }
    }

    #[test]
    fn gaussian_reads_stay_in_range_when_clamped() {
        let mut rng = Rng::new(4);
        // A sigma of 10 key spaces sends almost every draw past an end: they are clamped.
        let wide = ReadDist::Gaussian {
            sigma_fraction: 10.0,
        };
        let mut ends = 0;
        for num in [1u64, 2, 3, 1000] {
            for _ in 0..10_000 {
                let k = wide.next(&mut rng, num);
                assert!(k < num, "{k} of {num}");
                if k == 0 || k == num - 1 {
                    ends += 1;
                }
            }
        }
        assert!(ends > 39_000, "{ends}");
        let narrow = ReadDist::Gaussian {
            sigma_fraction: 0.1,
        };
        for _ in 0..10_000 {
            assert!(narrow.next(&mut rng, 7) < 7);
        }
    }

    #[test]
    fn read_distributions_are_deterministic_for_a_seed() {
        for d in [
            ReadDist::Uniform,
            ReadDist::Gaussian {
                sigma_fraction: GAUSSIAN_SIGMA_FRACTION,
            },
        ] {
            let run = |seed| {
                let mut rng = Rng::new(seed);
                (0..1000)
                    .map(|_| d.next(&mut rng, 100_000))
                    .collect::<Vec<_>>()
            };
            assert_eq!(run(8), run(8), "{d:?}");
            assert_ne!(run(8), run(9), "{d:?}");
        }
    }

    #[test]
    fn scan_lengths_are_uniform_from_1_to_max() {
        let mut rng = Rng::new(1);
        let mut seen = [0u32; 101];
        for _ in 0..100_000 {
            let n = scan_length(&mut rng, 100);
            assert!((1..=100).contains(&n), "{n}");
            seen[n as usize] += 1;
        }
        assert_eq!(seen[0], 0);
        for (len, &c) in seen.iter().enumerate().skip(1) {
            assert!((700..1300).contains(&c), "length {len} seen {c} times");
        }
        let mean: f64 = seen
            .iter()
            .enumerate()
            .map(|(l, &c)| l as f64 * c as f64)
            .sum::<f64>()
            / 100_000.0;
        assert!((mean - 50.5).abs() < 0.5, "{mean}");
    }
}
