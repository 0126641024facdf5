//! A learned index over a table's index block (Bourbon, OSDI 2020), `Options::sst_learned_index`.
//!
//! Finding the data block of a key is a binary search over the index block's separators (one
//! per data block, the block's last internal key): about 14 comparisons of variable-length keys
//! for the 16 K blocks of a 64 MiB table. A [`Pgm`] over the separators' user keys, mapped to
//! `u64`s as the L0 tier does ([`key_to_u64`] after the prefix every separator shares),
//! predicts the block within ±[`EPSILON`], so the search is a few multiply-adds and about
//! `log2(2ε + 2)` ≈ 4 comparisons. Nothing is stored on disk: the model is built in memory.
//!
//! **Exactness.** The model only says where to start. [`Pgm::lower_bound_by`] compares real
//! internal keys ([`compare_internal`]) and widens its window until the answer is bracketed,
//! so ties (separators whose 8 bytes after the prefix are equal, or versions of one user key
//! spread over several blocks) and a badly predicting model cost time, never a wrong block:
//! the answer is always the binary search's.
//!
//! **When it is built (Bourbon's cost–benefit rule, simple form).** Bourbon learns a file only
//! once it has lived long enough for the lookups it will serve to repay the learning. Here a
//! table counts its block lookups until the model exists; the lookup that makes the count
//! [`BUILD_AFTER_LOOKUPS`] builds it (O(blocks), under a millisecond for 16 K blocks), so a
//! table that is compacted away soon after it is written (most L0 tables, an L1 table in a
//! busy key range) never pays. Tables of fewer than [`MIN_BLOCKS`] blocks never build one: a
//! binary search over them takes no more comparisons than the model's window.
//!
//! **Used only where it measures faster.** Whether the model pays depends on the keys: with
//! db_bench's dense keys it was 1.7–2.4x faster than the binary search from 280 blocks up,
//! with uniformly random 16-byte keys 0.91x at 3,000 blocks and 1.05–1.13x only from about
//! 10,000 (`strata index-bench --sst`, `docs/benchmarks.md`). So the automatic build times
//! both searches over [`JUDGE_SAMPLES`] of the table's own separators (best of
//! [`JUDGE_ROUNDS`] alternating rounds, about 0.2 ms once per table) and keeps the model only
//! if it was faster; otherwise the table binary-searches for good. The decision is timing,
//! so it can differ between runs; the answer never does.
//!
//! **Threads.** The model lives in a `OnceLock`: exactly one lookup (the one whose increment
//! reaches the threshold) builds it; lookups before it is published, and concurrent with the
//! build, binary-search. Once published it is read without locks and the counter is no longer
//! touched (no shared cache line written per lookup).

use super::index::Index;
use crate::key::{compare_internal, user_key};
use crate::pgm::{key_to_u64, shared_prefix_len, Pgm};
use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Error bound of the model, in index entries (data blocks). Bourbon's choice (its piecewise
/// linear models use δ = 8): a window of 2ε + 2 = 18 entries is 4–5 comparisons, and a
/// smaller bound buys little while multiplying the segments (24 bytes each).
pub const EPSILON: usize = 8;

/// Block lookups a table serves before it builds its model (Bourbon's wait before learning a
/// file, counted in lookups rather than time so that it does not depend on the load's rate).
/// Building costs about as much as a few hundred binary searches, so a table that serves
/// fewer lookups than this would not get the cost back.
pub const BUILD_AFTER_LOOKUPS: u64 = 1000;

/// Tables with fewer data blocks than this never build a model: the binary search over them
/// is at most 5 comparisons, no more than the model's window.
pub const MIN_BLOCKS: usize = 32;

/// Separators the automatic build times both searches over.
pub const JUDGE_SAMPLES: usize = 256;

/// Alternating timing rounds of that judgement; the best round of each search counts.
pub const JUDGE_ROUNDS: usize = 3;

/// Models built since the process started (tests and statistics).
static MODELS_BUILT: AtomicU64 = AtomicU64::new(0);
/// Models the automatic build measured slower than the binary search and dropped.
static MODELS_REJECTED: AtomicU64 = AtomicU64::new(0);

/// Learned indexes built by all tables since the process started.
#[doc(hidden)]
pub fn learned_models_built() -> u64 {
    MODELS_BUILT.load(Ordering::Relaxed)
}

/// Learned indexes built automatically and dropped because they measured slower.
#[doc(hidden)]
pub fn learned_models_rejected() -> u64 {
    MODELS_REJECTED.load(Ordering::Relaxed)
}

