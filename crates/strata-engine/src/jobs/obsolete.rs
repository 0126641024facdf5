//! Obsolete files: which files of the directory nothing needs any more, and their deletion
//! (value-log files are GC's, `jobs/gc.rs`). Lifetimes: `docs/design.md` §2.

use crate::filename::{self, FileKind};
use crate::state::{DbInner, DbState};

impl DbInner {
    /// Files of the directory that nothing needs any more. Call with `state` held.
    pub(crate) fn collect_obsolete(&self, st: &DbState) -> Vec<(FileKind, u64)> {
        let Ok(names) = self.fs.list(&self.dir) else {
            return Vec::new();
        };
        let live = st.versions.live_tables();
        let min_wal = st
            .imms
            .first()
            .map_or(st.mem.wal_number(), |m| m.wal_number())
            .min(st.versions.log_number);
        // The L0 tier's directory holds only its tables.
        let tier_names = self
            .tables
            .tier()
            .and_then(|t| t.on_disk().ok())
            .unwrap_or_default();
        names
            .iter()
            .filter_map(|n| filename::parse(n))
            .filter(|(kind, _)| *kind != FileKind::L0Table)
            .chain(tier_names.into_iter().map(|n| (FileKind::L0Table, n)))
            .filter(|(kind, n)| match kind {
                FileKind::Table | FileKind::L0Table => {
                    !live.contains(n) && !st.pending_outputs.contains(n)
                }
                FileKind::Wal => *n < min_wal,
                FileKind::Manifest => *n != st.versions.manifest_number(),
                FileKind::Temp => !st.pending_outputs.contains(n),
                // Value-log files are GC's (`jobs/gc.rs`).
                FileKind::Current | FileKind::Lock | FileKind::Vlog => false,
            })
            .collect()
    }

    pub(crate) fn delete_files(&self, files: Vec<(FileKind, u64)>) {
        for (kind, n) in files {
            let path = match kind {
                FileKind::Table => {
                    self.tables.evict(n);
                    filename::table(&self.dir, n)
                }
                FileKind::Wal => filename::wal(&self.dir, n),
                FileKind::Manifest => filename::manifest(&self.dir, n),
                FileKind::Temp => filename::temp(&self.dir, n),
                FileKind::L0Table => {
                    if let Some(t) = self.tables.tier() {
                        t.remove(n);
                    }
                    continue;
                }
                _ => continue,
            };
            // A file that cannot be removed is retried at the next cleanup.
            let _ = self.fs.remove(&path);
        }
    }
}
