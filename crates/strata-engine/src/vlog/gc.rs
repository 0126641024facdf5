//! Value-log garbage collection's bookkeeping and picker: the GC state kept under the
//! database's state lock ([`GcState`]), what a `Db::gc` call reports ([`GcReport`]), and a
//! pure picker over per-file figures ([`pick`]). The job that collects a file (copy the
//! current entries through the write queue, sync, record the file obsolete, retire it once no
//! snapshot needs it) is `jobs/gc.rs`. Steps, what a crash after each leaves, snapshots,
//! verification scans and lock order: `docs/design.md` §9; MANIFEST fields:
//! `docs/format/vlog.md` §5, §7.

use crate::key::SeqNo;
use std::collections::BTreeSet;

/// GC bookkeeping kept under the database's state lock.
#[derive(Default, Debug)]
pub struct GcState {
    /// Files recorded obsolete, waiting for every snapshot older than the sequence number.
    pub pending: Vec<(u64, SeqNo)>,
    /// Files whose collection met corruption: not picked again until reopen.
    pub failed: BTreeSet<u64>,
    /// The last background GC error (GC errors do not poison the database).
    pub last_error: Option<String>,
    /// Files whose live bytes a verification scan measured in the current round.
    pub verified: BTreeSet<u64>,
    /// The figures may understate garbage (a flush skipped snapshot-visible values, or an
    /// open replayed the log): background GC measures files until a round is complete.
    pub needs_verify: bool,
}

/// What one `Db::gc` call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Files emptied and recorded obsolete.
    pub files_collected: u64,
    /// Of those, and earlier ones, files still kept for a live snapshot.
    pub files_pending: u64,
    /// Files removed from the directory.
    pub files_deleted: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub values_relocated: u64,
}

impl std::fmt::Display for GcReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "collected {} value-log files ({} deleted, {} waiting for snapshots); read {:.1} MiB, rewrote {} values ({:.1} MiB)",
            self.files_collected,
            self.files_deleted,
            self.files_pending,
            self.bytes_read as f64 / (1 << 20) as f64,
            self.values_relocated,
            self.bytes_written as f64 / (1 << 20) as f64
        )
    }
}

/// One value-log file as the picker sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileGarbage {
    pub number: u64,
    pub size: u64,
    /// Bytes that tables point at.
    pub live: u64,
}

impl FileGarbage {
    pub fn garbage(&self) -> u64 {
        self.size.saturating_sub(self.live)
    }
}

/// The file to collect: among files numbered below `head_file` (the durable head's file)
/// whose garbage is at least `min_ratio` of their size, the one with the most garbage
/// bytes (the oldest on ties).
pub fn pick(files: &[FileGarbage], head_file: u64, min_ratio: f64) -> Option<u64> {
    files
        .iter()
        .filter(|f| f.number < head_file)
        .filter(|f| f.size == 0 || f.garbage() as f64 >= min_ratio * f.size as f64)
        .max_by(|a, b| a.garbage().cmp(&b.garbage()).then(b.number.cmp(&a.number)))
        .map(|f| f.number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(number: u64, size: u64, live: u64) -> FileGarbage {
        FileGarbage { number, size, live }
    }

    #[test]
    fn picks_most_garbage_below_the_head() {
        let files = [f(1, 100, 90), f(2, 100, 10), f(3, 200, 60), f(9, 1000, 0)];
        // File 9 is at or above the head: never.
        assert_eq!(pick(&files, 9, 0.5), Some(3));
        assert_eq!(pick(&files, 3, 0.5), Some(2));
        assert_eq!(pick(&files, 10, 0.5), Some(9));
        assert_eq!(pick(&files, 2, 0.5), None);
        assert_eq!(pick(&files, 2, 0.05), Some(1));
        assert_eq!(pick(&[], 5, 0.0), None);
    }

    #[test]
    fn ties_go_to_the_oldest_and_live_above_size_is_no_garbage() {
        assert_eq!(pick(&[f(5, 100, 0), f(4, 100, 0)], 9, 0.5), Some(4));
        assert_eq!(pick(&[f(5, 100, 500)], 9, 0.1), None);
        assert_eq!(pick(&[f(5, 100, 500)], 9, 0.0), Some(5));
    }
}
