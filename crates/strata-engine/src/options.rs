//! Options of one engine instance. Defaults follow the RocksDB-for-Redis-on-Flash tuning
//! (seed 004): L0 slowdown at 24 files and stop at 40, 2 MiB compaction readahead, background
//! threads sized from the core count.

use crate::compaction::CompactionFilter;
use crate::error::{Error, Result};
pub use crate::io::IoBackend;
use crate::io::{Fs, RealFs};
use crate::key::SeqNo;
use std::path::PathBuf;
use std::sync::Arc;

/// Per-block compression. On-disk: do not renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Compression {
    /// Blocks stored as they are.
    None = 0,
    /// LZ4 block compression; a block is stored raw when LZ4 does not shrink it by 1/8.
    Lz4 = 1,
}

/// The separation threshold the measurements in `docs/benchmarks.md` favour.
pub const RECOMMENDED_SEP_THRESHOLD_BYTES: usize = 1024;

/// Options of a database. None is persisted: every open may pass different values, except
/// that the on-disk files always say how they were written (compression per block).
#[derive(Clone)]
pub struct Options {
    /// Create the database if the directory has none. Default: true.
    pub create_if_missing: bool,
    /// Fail if a database already exists. Default: false.
    pub error_if_exists: bool,
    /// The file system. Default: the operating system's ([`RealFs`]).
    pub fs: Arc<dyn Fs>,
    /// Bytes a memtable may hold before it is frozen and flushed. Default: 64 MiB. Counted as
    /// the memory the entries take (skiplist node and one allocation of key and value, as
    /// the allocator rounds them), not the data's size. Larger means fewer, larger L0 files
    /// (less write amplification) and a longer recovery.
    pub write_buffer_bytes: usize,
    /// Frozen memtables allowed to wait for flush before writes stop. Default: 2.
    pub max_immutable_memtables: usize,
    /// L0 files that trigger an L0→L1 compaction. Default: 4.
    pub l0_compaction_trigger: usize,
    /// L0 files at which each write is delayed by about 1 ms. Default: 24 (RoF tuning).
    pub l0_slowdown_writes_trigger: usize,
    /// L0 files at which writes stop until compaction catches up. Default: 40 (RoF tuning).
    pub l0_stop_writes_trigger: usize,
    /// Target size of L1; level n+1 targets `level_size_multiplier` times level n.
    /// Default: 256 MiB.
    pub max_bytes_for_level_base: u64,
    /// Size ratio between adjacent levels. Default: 10.
    pub level_size_multiplier: u64,
    /// Number of levels, L0 included. Default: 7.
    pub num_levels: usize,
    /// Target size of one table written by compaction. Default: 64 MiB.
    pub target_file_size_bytes: u64,
    /// Uncompressed size of a data block. Default: 4 KiB (with `block_align`, one device page
    /// per point read).
    pub block_size_bytes: usize,
    /// Page-aligned data blocks: a block is closed before it and its 5-byte trailer would
    /// outgrow `block_size_bytes`, and zero padding places it so that it touches as few 4 KiB
    /// pages as its size allows. A point read that misses the cache then moves one page, not
    /// two, which is what direct I/O and batched reads (`multi_get`) are bound by; the cost
    /// is the padding, up to one entry's size per block (about 20% of the file with 1 KiB
    /// values, 3% with 128-byte values). Default (`None`): on exactly when `direct_io` is,
    /// since only reads that bypass the page cache move whole pages for each block (measured
    /// with direct I/O: batched reads 64.6k to 76.6k keys/s); buffered reads keep the smaller
    /// files. Option string: true, false or auto. See `docs/batched-reads.md`.
    pub block_align: Option<bool>,
    /// Keys between restart points in a block. Default: 16.
    pub block_restart_interval: usize,
    /// Build a per-table filter (binary fuse, about 9 bits per key, 0.4% false positives).
    /// Default: true.
    pub filter: bool,
    /// Block compression. Default: none (benchmarks compare with compression off; LZ4 saves
    /// space on compressible data).
    pub compression: Compression,
    /// Block cache capacity in bytes (uncompressed blocks). Default: 64 MiB.
    pub block_cache_bytes: usize,
    /// Open table readers kept in the table cache. Default: 1000.
    pub max_open_files: usize,
    /// Background threads for flushes and compactions. Default: the number of cores, at
    /// least 2.
    pub background_threads: usize,
    /// Readahead for compaction inputs, in bytes. Default: 2 MiB (RoF tuning: 3x faster
    /// compaction on their load).
    pub compaction_readahead_bytes: usize,
    /// Verify block checksums when reading for compaction and on open. Default: true.
    pub paranoid_checks: bool,
    /// Find a key's data block in an SSTable through a learned index (Bourbon; a PGM over
    /// the index block's separators, `docs/design.md` §5.5)
    /// instead of a binary search over the index block. Built in memory, never persisted,
    /// and only once a table has served 1,000 lookups, so short-lived tables never pay; then
    /// timed against the binary search on the table's own keys and kept only if faster. It
    /// adds about 24 bytes per model segment to the table's memory. Applies to tables opened
    /// while it is on. Default: true (random reads 5% faster on a compacted 2M-key set;
    /// `docs/benchmarks.md`; per table: `strata index-bench --sst`).
    pub sst_learned_index: bool,
    /// How `multi_get` submits the block reads of a batch that miss the block cache.
    /// Default: [`IoBackend::Auto`] — io_uring (all reads of a stage in flight at once, one
    /// ring per reading thread) where it can be set up, else a pool of 16 threads issuing
    /// `pread` concurrently. `sync` reads one block after another (no overlap; the baseline).
    /// Which one runs is shown by `Db::stats` (`io_backend`).
    pub io_backend: IoBackend,
    /// Read table files with `O_DIRECT`, bypassing the operating system's page cache.
    /// Default: false. On: every table read goes to the device (or the block cache, which
    /// still applies), memory is not spent twice on the same blocks and benchmarks measure
    /// the device; reads are done in aligned 4 KiB units. Off: the page cache answers repeated
    /// reads of blocks the block cache evicted. WAL, MANIFEST, flush and compaction writes
    /// stay buffered. A file system that refuses `O_DIRECT` gets ordinary reads (counted in
    /// the stats).
    pub direct_io: bool,
    // Key-value separation (WiscKey; `docs/format/vlog.md`). Not persisted: a database
    // written with separation on stays readable with it off and the other way round.
    /// Values of at least this many bytes live in the value log and the tree keeps a
    /// pointer; with a finite threshold the value log is also the write-ahead log (no WAL).
    /// `usize::MAX` turns separation off (a plain LSM with a WAL). Default: `usize::MAX`
    /// (off), chosen from one measured table (`docs/benchmarks.md`, "The separation
    /// threshold's default"): on values of 64 B to 8 KiB a threshold of 512 B or 1 KiB wins
    /// loads (1.4x), cached reads, scans and YCSB A–D, F, and loses direct-I/O reads (0.69x)
    /// and YCSB E; but the value log then is the commit log of every write, which costs
    /// small-value writes 7% and keeps deleted small records on disk until GC can collect
    /// their 64 MiB file. For values of 512 B and more, 1 KiB is the setting
    /// ([`RECOMMENDED_SEP_THRESHOLD_BYTES`]). Lower: less write amplification, more random
    /// reads in lookups and scans.
    pub sep_threshold_bytes: usize,
    /// Size at which the head value-log file is sealed and a new one started. Default:
    /// 64 MiB. Smaller files let GC reclaim space in finer steps; each file is one open
    /// descriptor. A memtable is also frozen once the log grew by 4 files' worth since it
    /// started (the log after the durable head can be neither collected nor skipped by
    /// recovery).
    pub vlog_file_bytes: u64,
    /// User-space buffer of the value log: handed to the OS when full, on every sync and at
    /// each memtable switch. Default: 0 (each commit group reaches the OS as it is written,
    /// so an unsynced write survives a process crash, as with the WAL). Larger values save
    /// a `write` call per group, at a price: unsynced writes still in the buffer are lost
    /// if the process dies (synced writes never are).
    pub vlog_buffer_bytes: usize,
    /// Append to the head value-log file by storing into a shared writable mapping of it
    /// instead of a `write` call per commit group. Default: true (where the file system can
    /// reserve space with `fallocate`; elsewhere writes are used). A store into a shared
    /// mapping is in the page cache at once, so an acknowledged unsynced write survives a
    /// crash of the process exactly as with `write`, and `WriteOptions::sync` makes it
    /// durable through the same `fdatasync`; a power loss keeps what the last sync covered,
    /// as before. The head file is reserved 4 MiB at a time, so after a crash it ends in a
    /// zero-filled reserve that recovery reads as the clean end of the log; a seal (rotation,
    /// clean close) cuts it off (`docs/design.md` §8.2). Measured only on a loaded machine
    /// so far: faster for 1 KiB values, slower for 4 KiB ones (a page fault per put costs
    /// more than the `write` it saves); `docs/benchmarks.md`.
    pub vlog_head_mmap: bool,
    /// Append to the write-ahead log by storing into a shared writable mapping of it
    /// instead of a `write` call per commit group (the mapped file of `vlog_head_mmap`).
    /// Default: true (where the file system can reserve space with `fallocate`). The same
    /// guarantees: a store into a shared mapping is in the page cache at once, so an
    /// acknowledged unsynced write survives a crash of the process as with `write`;
    /// `WriteOptions::sync` and the WAL's syncs make it durable through the same
    /// `fdatasync`. The log is reserved 4 MiB at a time; after a crash it ends in a
    /// zero-filled reserve, which the log reader takes as the clean end (`docs/format/wal.md`);
    /// a seal (memtable switch, clean close) cuts it off. A commit group then costs a copy
    /// and, once per 4 KiB page, a page fault, where it cost a `writev`. Measured
    /// (`docs/benchmarks.md`, "The session's merged tree on a quiet machine: the WAL through
    /// a mapping, ..."): fillrandom 1.41x with 100 B values, 1.09x with 1 KiB, 0.93x with
    /// 4 KiB (a page fault per put); set it false for large values kept in the WAL.
    pub wal_mmap: bool,
    /// Unsynced writers of separated values share value-log appends (group commit): a
    /// writer whose batch can hold a separated value (at least `sep_threshold_bytes`) and
    /// finds another group being written queues, and the next leader appends every queued
    /// writer's batch as one frame with one call, so concurrent writers pay one `writev`
    /// (or one pass of stores into the mapped head) per group instead of one each. An
    /// acknowledged write is still in the OS before its writer returns (the leader answers
    /// its group after the append), so `kill -9` loses none. A lone writer leads at once and
    /// pays no hand-off; smaller batches append alone as before. Default: false until a
    /// measurement shows a gain: on 2 loaded cores writers almost never overlapped and
    /// grouping changed no figure (`docs/benchmarks.md`, "Separated writes at device speed"). Synced writers are
    /// grouped either way; the WAL (separation off) never groups unsynced writers.
    pub vlog_group_unsynced: bool,
    /// A sealed value-log file whose garbage is at least this fraction of its size is
    /// collected by GC. Default: 0.5 (space amplification of the value log stays below
    /// about 2; lower means less space and more GC copying).
    pub gc_garbage_ratio: f64,
    /// GC reads and writes at most about this many bytes per second (0 = unlimited).
    /// Default: 256 MiB/s.
    pub gc_bytes_per_sec: u64,
    /// Background GC checks for a file to collect this often, in milliseconds, and after
    /// a flush that found value-log garbage (0 = no background GC; `Db::gc` still works).
    /// Default: 1000.
    pub gc_interval_ms: u64,
    /// Values an iterator reads ahead, in one batch, when it is moving forward over
    /// separated values (WiscKey's parallel range-scan prefetch; 0 = off). Default: 32.
    pub vlog_prefetch: usize,
    /// Whether a forward scan also reads the batch after the one it is consuming, on a small
    /// process-wide pool of threads, so that the values of the range are read ahead of the
    /// caller (WiscKey's prefetch: the seed's fixed window of 32 values read in parallel once
    /// a scan reads values sequentially). At most two batches of `vlog_prefetch` values per
    /// iterator are held; dropping or moving the iterator cancels a batch not yet started and
    /// waits for one being read. Every value is verified as any pointer read is. Default:
    /// false: each batch is read when the scan reaches it. Measured on a quiet machine, the
    /// pool made seek + 100 nexts over 1 KiB values slower both from the page cache (0.70x)
    /// and with direct I/O (0.93x): on 2 cores the hand-off costs more than the overlap
    /// gives (`docs/benchmarks.md`, "Engine defaults decided by measurement").
    pub vlog_prefetch_background: bool,
    /// Scans and point reads (`get`) read sealed value-log files through memory mappings
    /// instead of a `pread` per value (ignored with `direct_io`; `multi_get` always keeps its
    /// batched reads). Default: true: a cached value then costs a copy instead of a system
    /// call, which is most of a scan over separated values. Off, a scan's values not in the
    /// page cache are read in batches (`io_backend`), overlapping where mapped reads fault
    /// one page at a time.
    pub vlog_mmap: bool,
    /// Capacity of the verified-value cache: point reads (`get`) of separated values keep a
    /// private copy of a value whose log entry they verified, admitted on its second read,
    /// and later reads of it skip the entry's checksum and the log's pages, as the block
    /// cache does for blocks (`docs/design.md` §8.3). `None` (default, `auto`): off.
    /// Measured on a quiet machine with the L0 tier on (2M Gaussian reads of 4 KiB values,
    /// half of them hits), 64 MiB made point reads 1.5x slower than verifying every read:
    /// the copy in and out costs more than the crc32c it saves (`docs/benchmarks.md`,
    /// "Engine defaults decided by measurement"). `Some(0)`: off. Per database: each shard
    /// of a sharded front has its own. Not persisted. Option string: a number or `auto`.
    pub vlog_value_cache_bytes: Option<usize>,
    /// A hook that may remove records as flushes and compactions write them and as value-log
    /// GC relocates them ([`CompactionFilter`]). Default: none. Not persisted. It is shown
    /// only the newest version of a key, only values (never tombstones), and only records no
    /// snapshot can read; a removed record becomes a tombstone unless nothing older can exist
    /// below it, so older versions never come back. A filter that decides from keys alone
    /// costs no value-log reads. Rules and their reasons: `docs/design.md` §6.4.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    // The byte-addressable L0 tier (the NVM seed; `docs/design.md` §2.9,
    // `docs/format/l0-tier.md`). Not persisted, but a database whose version holds tier
    // tables refuses to open without the directory.
    /// Where flushes write L0 tables (memory-mapped, read in place, a learned index per
    /// table) instead of L0 SSTables: a tmpfs (`/dev/shm/...`), a DAX file system or any
    /// directory. One database per directory (it is locked). Default: `None` (L0 holds
    /// SSTables, as in LevelDB).
    pub l0_tier_dir: Option<PathBuf>,
    /// Capacity of the tier: L0 tables are compacted down to L1 once they hold half of it,
    /// writes slow down at 3/4 and stop when it is full; this replaces the L0 file-count
    /// triggers while the tier is on. A table's bytes include the log entries it points at
    /// that compaction will copy into SSTables (below). Default: 1 GiB.
    pub l0_tier_bytes: u64,
    /// With the tier on, values of at least this many bytes are not copied into the memtable
    /// or the L0 table: they stay in the log they were written to (the value log, which is
    /// then the commit log) and the table holds a pointer, as in the seed; compaction copies
    /// them into SSTables, except those of at least `sep_threshold_bytes`, which stay
    /// separated. `usize::MAX`: every value inline (the WAL stays the commit log unless
    /// separation is on). Default: 32 (the seed's threshold).
    pub l0_inline_threshold_bytes: usize,
    /// Error bound of an L0 table's learned index, in entries: a lookup searches at most
    /// about `2 * pgm_epsilon` entries around the predicted position. The index is built over
    /// every 16th key (the table's checkpoints), so it is kept in checkpoints as
    /// `max(1, pgm_epsilon / 16)`. Default: 32. Smaller: a bigger index, fewer keys compared.
    pub pgm_epsilon: usize,
}

