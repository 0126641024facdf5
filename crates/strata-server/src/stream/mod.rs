//! The stream type (Redis's t_stream.c without the protocol): entries, consumer groups,
//! pending-entries lists and consumers as records under the stream's version. Record
//! layout: `docs/format/redis-keys.md`, "Streams".
//!
//! Every record of a stream is a member record (`keys::sub_prefix(KIND_SUBKEY, ..)`) whose
//! subkey starts with a tag byte (on-disk: do not renumber):
//!
//! - `0x01` entry, then the ID (16 bytes, big-endian ms then seq): range reads and trimming
//!   are ordered scans of these;
//! - `0x02` consumer group, then its name;
//! - `0x03` consumer, then the group's name (length-prefixed) and the consumer's name;
//! - `0x04` a group's pending entry, then the group's name (length-prefixed) and the ID;
//! - `0x05` a consumer's pending entry (an index of `0x04` by consumer), then the group's
//!   and the consumer's names (length-prefixed) and the ID.
//!
//! Since all of them are member records of the stream's incarnation, deleting, renaming,
//! copying or expiring a stream works as for any collection, and the compaction filter
//! reclaims a deleted stream's records.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

mod group;
mod id;
mod value;

pub use group::{Consumer, Group, PelEntry};
pub use id::{parse_id, StreamId};

use crate::keys::{sub_prefix, KIND_SUBKEY};
use crate::store::{Meta, RType, Tx, Writes};
use std::collections::HashSet;
use strata_engine::Result;

pub const TAG_ENTRY: u8 = 0x01;
pub const TAG_GROUP: u8 = 0x02;
pub const TAG_CONSUMER: u8 = 0x03;
pub const TAG_PEL: u8 = 0x04;
pub const TAG_CONSUMER_PEL: u8 = 0x05;

/// An entry's field-value pairs.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Size of the stream's fields in its metadata extras.
const INFO_BYTES: usize = 64;

/// A stream's own fields, kept in its metadata record's extras (the length is the
/// metadata's size): what Redis 7.0's `stream` struct holds besides its entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamInfo {
    /// The last ID generated or set (XSETID): an XADD must go above it.
    pub last_id: StreamId,
    /// The first live entry's ID; 0-0 while the stream is empty.
    pub first_id: StreamId,
    /// The largest ID ever deleted (XDEL, trimming) or set by XSETID MAXDELETEDID.
    pub max_deleted: StreamId,
    /// Entries ever added (XSETID ENTRIESADDED may set it).
    pub entries_added: u64,
    /// Entries (live or deleted) in the last node of Redis's layout, which Strata mirrors so
    /// that `~` trimming removes what Redis's would (`node_start` on entries): 0 when there
    /// is no last node.
    pub tail_node: u64,
}

impl StreamInfo {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(INFO_BYTES);
        v.extend_from_slice(&self.last_id.to_bytes());
        v.extend_from_slice(&self.first_id.to_bytes());
        v.extend_from_slice(&self.max_deleted.to_bytes());
        v.extend_from_slice(&self.entries_added.to_be_bytes());
        v.extend_from_slice(&self.tail_node.to_be_bytes());
        v
    }

    /// `None` for extras that are not a stream's.
    pub fn decode(b: &[u8]) -> Option<StreamInfo> {
        if b.len() != INFO_BYTES {
            return None;
        }
        let u = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(StreamInfo {
            last_id: StreamId::from_bytes(&b[0..16])?,
            first_id: StreamId::from_bytes(&b[16..32])?,
            max_deleted: StreamId::from_bytes(&b[32..48])?,
            entries_added: u(48),
            tail_node: u(56),
        })
    }

    /// Redis's `streamRangeHasTombstones`: whether an entry deleted from the stream may lie
    /// between `start` and `end` (inclusive; `None`: the stream's ends).
    pub fn has_tombstones(
        &self,
        length: u64,
        start: Option<StreamId>,
        end: Option<StreamId>,
    ) -> bool {
        if length == 0 || self.max_deleted.is_zero() || self.first_id > self.max_deleted {
            return false;
        }
        let start = start.unwrap_or(StreamId::MIN);
        let end = end.unwrap_or(StreamId::MAX);
        start <= self.max_deleted && self.max_deleted <= end
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: the number of entries added up to
    /// and including `id`, when it can be known; `None` otherwise.
    pub fn entries_up_to(&self, length: u64, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            if id < self.first_id {
                return Some(self.entries_added - length);
            }
            if id == self.first_id {
                return Some(self.entries_added - length + 1);
            }
        }
        None
    }

    /// A group's lag (XINFO GROUPS, Redis's `streamReplyWithCGLag`): entries not yet
    /// delivered to it, when it can be known (negative when ENTRIESREAD claimed more
    /// entries read than were added, as in Redis).
    pub fn lag(&self, length: u64, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        let lag = |read: u64| self.entries_added as i64 - read as i64;
        if let Some(read) = g.entries_read {
            if !self.has_tombstones(length, Some(g.last_id), None) {
                return Some(lag(read));
            }
        }
        self.entries_up_to(length, g.last_id).map(lag)
    }
}

