//! [`DbIterator`]: user keys and values at one sequence number, over the merged internal
//! view. Hides older versions and deleted keys; honours lower/upper bounds; moves both ways
//! (LevelDB's DBIter). In forward direction the merged iterator sits on the current entry; in
//! reverse direction it sits just before all entries of the current key, which is saved.
//!
//! Separated values ([`ValueKind::Pointer`] entries) are resolved lazily, when `value()` is
//! called, and cached for the position. When a forward scan reads values (the values of the
//! last two entries were read), `next()` prefetches (WiscKey 3.3.1): it copies the following
//! entries into a look-ahead buffer, up to `prefetch` separated values, and reads those
//! values in one batched read on the configured backend ([`crate::io::read_batch`],
//! `Options::io_backend`), so the device serves them in parallel. The merged iterator then
//! sits after the buffer; the current entry is the buffer's front, and `value()` returns its
//! verified copy in the buffer ([`Batch`]). With
//! `Options::vlog_prefetch_background` (off by default) the batch after that one is copied too
//! and its values are read on the prefetch pool (`prefetch.rs`) while the caller consumes the
//! buffer: one batch ahead, so at most two batches of values are held. See
//! `docs/design.md` §5.3.

use super::prefetch::PrefetchJob;
use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::{self, SeqNo, ValueKind};
use crate::vlog::{ValuePointer, Vlog, VlogFileSet};
use std::any::Any;
use std::cell::{Cell, OnceCell};
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

/// Where an iterator resolves value pointers.
pub(crate) struct ValueSource {
    pub vlog: Arc<Vlog>,
    pub files: Arc<VlogFileSet>,
    /// Values read ahead per batch (0: no prefetch).
    pub prefetch: usize,
    /// How a batch of read-ahead values is read concurrently (`Options::io_backend`).
    pub io_backend: crate::options::IoBackend,
    /// Read the next batch in the background while the current one is consumed
    /// (`Options::vlog_prefetch_background`).
    pub background: bool,
}

/// Most entries one look-ahead fill copies (bounds memory when few values are separated).
const MAX_AHEAD_ENTRIES: usize = 1024;

/// One entry copied into the look-ahead buffer; its bytes are ranges of its [`Batch`].
struct Ahead {
    /// The user key, in `Batch::bytes`.
    key: Range<usize>,
    kind: ValueKind,
    /// The stored value (a pointer for a separated entry), in `Batch::bytes`.
    raw: Range<usize>,
    /// The prefetched value of a separated entry, verified, in `Batch::values`.
    value: Option<Result<Range<usize>>>,
}

/// Look-ahead entries and the bytes they name. A scan's batch lives in two buffers reused
/// from batch to batch (keys and stored values; the separated values read for them, each
/// copied once out of the log and verified where it lies, `Vlog::read_many_into`), so
/// `value()` returns the verified copy in place: no allocation and no second copy per
/// entry (profiled after a 500k load: copying each value twice, once out of the mapping
/// and once to the front of its own vector, was a tenth of seek + 100 nexts).
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    values: Vec<u8>,
    entries: VecDeque<Ahead>,
}

