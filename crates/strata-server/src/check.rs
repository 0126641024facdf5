//! `strata check` on a server's database: the Redis data types' records agree with each
//! other (`docs/format/redis-keys.md`). The engine's check proves every record is the one
//! written; this one proves the records still make whole keys:
//!
//! - a collection's size field is the number of its live member records (those of the
//!   incarnation its metadata names), and a collection is never empty;
//! - a list's element indexes are exactly `[head, tail)`, with `size = tail - head`;
//! - a sorted set's score records are its member records (same members, same scores,
//!   -0.0 flagged) and as many as its size;
//! - no key has live member or score records its type does not have (a string has none,
//!   only a sorted set has score records; a set's members hold no value);
//! - every record lies in the hash slot of its key.
//!
//! Member and score records of any other incarnation (a deleted, expired or overwritten
//! collection's, waiting for the compaction filter) are garbage, counted but not problems;
//! so are those of a key whose metadata record does not decode (itself a problem).
//!
//! One pass in key order, read-only. Records of a hash slot are ordered metadata, then
//! member records, then score records (the kind byte), so the pass holds one slot's
//! metadata at a time, plus the member scores of its sorted sets until their score records
//! have been compared.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

use crate::keys::{hash_slot, parse_sub_key, KIND_META, KIND_SCORE, KIND_SUBKEY, SERVER_PREFIX};
use crate::list::Bounds;
use crate::store::{now_ms, Meta, RType};
use crate::zset::encode_score;
use std::collections::HashMap;
use strata::{Db, EngineIter, IterOptions};
use strata_engine::Result;

/// Problems kept in a report; beyond that they are only counted.
const MAX_PROBLEMS: usize = 10_000;

/// What [`check_types`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TypeReport {
    /// Keys per type: string, hash, list, set, zset, stream (the order of [`TYPE_NAMES`]).
    pub keys: [u64; 6],
    /// Keys whose expiry has passed but whose records are still there (lazy expiry).
    pub expired_keys: u64,
    /// Member records of live incarnations (hash fields, list elements, set and sorted-set
    /// members).
    pub members: u64,
    /// Score records of live sorted sets.
    pub score_records: u64,
    /// Member and score records of no live incarnation: left for the compaction filter.
    pub garbage: u64,
    /// Every problem found (at most [`MAX_PROBLEMS`] are kept).
    pub problems: Vec<String>,
    /// Problems found, kept or not.
    pub problem_count: u64,
    /// The database map's entries that are not the identity (SWAPDB), `(logical,
    /// physical)`: the databases above are physical ones.
    pub moved_databases: Vec<(u8, u8)>,
}

/// The names of [`TypeReport::keys`]' entries.
pub const TYPE_NAMES: [&str; 6] = ["string", "hash", "list", "set", "zset", "stream"];

impl TypeReport {
    pub fn is_ok(&self) -> bool {
        self.problem_count == 0
    }

    fn problem(&mut self, db: u8, key: &[u8], what: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(format!(
                "db {db} key {:?}: {what}",
                String::from_utf8_lossy(key)
            ));
        }
    }
}

/// Whether `db` holds a Redis server's keys (`strata serve` wrote its format record).
pub fn is_server_db(db: &Db) -> Result<bool> {
    let mut key = vec![SERVER_PREFIX];
    key.extend_from_slice(b"redis-format");
    Ok(db.get(&key)?.is_some())
}

/// What the pass knows of one key of the current slot.
struct KeyState {
    meta: Meta,
    /// Live member records seen.
    members: u64,
    /// Lists: the index the next element must have.
    next_index: u64,
    /// Sorted sets: members (live member records) not yet matched by a score record, with
    /// the f64 bits of their scores.
    unscored: HashMap<Vec<u8>, u64>,
    /// Sorted sets: live score records seen.
    scores: u64,
    /// Streams: what their records say, checked against the metadata at the end.
    stream: stream::StreamCheck,
}

