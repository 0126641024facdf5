//! [`LevelIterator`]: the concatenation of a sorted, non-overlapping level's tables, opening
//! each table (through the table cache) only when the iteration reaches it.

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::compare_internal;
use crate::sst::{ReadParams, TableIter};
use crate::table_cache::TableCache;
use crate::version::FileMeta;
use std::cmp::Ordering;
use std::sync::Arc;

pub struct LevelIterator {
    files: Vec<Arc<FileMeta>>,
    tables: Arc<TableCache>,
    params: ReadParams,
    index: usize,
    current: Option<TableIter>,
    err: Option<Error>,
}

impl LevelIterator {
    pub fn new(files: Vec<Arc<FileMeta>>, tables: Arc<TableCache>, params: ReadParams) -> Self {
        LevelIterator {
            index: files.len(),
            files,
            tables,
            params,
            current: None,
            err: None,
        }
    }

    fn open(&mut self, index: usize) -> bool {
        self.index = index;
        self.current = None;
        if index >= self.files.len() {
            return false;
        }
        match self.tables.get_for(&self.files[index]) {
            Ok(t) => {
                self.current = Some(t.iter(self.params));
                true
            }
            Err(e) => {
                self.err = Some(e);
                false
            }
        }
    }

    /// Checks the current table's iterator: on error stop, when exhausted leave it so the
    /// caller moves on.
    fn cur_failed(&mut self) -> bool {
        if let Some(c) = &self.current {
            if !c.valid() {
                if let Err(e) = c.status() {
                    self.err = Some(e);
                    self.current = None;
                    return true;
                }
            }
        }
        self.err.is_some()
    }

    fn skip_forward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.cur_failed() || !self.open(self.index + 1) {
                self.current = None;
                return;
            }
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first();
            }
        }
        self.cur_failed();
    }

    fn skip_backward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.cur_failed() || self.index == 0 || !self.open(self.index - 1) {
                self.current = None;
                return;
            }
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last();
            }
        }
        self.cur_failed();
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.err.is_none() && self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) {
        self.err = None;
        if self.open(0) {
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first();
            }
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        self.err = None;
        if !self.files.is_empty() && self.open(self.files.len() - 1) {
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last();
            }
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        self.err = None;
        let i = self
            .files
            .partition_point(|f| compare_internal(&f.largest, target) == Ordering::Less);
        if self.open(i) {
            if let Some(c) = self.current.as_mut() {
                c.seek(target);
            }
        }
        self.skip_forward();
    }

    fn next(&mut self) {
        if let Some(c) = self.current.as_mut() {
            c.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if let Some(c) = self.current.as_mut() {
            c.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().expect("valid").key()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().expect("valid").value()
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => self.current.as_ref().map_or(Ok(()), |c| c.status()),
        }
    }
}
