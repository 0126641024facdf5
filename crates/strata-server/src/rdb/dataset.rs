//! A whole RDB file (version 9) of the dataset an engine snapshot sees: what a full sync
//! sends a replica and what `strata export-rdb` writes (`docs/format/rdb.md`, "Whole files
//! written by Strata").
//!
//! **One pass, one key in memory.** The snapshot's records are read once, in key order,
//! database by database (logical order, through the snapshot's own database map, so that
//! SELECTDB names the databases clients name), and written as they come
//! (`docs/format/redis-keys.md`: within a hash slot, every metadata record, then the member
//! records key by key, then the score records). A string is written at its metadata
//! record; a collection's metadata waits (one slot's worth) until its member records
//! arrive, then its header goes out with the size the metadata gives and each member
//! record becomes one element, so a collection of any size streams through. A stream is
//! the exception: its RDB form opens with its node count and keeps each group's pending
//! entries beside its consumers, so one stream is gathered whole (as DUMP does) before it
//! is written. Member records of no live incarnation (a deleted or overwritten
//! collection's, left to the compaction filter) are skipped and counted; score records
//! are the index of the member records and are not needed.
//!
//! **Encodings.** Those of RDB 9, which every Redis from 5.0 loads, in their plain forms:
//! strings (integer-encoded or LZF as Redis writes them, `write.rs`), lists as
//! `RDB_TYPE_LIST`, sets `RDB_TYPE_SET`, sorted sets `RDB_TYPE_ZSET_2`, hashes
//! `RDB_TYPE_HASH`, streams `RDB_TYPE_STREAM_LISTPACKS` (`stream.rs`). The loader converts
//! them to its compact encodings by its own limits. Keys keep their expiries
//! (`EXPIRETIME_MS`), expired ones included: the loader drops those, as for Redis's own
//! files. Function libraries (`FUNCTION2`) are written when there are any, which makes the
//! file loadable by Redis 7.0 and later only.
//!
//! **Errors.** A record that does not decode, a collection whose member records disagree
//! with its metadata, or a record of unknown kind stops the file with
//! [`DatasetError::Corrupt`] naming the key: a key is never skipped.
//!
//! Layer: store and types, but for the server state [`write_dataset`] is handed.

use super::file::opcode;
use super::stream::{ConsumerValue, GroupValue, Node, PendingValue, StreamValue};
use super::{crc64, types, write};
use crate::keys::{
    parse_sub_key, KIND_META, KIND_SCORE, KIND_SUBKEY, MAX_DATABASES, SERVER_PREFIX,
};
use crate::list::Bounds;
use crate::store::{now_ms, Meta, RType};
use crate::stream::{
    decode_entry_head, Consumer, Group, PelEntry, StreamId, StreamInfo, TAG_CONSUMER,
    TAG_CONSUMER_PEL, TAG_ENTRY, TAG_GROUP, TAG_PEL,
};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};
use strata::{EngineIter, IterOptions};

/// The RDB version written: 9 (Redis 5.0), the newest whose encodings every Redis from 5.0
/// loads. No listpack types (RDB 10) and no quicklist 2.
pub const FILE_VERSION: u16 = 9;
/// Bytes buffered between the writer and `out`.
const BUF_BYTES: usize = 1 << 16;
/// Keys between two progress reports unless the options say otherwise.
const PROGRESS_KEYS: u64 = 100_000;

/// The replication fields of the aux section (Redis writes them when the file is for a
/// replica or from a server in a replication chain).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aux {
    /// `repl-id`: the replication ID the file's data follows.
    pub repl_id: String,
    /// `repl-offset`: the replication offset the file's data is the state at.
    pub repl_offset: u64,
    /// `repl-stream-db`: the database the replication stream has selected.
    pub repl_stream_db: u32,
}

/// How [`write_dataset_with`] writes a file; [`Default`]: no replication fields, progress
/// not reported.
#[derive(Default)]
pub struct DatasetOptions<'a> {
    /// `Some`: write `repl-stream-db`, `repl-id` and `repl-offset` (as Redis writes them for
    /// a full sync); `None`: leave them out (as Redis's SAVE on a server outside
    /// replication).
    pub aux: Option<Aux>,
    /// Called with the figures so far every [`DatasetOptions::progress_every_keys`] keys and
    /// once at the end (the caller logs, or keeps a link alive).
    pub progress: Option<&'a dyn Fn(&DatasetStats)>,
    /// Keys between two calls of `progress`; 0: 100000.
    pub progress_every_keys: u64,
}

