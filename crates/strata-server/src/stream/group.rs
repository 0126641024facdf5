//! Consumer groups of a stream: the group records, their pending-entries lists (one record
//! per pending ID, plus an index by consumer) and their consumers. Layout in `mod.rs` and
//! `docs/format/redis-keys.md`, "Streams".

use super::{corrupt, Stream, StreamId, TAG_CONSUMER, TAG_CONSUMER_PEL, TAG_GROUP, TAG_PEL};
use crate::store::{Tx, Writes};
use strata_engine::Result;

/// A consumer group (Redis's `streamCG` without its PEL and consumers, which are records of
/// their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// Entries the group read, when known (Redis's `entries_read`, -1 there when unknown).
    pub entries_read: Option<u64>,
}

impl Group {
    /// last ID (16) | entries read (8; `u64::MAX`: unknown).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.last_id.to_bytes().to_vec();
        v.extend_from_slice(&self.entries_read.unwrap_or(u64::MAX).to_be_bytes());
        v
    }

    pub fn decode(b: &[u8]) -> Option<Group> {
        if b.len() != 24 {
            return None;
        }
        let read = u64::from_be_bytes(b[16..24].try_into().ok()?);
        Some(Group {
            last_id: StreamId::from_bytes(b)?,
            entries_read: (read != u64::MAX).then_some(read),
        })
    }
}

/// A consumer of a group (its pending entries are the group PEL's records naming it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Consumer {
    /// When the consumer last read or claimed, Unix ms.
    pub seen_ms: u64,
}

impl Consumer {
    pub fn encode(&self) -> Vec<u8> {
        self.seen_ms.to_be_bytes().to_vec()
    }

    pub fn decode(b: &[u8]) -> Option<Consumer> {
        Some(Consumer {
            seen_ms: u64::from_be_bytes(b.try_into().ok()?),
        })
    }
}

/// An entry delivered to a consumer and not acknowledged (Redis's `streamNACK`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PelEntry {
    pub consumer: Vec<u8>,
    /// Last delivery, Unix ms.
    pub delivery_ms: u64,
    pub deliveries: u64,
}

impl PelEntry {
    /// delivery time (8) | delivery count (8) | consumer name.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16 + self.consumer.len());
        v.extend_from_slice(&self.delivery_ms.to_be_bytes());
        v.extend_from_slice(&self.deliveries.to_be_bytes());
        v.extend_from_slice(&self.consumer);
        v
    }

    pub fn decode(b: &[u8]) -> Option<PelEntry> {
        Some(PelEntry {
            delivery_ms: u64::from_be_bytes(b.get(..8)?.try_into().ok()?),
            deliveries: u64::from_be_bytes(b.get(8..16)?.try_into().ok()?),
            consumer: b.get(16..)?.to_vec(),
        })
    }
}

fn lp(b: &[u8]) -> [u8; 4] {
    (b.len() as u32).to_be_bytes()
}

impl Stream {
    fn group_key(&self, name: &[u8]) -> Vec<u8> {
        self.record(TAG_GROUP, &[name])
    }

    fn consumer_key(&self, group: &[u8], name: &[u8]) -> Vec<u8> {
        self.record(TAG_CONSUMER, &[&lp(group), group, name])
    }

    fn pel_key(&self, group: &[u8], id: StreamId) -> Vec<u8> {
        self.record(TAG_PEL, &[&lp(group), group, &id.to_bytes()])
    }

    fn consumer_pel_key(&self, group: &[u8], consumer: &[u8], id: StreamId) -> Vec<u8> {
        self.record(
            TAG_CONSUMER_PEL,
            &[&lp(group), group, &lp(consumer), consumer, &id.to_bytes()],
        )
    }

