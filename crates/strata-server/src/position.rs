//! A replica's stream position, `(replid, offset, selected database)`, persisted in the same
//! atomic write as the effects it covers (format: `docs/format/redis-keys.md`, "Replication
//! position"; design §13.25).
//!
//! **One record per shard.** Shard `s` owns `0xfe | slot | "replpos"` (the first slot of its
//! range, as the fsync marker). The link thread applies each request of the master's stream
//! on its own thread, so each of its writes is one front batch (one per command, one per
//! EXEC or script); [`stamp`] adds to that batch the record of every shard the batch touches,
//! holding the offset *after* the request. A record in a shard the batch does not touch would
//! make a single-shard write a cross-shard one for nothing.
//!
//! **The resume position is the record with the largest offset** ([`resume`]). Application
//! is sequential (each request, or each batch of requests, commits before the next one
//! starts), so the record with the largest offset was written by the last request that wrote
//! anything, and every request before it committed. A batch of requests applied as one run
//! (`replica/batch.rs`) writes one engine batch per shard it wrote, one shard after another,
//! each with a record holding the offset after the batch and the number of shards the run
//! wrote (`parts`): a crash between two of those writes leaves fewer records at the largest
//! offset than their `parts` says, and [`resume`] then refuses to resume (the data is no
//! prefix of the stream: the next sync is a full one). A request after it wrote nothing (PING, REPLCONF, SELECT, a DEL of a
//! missing key, a request cut by the crash before its one batch): a restarted replica asks
//! the master for the stream from the offset after the last write, so the master sends such
//! requests again. PING and REPLCONF are not run; SELECT sets the same database again; any
//! other request that wrote nothing on this state writes nothing when it runs again on the
//! same state (commands are deterministic on the data; the master propagates effects, not
//! random choices). So nothing is applied twice and nothing is skipped. Offsets are
//! continuous across a replication id change (PSYNC2's `+CONTINUE <new id>`), so the largest
//! offset is the latest whatever its id.
//!
//! **The selected database** is in the record, because the master does not send SELECT again
//! on a partial resync (its stream continues in the database it last selected): Redis keeps it
//! in the RDB's `repl-stream-db` field for the same reason.
//!
//! **Thread-local, like the store's transaction.** The store's writes happen deep inside the
//! handlers, which know nothing of replication; the link thread sets the position around each
//! request ([`with`]) and the store stamps the batches written on this thread (`store.rs`). No
//! other thread ever has a position set.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

use crate::keys::{SERVER_PREFIX, SLOTS};
use std::cell::RefCell;
use strata::{Db, WriteBatch};

/// Format byte of the record this server writes (2: with `parts`; 1, read only: without).
/// On-disk: do not renumber.
const FORMAT: u8 = 2;
/// The first format, still read: a record written by one atomic batch (`parts` 1).
const FORMAT_1: u8 = 1;
/// Length of a replication id.
pub const ID_LEN: usize = 40;
/// Record value length in format 1: format, kind, id, offset, database.
const VALUE_LEN_1: usize = 1 + 1 + ID_LEN + 8 + 1;
/// Record value length: format 1's fields, then `parts` (2, BE).
const VALUE_LEN: usize = VALUE_LEN_1 + 2;

/// What the record says the data is. On-disk: do not renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A replica's data: the master's stream `replid` applied up to `offset`.
    Following = 0,
    /// A replica promoted by REPLICAOF NO ONE: its data was stream `replid` up to `offset`
    /// when it stopped following (INFO's `master_replid2`, `second_repl_offset - 1`).
    Promoted = 1,
}

/// A stream position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    pub kind: Kind,
    /// 40 characters (checked by [`Position::decode`]; the link only sets ids it parsed).
    pub replid: String,
    pub offset: u64,
    /// The logical database the stream has selected.
    pub db: u8,
}

