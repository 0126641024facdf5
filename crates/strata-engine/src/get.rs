//! Point lookups: memtable → immutable memtables (newest first) → L0 tables (newest first) →
//! one table per deeper level; filter before index before data block. How a reader pairs its
//! super version with its sequence number: `docs/design.md` §5.1, §5.2.

use crate::error::{Error, Result};
use crate::key::{self, SeqNo, ValueKind};
use crate::l0tier::{L0Entry, L0ValueRef};
use crate::memtable::MemLookup;
use crate::options::ReadOptions;
use crate::sst::{ReadParams, Table};
use crate::state::{DbInner, SuperVersion};
use crate::stats::Counters;
use crate::version::{FileMeta, Version};
use crate::vlog::ValuePointer;
use std::sync::Arc;

/// What one source says about a key.
pub(crate) enum Found {
    Value(Vec<u8>),
    /// An encoded value pointer, to resolve through the value log.
    Pointer(Vec<u8>),
    Deleted,
}

pub(crate) fn params(ro: &ReadOptions) -> ReadParams {
    ReadParams {
        verify_checksums: ro.verify_checksums,
        fill_cache: ro.fill_cache,
        readahead: 0,
    }
}

/// Interprets the entry a table returned for a seek: it answers for `user_key` only if its
/// user key matches.
pub(crate) fn entry_for(
    table: &Table,
    user_key: &[u8],
    ikey: &[u8],
    value: &[u8],
) -> Result<Option<Found>> {
    let p = key::parse_internal_key(ikey).ok_or_else(|| {
        Error::corruption(
            table.file().path(),
            0,
            format!("malformed internal key of {} bytes", ikey.len()),
        )
    })?;
    if p.user_key != user_key {
        return Ok(None);
    }
    Ok(Some(match p.kind {
        ValueKind::Value => Found::Value(value.to_vec()),
        ValueKind::Pointer => Found::Pointer(value.to_vec()),
        ValueKind::Delete => Found::Deleted,
    }))
}

/// An L0 tier table's answer as the other sources give it (a pointer encoded as an SSTable
/// stores it).
pub(crate) fn tier_found(e: L0Entry<'_>) -> Found {
    match (e.kind, e.value) {
        (ValueKind::Delete, _) => Found::Deleted,
        (_, L0ValueRef::Pointer(p)) => Found::Pointer(p.to_vec()),
        (ValueKind::Pointer, L0ValueRef::Inline(v)) => Found::Pointer(v.to_vec()),
        (ValueKind::Value, L0ValueRef::Inline(v)) => Found::Value(v.to_vec()),
    }
}

impl DbInner {
    pub(crate) fn get(&self, ro: &ReadOptions, user_key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (sv, seq) = self.read_view(ro);
        match self.get_entry(&sv, user_key, seq, params(ro))? {
            Some(Found::Value(v)) => Ok(Some(v)),
            Some(Found::Pointer(p)) => {
                let ptr = ValuePointer::decode_or_corrupt(&p, "<lsm value pointer>")?;
                self.vlog
                    .read_point(&sv.vlog_files, user_key, &ptr)
                    .map(Some)
            }
            Some(Found::Deleted) | None => Ok(None),
        }
    }

    /// The newest entry of `user_key` visible at `seq`, pointers unresolved.
    pub(crate) fn get_entry(
        &self,
        sv: &SuperVersion,
        user_key: &[u8],
        seq: SeqNo,
        p: ReadParams,
    ) -> Result<Option<Found>> {
        match lookup_memtables(sv, user_key, seq) {
            MemLookup::Found(v) => return Ok(Some(Found::Value(v))),
            MemLookup::Pointer(v) => return Ok(Some(Found::Pointer(v))),
            MemLookup::Deleted => return Ok(Some(Found::Deleted)),
            MemLookup::Absent => {}
        }
        let seek = key::seek_key_inline(user_key, seq);
        for f in candidate_files(&sv.version, user_key, &seek) {
            if f.tier {
                match self.tables.tier_table(f.number)?.get(user_key, seq)? {
                    Some(e) => return Ok(Some(tier_found(e))),
                    None => continue,
                }
            }
            let t = self.tables.get_for(f)?;
            if !self.filter_may_contain(&t, user_key) {
                continue;
            }
            let r = t.get(&seek, p, |k, v| entry_for(&t, user_key, k, v))?;
            if let Some(found) = r.transpose()?.flatten() {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The newest entry of `user_key` in the tables of `version` (memtables not consulted):
    /// its sequence number, kind and stored value.
    pub(crate) fn table_entry(
        &self,
        version: &Version,
        user_key: &[u8],
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        let seek = key::seek_key_inline(user_key, key::MAX_SEQ);
        let p = ReadParams {
            verify_checksums: true,
            fill_cache: true,
            readahead: 0,
        };
        for f in candidate_files(version, user_key, &seek) {
            if f.tier {
                match self
                    .tables
                    .tier_table(f.number)?
                    .get(user_key, key::MAX_SEQ)?
                {
                    Some(e) => {
                        let value = match tier_found(e) {
                            Found::Value(v) | Found::Pointer(v) => v,
                            Found::Deleted => Vec::new(),
                        };
                        return Ok(Some((e.seq, e.kind, value)));
                    }
                    None => continue,
                }
            }
            let t = self.tables.get_for(f)?;
            if !t.may_contain(user_key) {
                continue;
            }
            let r = t.get(&seek, p, |k, v| {
                let pk = key::parse_internal_key(k).ok_or_else(|| {
                    Error::corruption(t.file().path(), 0, "malformed internal key")
                })?;
                Ok((pk.user_key == user_key).then(|| (pk.seq, pk.kind, v.to_vec())))
            })?;
            if let Some(found) = r.transpose()?.flatten() {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    pub(crate) fn filter_may_contain(&self, t: &Table, user_key: &[u8]) -> bool {
        Counters::add(&self.counters.filter_checks, 1);
        let m = t.may_contain(user_key);
        if !m {
            Counters::add(&self.counters.filter_negatives, 1);
        }
        m
    }
}

pub(crate) fn lookup_memtables(sv: &SuperVersion, user_key: &[u8], seq: SeqNo) -> MemLookup {
    match sv.mem.get(user_key, seq) {
        MemLookup::Absent => {}
        r => return r,
    }
    for m in &sv.imms {
        match m.get(user_key, seq) {
            MemLookup::Absent => {}
            r => return r,
        }
    }
    MemLookup::Absent
}

/// The tables that may hold `user_key`, in the order they must be consulted.
pub(crate) fn candidate_files<'a>(
    v: &'a Version,
    user_key: &'a [u8],
    seek: &'a [u8],
) -> impl Iterator<Item = &'a Arc<FileMeta>> + 'a {
    let l0 = v.levels[0].iter().filter(move |f| {
        key::user_key(&f.smallest) <= user_key && user_key <= key::user_key(&f.largest)
    });
    let deeper = v
        .levels
        .iter()
        .skip(1)
        .filter_map(move |files| Version::find_file(files, seek).map(|i| &files[i]));
    l0.chain(deeper)
}
