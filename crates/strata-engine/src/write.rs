//! The write path: group commit (LevelDB's writer queue).
//!
//! Protocol: a writer enqueues its batch and waits until it is either done (a leader wrote it)
//! or at the front of the queue (it is now the leader). The leader makes room in the memtable
//! (possibly stalling on a deep L0 or too many immutable memtables), takes every queued batch
//! behind it up to `MAX_GROUP_BYTES` (never a sync batch into a non-sync leader's group, never
//! mixing WAL and no-WAL), appends them to the WAL as ONE record, flushes it to the OS, syncs
//! once if any member asked for sync, inserts into the memtable, publishes the last sequence
//! number, and wakes the members. Any WAL error is sticky (`DbInner::set_bg_error`).

use crate::batch::WriteBatch;
use crate::db::DbInner;
use crate::error::{Error, Result};
use crate::filename;
use crate::log::LogWriter;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::stats::Counters;
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
    done: bool,
    result: Option<Result<()>>,
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
        self.check_bg_error()?;
        let w = Arc::new(Mutex::new(Writer {
            batch,
            sync: wo.sync,
            disable_wal: wo.disable_wal,
            force_switch,
            done: false,
            result: None,
        }));
        let mut q = self.writes.queue.lock();
        q.push_back(w.clone());
        loop {
            if w.lock().done {
                return w.lock().result.take().unwrap_or(Ok(()));
            }
            if Arc::ptr_eq(q.front().expect("queue holds us"), &w) {
                break;
            }
            self.writes.cv.wait(&mut q);
        }
        // Leader: pick the group.
        let group = pick_group(&q);
        drop(q);
        let r = self.write_group(&group);
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
        let r = w.lock().result.take().unwrap_or(Ok(()));
        r
    }

    fn write_group(&self, group: &[Arc<Mutex<Writer>>]) -> Result<()> {
        self.check_bg_error()?;
        let force = group[0].lock().force_switch;
        self.make_room_for_write(force)?;
        let (mut batch, sync, disable_wal) = {
            let mut first = group[0].lock();
            let b = first.batch.take();
            (b, first.sync, first.disable_wal)
        };
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
            return Ok(());
        };
        let first_seq = self.visible_seq.load(Ordering::Relaxed) + 1;
        batch.set_seq(first_seq);
        if !disable_wal {
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
        }
        let mem = self.super_version.read().mem.clone();
        let mut seq = first_seq;
        let mut user_bytes = 0u64;
        for r in batch.iter() {
            let r = r.map_err(|e| Error::InvalidArgument(format!("malformed batch: {e}")))?;
            let value = r.value.unwrap_or_default();
            user_bytes += (r.key.len() + value.len()) as u64;
            mem.add(seq, r.kind, r.key, value);
            seq += 1;
        }
        self.visible_seq.store(seq - 1, Ordering::Release);
        Counters::add(&self.counters.user_bytes, user_bytes);
        Counters::add(&self.counters.writes, group.len() as u64);
        Counters::add(&self.counters.write_groups, 1);
        Ok(())
    }

    /// Ensures the memtable has room, freezing it when full (or when `force`), and applies
    /// the L0 slowdown and stop triggers. Runs in the leader only.
    fn make_room_for_write(&self, mut force: bool) -> Result<()> {
        let mut allow_delay = !force;
        let mut st = self.state.lock();
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
            let full = st.mem.approximate_bytes() >= self.opts.write_buffer_bytes;
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
            let old = std::mem::replace(&mut st.mem, Arc::new(MemTable::new(number)));
            st.imms.push(old);
            self.install_super_version(&mut st);
            self.bg_cv.notify_all();
            force = false;
        }
    }
}

/// The writers at the front of the queue that the leader (the first) writes together.
fn pick_group(q: &VecDeque<Arc<Mutex<Writer>>>) -> Vec<Arc<Mutex<Writer>>> {
    let first = q.front().expect("leader").clone();
    let (sync, disable_wal, force, mut size) = {
        let f = first.lock();
        (
            f.sync,
            f.disable_wal,
            f.force_switch,
            f.batch.as_ref().map_or(0, |b| b.size_bytes()),
        )
    };
    let mut group = vec![first];
    if force {
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
        if g.force_switch || (g.sync && !sync) || g.disable_wal != disable_wal {
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
