//! The write path: group commit (LevelDB's writer queue), memtable switches, stalls and
//! value-log rotation. Protocol and invariants: `docs/design.md` §4.
//!
//! The leader of the queue writes its group as ONE log record (WAL) or ONE frame (value log),
//! syncs once if any member asked for sync, inserts into the memtable, then publishes the
//! last sequence number. GC relocations form groups of their own and are re-checked by the
//! leader (`docs/design.md` §4.3).

use crate::batch::WriteBatch;
use crate::db::DbInner;
use crate::error::{Error, Result};
use crate::filename;
use crate::get::Found;
use crate::key::ValueKind;
use crate::log::LogWriter;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::sst::ReadParams;
use crate::stats::Counters;
use crate::vlog::{ValuePointer, VlogFile, VlogWriter};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest group a leader assembles.
const MAX_GROUP_BYTES: usize = 1 << 20;

struct Writer {
    batch: Option<WriteBatch>,
    sync: bool,
    disable_wal: bool,
    /// A flush request: switch the memtable even if it is not full.
    force_switch: bool,
    /// GC rewrites, applied only where still current (see the module docs).
    relocations: Option<Vec<Relocation>>,
    /// How many relocations were applied.
    relocated: usize,
    /// A pause: the leader runs no group, it holds the queue while its caller works
    /// (`DbInner::with_writes_paused`).
    pause: bool,
    done: bool,
    result: Option<Result<()>>,
}

/// A GC rewrite: put `key = value` (or, if the compaction filter removed it, a tombstone) if
/// the key's newest entry still points at `old`.
pub(crate) struct Relocation {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub old: ValuePointer,
    pub remove: bool,
}

/// The queue of pending writers.
#[derive(Default)]
pub struct WriteQueue {
    queue: Mutex<VecDeque<Arc<Mutex<Writer>>>>,
    cv: Condvar,
}

impl DbInner {
    /// Writes `batch` (or, with `force_switch`, freezes the memtable) through the queue.
    pub(crate) fn write(
        &self,
        wo: &WriteOptions,
        batch: Option<WriteBatch>,
        force_switch: bool,
    ) -> Result<()> {
        self.write_writer(Writer {
            batch,
            sync: wo.sync,
            disable_wal: wo.disable_wal,
            force_switch,
            relocations: None,
            relocated: 0,
            pause: false,
            done: false,
            result: None,
        })
        .map(|_| ())
    }

    /// Applies GC rewrites through the queue; returns how many were still current.
    pub(crate) fn write_relocations(&self, relocations: Vec<Relocation>) -> Result<usize> {
        self.write_writer(Writer {
            batch: None,
            sync: false,
            disable_wal: false,
            force_switch: false,
            relocations: Some(relocations),
            relocated: 0,
            pause: false,
            done: false,
            result: None,
        })
    }

    /// Makes every write so far durable (fsync of the WAL or value log).
    pub(crate) fn sync_log(&self) -> Result<()> {
        self.write(
            &WriteOptions {
                sync: true,
                disable_wal: false,
            },
            None,
            false,
        )
    }

