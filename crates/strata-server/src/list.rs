//! The list type (Redis's t_list.c, as Kvrocks' `types/redis_list.cc`): a typed handle over
//! the command's transaction, with no protocol in it. Kvrocks' layout
//! (`docs/format/redis-keys.md`, Lists): the metadata record's value holds the head and tail
//! indexes, and element `i` (0-based from the head) is the member record
//! `sub_key(db, key, version, (head + i) as 8 bytes BE)`. Indexes start at 2^63 so that
//! both ends can grow; pushing or popping at either end, and reading or replacing one
//! element, is one metadata read and one member read or write. Commands in the middle
//! (LINSERT, LREM) rewrite the elements they shift, as Redis's are O(n).
//!
//! A handle is opened for a read ([`List::open`]: a keyspace hit or miss, WRONGTYPE as
//! `TypeError::WrongType`), a write ([`List::open_write`]) or as a new list
//! ([`List::open_or_create`]); its command methods ([`List::push`], [`List::pop`],
//! [`List::set`], [`List::insert`], [`List::remove`], [`List::trim`]) apply their writes
//! through the transaction at once, and delete the key with its last element. A command
//! that writes several keys in one atomic write (LMOVE, RESTORE, SORT STORE) adds the same
//! changes to its own [`Writes`] with the `stage_*` methods and [`List::finish`]. Lists
//! have no encoding limits to apply: Redis 7.0 reports every list as a quicklist.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

use crate::keys::sub_key;
use crate::store::{Meta, RType, Tx, TypeError, Writes};
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

/// One list of database `db`, read and written through one transaction: its metadata and
/// bounds.
pub struct List<'a> {
    store: &'a Tx<'a>,
    db: u8,
    key: &'a [u8],
    pub meta: Meta,
    pub b: Bounds,
}

