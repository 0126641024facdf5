//! The master's side of a Strata-to-Strata full sync: the cut's snapshot written as a
//! snapshot stream (`repl/frames.rs`, `docs/format/snapshot-stream.md`) instead of an RDB.
//!
//! The stream carries the store's own records (metadata, members and score-index records:
//! `docs/format/redis-keys.md`) as they are, one shard at a time in key order, so neither
//! side encodes or decodes a value: the master copies what each shard's snapshot iterator
//! yields, the replica routes and ingests it (`replica/ship.rs`). The one rewrite is a
//! record's first byte, its physical database, which becomes the logical database it holds
//! (the replica maps it again onto its own new generation). Server records (`0xfe ...`:
//! the database map, replication positions, fsync marks) are not sent, and neither are the
//! physical databases no logical database below `databases` maps to (an old generation
//! being cleaned); the function libraries go in a FUNCTIONS frame, as the RDB carries them.

use super::frames::{FrameWriter, Start, Totals};
use crate::keys::SERVER_PREFIX;
use std::io::Write;
use strata::{EngineIter, IterOptions};

/// Writes `snap` as a snapshot stream to `out`: logical databases `0..databases`, with
/// `stream_db` in the START frame.
pub fn write_stream<E: strata::Engine, W: Write>(
    snap: &strata::Snapshot<'_, E>,
    databases: usize,
    stream_db: u8,
    out: W,
) -> Result<Totals, String> {
    let map = crate::dbmap::DbMap::decode(
        snap.get(&crate::dbmap::record_key())
            .map_err(|e| e.to_string())?
            .as_deref(),
    )?;
    let io = |e: std::io::Error| format!("writing the snapshot stream: {e}");
    let shards = snap.shard_count();
    let start = Start {
        stream_db,
        shards: shards as u32,
    };
    let mut w = FrameWriter::new(out, &start).map_err(io)?;
    if let Some(f) = snap
        .get(&crate::cmd::functions::record_key())
        .map_err(|e| e.to_string())?
    {
        w.functions(&f).map_err(io)?;
    }
    let databases = databases.min(usize::from(SERVER_PREFIX)) as u8;
    let opts = IterOptions {
        lower_bound: None,
        upper_bound: Some(vec![SERVER_PREFIX]),
    };
    let mut key = Vec::new();
    for shard in 0..shards {
        let mut it = snap.shard_iter(shard, &opts).map_err(|e| e.to_string())?;
        // Logical order, so that each shard's records ascend in the stream's keys.
        for logical in 0..databases {
            let physical = map.physical(logical);
            it.seek(&[physical]);
            while it.valid() && it.key().first() == Some(&physical) {
                key.clear();
                key.push(logical);
                key.extend_from_slice(&it.key()[1..]);
                w.record(shard as u32, &key, it.value()).map_err(io)?;
                it.next();
            }
            it.status().map_err(|e| e.to_string())?;
        }
    }
    w.finish().map(|(_, t)| t).map_err(io)
}