    /// Runs `f` at the front of the write queue: no write is applied while it runs, and
    /// every write acknowledged before it is in the memtable and handed to the log.
    /// Lock order: take `gc_lock` (if at all) before calling this, `state` inside `f`.
    pub(crate) fn with_writes_paused<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut out = None;
        self.queue_turn(
            Writer {
                batch: None,
                sync: false,
                disable_wal: false,
                force_switch: false,
                relocations: None,
                relocated: 0,
                pause: true,
                done: false,
                result: None,
            },
            |_| {
                out = Some(f());
                Ok(())
            },
        )?;
        out.expect("the pause ran as leader")
    }

    fn write_writer(&self, writer: Writer) -> Result<usize> {
        self.queue_turn(writer, |group| self.write_group(group))
    }

    /// Enqueues `writer`; as leader, runs `run` over the group it picks and answers the group.
    fn queue_turn(
        &self,
        writer: Writer,
        run: impl FnOnce(&[Arc<Mutex<Writer>>]) -> Result<()>,
    ) -> Result<usize> {
        self.check_bg_error()?;
        let w = Arc::new(Mutex::new(writer));
        let mut q = self.writes.queue.lock();
        q.push_back(w.clone());
        loop {
            if w.lock().done {
                let mut g = w.lock();
                return g.result.take().unwrap_or(Ok(())).map(|()| g.relocated);
            }
            if Arc::ptr_eq(q.front().expect("queue holds us"), &w) {
                break;
            }
            self.writes.cv.wait(&mut q);
        }
        // Leader: pick the group.
        let group = pick_group(&q);
        drop(q);
        let r = run(&group);
        let mut q = self.writes.queue.lock();
        for g in &group {
            let front = q.pop_front().expect("group is at the front");
            debug_assert!(Arc::ptr_eq(&front, g));
            let mut g = g.lock();
            g.done = true;
            g.result = Some(r.clone());
        }
        self.writes.cv.notify_all();
        drop(q);
        let mut g = w.lock();
        g.result.take().unwrap_or(Ok(())).map(|()| g.relocated)
    }

    fn write_group(&self, group: &[Arc<Mutex<Writer>>]) -> Result<()> {
        self.check_bg_error()?;
        let force = group[0].lock().force_switch;
        self.make_room_for_write(force)?;
        let (mut batch, sync, disable_wal, relocations) = {
            let mut first = group[0].lock();
            let b = first.batch.take();
            (b, first.sync, first.disable_wal, first.relocations.take())
        };
        if let Some(rel) = relocations {
            let b = self.still_current(rel)?;
            group[0].lock().relocated = b.count() as usize;
            batch = (!b.is_empty()).then_some(b);
        }
        let mut sync = sync;
        for g in &group[1..] {
            let mut g = g.lock();
            sync |= g.sync;
            if let Some(b) = g.batch.take() {
                match batch.as_mut() {
                    Some(all) => all.append(&b),
                    None => batch = Some(b),
                }
            }
        }
        let Some(mut batch) = batch else {
            if sync && !force {
                return self.sync_logs();
            }
            return Ok(());
        };
        let first_seq = self.visible_seq.load(Ordering::Relaxed) + 1;
        batch.set_seq(first_seq);
        let pointers = if self.opts.separation() {
            self.append_vlog(&batch, first_seq, sync, disable_wal)?
        } else {
            if !disable_wal {
                self.append_wal(&batch, sync)?;
            }
            Vec::new()
        };
        let mem = self.super_version.read().mem.clone();
        if disable_wal {
            mem.mark_unlogged();
        }
        let mut seq = first_seq;
        let mut user_bytes = 0u64;
        let mut separated = 0u64;
        let mut refs = (0u64, 0u64);
        for (i, r) in batch.iter().enumerate() {
            let r = r.map_err(|e| Error::InvalidArgument(format!("malformed batch: {e}")))?;
            let value = r.value.unwrap_or_default();
            user_bytes += (r.key.len() + value.len()) as u64;
            match pointers.get(i).copied().flatten() {
                Some(p) => {
                    mem.add(seq, ValueKind::Pointer, r.key, &p.to_vec());
                    // One group is one frame, in one file.
                    refs = (p.file, refs.1 + u64::from(p.len));
                    separated += 1;
                }
                None => mem.add(seq, r.kind, r.key, value),
            }
            seq += 1;
        }
        if refs.1 > 0 {
            mem.add_vlog_refs(refs.0, refs.1);
        }
        self.visible_seq.store(seq - 1, Ordering::Release);
        Counters::add(&self.counters.user_bytes, user_bytes);
        Counters::add(&self.counters.vlog_values, separated);
        Counters::add(&self.counters.writes, group.len() as u64);
        Counters::add(&self.counters.write_groups, 1);
        Ok(())
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

    /// Appends the group to the WAL (one record), flushes it to the OS, syncs if asked.
    fn append_wal(&self, batch: &WriteBatch, sync: bool) -> Result<()> {
        let mut wal = self.wal.lock();
        let w = wal.as_mut().ok_or(Error::Closed)?;
        let r = (|| {
            w.add_record(batch.data())?;
            w.flush()?;
            if sync {
                w.sync()?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            self.set_bg_error(&e);
            return Err(e);
        }
        Counters::add(&self.counters.wal_bytes, batch.size_bytes() as u64);
        if sync {
            Counters::add(&self.counters.wal_syncs, 1);
        }
        Ok(())
    }

    /// Appends the group to the value log as one frame; returns where each record's value
    /// went if it was separated. With `disable_wal` only a group with separated values is
    /// written, as a frame recovery does not replay.
    fn append_vlog(
        &self,
        batch: &WriteBatch,
        first_seq: u64,
        sync: bool,
        disable_wal: bool,
    ) -> Result<Vec<Option<ValuePointer>>> {
        let threshold = self.opts.sep_threshold_bytes;
        if disable_wal
            && !batch
                .iter()
                .any(|r| r.is_ok_and(|r| r.value.is_some_and(|v| v.len() >= threshold)))
        {
            return Ok(Vec::new());
        }
        let mut head = self.vlog.head.lock();
        let w = head.as_mut().ok_or(Error::Closed)?;
        let a = match w.append_group(batch, first_seq, threshold, !disable_wal) {
            Ok(a) => a,
            // Nothing reached the file: the group is refused, the log stays usable.
            Err(e @ Error::InvalidArgument(_)) => return Err(e),
            Err(e) => {
                self.set_bg_error(&e);
                return Err(e);
            }
        };
        if sync {
            if let Err(e) = w.sync() {
                self.set_bg_error(&e);
                return Err(e);
            }
            Counters::add(&self.counters.wal_syncs, 1);
        }
        Counters::add(&self.counters.vlog_bytes, a.bytes);
        Ok(a.pointers)
    }

    /// Syncs whichever log is live (a sync request without a batch).
    pub(crate) fn sync_logs(&self) -> Result<()> {
        let r = if self.opts.separation() {
            self.vlog.sync()
        } else {
            match self.wal.lock().as_mut() {
                Some(w) => w.sync(),
                None => Ok(()),
            }
        };
        if let Err(e) = &r {
            self.set_bg_error(e);
        } else {
            Counters::add(&self.counters.wal_syncs, 1);
        }
        r
    }

    /// Ensures the memtable has room, freezing it when full (or when `force`), and applies
    /// the L0 slowdown and stop triggers. Runs in the leader only.
    fn make_room_for_write(&self, mut force: bool) -> Result<()> {
        let mut allow_delay = !force;
        let mut st = self.state.lock();
        if self.opts.separation() {
            self.maybe_rotate_vlog(&mut st)?;
        }
        loop {
            self.check_bg_error()?;
            let l0 = st.versions.current().levels[0].len();
            if allow_delay && l0 >= self.opts.l0_slowdown_writes_trigger {
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
            // its span is capped too: the log after the durable head can be neither collected
            // nor skipped by recovery.
            let span = self.vlog.shared.appended.load(Ordering::Relaxed) - st.mem_vlog_start;
            let full = st.mem.approximate_bytes() >= self.opts.write_buffer_bytes
                || (self.opts.separation() && span >= self.opts.vlog_file_bytes.saturating_mul(4));
            if !force && !full {
                return Ok(());
            }
            if force && st.mem.is_empty() {
                return Ok(());
            }
            if st.imms.len() >= self.opts.max_immutable_memtables
                || l0 >= self.opts.l0_stop_writes_trigger
            {
                let t = Instant::now();
                Counters::add(&self.counters.stops, 1);
                self.bg_cv.notify_all();
                self.done_cv.wait_for(&mut st, Duration::from_millis(100));
                Counters::add(&self.counters.stall_micros, t.elapsed().as_micros() as u64);
                continue;
            }
            if self.opts.separation() {
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
                st.mem_vlog_start = self.vlog.shared.appended.load(Ordering::Relaxed);
                self.install_super_version(&mut st);
                self.bg_cv.notify_all();
                force = false;
                continue;
            }
            // Switch to a new WAL and memtable. The old WAL is synced first so that the
            // durable state stays a prefix of the acknowledged history (an unsynced tail of
            // the old WAL must not be lost while a synced write of the new WAL survives).
            let number = st.versions.new_file_number();
            let path = filename::wal(&self.dir, number);
            let r = (|| {
                let mut wal = self.wal.lock();
                if let Some(old) = wal.as_mut() {
                    old.sync()?;
                }
                let new = LogWriter::new(self.fs.create(&path)?)?;
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
    /// is synced first, for the same prefix reason as a WAL switch. Call with `state` held.
    fn maybe_rotate_vlog(&self, st: &mut crate::db::DbState) -> Result<()> {
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
            w.sync()?;
            let mut new = VlogWriter::new(
                self.fs.create(&entry.path)?,
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

/// The writers at the front of the queue that the leader (the first) writes together.
fn pick_group(q: &VecDeque<Arc<Mutex<Writer>>>) -> Vec<Arc<Mutex<Writer>>> {
    let first = q.front().expect("leader").clone();
    let (sync, disable_wal, alone, mut size) = {
        let f = first.lock();
        (
            f.sync,
            f.disable_wal,
            f.force_switch || f.relocations.is_some() || f.pause,
            f.batch.as_ref().map_or(0, |b| b.size_bytes()),
        )
    };
    let mut group = vec![first];
    if alone {
        return group;
    }
    // Small leaders do not wait behind a huge group (LevelDB's 128 KiB rule).
    let max = if size <= 128 << 10 {
        size + (128 << 10)
    } else {
        MAX_GROUP_BYTES
    };
    for w in q.iter().skip(1) {
        let g = w.lock();
        if g.force_switch
            || g.relocations.is_some()
            || g.pause
            || (g.sync && !sync)
            || g.disable_wal != disable_wal
        {
            break;
        }
        let n = g.batch.as_ref().map_or(0, |b| b.size_bytes());
        if size + n > max {
            break;
        }
        size += n;
        drop(g);
        group.push(w.clone());
    }
    group
}
