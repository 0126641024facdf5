//! The engine's side of the write path: the commit log it gives the commit pipeline
//! (`commit.rs`), what the pipeline's environment does (apply to the memtable, make room:
//! stalls, memtable switches, value-log rotation), and the exclusive writes (flush requests,
//! GC relocations, pauses). Protocol and invariants: `docs/design.md` §4.
//!
//! GC relocations run in an exclusive turn and are re-checked there (`docs/design.md` §4.3).

use crate::batch::WriteBatch;
use crate::commit::{Appended, CommitEnv, CommitLog};
use crate::error::{Error, Result};
use crate::filename;
use crate::get::Found;
use crate::key::SeqNo;
use crate::key::ValueKind;
use crate::log::LogWriter;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::sst::ReadParams;
use crate::state::{DbInner, DbLog};
use crate::stats::Counters;
use crate::vlog::writer::create_head_file;
use crate::vlog::{ValuePointer, VlogFile, VlogWriter};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A GC rewrite: put `key = value` (or, if the compaction filter removed it, a tombstone) if
/// the key's newest entry still points at `old`.
pub(crate) struct Relocation {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub old: ValuePointer,
    pub remove: bool,
}

/// How full L0 is, for write stalls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum L0Pressure {
    Fine,
    /// Each write is delayed by about 1 ms.
    Slow,
    /// Writes that need a memtable switch wait for compaction.
    Stop,
}

impl DbInner {
    /// L0's pressure on writers: by file count (`l0_slowdown_writes_trigger`,
    /// `l0_stop_writes_trigger`) for L0 SSTables; with the L0 tier on, by the bytes of its
    /// tables against `l0_tier_bytes` (slow from 3/4, stop when full).
    pub(crate) fn l0_pressure(&self, v: &crate::version::Version) -> L0Pressure {
        let o = &self.opts;
        // Called before every write: with the tier off (open refuses a version holding tier
        // tables then) L0's length is its SSTable count, no walk over its files needed.
        let (ssts, tier) = if o.l0_tier_dir.is_some() {
            v.l0_usage()
        } else {
            (v.levels[0].len(), 0)
        };
        if ssts >= o.l0_stop_writes_trigger || tier >= o.l0_tier_bytes {
            L0Pressure::Stop
        } else if ssts >= o.l0_slowdown_writes_trigger || tier >= o.l0_tier_bytes / 4 * 3 {
            L0Pressure::Slow
        } else {
            L0Pressure::Fine
        }
    }
}

impl CommitEnv for DbInner {
    fn check_error(&self) -> Result<()> {
        self.check_bg_error()
    }

    fn set_error(&self, e: &Error) {
        self.set_bg_error(e)
    }

    fn before_write(&self) -> bool {
        let (slow, full) = {
            // Read through the load's guard, without cloning the `Arc` (a shared counter
            // every writer would bounce) and without sleeping while holding it.
            let sv = self.super_version.load();
            let slow = self.l0_pressure(&sv.version) >= L0Pressure::Slow;
            let full = sv.mem.approximate_bytes() >= self.opts.write_buffer_bytes
                || match self.commit.log() {
                    DbLog::Wal(_) => false,
                    DbLog::Vlog { .. } => {
                        let head = self.vlog.shared.number.load(Ordering::Acquire);
                        let head_full = sv
                            .vlog_files
                            .get(&head)
                            .is_some_and(|f| f.size() >= self.opts.vlog_file_bytes);
                        head_full || self.vlog_span() >= self.opts.memtable_log_span()
                    }
                };
            (slow, full)
        };
        if slow {
            // Spread the stall over many writes instead of stopping them all at the stop
            // trigger: each writer sleeps once, alone.
            std::thread::sleep(Duration::from_millis(1));
            Counters::add(&self.counters.stall_micros, 1000);
            Counters::add(&self.counters.slowdowns, 1);
        }
        full
    }

    fn make_room(&self) -> Result<()> {
        // The writer asking already slept for the slowdown in `before_write`.
        self.make_room_for_write(false, false)
    }

    fn apply(
        &self,
        batch: &WriteBatch,
        pointers: &[Option<ValuePointer>],
        disable_wal: bool,
    ) -> Result<()> {
        let sv = self.super_version.load();
        let mem = &sv.mem;
        if disable_wal {
            mem.mark_unlogged();
        }
        let mut user_bytes = 0u64;
        let mut separated = 0u64;
        let mut refs = (0u64, 0u64);
        // The batch's entries go in together (their skiplist searches overlap), when
        // `inserts` drops: at the end of the loop, or at a malformed record, after those
        // before it, as one by one.
        let mut inserts = mem.inserts();
        for (seq, (i, r)) in (batch.seq()..).zip(batch.iter().enumerate()) {
            let r = r.map_err(|e| Error::InvalidArgument(format!("malformed batch: {e}")))?;
            let value = r.value.unwrap_or_default();
            user_bytes += (r.key.len() + value.len()) as u64;
            match pointers.get(i).copied().flatten() {
                Some(p) => {
                    inserts.add(seq, ValueKind::Pointer, r.key, &p.to_vec());
                    // One batch is one frame, in one file.
                    refs = (p.file, refs.1 + u64::from(p.len));
                    separated += 1;
                }
                None => inserts.add(seq, r.kind, r.key, value),
            }
        }
        drop(inserts);
        if refs.1 > 0 {
            mem.add_vlog_refs(refs.0, refs.1);
        }
        Counters::add(&self.counters.user_bytes, user_bytes);
        Counters::add(&self.counters.vlog_values, separated);
        Ok(())
    }

