//! [`DbIterator`]: user keys and values at one sequence number, over the merged internal
//! view. Hides older versions and deleted keys; honours lower/upper bounds; moves both ways
//! (LevelDB's DBIter). In forward direction the merged iterator sits on the current entry; in
//! reverse direction it sits just before all entries of the current key, which is saved.

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::{self, SeqNo, ValueKind};
use std::any::Any;

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
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    err: Option<Error>,
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
            lower,
            upper,
            err: None,
            _keep: keep,
        }
    }

    /// Whether the iterator is at an entry. When false, check [`DbIterator::status`].
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key.
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "key() on an invalid iterator");
        match self.direction {
            Direction::Forward => key::user_key(self.iter.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value.
    pub fn value(&self) -> &[u8] {
        assert!(self.valid, "value() on an invalid iterator");
        match self.direction {
            Direction::Forward => self.iter.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The first error met (corruption, I/O), if any.
    pub fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => self.iter.status(),
        }
    }

    /// Moves to the first key (at or above the lower bound).
    pub fn seek_to_first(&mut self) {
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
        self.direction = Direction::Reverse;
        match self.upper.clone() {
            Some(u) => {
                self.iter
                    .seek(&key::make_internal_key(&u, key::MAX_SEQ, ValueKind::Value));
                self.step_back_from_seek();
            }
            None => self.iter.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// Moves to the first key `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
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
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The merged iterator is just before the entries of saved_key: step into them,
            // then skip them.
            if self.iter.valid() {
                self.iter.next();
            } else {
                self.iter.seek_to_first();
            }
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.iter.key()));
            self.iter.next();
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous key.
    pub fn prev(&mut self) {
        assert!(self.valid, "prev() on an invalid iterator");
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
                    ValueKind::Value => {
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
