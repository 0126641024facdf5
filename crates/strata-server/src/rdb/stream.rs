//! Streams in RDB (`docs/format/rdb.md`, "Streams"): Redis's radix tree of listpack nodes,
//! the stream's own fields, and its consumer groups with their pending-entries lists and
//! consumers. Read in the three forms Redis writes (`STREAM_LISTPACKS` of Redis 5–6.2,
//! `_2` of 7.0, `_3` of 7.2+ with consumers' active times), written in the first, which
//! every Redis from 5.0 loads.
//!
//! A node is a listpack: a master entry (live count, deleted count, the master fields, a
//! 0) and entries delta-encoded against the node's key (its master ID), each flags, ms and
//! seq deltas, its fields (or only the values when they are the master fields) and its
//! element count. Reading checks everything Redis's deep sanitization checks and what
//! Strata's records need besides: IDs strictly ascending across the stream, the counts
//! equal to the entries, the length equal to the live entries, every pending entry owned
//! by exactly one consumer.

use super::packed::{self, LpItem};
use super::read::Reader;
use super::{types, write, RdbError, PREALLOC_MAX};
use crate::stream::{StreamId, StreamInfo};
use std::collections::{BTreeMap, HashMap, HashSet};

/// An entry's field-value pairs.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Entry flags in a node (Redis's `STREAM_ITEM_FLAG_*`). On-disk: do not renumber.
const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

/// A stream as the codec carries it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamValue {
    /// The nodes of Redis's layout, in ID order, each with at least one live entry.
    pub nodes: Vec<Node>,
    pub last_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    /// Groups by name.
    pub groups: Vec<GroupValue>,
}

