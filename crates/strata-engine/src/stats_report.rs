//! [`Stats`]: figures about one instance, and their human-readable form.

use crate::state::DbInner;
use crate::stats::Counters;
use std::fmt;

/// Engine statistics (see [`crate::Db::stats`]).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub user_bytes_written: u64,
    pub wal_bytes_written: u64,
    pub wal_syncs: u64,
    pub writes: u64,
    pub write_groups: u64,
    pub flush_bytes_written: u64,
    pub compaction_bytes_written: u64,
    pub compaction_bytes_read: u64,
    /// (WAL + value log + flush + compaction bytes written) / user bytes.
    pub write_amplification: f64,
    pub stall_micros: u64,
    pub slowdown_count: u64,
    pub stop_count: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    pub block_cache_usage_bytes: u64,
    pub table_cache_hits: u64,
    pub table_cache_misses: u64,
    pub filter_checks: u64,
    pub filter_negatives: u64,
    /// Per level: (table count, total bytes).
    pub levels: Vec<(usize, u64)>,
    pub memtable_bytes: u64,
    pub immutable_memtables: usize,
    /// Bytes of the immutable memtables waiting for flush.
    pub immutable_memtable_bytes: u64,
    /// Bytes the open tables keep in memory (indexes and filters; data blocks are in the
    /// block cache).
    pub table_reader_bytes: u64,
    pub last_sequence: u64,
    /// What the last open's recovery replayed: log records (WAL batches, MANIFEST edits,
    /// value-log frames) and bytes of unsynced log tails it dropped (`Db::recovery_info`
    /// has them per file).
    pub recovery_records_replayed: u64,
    pub recovery_truncated_bytes: u64,
    /// L0 tier tables in the current version and their bytes (0 with the tier off).
    pub l0_tier_tables: usize,
    pub l0_tier_bytes: u64,
    /// L0 tier tables written by flushes since open.
    pub l0_tier_flushes: u64,
    /// Values compaction copied from the log into SSTables: the L0 tier's pointers to values
    /// below `sep_threshold_bytes`.
    pub l0_tier_values_copied: u64,
    /// Separated values read through a mapping of their value-log file (`vlog_mmap`).
    pub vlog_mapped_reads: u64,
    /// Point reads of separated values answered by the verified-value cache
    /// (`vlog_value_cache_bytes`), those that were not, and the bytes it holds.
    pub vlog_value_cache_hits: u64,
    pub vlog_value_cache_misses: u64,
    pub vlog_value_cache_bytes: u64,
    pub flushes: u64,
    pub compactions: u64,
    pub trivial_moves: u64,
    pub background_error: Option<String>,
    /// The backend batched reads run on in this process (`Options::io_backend` resolved:
    /// "io_uring", "threads (...)" with the reason io_uring is unavailable, or "sync").
    pub io_backend: String,
    /// Table files are read with `O_DIRECT`.
    pub direct_io: bool,
    /// Direct opens (in this process) that fell back to buffered reads because the file
    /// system refused `O_DIRECT`.
    pub direct_io_refusals: u64,
    pub multi_gets: u64,
    pub multi_get_keys: u64,
    /// Batched reads of `multi_get` by the backend that ran them, and reads in them.
    pub read_batches_uring: u64,
    pub read_batches_threads: u64,
    pub read_batches_sync: u64,
    pub batched_reads: u64,
    /// Process-wide (every database of the process): waits of the io_uring rings for
    /// completions, and the reads in flight summed over them; their ratio is the mean queue
    /// depth batched reads kept on the device.
    pub uring_waits: u64,
    pub uring_waited_in_flight: u64,
    /// Value-log files, their total size, and the part of it no table points at (files
    /// below the durable head; the head region counts as live).
    pub vlog_files: u64,
    pub vlog_bytes: u64,
    pub vlog_garbage_bytes: u64,
    /// File of the value log's durable head (0: the value log was never used).
    pub vlog_head_file: u64,
    /// Bytes appended to the value log (by writers and GC) and values stored as pointers.
    pub vlog_bytes_written: u64,
    pub vlog_values_written: u64,
    pub gc_runs: u64,
    pub gc_bytes_read: u64,
    pub gc_bytes_written: u64,
    pub gc_values_relocated: u64,
    pub gc_files_collected: u64,
    /// Collected files kept until the snapshots that may read them are released.
    pub gc_files_pending: u64,
    /// Records the compaction filter removed, and jobs redone without it because a
    /// snapshot taken while they ran could read what it removed.
    pub filter_removed: u64,
    pub filter_retries: u64,
    /// Separated values read from the value log because the filter asked for them.
    pub filter_value_reads: u64,
    pub gc_last_error: Option<String>,
    /// (tables + value log) / (tables + value log - value-log garbage): the space the
    /// value log's garbage costs (table-side garbage is not counted).
    pub space_amplification: f64,
}