    fn committed(&self, writers: usize, synced: bool, appended: &Appended) {
        Counters::add(&self.counters.wal_bytes, appended.wal_bytes);
        Counters::add(&self.counters.vlog_bytes, appended.vlog_bytes);
        Counters::add(&self.counters.writes, writers as u64);
        Counters::add(&self.counters.write_groups, 1);
        if synced {
            Counters::add(&self.counters.wal_syncs, 1);
        }
    }
}

impl DbInner {
    /// The last sequence number readers may see.
    pub(crate) fn visible_seq(&self) -> SeqNo {
        self.commit.visible_seq()
    }

    /// Writes `batch` (or, with `force_switch`, freezes the memtable).
    pub(crate) fn write(
        &self,
        wo: &WriteOptions,
        batch: Option<WriteBatch>,
        force_switch: bool,
    ) -> Result<()> {
        if force_switch {
            return self.commit.exclusive(self, || {
                self.check_bg_error()?;
                self.make_room_for_write(true, false)?;
                Ok(((), None))
            });
        }
        self.commit.commit(self, batch, wo.sync, wo.disable_wal)
    }

    /// Applies GC rewrites; returns how many were still current. The check and the write
    /// run in one exclusive turn, so no user write of the same key comes between them.
    pub(crate) fn write_relocations(&self, relocations: Vec<Relocation>) -> Result<usize> {
        self.commit.exclusive(self, || {
            self.check_bg_error()?;
            self.make_room_for_write(false, true)?;
            let b = self.still_current(relocations)?;
            Ok((b.count() as usize, Some(b)))
        })
    }

    /// Makes every write so far durable (fsync of the WAL or value log).
    pub(crate) fn sync_log(&self) -> Result<()> {
        self.commit.commit(self, None, true, false)
    }

