//! One compaction: merge the plan's input tables, drop what no reader can see, and write new
//! tables of about `target_file_size` bytes into the output level. The job only writes new
//! files; installing them (and deleting the inputs) is the caller's MANIFEST edit.
//!
//! Which entries are dropped, why outputs are cut only between user keys, and why the job
//! counts no value-log garbage (the flush that shadowed a pointer counted it):
//! `docs/design.md` §6.2, §6.3. The one exception: with the L0 tier on, the tier's pointers
//! to values below `sep_threshold_bytes` are replaced by their values in SSTable outputs,
//! and the log entries they named are garbage (§2.9).

use super::filter::{CompactionFilter, FilterReads, FilterReason, FilterRun, FilterStats};
use super::CompactionPlan;
use crate::error::{Error, Result};
use crate::filename;
use crate::io::Fs;
use crate::iter::{InternalIterator, LevelIterator, MergingIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::l0tier::{L0TableWriter, L0Value, TierDir};
use crate::sst::{ReadParams, TableBuilder, TableOptions};
use crate::table_cache::TableCache;
use crate::version::{FileMeta, Version};
use crate::vlog::{format::separated_value_len, ValuePointer, Vlog, VlogFileSet};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Everything a job needs from the database.
pub struct JobEnv<'a> {
    pub dir: &'a Path,
    pub fs: &'a Arc<dyn Fs>,
    pub tables: &'a Arc<TableCache>,
    pub table_opts: TableOptions,
    pub target_file_size: u64,
    pub readahead: usize,
    pub verify_checksums: bool,
    pub smallest_snapshot: SeqNo,
    /// The version the plan was made from (to know what deeper levels hold).
    pub version: &'a Version,
    /// Allocates an output file number (and protects it from obsolete-file deletion).
    pub new_file_number: &'a (dyn Fn() -> u64 + Sync),
    pub shutting_down: &'a AtomicBool,
    /// The compaction filter, if one is set and this run may use it.
    pub(crate) filter: Option<JobFilter<'a>>,
    /// With the L0 tier on: the log its pointers name, read to copy values into SSTables.
    pub(crate) log_values: Option<LogValues<'a>>,
}

/// Whether compaction copies the value `ptr` names (of a key of `key_len` bytes) into an
/// SSTable: when it is shorter than `below` (`Options::unseparate_below`).
pub(crate) fn copied(ptr: &ValuePointer, key_len: usize, below: usize) -> bool {
    separated_value_len(ptr.len, key_len).is_some_and(|v| v < below)
}

/// The value log as a job reads it to turn the L0 tier's pointers back into values
/// (`docs/design.md` §2.9).
pub(crate) struct LogValues<'a> {
    /// Pointers to values shorter than this are copied (`Options::unseparate_below`).
    pub below: usize,
    /// The log, and the files of the super version current when the job started (`None`
    /// for the flush of a recovered log, which writes an L0 tier table and copies nothing).
    pub source: Option<(&'a Vlog, Arc<VlogFileSet>)>,
}

impl LogValues<'_> {
    /// The pointer the entry `p` (with `value`) holds, if it is a pointer to a value an
    /// SSTable takes inline.
    pub(crate) fn copied_pointer(
        &self,
        p: &key::ParsedKey<'_>,
        value: &[u8],
    ) -> Result<Option<ValuePointer>> {
        if p.kind != ValueKind::Pointer {
            return Ok(None);
        }
        let ptr = ValuePointer::decode_or_corrupt(value, "<compaction input pointer>")?;
        Ok(copied(&ptr, p.user_key.len(), self.below).then_some(ptr))
    }

    /// The value a copied pointer of `user_key` names. `None` when its file has left the log:
    /// GC retires a file only once no reader can see an entry pointing into it (§9.4), so
    /// such an entry is shadowed for everyone and is written as it is, for a later
    /// compaction to drop.
    fn read(&self, user_key: &[u8], ptr: &ValuePointer) -> Result<Option<Vec<u8>>> {
        let Some((vlog, files)) = &self.source else {
            return Ok(None);
        };
        if !files.contains_key(&ptr.file) {
            return Ok(None);
        }
        vlog.read(files, user_key, ptr).map(Some)
    }
}

/// The compaction filter as a job uses it.
#[derive(Clone, Copy)]
pub(crate) struct JobFilter<'a> {
    pub filter: &'a dyn CompactionFilter,
    pub reads: &'a dyn FilterReads,
    /// The largest snapshot registered when the job started (`None`: no snapshot).
    pub largest_snapshot: Option<SeqNo>,
}

impl<'a> JobFilter<'a> {
    pub(crate) fn run(&self, reason: FilterReason, level: usize) -> FilterRun<'a> {
        FilterRun::new(
            self.filter,
            self.reads,
            reason,
            level,
            self.largest_snapshot,
        )
    }
}