/// An entry record's value: a flags byte (bit 0: the entry starts a node of Redis's
/// layout; bit 1: the node's entry count follows, 8 bytes, kept once the node is no longer
/// the last), the number of pairs (u32) and each field and value as a u32 length and bytes.
/// `head`: `None` for an entry inside a node, `Some(count)` for a node's first (0: the last
/// node, whose count is in the metadata).
pub fn encode_entry_head(
    head: Option<u64>,
    fields: &[(impl AsRef<[u8]>, impl AsRef<[u8]>)],
) -> Vec<u8> {
    let mut v = vec![match head {
        None => 0,
        Some(0) => 1,
        Some(_) => 3,
    }];
    if let Some(c) = head.filter(|&c| c > 0) {
        v.extend_from_slice(&c.to_be_bytes());
    }
    v.extend_from_slice(&(fields.len() as u32).to_be_bytes());
    for (f, x) in fields {
        for b in [f.as_ref(), x.as_ref()] {
            v.extend_from_slice(&(b.len() as u32).to_be_bytes());
            v.extend_from_slice(b);
        }
    }
    v
}

/// [`encode_entry_head`] without a stored count.
pub fn encode_entry(node_start: bool, fields: &[(impl AsRef<[u8]>, impl AsRef<[u8]>)]) -> Vec<u8> {
    encode_entry_head(node_start.then_some(0), fields)
}

/// `None` for bytes that are not an entry record's value.
pub fn decode_entry_head(b: &[u8]) -> Option<(Option<u64>, Fields)> {
    let (&flags, mut rest) = b.split_first()?;
    if flags & !3 != 0 || flags == 2 {
        return None;
    }
    let mut head = (flags & 1 == 1).then_some(0);
    if flags & 2 == 2 {
        head = Some(u64::from_be_bytes(rest.get(..8)?.try_into().ok()?));
        rest = &rest[8..];
    }
    let n = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let mut at = 4;
    let mut take = || -> Option<Vec<u8>> {
        let len = u32::from_be_bytes(rest.get(at..at + 4)?.try_into().ok()?) as usize;
        let v = rest.get(at + 4..at + 4 + len)?.to_vec();
        at += 4 + len;
        Some(v)
    };
    // Every pair takes at least 8 bytes: a count beyond that is corruption, not a reason
    // to reserve memory.
    let mut fields = Vec::with_capacity(n.min(rest.len() / 8));
    for _ in 0..n {
        let f = take()?;
        let x = take()?;
        fields.push((f, x));
    }
    (at == rest.len()).then_some((head, fields))
}

/// [`decode_entry_head`], with only whether the entry starts a node.
pub fn decode_entry(b: &[u8]) -> Option<(bool, Fields)> {
    decode_entry_head(b).map(|(h, f)| (h.is_some(), f))
}

/// A stream read for a command: its key, metadata and own fields.
#[derive(Clone, Debug)]
pub struct Stream {
    pub db: u8,
    pub key: Vec<u8>,
    pub meta: Meta,
    pub info: StreamInfo,
}

/// An entry as range reads return it.
pub type Entry = (StreamId, Fields);

impl Stream {
    /// A new, empty stream (XADD, XGROUP CREATE MKSTREAM) of incarnation `version`.
    pub fn create(db: u8, key: &[u8], version: u64) -> Stream {
        let info = StreamInfo::default();
        let mut meta = Meta::collection(RType::Stream, version);
        meta.value = info.encode();
        Stream {
            db,
            key: key.to_vec(),
            meta,
            info,
        }
    }