    /// Runs `f` while no write is in flight: every write acknowledged before it is in the
    /// memtable and handed to the log, and none starts until it returns.
    /// Lock order: take `gc_lock` (if at all) before calling this, `state` inside `f`.
    pub(crate) fn with_writes_paused<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.commit.exclusive(self, || Ok((f()?, None)))
    }

    /// The relocations whose key still points at their old entry, as a batch of puts.
    fn still_current(&self, rel: Vec<Relocation>) -> Result<WriteBatch> {
        let (sv, seq) = self.read_view(&crate::options::ReadOptions::default());
        let params = ReadParams {
            verify_checksums: true,
            fill_cache: true,
            readahead: 0,
        };
        let mut b = WriteBatch::new();
        for r in rel {
            if let Some(Found::Pointer(p)) = self.get_entry(&sv, &r.key, seq, params)? {
                if ValuePointer::decode(&p) == Some(r.old) {
                    if r.remove {
                        b.delete(&r.key);
                    } else {
                        b.put(&r.key, &r.value);
                    }
                }
            }
        }
        Ok(b)
    }

    /// Bytes appended to the value log since the current memtable began.
    fn vlog_span(&self) -> u64 {
        let start = self.mem_vlog_start.load(Ordering::Relaxed);
        self.vlog
            .shared
            .appended
            .load(Ordering::Relaxed)
            .saturating_sub(start)
    }

    /// Syncs whichever log is live (outside the pipeline: callers that need no ordering
    /// against writes in flight, such as a checkpoint in its exclusive turn).
    pub(crate) fn sync_logs(&self) -> Result<()> {
        let r = self.commit.log().sync();
        if let Err(e) = &r {
            self.set_bg_error(e);
        } else {
            Counters::add(&self.counters.wal_syncs, 1);
        }
        r
    }

    /// Ensures the memtable has room, freezing it when full (or when `force`), and applies
    /// the L0 slowdown and stop triggers. Runs with no other commit in flight (the leader's
    /// turn, or an exclusive one).
    fn make_room_for_write(&self, mut force: bool, mut allow_delay: bool) -> Result<()> {
        let mut st = self.state.lock();
        let wal = match self.commit.log() {
            DbLog::Wal(wal) => Some(wal),
            DbLog::Vlog { .. } => None,
        };
        if wal.is_none() {
            self.maybe_rotate_vlog(&mut st)?;
        }
        loop {
            self.check_bg_error()?;
            let l0 = self.l0_pressure(&st.versions.current());
            if allow_delay && l0 >= L0Pressure::Slow {
                // Spread the stall over many writes instead of stopping them all at 40 files.
                drop(st);
                std::thread::sleep(Duration::from_millis(1));
                Counters::add(&self.counters.stall_micros, 1000);
                Counters::add(&self.counters.slowdowns, 1);
                allow_delay = false;
                st = self.state.lock();
                continue;
            }
            // With separation, a memtable of pointers covers far more log than its own size;
            // its span is capped too (`Options::memtable_log_span`).
            let span = self.vlog_span();
            let full = st.mem.approximate_bytes() >= self.opts.write_buffer_bytes
                || (wal.is_none() && span >= self.opts.memtable_log_span());
            if !force && !full {
                return Ok(());
            }
            if force && st.mem.is_empty() {
                return Ok(());
            }
            if st.imms.len() >= self.opts.max_immutable_memtables || l0 == L0Pressure::Stop {
                let t = Instant::now();
                Counters::add(&self.counters.stops, 1);
                self.bg_cv.notify_all();
                self.done_cv.wait_for(&mut st, Duration::from_millis(100));
                Counters::add(&self.counters.stall_micros, t.elapsed().as_micros() as u64);
                continue;
            }
            let Some(wal) = wal else {
                // The value log is the WAL: sync it (a table must never point at bytes a
                // crash could take back) and note where the new memtable's records start.
                let start = {
                    let mut head = self.vlog.head.lock();
                    let w = head.as_mut().ok_or(Error::Closed)?;
                    if let Err(e) = w.sync() {
                        drop(head);
                        self.set_bg_error(&e);
                        return Err(e);
                    }
                    (w.number(), w.position())
                };
                let wal_number = st.mem.wal_number();
                let old = std::mem::replace(
                    &mut st.mem,
                    Arc::new(MemTable::with_vlog_start(
                        wal_number,
                        Some(start),
                        self.opts.write_buffer_bytes,
                    )),
                );
                st.imms.push(old);
                self.mem_vlog_start.store(
                    self.vlog.shared.appended.load(Ordering::Relaxed),
                    Ordering::Relaxed,
                );
                self.install_super_version(&mut st);
                self.bg_cv.notify_all();
                force = false;
                continue;
            };
            // Switch to a new WAL and memtable. The old WAL is synced first so that the
            // durable state stays a prefix of the acknowledged history (an unsynced tail of
            // the old WAL must not be lost while a synced write of the new WAL survives), and
            // sealed with a sync mark, so that recovery can tell it whole from one cut at a
            // record boundary (`docs/format/wal.md` section 5).
            let number = st.versions.new_file_number();
            let path = filename::wal(&self.dir, number);
            let r = (|| {
                let mut wal = wal.lock();
                if let Some(old) = wal.as_mut() {
                    old.seal()?;
                }
                let new = LogWriter::new(crate::io::create_append_file(
                    &*self.fs,
                    &path,
                    self.opts.wal_mmap,
                )?)?;
                self.fs.sync_dir(&self.dir)?;
                *wal = Some(new);
                Ok(())
            })();
            if let Err(e) = r {
                self.set_bg_error(&e);
                return Err(e);
            }
            let old = std::mem::replace(
                &mut st.mem,
                Arc::new(MemTable::new(number, self.opts.write_buffer_bytes)),
            );
            st.imms.push(old);
            self.install_super_version(&mut st);
            self.bg_cv.notify_all();
            force = false;
        }
    }
}

impl DbInner {
    /// Seals the head value-log file when it is full and starts the next one. The old file
    /// is synced first, for the same prefix reason as a WAL switch, and ends with a sync mark
    /// (`docs/format/vlog.md` section 6: recovery refuses a rotated file without one once a
    /// later file holds frames). Call with `state` held.
    fn maybe_rotate_vlog(&self, st: &mut crate::state::DbState) -> Result<()> {
        let mut head = self.vlog.head.lock();
        let Some(w) = head.as_mut() else {
            return Ok(());
        };
        if w.position() < self.opts.vlog_file_bytes {
            return Ok(());
        }
        let number = st.versions.new_file_number();
        let entry = VlogFile::new(&self.dir, number, 0);
        let r = (|| {
            w.seal()?;
            let mut new = VlogWriter::new(
                create_head_file(&*self.fs, &entry.path, self.opts.vlog_head_mmap)?,
                entry.clone(),
                self.vlog.shared.clone(),
                self.opts.vlog_buffer_bytes,
            );
            new.sync()?;
            self.fs.sync_dir(&self.dir)?;
            Ok(new)
        })();
        match r {
            Ok(new) => *head = Some(new),
            Err(e) => {
                drop(head);
                self.set_bg_error(&e);
                return Err(e);
            }
        }
        drop(head);
        let mut files = (*st.vlog_files).clone();
        files.insert(number, entry);
        st.vlog_files = Arc::new(files);
        self.install_super_version(st);
        Ok(())
    }
}
