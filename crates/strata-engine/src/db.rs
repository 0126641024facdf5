//! STUB of the public API (bodies to be written); signatures are what the CLI builds on.
#![allow(unused_variables)]
use crate::batch::WriteBatch;
use crate::error::Result;
use crate::options::{Options, ReadOptions, Snapshot, WriteOptions};
use std::path::Path;

/// One LSM-tree instance.
pub struct Db {}

/// Engine statistics (see `Db::stats`).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub user_bytes_written: u64,
    pub wal_bytes_written: u64,
    pub flush_bytes_written: u64,
    pub compaction_bytes_written: u64,
    pub compaction_bytes_read: u64,
    /// (flush + compaction + WAL bytes) / user bytes.
    pub write_amplification: f64,
    pub stall_micros: u64,
    pub slowdown_count: u64,
    pub stop_count: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    pub table_cache_hits: u64,
    pub table_cache_misses: u64,
    pub filter_checks: u64,
    pub filter_negatives: u64,
    /// Per level: (file count, total bytes).
    pub levels: Vec<(usize, u64)>,
    pub memtable_bytes: u64,
    pub immutable_memtables: usize,
    pub last_sequence: u64,
    pub flushes: u64,
    pub compactions: u64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        todo!()
    }
}

/// What `Db::check` found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub tables: u64,
    pub blocks: u64,
    pub entries: u64,
    pub wal_records: u64,
    pub manifest_records: u64,
    /// Every corruption found (check goes on after the first).
    pub problems: Vec<crate::Error>,
}

/// Iterator over user keys and values (see `Db::iter`).
pub struct DbIterator {}

impl DbIterator {
    pub fn valid(&self) -> bool {
        todo!()
    }
    pub fn seek_to_first(&mut self) {
        todo!()
    }
    pub fn seek_to_last(&mut self) {
        todo!()
    }
    /// First key >= `key`.
    pub fn seek(&mut self, key: &[u8]) {
        todo!()
    }
    /// Last key <= `key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) {
        todo!()
    }
    pub fn next(&mut self) {
        todo!()
    }
    pub fn prev(&mut self) {
        todo!()
    }
    pub fn key(&self) -> &[u8] {
        todo!()
    }
    pub fn value(&self) -> &[u8] {
        todo!()
    }
    pub fn status(&self) -> Result<()> {
        todo!()
    }
}

impl Db {
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        todo!()
    }
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        todo!()
    }
    pub fn put_opt(&self, wo: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        todo!()
    }
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        todo!()
    }
    pub fn delete_opt(&self, wo: &WriteOptions, key: &[u8]) -> Result<()> {
        todo!()
    }
    pub fn write(&self, wo: &WriteOptions, batch: WriteBatch) -> Result<()> {
        todo!()
    }
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        todo!()
    }
    pub fn get_opt(&self, ro: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        todo!()
    }
    pub fn multi_get(&self, ro: &ReadOptions, keys: &[&[u8]]) -> Vec<Result<Option<Vec<u8>>>> {
        todo!()
    }
    pub fn iter(&self, ro: &ReadOptions) -> Result<DbIterator> {
        todo!()
    }
    pub fn snapshot(&self) -> Snapshot {
        todo!()
    }
    /// Flushes the memtable and waits until it is a table.
    pub fn flush(&self) -> Result<()> {
        todo!()
    }
    /// Compacts everything in [start, end] down to the last level and waits.
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        todo!()
    }
    /// Waits until no flush or compaction is pending.
    pub fn wait_idle(&self) -> Result<()> {
        todo!()
    }
    pub fn stats(&self) -> Stats {
        todo!()
    }
    /// Verifies every checksum of the database at `path` (read-only; takes the lock).
    pub fn check(path: impl AsRef<Path>, opts: Options) -> Result<CheckReport> {
        todo!()
    }
    /// Flushes nothing, stops background work, syncs the WAL, releases the lock.
    pub fn close(self) -> Result<()> {
        todo!()
    }
}
