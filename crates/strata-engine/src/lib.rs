//! Strata's storage engine: one LSM-tree instance.
//!
//! Layout (no two of the modules above the building blocks import each other; the shared types
//! are in `state.rs`, which imports none of them but `recovery.rs`'s `RecoveryInfo`):
//! - `db.rs`: the public API ([`Db`]) and `open`; `checkpoint.rs`, `check.rs` (offline
//!   verification) and `stats_report.rs` ([`Stats`]) beside it.
//! - `write.rs` (the write path's engine side: applying to the memtable, making room,
//!   exclusive writes), `ingest.rs` (sorted runs written as tables and installed in one
//!   edit, outside the write path), `get.rs` and `multi_get.rs` (point reads), `jobs/` (background work:
//!   flush, compaction install, obsolete-file deletion, value-log GC), `recovery.rs` (open's
//!   replay of the logs).
//! - `state.rs`: the shared state all of the above work on (`DbInner`, `DbState`,
//!   `SuperVersion`) and the commit log the engine gives the commit pipeline.
//! - The formats and building blocks below them: `commit/` (group commit), `log/` (WAL),
//!   `memtable.rs`, `sst/` (tables), `l0tier/` (the byte-addressable L0 tier's mapped tables
//!   with a learned index, `pgm.rs`), `compaction/` (picking and running jobs, the filter),
//!   `version/` (versions and the MANIFEST), `vlog/` (key-value separation, WiscKey: the
//!   value log's format, reader, writer, its MANIFEST state and GC's bookkeeping and picker),
//!   `iter/`, `table_cache.rs`, `cache.rs`; all file I/O goes through [`io::Fs`].
//!
//! Write path: [`WriteBatch`] → group commit (`commit/`, `write.rs`) → WAL (`log/`), or with
//! key-value separation the value log, which is then also the WAL (values at or above
//! `Options::sep_threshold_bytes` live there) → memtable → flush (`jobs/flush.rs`) → L0 tables
//! → leveled compaction (`jobs/compact.rs`, `compaction/`). Protocols and invariants (files and
//! their lifetimes, group commit, recovery, compaction, value-log GC, io_uring):
//! `docs/design.md`.
//!
//! ```no_run
//! use strata_engine::{Db, Options, ReadOptions};
//! let db = Db::open("/tmp/strata-example", Options::default())?;
//! db.put(b"hello", b"world")?;
//! assert_eq!(db.get(b"hello")?, Some(b"world".to_vec()));
//! let mut it = db.iter(&ReadOptions::default())?;
//! it.seek_to_first();
//! while it.valid() {
//!     println!("{:?} = {:?}", it.key(), it.value());
//!     it.next();
//! }
//! it.status()?;
//! # Ok::<(), strata_engine::Error>(())
//! ```

// Unsafe code is denied everywhere except `io::uring` (io_uring submission: the kernel writes
// into buffers the compiler cannot see) and the L0 tier's one `mmap` call
// (`l0tier::table::map_file`), which allow it locally with a `// SAFETY:` comment on every
// block.
#![deny(unsafe_code)]

pub mod batch;
pub(crate) mod cache;
mod check;
mod checkpoint;
mod commit;
pub mod compaction;
mod db;
pub(crate) mod error;
#[doc(hidden)]
pub mod filename;
mod get;
mod ingest;
pub mod io;
pub(crate) mod iter;
mod jobs;
pub mod key;
pub mod l0tier;
pub mod log;
pub mod memtable;
mod multi_get;
pub mod options;
pub mod pgm;
mod recovery;
pub mod sst;
mod state;
mod stats;
mod stats_report;
pub(crate) mod table_cache;
pub(crate) mod varint;
pub(crate) mod version;
pub mod vlog;
mod write;

pub use batch::WriteBatch;
pub use db::{CheckReport, Db, DbIterator, GcReport, RecoveryInfo, Stats};
pub use error::{Error, Result};
pub use ingest::{Ingest, IngestSummary};
pub use log::LogRecovery;
pub use options::{Compression, Options, ReadOptions, Snapshot, WriteOptions};