impl Position {
    /// The record's value; `parts`: how many shards' records the same write set (each one
    /// applied atomically with its shard's effects; see the module comment).
    pub fn encode(&self, parts: u16) -> Vec<u8> {
        let mut v = Vec::with_capacity(VALUE_LEN);
        v.push(FORMAT);
        v.push(self.kind as u8);
        let mut id = self.replid.as_bytes().to_vec();
        id.resize(ID_LEN, b'0');
        v.extend_from_slice(&id);
        v.extend_from_slice(&self.offset.to_be_bytes());
        v.push(self.db);
        v.extend_from_slice(&parts.to_be_bytes());
        v
    }

    /// The position a record holds and its `parts`; an error says what is wrong with it.
    pub fn decode(b: &[u8]) -> Result<(Position, u16), String> {
        let want = match b.first() {
            Some(&FORMAT) | None => VALUE_LEN,
            Some(&FORMAT_1) => VALUE_LEN_1,
            Some(f) => {
                return Err(format!(
                    "replication position record in format {f}; this server reads {FORMAT_1} and {FORMAT}"
                ))
            }
        };
        if b.len() != want {
            return Err(format!(
                "replication position record of {} bytes, not {want}",
                b.len()
            ));
        }
        let kind = match b[1] {
            0 => Kind::Following,
            1 => Kind::Promoted,
            k => return Err(format!("replication position record of kind {k}")),
        };
        let id = &b[2..2 + ID_LEN];
        if !id.iter().all(u8::is_ascii_alphanumeric) {
            return Err("replication position record with a malformed id".to_string());
        }
        let mut off = [0u8; 8];
        off.copy_from_slice(&b[2 + ID_LEN..10 + ID_LEN]);
        let parts = match b.get(VALUE_LEN_1..VALUE_LEN) {
            Some(p) => u16::from_be_bytes([p[0], p[1]]),
            None => 1,
        };
        let pos = Position {
            kind,
            replid: String::from_utf8_lossy(id).into_owned(),
            offset: u64::from_be_bytes(off),
            db: b[10 + ID_LEN],
        };
        Ok((pos, parts))
    }
}

/// The record shard `s` of `shards` owns: `0xfe | first slot of the shard (2, BE) | "replpos"`.
pub fn record_key(s: usize, shards: usize) -> Vec<u8> {
    let slot = (s * SLOTS as usize).div_ceil(shards.max(1)) as u16;
    let mut k = vec![SERVER_PREFIX];
    k.extend_from_slice(&slot.to_be_bytes());
    k.extend_from_slice(b"replpos");
    k
}

thread_local! {
    /// The position after the request the link thread is applying on this thread.
    static CURRENT: RefCell<Option<Position>> = const { RefCell::new(None) };
}

/// Runs `f` (one request of the stream) with `pos` as this thread's position: every batch
/// the store writes on this thread meanwhile carries it.
pub fn with<R>(pos: Position, f: impl FnOnce() -> R) -> R {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            CURRENT.with(|c| c.borrow_mut().take());
        }
    }
    CURRENT.with(|c| *c.borrow_mut() = Some(pos));
    let _clear = Clear;
    f()
}

/// SELECT run by the master's client: the batches written after it in the same request (an
/// EXEC's commit) record the new database.
pub fn select(db: u8) {
    CURRENT.with(|c| {
        if let Some(p) = c.borrow_mut().as_mut() {
            p.db = db;
        }
    });
}

/// Adds this thread's position, if any, to `batch`: the record of every shard the batch
/// touches. Returns whether it did.
pub fn stamp(db: &Db, batch: &mut WriteBatch) -> bool {
    let Some(pos) = CURRENT.with(|c| c.borrow().clone()) else {
        return false;
    };
    let shards = db.shard_count();
    let mut touched = vec![false; shards];
    for (k, _) in batch.ops() {
        if let Some(t) = touched.get_mut(db.shard_of(k)) {
            *t = true;
        }
    }
    let parts = touched.iter().filter(|t| **t).count();
    let value = pos.encode(parts.min(u16::MAX as usize) as u16);
    for (s, _) in touched.iter().enumerate().filter(|(_, t)| **t) {
        batch.put(&record_key(s, shards), &value);
    }
    true
}