pub(crate) fn collect(inner: &DbInner) -> Stats {
    let c = &inner.counters;
    let g = Counters::get;
    let sv = inner.super_version.load_full();
    let user = g(&c.user_bytes);
    let wal = g(&c.wal_bytes);
    let flush = g(&c.flush_bytes);
    let comp = g(&c.compaction_bytes_written);
    let vlog = inner.vlog_figures();
    let vlog_written = g(&c.vlog_bytes);
    let (bh, bm, bu) = inner
        .tables
        .block_cache()
        .map_or((0, 0, 0), |b| (b.hits(), b.misses(), b.usage_bytes()));
    Stats {
        user_bytes_written: user,
        wal_bytes_written: wal,
        wal_syncs: g(&c.wal_syncs),
        writes: g(&c.writes),
        write_groups: g(&c.write_groups),
        flush_bytes_written: flush,
        compaction_bytes_written: comp,
        compaction_bytes_read: g(&c.compaction_bytes_read),
        write_amplification: if user == 0 {
            0.0
        } else {
            (wal + vlog_written + flush + comp) as f64 / user as f64
        },
        stall_micros: g(&c.stall_micros),
        slowdown_count: g(&c.slowdowns),
        stop_count: g(&c.stops),
        block_cache_hits: bh,
        block_cache_misses: bm,
        block_cache_usage_bytes: bu,
        table_cache_hits: inner.tables.hits(),
        table_cache_misses: inner.tables.misses(),
        filter_checks: g(&c.filter_checks),
        filter_negatives: g(&c.filter_negatives),
        levels: sv
            .version
            .levels
            .iter()
            .map(|f| (f.len(), f.iter().map(|m| m.size).sum()))
            .collect(),
        memtable_bytes: sv.mem.approximate_bytes() as u64,
        immutable_memtables: sv.imms.len(),
        immutable_memtable_bytes: sv.imms.iter().map(|m| m.approximate_bytes() as u64).sum(),
        table_reader_bytes: inner.tables.reader_bytes(),
        last_sequence: inner.visible_seq(),
        recovery_records_replayed: inner.recovery.records_replayed(),
        recovery_truncated_bytes: inner.recovery.truncated_bytes(),
        l0_tier_tables: sv.version.levels[0].iter().filter(|f| f.tier).count(),
        l0_tier_bytes: sv.version.tier_bytes(),
        l0_tier_flushes: g(&c.l0_tier_flushes),
        l0_tier_values_copied: g(&c.l0_tier_values_copied),
        vlog_mapped_reads: inner
            .vlog
            .mapped_reads
            .load(std::sync::atomic::Ordering::Relaxed),
        vlog_value_cache_hits: inner.vlog.value_cache_hits_misses().0,
        vlog_value_cache_misses: inner.vlog.value_cache_hits_misses().1,
        vlog_value_cache_bytes: inner.vlog.value_cache_bytes(),
        flushes: g(&c.flushes),
        compactions: g(&c.compactions),
        trivial_moves: g(&c.trivial_moves),
        background_error: inner.bg_error.lock().as_ref().map(|e| e.to_string()),
        io_backend: crate::io::backend_status(inner.opts.io_backend),
        direct_io: inner.tables.direct_io(),
        direct_io_refusals: crate::io::direct_io_refusals(),
        uring_waits: crate::io::uring_wait_stats().0,
        uring_waited_in_flight: crate::io::uring_wait_stats().1,
        multi_gets: g(&c.multi_gets),
        multi_get_keys: g(&c.multi_get_keys),
        read_batches_uring: g(&c.read_batches_uring),
        read_batches_threads: g(&c.read_batches_threads),
        read_batches_sync: g(&c.read_batches_sync),
        batched_reads: g(&c.batched_reads),
        vlog_files: vlog.files,
        vlog_bytes: vlog.bytes,
        vlog_garbage_bytes: vlog.garbage,
        vlog_head_file: vlog.head_file,
        vlog_bytes_written: vlog_written,
        vlog_values_written: g(&c.vlog_values),
        gc_runs: g(&c.gc_runs),
        gc_bytes_read: g(&c.gc_bytes_read),
        gc_bytes_written: g(&c.gc_bytes_written),
        gc_values_relocated: g(&c.gc_values_relocated),
        gc_files_collected: g(&c.gc_files_collected),
        gc_files_pending: vlog.pending,
        filter_removed: g(&c.filter_removed),
        filter_retries: g(&c.filter_retries),
        filter_value_reads: g(&c.filter_value_reads),
        gc_last_error: vlog.last_error,
        space_amplification: {
            let tables: u64 = sv.version.levels.iter().flatten().map(|f| f.size).sum();
            let total = tables + vlog.bytes;
            let live = total.saturating_sub(vlog.garbage);
            if live == 0 {
                1.0
            } else {
                total as f64 / live as f64
            }
        },
    }
}

