//! Strata's storage engine: one LSM-tree instance.
//!
//! Write path: [`WriteBatch`] → group commit (`write.rs`) → WAL (`log/`) → memtable
//! (`memtable.rs`) → flush (`db.rs`, background) → L0 tables (`sst/`) → leveled compaction
//! (`compaction/`). Read path: `get.rs`, `multi_get.rs`, `iter/`, `table_cache.rs`.
//! Recovery: `recovery.rs`, `version/`. All file I/O goes through [`io::Fs`].
//! Key-value separation (WiscKey): `vlog/` — values at or above
//! `Options::sep_threshold_bytes` live in the value log, which is then also the WAL; GC in
//! `vlog/gc.rs`. The byte-addressable L0 tier's table format (mapped tables with a learned
//! index; not yet used by flush): `l0tier/`. Protocols and invariants (files and their
//! lifetimes, group commit, recovery, compaction, value-log GC, io_uring): `docs/design.md`.
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
pub use options::{Compression, Options, ReadOptions, Snapshot, WriteOptions};