/// Adds `pos` to `batch` in every shard (a full sync's swap, a promotion).
pub fn put_all(db: &Db, batch: &mut WriteBatch, pos: &Position) {
    let shards = db.shard_count();
    let value = pos.encode(shards.min(u16::MAX as usize) as u16);
    for s in 0..shards {
        batch.put(&record_key(s, shards), &value);
    }
}

/// The record of shard `shard` for a run that wrote `parts` shards, each with its own
/// engine write (`replica/batch.rs`): key and value.
pub fn part_record(db: &Db, shard: usize, pos: &Position, parts: usize) -> (Vec<u8>, Vec<u8>) {
    let shards = db.shard_count();
    debug_assert_eq!(db.shard_of(&record_key(shard, shards)), shard);
    (
        record_key(shard, shards),
        pos.encode(parts.min(u16::MAX as usize) as u16),
    )
}

/// The stored position with the largest offset (`None`: this data never followed a master,
/// or the last write of a batch run was cut by a crash: fewer records hold the largest
/// offset than its `parts` says, and the data is no prefix of the stream). An unreadable
/// record is an error naming it.
pub fn resume(db: &Db) -> Result<Option<Position>, String> {
    let shards = db.shard_count();
    let mut records = Vec::new();
    for s in 0..shards {
        let got = db
            .get(&record_key(s, shards))
            .map_err(|e| format!("reading the replication position: {e}"))?;
        let Some(v) = got else { continue };
        records.push(Position::decode(&v).map_err(|e| format!("shard {s}: {e}"))?);
    }
    Ok(latest_whole(records))
}

