//! A PGM learned index (Ferragina and Vinciguerra, "The PGM-index", VLDB 2020), the index
//! the NVM seed (`003`) gives each L0 table: piecewise linear models over sorted keys, each
//! segment predicting a key's position within ±ε, stacked in levels until one segment is
//! left, so a lookup is a few multiply-adds and a search of a window of 2ε + 2 positions
//! instead of a binary search over all of them.
//!
//! Written here rather than taken from a crate: the index is part of the subject (the L0
//! tier), and the available crates index `u64`s only, with no answer for byte-string keys
//! that share long prefixes.
//!
//! **Byte keys.** Keys are mapped to `u64`s that preserve order, [`key_to_u64`]: the 8 bytes
//! after the prefix every indexed key shares, big-endian, zero-padded. The map is monotone
//! but not injective (keys that differ only later tie), so the index is built over the
//! distinct values, each at its first position, and a lookup verifies its window against
//! the real keys and widens it (galloping) when a tie or float rounding put the answer
//! outside. Correctness never depends on the model; only speed does.
//!
//! **Segments** are built with the shrinking cone (O(n), one pass, as FITing-tree): a segment
//! starts at a point and keeps the range of slopes that keep every later point within ±ε;
//! the first point that empties the range starts the next segment. The optimal algorithm
//! (convex hulls) makes somewhat fewer segments; the cone is simpler and its segments obey
//! the same bound.

/// One linear piece: for keys from `key`, position ≈ `intercept + slope * (x - key)`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Segment {
    key: u64,
    slope: f64,
    intercept: f64,
}

impl Segment {
    fn predict(&self, x: u64) -> f64 {
        self.intercept + self.slope * (x.saturating_sub(self.key)) as f64
    }
}

/// A PGM index over a sorted sequence of `u64`s.
#[derive(Clone, Debug)]
pub struct Pgm {
    epsilon: usize,
    /// Number of positions indexed (the length of the indexed sequence).
    len: usize,
    /// `levels[0]` predicts positions in the data; `levels[l + 1]` predicts positions in
    /// `levels[l]`; the last level has one segment.
    levels: Vec<Vec<Segment>>,
}

