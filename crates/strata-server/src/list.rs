//! Lists on the ordered store, in Kvrocks' layout (`docs/format/redis-keys.md`, Lists): the
//! metadata record's value holds the head and tail indexes, and element `i` (0-based from
//! the head) is the member record `sub_key(db, key, version, (head + i) as 8 bytes BE)`.
//! Indexes start at 2^63 so that both ends can grow; pushing or popping at either end, and
//! reading or replacing one element, is one metadata read and one member read or write.
//! Commands in the middle (LINSERT, LREM) rewrite the elements they shift, as Redis's are
//! O(n). No protocol in here: the commands are in `cmd/lists.rs`.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

use crate::keys::sub_key;
use crate::store::{Meta, RType, Tx, Writes};
use strata_engine::Result;

/// Head and tail of a new list: the middle of the index space.
pub const MID: u64 = 1 << 63;

/// An end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// A list's element indexes: elements live at `[head, tail)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub head: u64,
    pub tail: u64,
}

impl Bounds {
    pub fn len(&self) -> u64 {
        self.tail - self.head
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(&self.head.to_be_bytes());
        v.extend_from_slice(&self.tail.to_be_bytes());
        v
    }

    /// `None` unless `v` is 16 bytes with `head <= tail`.
    pub fn decode(v: &[u8]) -> Option<Bounds> {
        if v.len() != 16 {
            return None;
        }
        let head = u64::from_be_bytes(v[..8].try_into().ok()?);
        let tail = u64::from_be_bytes(v[8..].try_into().ok()?);
        (head <= tail).then_some(Bounds { head, tail })
    }

    /// The position (0-based from the head) of Redis index `idx` (negative: from the
    /// tail), if it is inside the list.
    pub fn position(&self, idx: i64) -> Option<u64> {
        let len = self.len();
        let p = if idx < 0 {
            len.checked_sub(idx.unsigned_abs())?
        } else {
            idx as u64
        };
        (p < len).then_some(p)
    }
}

/// LRANGE's and LTRIM's normalisation of `start..=stop` (Redis's `listTypeRange` rules):
/// the inclusive positions, or `None` for an empty range.
pub fn range(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let mut start = if start < 0 { len + start } else { start };
    let mut stop = if stop < 0 { len + stop } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= len {
        return None;
    }
    if stop >= len {
        stop = len - 1;
    }
    Some((start as u64, stop as u64))
}

fn corrupt(key: &[u8]) -> strata_engine::Error {
    strata_engine::Error::Corruption {
        file: "<redis list metadata>".into(),
        offset: 0,
        reason: format!(
            "the head and tail of list {:?} do not decode",
            String::from_utf8_lossy(key)
        ),
    }
}

/// One list being read or changed by a command: its metadata and bounds. Changes go into a
/// [`Writes`]; [`List::finish`] adds the metadata (or deletes the key once empty).
pub struct List<'a> {
    store: &'a Tx<'a>,
    db: u8,
    key: &'a [u8],
    pub meta: Meta,
    pub b: Bounds,
}