impl Stats {
    /// The figures of several instances (the shards of a sharded database) as one: counts
    /// and sizes added level by level, the amplifications recomputed from the sums, the
    /// largest last sequence, the first error. Per-process facts (I/O backend, direct I/O)
    /// are the first instance's.
    pub fn sum(parts: &[Stats]) -> Stats {
        let mut t = parts.first().cloned().unwrap_or_default();
        for p in parts.iter().skip(1) {
            t.user_bytes_written += p.user_bytes_written;
            t.wal_bytes_written += p.wal_bytes_written;
            t.wal_syncs += p.wal_syncs;
            t.writes += p.writes;
            t.write_groups += p.write_groups;
            t.flush_bytes_written += p.flush_bytes_written;
            t.compaction_bytes_written += p.compaction_bytes_written;
            t.compaction_bytes_read += p.compaction_bytes_read;
            t.stall_micros += p.stall_micros;
            t.slowdown_count += p.slowdown_count;
            t.stop_count += p.stop_count;
            t.block_cache_hits += p.block_cache_hits;
            t.block_cache_misses += p.block_cache_misses;
            t.block_cache_usage_bytes += p.block_cache_usage_bytes;
            t.table_cache_hits += p.table_cache_hits;
            t.table_cache_misses += p.table_cache_misses;
            t.filter_checks += p.filter_checks;
            t.filter_negatives += p.filter_negatives;
            if t.levels.len() < p.levels.len() {
                t.levels.resize(p.levels.len(), (0, 0));
            }
            for (a, b) in t.levels.iter_mut().zip(&p.levels) {
                a.0 += b.0;
                a.1 += b.1;
            }
            t.memtable_bytes += p.memtable_bytes;
            t.immutable_memtables += p.immutable_memtables;
            t.immutable_memtable_bytes += p.immutable_memtable_bytes;
            t.table_reader_bytes += p.table_reader_bytes;
            t.last_sequence = t.last_sequence.max(p.last_sequence);
            t.l0_tier_tables += p.l0_tier_tables;
            t.l0_tier_bytes += p.l0_tier_bytes;
            t.l0_tier_flushes += p.l0_tier_flushes;
            t.l0_tier_values_copied += p.l0_tier_values_copied;
            t.vlog_mapped_reads += p.vlog_mapped_reads;
            t.vlog_value_cache_hits += p.vlog_value_cache_hits;
            t.vlog_value_cache_misses += p.vlog_value_cache_misses;
            t.vlog_value_cache_bytes += p.vlog_value_cache_bytes;
            t.flushes += p.flushes;
            t.compactions += p.compactions;
            t.trivial_moves += p.trivial_moves;
            t.background_error = t.background_error.or_else(|| p.background_error.clone());
            t.direct_io_refusals += p.direct_io_refusals;
            // Process-wide counters: every shard reports the same, so they are not added.
            t.uring_waits = t.uring_waits.max(p.uring_waits);
            t.uring_waited_in_flight = t.uring_waited_in_flight.max(p.uring_waited_in_flight);
            t.multi_gets += p.multi_gets;
            t.multi_get_keys += p.multi_get_keys;
            t.read_batches_uring += p.read_batches_uring;
            t.read_batches_threads += p.read_batches_threads;
            t.read_batches_sync += p.read_batches_sync;
            t.batched_reads += p.batched_reads;
            t.vlog_files += p.vlog_files;
            t.vlog_bytes += p.vlog_bytes;
            t.vlog_garbage_bytes += p.vlog_garbage_bytes;
            t.vlog_head_file = t.vlog_head_file.max(p.vlog_head_file);
            t.vlog_bytes_written += p.vlog_bytes_written;
            t.vlog_values_written += p.vlog_values_written;
            t.gc_runs += p.gc_runs;
            t.gc_bytes_read += p.gc_bytes_read;
            t.gc_bytes_written += p.gc_bytes_written;
            t.gc_values_relocated += p.gc_values_relocated;
            t.gc_files_collected += p.gc_files_collected;
            t.gc_files_pending += p.gc_files_pending;
            t.filter_removed += p.filter_removed;
            t.filter_retries += p.filter_retries;
            t.filter_value_reads += p.filter_value_reads;
            t.gc_last_error = t.gc_last_error.or_else(|| p.gc_last_error.clone());
        }
        let written = t.wal_bytes_written
            + t.vlog_bytes_written
            + t.flush_bytes_written
            + t.compaction_bytes_written;
        t.write_amplification = if t.user_bytes_written == 0 {
            0.0
        } else {
            written as f64 / t.user_bytes_written as f64
        };
        let tables: u64 = t.levels.iter().map(|l| l.1).sum();
        let total = tables + t.vlog_bytes;
        let live = total.saturating_sub(t.vlog_garbage_bytes);
        t.space_amplification = if live == 0 {
            1.0
        } else {
            total as f64 / live as f64
        };
        t
    }
}