    /// Visits the records under `prefix` from `lo_suffix` to `hi_suffix` (inclusive; `None`:
    /// the end) in order until `f` returns false; a record whose value `dec` cannot read is
    /// corruption.
    #[allow(clippy::too_many_arguments)] // a range scan's bounds, direction and two closures
    fn scan_decoded<T>(
        &self,
        store: &Tx<'_>,
        prefix: &[u8],
        lo_suffix: &[u8],
        hi_suffix: Option<&[u8]>,
        reverse: bool,
        dec: impl Fn(&[u8]) -> Option<T>,
        mut f: impl FnMut(&[u8], T) -> bool,
    ) -> Result<()> {
        let mut lo = prefix.to_vec();
        lo.extend_from_slice(lo_suffix);
        let hi = match hi_suffix {
            Some(s) => {
                let mut h = prefix.to_vec();
                h.extend_from_slice(s);
                h.push(0);
                h
            }
            None => crate::keys::prefix_end(prefix),
        };
        let mut bad = None;
        store.scan_range(&lo, &hi, reverse, |k, v| match dec(v) {
            Some(t) => f(&k[prefix.len()..], t),
            None => {
                bad = Some(k.to_vec());
                false
            }
        })?;
        match bad {
            Some(k) => Err(corrupt(&k)),
            None => Ok(()),
        }
    }

    /// The groups, by name.
    pub fn groups(&self, store: &Tx<'_>) -> Result<Vec<(Vec<u8>, Group)>> {
        let mut out = Vec::new();
        let prefix = self.record(TAG_GROUP, &[]);
        self.scan_decoded(store, &prefix, b"", None, false, Group::decode, |k, g| {
            out.push((k.to_vec(), g));
            true
        })?;
        Ok(out)
    }

    pub fn group(&self, store: &Tx<'_>, name: &[u8]) -> Result<Option<Group>> {
        let k = self.group_key(name);
        match store.get_member(&k)? {
            None => Ok(None),
            Some(v) => Group::decode(&v).map(Some).ok_or_else(|| corrupt(&k)),
        }
    }

    pub fn put_group(&self, w: &mut Writes, name: &[u8], g: &Group) {
        w.put_member(self.db, &self.key, &self.group_key(name), &g.encode());
    }

    /// Deletes group `name` with its consumers and pending entries.
    pub fn delete_group(&self, store: &Tx<'_>, w: &mut Writes, name: &[u8]) -> Result<()> {
        w.delete_member(self.db, &self.key, &self.group_key(name));
        for tag in [TAG_CONSUMER, TAG_PEL, TAG_CONSUMER_PEL] {
            let prefix = self.record(tag, &[&lp(name), name]);
            store.scan_prefix(&prefix, false, |k, _| {
                w.delete_member(self.db, &self.key, k);
                true
            })?;
        }
        Ok(())
    }

    /// The consumers of `group`, by name.
    pub fn consumers(&self, store: &Tx<'_>, group: &[u8]) -> Result<Vec<(Vec<u8>, Consumer)>> {
        let mut out = Vec::new();
        let prefix = self.record(TAG_CONSUMER, &[&lp(group), group]);
        self.scan_decoded(
            store,
            &prefix,
            b"",
            None,
            false,
            Consumer::decode,
            |k, c| {
                out.push((k.to_vec(), c));
                true
            },
        )?;
        Ok(out)
    }

    pub fn consumer(&self, store: &Tx<'_>, group: &[u8], name: &[u8]) -> Result<Option<Consumer>> {
        let k = self.consumer_key(group, name);
        match store.get_member(&k)? {
            None => Ok(None),
            Some(v) => Consumer::decode(&v).map(Some).ok_or_else(|| corrupt(&k)),
        }
    }

    pub fn put_consumer(&self, w: &mut Writes, group: &[u8], name: &[u8], c: &Consumer) {
        w.put_member(
            self.db,
            &self.key,
            &self.consumer_key(group, name),
            &c.encode(),
        );
    }

    /// Deletes consumer `name` of `group` and its pending entries: how many it had.
    pub fn delete_consumer(
        &self,
        store: &Tx<'_>,
        w: &mut Writes,
        group: &[u8],
        name: &[u8],
    ) -> Result<u64> {
        let ids = self.consumer_pending(store, group, name, StreamId::MIN, StreamId::MAX, 0)?;
        for &id in &ids {
            self.pel_delete(w, group, id, name);
        }
        w.delete_member(self.db, &self.key, &self.consumer_key(group, name));
        Ok(ids.len() as u64)
    }

