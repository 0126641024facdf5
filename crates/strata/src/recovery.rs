//! Recovery of cross-shard batches at open (p2KVS §Crash Consistency).
//!
//! Each engine instance first recovers by itself (WAL replay). Then, for every shard, the undo
//! records (`undo.rs`) are read: a record whose GSN is above the last committed GSN of the
//! transaction log belongs to a batch that was never acknowledged; its part is rolled back by
//! writing the before-images, newest GSN first, each together with the deletion of its undo
//! record in one synced engine write (so a crash during recovery leaves either the record or
//! its effect, and the next open finishes the job). Records at or below the committed GSN are
//! just deleted.

use crate::engine::{Engine, EngineBatch, EngineIter};
use crate::undo::{parse_undo_key, undo_key, UndoRecord, UNDO_END, UNDO_PREFIX};
use std::path::Path;
use strata_engine::{Error, Result};

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Last committed GSN found in the transaction log.
    pub committed_gsn: u64,
    /// Parts rolled back (GSN above the committed one), as (shard, GSN).
    pub rolled_back: Vec<(usize, u64)>,
    /// Undo records of committed batches removed.
    pub cleaned: usize,
    /// Largest GSN seen anywhere (the next one handed out is above it).
    pub max_gsn: u64,
}

/// Rolls back uncommitted parts and removes stale undo records in every shard.
pub(crate) fn recover<E: Engine>(
    engines: &[std::sync::Arc<E>],
    committed: u64,
    root: &Path,
) -> Result<RecoveryReport> {
    let mut report = RecoveryReport {
        committed_gsn: committed,
        max_gsn: committed,
        ..RecoveryReport::default()
    };
    for (shard, engine) in engines.iter().enumerate() {
        let file = crate::meta::shard_dir(root, shard);
        let mut records: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut it = engine.iter(None, Some(UNDO_PREFIX), Some(UNDO_END))?;
        it.seek(UNDO_PREFIX);
        while it.valid() {
            let gsn = parse_undo_key(it.key()).ok_or_else(|| {
                Error::corruption(&file, 0, "malformed undo key in the system range")
            })?;
            records.push((gsn, it.value().to_vec()));
            it.next();
        }
        it.status()?;
        drop(it);
        records.sort_by_key(|r| std::cmp::Reverse(r.0));
        let mut cleanup = E::Batch::default();
        for (gsn, value) in records {
            report.max_gsn = report.max_gsn.max(gsn);
            if gsn <= committed {
                cleanup.delete(&undo_key(gsn));
                report.cleaned += 1;
                continue;
            }
            let rec = UndoRecord::decode(&value, &file)?;
            if rec.gsn != gsn {
                return Err(Error::corruption(
                    &file,
                    0,
                    format!("undo record under GSN {gsn} says GSN {}", rec.gsn),
                ));
            }
            let mut b = E::Batch::default();
            for (k, before) in &rec.before {
                match before {
                    Some(v) => b.put(k, v),
                    None => b.delete(k),
                }
            }
            b.delete(&undo_key(gsn));
            engine.write(b, true)?;
            report.rolled_back.push((shard, gsn));
        }
        if !cleanup.is_empty() {
            engine.write(cleanup, true)?;
        }
    }
    Ok(report)
}
