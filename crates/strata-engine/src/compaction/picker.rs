//! Compaction picking: a pure function from a [`Version`] and the set of tables already being
//! compacted to a [`CompactionPlan`], unit-tested without I/O. Scores, the round-robin compact
//! pointer, and the rules that keep concurrent compactions apart: `docs/design.md` §6.3.

use crate::key::user_key;
use crate::version::{key_range, FileMeta, Version};
use std::collections::HashSet;
use std::sync::Arc;

/// What one compaction reads and where it writes.
#[derive(Clone, Debug)]
pub struct CompactionPlan {
    pub level: usize,
    pub inputs: Vec<Arc<FileMeta>>,
    pub next_inputs: Vec<Arc<FileMeta>>,
    pub output_level: usize,
    /// One input table and nothing to merge with: move it down by editing the MANIFEST.
    pub trivial_move: bool,
}

impl CompactionPlan {
    /// User-key range of all inputs.
    pub fn range(&self) -> (Vec<u8>, Vec<u8>) {
        let all: Vec<_> = self
            .inputs
            .iter()
            .chain(&self.next_inputs)
            .cloned()
            .collect();
        key_range(&all).unwrap_or_default()
    }

    pub fn input_bytes(&self) -> u64 {
        self.inputs
            .iter()
            .chain(&self.next_inputs)
            .map(|f| f.size)
            .sum()
    }
}

/// The shape of the tree the picker works with (a subset of `Options`).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub l0_compaction_trigger: usize,
    /// With the L0 tier on: its capacity (`Options::l0_tier_bytes`); L0 is then compacted
    /// progressively from half of it.
    pub l0_tier_bytes: Option<u64>,
    /// L0 tables at which L0 is compacted whatever their bytes (the tier's guard against
    /// many tiny tables, each of which a lookup may probe).
    pub l0_max_tables: usize,
    pub max_bytes_for_level_base: u64,
    pub level_size_multiplier: u64,
}

impl Shape {
    pub fn from_options(o: &crate::Options) -> Self {
        Shape {
            l0_compaction_trigger: o.l0_compaction_trigger,
            l0_tier_bytes: o.l0_tier_dir.is_some().then_some(o.l0_tier_bytes),
            l0_max_tables: o.l0_stop_writes_trigger,
            max_bytes_for_level_base: o.max_bytes_for_level_base,
            level_size_multiplier: o.level_size_multiplier,
        }
    }

    /// Target bytes of `level` (>= 1).
    pub fn target_bytes(&self, level: usize) -> u64 {
        let mut t = self.max_bytes_for_level_base;
        for _ in 1..level {
            t = t.saturating_mul(self.level_size_multiplier);
        }
        t
    }
}

/// What is already being compacted.
#[derive(Clone, Debug, Default)]
pub struct Busy {
    pub files: HashSet<u64>,
    /// (output level, smallest user key, largest user key) of running compactions.
    pub ranges: Vec<(usize, Vec<u8>, Vec<u8>)>,
}

impl Busy {
    fn range_taken(&self, level: usize, lo: &[u8], hi: &[u8]) -> bool {
        self.ranges
            .iter()
            .any(|(l, a, b)| *l == level && !(hi < a.as_slice() || lo > b.as_slice()))
    }

    fn any_busy(&self, files: &[Arc<FileMeta>]) -> bool {
        files.iter().any(|f| self.files.contains(&f.number))
    }
}

/// Compaction scores per level (the last level has none).
pub fn scores(v: &Version, shape: &Shape) -> Vec<(usize, f64)> {
    let last = v.levels.len().saturating_sub(1);
    let mut s: Vec<(usize, f64)> = (0..last)
        .map(|level| {
            let score = if level == 0 {
                l0_score(v, shape)
            } else {
                v.level_bytes(level) as f64 / shape.target_bytes(level) as f64
            };
            (level, score)
        })
        .collect();
    s.sort_by(|a, b| b.1.total_cmp(&a.1));
    s
}