    /// The stream in `meta` (a stream's metadata record); `None` if its extras are not a
    /// stream's.
    pub fn from_meta(db: u8, key: &[u8], meta: Meta) -> Option<Stream> {
        let info = StreamInfo::decode(&meta.value)?;
        Some(Stream {
            db,
            key: key.to_vec(),
            meta,
            info,
        })
    }

    pub fn len(&self) -> u64 {
        self.meta.size
    }

    pub fn is_empty(&self) -> bool {
        self.meta.size == 0
    }

    /// The store key of a record: the stream's member prefix, `tag` and `rest`.
    pub fn record(&self, tag: u8, rest: &[&[u8]]) -> Vec<u8> {
        let mut k = sub_prefix(KIND_SUBKEY, self.db, &self.key, self.meta.version);
        k.push(tag);
        for r in rest {
            k.extend_from_slice(r);
        }
        k
    }

    pub fn entry_key(&self, id: StreamId) -> Vec<u8> {
        self.record(TAG_ENTRY, &[&id.to_bytes()])
    }

    /// Writes the metadata record (length and own fields) into `w`.
    pub fn put_meta(&mut self, w: &mut Writes) {
        self.meta.value = self.info.encode();
        w.meta(self.db, &self.key, Some(&self.meta));
    }

    /// Visits the entries from `start` to `end` inclusive (descending when `rev`) until `f`
    /// returns false.
    pub fn range(
        &self,
        store: &Tx<'_>,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(StreamId, Fields) -> bool,
    ) -> Result<()> {
        if start > end {
            return Ok(());
        }
        let lo = self.entry_key(start);
        let mut hi = self.entry_key(end);
        hi.push(0);
        scan_entry_records(store, &lo, &hi, rev, decode_entry, |id, (_, fields)| {
            f(id, fields)
        })
    }

    /// Up to `count` entries (0: all) from `start` to `end`.
    pub fn collect(
        &self,
        store: &Tx<'_>,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: usize,
    ) -> Result<Vec<Entry>> {
        let mut out = Vec::new();
        self.range(store, start, end, rev, |id, f| {
            out.push((id, f));
            count == 0 || out.len() < count
        })?;
        Ok(out)
    }

    /// The entry `id`, if it exists.
    pub fn get_entry(&self, store: &Tx<'_>, id: StreamId) -> Result<Option<(bool, Fields)>> {
        let k = self.entry_key(id);
        match store.get_member(&k)? {
            None => Ok(None),
            Some(v) => decode_entry(&v).map(Some).ok_or_else(|| corrupt(&k)),
        }
    }

    /// Appends entry `id` (above the last ID: the caller checked) into `w`. Nodes of Redis's
    /// layout hold up to `node_max` entries.
    pub fn add(
        &mut self,
        store: &Tx<'_>,
        w: &mut Writes,
        id: StreamId,
        fields: &[(impl AsRef<[u8]>, impl AsRef<[u8]>)],
        node_max: u64,
    ) -> Result<()> {
        let full = node_max > 0 && self.info.tail_node >= node_max;
        let node_start = self.info.tail_node == 0 || full;
        if full {
            self.seal_tail(store, w)?;
        }
        if node_start {
            self.info.tail_node = 0;
        }
        self.info.tail_node += 1;
        let k = self.entry_key(id);
        w.put_member(self.db, &self.key, &k, &encode_entry(node_start, fields));
        self.meta.size += 1;
        self.info.entries_added += 1;
        self.info.last_id = id;
        if self.meta.size == 1 {
            self.info.first_id = id;
        }
        Ok(())
    }

    /// The last node stops being the last: its first entry keeps its count from now on.
    fn seal_tail(&self, store: &Tx<'_>, w: &mut Writes) -> Result<()> {
        let mut start: Option<(StreamId, Fields)> = None;
        self.scan_entries(store, StreamId::MAX, true, |id, head, f| {
            if head.is_some() {
                start = Some((id, f));
                return false;
            }
            true
        })?;
        if let Some((id, f)) = start {
            let v = encode_entry_head(Some(self.info.tail_node), &f);
            w.put_member(self.db, &self.key, &self.entry_key(id), &v);
        }
        Ok(())
    }