/// [`resume`]'s rule over the records found: the largest offset, if every part of the write
/// that set it is there.
fn latest_whole(records: Vec<(Position, u16)>) -> Option<Position> {
    let top = records.iter().map(|(p, _)| p.offset).max()?;
    let at_top: Vec<&(Position, u16)> = records.iter().filter(|(p, _)| p.offset == top).collect();
    let need = at_top
        .iter()
        .map(|(_, n)| usize::from(*n))
        .max()
        .unwrap_or(1);
    if at_top.len() < need {
        eprintln!(
            "strata-server: replication: the last batch of the master's stream was cut by a \
             crash ({} of its {need} shards hold offset {top}): the data is no prefix of the \
             stream, and the next sync with a master is a full one",
            at_top.len()
        );
        return None;
    }
    at_top.first().map(|(p, _)| p.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(offset: u64) -> Position {
        Position {
            kind: Kind::Following,
            replid: "0123456789abcdef0123456789abcdef01234567".into(),
            offset,
            db: 3,
        }
    }

    #[test]
    fn round_trip_and_bad_records() {
        let p = pos(u64::MAX - 1);
        assert_eq!(Position::decode(&p.encode(3)), Ok((p.clone(), 3)));
        let mut promoted = p.clone();
        promoted.kind = Kind::Promoted;
        assert_eq!(Position::decode(&promoted.encode(1)), Ok((promoted, 1)));
        let good = p.encode(1);
        assert!(Position::decode(&good[..good.len() - 1]).is_err());
        assert!(Position::decode(&[]).is_err());
        // Format 1 (no `parts`) is still read, as one part.
        let mut old = good[..VALUE_LEN_1].to_vec();
        old[0] = FORMAT_1;
        assert_eq!(Position::decode(&old), Ok((p.clone(), 1)));
        assert!(Position::decode(&good[..VALUE_LEN_1]).is_err());
        let mut bad = good.clone();
        bad[0] = 3;
        assert!(Position::decode(&bad).unwrap_err().contains("format 3"));
        let mut bad = good.clone();
        bad[1] = 9;
        assert!(Position::decode(&bad).is_err());
        let mut bad = good;
        bad[5] = b'\n';
        assert!(Position::decode(&bad).is_err());
    }

    /// A batch run's parts: the largest offset counts only if all its shards hold it.
    #[test]
    fn a_run_cut_between_its_shard_writes_is_not_resumed() {
        let at = |o: u64, n: u16| (pos(o), n);
        assert_eq!(latest_whole(vec![]), None);
        assert_eq!(latest_whole(vec![at(5, 1), at(9, 1)]), Some(pos(9)));
        assert_eq!(
            latest_whole(vec![at(9, 2), at(9, 2), at(4, 1)]),
            Some(pos(9))
        );
        // Two of three shards written before the crash.
        assert_eq!(latest_whole(vec![at(9, 3), at(9, 3), at(4, 1)]), None);
        assert_eq!(latest_whole(vec![at(9, 2), at(4, 2)]), None);
        // A flush's batches share the offset before it: the widest one counts.
        assert_eq!(latest_whole(vec![at(7, 2), at(7, 1)]), Some(pos(7)));
    }

    #[test]
    fn keys_are_distinct_server_records() {
        let keys: Vec<_> = (0..4).map(|s| record_key(s, 4)).collect();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(k[0], SERVER_PREFIX);
            assert!(keys[i + 1..].iter().all(|o| o != k));
        }
    }

    #[test]
    fn a_write_carries_the_position_of_the_shards_it_touches() {
        use crate::store::{Meta, RType, Writes};
        let dir = tempfile::tempdir().unwrap();
        let s = crate::store::tests::open_store(dir.path(), 4);
        let s = s.front();
        let db = s.db();
        let string = |v: &[u8]| Meta {
            rtype: RType::String,
            expire_ms: 0,
            version: 0,
            size: 0,
            value: v.to_vec(),
        };
        // Not the link's thread: no record.
        let mut w = Writes::new();
        w.meta(0, b"k", Some(&string(b"1")));
        s.apply(w).unwrap();
        assert_eq!(resume(db), Ok(None));
        let shard = db.shard_of(&crate::keys::meta_key(0, b"k"));
        with(pos(10), || {
            let mut w = Writes::new();
            w.meta(0, b"k", Some(&string(b"2")));
            s.apply(w).unwrap();
        });
        assert_eq!(resume(db), Ok(Some(pos(10))));
        let has = |s: usize| db.get(&record_key(s, 4)).unwrap().is_some();
        assert_eq!((0..4).filter(|&i| has(i)).collect::<Vec<_>>(), vec![shard]);
        // A later request in another shard: the largest offset wins.
        let other = (0..100)
            .map(|i| format!("o{i}"))
            .find(|k| db.shard_of(&crate::keys::meta_key(0, k.as_bytes())) != shard)
            .unwrap();
        with(pos(25), || {
            let mut w = Writes::new();
            w.meta(0, other.as_bytes(), Some(&string(b"x")));
            s.apply(w).unwrap();
        });
        assert_eq!(resume(db).unwrap().map(|p| p.offset), Some(25));
        // A bad record stops the resume with an error naming its shard.
        db.put(&record_key(shard, 4), b"junk").unwrap();
        assert!(resume(db).unwrap_err().contains(&format!("shard {shard}")));
    }

    #[test]
    fn only_the_thread_with_a_position_stamps() {
        let p = pos(7);
        with(p.clone(), || {
            select(5);
            CURRENT.with(|c| assert_eq!(c.borrow().as_ref().map(|p| p.db), Some(5)));
        });
        CURRENT.with(|c| assert!(c.borrow().is_none()));
        select(1); // no position: nothing to change
        CURRENT.with(|c| assert!(c.borrow().is_none()));
    }
}