    /// Pending entry `id` of `group`.
    pub fn pel_get(&self, store: &Tx<'_>, group: &[u8], id: StreamId) -> Result<Option<PelEntry>> {
        let k = self.pel_key(group, id);
        match store.get_member(&k)? {
            None => Ok(None),
            Some(v) => PelEntry::decode(&v).map(Some).ok_or_else(|| corrupt(&k)),
        }
    }

    /// Writes pending entry `id` of `group`; `old_owner`: the consumer it was pending for
    /// before, if any (its index record goes).
    pub fn pel_put(
        &self,
        w: &mut Writes,
        group: &[u8],
        id: StreamId,
        e: &PelEntry,
        old_owner: Option<&[u8]>,
    ) {
        if let Some(o) = old_owner {
            if o != e.consumer.as_slice() {
                w.delete_member(self.db, &self.key, &self.consumer_pel_key(group, o, id));
            }
        }
        w.put_member(self.db, &self.key, &self.pel_key(group, id), &e.encode());
        w.put_member(
            self.db,
            &self.key,
            &self.consumer_pel_key(group, &e.consumer, id),
            b"",
        );
    }

    /// Deletes pending entry `id` of `group`, pending for `consumer`.
    pub fn pel_delete(&self, w: &mut Writes, group: &[u8], id: StreamId, consumer: &[u8]) {
        w.delete_member(self.db, &self.key, &self.pel_key(group, id));
        w.delete_member(
            self.db,
            &self.key,
            &self.consumer_pel_key(group, consumer, id),
        );
    }

    /// Visits the pending entries of `group` from `start` to `end` (inclusive) in ID order
    /// (descending when `reverse`) until `f` returns false.
    pub fn pel_range(
        &self,
        store: &Tx<'_>,
        group: &[u8],
        start: StreamId,
        end: StreamId,
        reverse: bool,
        mut f: impl FnMut(StreamId, PelEntry) -> bool,
    ) -> Result<()> {
        if start > end {
            return Ok(());
        }
        let prefix = self.record(TAG_PEL, &[&lp(group), group]);
        self.scan_decoded(
            store,
            &prefix,
            &start.to_bytes(),
            Some(&end.to_bytes()),
            reverse,
            PelEntry::decode,
            |k, e| match StreamId::from_bytes(k) {
                Some(id) => f(id, e),
                None => true,
            },
        )
    }

    /// Up to `count` (0: all) IDs pending for `consumer` of `group`, from `start` to `end`.
    pub fn consumer_pending(
        &self,
        store: &Tx<'_>,
        group: &[u8],
        consumer: &[u8],
        start: StreamId,
        end: StreamId,
        count: usize,
    ) -> Result<Vec<StreamId>> {
        let mut out = Vec::new();
        if start > end {
            return Ok(out);
        }
        let prefix = self.record(
            TAG_CONSUMER_PEL,
            &[&lp(group), group, &lp(consumer), consumer],
        );
        self.scan_decoded(
            store,
            &prefix,
            &start.to_bytes(),
            Some(&end.to_bytes()),
            false,
            |_| Some(()),
            |k, ()| {
                if let Some(id) = StreamId::from_bytes(k) {
                    out.push(id);
                }
                count == 0 || out.len() < count
            },
        )?;
        Ok(out)
    }

    /// How many entries are pending for `consumer` of `group`.
    pub fn consumer_pending_count(
        &self,
        store: &Tx<'_>,
        group: &[u8],
        consumer: &[u8],
    ) -> Result<u64> {
        Ok(self
            .consumer_pending(store, group, consumer, StreamId::MIN, StreamId::MAX, 0)?
            .len() as u64)
    }

    /// How many entries are pending in `group`.
    pub fn pending_count(&self, store: &Tx<'_>, group: &[u8]) -> Result<u64> {
        let mut n = 0;
        self.pel_range(store, group, StreamId::MIN, StreamId::MAX, false, |_, _| {
            n += 1;
            true
        })?;
        Ok(n)
    }
}