/// L0's score: its SSTables against `l0_compaction_trigger`; with the tier on, the tier's
/// bytes against half its capacity, and all L0 tables against `l0_max_tables`.
fn l0_score(v: &Version, shape: &Shape) -> f64 {
    let (ssts, tier) = v.l0_usage();
    let ssts = ssts as f64 / shape.l0_compaction_trigger as f64;
    match shape.l0_tier_bytes {
        None => ssts,
        Some(cap) => {
            let bytes = tier as f64 / (cap / 2).max(1) as f64;
            let count = v.levels[0].len() as f64 / shape.l0_max_tables.max(1) as f64;
            ssts.max(bytes).max(count)
        }
    }
}

/// The most urgent compaction that can run now, if any level needs one.
pub fn pick(
    v: &Version,
    shape: &Shape,
    busy: &Busy,
    pointers: &[Vec<u8>],
) -> Option<CompactionPlan> {
    for (level, score) in scores(v, shape) {
        if score < 1.0 {
            break;
        }
        let plan = if level == 0 && shape.l0_tier_bytes.is_some() {
            pick_l0_progressive(v, busy)
        } else if level == 0 {
            pick_l0(v, busy)
        } else {
            pick_level(v, level, busy, pointers.get(level).map_or(&[][..], |p| p))
        };
        if plan.is_some() {
            return plan;
        }
    }
    None
}

fn pick_l0(v: &Version, busy: &Busy) -> Option<CompactionPlan> {
    let inputs = v.levels[0].clone();
    if inputs.is_empty() || busy.any_busy(&inputs) {
        return None;
    }
    let mut plan = plan_with_next(v, 0, inputs, busy)?;
    // Tier tables left in L0 after the tier was turned off are rewritten too.
    if plan.inputs.iter().any(|f| f.tier) {
        plan.trivial_move = false;
    }
    Some(plan)
}

/// An L0 table and every older L0 table that overlaps it or another one taken (the tables
/// that must move down with it: an older table left above a newer one's data would shadow
/// it), with their user-key range.
fn l0_closure(l0: &[Arc<FileMeta>], i: usize) -> (Vec<Arc<FileMeta>>, Vec<u8>, Vec<u8>) {
    let mut lo = user_key(&l0[i].smallest).to_vec();
    let mut hi = user_key(&l0[i].largest).to_vec();
    let mut set = vec![l0[i].clone()];
    // `l0` is newest first: everything after `i` is older.
    for f in &l0[i + 1..] {
        let (a, b) = (user_key(&f.smallest), user_key(&f.largest));
        if !(b < lo.as_slice() || a > hi.as_slice()) {
            if a < lo.as_slice() {
                lo = a.to_vec();
            }
            if b > hi.as_slice() {
                hi = b.to_vec();
            }
            set.push(f.clone());
        }
    }
    (set, lo, hi)
}

/// A candidate of progressive compaction: the tables that move together and their range.
struct Candidate {
    /// Smallest first: holds no overgrown table, overlaps L1, its newest file number, its
    /// bytes reversed (fuller first).
    rank: (bool, bool, u64, std::cmp::Reverse<u64>),
    set: Vec<Arc<FileMeta>>,
    lo: Vec<u8>,
    hi: Vec<u8>,
}

/// An L0 tier table with more entries than this is moved down before anything else (the
/// seed's "a space with too many entries is reclaimed at once"): a lookup in it searches a
/// bigger index and, with no Bloom filter, every lookup whose key falls in its range pays
/// that. 4M entries: a 64 MiB memtable of entries of 16 bytes or less.
pub const L0_TABLE_MAX_ENTRIES: u64 = 4 << 20;