impl Batch {
    fn clear(&mut self) {
        self.bytes.clear();
        self.values.clear();
        self.entries.clear();
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn key(&self, a: &Ahead) -> &[u8] {
        &self.bytes[a.key.clone()]
    }
}

/// The batch after the look-ahead buffer: its entries, copied, and its values being read in
/// the background.
struct NextBatch {
    batch: Batch,
    /// Where in `batch.entries` each value the job reads goes, in the job's order.
    at: Vec<usize>,
    job: Option<PrefetchJob>,
}

impl NextBatch {
    /// The entries with the job's values in place (waiting for the job if it is running).
    fn finish(mut self) -> Batch {
        if let Some(job) = self.job.take() {
            let (values, results) = job.wait();
            self.batch.values = values;
            for (i, v) in self.at.iter().zip(results) {
                self.batch.entries[*i].value = Some(v);
            }
        }
        self.batch
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Iterator over user keys and values (see [`crate::Db::iter`]).
pub struct DbIterator {
    iter: Box<dyn InternalIterator>,
    seq: SeqNo,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    /// Kind of the saved entry (reverse direction).
    saved_kind: ValueKind,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    err: Option<Error>,
    source: Option<ValueSource>,
    /// The resolved separated value of the current position.
    resolved: OnceCell<Result<Vec<u8>>>,
    /// Forward look-ahead: entries from the current one on (see the module docs).
    ahead: Batch,
    /// The batch after `ahead`, read in the background; only while `ahead` is not empty.
    next_batch: Option<NextBatch>,
    /// Whether the merged iterator is at a visible entry after the look-ahead buffer.
    tail_valid: bool,
    /// Whether `value()` read a separated value at the current position.
    read_separated: Cell<bool>,
    /// Consecutive positions whose separated value was read, moving forward.
    streak: u32,
    /// Keeps the memtables, version and snapshot this iterator reads alive.
    _keep: Box<dyn Any + Send>,
}

impl DbIterator {
    pub(crate) fn new(
        iter: Box<dyn InternalIterator>,
        seq: SeqNo,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        keep: Box<dyn Any + Send>,
    ) -> Self {
        DbIterator {
            iter,
            seq,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            saved_kind: ValueKind::Value,
            lower,
            upper,
            err: None,
            source: None,
            resolved: OnceCell::new(),
            ahead: Batch::default(),
            next_batch: None,
            tail_valid: false,
            read_separated: Cell::new(false),
            streak: 0,
            _keep: keep,
        }
    }

    /// Makes the iterator resolve value pointers through `source`.
    pub(crate) fn with_values(mut self, source: ValueSource) -> Self {
        self.source = Some(source);
        self
    }

    /// Whether the iterator is at an entry. When false, check [`DbIterator::status`].
    pub fn valid(&self) -> bool {
        self.valid && !matches!(self.resolved.get(), Some(Err(_)))
    }

    /// The current user key.
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "key() on an invalid iterator");
        if let Some(a) = self.ahead.entries.front() {
            return self.ahead.key(a);
        }
        match self.direction {
            Direction::Forward => key::user_key(self.iter.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value.
    ///
    /// A separated value is read from the value log on the first call at a position. If that
    /// read fails (I/O error, or corruption: a checksum or key mismatch), `value()` returns an
    /// empty slice, [`DbIterator::valid`] turns false and [`DbIterator::status`] returns the
    /// error; [`DbIterator::try_value`] returns it directly.
    pub fn value(&self) -> &[u8] {
        self.try_value().unwrap_or_default()
    }

    /// The current value, or the error that reading it met.
    pub fn try_value(&self) -> Result<&[u8]> {
        assert!(self.valid, "value() on an invalid iterator");
        let (kind, raw) = self.raw_entry();
        if kind != ValueKind::Pointer {
            return Ok(raw);
        }
        self.read_separated.set(true);
        if let Some(Some(Ok(v))) = self.ahead.entries.front().map(|a| &a.value) {
            return Ok(&self.ahead.values[v.clone()]);
        }
        let r = self.resolved.get_or_init(|| {
            match self.ahead.entries.front().and_then(|a| a.value.as_ref()) {
                Some(Err(e)) => Err(e.clone()),
                _ => self.resolve(raw),
            }
        });
        match r {
            Ok(v) => Ok(v.as_slice()),
            Err(e) => Err(e.clone()),
        }
    }

    /// The current entry's kind and stored value (a pointer is not resolved).
    fn raw_entry(&self) -> (ValueKind, &[u8]) {
        if let Some(a) = self.ahead.entries.front() {
            return (a.kind, &self.ahead.bytes[a.raw.clone()]);
        }
        match self.direction {
            Direction::Forward => {
                let kind =
                    key::parse_internal_key(self.iter.key()).map_or(ValueKind::Value, |p| p.kind);
                (kind, self.iter.value())
            }
            Direction::Reverse => (self.saved_kind, &self.saved_value),
        }
    }

    fn resolve(&self, raw: &[u8]) -> Result<Vec<u8>> {
        let ptr = ValuePointer::decode_or_corrupt(raw, "<iterator value pointer>")?;
        let Some(src) = &self.source else {
            return Err(Error::corruption(
                "<iterator>",
                0,
                "value pointer but no value log to resolve it",
            ));
        };
        src.vlog.read(&src.files, self.key(), &ptr)
    }

    /// Copies the entries from the merged iterator's position on into `batch` (cleared
    /// first), up to `prefetch` separated values (and [`MAX_AHEAD_ENTRIES`] entries),
    /// leaving it after them; `self.valid` then says whether it is at an entry.
    fn collect(&mut self, prefetch: usize, batch: &mut Batch) {
        batch.clear();
        let mut pointers = 0;
        while self.valid && pointers < prefetch && batch.entries.len() < MAX_AHEAD_ENTRIES {
            let Some(p) = key::parse_internal_key(self.iter.key()) else {
                break;
            };
            pointers += (p.kind == ValueKind::Pointer) as usize;
            let k = batch.bytes.len();
            batch.bytes.extend_from_slice(p.user_key);
            let v = batch.bytes.len();
            batch.bytes.extend_from_slice(self.iter.value());
            batch.entries.push_back(Ahead {
                key: k..v,
                kind: p.kind,
                raw: v..batch.bytes.len(),
                value: None,
            });
            self.saved_key.clear();
            self.saved_key.extend_from_slice(p.user_key);
            self.iter.next();
            self.find_next_user_entry(true);
        }
    }

    /// The value reads `batch` needs: where each goes, and its key (a range of
    /// `batch.bytes`) and pointer. A pointer that does not decode is the entry's error.
    fn requests(batch: &mut Batch) -> (Vec<usize>, Vec<(Range<usize>, ValuePointer)>) {
        let mut at = Vec::new();
        let mut reqs = Vec::new();
        for (i, a) in batch.entries.iter_mut().enumerate() {
            if a.kind != ValueKind::Pointer {
                continue;
            }
            match ValuePointer::decode_or_corrupt(
                &batch.bytes[a.raw.clone()],
                "<iterator value pointer>",
            ) {
                Ok(p) => {
                    at.push(i);
                    reqs.push((a.key.clone(), p));
                }
                Err(e) => a.value = Some(Err(e)),
            }
        }
        (at, reqs)
    }

    /// Copies the entries from the current one on into the look-ahead buffer, up to
    /// `prefetch` separated values, and reads those values in one batch.
    fn fill_ahead(&mut self) {
        let Some(prefetch) = self.source.as_ref().map(|s| s.prefetch) else {
            return;
        };
        let mut batch = std::mem::take(&mut self.ahead);
        self.collect(prefetch, &mut batch);
        self.ahead = batch;
        self.tail_valid = self.valid;
        self.valid = !self.ahead.is_empty() || self.valid;
        let Some(src) = &self.source else {
            return;
        };
        let (at, reqs) = Self::requests(&mut self.ahead);
        let Batch {
            bytes,
            values,
            entries,
        } = &mut self.ahead;
        let keyed: Vec<(&[u8], ValuePointer)> =
            reqs.iter().map(|(k, p)| (&bytes[k.clone()], *p)).collect();
        let read = src.vlog.read_many_into(
            &src.files,
            &keyed,
            true,
            |r| crate::io::read_batch(src.io_backend, &*src.vlog.fs, r).0,
            values,
        );
        for (i, v) in at.into_iter().zip(read) {
            entries[i].value = Some(v);
        }
    }

    /// Copies the batch after the look-ahead buffer and starts reading its values on the
    /// prefetch pool. Requires a buffer and the merged iterator at an entry after it.
    fn start_next_batch(&mut self) {
        let Some((prefetch, vlog, files, backend)) = self
            .source
            .as_ref()
            .map(|s| (s.prefetch, s.vlog.clone(), s.files.clone(), s.io_backend))
        else {
            return;
        };
        let current_valid = self.valid;
        self.valid = self.tail_valid;
        let mut batch = Batch::default();
        self.collect(prefetch, &mut batch);
        self.tail_valid = self.valid;
        self.valid = current_valid;
        let (at, reqs) = Self::requests(&mut batch);
        // The job runs on another thread: it gets its keys copied.
        let reqs: Vec<(Vec<u8>, ValuePointer)> = reqs
            .into_iter()
            .map(|(k, p)| (batch.bytes[k].to_vec(), p))
            .collect();
        let job = (!reqs.is_empty()).then(|| PrefetchJob::submit(vlog, files, reqs, backend));
        self.next_batch = Some(NextBatch { batch, at, job });
    }

    /// The first error met (corruption, I/O), if any.
    pub fn status(&self) -> Result<()> {
        if let Some(Err(e)) = self.resolved.get() {
            return Err(e.clone());
        }
        match &self.err {
            Some(e) => Err(e.clone()),
            None => self.iter.status(),
        }
    }

    /// After a failed value read the iterator stops: the error becomes its status.
    fn stop_on_value_error(&mut self) -> bool {
        if matches!(self.resolved.get(), Some(Err(_))) {
            self.moved();
            self.next_batch = None;
            self.ahead.clear();
            self.valid = false;
            return true;
        }
        false
    }

    /// Forgets the resolved value of the old position, keeping a read error as the
    /// iterator's error.
    fn moved(&mut self) {
        if let Some(Err(e)) = self.resolved.take() {
            if self.err.is_none() {
                self.err = Some(e);
            }
        }
        self.read_separated.set(false);
    }

    /// A jump (seek, reverse step): the look-ahead and the access pattern start over.
    fn jumped(&mut self) {
        self.moved();
        self.next_batch = None;
        self.ahead.clear();
        self.streak = 0;
    }

    /// Moves to the first key (at or above the lower bound).
    pub fn seek_to_first(&mut self) {
        self.jumped();
        match self.lower.clone() {
            Some(l) => self.seek(&l),
            None => {
                self.direction = Direction::Forward;
                self.iter.seek_to_first();
                self.find_next_user_entry(false);
            }
        }
    }

    /// Moves to the last key (below the upper bound).
    pub fn seek_to_last(&mut self) {
        self.jumped();
        self.direction = Direction::Reverse;
        match self.upper.clone() {
            Some(u) => {
                self.iter.seek(&key::make_internal_key(
                    &u,
                    key::MAX_SEQ,
                    key::KIND_FOR_SEEK,
                ));
                self.step_back_from_seek();
            }
            None => self.iter.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// Moves to the first key `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.jumped();
        let target = match &self.lower {
            Some(l) if target < l.as_slice() => l.clone(),
            _ => target.to_vec(),
        };
        self.direction = Direction::Forward;
        self.iter.seek(&key::seek_key(&target, self.seq));
        self.find_next_user_entry(false);
    }

    /// Moves to the last key `<= target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.jumped();
        let below_upper = self.upper.as_ref().is_none_or(|u| target < u.as_slice());
        if !below_upper {
            return self.seek_to_last();
        }
        self.direction = Direction::Reverse;
        // Sequence 0 is never used, so this lands after every entry of `target`.
        self.iter
            .seek(&key::make_internal_key(target, 0, ValueKind::Delete));
        self.step_back_from_seek();
        self.find_prev_user_entry();
    }

    /// Moves to the next key.
    pub fn next(&mut self) {
        assert!(self.valid, "next() on an invalid iterator");
        if self.stop_on_value_error() {
            return;
        }
        let sequential = self.read_separated.get() && self.direction == Direction::Forward;
        self.streak = if sequential { self.streak + 1 } else { 0 };
        self.moved();
        if self.ahead.entries.pop_front().is_some() {
            if self.ahead.is_empty() {
                match self.next_batch.take() {
                    Some(b) => self.ahead = b.finish(),
                    None => self.valid = self.tail_valid,
                }
            }
        } else if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The merged iterator is just before the entries of saved_key: step into them,
            // then skip them.
            if self.iter.valid() {
                self.iter.next();
            } else {
                self.iter.seek_to_first();
            }
            self.find_next_user_entry(true);
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.iter.key()));
            self.iter.next();
            self.find_next_user_entry(true);
        }
        if self.streak >= 2 && self.valid {
            if self.ahead.is_empty() {
                self.fill_ahead();
            }
            let background = self.source.as_ref().is_some_and(|s| s.background);
            if background && self.next_batch.is_none() && self.tail_valid && !self.ahead.is_empty()
            {
                self.start_next_batch();
            }
        }
    }