impl Default for Options {
    fn default() -> Self {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        Options {
            create_if_missing: true,
            error_if_exists: false,
            fs: Arc::new(RealFs::new()),
            write_buffer_bytes: 64 << 20,
            max_immutable_memtables: 2,
            l0_compaction_trigger: 4,
            l0_slowdown_writes_trigger: 24,
            l0_stop_writes_trigger: 40,
            max_bytes_for_level_base: 256 << 20,
            level_size_multiplier: 10,
            num_levels: 7,
            target_file_size_bytes: 64 << 20,
            block_size_bytes: 4 << 10,
            block_align: None,
            block_restart_interval: 16,
            filter: true,
            compression: Compression::None,
            block_cache_bytes: 64 << 20,
            max_open_files: 1000,
            background_threads: cores.max(2),
            compaction_readahead_bytes: 2 << 20,
            paranoid_checks: true,
            sst_learned_index: true,
            io_backend: IoBackend::Auto,
            direct_io: false,
            sep_threshold_bytes: usize::MAX,
            vlog_file_bytes: 64 << 20,
            vlog_buffer_bytes: 0,
            vlog_head_mmap: true,
            wal_mmap: true,
            vlog_group_unsynced: false,
            gc_garbage_ratio: 0.5,
            gc_bytes_per_sec: 256 << 20,
            gc_interval_ms: 1000,
            vlog_prefetch: 32,
            vlog_prefetch_background: false,
            vlog_mmap: true,
            vlog_value_cache_bytes: None,
            compaction_filter: None,
            l0_tier_dir: None,
            l0_tier_bytes: 1 << 30,
            l0_inline_threshold_bytes: 32,
            pgm_epsilon: 32,
        }
    }
}

