//! Strata's public embedded database: a p2KVS front over several engine instances.
//!
//! **Horizontal dimension.** The key space is hash-partitioned (`routing.rs`:
//! `xxh3_64(key) mod shards`, persisted with the shard count in the `SHARDS` file) over
//! `shards` independent engine instances, each with its own worker thread.
//!
//! **Vertical dimension.** User threads route and enqueue on the owning shard's bounded
//! queue, then wait (sync API) or go on (async API: [`Pending`] futures and callbacks). A
//! worker (`worker.rs`) batches opportunistically: consecutive writes become one engine
//! write, consecutive reads one `multi_get`, without ever waiting for more to arrive. When
//! nothing is queued in the shard, reads and single-shard writes of the blocking API run in
//! the caller's thread instead (`Options::direct_reads`, `Options::direct_writes`): the
//! engine's own commit pipeline already takes concurrent writers, and the hand-off costs two
//! thread switches.
//!
//! **Cross-shard atomicity.** A [`WriteBatch`] spanning shards gets a global sequence number;
//! each shard applies its part with an undo record; a commit record is made durable in the
//! transaction log (`txlog.rs`); recovery (`recovery.rs`) rolls back every part above the
//! last committed GSN. Snapshots are cuts across all shards (`coord.rs`).
//!
//! **Portability.** The front is generic over [`Engine`]: [`StrataEngine`] (the default,
//! [`Db`]) and RocksDB (`rocks::RocksEngine`, cargo feature `rocksdb`).
//!
//! The protocols and their invariants: `docs/design.md` §11 (shards, workers, batching,
//! async API, direct reads, snapshots) and §12 (cross-shard transactions).
//!
//! ```no_run
//! use strata::{Db, Options, ScanMode, WriteBatch};
//! let db = Db::open("/tmp/strata-sharded", Options::default())?;
//! db.put(b"user:1", b"alice")?;
//! assert_eq!(db.get(b"user:1")?, Some(b"alice".to_vec()));
//! let mut b = WriteBatch::new();
//! b.put(b"user:2", b"bob").delete(b"user:1");
//! db.write(b)?; // atomic even if the keys live in different shards
//! db.put_async(b"user:3", b"carol", |r| r.expect("put failed"));
//! for (k, v) in db.scan(b"user:", 10, ScanMode::Merged)? {
//!     println!("{k:?} = {v:?}");
//! }
//! db.close()?;
//! # Ok::<(), strata::Error>(())
//! ```
//!
//! Maintenance: [`ShardedDb::check`] verifies a closed database (every shard and the
//! transaction log), [`ShardedDb::gc`] runs value-log garbage collection on every shard.
//!
//! Files in the database directory: `SHARDS` and `TXLOG` (`docs/format/shards.md`), `LOCK`,
//! and `shard-000/`, `shard-001/`, ... each an engine instance.
//!
//! Reserved keys: keys starting with the 11 bytes `ff ff ff ff 's' 't' 'r' 'a' 't' 'a' 00`
//! hold the cross-shard transaction records; writing or reading them fails with
//! [`Error::InvalidArgument`] and iterators skip them.

#![forbid(unsafe_code)]

mod batch;
mod check;
mod coord;
mod db;
pub mod engine;
mod exec;
mod held;
pub mod hot;
mod iter;
pub mod meta;
mod options;
mod recovery;
mod reply;
mod request;
#[cfg(feature = "rocksdb")]
pub mod rocks;
pub mod routing;
mod stats;
pub mod txlog;
pub mod undo;
mod worker;

pub use batch::WriteBatch;
pub use check::ShardedCheckReport;
pub use db::{KvPairs, ShardedDb, Snapshot};
pub use engine::{Engine, EngineBatch, EngineIter, EngineMemory, PartsInDoubt, StrataEngine};
pub use exec::{ExecFn, ShardTxn};
pub use held::{Committed, HeldShards};
pub use hot::HotStats;
pub use iter::DbIter;
pub use options::{default_shards, IterOptions, Options, ScanMode, WriteOptions};
pub use recovery::RecoveryReport;
pub use reply::{Callback, Pending};
pub use routing::Routing;
pub use stats::BatchStats;
pub use strata_engine::{Error, Result};

/// The sharded database over Strata's engine.
pub type Db = ShardedDb<StrataEngine>;

/// Options of [`Db`]; `engine` holds each shard's [`strata_engine::Options`].
pub type DbOptions = Options<strata_engine::Options>;