/// What a job wrote.
#[derive(Debug, Default)]
pub struct JobOutput {
    pub files: Vec<FileMeta>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub entries_dropped: u64,
    /// What the compaction filter removed.
    pub filter: FilterStats,
    /// Per value-log file: bytes of entries whose values were copied into SSTables (garbage
    /// now), and how many values that was.
    pub vlog_garbage: BTreeMap<u64, u64>,
    pub values_copied: u64,
}

/// The table being written.
enum Current {
    Sst(u64, TableBuilder),
    /// An L0 table of the L0 tier (a flush with the tier on).
    Tier(u64, L0TableWriter),
}

impl Current {
    fn number(&self) -> u64 {
        match self {
            Current::Sst(n, _) | Current::Tier(n, _) => *n,
        }
    }
}

/// Writes tables from a stream of entries: SSTables cut at `target_file_size`, or for a
/// flush with the L0 tier on, one L0 table in the tier's directory.
pub struct OutputWriter<'a> {
    env: &'a JobEnv<'a>,
    tier: Option<&'a TierDir>,
    current: Option<Current>,
    /// Log bytes the current tier table points at that compaction will copy.
    log_bytes: u64,
    /// The internal key of a copied value (its kind changed from pointer to value).
    scratch: Vec<u8>,
    pub out: JobOutput,
}

impl<'a> OutputWriter<'a> {
    /// Writes SSTables (compaction outputs).
    pub fn new(env: &'a JobEnv<'a>) -> Self {
        OutputWriter {
            env,
            tier: None,
            current: None,
            log_bytes: 0,
            scratch: Vec::new(),
            out: JobOutput::default(),
        }
    }

    /// Writes a flush's L0 table: into the L0 tier when it is on, else an SSTable.
    pub fn for_flush(env: &'a JobEnv<'a>) -> Self {
        OutputWriter {
            tier: env.tables.tier().map(|t| &**t),
            ..Self::new(env)
        }
    }

    /// Whether the current table is full (the caller cuts only at a new user key).
    pub fn full(&self) -> bool {
        match &self.current {
            Some(Current::Sst(_, b)) => b.file_size() >= self.env.target_file_size,
            Some(Current::Tier(..)) | None => false,
        }
    }

    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if self.current.is_none() {
            let number = (self.env.new_file_number)();
            self.current = Some(match self.tier {
                Some(t) => Current::Tier(number, t.create(number)?),
                None => {
                    let file = self.env.fs.create(&filename::table(self.env.dir, number))?;
                    Current::Sst(number, TableBuilder::new(file, self.env.table_opts))
                }
            });
        }
        // With the tier on: the parsed key and the pointer compaction copies, if it is one.
        let mut copied = None;
        if let Some(l) = &self.env.log_values {
            if let Some(p) = key::parse_internal_key(ikey) {
                copied = l.copied_pointer(&p, value)?.map(|ptr| (l, p, ptr));
            }
        }
        match self.current.as_mut().expect("just set") {
            Current::Sst(_, b) => {
                if let Some((l, p, ptr)) = copied {
                    if let Some(v) = l.read(p.user_key, &ptr)? {
                        self.scratch.clear();
                        key::encode_internal_key(
                            &mut self.scratch,
                            p.user_key,
                            p.seq,
                            ValueKind::Value,
                        );
                        *self.out.vlog_garbage.entry(ptr.file).or_insert(0) += u64::from(ptr.len);
                        self.out.values_copied += 1;
                        return b.add(&self.scratch, &v);
                    }
                }
                b.add(ikey, value)
            }
            // Pointer entries keep their pointer: the value stays where the log put it.
            Current::Tier(_, w) => {
                if let Some((_, _, ptr)) = copied {
                    self.log_bytes += u64::from(ptr.len);
                }
                w.add(ikey, L0Value::Inline(value))
            }
        }
    }

    /// Finishes (and syncs) the current table, if any.
    pub fn finish_table(&mut self) -> Result<()> {
        let meta = match self.current.take() {
            None => return Ok(()),
            Some(Current::Sst(number, b)) => {
                let s = b.finish()?;
                FileMeta {
                    number,
                    size: s.file_size,
                    smallest: s.smallest,
                    largest: s.largest,
                    num_entries: s.num_entries,
                    ..Default::default()
                }
            }
            // Syncs the table and the tier's directory, then maps and checks it here, off
            // the readers' path.
            Some(Current::Tier(number, w)) => {
                let m = w.finish()?;
                if let Some(t) = self.tier {
                    t.table(number)?;
                }
                FileMeta {
                    number,
                    size: m.file_size,
                    smallest: m.smallest,
                    largest: m.largest,
                    num_entries: m.entries,
                    tier: true,
                    log_bytes: std::mem::take(&mut self.log_bytes),
                    reader: Default::default(),
                }
            }
        };
        self.out.bytes_written += meta.size;
        self.out.files.push(meta);
        Ok(())
    }

    /// Finishes the last table and syncs the directory so the new names are durable.
    pub fn finish(mut self) -> Result<JobOutput> {
        self.finish_table()?;
        if self.out.files.iter().any(|f| !f.tier) {
            self.env.fs.sync_dir(self.env.dir)?;
        }
        Ok(self.out)
    }

    /// Removes what was written (after an error); best effort, leftovers are orphans that the
    /// next open deletes.
    pub fn abandon(self) {
        let mut numbers: Vec<(u64, bool)> =
            self.out.files.iter().map(|f| (f.number, f.tier)).collect();
        numbers.extend(
            self.current
                .as_ref()
                .map(|c| (c.number(), matches!(c, Current::Tier(..)))),
        );
        drop(self.current);
        for (n, tier) in numbers {
            match self.tier.filter(|_| tier) {
                Some(t) => t.remove(n),
                None => {
                    let _ = self.env.fs.remove(&filename::table(self.env.dir, n));
                }
            }
        }
    }
}