/// The L0 tier's progressive compaction (the NVM seed): move part of L0 down instead of all
/// of it. Each L0 table with the older tables it must take along is a candidate; preferred
/// are, in order, candidates holding a table of more than [`L0_TABLE_MAX_ENTRIES`] entries,
/// candidates that overlap nothing in L1 (rewritten without a merge), the least recently
/// written (the smallest newest file number), and the fullest. A candidate that must merge
/// with L1 takes along every other candidate inside the L1 range it rewrites anyway (with
/// uniformly random keys that is all of L0, as without the tier).
fn pick_l0_progressive(v: &Version, busy: &Busy) -> Option<CompactionPlan> {
    let l0 = &v.levels[0];
    let mut best: Option<Candidate> = None;
    for i in 0..l0.len() {
        let (set, lo, hi) = l0_closure(l0, i);
        if busy.any_busy(&set) {
            continue;
        }
        let overlaps = !v.overlapping(1, Some(&lo), Some(&hi)).is_empty();
        let newest = set.iter().map(|f| f.number).max().unwrap_or(0);
        let bytes: u64 = set.iter().map(|f| f.size).sum();
        let overgrown = set.iter().any(|f| f.num_entries > L0_TABLE_MAX_ENTRIES);
        let rank = (!overgrown, overlaps, newest, std::cmp::Reverse(bytes));
        if best.as_ref().is_none_or(|b| rank < b.rank) {
            best = Some(Candidate { rank, set, lo, hi });
        }
    }
    let Candidate {
        rank: (_, overlaps, ..),
        mut set,
        lo,
        hi,
    } = best?;
    if overlaps {
        let next = v.overlapping(1, Some(&lo), Some(&hi));
        let (nlo, nhi) = key_range(&next).unwrap_or((lo.clone(), hi.clone()));
        let (rlo, rhi) = (lo.min(nlo), hi.max(nhi));
        for i in 0..l0.len() {
            if set.iter().any(|f| f.number == l0[i].number) {
                continue;
            }
            let (more, mlo, mhi) = l0_closure(l0, i);
            if mlo >= rlo && mhi <= rhi && !busy.any_busy(&more) {
                for f in more {
                    if !set.iter().any(|g| g.number == f.number) {
                        set.push(f);
                    }
                }
            }
        }
    }
    // Newest first, as L0 is kept.
    set.sort_by_key(|f| std::cmp::Reverse(f.number));
    let mut plan = plan_with_next(v, 0, set, busy)?;
    // An L0 tier table is rewritten as an SSTable: it never moves down as it is.
    if plan.inputs.iter().any(|f| f.tier) {
        plan.trivial_move = false;
    }
    Some(plan)
}

fn pick_level(v: &Version, level: usize, busy: &Busy, pointer: &[u8]) -> Option<CompactionPlan> {
    let files = &v.levels[level];
    // The pointer is the largest internal key of the last compaction out of this level.
    let pointer = user_key(pointer);
    let start = files.partition_point(|f| user_key(&f.largest) <= pointer);
    (0..files.len())
        .map(|i| (start + i) % files.len())
        .filter(|&i| !busy.files.contains(&files[i].number))
        .find_map(|i| plan_with_next(v, level, vec![files[i].clone()], busy))
}

