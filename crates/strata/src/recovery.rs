//! Recovery of cross-shard batches at open (p2KVS §Crash Consistency): after every engine
//! instance has recovered by itself, each undo record above the transaction log's committed GSN
//! is rolled back, newest GSN first, in one synced engine write with the deletion of the record;
//! records at or below it are deleted. Why this restores the committed prefix and survives a
//! crash during recovery: `docs/design.md` §12.3.

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