    /// Moves to the previous key.
    pub fn prev(&mut self) {
        assert!(self.valid, "prev() on an invalid iterator");
        if self.stop_on_value_error() {
            return;
        }
        if let Some(a) = self.ahead.entries.front() {
            // Put the merged iterator back on the current entry.
            let k = self.ahead.key(a).to_vec();
            self.seek(&k);
        }
        self.jumped();
        if self.direction == Direction::Forward {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.iter.key()));
            loop {
                self.iter.prev();
                if !self.iter.valid() {
                    self.valid = false;
                    self.check_status();
                    return;
                }
                if key::user_key(self.iter.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }

    fn step_back_from_seek(&mut self) {
        if self.iter.valid() {
            self.iter.prev();
        } else if self.iter.status().is_ok() {
            self.iter.seek_to_last();
        }
    }

    fn check_status(&mut self) {
        if self.err.is_none() {
            if let Err(e) = self.iter.status() {
                self.err = Some(e);
                self.valid = false;
            }
        }
    }

    fn malformed_key(len: usize) -> Error {
        Error::corruption(
            "<iterator>",
            0,
            format!("malformed internal key of {len} bytes"),
        )
    }

    /// Forward: settle on the next visible, non-deleted user entry. With `skipping`, every
    /// entry of a user key `<= saved_key` is hidden.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        self.valid = false;
        while self.iter.valid() {
            let Some(p) = key::parse_internal_key(self.iter.key()) else {
                self.err = Some(Self::malformed_key(self.iter.key().len()));
                return;
            };
            if p.seq <= self.seq {
                match p.kind {
                    ValueKind::Delete => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(p.user_key);
                        skipping = true;
                    }
                    ValueKind::Value | ValueKind::Pointer => {
                        if !(skipping && p.user_key <= self.saved_key.as_slice()) {
                            if self
                                .upper
                                .as_ref()
                                .is_some_and(|u| p.user_key >= u.as_slice())
                            {
                                return;
                            }
                            self.valid = true;
                            return;
                        }
                    }
                }
            }
            self.iter.next();
        }
        self.check_status();
    }