/// Whether `model` finds blocks of `index` faster than the binary search, timed over a
/// sample of the index's own keys.
fn measures_faster(model: &Model, index: &Index) -> bool {
    let n = index.len();
    // Scattered positions (a multiplicative hash), not a stride: neighbouring queries share a
    // binary search's first steps, which would flatter it with cache hits lookups do not get.
    let samples: Vec<&[u8]> = (0..JUDGE_SAMPLES as u64)
        .map(|j| index.key((j.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16) as usize % n))
        .collect();
    let time = |f: &dyn Fn(&[u8]) -> usize| {
        let t = std::time::Instant::now();
        let mut sum = 0usize;
        for s in &samples {
            sum = sum.wrapping_add(f(s));
        }
        std::hint::black_box(sum);
        t.elapsed()
    };
    let (mut best_model, mut best_binary) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..JUDGE_ROUNDS {
        best_binary = best_binary.min(time(&|s| index.find(s).unwrap_or(n)));
        best_model = best_model.min(time(&|s| model.lower_bound(|i| index.key(i), s)));
    }
    best_model < best_binary
}

/// The model over one sorted run of internal keys: the prefix their user keys share and a PGM
/// over the next 8 bytes of each.
#[derive(Debug)]
pub(crate) struct Model {
    prefix: Box<[u8]>,
    pgm: Pgm,
}

impl Model {
    /// The model of internal keys `key(0..n)`, strictly increasing in [`compare_internal`]
    /// order. `None` if `n` is 0 or the keys do not map to non-decreasing `u64`s (keys from a
    /// damaged file the index check let through: the binary search still works over them).
    pub(crate) fn build<'a>(n: usize, key: impl Fn(usize) -> &'a [u8]) -> Option<Model> {
        if n == 0 {
            return None;
        }
        let (first, last) = (user_key(key(0)), user_key(key(n - 1)));
        let plen = shared_prefix_len(first, last);
        let mapped: Vec<u64> = (0..n).map(|i| key_to_u64(user_key(key(i)), plen)).collect();
        if mapped.windows(2).any(|w| w[0] > w[1]) {
            return None;
        }
        Some(Model {
            prefix: first[..plen].into(),
            pgm: Pgm::build(&mapped, EPSILON),
        })
    }

    /// The first `i` in `0..n` with `key(i) >= target` (`n` if none): exactly what a binary
    /// search over the same keys returns.
    pub(crate) fn lower_bound<'a>(&self, key: impl Fn(usize) -> &'a [u8], target: &[u8]) -> usize {
        let uk = user_key(target);
        let p = &*self.prefix;
        // A query outside the shared prefix lies before or after every key.
        let x = if uk.starts_with(p) {
            key_to_u64(uk, p.len())
        } else if uk < p {
            0
        } else {
            u64::MAX
        };
        self.pgm
            .lower_bound_by(x, |i| compare_internal(key(i), target) == CmpOrdering::Less)
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Model>() + self.prefix.len() + self.pgm.size_bytes()
    }

    /// Segments per level of the PGM, bottom first.
    pub(crate) fn level_sizes(&self) -> Vec<usize> {
        self.pgm.level_sizes()
    }
}

/// The lazily built model of one table's index block.
#[derive(Debug, Default)]
pub(crate) struct LearnedIndex {
    /// Block lookups served before the model was decided on.
    lookups: AtomicU64,
    /// Set once: `Some` model, or `None` when the table is too small or its keys do not map.
    model: OnceLock<Option<Model>>,
}

impl LearnedIndex {
    pub(crate) fn new() -> LearnedIndex {
        LearnedIndex::default()
    }

    /// The first block of `index` whose key is `>= target` (`Some(None)` if there is none),
    /// from the model; `None` while there is no model (the caller binary-searches).
    #[inline]
    pub(crate) fn find(&self, index: &Index, target: &[u8]) -> Option<Option<usize>> {
        let model = match self.model.get() {
            Some(m) => m.as_ref()?,
            None => {
                if self.lookups.fetch_add(1, Ordering::Relaxed) + 1 != BUILD_AFTER_LOOKUPS {
                    return None;
                }
                self.decide(index, true)?
            }
        };
        let i = model.lower_bound(|i| index.key(i), target);
        Some((i < index.len()).then_some(i))
    }

    /// Builds the model now, without judging it against the binary search (benchmarks and
    /// tests), if it was not decided on yet; the model, if the table has one.
    pub(crate) fn build(&self, index: &Index) -> Option<&Model> {
        self.decide(index, false)
    }

    /// Decides on the model once: built if the table is big enough and its keys map, and with
    /// `judge` kept only if it measures faster than the binary search.
    fn decide(&self, index: &Index, judge: bool) -> Option<&Model> {
        self.model
            .get_or_init(|| {
                if index.len() < MIN_BLOCKS {
                    return None;
                }
                let m = Model::build(index.len(), |i| index.key(i))?;
                MODELS_BUILT.fetch_add(1, Ordering::Relaxed);
                if judge && !measures_faster(&m, index) {
                    MODELS_REJECTED.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                Some(m)
            })
            .as_ref()
    }

    /// Whether the model was decided on (built, rejected, or not possible).
    pub(crate) fn decided(&self) -> bool {
        self.model.get().is_some()
    }

    /// The model, if it was built.
    pub(crate) fn model(&self) -> Option<&Model> {
        self.model.get()?.as_ref()
    }

    /// Bytes the model takes (0 before it is built).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.model().map_or(0, Model::memory_bytes)
    }
}