/// Verifies the Redis types of every key of every database in `db` (see the module
/// comment). Only reads.
pub fn check_types(db: &Db) -> Result<TypeReport> {
    let mut report = TypeReport::default();
    match crate::dbmap::DbMap::decode(db.get(&crate::dbmap::record_key())?.as_deref()) {
        Ok(map) => report.moved_databases = map.moved(),
        Err(why) => {
            report.problem_count += 1;
            report.problems.push(why);
        }
    }
    let mut it = db.iter_opt(&IterOptions {
        lower_bound: None,
        upper_bound: Some(vec![SERVER_PREFIX]),
    })?;
    it.seek_to_first();
    let now = now_ms();
    let mut slot_of_group: Option<[u8; 3]> = None;
    let mut keys: HashMap<Vec<u8>, KeyState> = HashMap::new();
    while it.valid() {
        let (k, v) = (it.key(), it.value());
        let group: [u8; 3] = match k.get(..3) {
            Some(g) => [g[0], g[1], g[2]],
            None => {
                report.problem(
                    k.first().copied().unwrap_or(0),
                    k,
                    "short record key".into(),
                );
                it.next();
                continue;
            }
        };
        if slot_of_group != Some(group) {
            if let Some(g) = slot_of_group {
                finish_slot(&mut report, g[0], std::mem::take(&mut keys));
            }
            slot_of_group = Some(group);
        }
        let (db_idx, slot) = (group[0], u16::from_be_bytes([group[1], group[2]]));
        match k.get(3) {
            Some(&KIND_META) => {
                let key = &k[4..];
                if hash_slot(key) != slot {
                    report.problem(db_idx, key, format!("metadata record in slot {slot}"));
                }
                match decode_meta(v) {
                    Ok(mut meta) => {
                        report.keys[meta.rtype as usize] += 1;
                        if meta.rtype == RType::String {
                            // Only its version matters here; the slot's map need not hold
                            // every string's value.
                            meta.value = Vec::new();
                        }
                        if meta.expired_at(now) {
                            report.expired_keys += 1;
                        }
                        let next_index = Bounds::decode(&meta.value).map_or(0, |b| b.head);
                        keys.insert(
                            key.to_vec(),
                            KeyState {
                                meta,
                                members: 0,
                                next_index,
                                unscored: HashMap::new(),
                                scores: 0,
                                stream: Default::default(),
                            },
                        );
                    }
                    Err(why) => report.problem(db_idx, key, why),
                }
            }
            Some(&KIND_SUBKEY) | Some(&KIND_SCORE) => match parse_sub_key(k) {
                None => report.problem(db_idx, k, "member record key does not parse".into()),
                Some((kind, _, key, version, rest)) => {
                    if hash_slot(key) != slot {
                        report.problem(db_idx, key, format!("member record in slot {slot}"));
                    }
                    match keys.get_mut(key) {
                        Some(st) if st.meta.version == version => {
                            live_record(&mut report, db_idx, key, st, kind, rest, v)
                        }
                        _ => report.garbage += 1,
                    }
                }
            },
            _ => report.problem(db_idx, k, "unknown record kind".into()),
        }
        it.next();
    }
    it.status()?;
    if let Some(g) = slot_of_group {
        finish_slot(&mut report, g[0], keys);
    }
    Ok(report)
}

/// A metadata value, with the fields of its type checked.
fn decode_meta(v: &[u8]) -> std::result::Result<Meta, String> {
    let meta = Meta::decode(v).ok_or_else(|| "metadata record does not decode".to_string())?;
    match meta.rtype {
        RType::String => {}
        RType::List => match Bounds::decode(&meta.value) {
            None => return Err("list metadata without valid head and tail".into()),
            Some(b) if b.len() != meta.size => {
                return Err(format!(
                    "list size {} but tail - head = {}",
                    meta.size,
                    b.len()
                ))
            }
            Some(_) => {}
        },
        RType::Hash | RType::Set | RType::ZSet => {
            // A flags byte, then optionally the deleted-member count (8 bytes).
            if !matches!(meta.value.len(), 0 | 1 | 9) {
                return Err(format!(
                    "{} metadata has {} bytes of extras: 0, 1 or 9 expected",
                    meta.rtype.name(),
                    meta.value.len()
                ));
            }
        }
        RType::Stream => {
            if crate::stream::StreamInfo::decode(&meta.value).is_none() {
                return Err("stream metadata without valid stream fields".into());
            }
        }
    }
    Ok(meta)
}

