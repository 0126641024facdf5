//! An iterator over an L0 table in internal-key order.
//!
//! It decodes one checkpoint group (at most 16 entries, two entry blocks, both checksummed)
//! at a time into a small buffer of whole keys; values stay in the mapping. Moving past
//! either end of the group decodes the neighbouring one, so `prev` costs no more than
//! `next`. As every [`InternalIterator`], it turns invalid at the first error and reports it
//! from `status`.

use super::table::{GroupCursor, L0Table, ValueLoc};
use super::L0ValueRef;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

/// One decoded entry: its key in `keys`, and its value (a pointer's encoding in `pointers`).
#[derive(Clone, Debug)]
struct Decoded {
    key: Range<usize>,
    loc: ValueLoc,
    pointer: Range<usize>,
}

/// An iterator over one [`L0Table`]; see [`L0Table::iter`].
pub struct L0TableIter {
    table: Arc<L0Table>,
    group: u64,
    entries: Vec<Decoded>,
    keys: Vec<u8>,
    pointers: Vec<u8>,
    /// Position in `entries`; `None` when not valid.
    at: Option<usize>,
    status: Result<()>,
}

impl L0TableIter {
    pub(super) fn new(table: Arc<L0Table>) -> Self {
        L0TableIter {
            table,
            group: 0,
            entries: Vec::new(),
            keys: Vec::new(),
            pointers: Vec::new(),
            at: None,
            status: Ok(()),
        }
    }

    /// The current value as stored. Requires `valid()`.
    pub fn value_ref(&self) -> L0ValueRef<'_> {
        self.table.value_ref(self.current().loc)
    }

    fn current(&self) -> &Decoded {
        &self.entries[self.at.expect("iterator not valid")]
    }

    /// Decodes group `g`, or records the error and turns invalid. False if not loaded.
    fn load(&mut self, g: u64) -> bool {
        self.at = None;
        self.entries.clear();
        self.keys.clear();
        self.pointers.clear();
        if self.status.is_err() || g >= self.table.groups() {
            return false;
        }
        self.group = g;
        let r = (|| {
            let mut c = GroupCursor::new(&self.table, g)?;
            while let Some(loc) = c.next()? {
                let k0 = self.keys.len();
                self.keys.extend_from_slice(&c.key);
                let p0 = self.pointers.len();
                if let ValueLoc::Pointer(p) = loc {
                    p.encode(&mut self.pointers);
                }
                self.entries.push(Decoded {
                    key: k0..self.keys.len(),
                    loc,
                    pointer: p0..self.pointers.len(),
                });
            }
            Ok(())
        })();
        if let Err(e) = r {
            self.status = Err(e);
            self.entries.clear();
            return false;
        }
        true
    }

    fn key_at(&self, i: usize) -> &[u8] {
        &self.keys[self.entries[i].key.clone()]
    }
}

impl InternalIterator for L0TableIter {
    fn valid(&self) -> bool {
        self.at.is_some()
    }

    fn seek_to_first(&mut self) {
        if self.load(0) && !self.entries.is_empty() {
            self.at = Some(0);
        }
    }

    fn seek_to_last(&mut self) {
        let groups = self.table.groups();
        if groups > 0 && self.load(groups - 1) && !self.entries.is_empty() {
            self.at = Some(self.entries.len() - 1);
        }
    }

    fn seek(&mut self, target: &[u8]) {
        self.at = None;
        if self.status.is_err() {
            return;
        }
        let g = match self.table.find_group(target) {
            Ok(g) => g,
            Err(e) => {
                self.status = Err(e);
                return;
            }
        };
        // The answer is in group g or is the first entry of a later one.
        let mut g = g;
        while self.load(g) {
            let n = self.entries.len();
            let i = (0..n)
                .find(|&i| compare_internal(self.key_at(i), target) != Ordering::Less)
                .unwrap_or(n);
            if i < n {
                self.at = Some(i);
                return;
            }
            g += 1;
        }
    }

    fn next(&mut self) {
        let Some(i) = self.at else { return };
        if i + 1 < self.entries.len() {
            self.at = Some(i + 1);
        } else if self.load(self.group + 1) && !self.entries.is_empty() {
            self.at = Some(0);
        }
    }

    fn prev(&mut self) {
        let Some(i) = self.at else { return };
        if i > 0 {
            self.at = Some(i - 1);
        } else if self.group > 0 && self.load(self.group - 1) && !self.entries.is_empty() {
            self.at = Some(self.entries.len() - 1);
        } else {
            self.at = None;
        }
    }

    fn key(&self) -> &[u8] {
        &self.keys[self.current().key.clone()]
    }

    /// Inline bytes, or for a pointer entry the pointer's encoding (as an SSTable stores it).
    fn value(&self) -> &[u8] {
        let d = self.current();
        match self.table.value_ref(d.loc) {
            L0ValueRef::Inline(b) => b,
            L0ValueRef::Pointer(_) => &self.pointers[d.pointer.clone()],
        }
    }

    fn status(&self) -> Result<()> {
        self.status.clone()
    }
}