impl Options {
    /// `vlog_value_cache_bytes` resolved: `auto` is off (see the option).
    pub fn value_cache_bytes(&self) -> usize {
        self.vlog_value_cache_bytes.unwrap_or(0)
    }

    /// `block_align` resolved: by default, aligned blocks exactly with direct I/O.
    pub fn block_align(&self) -> bool {
        self.block_align.unwrap_or(self.direct_io)
    }

    /// Returns a clear error for impossible combinations.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
        if self.write_buffer_bytes < 4096 {
            return bad("write_buffer_bytes must be at least 4096");
        }
        if self.l0_compaction_trigger == 0 {
            return bad("l0_compaction_trigger must be at least 1");
        }
        if self.l0_slowdown_writes_trigger < self.l0_compaction_trigger {
            return bad("l0_slowdown_writes_trigger must be >= l0_compaction_trigger");
        }
        if self.l0_stop_writes_trigger < self.l0_slowdown_writes_trigger {
            return bad("l0_stop_writes_trigger must be >= l0_slowdown_writes_trigger");
        }
        if !(2..=16).contains(&self.num_levels) {
            return bad("num_levels must be between 2 and 16");
        }
        if self.level_size_multiplier < 2 {
            return bad("level_size_multiplier must be at least 2");
        }
        if self.block_size_bytes < 256 || self.block_size_bytes > (64 << 20) {
            return bad("block_size_bytes must be between 256 B and 64 MiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1");
        }
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16");
        }
        if self.background_threads == 0 {
            return bad("background_threads must be at least 1");
        }
        if self.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables must be at least 1");
        }
        if self.target_file_size_bytes < 4096 {
            return bad("target_file_size_bytes must be at least 4096");
        }
        if self.vlog_file_bytes < 1024 {
            return bad("vlog_file_bytes must be at least 1024");
        }
        if !(self.gc_garbage_ratio > 0.0 && self.gc_garbage_ratio <= 1.0) {
            return bad("gc_garbage_ratio must be in (0, 1]");
        }
        if self.l0_tier_bytes < (self.write_buffer_bytes as u64).saturating_mul(2) {
            return bad("l0_tier_bytes must be at least twice write_buffer_bytes");
        }
        if self.pgm_epsilon == 0 {
            return bad("pgm_epsilon must be at least 1");
        }
        Ok(())
    }

    /// Whether the value log is the commit log (no WAL): with key-value separation on, or
    /// with the L0 tier pointing into the log.
    pub fn separation(&self) -> bool {
        self.log_threshold() != usize::MAX
    }

    /// Values of at least this many bytes are written to the value log and held by pointer
    /// in the memtable (and in L0 tables): `sep_threshold_bytes`, or with the L0 tier on the
    /// smaller of it and `l0_inline_threshold_bytes`.
    pub fn log_threshold(&self) -> usize {
        match self.l0_tier_dir {
            Some(_) => self.sep_threshold_bytes.min(self.l0_inline_threshold_bytes),
            None => self.sep_threshold_bytes,
        }
    }

    /// Pointers to values shorter than this are replaced by their values when compaction
    /// writes an SSTable: with the L0 tier on, those below `sep_threshold_bytes` (the tier's
    /// pointers into the log); 0 otherwise (no pointer is touched).
    pub fn unseparate_below(&self) -> usize {
        match self.l0_tier_dir {
            Some(_) => self.sep_threshold_bytes,
            None => 0,
        }
    }

    /// The most value log one memtable covers before it is frozen: 4 value-log files (the
    /// log after the durable head can be neither collected nor skipped by recovery), and with
    /// the L0 tier on no more than `write_buffer_bytes`: compaction copies the values the
    /// tier's pointers name, so a tier table then holds about a memtable's worth of data, as
    /// an L0 SSTable would, and the tier's capacity is spent in steps of that size.
    pub fn memtable_log_span(&self) -> u64 {
        let files = self.vlog_file_bytes.saturating_mul(4);
        match self.l0_tier_dir {
            Some(_) if self.unseparate_below() > self.log_threshold() => {
                files.min(self.write_buffer_bytes as u64)
            }
            _ => files,
        }
    }

    /// How the L0 tier writes its tables. A value is a pointer in an L0 table exactly when
    /// it is one in the memtable, so the tier's inline threshold is [`Options::log_threshold`]:
    /// `l0_inline_threshold_bytes` (the seed's 32 B) or a smaller `sep_threshold_bytes`.
    pub fn l0_table_options(&self) -> crate::l0tier::L0TableOptions {
        crate::l0tier::L0TableOptions {
            inline_threshold_bytes: self.log_threshold().min(u32::MAX as usize),
            pgm_epsilon: (self.pgm_epsilon / crate::l0tier::ENTRIES_PER_CHECKPOINT as usize).max(1),
        }
    }

    /// Sets one option from its name and a string value (CLI `--opt name=value`).
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T> {
            v.parse().map_err(|_| {
                Error::InvalidArgument(format!("option {name}: cannot parse {v:?} as a number"))
            })
        }
        fn boolean(name: &str, v: &str) -> Result<bool> {
            match v {
                "true" | "1" | "on" | "yes" => Ok(true),
                "false" | "0" | "off" | "no" => Ok(false),
                _ => Err(Error::InvalidArgument(format!(
                    "option {name}: expected true or false, got {v:?}"
                ))),
            }
        }
        match name {
            "create_if_missing" => self.create_if_missing = boolean(name, value)?,
            "error_if_exists" => self.error_if_exists = boolean(name, value)?,
            "write_buffer_bytes" => self.write_buffer_bytes = num(name, value)?,
            "max_immutable_memtables" => self.max_immutable_memtables = num(name, value)?,
            "l0_compaction_trigger" => self.l0_compaction_trigger = num(name, value)?,
            "l0_slowdown_writes_trigger" => self.l0_slowdown_writes_trigger = num(name, value)?,
            "l0_stop_writes_trigger" => self.l0_stop_writes_trigger = num(name, value)?,
            "max_bytes_for_level_base" => self.max_bytes_for_level_base = num(name, value)?,
            "level_size_multiplier" => self.level_size_multiplier = num(name, value)?,
            "num_levels" => self.num_levels = num(name, value)?,
            "target_file_size_bytes" => self.target_file_size_bytes = num(name, value)?,
            "block_size_bytes" => self.block_size_bytes = num(name, value)?,
            "block_align" => {
                self.block_align = match value {
                    "auto" => None,
                    v => Some(boolean(name, v)?),
                }
            }
            "block_restart_interval" => self.block_restart_interval = num(name, value)?,
            "filter" => self.filter = boolean(name, value)?,
            "compression" => {
                self.compression = match value {
                    "none" => Compression::None,
                    "lz4" => Compression::Lz4,
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "option compression: expected none or lz4, got {value:?}"
                        )))
                    }
                }
            }
            "block_cache_bytes" => self.block_cache_bytes = num(name, value)?,
            "max_open_files" => self.max_open_files = num(name, value)?,
            "background_threads" => self.background_threads = num(name, value)?,
            "compaction_readahead_bytes" => self.compaction_readahead_bytes = num(name, value)?,
            "paranoid_checks" => self.paranoid_checks = boolean(name, value)?,
            "sst_learned_index" => self.sst_learned_index = boolean(name, value)?,
            "io_backend" => {
                self.io_backend = IoBackend::parse(value).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "option io_backend: expected auto, io_uring, threads or sync, got {value:?}"
                    ))
                })?
            }
            "direct_io" => self.direct_io = boolean(name, value)?,
            "sep_threshold_bytes" => {
                self.sep_threshold_bytes = match value {
                    "inf" | "off" | "max" => usize::MAX,
                    v => num(name, v)?,
                }
            }
            "vlog_file_bytes" => self.vlog_file_bytes = num(name, value)?,
            "vlog_buffer_bytes" => self.vlog_buffer_bytes = num(name, value)?,
            "vlog_head_mmap" => self.vlog_head_mmap = boolean(name, value)?,
            "wal_mmap" => self.wal_mmap = boolean(name, value)?,
            "vlog_group_unsynced" => self.vlog_group_unsynced = boolean(name, value)?,
            "gc_garbage_ratio" => self.gc_garbage_ratio = num(name, value)?,
            "gc_bytes_per_sec" => self.gc_bytes_per_sec = num(name, value)?,
            "gc_interval_ms" => self.gc_interval_ms = num(name, value)?,
            "vlog_prefetch" => self.vlog_prefetch = num(name, value)?,
            "vlog_prefetch_background" => self.vlog_prefetch_background = boolean(name, value)?,
            "vlog_mmap" => self.vlog_mmap = boolean(name, value)?,
            "vlog_value_cache_bytes" => {
                self.vlog_value_cache_bytes = match value {
                    "auto" => None,
                    v => Some(num(name, v)?),
                }
            }
            "l0_tier_dir" => {
                self.l0_tier_dir = match value {
                    "" | "none" | "off" => None,
                    v => Some(PathBuf::from(v)),
                }
            }
            "l0_tier_bytes" => self.l0_tier_bytes = num(name, value)?,
            "pgm_epsilon" => self.pgm_epsilon = num(name, value)?,
            "l0_inline_threshold_bytes" => {
                self.l0_inline_threshold_bytes = match value {
                    "inf" | "off" | "max" => usize::MAX,
                    v => num(name, v)?,
                }
            }
            _ => return Err(Error::InvalidArgument(format!("unknown option {name:?}"))),
        }
        self.validate()
    }
}