    /// Visits the entries from `from` (inclusive) onwards, or downwards when `reverse`,
    /// with each one's node head, until `f` returns false.
    fn scan_entries(
        &self,
        store: &Tx<'_>,
        from: StreamId,
        reverse: bool,
        mut f: impl FnMut(StreamId, Option<u64>, Fields) -> bool,
    ) -> Result<()> {
        let (lo, hi) = if reverse {
            let mut hi = self.entry_key(from);
            hi.push(0);
            (self.entry_key(StreamId::MIN), hi)
        } else {
            (
                self.entry_key(from),
                crate::keys::prefix_end(&self.record(TAG_ENTRY, &[])),
            )
        };
        scan_entry_records(
            store,
            &lo,
            &hi,
            reverse,
            decode_entry_head,
            |id, (head, fields)| f(id, head, fields),
        )
    }

    /// Deletes the live entries among `ids` (ascending, distinct) into `w`, keeping the node
    /// marks and the first ID as Redis's layout would, and with `tombstones` (XDEL, not
    /// trimming) the largest deleted ID: the number deleted.
    pub fn delete(
        &mut self,
        store: &Tx<'_>,
        w: &mut Writes,
        ids: &[StreamId],
        tombstones: bool,
    ) -> Result<u64> {
        let doomed: HashSet<StreamId> = ids.iter().copied().collect();
        let mut n = 0u64;
        for &id in ids {
            let k = self.entry_key(id);
            let Some(v) = store.get_member(&k)? else {
                continue;
            };
            let (head, _) = decode_entry_head(&v).ok_or_else(|| corrupt(&k))?;
            w.delete_member(self.db, &self.key, &k);
            n += 1;
            if let Some(count) = head {
                self.move_node_start(store, w, id, count, &doomed)?;
            }
            if tombstones && id > self.info.max_deleted {
                self.info.max_deleted = id;
            }
        }
        self.meta.size -= n.min(self.meta.size);
        if n > 0 && doomed.contains(&self.info.first_id) {
            self.refresh_first(store, &doomed)?;
        }
        if self.meta.size == 0 {
            self.info.first_id = StreamId::MIN;
            self.info.tail_node = 0;
        }
        Ok(n)
    }

    /// Entry `id`, which started a node (with stored count `count`), is deleted (with the
    /// rest of `doomed`): the node's next surviving entry starts it now; a node left without
    /// one is gone, and if it was the last, the node before it with a survivor is the last
    /// now, with the count its first entry kept.
    fn move_node_start(
        &mut self,
        store: &Tx<'_>,
        w: &mut Writes,
        id: StreamId,
        count: u64,
        doomed: &HashSet<StreamId>,
    ) -> Result<()> {
        let mut heir: Option<(StreamId, Fields)> = None;
        let mut next_node = false;
        if let Some(from) = id.incr() {
            self.scan_entries(store, from, false, |nid, head, f| {
                if head.is_some() {
                    next_node = true;
                    return false;
                }
                if doomed.contains(&nid) {
                    return true;
                }
                heir = Some((nid, f));
                false
            })?;
        }
        match heir {
            Some((nid, f)) => {
                let v = encode_entry_head(Some(count), &f);
                w.put_member(self.db, &self.key, &self.entry_key(nid), &v);
            }
            None if !next_node => {
                self.info.tail_node = self.previous_node_count(store, id, doomed)?
            }
            None => {}
        }
        Ok(())
    }

    /// The entry count of the last node before `id` that keeps a surviving entry (0: none).
    fn previous_node_count(
        &self,
        store: &Tx<'_>,
        id: StreamId,
        doomed: &HashSet<StreamId>,
    ) -> Result<u64> {
        let Some(before) = id.decr() else {
            return Ok(0);
        };
        let (mut survivor, mut count) = (false, 0);
        self.scan_entries(store, before, true, |nid, head, _| {
            survivor |= !doomed.contains(&nid);
            match head {
                Some(c) if survivor => {
                    count = c;
                    false
                }
                Some(_) => true,
                None => true,
            }
        })?;
        Ok(count)
    }