/// One node: its live entries and how many entries (live or deleted) it holds in Redis,
/// which decides when XADD starts the next node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub entries: Vec<(StreamId, Fields)>,
    pub total: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub name: Vec<u8>,
    pub last_id: StreamId,
    /// `None`: unknown (Redis's -1).
    pub entries_read: Option<u64>,
    /// The pending entries in ID order.
    pub pel: Vec<PendingValue>,
    /// The consumers by name.
    pub consumers: Vec<ConsumerValue>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingValue {
    pub id: StreamId,
    pub consumer: Vec<u8>,
    pub delivery_ms: u64,
    pub deliveries: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerValue {
    pub name: Vec<u8>,
    pub seen_ms: u64,
}

impl StreamValue {
    /// Live entries.
    pub fn len(&self) -> u64 {
        self.nodes.iter().map(|n| n.entries.len() as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The first live entry's ID; 0-0 when there is none.
    pub fn first_id(&self) -> StreamId {
        self.nodes
            .first()
            .and_then(|n| n.entries.first())
            .map_or(StreamId::MIN, |e| e.0)
    }
}

fn corrupt(what: &'static str, reason: impl Into<String>) -> RdbError {
    RdbError::Corrupt {
        what,
        reason: reason.into(),
    }
}

/// An ID as two lengths (ms, seq).
fn read_id(r: &mut Reader<'_>, what: &'static str) -> Result<StreamId, RdbError> {
    let ms = r.length(what)?;
    Ok(StreamId::new(ms, r.length(what)?))
}

/// A raw 16-byte ID (big-endian ms, seq), as PELs store them.
fn read_raw_id(r: &mut Reader<'_>, what: &'static str) -> Result<StreamId, RdbError> {
    StreamId::from_bytes(r.take(16, what)?).ok_or_else(|| corrupt(what, "short ID"))
}

/// A millisecond time: 8 bytes, little-endian.
fn read_ms(r: &mut Reader<'_>, what: &'static str) -> Result<u64, RdbError> {
    let mut b = [0u8; 8];
    b.copy_from_slice(r.take(8, what)?);
    Ok(u64::from_le_bytes(b))
}

/// A stream of type `t` (15, 19 or 21; the type byte already read).
pub fn read(r: &mut Reader<'_>, t: u8) -> Result<StreamValue, RdbError> {
    let node_count = r.count("stream node count")?;
    let mut nodes = Vec::with_capacity(node_count.min(PREALLOC_MAX));
    let mut prev: Option<StreamId> = None;
    for _ in 0..node_count {
        let key = r.string("stream node key")?;
        let master = match StreamId::from_bytes(&key) {
            Some(id) if key.len() == 16 => id,
            _ => return Err(corrupt("stream node key", "not the size of an ID")),
        };
        let lp = r.string("stream node")?;
        let node = read_node(&lp, master, &mut prev)?;
        // A node whose entries are all deleted holds nothing Strata keeps.
        if !node.entries.is_empty() {
            nodes.push(node);
        }
    }
    let length = r.length("stream length")?;
    let last_id = read_id(r, "stream last ID")?;
    let mut s = StreamValue {
        nodes,
        last_id,
        ..StreamValue::default()
    };
    if length != s.len() {
        return Err(corrupt(
            "stream",
            format!("length {length} but {} live entries", s.len()),
        ));
    }
    if prev.is_some_and(|p| p > last_id) {
        return Err(corrupt("stream", "an entry above the last ID"));
    }
    if t == types::STREAM_LISTPACKS {
        // Redis 7's loader for the first form: entries added taken as the length,
        // no deletions known.
        s.entries_added = length;
    } else {
        read_id(r, "stream first ID")?; // derived from the entries instead
        s.max_deleted = read_id(r, "stream max deleted ID")?;
        s.entries_added = r.length("stream entries added")?;
        // As later Redis versions check: a counter Redis keeps signed, no fewer than the live.
        if s.entries_added < length || s.entries_added > i64::MAX as u64 {
            return Err(corrupt(
                "stream",
                "entries added inconsistent with the length",
            ));
        }
    }
    let info = StreamInfo {
        last_id,
        first_id: s.first_id(),
        max_deleted: s.max_deleted,
        entries_added: s.entries_added,
        tail_node: 0,
    };
    let group_count = r.count("stream group count")?;
    let mut names = HashSet::new();
    for _ in 0..group_count {
        let g = read_group(r, t, &info, length)?;
        if !names.insert(g.name.clone()) {
            return Err(corrupt("stream group", "duplicate name"));
        }
        s.groups.push(g);
    }
    s.groups.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(s)
}

fn read_group(
    r: &mut Reader<'_>,
    t: u8,
    info: &StreamInfo,
    length: u64,
) -> Result<GroupValue, RdbError> {
    let name = r.string("stream group name")?;
    let last_id = read_id(r, "stream group last ID")?;
    let entries_read = if t == types::STREAM_LISTPACKS {
        info.entries_up_to(length, last_id)
    } else {
        match r.length("stream group entries read")? {
            u64::MAX => None,
            n if n > info.entries_added => {
                return Err(corrupt("stream group", "more entries read than added"))
            }
            n => Some(n),
        }
    };
    let pel_count = r.count("stream PEL size")?;
    let mut pel: BTreeMap<StreamId, PendingValue> = BTreeMap::new();
    for _ in 0..pel_count {
        let id = read_raw_id(r, "stream PEL ID")?;
        let delivery_ms = read_ms(r, "stream PEL delivery time")?;
        let deliveries = r.length("stream PEL delivery count")?;
        let e = PendingValue {
            id,
            consumer: Vec::new(),
            delivery_ms,
            deliveries,
        };
        if pel.insert(id, e).is_some() {
            return Err(corrupt("stream PEL", "duplicate ID"));
        }
    }
    let consumer_count = r.count("stream consumer count")?;
    let mut consumers = Vec::with_capacity(consumer_count.min(PREALLOC_MAX));
    let mut owned = HashSet::new();
    for _ in 0..consumer_count {
        let name = r.string("stream consumer name")?;
        let seen_ms = read_ms(r, "stream consumer seen time")?;
        if t == types::STREAM_LISTPACKS_3 {
            read_ms(r, "stream consumer active time")?; // Redis 7.2's; 7.0 has none
        }
        let n = r.count("stream consumer PEL size")?;
        for _ in 0..n {
            let id = read_raw_id(r, "stream consumer PEL ID")?;
            let e = pel
                .get_mut(&id)
                .ok_or_else(|| corrupt("stream consumer PEL", "ID not in the group's PEL"))?;
            if !owned.insert(id) {
                return Err(corrupt("stream consumer PEL", "ID owned twice"));
            }
            e.consumer = name.clone();
        }
        consumers.push(ConsumerValue { name, seen_ms });
    }
    if owned.len() != pel.len() {
        return Err(corrupt("stream PEL", "an entry without a consumer"));
    }
    consumers.sort_by(|a, b| a.name.cmp(&b.name));
    if consumers.windows(2).any(|w| w[0].name == w[1].name) {
        return Err(corrupt("stream consumer", "duplicate name"));
    }
    Ok(GroupValue {
        name,
        last_id,
        entries_read,
        pel: pel.into_values().collect(),
        consumers,
    })
}

/// A cursor over a node's elements.
struct Elements {
    items: std::vec::IntoIter<Vec<u8>>,
}

impl Elements {
    fn bytes(&mut self) -> Result<Vec<u8>, RdbError> {
        self.items
            .next()
            .ok_or_else(|| corrupt("stream node", "ends inside an entry"))
    }

    fn int(&mut self) -> Result<i64, RdbError> {
        let b = self.bytes()?;
        std::str::from_utf8(&b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| corrupt("stream node", "an integer field is not one"))
    }

    /// A count of following elements: not negative, and no more than there are.
    fn count(&mut self) -> Result<usize, RdbError> {
        let n = self.int()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.items.len())
            .ok_or_else(|| corrupt("stream node", format!("count {n} beyond the node")))
    }
}

/// One node's listpack `lp` under master ID `master`; `prev`: the last ID read before it.
fn read_node(lp: &[u8], master: StreamId, prev: &mut Option<StreamId>) -> Result<Node, RdbError> {
    let mut e = Elements {
        items: packed::listpack(lp)?.into_iter(),
    };
    if e.items.len() == 0 {
        return Err(corrupt("stream node", "empty listpack"));
    }
    let live = e.int()?;
    let deleted = e.int()?;
    let master_fields: Vec<Vec<u8>> = (0..e.count()?)
        .map(|_| e.bytes())
        .collect::<Result<_, _>>()?;
    if e.int()? != 0 {
        return Err(corrupt("stream node", "master entry not terminated"));
    }
    let mut node = Node::default();
    let mut deleted_seen = 0i64;
    while e.items.len() > 0 {
        let flags = e.int()?;
        if flags & !(FLAG_DELETED | FLAG_SAMEFIELDS) != 0 {
            return Err(corrupt("stream node", format!("entry flags {flags}")));
        }
        let ms = master.ms.wrapping_add(e.int()? as u64);
        let id = StreamId::new(ms, master.seq.wrapping_add(e.int()? as u64));
        if prev.is_some_and(|p| p >= id) {
            return Err(corrupt("stream node", format!("entry {id} out of order")));
        }
        *prev = Some(id);
        let same = flags & FLAG_SAMEFIELDS != 0;
        let mut fields = Fields::new();
        if same {
            for f in &master_fields {
                fields.push((f.clone(), e.bytes()?));
            }
        } else {
            let n = e.count()?;
            for _ in 0..n {
                let f = e.bytes()?;
                fields.push((f, e.bytes()?));
            }
        }
        let expected = if same {
            fields.len() + 3
        } else {
            2 * fields.len() + 4
        };
        if e.int()? != expected as i64 {
            return Err(corrupt("stream node", "entry element count is wrong"));
        }
        if flags & FLAG_DELETED != 0 {
            deleted_seen += 1;
        } else {
            node.entries.push((id, fields));
        }
    }
    if live != node.entries.len() as i64 || deleted != deleted_seen {
        return Err(corrupt(
            "stream node",
            "master counts do not match the entries",
        ));
    }
    node.total = (live + deleted) as u64;
    Ok(node)
}

/// `s` as `STREAM_LISTPACKS` (type byte included), what DUMP writes. Deleted entries are
/// not kept by Strata, so every node is written with its live entries only and a deleted
/// count of 0 (what Redis's deep sanitization requires of a node without deleted entries).
pub fn write(out: &mut Vec<u8>, s: &StreamValue) {
    write_as(out, s, types::STREAM_LISTPACKS);
}

/// `s` as stream type `t`: `STREAM_LISTPACKS` (Redis 5+), `_2` (7.0+, with the first and
/// largest deleted IDs, entries added and groups' entries read) or `_3` (7.2+, consumers'
/// active times too, written as their seen times). The payload version must be at least
/// 9, 10 or 11 respectively.
pub fn write_as(out: &mut Vec<u8>, s: &StreamValue, t: u8) {
    out.push(t);
    let nodes: Vec<(&Node, StreamId)> = s
        .nodes
        .iter()
        .filter_map(|n| Some((n, n.entries.first()?.0)))
        .collect();
    write::length(out, nodes.len() as u64);
    for (n, master) in nodes {
        write::string(out, &master.to_bytes());
        write::string(out, &node_listpack(n));
    }
    write::length(out, s.len());
    write::length(out, s.last_id.ms);
    write::length(out, s.last_id.seq);
    if t != types::STREAM_LISTPACKS {
        for id in [s.first_id(), s.max_deleted] {
            write::length(out, id.ms);
            write::length(out, id.seq);
        }
        write::length(out, s.entries_added);
    }
    write::length(out, s.groups.len() as u64);
    for g in &s.groups {
        write::string(out, &g.name);
        write::length(out, g.last_id.ms);
        write::length(out, g.last_id.seq);
        if t != types::STREAM_LISTPACKS {
            write::length(out, g.entries_read.unwrap_or(u64::MAX));
        }
        write::length(out, g.pel.len() as u64);
        for p in &g.pel {
            out.extend_from_slice(&p.id.to_bytes());
            out.extend_from_slice(&p.delivery_ms.to_le_bytes());
            write::length(out, p.deliveries);
        }
        let mut by_consumer: HashMap<&[u8], Vec<StreamId>> = HashMap::new();
        for p in &g.pel {
            by_consumer.entry(&p.consumer).or_default().push(p.id);
        }
        write::length(out, g.consumers.len() as u64);
        for c in &g.consumers {
            write::string(out, &c.name);
            out.extend_from_slice(&c.seen_ms.to_le_bytes());
            if t == types::STREAM_LISTPACKS_3 {
                out.extend_from_slice(&c.seen_ms.to_le_bytes());
            }
            let owned = by_consumer.get(&c.name[..]).map_or(&[][..], |v| &v[..]);
            write::length(out, owned.len() as u64);
            for id in owned {
                out.extend_from_slice(&id.to_bytes());
            }
        }
    }
}

/// A node's listpack, as Redis builds it: the first entry's fields are the master fields,
/// and entries with the same field names carry only their values.
pub(super) fn node_listpack(n: &Node) -> Vec<u8> {
    let Some((master, master_fields)) = n.entries.first() else {
        return packed::build_listpack(&[]);
    };
    let mut items = vec![
        LpItem::Int(n.entries.len() as i64),
        LpItem::Int(0),
        LpItem::Int(master_fields.len() as i64),
    ];
    items.extend(master_fields.iter().map(|(f, _)| LpItem::Str(f)));
    items.push(LpItem::Int(0));
    for (id, fields) in &n.entries {
        let same = fields.len() == master_fields.len()
            && fields.iter().zip(master_fields).all(|(a, b)| a.0 == b.0);
        items.push(LpItem::Int(if same { FLAG_SAMEFIELDS } else { 0 }));
        items.push(LpItem::Int(id.ms.wrapping_sub(master.ms) as i64));
        items.push(LpItem::Int(id.seq.wrapping_sub(master.seq) as i64));
        if same {
            items.extend(fields.iter().map(|(_, v)| LpItem::Str(v)));
            items.push(LpItem::Int(fields.len() as i64 + 3));
        } else {
            items.push(LpItem::Int(fields.len() as i64));
            for (f, v) in fields {
                items.push(LpItem::Str(f));
                items.push(LpItem::Str(v));
            }
            items.push(LpItem::Int(2 * fields.len() as i64 + 4));
        }
    }
    packed::build_listpack(&items)
}