    /// Reverse: settle on the previous visible, non-deleted user entry (its newest visible
    /// version), leaving the merged iterator just before that key's entries.
    fn find_prev_user_entry(&mut self) {
        let mut kind = ValueKind::Delete;
        while self.iter.valid() {
            let Some(p) = key::parse_internal_key(self.iter.key()) else {
                self.err = Some(Self::malformed_key(self.iter.key().len()));
                self.valid = false;
                return;
            };
            if p.seq <= self.seq {
                if kind != ValueKind::Delete && p.user_key < self.saved_key.as_slice() {
                    break;
                }
                kind = p.kind;
                if kind == ValueKind::Delete {
                    self.saved_key.clear();
                    self.saved_value.clear();
                } else {
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(p.user_key);
                    self.saved_value.clear();
                    self.saved_value.extend_from_slice(self.iter.value());
                    self.saved_kind = kind;
                }
            }
            self.iter.prev();
        }
        self.check_status();
        if self.err.is_some() || kind == ValueKind::Delete {
            self.valid = false;
            self.saved_key.clear();
            self.direction = Direction::Forward;
            return;
        }
        if self
            .lower
            .as_ref()
            .is_some_and(|l| self.saved_key.as_slice() < l.as_slice())
        {
            self.valid = false;
            return;
        }
        self.valid = true;
    }
}
