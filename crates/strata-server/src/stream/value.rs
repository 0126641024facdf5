//! A stream as one value, for DUMP and RESTORE (and a replica's full sync): its records read
//! into the RDB codec's [`StreamValue`], and a [`StreamValue`] written as the records of a
//! new incarnation. Node marks carry Redis's layout both ways (`mod.rs`): a node's first
//! entry starts it, and its total (live and deleted entries) is the stored count, or the
//! metadata's `tail_node` for the last node.

use super::{Consumer, Group, PelEntry, Stream, StreamId, StreamInfo};
use crate::rdb::stream::{ConsumerValue, GroupValue, Node, PendingValue, StreamValue};
use crate::store::{Tx, Writes};
use strata_engine::Result;

impl Stream {
    /// The whole stream: entries in their nodes, own fields, groups with their pending
    /// entries and consumers.
    pub fn to_value(&self, store: &Tx<'_>) -> Result<StreamValue> {
        let mut nodes: Vec<Node> = Vec::new();
        self.scan_entries(store, StreamId::MIN, false, |id, head, fields| {
            if head.is_some() || nodes.is_empty() {
                nodes.push(Node {
                    entries: Vec::new(),
                    total: head.unwrap_or(0),
                });
            }
            if let Some(n) = nodes.last_mut() {
                n.entries.push((id, fields));
            }
            true
        })?;
        let last = nodes.len().saturating_sub(1);
        for (i, n) in nodes.iter_mut().enumerate() {
            // The last node's count lives in the metadata (its head says 0).
            if i == last && n.total == 0 {
                n.total = self.info.tail_node;
            }
            n.total = n.total.max(n.entries.len() as u64);
        }
        let mut groups = Vec::new();
        for (name, g) in self.groups(store)? {
            let mut pel = Vec::new();
            self.pel_range(
                store,
                &name,
                StreamId::MIN,
                StreamId::MAX,
                false,
                |id, e| {
                    pel.push(PendingValue {
                        id,
                        consumer: e.consumer,
                        delivery_ms: e.delivery_ms,
                        deliveries: e.deliveries,
                    });
                    true
                },
            )?;
            let consumers = self
                .consumers(store, &name)?
                .into_iter()
                .map(|(name, c)| ConsumerValue {
                    name,
                    seen_ms: c.seen_ms,
                })
                .collect();
            groups.push(GroupValue {
                name,
                last_id: g.last_id,
                entries_read: g.entries_read,
                pel,
                consumers,
            });
        }
        Ok(StreamValue {
            nodes,
            last_id: self.info.last_id,
            max_deleted: self.info.max_deleted,
            entries_added: self.info.entries_added,
            groups,
        })
    }

    /// Adds to `w` the records of `v` as stream `key` of incarnation `version` (records of
    /// an older incarnation become unreachable) and returns it; the caller sets the expiry
    /// and writes the metadata ([`Stream::put_meta`]).
    pub fn from_value(w: &mut Writes, db: u8, key: &[u8], version: u64, v: &StreamValue) -> Stream {
        let mut s = Stream::create(db, key, version);
        let last = v.nodes.len().saturating_sub(1);
        for (i, n) in v.nodes.iter().enumerate() {
            for (j, (id, fields)) in n.entries.iter().enumerate() {
                let head = match (j, i == last) {
                    (0, true) => Some(0),
                    (0, false) => Some(n.total.max(1)),
                    _ => None,
                };
                let rec = super::encode_entry_head(head, fields);
                w.put_member(db, key, &s.entry_key(*id), &rec);
            }
        }
        s.meta.size = v.len();
        s.info = StreamInfo {
            last_id: v.last_id,
            first_id: v.first_id(),
            max_deleted: v.max_deleted,
            entries_added: v.entries_added,
            tail_node: v.nodes.last().map_or(0, |n| n.total),
        };
        for g in &v.groups {
            let group = Group {
                last_id: g.last_id,
                entries_read: g.entries_read,
            };
            s.put_group(w, &g.name, &group);
            for c in &g.consumers {
                let seen = Consumer { seen_ms: c.seen_ms };
                s.put_consumer(w, &g.name, &c.name, &seen);
            }
            for p in &g.pel {
                let e = PelEntry {
                    consumer: p.consumer.clone(),
                    delivery_ms: p.delivery_ms,
                    deliveries: p.deliveries,
                };
                s.pel_put(w, &g.name, p.id, &e, None);
            }
        }
        s
    }
}