/// Options of one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// fsync the WAL (or, with key-value separation, the value log) before acknowledging.
    /// Writes that share a commit group share the fsync. Default: false: the write reaches
    /// the operating system before it is acknowledged, so it survives a process crash but
    /// not a power loss (with separation only while `Options::vlog_buffer_bytes` is 0, its
    /// default).
    pub sync: bool,
    /// Skip the WAL (with separation: write no frame that recovery replays). Such a write
    /// survives a clean `Db::close` (which flushes the memtables holding one) but not a
    /// crash before its memtable is flushed; writes logged after it still survive. Value-log
    /// GC flushes such writes before it relies on them. Default: false.
    pub disable_wal: bool,
}

/// A consistent point-in-time view, by sequence number. Obtained from `Db::snapshot`; while
/// it lives, compaction keeps every version it can see.
#[derive(Clone)]
pub struct Snapshot {
    pub(crate) seq: SeqNo,
    pub(crate) _guard: Arc<dyn std::any::Any + Send + Sync>,
}

impl Snapshot {
    /// The sequence number this snapshot reads at.
    pub fn seq(&self) -> SeqNo {
        self.seq
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot({})", self.seq)
    }
}

/// Options of one read.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Read as of this snapshot. Default: the latest state.
    pub snapshot: Option<Snapshot>,
    /// Put blocks read from disk into the block cache. Default: true (turn off for scans).
    pub fill_cache: bool,
    /// Verify block checksums on every read. Default: true.
    pub verify_checksums: bool,
    /// Iterators: skip keys below this bound (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: stop before this bound (exclusive).
    pub upper_bound: Option<Vec<u8>>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            fill_cache: true,
            verify_checksums: true,
            lower_bound: None,
            upper_bound: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_options_are_settable_by_name() {
        let mut o = Options::default();
        assert_eq!((o.io_backend, o.direct_io), (IoBackend::Auto, false));
        for (v, b) in [
            ("io_uring", IoBackend::Uring),
            ("uring", IoBackend::Uring),
            ("threads", IoBackend::Threads),
            ("sync", IoBackend::Sync),
            ("auto", IoBackend::Auto),
        ] {
            o.set("io_backend", v).unwrap();
            assert_eq!(o.io_backend, b);
        }
        assert!(o.set("io_backend", "aio").is_err());
        o.set("direct_io", "true").unwrap();
        assert!(o.direct_io);
        assert!(o.set("direct_io", "maybe").is_err());
    }

    #[test]
    fn sst_learned_index_is_on_by_default_and_settable() {
        let mut o = Options::default();
        assert!(o.sst_learned_index);
        o.set("sst_learned_index", "off").unwrap();
        assert!(!o.sst_learned_index);
        o.set("sst_learned_index", "true").unwrap();
        assert!(o.sst_learned_index);
        assert!(o.set("sst_learned_index", "2").is_err());
    }

    #[test]
    fn the_l0_tier_makes_the_value_log_the_commit_log() {
        let mut o = Options::default();
        assert!(!o.separation() && o.unseparate_below() == 0);
        o.set("l0_tier_dir", "/some/tier").unwrap();
        // Values of 32 bytes and more go to the log; compaction copies all of them back.
        assert_eq!(o.l0_inline_threshold_bytes, 32);
        assert!(o.separation());
        assert_eq!(o.log_threshold(), 32);
        assert_eq!(o.unseparate_below(), usize::MAX);
        assert_eq!(o.l0_table_options().inline_threshold_bytes, 32);
        assert_eq!(o.memtable_log_span(), o.write_buffer_bytes as u64);
        // With separation at 1 KiB, only values below it are copied.
        o.set("sep_threshold_bytes", "1024").unwrap();
        assert_eq!((o.log_threshold(), o.unseparate_below()), (32, 1024));
        // Pointers off: the tier holds every value inline and the WAL is the log again.
        o.set("sep_threshold_bytes", "inf").unwrap();
        o.set("l0_inline_threshold_bytes", "inf").unwrap();
        assert!(!o.separation());
        assert_eq!(o.memtable_log_span(), o.vlog_file_bytes * 4);
        assert!(o.set("l0_inline_threshold_bytes", "lots").is_err());
    }

    #[test]
    fn defaults_that_follow_other_options() {
        let mut o = Options::default();
        // Page-aligned blocks exactly with direct I/O, unless set.
        assert!(!o.block_align());
        o.set("direct_io", "true").unwrap();
        assert!(o.block_align());
        o.set("block_align", "false").unwrap();
        assert!(!o.block_align());
        o.set("block_align", "auto").unwrap();
        assert!(o.block_align());
        assert!(o.set("block_align", "sometimes").is_err());
        // The verified-value cache: off unless set, with or without the L0 tier.
        assert_eq!(o.value_cache_bytes(), 0);
        o.set("l0_tier_dir", "/some/tier").unwrap();
        assert_eq!(o.value_cache_bytes(), 0);
        o.set("vlog_value_cache_bytes", "4096").unwrap();
        assert_eq!(o.value_cache_bytes(), 4096);
        o.set("vlog_value_cache_bytes", "auto").unwrap();
        assert_eq!(o.value_cache_bytes(), 0);
        o.set("l0_tier_dir", "none").unwrap();
        o.set("vlog_value_cache_bytes", "1048576").unwrap();
        assert_eq!(o.value_cache_bytes(), 1 << 20);
        assert!(o.set("vlog_value_cache_bytes", "big").is_err());
    }
}