/// A member or score record of the incarnation `st` names.
fn live_record(
    report: &mut TypeReport,
    db: u8,
    key: &[u8],
    st: &mut KeyState,
    kind: u8,
    rest: &[u8],
    value: &[u8],
) {
    let rtype = st.meta.rtype;
    if kind == KIND_SCORE {
        if rtype != RType::ZSet {
            report.problem(db, key, format!("score record under a {}", rtype.name()));
            return;
        }
        report.score_records += 1;
        st.scores += 1;
        let (Some(score), Some(member)) = (rest.get(..8), rest.get(8..)) else {
            report.problem(db, key, "score record too short".into());
            return;
        };
        let Some(bits) = st.unscored.remove(member) else {
            report.problem(
                db,
                key,
                format!(
                    "score record of {:?} without a member record (or a second one)",
                    String::from_utf8_lossy(member)
                ),
            );
            return;
        };
        let s = f64::from_bits(bits);
        let neg_zero = s == 0.0 && s.is_sign_negative();
        let flag_ok = value == (if neg_zero { &[1u8][..] } else { &[][..] });
        if score != encode_score(s) || !flag_ok {
            report.problem(
                db,
                key,
                format!(
                    "score record of {:?} disagrees with its member record's score {s}",
                    String::from_utf8_lossy(member)
                ),
            );
        }
        return;
    }
    report.members += 1;
    st.members += 1;
    match rtype {
        RType::String => {
            report.problem(db, key, "member record under a string".into());
        }
        RType::Hash => {}
        RType::Stream => st.stream.record(rest, value),
        RType::Set => {
            if !value.is_empty() {
                report.problem(db, key, "set member record holds a value".into());
            }
        }
        RType::ZSet => match <[u8; 8]>::try_from(value) {
            Ok(b) => {
                st.unscored.insert(rest.to_vec(), u64::from_be_bytes(b));
            }
            Err(_) => report.problem(
                db,
                key,
                format!(
                    "member record of {:?} does not hold a score",
                    String::from_utf8_lossy(rest)
                ),
            ),
        },
        RType::List => {
            let Some(bounds) = Bounds::decode(&st.meta.value) else {
                return; // reported with the metadata
            };
            let Ok(idx) = <[u8; 8]>::try_from(rest).map(u64::from_be_bytes) else {
                report.problem(
                    db,
                    key,
                    "list element record without an 8-byte index".into(),
                );
                return;
            };
            if idx < bounds.head || idx >= bounds.tail {
                report.problem(
                    db,
                    key,
                    format!(
                        "list element at index {idx} outside [head {}, tail {})",
                        bounds.head, bounds.tail
                    ),
                );
            } else {
                if idx > st.next_index {
                    report.problem(
                        db,
                        key,
                        format!(
                            "list elements missing at indexes [{}, {idx})",
                            st.next_index
                        ),
                    );
                }
                st.next_index = idx + 1;
            }
        }
    }
}

/// The checks that need every record of a key: counts against the size field.
fn finish_slot(report: &mut TypeReport, db: u8, keys: HashMap<Vec<u8>, KeyState>) {
    for (key, mut st) in keys {
        let m = &st.meta;
        if m.rtype == RType::Stream {
            st.stream.finish(m, |what| report.problem(db, &key, what));
            continue;
        }
        if !m.rtype.is_collection() {
            continue;
        }
        if m.size == 0 {
            report.problem(db, &key, format!("empty {} (size 0)", m.rtype.name()));
        }
        if st.members != m.size {
            report.problem(
                db,
                &key,
                format!(
                    "{} size {} but {} member records",
                    m.rtype.name(),
                    m.size,
                    st.members
                ),
            );
        }
        if let (RType::List, Some(b)) = (m.rtype, Bounds::decode(&m.value)) {
            if st.next_index < b.tail {
                report.problem(
                    db,
                    &key,
                    format!(
                        "list elements missing at indexes [{}, {})",
                        st.next_index, b.tail
                    ),
                );
            }
        }
        if m.rtype == RType::ZSet {
            if st.scores != m.size {
                report.problem(
                    db,
                    &key,
                    format!("zset size {} but {} score records", m.size, st.scores),
                );
            }
            let mut unscored: Vec<_> = st.unscored.keys().collect();
            unscored.sort();
            for member in unscored {
                report.problem(
                    db,
                    &key,
                    format!(
                        "member {:?} without a score record",
                        String::from_utf8_lossy(member)
                    ),
                );
            }
        }
    }
}

mod stream;
#[cfg(test)]
mod tests;