impl<'a> List<'a> {
    /// The list `meta` (already checked to be a list) of `key`.
    pub fn open(store: &'a Tx<'a>, db: u8, key: &'a [u8], meta: Meta) -> Result<List<'a>> {
        debug_assert_eq!(meta.rtype, RType::List);
        let b = Bounds::decode(&meta.value).ok_or_else(|| corrupt(key))?;
        if b.len() != meta.size {
            return Err(corrupt(key));
        }
        Ok(List {
            store,
            db,
            key,
            meta,
            b,
        })
    }

    /// A new, empty list (its metadata is written by [`List::finish`] once it has elements).
    pub fn create(store: &'a Tx<'a>, db: u8, key: &'a [u8]) -> List<'a> {
        let b = Bounds {
            head: MID,
            tail: MID,
        };
        let mut meta = Meta::collection(RType::List, store.next_version());
        meta.value = b.encode();
        List {
            store,
            db,
            key,
            meta,
            b,
        }
    }

    pub fn len(&self) -> u64 {
        self.b.len()
    }

    /// The store key of the element at absolute index `abs`.
    fn rec(&self, abs: u64) -> Vec<u8> {
        sub_key(self.db, self.key, self.meta.version, &abs.to_be_bytes())
    }

    /// The element at position `pos` (0-based from the head; the caller checked it).
    pub fn get(&self, pos: u64) -> Result<Vec<u8>> {
        let rec = self.rec(self.b.head + pos);
        self.store
            .get_member(&rec)?
            .ok_or_else(|| corrupt(self.key))
    }

    /// Visits the elements at positions `from..=to` (from the tail when `reverse`), with
    /// their positions, until `f` returns false.
    pub fn scan(
        &self,
        from: u64,
        to: u64,
        reverse: bool,
        mut f: impl FnMut(u64, &[u8]) -> bool,
    ) -> Result<()> {
        let lo = self.rec(self.b.head + from);
        let hi = self.rec(self.b.head + to + 1);
        let plen = lo.len() - 8;
        let mut bad = false;
        self.store.scan_range(&lo, &hi, reverse, |k, v| {
            match k[plen..].try_into().map(u64::from_be_bytes) {
                Ok(abs) => f(abs - self.b.head, v),
                Err(_) => {
                    bad = true;
                    false
                }
            }
        })?;
        if bad {
            return Err(corrupt(self.key));
        }
        Ok(())
    }

    /// Every element, head first.
    pub fn all(&self) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::with_capacity(self.len() as usize);
        if self.len() > 0 {
            self.scan(0, self.len() - 1, false, |_, v| {
                out.push(v.to_vec());
                true
            })?;
        }
        if out.len() as u64 != self.len() {
            return Err(corrupt(self.key));
        }
        Ok(out)
    }

    /// Pushes `elems` one by one at `end` (LPUSH a b c leaves c first).
    pub fn push<E: AsRef<[u8]>>(&mut self, w: &mut Writes, end: End, elems: &[E]) {
        for e in elems {
            let abs = match end {
                End::Left => {
                    self.b.head -= 1;
                    self.b.head
                }
                End::Right => {
                    self.b.tail += 1;
                    self.b.tail - 1
                }
            };
            w.put_member(self.db, self.key, &self.rec(abs), e.as_ref());
        }
    }

    /// Pops up to `count` elements from `end`, in pop order.
    pub fn pop(&mut self, w: &mut Writes, end: End, count: u64) -> Result<Vec<Vec<u8>>> {
        let n = count.min(self.len());
        if n == 0 {
            return Ok(Vec::new());
        }
        let (from, to) = match end {
            End::Left => (0, n - 1),
            End::Right => (self.len() - n, self.len() - 1),
        };
        let mut out = if n == 1 {
            vec![self.get(from)?]
        } else {
            let mut v = Vec::with_capacity(n as usize);
            self.scan(from, to, end == End::Right, |_, e| {
                v.push(e.to_vec());
                true
            })?;
            v
        };
        if out.len() as u64 != n {
            return Err(corrupt(self.key));
        }
        // Deleted even when the list becomes empty: LMOVE of a list onto itself pushes
        // again within the same incarnation.
        for pos in from..=to {
            w.delete_member(self.db, self.key, &self.rec(self.b.head + pos));
        }
        match end {
            End::Left => self.b.head += n,
            End::Right => self.b.tail -= n,
        }
        out.truncate(n as usize);
        Ok(out)
    }

    /// Replaces the element at position `pos`.
    pub fn set(&mut self, w: &mut Writes, pos: u64, elem: &[u8]) {
        w.put_member(self.db, self.key, &self.rec(self.b.head + pos), elem);
    }

    /// Keeps positions `keep` (inclusive; `None`: nothing) and drops the rest (LTRIM).
    pub fn trim(&mut self, w: &mut Writes, keep: Option<(u64, u64)>) {
        let Some((from, to)) = keep else {
            self.b.head = self.b.tail;
            return;
        };
        for pos in (0..from).chain(to + 1..self.len()) {
            w.delete_member(self.db, self.key, &self.rec(self.b.head + pos));
        }
        let head = self.b.head;
        self.b.head = head + from;
        self.b.tail = head + to + 1;
    }

    /// Inserts `elem` at position `pos` (0..=len), shifting the shorter side by one.
    pub fn insert(&mut self, w: &mut Writes, pos: u64, elem: &[u8]) -> Result<()> {
        let len = self.len();
        if pos <= len - pos {
            // Move positions 0..pos one index towards the head.
            let mut moved = Vec::new();
            if pos > 0 {
                self.scan(0, pos - 1, false, |_, v| {
                    moved.push(v.to_vec());
                    true
                })?;
            }
            let head = self.b.head - 1;
            for (i, v) in moved.iter().enumerate() {
                w.put_member(self.db, self.key, &self.rec(head + i as u64), v);
            }
            w.put_member(self.db, self.key, &self.rec(head + pos), elem);
            self.b.head = head;
        } else {
            let mut moved = Vec::new();
            self.scan(pos, len - 1, false, |_, v| {
                moved.push(v.to_vec());
                true
            })?;
            let at = self.b.head + pos;
            for (i, v) in moved.iter().enumerate() {
                w.put_member(self.db, self.key, &self.rec(at + 1 + i as u64), v);
            }
            w.put_member(self.db, self.key, &self.rec(at), elem);
            self.b.tail += 1;
        }
        Ok(())
    }

    /// Replaces the whole list by `elems` (LREM's result), rewriting only the positions
    /// from the first one that changes and deleting the records past the new tail.
    pub fn rewrite(&mut self, w: &mut Writes, old: &[Vec<u8>], elems: &[Vec<u8>]) {
        let first = old.iter().zip(elems).take_while(|(a, b)| a == b).count();
        for (i, e) in elems.iter().enumerate().skip(first) {
            w.put_member(self.db, self.key, &self.rec(self.b.head + i as u64), e);
        }
        if !elems.is_empty() {
            for pos in elems.len()..old.len() {
                w.delete_member(self.db, self.key, &self.rec(self.b.head + pos as u64));
            }
        }
        self.b.tail = self.b.head + elems.len() as u64;
    }

    /// Adds the metadata to `w`: the new bounds, or the key's deletion once empty.
    pub fn finish(mut self, w: &mut Writes) {
        if self.len() == 0 {
            w.meta(self.db, self.key, None);
        } else {
            self.meta.size = self.len();
            self.meta.value = self.b.encode();
            w.meta(self.db, self.key, Some(&self.meta));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn bounds_round_trip_and_positions() {
        let b = Bounds {
            head: MID - 2,
            tail: MID + 3,
        };
        assert_eq!(Bounds::decode(&b.encode()), Some(b));
        assert_eq!(Bounds::decode(&b.encode()[..15]), None);
        let mut bad = b.encode();
        bad[0] = 0xff; // head above tail
        assert_eq!(Bounds::decode(&bad), None);
        assert_eq!(b.len(), 5);
        assert_eq!(b.position(0), Some(0));
        assert_eq!(b.position(4), Some(4));
        assert_eq!(b.position(5), None);
        assert_eq!(b.position(-1), Some(4));
        assert_eq!(b.position(-5), Some(0));
        assert_eq!(b.position(-6), None);
        assert_eq!(b.position(i64::MIN), None);
        assert_eq!(b.position(i64::MAX), None);
        let e = Bounds {
            head: MID,
            tail: MID,
        };
        assert_eq!((e.len(), e.position(0), e.position(-1)), (0, None, None));
    }

    #[test]
    fn ranges_as_redis_normalises_them() {
        assert_eq!(range(0, -1, 5), Some((0, 4)));
        assert_eq!(range(-100, 100, 5), Some((0, 4)));
        assert_eq!(range(2, 1, 5), None);
        assert_eq!(range(5, 10, 5), None);
        assert_eq!(range(-1, -1, 5), Some((4, 4)));
        assert_eq!(range(-6, -6, 5), None, "stop before the head");
        assert_eq!(range(0, 0, 0), None);
        assert_eq!(range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(range(i64::MAX, i64::MIN, 3), None);
    }

    fn open_store(dir: &std::path::Path) -> Store {
        crate::store::tests::open_store(dir, 2)
    }

    fn load<'a>(s: &'a Tx<'a>, key: &'a [u8]) -> Option<List<'a>> {
        s.get(0, key)
            .unwrap()
            .map(|m| List::open(s, 0, key, m).unwrap())
    }

    /// Applies one change to list `key` (created if absent) and returns its elements after.
    fn change(s: &Tx<'_>, key: &[u8], f: impl FnOnce(&mut List<'_>, &mut Writes)) -> Vec<Vec<u8>> {
        let mut l = load(s, key).unwrap_or_else(|| List::create(s, 0, key));
        let mut w = Writes::new();
        f(&mut l, &mut w);
        l.finish(&mut w);
        s.apply(w).unwrap();
        load(s, key).map(|l| l.all().unwrap()).unwrap_or_default()
    }

    fn strs(v: &[Vec<u8>]) -> Vec<&str> {
        v.iter().map(|e| std::str::from_utf8(e).unwrap()).collect()
    }

    #[test]
    fn ends_middle_and_emptying_against_a_vecdeque() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(dir.path());
        let s = store.front();
        let k = &b"l"[..];
        let got = change(&s, k, |l, w| l.push(w, End::Left, &["a", "b", "c"]));
        assert_eq!(strs(&got), ["c", "b", "a"]);
        let got = change(&s, k, |l, w| l.push(w, End::Right, &["x", "y"]));
        assert_eq!(strs(&got), ["c", "b", "a", "x", "y"]);
        let l = load(&s, k).unwrap();
        assert_eq!((l.b.head, l.b.tail), (MID - 3, MID + 2));
        let got = change(&s, k, |l, w| {
            assert_eq!(strs(&l.pop(w, End::Right, 2).unwrap()), ["y", "x"]);
        });
        assert_eq!(strs(&got), ["c", "b", "a"]);
        // Inserting near the head shifts the head side; near the tail, the tail side.
        let got = change(&s, k, |l, w| l.insert(w, 1, b"h").unwrap());
        assert_eq!(strs(&got), ["c", "h", "b", "a"]);
        let got = change(&s, k, |l, w| l.insert(w, 3, b"t").unwrap());
        assert_eq!(strs(&got), ["c", "h", "b", "t", "a"]);
        let got = change(&s, k, |l, w| l.insert(w, 5, b"z").unwrap());
        assert_eq!(strs(&got), ["c", "h", "b", "t", "a", "z"]);
        let got = change(&s, k, |l, w| l.insert(w, 0, b"0").unwrap());
        assert_eq!(strs(&got), ["0", "c", "h", "b", "t", "a", "z"]);
        let got = change(&s, k, |l, w| l.set(w, 6, b"Z"));
        assert_eq!(strs(&got), ["0", "c", "h", "b", "t", "a", "Z"]);
        let got = change(&s, k, |l, w| l.trim(w, range(1, -2, 7)));
        assert_eq!(strs(&got), ["c", "h", "b", "t", "a"]);
        let got = change(&s, k, |l, w| {
            let old = l.all().unwrap();
            let keep: Vec<Vec<u8>> = old.iter().filter(|e| *e != b"h").cloned().collect();
            l.rewrite(w, &old, &keep);
        });
        assert_eq!(strs(&got), ["c", "b", "t", "a"]);
        let mut seen = Vec::new();
        load(&s, k)
            .unwrap()
            .scan(1, 2, true, |p, v| {
                seen.push((p, v.to_vec()));
                true
            })
            .unwrap();
        assert_eq!(seen, vec![(2, b"t".to_vec()), (1, b"b".to_vec())]);
        // Popping more than there is empties the list, and the key goes.
        let got = change(&s, k, |l, w| {
            assert_eq!(l.pop(w, End::Left, 100).unwrap().len(), 4);
        });
        assert!(got.is_empty());
        assert_eq!(s.get(0, k).unwrap(), None);
        // A new incarnation does not see the old records.
        let got = change(&s, k, |l, w| l.push(w, End::Right, &["n"]));
        assert_eq!(strs(&got), ["n"]);
        drop(s);
        store.into_db().close().unwrap();
    }
}