/// The `u64` of `key` for an index whose keys all start with `prefix_len` shared bytes: the
/// next 8 bytes, big-endian, zero-padded. Monotone: `a <= b` implies
/// `key_to_u64(a) <= key_to_u64(b)` for keys sharing that prefix.
pub fn key_to_u64(key: &[u8], prefix_len: usize) -> u64 {
    let mut b = [0u8; 8];
    let rest = key.get(prefix_len..).unwrap_or(&[]);
    let n = rest.len().min(8);
    b[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(b)
}

/// Length of the prefix shared by every key of a sorted sequence whose first and last keys
/// are `first` and `last` (every key between shares what those two share).
pub fn shared_prefix_len(first: &[u8], last: &[u8]) -> usize {
    first.iter().zip(last).take_while(|(a, b)| a == b).count()
}

/// Builds the segments of one level over points `(keys[i], positions[i])`, keys strictly
/// increasing.
fn build_level(keys: &[u64], positions: &[usize], epsilon: usize) -> Vec<Segment> {
    let eps = epsilon as f64;
    let mut out = Vec::new();
    let mut i = 0;
    while i < keys.len() {
        let (k0, p0) = (keys[i], positions[i] as f64);
        let (mut lo, mut hi) = (0.0f64, f64::INFINITY);
        let mut j = i + 1;
        while j < keys.len() {
            let dx = (keys[j] - k0) as f64;
            let dy = positions[j] as f64 - p0;
            let (need_lo, need_hi) = ((dy - eps) / dx, (dy + eps) / dx);
            let (nlo, nhi) = (lo.max(need_lo), hi.min(need_hi));
            if nlo > nhi {
                break;
            }
            (lo, hi) = (nlo, nhi);
            j += 1;
        }
        let slope = if hi.is_finite() { (lo + hi) / 2.0 } else { 0.0 };
        out.push(Segment {
            key: k0,
            slope,
            intercept: p0,
        });
        i = j;
    }
    out
}

impl Pgm {
    /// The index of sorted (non-decreasing) `keys` with error bound `epsilon` (at least 1).
    pub fn build(keys: &[u64], epsilon: usize) -> Pgm {
        debug_assert!(keys.windows(2).all(|w| w[0] <= w[1]), "keys must be sorted");
        let epsilon = epsilon.max(1);
        let mut distinct = Vec::with_capacity(keys.len());
        let mut positions = Vec::with_capacity(keys.len());
        for (i, &k) in keys.iter().enumerate() {
            if distinct.last() != Some(&k) {
                distinct.push(k);
                positions.push(i);
            }
        }
        let mut levels = vec![build_level(&distinct, &positions, epsilon)];
        while levels.last().is_some_and(|l| l.len() > 1) {
            let below = levels.last().map(|l| l.as_slice()).unwrap_or(&[]);
            let keys: Vec<u64> = below.iter().map(|s| s.key).collect();
            let positions: Vec<usize> = (0..keys.len()).collect();
            levels.push(build_level(&keys, &positions, epsilon));
        }
        Pgm {
            epsilon,
            len: keys.len(),
            levels,
        }
    }

    pub fn epsilon(&self) -> usize {
        self.epsilon
    }

    /// Segments per level, bottom first (for statistics).
    pub fn level_sizes(&self) -> Vec<usize> {
        self.levels.iter().map(|l| l.len()).collect()
    }

    /// Bytes the index takes in memory (segments only).
    pub fn size_bytes(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.len() * std::mem::size_of::<Segment>())
            .sum()
    }

    /// Appends the index as an L0 table stores it (`docs/format/l0-tier.md`, "Index
    /// section"): epsilon (u32), indexed length (u64), level count (u32), then per level,
    /// bottom first, its segment count (u32) and segments (key u64, slope f64, intercept
    /// f64), all little-endian.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.epsilon as u32).to_le_bytes());
        out.extend_from_slice(&(self.len as u64).to_le_bytes());
        out.extend_from_slice(&(self.levels.len() as u32).to_le_bytes());
        for level in &self.levels {
            out.extend_from_slice(&(level.len() as u32).to_le_bytes());
            for s in level {
                out.extend_from_slice(&s.key.to_le_bytes());
                out.extend_from_slice(&s.slope.to_bits().to_le_bytes());
                out.extend_from_slice(&s.intercept.to_bits().to_le_bytes());
            }
        }
    }

    /// Decodes [`Pgm::encode`]'s bytes, all of `data`; `None` if they are not a well-formed
    /// index (the caller reports corruption). Checks the shape lookups rely on not to panic
    /// (no empty level unless nothing is indexed, one segment on top); a model that predicts
    /// badly only costs speed, since lookups verify against the real keys.
    pub fn decode(mut data: &[u8]) -> Option<Pgm> {
        fn take<const N: usize>(data: &mut &[u8]) -> Option<[u8; N]> {
            let (head, rest) = data.split_first_chunk::<N>()?;
            *data = rest;
            Some(*head)
        }
        let epsilon = u32::from_le_bytes(take(&mut data)?) as usize;
        let len = usize::try_from(u64::from_le_bytes(take(&mut data)?)).ok()?;
        let nlevels = u32::from_le_bytes(take(&mut data)?) as usize;
        if epsilon == 0 || nlevels == 0 || nlevels > 64 {
            return None;
        }
        let mut levels = Vec::with_capacity(nlevels);
        for l in 0..nlevels {
            let n = u32::from_le_bytes(take(&mut data)?) as usize;
            if n.checked_mul(24)? > data.len() || (n == 0 && (len > 0 || l > 0)) {
                return None;
            }
            let mut level = Vec::with_capacity(n);
            for _ in 0..n {
                level.push(Segment {
                    key: u64::from_le_bytes(take(&mut data)?),
                    slope: f64::from_bits(u64::from_le_bytes(take(&mut data)?)),
                    intercept: f64::from_bits(u64::from_le_bytes(take(&mut data)?)),
                });
            }
            levels.push(level);
        }
        let top_ok = len == 0 || levels.last().is_some_and(|l| l.len() == 1);
        (data.is_empty() && top_ok).then_some(Pgm {
            epsilon,
            len,
            levels,
        })
    }

    /// Number of positions indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Predicted position of the first key `>= x` in the data, clamped to `[0, len]`.
    fn predict(&self, x: u64) -> usize {
        let mut seg = 0usize;
        for l in (0..self.levels.len()).rev() {
            let level = &self.levels[l];
            let si = seg.min(level.len() - 1);
            let mut p = level[si].predict(x);
            // A key in the gap after a segment's last point must not be extrapolated past
            // where the next segment starts: the first key >= it is that segment's first.
            if let Some(next) = level.get(si + 1) {
                p = p.min(next.intercept);
            }
            if l == 0 {
                return clamp_pos(p, self.len);
            }
            // The segment of the level below that covers x: the last one whose first key is
            // <= x, searched for within the error window (and beyond it if rounding put it
            // outside).
            let below = &self.levels[l - 1];
            let guess = clamp_pos(p, below.len().saturating_sub(1));
            seg = last_at_or_below(below, x, guess, self.epsilon);
        }
        0
    }

    /// The first position `i` in `[0, len)` with `!is_less(i)` (`len` if there is none),
    /// where `is_less(i)` says whether the indexed key at `i` is below the query and `x` is
    /// the query's `u64` ([`key_to_u64`]). `is_less` must be monotone (true, then false) and
    /// consistent with the `u64`s the index was built over.
    pub fn lower_bound_by(&self, x: u64, is_less: impl Fn(usize) -> bool) -> usize {
        if self.len == 0 {
            return 0;
        }
        let p = self.predict(x);
        let e = self.epsilon + 1;
        let mut lo = p.saturating_sub(e);
        let mut hi = (p + e).min(self.len);
        // Widen until the answer is inside [lo, hi]: is_less(lo - 1) and !is_less(hi).
        let mut step = 2 * e;
        while lo > 0 && !is_less(lo - 1) {
            hi = lo;
            lo = lo.saturating_sub(step);
            step *= 2;
        }
        step = 2 * e;
        while hi < self.len && is_less(hi) {
            lo = hi + 1;
            hi = (hi + step).min(self.len);
            step *= 2;
        }
        // Binary search in [lo, hi].
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if is_less(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

fn clamp_pos(p: f64, max: usize) -> usize {
    if p.is_nan() || p <= 0.0 {
        0
    } else if p >= max as f64 {
        max
    } else {
        p as usize
    }
}

/// Index of the last segment of `level` whose key is `<= x` (0 if none), searched around
/// `guess` within `epsilon`, widening if needed.
fn last_at_or_below(level: &[Segment], x: u64, guess: usize, epsilon: usize) -> usize {
    // First index whose key is > x, then one back.
    let is_le = |i: usize| level[i].key <= x;
    let e = epsilon + 1;
    let n = level.len();
    let mut lo = guess.saturating_sub(e);
    let mut hi = (guess + e + 1).min(n);
    let mut step = 2 * e;
    while lo > 0 && !is_le(lo - 1) {
        hi = lo;
        lo = lo.saturating_sub(step);
        step *= 2;
    }
    step = 2 * e;
    while hi < n && is_le(hi) {
        lo = hi + 1;
        hi = (hi + step).min(n);
        step *= 2;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if is_le(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(keys: &[u64], epsilon: usize, queries: &[u64]) {
        let pgm = Pgm::build(keys, epsilon);
        for &q in queries.iter().chain(keys) {
            let want = keys.partition_point(|&k| k < q);
            let got = pgm.lower_bound_by(q, |i| keys[i] < q);
            assert_eq!(got, want, "query {q} eps {epsilon}");
        }
    }

    #[test]
    fn within_epsilon_on_distinct_keys() {
        // Distinct keys: the prediction itself is within the error bound (plus one for
        // float rounding), so no widening is needed.
        let keys: Vec<u64> = (0..100_000u64).map(|i| i * i / 7 + i * 3).collect();
        for eps in [1, 4, 32, 128] {
            let pgm = Pgm::build(&keys, eps);
            for (i, &k) in keys.iter().enumerate().step_by(97) {
                let p = pgm.predict(k);
                assert!(
                    p.abs_diff(i) <= eps + 1,
                    "eps {eps}: key {i} predicted at {p}"
                );
            }
            assert_eq!(*pgm.level_sizes().last().unwrap(), 1);
            if eps == 32 {
                assert!(
                    pgm.level_sizes()[0] < keys.len() / 50,
                    "{:?}",
                    pgm.level_sizes()
                );
            }
        }
        check(&keys, 8, &[0, 1, 2, u64::MAX, 5, 1 << 40]);
    }

    #[test]
    fn long_runs_of_equal_values_are_found() {
        // Byte keys sharing their first 8 bytes after the prefix map to one value.
        let mut keys = vec![5u64; 1000];
        keys.extend(std::iter::repeat_n(9, 5000));
        keys.extend(10..2000u64);
        check(&keys, 4, &[0, 5, 6, 9, 10, 11, 1999, 2000, u64::MAX]);
        check(&[], 4, &[0, 7]);
        check(&[3], 4, &[0, 3, 4]);
    }

    #[test]
    fn byte_keys_map_in_order() {
        let keys: Vec<&[u8]> = vec![b"user:0001", b"user:0001a", b"user:0002", b"user:1"];
        let p = shared_prefix_len(keys[0], keys[3]);
        assert_eq!(p, 5);
        let mapped: Vec<u64> = keys.iter().map(|k| key_to_u64(k, p)).collect();
        assert!(mapped.windows(2).all(|w| w[0] <= w[1]), "{mapped:?}");
        assert_eq!(key_to_u64(b"ab", 0), u64::from_be_bytes(*b"ab\0\0\0\0\0\0"));
        assert_eq!(key_to_u64(b"ab", 5), 0);
    }

    #[test]
    fn a_key_in_a_gap_is_predicted_at_the_next_segment() {
        // Dense runs with a wide gap between them: a steep segment extrapolated across the
        // gap would predict far past the answer (the start of the next run).
        let mut keys: Vec<u64> = (0..2000u64).map(|i| i * i).collect();
        keys.extend((0..2000u64).map(|i| (1 << 50) + i * 3));
        let pgm = Pgm::build(&keys, 4);
        for x in [4_000_000u64, 1 << 30, (1 << 50) - 1] {
            let want = keys.partition_point(|&k| k < x);
            let p = pgm.predict(x);
            assert!(p.abs_diff(want) <= 5, "x {x}: predicted {p}, answer {want}");
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        let keys: Vec<u64> = (0..5000u64).map(|i| i * i).collect();
        let pgm = Pgm::build(&keys, 4);
        let mut buf = Vec::new();
        pgm.encode(&mut buf);
        let back = Pgm::decode(&buf).unwrap();
        assert_eq!(back.levels, pgm.levels);
        assert_eq!((back.len(), back.epsilon()), (5000, 4));
        assert!(Pgm::decode(&buf[..buf.len() - 1]).is_none());
        let mut longer = buf.clone();
        longer.push(0);
        assert!(Pgm::decode(&longer).is_none());
        let mut empty = Vec::new();
        Pgm::build(&[], 4).encode(&mut empty);
        assert_eq!(Pgm::decode(&empty).unwrap().lower_bound_by(7, |_| true), 0);
    }

    proptest! {
        #[test]
        fn lower_bound_matches_binary_search(
            mut keys in proptest::collection::vec(
                prop_oneof![0u64..50, 0u64..u64::MAX, (0u64..1000).prop_map(|x| x << 40)],
                0..600),
            eps in 1usize..40,
            queries in proptest::collection::vec(any::<u64>(), 0..20),
        ) {
            keys.sort_unstable();
            check(&keys, eps, &queries);
        }

        #[test]
        fn byte_keys_through_the_map(
            mut keys in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..14),
                1..300),
            eps in 1usize..16,
            query in proptest::collection::vec(any::<u8>(), 0..14),
        ) {
            keys.sort_unstable();
            let p = shared_prefix_len(&keys[0], &keys[keys.len() - 1]);
            let mapped: Vec<u64> = keys.iter().map(|k| key_to_u64(k, p)).collect();
            let pgm = Pgm::build(&mapped, eps);
            for q in keys.iter().chain([&query]) {
                let want = keys.partition_point(|k| k < q);
                // A query outside the shared prefix maps by its own bytes; clamp it to the
                // indexed range the way a table does (below the first key: 0, above: max).
                let x = if q[..p.min(q.len())] < keys[0][..p] {
                    0
                } else if q[..p.min(q.len())] > keys[0][..p] {
                    u64::MAX
                } else {
                    key_to_u64(q, p)
                };
                let got = pgm.lower_bound_by(x, |i| &keys[i] < q);
                prop_assert_eq!(got, want);
            }
        }
    }
}
