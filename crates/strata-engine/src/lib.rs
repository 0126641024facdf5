//! Strata's storage engine: one LSM-tree instance.
//!
//! Write path: [`WriteBatch`] → group commit (`write.rs`) → WAL (`log/`) → memtable
//! (`memtable.rs`) → flush (`flush.rs`) → L0 tables (`sst/`) → leveled compaction
//! (`compaction/`). Read path: `get.rs`, `multi_get.rs`, `iter/`, `table_cache.rs`.
//! All file I/O goes through [`io::Fs`].

#![forbid(unsafe_code)]

pub mod batch;
pub mod cache;
pub mod db;
pub mod error;
pub mod io;
pub mod iter;
pub mod key;
pub mod log;
pub mod options;
pub mod sst;
pub mod varint;
pub mod version;

pub use batch::WriteBatch;
pub use db::{CheckReport, Db, DbIterator, Stats};
pub use error::{Error, Result};
pub use options::{Compression, Options, ReadOptions, Snapshot, WriteOptions};
