//! A full sync's RDB, from the spooled file into the store, in two passes over the file:
//! [`check`] reads it whole and writes nothing (so a corrupt or unsupported file costs
//! nothing), then [`load`] writes the file's keys in batches into a new generation of the
//! keyspace: physical databases that no logical database maps to (`dbmap.rs`). Clients read
//! the old dataset meanwhile; the link then switches every logical database to the new
//! generation in one write (`link.rs`, design §13.25).

use crate::cmd::dump::{put_value, Limits};
use crate::cmd::Ctx;
use crate::rdb::file::{FileReader, Item};
use crate::store::Writes;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// Items read between two calls of the caller's `tick`.
const TICK_ITEMS: u64 = 1024;
/// Why a check or load ended early: `tick` said stop.
pub const STOPPED: &str = "replication was reconfigured during the load";
/// Keys written per store batch (of one shard).
const BATCH_KEYS: usize = 256;
/// Bytes of values per store batch, roughly (a batch ends at whichever comes first).
const BATCH_BYTES: usize = 4 << 20;

/// What a file held.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub keys: u64,
    pub functions: u64,
    /// The aux field `repl-stream-db`: the database the master's stream has selected.
    pub stream_db: Option<u8>,
}

fn open(path: &Path) -> Result<FileReader<BufReader<File>>, String> {
    let f = File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    FileReader::open(BufReader::with_capacity(1 << 16, f)).map_err(|e| e.to_string())
}

/// Reads the whole file, writing nothing: every value decodes, every database number is
/// below `databases`, the trailer is right. `tick` is called every [`TICK_ITEMS`] items
/// (the link's keepalive); false stops the check.
pub fn check(
    path: &Path,
    databases: usize,
    tick: &mut dyn FnMut() -> bool,
) -> Result<Counts, String> {
    let mut r = open(path)?;
    let mut n = Counts::default();
    let mut items = 0u64;
    while let Some(item) = r.next_item().map_err(|e| e.to_string())? {
        items += 1;
        if items.is_multiple_of(TICK_ITEMS) && !tick() {
            return Err(STOPPED.into());
        }
        match item {
            Item::SelectDb(db) if db >= databases as u64 => {
                return Err(format!(
                    "the RDB selects database {db}; this server has {databases} (databases)"
                ));
            }
            Item::Key(_) => n.keys += 1,
            Item::Aux(k, v) if k.as_slice() == b"repl-stream-db" => {
                n.stream_db = std::str::from_utf8(&v).ok().and_then(|d| d.parse().ok());
            }
            Item::Function(_) => n.functions += 1,
            _ => {}
        }
    }
    Ok(n)
}

/// Loads the file (checked by [`check`] first) into `targets`, physical databases that no
/// logical database maps to (`dbmap::spare`), one per logical database: clients keep
/// reading the old dataset meanwhile. `ctx` is the master link's client; `tick` is called
/// before each batch (the link's keepalive) and says whether the link is still wanted. The
/// file's function libraries are compiled into a registry of their own and returned as its
/// payload. Stopped or failed, the targets hold garbage that nothing reads (`garbage.rs`
/// cleans it); the old dataset is as it was.
pub fn load(
    ctx: &mut Ctx<'_>,
    path: &Path,
    targets: &[u8],
    tick: &mut dyn FnMut() -> bool,
) -> Result<(Counts, Vec<u8>), String> {
    let store = ctx.tx;
    let fail = |e: strata_engine::Error| format!("writing the loaded data: {e}");
    // Left over by a load that stopped (the cleaner skips databases being loaded).
    for &t in targets {
        store.flush_db(t).map_err(fail)?;
    }
    let functions = crate::scripting::functions::Functions::open(None)?;
    let limits = Limits::of(ctx);
    let mut r = open(path)?;
    let mut n = Counts::default();
    // One open batch per shard. A batch of one shard is an ordinary unsynced write; a batch
    // spanning shards would be a cross-shard write, which gets a global sequence number and
    // an fsync of every shard it touches (design §12): with 256 keys spread over all shards,
    // that fsync per batch was most of a full sync's time (34k keys/s against redis-server's
    // own load of 1M keys/s). Atomicity across batches is not needed here: nothing reads
    // the targets until the switch, whose write is synced on every shard (it stores the
    // position in each), so every batch before it is durable with it.
    let shards = store.db().shard_count();
    let mut open_batches: Vec<(Writes, usize, usize)> =
        (0..shards).map(|_| (Writes::new(), 0, 0)).collect();
    while let Some(item) = r.next_item().map_err(|e| e.to_string())? {
        match item {
            Item::Key(e) => {
                // The file names logical databases ([`check`] bounded them).
                let db = usize::try_from(e.db)
                    .ok()
                    .and_then(|l| targets.get(l).copied())
                    .ok_or_else(|| format!("database {}", e.db))?;
                // A key's records (metadata and members) all live in its metadata's shard.
                let shard = store.db().shard_of(&crate::keys::meta_key(db, &e.key));
                let (w, in_batch, bytes) = &mut open_batches[shard];
                *bytes += e.key.len() + value_bytes(&e.value);
                put_value(
                    store,
                    w,
                    db,
                    &e.key,
                    e.value,
                    e.expire_ms.unwrap_or(0),
                    &limits,
                );
                n.keys += 1;
                *in_batch += 1;
                if *in_batch >= BATCH_KEYS || *bytes >= BATCH_BYTES {
                    if !tick() {
                        return Err(STOPPED.into());
                    }
                    store.apply(std::mem::take(w)).map_err(fail)?;
                    (*in_batch, *bytes) = (0, 0);
                }
            }
            Item::Function(code) => {
                functions.load(code.into(), true, &|_| Ok(()))?;
                n.functions += 1;
            }
            _ => {}
        }
    }
    for (w, in_batch, _) in open_batches {
        if in_batch > 0 {
            store.apply(w).map_err(fail)?;
        }
    }
    Ok((n, functions.payload()))
}

/// A value's size, roughly (for batching).
fn value_bytes(v: &crate::rdb::Value) -> usize {
    use crate::rdb::Value;
    match v {
        Value::String(s) => s.len(),
        Value::List(l) | Value::Set(l) => l.iter().map(|e| e.len() + 8).sum(),
        Value::ZSet(z) => z.iter().map(|(m, _)| m.len() + 16).sum(),
        Value::Hash(h) => h.iter().map(|(f, v)| f.len() + v.len() + 8).sum(),
        Value::Stream(s) => s
            .nodes
            .iter()
            .flat_map(|n| &n.entries)
            .map(|(_, f)| 16 + f.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>())
            .sum(),
    }
}