/// The manual compaction (`compact_range`) of `level` over `[start, end]`: every table of the
/// level overlapping the range (every L0 table if any overlaps: L0 tables overlap each other,
/// and moving some down while an older overlapping one stays on top would let the older value
/// shadow the newer), plus what they overlap below. Manual compactions run alone, so nothing
/// is busy.
pub fn manual(
    v: &Version,
    level: usize,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<CompactionPlan> {
    let inputs = v.overlapping(level, start, end);
    if inputs.is_empty() {
        return None;
    }
    let inputs = if level == 0 {
        v.levels[0].clone()
    } else {
        inputs
    };
    let mut plan = plan_with_next(v, level, inputs, &Busy::default())?;
    if plan.inputs.iter().any(|f| f.tier) {
        plan.trivial_move = false;
    }
    Some(plan)
}

/// A manual compaction of the last level's tables overlapping `[start, end]` into the last
/// level itself: with a compaction filter, `compact_range` ends with it so that the filter
/// sees every record of the range (RocksDB's "bottommost level compaction if there is a
/// compaction filter"); without one it would only copy the tables.
pub fn manual_bottommost(
    v: &Version,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<CompactionPlan> {
    let last = v.levels.len().checked_sub(1)?;
    let inputs = v.overlapping(last, start, end);
    if inputs.is_empty() {
        return None;
    }
    Some(CompactionPlan {
        level: last,
        inputs,
        next_inputs: Vec::new(),
        output_level: last,
        trivial_move: false,
    })
}

/// Whether no two of `files` share a user key: then, overlapping nothing below, they can
/// all move down by a MANIFEST edit (sequential loads fill L0 with such tables; rewriting
/// them cost a fillseq of 16 KiB values a fifth of its time in stalls).
fn disjoint(files: &[Arc<FileMeta>]) -> bool {
    let mut ranges: Vec<(&[u8], &[u8])> = files
        .iter()
        .map(|f| (user_key(&f.smallest), user_key(&f.largest)))
        .collect();
    ranges.sort_unstable();
    ranges.windows(2).all(|w| w[0].1 < w[1].0)
}

/// Completes a plan with the overlapping tables of the next level, if nothing conflicts.
fn plan_with_next(
    v: &Version,
    level: usize,
    inputs: Vec<Arc<FileMeta>>,
    busy: &Busy,
) -> Option<CompactionPlan> {
    let (lo, hi) = key_range(&inputs)?;
    let next_inputs = v.overlapping(level + 1, Some(&lo), Some(&hi));
    if busy.any_busy(&next_inputs) {
        return None;
    }
    let plan = CompactionPlan {
        level,
        trivial_move: next_inputs.is_empty() && disjoint(&inputs),
        inputs,
        next_inputs,
        output_level: level + 1,
    };
    let (lo, hi) = plan.range();
    // Another compaction writing into either level over this range would race with us.
    if busy.range_taken(level + 1, &lo, &hi) || busy.range_taken(level, &lo, &hi) {
        return None;
    }
    Some(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use crate::version::VersionEdit;

    fn meta(n: u64, lo: &str, hi: &str, size: u64) -> FileMeta {
        FileMeta {
            number: n,
            size,
            smallest: make_internal_key(lo.as_bytes(), 1, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), 1, ValueKind::Value),
            num_entries: 1,
            ..Default::default()
        }
    }

    fn version(files: &[(u32, FileMeta)]) -> Version {
        Version::new(4).apply(&VersionEdit {
            new_files: files.to_vec(),
            ..Default::default()
        })
    }

    const SHAPE: Shape = Shape {
        l0_compaction_trigger: 2,
        l0_tier_bytes: None,
        l0_max_tables: 40,
        max_bytes_for_level_base: 100,
        level_size_multiplier: 10,
    };

    #[test]
    fn nothing_to_do_below_trigger() {
        let v = version(&[(0, meta(1, "a", "b", 10))]);
        assert!(pick(&v, &SHAPE, &Busy::default(), &[]).is_none());
    }

    #[test]
    fn l0_takes_all_l0_and_overlapping_l1() {
        let v = version(&[
            (0, meta(5, "c", "f", 10)),
            (0, meta(6, "a", "d", 10)),
            (1, meta(2, "a", "b", 10)),
            (1, meta(3, "e", "g", 10)),
            (1, meta(4, "x", "z", 10)),
        ]);
        let p = pick(&v, &SHAPE, &Busy::default(), &[]).unwrap();
        assert_eq!(p.level, 0);
        assert_eq!(p.inputs.len(), 2);
        let mut next: Vec<u64> = p.next_inputs.iter().map(|f| f.number).collect();
        next.sort();
        assert_eq!(next, vec![2, 3]);
        assert!(!p.trivial_move);
    }

    #[test]
    fn progressive_order_overgrown_then_no_overlap_then_oldest() {
        let tier = |n: u64, lo: &str, hi: &str, entries: u64| FileMeta {
            tier: true,
            num_entries: entries,
            ..meta(n, lo, hi, 10)
        };
        let shape = Shape {
            l0_tier_bytes: Some(20),
            ..SHAPE
        };
        // Three disjoint tier tables; "m".."n" overlaps L1.
        let base = [
            (0, tier(7, "a", "b", 5)),
            (0, tier(8, "m", "n", 5)),
            (0, tier(9, "x", "y", 5)),
            (1, meta(2, "m", "m", 10)),
        ];
        // No overlap first, then least recently written: 7.
        let p = pick(&version(&base), &shape, &Busy::default(), &[]).unwrap();
        assert_eq!(
            p.inputs.iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![7]
        );
        assert!(
            !p.trivial_move,
            "a tier table is rewritten, never moved as it is"
        );
        // An overgrown table goes first, even overlapping L1 and newer.
        let mut v = base.to_vec();
        v[1].1.num_entries = L0_TABLE_MAX_ENTRIES + 1;
        let p = pick(&version(&v), &shape, &Busy::default(), &[]).unwrap();
        assert_eq!(
            p.inputs.iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![8]
        );
        assert_eq!(p.next_inputs.len(), 1);
        // An older table overlapping a newer one moves with it.
        let v = [(0, tier(7, "a", "c", 5)), (0, tier(9, "b", "d", 5))];
        let busy = Busy {
            files: [7].into_iter().collect(),
            ..Busy::default()
        };
        assert!(pick(&version(&v), &shape, &busy, &[]).is_none());
        let p = pick(&version(&v), &shape, &Busy::default(), &[]).unwrap();
        assert_eq!(p.inputs.len(), 1, "the oldest alone: nothing older to take");
        assert_eq!(p.inputs[0].number, 7);
    }

    #[test]
    fn disjoint_l0_tables_over_nothing_move_down_together() {
        let v = version(&[(0, meta(5, "a", "c", 10)), (0, meta(6, "d", "f", 10))]);
        let p = pick(&v, &SHAPE, &Busy::default(), &[]).unwrap();
        assert_eq!(p.inputs.len(), 2);
        assert!(p.trivial_move);
        // Sharing a boundary key is overlapping.
        let v = version(&[(0, meta(5, "a", "d", 10)), (0, meta(6, "d", "f", 10))]);
        assert!(
            !pick(&v, &SHAPE, &Busy::default(), &[])
                .unwrap()
                .trivial_move
        );
        // Disjoint, but something below overlaps one of them.
        let v = version(&[
            (0, meta(5, "a", "c", 10)),
            (0, meta(6, "d", "f", 10)),
            (1, meta(2, "e", "e", 10)),
        ]);
        assert!(
            !pick(&v, &SHAPE, &Busy::default(), &[])
                .unwrap()
                .trivial_move
        );
    }

    #[test]
    fn busy_files_and_ranges_block_plans() {
        let v = version(&[(0, meta(5, "c", "f", 10)), (0, meta(6, "a", "d", 10))]);
        let mut busy = Busy::default();
        busy.files.insert(5);
        assert!(pick(&v, &SHAPE, &busy, &[]).is_none());
        let busy = Busy {
            files: HashSet::new(),
            ranges: vec![(1, b"e".to_vec(), b"k".to_vec())],
        };
        assert!(pick(&v, &SHAPE, &busy, &[]).is_none());
    }

    #[test]
    fn oversized_level_moves_one_file_round_robin() {
        let v = version(&[
            (1, meta(2, "a", "b", 60)),
            (1, meta(3, "c", "d", 60)),
            (2, meta(4, "c", "c", 10)),
        ]);
        let p = pick(&v, &SHAPE, &Busy::default(), &[]).unwrap();
        assert_eq!((p.level, p.inputs[0].number), (1, 2));
        assert!(p.trivial_move);
        let pointer = make_internal_key(b"b", 1, ValueKind::Value);
        let p = pick(&v, &SHAPE, &Busy::default(), &[vec![], pointer]).unwrap();
        assert_eq!(p.inputs[0].number, 3);
        assert_eq!(p.next_inputs[0].number, 4);
        assert!(!p.trivial_move);
    }

    #[test]
    fn manual_l0_takes_every_l0_table() {
        let v = version(&[
            (0, meta(5, "a", "d", 10)),
            (0, meta(6, "c", "f", 10)),
            (1, meta(2, "e", "g", 10)),
        ]);
        let p = manual(&v, 0, Some(b"e"), Some(b"f")).unwrap();
        assert_eq!(
            p.inputs.len(),
            2,
            "the older overlapping L0 table comes along"
        );
        assert_eq!(p.next_inputs.len(), 1);
        assert!(manual(&v, 1, Some(b"x"), None).is_none());
    }

    #[test]
    fn target_bytes_grow_by_ratio() {
        assert_eq!(SHAPE.target_bytes(1), 100);
        assert_eq!(SHAPE.target_bytes(3), 10_000);
    }
}