impl<'a> List<'a> {
    /// The list at `key` for a read (counting a keyspace hit or miss): `None` if absent,
    /// `WrongType` if the key holds another type.
    pub fn open(
        tx: &'a Tx<'a>,
        db: u8,
        key: &'a [u8],
    ) -> std::result::Result<Option<List<'a>>, TypeError> {
        match tx.lookup_read_typed(db, key, RType::List)? {
            Some(m) => Ok(Some(List::from_meta(tx, db, key, m)?)),
            None => Ok(None),
        }
    }

    /// The list at `key` for a write (no hit or miss, as Redis's `lookupKeyWrite`): `None`
    /// if absent, `WrongType` if the key holds another type.
    pub fn open_write(
        tx: &'a Tx<'a>,
        db: u8,
        key: &'a [u8],
    ) -> std::result::Result<Option<List<'a>>, TypeError> {
        match tx.get_typed(db, key, RType::List)? {
            Some(m) => Ok(Some(List::from_meta(tx, db, key, m)?)),
            None => Ok(None),
        }
    }

    /// [`List::open_write`], or a new empty list if the key is absent (it exists once an
    /// element is pushed).
    pub fn open_or_create(
        tx: &'a Tx<'a>,
        db: u8,
        key: &'a [u8],
    ) -> std::result::Result<List<'a>, TypeError> {
        Ok(List::open_write(tx, db, key)?.unwrap_or_else(|| List::create(tx, db, key)))
    }

    /// The list `meta` (already checked to be a list) of `key`.
    pub fn from_meta(store: &'a Tx<'a>, db: u8, key: &'a [u8], meta: Meta) -> Result<List<'a>> {
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

    /// A new, empty list, a new incarnation of `key` whatever it holds now (its metadata is
    /// written by [`List::finish`] once it has elements).
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

    /// Adds to `w` the push of `elems` one by one at `end` (LPUSH a b c leaves c first).
    pub fn stage_push<E: AsRef<[u8]>>(&mut self, w: &mut Writes, end: End, elems: &[E]) {
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

    /// Adds to `w` the pop of up to `count` elements from `end`; the elements, in pop
    /// order.
    pub fn stage_pop(&mut self, w: &mut Writes, end: End, count: u64) -> Result<Vec<Vec<u8>>> {
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

    /// Adds to `w` the replacement of the element at position `pos`.
    pub fn stage_set(&mut self, w: &mut Writes, pos: u64, elem: &[u8]) {
        w.put_member(self.db, self.key, &self.rec(self.b.head + pos), elem);
    }

    /// Adds to `w` keeping positions `keep` (inclusive; `None`: nothing) and dropping the
    /// rest (LTRIM).
    pub fn stage_trim(&mut self, w: &mut Writes, keep: Option<(u64, u64)>) {
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

    /// Adds to `w` inserting `elem` at position `pos` (0..=len), shifting the shorter side
    /// by one.
    pub fn stage_insert(&mut self, w: &mut Writes, pos: u64, elem: &[u8]) -> Result<()> {
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

    /// Adds to `w` replacing the whole list by `elems` (LREM's result), rewriting only the
    /// positions from the first one that changes and deleting the records past the new tail.
    pub fn stage_rewrite(&mut self, w: &mut Writes, old: &[Vec<u8>], elems: &[Vec<u8>]) {
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
        self.stage_meta(w);
    }

    fn stage_meta(&mut self, w: &mut Writes) {
        if self.len() == 0 {
            w.meta(self.db, self.key, None);
        } else {
            self.meta.size = self.len();
            self.meta.value = self.b.encode();
            w.meta(self.db, self.key, Some(&self.meta));
        }
    }

    /// Applies `w` with the list's metadata.
    fn commit(&mut self, mut w: Writes) -> Result<()> {
        self.stage_meta(&mut w);
        self.store.apply(w)
    }

    // ---- the commands' operations: each applies its writes at once ----------------------

    /// LPUSH, RPUSH: pushes `elems` one by one at `end`; the new length.
    pub fn push<E: AsRef<[u8]>>(&mut self, end: End, elems: &[E]) -> Result<u64> {
        let mut w = Writes::new();
        self.stage_push(&mut w, end, elems);
        self.commit(w)?;
        Ok(self.len())
    }

    /// LPOP, RPOP: pops up to `count` elements from `end`, in pop order; the key goes with
    /// its last element. The metadata is written even when nothing is popped (a count of 0).
    pub fn pop(&mut self, end: End, count: u64) -> Result<Vec<Vec<u8>>> {
        let mut w = Writes::new();
        let popped = self.stage_pop(&mut w, end, count)?;
        self.commit(w)?;
        Ok(popped)
    }

    /// LRANGE: the elements of `start..=stop` (Redis's indexes; negative from the tail).
    pub fn range(&self, start: i64, stop: i64) -> Result<Vec<Vec<u8>>> {
        let Some((from, to)) = range(start, stop, self.len()) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity((to - from + 1) as usize);
        self.scan(from, to, false, |_, v| {
            out.push(v.to_vec());
            true
        })?;
        Ok(out)
    }

    /// LINDEX: the element at Redis index `idx` (negative: from the tail), if inside.
    pub fn index(&self, idx: i64) -> Result<Option<Vec<u8>>> {
        match self.b.position(idx) {
            Some(p) => self.get(p).map(Some),
            None => Ok(None),
        }
    }

    /// LSET: replaces the element at Redis index `idx`; false (nothing written) when the
    /// index is outside the list.
    pub fn set(&mut self, idx: i64, elem: &[u8]) -> Result<bool> {
        let Some(p) = self.b.position(idx) else {
            return Ok(false);
        };
        let mut w = Writes::new();
        self.stage_set(&mut w, p, elem);
        self.store.apply(w)?;
        Ok(true)
    }

    /// LINSERT: inserts `elem` before (after, when `after`) the first element equal to
    /// `pivot`; the new length, or `None` (nothing written) when there is no such element.
    pub fn insert(&mut self, after: bool, pivot: &[u8], elem: &[u8]) -> Result<Option<u64>> {
        let mut at = None;
        if self.len() > 0 {
            self.scan(0, self.len() - 1, false, |p, v| {
                if v == pivot {
                    at = Some(p);
                }
                at.is_none()
            })?;
        }
        let Some(p) = at else {
            return Ok(None);
        };
        let mut w = Writes::new();
        self.stage_insert(&mut w, if after { p + 1 } else { p }, elem)?;
        self.commit(w)?;
        Ok(Some(self.len()))
    }

    /// LREM: removes the first `count` elements equal to `elem` (from the tail when
    /// `count` is negative; 0: all of them); how many. The key goes with its last element.
    pub fn remove(&mut self, count: i64, elem: &[u8]) -> Result<u64> {
        let old = self.all()?;
        let limit = if count == 0 {
            u64::MAX
        } else {
            count.unsigned_abs()
        };
        let mut drop = vec![false; old.len()];
        let mut removed = 0u64;
        let order: Box<dyn Iterator<Item = usize>> = if count < 0 {
            Box::new((0..old.len()).rev())
        } else {
            Box::new(0..old.len())
        };
        for i in order {
            if removed == limit {
                break;
            }
            if old[i] == elem {
                drop[i] = true;
                removed += 1;
            }
        }
        if removed > 0 {
            let keep: Vec<Vec<u8>> = old
                .iter()
                .zip(&drop)
                .filter(|(_, d)| !**d)
                .map(|(e, _)| e.clone())
                .collect();
            let mut w = Writes::new();
            self.stage_rewrite(&mut w, &old, &keep);
            self.commit(w)?;
        }
        Ok(removed)
    }

    /// LTRIM: keeps `start..=stop` (Redis's indexes) and drops the rest; the length left.
    /// A trim that keeps everything writes nothing; the key goes with its last element.
    pub fn trim(&mut self, start: i64, stop: i64) -> Result<u64> {
        let keep = range(start, stop, self.len());
        if self.len() > 0 && keep == Some((0, self.len() - 1)) {
            return Ok(self.len());
        }
        let mut w = Writes::new();
        self.stage_trim(&mut w, keep);
        self.commit(w)?;
        Ok(self.len())
    }

    /// LPOS: the positions of the elements equal to `elem`, by [`PosOptions`].
    pub fn positions(&self, elem: &[u8], o: PosOptions) -> Result<Vec<u64>> {
        let len = self.len();
        let mut found = Vec::new();
        if len == 0 {
            return Ok(found);
        }
        let reverse = o.rank < 0;
        // As Redis's `rank = -rank`: LONG_MIN stays negative (and matches from the first).
        let rank = if reverse {
            o.rank.wrapping_neg()
        } else {
            o.rank
        };
        let (mut matches, mut index) = (0i64, 0i64);
        self.scan(0, len - 1, reverse, |p, v| {
            if o.maxlen != 0 && index >= o.maxlen {
                return false;
            }
            index += 1;
            if v != elem {
                return true;
            }
            matches += 1;
            if matches < rank {
                return true;
            }
            found.push(p);
            match o.count {
                None => false,
                Some(c) => !(c != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= c),
            }
        })?;
        Ok(found)
    }
}

/// LPOS's options, checked by the command: which match to start from (`rank`: 1 the first,
/// negative from the tail, never 0), how many to return (`count`: `None` one, `Some(0)`
/// all), and how many elements to compare at most (`maxlen`, 0: all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PosOptions {
    pub rank: i64,
    pub count: Option<i64>,
    pub maxlen: i64,
}

/// What [`move_one`] moved: the element, and how many elements the source has left (0: it
/// was deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    pub elem: Vec<u8>,
    pub src_left: u64,
}

/// LMOVE: pops an element from `from` of list `src` and pushes it at `to` of list `dst`,
/// one atomic write (`dst` created if absent; `src` deleted with its last element). `None`
/// if `src` is absent (Redis checks `dst`'s type only when there is something to move).
pub fn move_one(
    tx: &Tx<'_>,
    db: u8,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> std::result::Result<Option<Moved>, TypeError> {
    let Some(mut sl) = List::open_write(tx, db, src)? else {
        return Ok(None);
    };
    let mut w = Writes::new();
    let dl = if src == dst {
        // Redis looks the destination up too: a second access.
        tx.access.touch(db, dst, crate::store::now_ms());
        None
    } else {
        Some(List::open_or_create(tx, db, dst)?)
    };
    let elem = sl.stage_pop(&mut w, from, 1)?.remove(0);
    let src_left = match dl {
        None => {
            sl.stage_push(&mut w, to, &[&elem]);
            sl.finish(&mut w);
            1
        }
        Some(mut dl) => {
            let left = sl.len();
            sl.finish(&mut w);
            dl.stage_push(&mut w, to, &[&elem]);
            dl.finish(&mut w);
            left
        }
    };
    tx.apply(w)?;
    Ok(Some(Moved { elem, src_left }))
}

/// What [`pop_first`] popped: which of the keys, its elements, and how many it has left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoppedFrom {
    pub index: usize,
    pub elems: Vec<Vec<u8>>,
    pub left: u64,
}

/// LMPOP, BLPOP and kin: pops up to `count` elements from `end` of the first of `keys`
/// that holds a list. `WrongType` for a key of another type met before it.
pub fn pop_first<K: AsRef<[u8]>>(
    tx: &Tx<'_>,
    db: u8,
    keys: &[K],
    end: End,
    count: u64,
) -> std::result::Result<Option<PoppedFrom>, TypeError> {
    for (index, k) in keys.iter().enumerate() {
        if let Some(mut l) = List::open_write(tx, db, k.as_ref())? {
            let elems = l.pop(end, count)?;
            return Ok(Some(PoppedFrom {
                index,
                elems,
                left: l.len(),
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
#[path = "list_tests.rs"]
mod tests;
