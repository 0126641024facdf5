//! Versions: which tables are live on each level.
//!
//! A [`Version`] is immutable; every flush or compaction produces a new one by applying a
//! [`VersionEdit`] (`set.rs` persists the edits in the MANIFEST). L0 tables may overlap and
//! are kept newest first; tables of L1 and deeper do not overlap and are kept sorted by key.

pub mod edit;
pub mod set;

pub use edit::{FileMeta, VersionEdit};
pub use set::VersionSet;

use crate::key::{compare_internal, user_key};
use std::cmp::Ordering;
use std::sync::Arc;

/// The live tables, level by level.
#[derive(Clone, Debug, Default)]
pub struct Version {
    pub levels: Vec<Vec<Arc<FileMeta>>>,
}

impl Version {
    pub fn new(num_levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); num_levels],
        }
    }

    /// Applies an edit, returning the new version. Keeps L0 newest first (by file number,
    /// which grows with time) and deeper levels sorted by smallest key.
    pub fn apply(&self, edit: &VersionEdit) -> Version {
        let mut v = self.clone();
        for (level, number) in &edit.deleted_files {
            if let Some(files) = v.levels.get_mut(*level as usize) {
                files.retain(|f| f.number != *number);
            }
        }
        for (level, meta) in &edit.new_files {
            let level = *level as usize;
            if level >= v.levels.len() {
                v.levels.resize(level + 1, Vec::new());
            }
            v.levels[level].push(Arc::new(meta.clone()));
        }
        for (i, files) in v.levels.iter_mut().enumerate() {
            if i == 0 {
                files.sort_by_key(|f| std::cmp::Reverse(f.number));
            } else {
                files.sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
            }
        }
        v
    }

    /// Bytes of the L0 tier's tables (`FileMeta::tier`), with the log bytes they point at that
    /// compaction will copy (`FileMeta::log_bytes`).
    pub fn tier_bytes(&self) -> u64 {
        self.l0_usage().1
    }

    /// L0 in one pass: how many of its tables are SSTables, and the tier's bytes
    /// ([`Version::tier_bytes`]).
    pub fn l0_usage(&self) -> (usize, u64) {
        let l0 = self.levels.first().map_or(&[][..], |f| f.as_slice());
        l0.iter().fold((0, 0), |(ssts, tier), m| {
            if m.tier {
                (ssts, tier + m.size + m.log_bytes)
            } else {
                (ssts + 1, tier)
            }
        })
    }

    /// Total bytes of the tables on `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels
            .get(level)
            .map_or(0, |f| f.iter().map(|m| m.size).sum())
    }

    /// Every table number in this version.
    pub fn file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.levels.iter().flatten().map(|f| f.number)
    }

    /// For a sorted level (>= 1): index of the only table that may hold `ikey`.
    pub fn find_file(files: &[Arc<FileMeta>], ikey: &[u8]) -> Option<usize> {
        let i = files.partition_point(|f| compare_internal(&f.largest, ikey) == Ordering::Less);
        if i < files.len() && user_key(&files[i].smallest) <= user_key(ikey) {
            Some(i)
        } else {
            None
        }
    }

    /// Tables of `level` whose user-key range intersects `[begin, end]` (None = unbounded).
    pub fn overlapping(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        self.levels
            .get(level)
            .map(|files| {
                files
                    .iter()
                    .filter(|f| {
                        let lo = user_key(&f.smallest);
                        let hi = user_key(&f.largest);
                        !(end.is_some_and(|e| lo > e) || begin.is_some_and(|b| hi < b))
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Checks the level invariants (programmer errors or a corrupt MANIFEST): deeper levels
    /// sorted and non-overlapping. Returns a description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            for w in files.windows(2) {
                if user_key(&w[0].largest) >= user_key(&w[1].smallest) {
                    return Err(format!(
                        "level {level}: tables {} and {} overlap",
                        w[0].number, w[1].number
                    ));
                }
            }
        }
        for f in self.levels.iter().flatten() {
            if compare_internal(&f.smallest, &f.largest) == Ordering::Greater {
                return Err(format!("table {}: smallest key above largest", f.number));
            }
        }
        Ok(())
    }
}

/// The user-key range `[smallest, largest]` covered by `files`.
pub fn key_range(files: &[Arc<FileMeta>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut lo: Option<&[u8]> = None;
    let mut hi: Option<&[u8]> = None;
    for f in files {
        let s = user_key(&f.smallest);
        let l = user_key(&f.largest);
        if lo.is_none_or(|x| s < x) {
            lo = Some(s);
        }
        if hi.is_none_or(|x| l > x) {
            hi = Some(l);
        }
    }
    Some((lo?.to_vec(), hi?.to_vec()))
}