    /// Sets the first ID after the first entry was deleted (with the rest of `doomed`,
    /// still visible to reads).
    fn refresh_first(&mut self, store: &Tx<'_>, doomed: &HashSet<StreamId>) -> Result<()> {
        let mut first = None;
        self.range(store, self.info.first_id, StreamId::MAX, false, |id, _| {
            if doomed.contains(&id) {
                return true;
            }
            first = Some(id);
            false
        })?;
        self.info.first_id = first.unwrap_or(StreamId::MIN);
        Ok(())
    }

    /// The IDs of the entries from the head while `f` wants more (it sees each ID and
    /// whether it starts a node).
    fn scan_head(&self, store: &Tx<'_>, mut f: impl FnMut(StreamId, bool) -> bool) -> Result<()> {
        let lo = self.entry_key(StreamId::MIN);
        let hi = crate::keys::prefix_end(&self.record(TAG_ENTRY, &[]));
        scan_entry_records(store, &lo, &hi, false, decode_entry, |id, (start, _)| {
            f(id, start)
        })
    }

    /// Trims into `w` (Redis's `streamTrim`): entries below `minid`, or the oldest beyond
    /// `maxlen`; `approx` removes whole nodes only, at most `limit` entries (0: no limit).
    /// The number of entries deleted.
    pub fn trim(
        &mut self,
        store: &Tx<'_>,
        w: &mut Writes,
        rule: Trim,
        approx: bool,
        limit: u64,
    ) -> Result<u64> {
        let size = self.meta.size;
        if matches!(rule, Trim::MaxLen(max) if size <= max) {
            return Ok(0);
        }
        let mut doomed: Vec<StreamId> = Vec::new();
        if approx {
            // Whether a whole node (its live IDs) goes, given what already goes.
            let goes = |doomed: &[StreamId], node: &[StreamId]| {
                let (deleted, n) = (doomed.len() as u64, node.len() as u64);
                if matches!(rule, Trim::MaxLen(max) if size - deleted <= max) {
                    return false;
                }
                if limit > 0 && deleted + n > limit {
                    return false;
                }
                match rule {
                    Trim::MaxLen(max) => size - deleted >= n + max,
                    Trim::MinId(min) => node.last().is_some_and(|&l| l < min),
                }
            };
            let mut node: Vec<StreamId> = Vec::new();
            let mut stopped = false;
            self.scan_head(store, |id, start| {
                if start && !node.is_empty() {
                    if !goes(&doomed, &node) {
                        stopped = true;
                        return false;
                    }
                    doomed.append(&mut node);
                }
                node.push(id);
                true
            })?;
            if !stopped && !node.is_empty() && goes(&doomed, &node) {
                doomed.append(&mut node);
            }
        } else {
            self.scan_head(store, |id, _| {
                let go = match rule {
                    Trim::MaxLen(max) => size - doomed.len() as u64 > max,
                    Trim::MinId(min) => id < min,
                };
                if go {
                    doomed.push(id);
                }
                go
            })?;
        }
        self.delete(store, w, &doomed, false)
    }
}

/// What trimming keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

/// Scans the entry records in `[lo, hi)` (keys ending in a 16-byte ID), decoding each value
/// with `dec`, while `f` wants more; a record whose ID or value does not decode ends the
/// scan as corruption.
fn scan_entry_records<T>(
    store: &Tx<'_>,
    lo: &[u8],
    hi: &[u8],
    reverse: bool,
    dec: impl Fn(&[u8]) -> Option<T>,
    mut f: impl FnMut(StreamId, T) -> bool,
) -> Result<()> {
    let at = lo.len() - 16;
    let mut bad = None;
    store.scan_range(lo, hi, reverse, |k, v| {
        match (StreamId::from_bytes(&k[at..]), dec(v)) {
            (Some(id), Some(t)) => f(id, t),
            _ => {
                bad = Some(k.to_vec());
                false
            }
        }
    })?;
    match bad {
        Some(k) => Err(corrupt(&k)),
        None => Ok(()),
    }
}

pub(crate) fn corrupt(k: &[u8]) -> strata_engine::Error {
    strata_engine::Error::Corruption {
        file: "<redis stream record>".into(),
        offset: 0,
        reason: format!(
            "the stream record {:?} does not decode",
            String::from_utf8_lossy(k)
        ),
    }
}

#[cfg(test)]
mod tests;
