//! `strata check` of a stream's records (`docs/format/redis-keys.md`, "Streams"): the
//! metadata's length and first ID against the entry records, the last ID above every entry,
//! and each group's pending-entries list against its consumers and its index by consumer.

use crate::store::Meta;
use crate::stream::{
    decode_entry, Consumer, Group, PelEntry, StreamId, StreamInfo, TAG_CONSUMER, TAG_CONSUMER_PEL,
    TAG_ENTRY, TAG_GROUP, TAG_PEL,
};
use std::collections::{BTreeMap, BTreeSet};

/// What one stream's records said, in key order.
#[derive(Default)]
pub(super) struct StreamCheck {
    entries: u64,
    first: Option<StreamId>,
    last: Option<StreamId>,
    groups: BTreeSet<Vec<u8>>,
    consumers: BTreeSet<(Vec<u8>, Vec<u8>)>,
    /// (group, id) -> consumer.
    pel: BTreeMap<(Vec<u8>, StreamId), Vec<u8>>,
    /// (group, consumer, id) of the index by consumer.
    by_consumer: BTreeSet<(Vec<u8>, Vec<u8>, StreamId)>,
    problems: Vec<String>,
}

/// A length-prefixed name at the start of `b`, and the rest.
fn name(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
    Some((b.get(4..4 + n)?, b.get(4 + n..)?))
}

impl StreamCheck {
    /// A live member record of the stream: `rest` is its subkey.
    pub(super) fn record(&mut self, rest: &[u8], value: &[u8]) {
        if let Err(why) = self.parse(rest, value) {
            self.problems.push(why);
        }
    }

    fn parse(&mut self, rest: &[u8], value: &[u8]) -> Result<(), String> {
        let (&tag, sub) = rest.split_first().ok_or("empty stream subkey")?;
        let id_of = |b: &[u8]| {
            (b.len() == 16)
                .then(|| StreamId::from_bytes(b))
                .flatten()
                .ok_or_else(|| "stream record without a 16-byte ID".to_string())
        };
        match tag {
            TAG_ENTRY => {
                let id = id_of(sub)?;
                let (start, _) = decode_entry(value).ok_or("entry record does not decode")?;
                if self.entries == 0 && !start {
                    return Err(format!("first entry {id} does not start a node"));
                }
                self.entries += 1;
                self.first.get_or_insert(id);
                self.last = Some(id);
            }
            TAG_GROUP => {
                Group::decode(value).ok_or("group record does not decode")?;
                self.groups.insert(sub.to_vec());
            }
            TAG_CONSUMER => {
                let (g, c) = name(sub).ok_or("consumer record key does not parse")?;
                Consumer::decode(value).ok_or("consumer record does not decode")?;
                self.consumers.insert((g.to_vec(), c.to_vec()));
            }
            TAG_PEL => {
                let (g, id) = name(sub).ok_or("pending entry key does not parse")?;
                let e = PelEntry::decode(value).ok_or("pending entry does not decode")?;
                self.pel.insert((g.to_vec(), id_of(id)?), e.consumer);
            }
            TAG_CONSUMER_PEL => {
                let (g, r) = name(sub).ok_or("consumer's pending entry key does not parse")?;
                let (c, id) = name(r).ok_or("consumer's pending entry key does not parse")?;
                self.by_consumer
                    .insert((g.to_vec(), c.to_vec(), id_of(id)?));
            }
            t => return Err(format!("stream record with unknown tag {t:#04x}")),
        }
        Ok(())
    }

    /// Compares what the records said with the metadata `m`, reporting each disagreement.
    pub(super) fn finish(&mut self, m: &Meta, mut problem: impl FnMut(String)) {
        for p in self.problems.drain(..) {
            problem(p);
        }
        let Some(info) = StreamInfo::decode(&m.value) else {
            return; // reported with the metadata
        };
        if self.entries != m.size {
            problem(format!(
                "stream length {} but {} entry records",
                m.size, self.entries
            ));
        }
        let first = self.first.unwrap_or(StreamId::MIN);
        if info.first_id != first {
            problem(format!(
                "stream first ID {} but first entry {first}",
                info.first_id
            ));
        }
        if let Some(last) = self.last {
            if last > info.last_id {
                problem(format!(
                    "entry {last} above the stream's last ID {}",
                    info.last_id
                ));
            }
        }
        if info.entries_added < m.size {
            problem(format!(
                "{} entries added but {} live",
                info.entries_added, m.size
            ));
        }
        for ((g, id), c) in &self.pel {
            if !self.groups.contains(g) {
                problem(format!("pending entry {id} of a missing group"));
            }
            if !self.consumers.contains(&(g.clone(), c.clone())) {
                problem(format!("pending entry {id} of a missing consumer"));
            }
            if !self.by_consumer.contains(&(g.clone(), c.clone(), *id)) {
                problem(format!(
                    "pending entry {id} missing from its consumer's index"
                ));
            }
        }
        for (g, c, id) in &self.by_consumer {
            if self.pel.get(&(g.clone(), *id)) != Some(c) {
                problem(format!(
                    "consumer index names {id}, not pending for that consumer"
                ));
            }
        }
        for (g, _) in &self.consumers {
            if !self.groups.contains(g) {
                problem("consumer of a missing group".into());
            }
        }
    }
}
