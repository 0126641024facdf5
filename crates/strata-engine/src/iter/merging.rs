//! [`MergingIterator`]: the union of several sorted iterators, in internal-key order, in both
//! directions (LevelDB's merger). Children are few (memtables, L0 tables, one per deeper
//! level), so the smallest is found by a linear scan rather than a heap.

use super::InternalIterator;
use crate::key::compare_internal;
use std::cmp::Ordering;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
    /// A child's error: the merged view stops rather than silently skip that child's keys.
    err: Option<crate::Error>,
}

impl MergingIterator {
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
            direction: Direction::Forward,
            err: None,
        }
    }

    /// Stops the merge if an exhausted child is exhausted because of an error.
    fn failed(&mut self) -> bool {
        if self.err.is_none() {
            self.err = self
                .children
                .iter()
                .filter(|c| !c.valid())
                .find_map(|c| c.status().err());
        }
        if self.err.is_some() {
            self.current = None;
        }
        self.err.is_some()
    }

    fn find_smallest(&mut self) {
        if self.failed() {
            return;
        }
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid()
                && best.is_none_or(|b| {
                    compare_internal(c.key(), self.children[b].key()) == Ordering::Less
                })
            {
                best = Some(i);
            }
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        if self.failed() {
            return;
        }
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate().rev() {
            if c.valid()
                && best.is_none_or(|b| {
                    compare_internal(c.key(), self.children[b].key()) == Ordering::Greater
                })
            {
                best = Some(i);
            }
        }
        self.current = best;
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn next(&mut self) {
        let cur = self.current.expect("next on invalid iterator");
        if self.direction != Direction::Forward {
            // Move every other child to the first entry after key().
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(&key);
                if c.valid() && compare_internal(&key, c.key()) == Ordering::Equal {
                    c.next();
                }
            }
            self.direction = Direction::Forward;
        }
        self.children[cur].next();
        self.find_smallest();
    }

    fn prev(&mut self) {
        let cur = self.current.expect("prev on invalid iterator");
        if self.direction != Direction::Reverse {
            // Move every other child to the last entry before key().
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(&key);
                if c.valid() {
                    c.prev();
                } else {
                    c.seek_to_last();
                }
            }
            self.direction = Direction::Reverse;
        }
        self.children[cur].prev();
        self.find_largest();
    }

    fn key(&self) -> &[u8] {
        self.children[self.current.expect("key on invalid iterator")].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.current.expect("value on invalid iterator")].value()
    }

    fn status(&self) -> crate::Result<()> {
        if let Some(e) = &self.err {
            return Err(e.clone());
        }
        for c in &self.children {
            c.status()?;
        }
        Ok(())
    }
}