/// Builds the merged input iterator of a plan.
fn input_iter(plan: &CompactionPlan, env: &JobEnv) -> Result<MergingIterator> {
    let params = ReadParams {
        verify_checksums: env.verify_checksums,
        fill_cache: false,
        readahead: env.readahead,
    };
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    if plan.level == 0 {
        for f in &plan.inputs {
            children.push(env.tables.iter(f, params)?);
        }
    } else {
        children.push(Box::new(LevelIterator::new(
            plan.inputs.clone(),
            env.tables.clone(),
            params,
        )));
    }
    if !plan.next_inputs.is_empty() {
        children.push(Box::new(LevelIterator::new(
            plan.next_inputs.clone(),
            env.tables.clone(),
            params,
        )));
    }
    Ok(MergingIterator::new(children))
}

/// Whether no level below `output_level` may contain `user_key`.
fn is_base_level_for(v: &Version, output_level: usize, user_key: &[u8]) -> bool {
    v.levels.iter().skip(output_level + 1).all(|files| {
        let i = files.partition_point(|f| key::user_key(&f.largest) < user_key);
        i >= files.len() || key::user_key(&files[i].smallest) > user_key
    })
}

/// Runs a (non-trivial) compaction.
pub fn run(plan: &CompactionPlan, env: &JobEnv) -> Result<JobOutput> {
    let mut out = OutputWriter::new(env);
    match merge(plan, env, &mut out) {
        Ok(()) => {
            out.out.bytes_read = plan.input_bytes();
            out.finish()
        }
        Err(e) => {
            out.abandon();
            Err(e)
        }
    }
}

fn merge(plan: &CompactionPlan, env: &JobEnv, out: &mut OutputWriter) -> Result<()> {
    let mut it = input_iter(plan, env)?;
    it.seek_to_first();
    let mut current_key: Vec<u8> = Vec::new();
    let mut has_current = false;
    let mut last_seq_for_key = SeqNo::MAX;
    let mut n = 0u64;
    let mut filter = env
        .filter
        .map(|f| f.run(FilterReason::Compaction, plan.output_level));
    let mut tombstone = Vec::new();
    while it.valid() {
        n += 1;
        if n.is_multiple_of(1024) && env.shutting_down.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        let ikey = it.key();
        let p = key::parse_internal_key(ikey)
            .ok_or_else(|| Error::corruption("<compaction input>", 0, "malformed internal key"))?;
        if !has_current || p.user_key != current_key.as_slice() {
            if out.full() {
                out.finish_table()?;
            }
            current_key.clear();
            current_key.extend_from_slice(p.user_key);
            has_current = true;
            last_seq_for_key = SeqNo::MAX;
        }
        // The filter sees the newest entry of each key; a record it removes becomes a
        // tombstone of the same sequence number, dropped below by the ordinary rule when
        // nothing older can exist (`docs/design.md` §6.4).
        let mut kind = p.kind;
        if last_seq_for_key == SeqNo::MAX {
            if let Some(f) = filter.as_mut() {
                if f.eligible(p.seq, p.kind) && f.removes(p.user_key, p.seq, p.kind, it.value()) {
                    kind = ValueKind::Delete;
                }
            }
        }
        let drop = if last_seq_for_key <= env.smallest_snapshot {
            true
        } else {
            kind == ValueKind::Delete
                && p.seq <= env.smallest_snapshot
                && is_base_level_for(env.version, plan.output_level, p.user_key)
        };
        last_seq_for_key = p.seq;
        if drop || kind != p.kind {
            // A tier pointer this job drops: its log entry is garbage, counted here (and only
            // here: flushes leave the tier's pointers to the compaction that removes them).
            if let Some(l) = &env.log_values {
                if let Some(ptr) = l.copied_pointer(&p, it.value())? {
                    *out.out.vlog_garbage.entry(ptr.file).or_insert(0) += u64::from(ptr.len);
                }
            }
        }
        if drop {
            out.out.entries_dropped += 1;
        } else if kind != p.kind {
            tombstone.clear();
            key::encode_internal_key(&mut tombstone, p.user_key, p.seq, ValueKind::Delete);
            out.add(&tombstone, &[])?;
        } else {
            out.add(ikey, it.value())?;
        }
        it.next();
    }
    if let Some(f) = filter {
        out.out.filter = f.stats;
    }
    it.status()
}