/// The keys of one database in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DbCount {
    /// The logical database (what SELECTDB names).
    pub db: u8,
    pub keys: u64,
    /// Keys written with an expiry.
    pub expires: u64,
}

/// What a file holds, so far or in the end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatasetStats {
    /// Keys written, every database.
    pub keys: u64,
    /// Keys written with an expiry.
    pub expires: u64,
    /// Bytes written (the whole file once done).
    pub bytes: u64,
    /// The databases with keys, in file order (ascending logical number).
    pub per_db: Vec<DbCount>,
    /// Function libraries written.
    pub functions: u64,
    /// Member records of no live key (deleted or overwritten collections, waiting for the
    /// compaction filter): read and left out.
    pub garbage_records: u64,
    pub elapsed: Duration,
}

/// Why a file could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// Writing the file (`out` failed).
    #[error("writing the RDB: {0}")]
    Io(#[from] std::io::Error),
    /// Reading the snapshot (the engine failed).
    #[error("reading the snapshot: {0}")]
    Read(#[from] strata_engine::Error),
    /// A record of the snapshot is not what its key's other records say.
    #[error("corrupt record of key {:?} in database {db}: {reason}", String::from_utf8_lossy(.key))]
    Corrupt {
        /// The logical database.
        db: u8,
        key: Vec<u8>,
        reason: String,
    },
}

/// Writes the whole dataset seen by `snap` as an RDB file (version 9) to `out`:
/// header, aux fields, every database with its keys, function libraries, EOF, CRC64.
/// Everything written is read from the snapshot itself (keys, the database map, the
/// function libraries), so the file is one consistent cut; `shared`, the server the
/// snapshot belongs to, is not read for it (the replication fields, which must match the
/// cut, come from [`write_dataset_with`]'s options).
#[cfg_attr(not(test), allow(dead_code))]
pub fn write_dataset<E: strata::Engine, W: Write>(
    snap: &strata::Snapshot<'_, E>,
    shared: &crate::server::Shared,
    out: W,
) -> Result<DatasetStats, DatasetError> {
    write_dataset_with(snap, shared, &DatasetOptions::default(), out)
}

/// [`write_dataset`] with options: the replication aux fields and progress reports.
pub fn write_dataset_with<E: strata::Engine, W: Write>(
    snap: &strata::Snapshot<'_, E>,
    _shared: &crate::server::Shared,
    opts: &DatasetOptions<'_>,
    out: W,
) -> Result<DatasetStats, DatasetError> {
    let started = Instant::now();
    let map = crate::dbmap::DbMap::decode(snap.get(&crate::dbmap::record_key())?.as_deref())
        .map_err(|reason| DatasetError::Corrupt {
            db: 0,
            key: crate::dbmap::record_key(),
            reason,
        })?;
    let mut w = Walk {
        sink: Sink::new(out),
        stats: DatasetStats::default(),
        opts,
        started,
        next_report: every(opts),
        db: 0,
        selected: false,
        group: None,
        pending: BTreeMap::new(),
        open: None,
    };
    w.header(opts.aux.as_ref())?;
    w.functions(snap.get(&crate::cmd::functions::record_key())?.as_deref())?;
    let mut it = snap.iter_opt(&IterOptions {
        lower_bound: None,
        upper_bound: Some(vec![SERVER_PREFIX]),
    })?;
    for logical in 0..MAX_DATABASES as u8 {
        let physical = map.physical(logical);
        w.db = logical;
        w.selected = false;
        it.seek(&[physical]);
        while it.valid() && it.key().first() == Some(&physical) {
            w.record(it.key(), it.value())?;
            it.next();
        }
        it.status()?;
        w.finish_slot()?;
    }
    w.sink.buf.push(opcode::EOF);
    w.sink.emit()?;
    w.sink.trailer()?;
    w.stats.bytes = w.sink.bytes;
    w.stats.elapsed = started.elapsed();
    if let Some(p) = opts.progress {
        p(&w.stats);
    }
    Ok(w.stats)
}

fn every(opts: &DatasetOptions<'_>) -> u64 {
    match opts.progress_every_keys {
        0 => PROGRESS_KEYS,
        n => n,
    }
}

/// The output: buffered, with the CRC-64 and the byte count of everything written.
/// Encoders write into `buf`; [`Sink::emit`] passes it on.
struct Sink<W: Write> {
    out: BufWriter<W>,
    buf: Vec<u8>,
    crc: u64,
    bytes: u64,
}

impl<W: Write> Sink<W> {
    fn new(out: W) -> Sink<W> {
        Sink {
            out: BufWriter::with_capacity(BUF_BYTES, out),
            buf: Vec::new(),
            crc: 0,
            bytes: 0,
        }
    }

    fn emit(&mut self) -> std::io::Result<()> {
        self.crc = crc64::update(self.crc, &self.buf);
        self.bytes += self.buf.len() as u64;
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// The CRC-64 of every byte before it, little-endian, then everything flushed.
    fn trailer(&mut self) -> std::io::Result<()> {
        self.out.write_all(&self.crc.to_le_bytes())?;
        self.bytes += 8;
        self.out.flush()
    }
}

/// The pass over the snapshot (see the module comment).
struct Walk<'o, W: Write> {
    sink: Sink<W>,
    stats: DatasetStats,
    opts: &'o DatasetOptions<'o>,
    started: Instant,
    /// `stats.keys` at which `progress` is called next.
    next_report: u64,
    /// The logical database being written.
    db: u8,
    /// Whether its SELECTDB is written (it is before its first key: an empty database
    /// has none, as in Redis's files).
    selected: bool,
    /// `db | slot` of the records being read.
    group: Option<[u8; 3]>,
    /// The collections of the slot whose member records have not come yet.
    pending: BTreeMap<Vec<u8>, Meta>,
    /// The collection whose member records are being written.
    open: Option<Open>,
}

/// A collection being written.
struct Open {
    key: Vec<u8>,
    meta: Meta,
    /// Member records written so far.
    seen: u64,
    body: Body,
}

enum Body {
    /// Hashes, sets and sorted sets: each member record is written as it comes.
    Members,
    /// A list: element records must be the indexes from the head up.
    List { next: u64 },
    /// A stream, gathered whole.
    Stream(Box<StreamBuild>),
}

impl<W: Write> Walk<'_, W> {
    /// The magic, the version and the aux fields, as redis-server 7.0.15 writes them.
    fn header(&mut self, aux: Option<&Aux>) -> Result<(), DatasetError> {
        let b = &mut self.sink.buf;
        b.extend_from_slice(format!("REDIS{FILE_VERSION:04}").as_bytes());
        let mut field = |k: &str, v: &[u8]| {
            b.push(opcode::AUX);
            write::string(b, k.as_bytes());
            write::string(b, v);
        };
        field("redis-ver", crate::server::REDIS_VERSION.as_bytes());
        field("redis-bits", b"64");
        field("ctime", (now_ms() / 1000).to_string().as_bytes());
        field("used-mem", crate::info::rss_bytes().to_string().as_bytes());
        if let Some(a) = aux {
            field("repl-stream-db", a.repl_stream_db.to_string().as_bytes());
            field("repl-id", a.repl_id.as_bytes());
            field("repl-offset", a.repl_offset.to_string().as_bytes());
        }
        field("aof-base", b"0");
        self.sink.emit()?;
        Ok(())
    }

    /// The stored function libraries (FUNCTION DUMP's payload: `docs/format/functions.md`),
    /// whose body is the `FUNCTION2` items the file carries.
    fn functions(&mut self, payload: Option<&[u8]>) -> Result<(), DatasetError> {
        let Some(p) = payload else {
            return Ok(());
        };
        let corrupt = |reason: String| DatasetError::Corrupt {
            db: 0,
            key: crate::cmd::functions::record_key(),
            reason: format!("function libraries: {reason}"),
        };
        let (body, _) = super::check_payload(p).map_err(|e| corrupt(e.to_string()))?;
        let mut r = super::Reader::new(body);
        while r.remaining() > 0 {
            let op = r.u8("opcode").map_err(|e| corrupt(e.to_string()))?;
            if op != opcode::FUNCTION2 {
                return Err(corrupt(format!("opcode {op} where a library belongs")));
            }
            r.string("library code")
                .map_err(|e| corrupt(e.to_string()))?;
            self.stats.functions += 1;
        }
        self.sink.buf.extend_from_slice(body);
        self.sink.emit()?;
        Ok(())
    }

    fn corrupt(&self, key: &[u8], reason: impl Into<String>) -> DatasetError {
        DatasetError::Corrupt {
            db: self.db,
            key: key.to_vec(),
            reason: reason.into(),
        }
    }

    /// One record of the current database.
    fn record(&mut self, k: &[u8], v: &[u8]) -> Result<(), DatasetError> {
        let Some(g) = k.get(..3) else {
            return Err(self.corrupt(k, "record key shorter than its database and slot"));
        };
        let group = [g[0], g[1], g[2]];
        if self.group != Some(group) {
            self.finish_slot()?;
            self.group = Some(group);
        }
        match k.get(3) {
            Some(&KIND_META) => self.meta(&k[4..], v),
            Some(&KIND_SUBKEY) => match parse_sub_key(k) {
                Some((_, _, key, version, rest)) => self.member(key, version, rest, v),
                None => Err(self.corrupt(k, "member record key does not parse")),
            },
            // The sorted sets' score index: the member records carry the scores.
            Some(&KIND_SCORE) => self.close(),
            _ => Err(self.corrupt(k, "record of unknown kind")),
        }
    }

    /// A metadata record: a string is written now, a collection when its members come.
    fn meta(&mut self, key: &[u8], v: &[u8]) -> Result<(), DatasetError> {
        let meta = decode_meta(v).map_err(|why| self.corrupt(key, why))?;
        if meta.rtype == RType::String {
            self.key_header(key, &meta, types::STRING)?;
            write::string(&mut self.sink.buf, &meta.value);
            self.sink.emit()?;
            return Ok(());
        }
        self.pending.insert(key.to_vec(), meta);
        Ok(())
    }

    /// A member record of collection `key`, incarnation `version`.
    fn member(
        &mut self,
        key: &[u8],
        version: u64,
        rest: &[u8],
        v: &[u8],
    ) -> Result<(), DatasetError> {
        let same = self
            .open
            .as_ref()
            .is_some_and(|o| o.key == key && o.meta.version == version);
        if !same {
            self.close()?;
            match self.pending.get(key) {
                Some(m) if m.version == version => {
                    let Some(meta) = self.pending.remove(key) else {
                        return Ok(());
                    };
                    self.open_collection(key, meta)?;
                }
                _ => {
                    self.stats.garbage_records += 1;
                    return Ok(());
                }
            }
        }
        self.element(rest, v)
    }

    /// Starts writing a collection: its header and size (a stream: gathering it).
    fn open_collection(&mut self, key: &[u8], meta: Meta) -> Result<(), DatasetError> {
        let (t, body) = match meta.rtype {
            RType::Hash => (types::HASH, Body::Members),
            RType::Set => (types::SET, Body::Members),
            RType::ZSet => (types::ZSET_2, Body::Members),
            RType::List => {
                let head = Bounds::decode(&meta.value).map_or(0, |b| b.head);
                (types::LIST, Body::List { next: head })
            }
            RType::Stream => {
                let info = StreamInfo::decode(&meta.value).unwrap_or_default();
                let build = StreamBuild::new(info);
                (types::STREAM_LISTPACKS, Body::Stream(Box::new(build)))
            }
            RType::String => return Err(self.corrupt(key, "a string opened as a collection")),
        };
        if !matches!(body, Body::Stream(_)) {
            self.key_header(key, &meta, t)?;
            write::length(&mut self.sink.buf, meta.size);
            self.sink.emit()?;
        }
        self.open = Some(Open {
            key: key.to_vec(),
            meta,
            seen: 0,
            body,
        });
        Ok(())
    }

    /// One member record of the open collection, written (or gathered, for a stream).
    fn element(&mut self, rest: &[u8], v: &[u8]) -> Result<(), DatasetError> {
        let Some(o) = self.open.as_mut() else {
            return Ok(());
        };
        let b = &mut self.sink.buf;
        let bad = match &mut o.body {
            Body::Stream(s) => s.record(rest, v).err(),
            _ if o.seen >= o.meta.size => Some(format!(
                "more member records than its size, {}",
                o.meta.size
            )),
            Body::List { next } => match <[u8; 8]>::try_from(rest).map(u64::from_be_bytes) {
                Ok(i) if i == *next => {
                    *next += 1;
                    write::string(b, v);
                    None
                }
                Ok(i) => Some(format!("element index {i} where {next} belongs")),
                Err(_) => Some("list element record without an 8-byte index".into()),
            },
            Body::Members => match o.meta.rtype {
                RType::Hash => {
                    write::string(b, rest);
                    write::string(b, v);
                    None
                }
                RType::Set if v.is_empty() => {
                    write::string(b, rest);
                    None
                }
                RType::Set => Some("set member record holds a value".into()),
                _ => match <[u8; 8]>::try_from(v).map(|s| f64::from_bits(u64::from_be_bytes(s))) {
                    Ok(s) if !s.is_nan() => {
                        write::string(b, rest);
                        b.extend_from_slice(&s.to_le_bytes());
                        None
                    }
                    _ => Some("sorted set member record without a score".into()),
                },
            },
        };
        o.seen += 1;
        if let Some(why) = bad {
            let key = o.key.clone();
            return Err(self.corrupt(&key, why));
        }
        self.sink.emit()?;
        Ok(())
    }

    /// Ends the open collection: its member records must have been as many as its size; a
    /// stream is written now.
    fn close(&mut self) -> Result<(), DatasetError> {
        let Some(o) = self.open.take() else {
            return Ok(());
        };
        match o.body {
            Body::Stream(s) => {
                let value = s.finish(&o.meta).map_err(|why| self.corrupt(&o.key, why))?;
                let mut encoded = Vec::new();
                super::stream::write(&mut encoded, &value);
                // The type byte, then the key, then the value.
                let (t, body) = encoded
                    .split_first()
                    .unwrap_or((&types::STREAM_LISTPACKS, &[]));
                self.key_header(&o.key, &o.meta, *t)?;
                self.sink.buf.extend_from_slice(body);
                self.sink.emit()?;
                Ok(())
            }
            _ if o.seen != o.meta.size => Err(self.corrupt(
                &o.key,
                format!(
                    "{} of size {} has {} member records",
                    o.meta.rtype.name(),
                    o.meta.size,
                    o.seen
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Ends a hash slot: a collection left without member records is a stream without
    /// entries or groups, or corruption.
    fn finish_slot(&mut self) -> Result<(), DatasetError> {
        self.close()?;
        self.group = None;
        while let Some((key, meta)) = self.pending.pop_first() {
            if meta.rtype != RType::Stream {
                return Err(self.corrupt(
                    &key,
                    format!(
                        "{} of size {} has no member records",
                        meta.rtype.name(),
                        meta.size
                    ),
                ));
            }
            self.open_collection(&key, meta)?;
            self.close()?;
        }
        Ok(())
    }

    /// What comes before a key's value: SELECTDB (before the database's first key), the
    /// expiry, the type byte and the key; and the key counted.
    fn key_header(&mut self, key: &[u8], meta: &Meta, t: u8) -> Result<(), DatasetError> {
        let b = &mut self.sink.buf;
        if !self.selected {
            b.push(opcode::SELECTDB);
            write::length(b, u64::from(self.db));
            self.selected = true;
            self.stats.per_db.push(DbCount {
                db: self.db,
                ..DbCount::default()
            });
        }
        if meta.expire_ms != 0 {
            b.push(opcode::EXPIRETIME_MS);
            b.extend_from_slice(&meta.expire_ms.to_le_bytes());
            self.stats.expires += 1;
        }
        b.push(t);
        write::string(b, key);
        self.stats.keys += 1;
        if let Some(d) = self.stats.per_db.last_mut() {
            d.keys += 1;
            d.expires += u64::from(meta.expire_ms != 0);
        }
        if self.stats.keys >= self.next_report {
            self.next_report = self.stats.keys + every(self.opts);
            if let Some(p) = self.opts.progress {
                self.stats.bytes = self.sink.bytes;
                self.stats.elapsed = self.started.elapsed();
                p(&self.stats);
            }
        }
        Ok(())
    }
}

/// A metadata record, with its type's own fields checked (as `strata check` does).
fn decode_meta(v: &[u8]) -> Result<Meta, String> {
    let meta = Meta::decode(v).ok_or("metadata record does not decode")?;
    match meta.rtype {
        RType::List => match Bounds::decode(&meta.value) {
            Some(b) if b.len() == meta.size => {}
            _ => return Err("list metadata without a head and tail matching its size".into()),
        },
        RType::Stream if StreamInfo::decode(&meta.value).is_none() => {
            return Err("stream metadata without valid stream fields".into());
        }
        _ => {}
    }
    Ok(meta)
}

/// One stream gathered from its records (`docs/format/redis-keys.md`, "Streams"), in the
/// order they come: entries (in ID order), groups, consumers, pending entries, the index of
/// pending entries by consumer (not needed: the pending entries name their consumers).
struct StreamBuild {
    info: StreamInfo,
    nodes: Vec<Node>,
    entries: u64,
    /// By name.
    groups: BTreeMap<Vec<u8>, GroupValue>,
}

/// A length-prefixed name at the start of `b`, and the rest.
fn name(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
    Some((b.get(4..4 + n)?, b.get(4 + n..)?))
}

fn id_of(b: &[u8]) -> Result<StreamId, String> {
    (b.len() == 16)
        .then(|| StreamId::from_bytes(b))
        .flatten()
        .ok_or_else(|| "stream record without a 16-byte ID".to_string())
}

impl StreamBuild {
    fn new(info: StreamInfo) -> StreamBuild {
        StreamBuild {
            info,
            nodes: Vec::new(),
            entries: 0,
            groups: BTreeMap::new(),
        }
    }

    fn group(&mut self, g: &[u8]) -> Result<&mut GroupValue, String> {
        self.groups
            .get_mut(g)
            .ok_or_else(|| format!("record of missing group {:?}", String::from_utf8_lossy(g)))
    }

    /// One member record of the stream: `rest` is its subkey (tag first).
    fn record(&mut self, rest: &[u8], v: &[u8]) -> Result<(), String> {
        let (&tag, sub) = rest.split_first().ok_or("empty stream subkey")?;
        match tag {
            TAG_ENTRY => {
                let id = id_of(sub)?;
                let (head, fields) = decode_entry_head(v).ok_or("entry record does not decode")?;
                // A node starts at a flagged entry (the first entry always starts one).
                if head.is_some() || self.nodes.is_empty() {
                    self.nodes.push(Node {
                        entries: Vec::new(),
                        total: head.unwrap_or(0),
                    });
                }
                if let Some(n) = self.nodes.last_mut() {
                    n.entries.push((id, fields));
                }
                self.entries += 1;
            }
            TAG_GROUP => {
                let g = Group::decode(v).ok_or("group record does not decode")?;
                self.groups.insert(
                    sub.to_vec(),
                    GroupValue {
                        name: sub.to_vec(),
                        last_id: g.last_id,
                        entries_read: g.entries_read,
                        pel: Vec::new(),
                        consumers: Vec::new(),
                    },
                );
            }
            TAG_CONSUMER => {
                let (g, c) = name(sub).ok_or("consumer record key does not parse")?;
                let seen = Consumer::decode(v).ok_or("consumer record does not decode")?;
                self.group(g)?.consumers.push(ConsumerValue {
                    name: c.to_vec(),
                    seen_ms: seen.seen_ms,
                });
            }
            TAG_PEL => {
                let (g, id) = name(sub).ok_or("pending entry key does not parse")?;
                let id = id_of(id)?;
                let e = PelEntry::decode(v).ok_or("pending entry does not decode")?;
                self.group(g)?.pel.push(PendingValue {
                    id,
                    consumer: e.consumer,
                    delivery_ms: e.delivery_ms,
                    deliveries: e.deliveries,
                });
            }
            TAG_CONSUMER_PEL => {}
            t => return Err(format!("stream record with unknown tag {t:#04x}")),
        }
        Ok(())
    }

    /// The stream's value: the node sizes completed as `stream/value.rs` does, every
    /// pending entry owned by a consumer of its group, the length the metadata's.
    fn finish(mut self, meta: &Meta) -> Result<StreamValue, String> {
        if self.entries != meta.size {
            return Err(format!(
                "stream of length {} has {} entry records",
                meta.size, self.entries
            ));
        }
        let last = self.nodes.len().saturating_sub(1);
        for (i, n) in self.nodes.iter_mut().enumerate() {
            // The last node's count lives in the metadata (its head says 0).
            if i == last && n.total == 0 {
                n.total = self.info.tail_node;
            }
            n.total = n.total.max(n.entries.len() as u64);
        }
        for g in self.groups.values_mut() {
            g.consumers.sort_by(|a, b| a.name.cmp(&b.name));
            g.pel.sort_by_key(|p| p.id);
            let names: HashSet<&[u8]> = g.consumers.iter().map(|c| &c.name[..]).collect();
            if let Some(p) = g.pel.iter().find(|p| !names.contains(&p.consumer[..])) {
                return Err(format!("pending entry {} of a missing consumer", p.id));
            }
        }
        Ok(StreamValue {
            nodes: self.nodes,
            last_id: self.info.last_id,
            max_deleted: self.info.max_deleted,
            entries_added: self.info.entries_added,
            groups: self.groups.into_values().collect(),
        })
    }
}