/// Value-log figures gathered under the state lock.
pub(crate) struct VlogFigures {
    pub files: u64,
    pub bytes: u64,
    pub garbage: u64,
    pub head_file: u64,
    pub pending: u64,
    pub last_error: Option<String>,
}

impl DbInner {
    pub(crate) fn vlog_figures(&self) -> VlogFigures {
        let st = self.state.lock();
        let head_file = st.versions.vlog.head.map_or(0, |h| h.0);
        let mut f = VlogFigures {
            files: st.vlog_files.len() as u64,
            bytes: 0,
            garbage: 0,
            head_file,
            pending: st.gc.pending.len() as u64,
            last_error: st.gc.last_error.clone(),
        };
        for file in st.vlog_files.values() {
            let size = file.size();
            f.bytes += size;
            let obsolete = st.versions.vlog.obsolete.contains(&file.number);
            if obsolete {
                f.garbage += size;
            } else if file.number < head_file {
                f.garbage += size.saturating_sub(st.versions.vlog.live_bytes(file.number));
            }
        }
        f
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn ratio(hit: u64, miss: u64) -> f64 {
    if hit + miss == 0 {
        0.0
    } else {
        100.0 * hit as f64 / (hit + miss) as f64
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "** Strata engine stats **")?;
        writeln!(f, "Level  Files  Size(MiB)")?;
        for (i, (n, b)) in self.levels.iter().enumerate() {
            writeln!(f, "  L{i:<4}{n:>6}  {:>9.1}", mib(*b))?;
        }
        writeln!(
            f,
            "Memtable: {:.1} MiB, {} immutable waiting for flush ({:.1} MiB); last sequence {}",
            mib(self.memtable_bytes),
            self.immutable_memtables,
            mib(self.immutable_memtable_bytes),
            self.last_sequence
        )?;
        writeln!(
            f,
            "Table readers (indexes and filters): {:.1} MiB",
            mib(self.table_reader_bytes)
        )?;
        if self.l0_tier_flushes > 0 || self.l0_tier_tables > 0 {
            writeln!(
                f,
                "L0 tier: {} tables, {:.1} MiB (with the log they point at); {} written by flushes; {} values copied from the log by compaction",
                self.l0_tier_tables,
                mib(self.l0_tier_bytes),
                self.l0_tier_flushes,
                self.l0_tier_values_copied
            )?;
        }
        if self.vlog_value_cache_hits + self.vlog_value_cache_misses > 0 {
            writeln!(
                f,
                "Verified-value cache: {} hits, {} misses, {:.1} MiB",
                self.vlog_value_cache_hits,
                self.vlog_value_cache_misses,
                mib(self.vlog_value_cache_bytes)
            )?;
        }
        writeln!(
            f,
            "Writes: {} in {} groups; user {:.1} MiB; WAL {:.1} MiB ({} syncs); flush {:.1} MiB ({} flushes); compaction write {:.1} MiB, read {:.1} MiB ({} compactions, {} trivial moves)",
            self.writes,
            self.write_groups,
            mib(self.user_bytes_written),
            mib(self.wal_bytes_written),
            self.wal_syncs,
            mib(self.flush_bytes_written),
            self.flushes,
            mib(self.compaction_bytes_written),
            mib(self.compaction_bytes_read),
            self.compactions,
            self.trivial_moves
        )?;
        writeln!(f, "Write amplification: {:.2}", self.write_amplification)?;
        writeln!(
            f,
            "Recovery at open: {} log records replayed, {} bytes of unsynced log tails dropped",
            self.recovery_records_replayed, self.recovery_truncated_bytes
        )?;
        writeln!(
            f,
            "Value log: {} files, {:.1} MiB ({:.1} MiB garbage); {:.1} MiB appended, {} values separated; space amplification {:.2}",
            self.vlog_files,
            mib(self.vlog_bytes),
            mib(self.vlog_garbage_bytes),
            mib(self.vlog_bytes_written),
            self.vlog_values_written,
            self.space_amplification
        )?;
        writeln!(
            f,
            "GC: {} runs, {} files collected ({} waiting for snapshots), read {:.1} MiB, rewrote {:.1} MiB ({} values)",
            self.gc_runs,
            self.gc_files_collected,
            self.gc_files_pending,
            mib(self.gc_bytes_read),
            mib(self.gc_bytes_written),
            self.gc_values_relocated
        )?;
        if let Some(e) = &self.gc_last_error {
            writeln!(f, "GC error (GC retries later; writes go on): {e}")?;
        }
        writeln!(
            f,
            "Stalls: {:.3} s total; {} slowdowns, {} stops",
            self.stall_micros as f64 / 1e6,
            self.slowdown_count,
            self.stop_count
        )?;
        writeln!(
            f,
            "Block cache: {:.1}% hits ({} hits, {} misses, {:.1} MiB used); table cache: {:.1}% hits",
            ratio(self.block_cache_hits, self.block_cache_misses),
            self.block_cache_hits,
            self.block_cache_misses,
            mib(self.block_cache_usage_bytes),
            ratio(self.table_cache_hits, self.table_cache_misses)
        )?;
        writeln!(
            f,
            "Filters: {} checks, {} negatives ({:.1}% of probes avoided a block read)",
            self.filter_checks,
            self.filter_negatives,
            ratio(
                self.filter_negatives,
                self.filter_checks - self.filter_negatives.min(self.filter_checks)
            )
        )?;
        let direct = match (self.direct_io, self.direct_io_refusals) {
            (false, _) => "off".to_string(),
            (true, 0) => "on".to_string(),
            (true, n) => format!("on ({n} opens fell back to buffered: O_DIRECT refused)"),
        };
        writeln!(
            f,
            "Batched reads: backend {}; direct I/O {direct}; {} multi_gets ({} keys); {} reads in {} batches (io_uring {}, threads {}, sync {})",
            self.io_backend,
            self.multi_gets,
            self.multi_get_keys,
            self.batched_reads,
            self.read_batches_uring + self.read_batches_threads + self.read_batches_sync,
            self.read_batches_uring,
            self.read_batches_threads,
            self.read_batches_sync
        )?;
        if self.uring_waits > 0 {
            writeln!(
                f,
                "io_uring waits (process): {}, {:.1} reads in flight at a wait on average",
                self.uring_waits,
                self.uring_waited_in_flight as f64 / self.uring_waits as f64
            )?;
        }
        if let Some(e) = &self.background_error {
            writeln!(f, "BACKGROUND ERROR (writes refused until reopen): {e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_adds_counts_and_recomputes_the_amplifications() {
        let a = Stats {
            user_bytes_written: 100,
            wal_bytes_written: 100,
            flush_bytes_written: 100,
            levels: vec![(1, 100), (0, 0)],
            vlog_bytes: 100,
            vlog_garbage_bytes: 50,
            last_sequence: 7,
            ..Stats::default()
        };
        let b = Stats {
            user_bytes_written: 300,
            wal_bytes_written: 300,
            levels: vec![(2, 300), (1, 200), (1, 10)],
            last_sequence: 5,
            gc_last_error: Some("disk full".to_string()),
            ..Stats::default()
        };
        let t = Stats::sum(&[a.clone(), b]);
        assert_eq!(t.user_bytes_written, 400);
        assert_eq!(t.levels, vec![(3, 400), (1, 200), (1, 10)]);
        assert_eq!(t.last_sequence, 7);
        assert_eq!(t.gc_last_error.as_deref(), Some("disk full"));
        assert!((t.write_amplification - 500.0 / 400.0).abs() < 1e-9);
        // (610 table bytes + 100 value-log bytes) / (710 - 50 garbage).
        assert!((t.space_amplification - 710.0 / 660.0).abs() < 1e-9);
        let one = Stats::sum(std::slice::from_ref(&a));
        assert_eq!(one.levels, a.levels);
        assert!((one.write_amplification - 2.0).abs() < 1e-9);
        assert_eq!(Stats::sum(&[]).levels, Vec::new());
    }
}
