//! The hash type (Redis's t_hash.c, as Kvrocks' `types/redis_hash.cc`): a typed handle over
//! the command's transaction, with no protocol in it. A hash is a metadata record (type
//! hash, size = number of fields, one flags byte: `collection::FLAG_HASHTABLE`) and one
//! member record per field whose value is the field's value (`docs/format/redis-keys.md`,
//! "Hashes"). A hash's records share its shard, so each method's writes are one `Writes`,
//! applied through the transaction.
//!
//! **Encodings.** Redis keeps a small hash as a listpack and converts it to a hashtable,
//! never back, when a field or value it stores is longer than `hash-max-listpack-value`
//! or it holds more than `hash-max-listpack-entries` fields (`hashTypeTryConversion`,
//! `hashTypeConvert`). The handle applies the same rules ([`Limits`]) to the flag OBJECT
//! ENCODING reads.
//!
//! Layer: store and types.

use crate::collection::{self, Collection, Handle, Member};
use crate::store::{Meta, RType, Writes};
use std::collections::HashMap;
use strata_engine::Result;

/// The listpack limits of `hash-max-listpack-entries` and `hash-max-listpack-value`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_entries: u64,
    pub max_value: u64,
}

impl Limits {
    /// The limits as the server's tunables hold them now.
    pub fn of(limits: &crate::tuning::Limits) -> Limits {
        use crate::tuning::Limit;
        Limits {
            max_entries: limits.get(Limit::HashMaxListpackEntries),
            max_value: limits.get(Limit::HashMaxListpackValue),
        }
    }
}

/// A hash of database `db`, read and written through one transaction: an existing one
/// ([`Hash::open`], [`Hash::open_write`]) or a new, empty one that exists once a field is
/// set ([`Hash::open_or_create`]).
pub struct Hash<'t> {
    h: Handle<'t>,
}

impl<'t> Collection<'t> for Hash<'t> {
    const TYPE: RType = RType::Hash;

    fn from_handle(h: Handle<'t>) -> Self {
        Hash { h }
    }
}

impl<'t> Hash<'t> {
    /// The number of fields.
    pub fn len(&self) -> u64 {
        self.h.meta.size
    }

    /// The hash's metadata record.
    pub fn meta(&self) -> &Meta {
        &self.h.meta
    }

    fn record(&self, field: &[u8]) -> Vec<u8> {
        collection::record(self.h.db, self.h.key, &self.h.meta, field)
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Result<Option<Vec<u8>>> {
        if !self.h.existed {
            return Ok(None);
        }
        self.h.tx.get_member(&self.record(field))
    }

    /// The values of `fields`, in order (one batched read).
    pub fn get_many(&self, fields: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        if !self.h.existed {
            return Ok(vec![None; fields.len()]);
        }
        collection::exist(self.h.tx, self.h.db, self.h.key, &self.h.meta, fields)
    }

    /// Every field with its value, in field byte order.
    pub fn all(&self) -> Result<Vec<Member>> {
        collection::load(self.h.tx, self.h.db, self.h.key, &self.h.meta)
    }

    /// Redis's `hashTypeTryConversion`: a listpack hash becomes a hashtable when a field or
    /// value it stores is longer than `max_value`.
    fn convert_for<B: AsRef<[u8]>>(&mut self, limits: Limits, args: &[B]) {
        if args
            .iter()
            .any(|a| a.as_ref().len() as u64 > limits.max_value)
        {
            collection::mark_hashtable(&mut self.h.meta);
        }
    }

    /// After fields were added: more than `max_entries` fields make it a hashtable.
    fn convert_for_size(&mut self, limits: Limits) {
        if self.h.meta.size > limits.max_entries {
            collection::mark_hashtable(&mut self.h.meta);
        }
    }

    /// HSET: sets the fields and values of `flat` (field, value, field, value, ...; a
    /// trailing odd one is ignored), the last value of a repeated field winning; returns
    /// the number of fields created. Writes nothing for no pairs.
    pub fn set<B: AsRef<[u8]>>(&mut self, flat: &[B], limits: Limits) -> Result<u64> {
        let n = flat.len() / 2;
        if n == 0 {
            return Ok(0);
        }
        self.convert_for(limits, flat);
        // Distinct fields in first-appearance order, each with its last value (a lookup
        // table only when there is more than one pair).
        let mut order: Vec<(&[u8], &[u8])> = Vec::with_capacity(n);
        let mut index: HashMap<&[u8], usize> = HashMap::new();
        for p in flat.chunks_exact(2) {
            let (f, v) = (p[0].as_ref(), p[1].as_ref());
            if n == 1 {
                order.push((f, v));
                continue;
            }
            match index.get(f) {
                Some(&i) => order[i].1 = v,
                None => {
                    index.insert(f, order.len());
                    order.push((f, v));
                }
            }
        }
        let recs: Vec<Vec<u8>> = order.iter().map(|(f, _)| self.record(f)).collect();
        let mut created = order.len() as u64;
        if self.h.existed {
            created = 0;
            for r in self.h.tx.get_members(&recs) {
                created += u64::from(r?.is_none());
            }
        }
        let mut w = Writes::new();
        for ((_, v), rec) in order.iter().zip(&recs) {
            w.put_member(self.h.db, self.h.key, rec, v);
        }
        self.h.meta.size += created;
        self.convert_for_size(limits);
        w.meta(self.h.db, self.h.key, Some(&self.h.meta));
        self.h.tx.apply(w)?;
        self.h.existed = true;
        Ok(created)
    }

    /// HSETNX: sets `field` only if it is absent; whether it did.
    pub fn set_nx(&mut self, field: &[u8], value: &[u8], limits: Limits) -> Result<bool> {
        if self.get(field)?.is_some() {
            return Ok(false);
        }
        let mut w = Writes::new();
        w.put_member(self.h.db, self.h.key, &self.record(field), value);
        self.h.meta.size += 1;
        self.convert_for(limits, &[field, value]);
        self.convert_for_size(limits);
        w.meta(self.h.db, self.h.key, Some(&self.h.meta));
        self.h.tx.apply(w)?;
        self.h.existed = true;
        Ok(true)
    }

    /// HDEL: deletes the `fields` that exist (each counted once); returns how many. The
    /// hash is deleted with its last field.
    pub fn del<B: AsRef<[u8]>>(&mut self, fields: &[B]) -> Result<u64> {
        if !self.h.existed {
            return Ok(0);
        }
        let mut distinct: Vec<&[u8]> = fields.iter().map(AsRef::as_ref).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let found = self.get_many(&distinct)?;
        let mut w = Writes::new();
        let mut deleted = 0u64;
        for (f, v) in distinct.iter().zip(&found) {
            if v.is_some() {
                w.delete_member(self.h.db, self.h.key, &self.record(f));
                deleted += 1;
            }
        }
        if deleted > 0 {
            self.h.meta.size = self.h.meta.size.saturating_sub(deleted);
            collection::put_meta(&mut w, self.h.db, self.h.key, &self.h.meta);
            self.h.tx.apply(w)?;
            self.h.existed = self.h.meta.size > 0;
        }
        Ok(deleted)
    }

    /// Read-modify-write of one field (HINCRBY, HINCRBYFLOAT): `f` gets the field's value,
    /// if any, and returns the new one, or an error that leaves everything unwritten.
    pub fn modify<E: From<strata_engine::Error>>(
        &mut self,
        field: &[u8],
        limits: Limits,
        f: impl FnOnce(Option<&[u8]>) -> std::result::Result<Vec<u8>, E>,
    ) -> std::result::Result<Vec<u8>, E> {
        let rec = self.record(field);
        let cur = if self.h.existed {
            self.h.tx.get_member(&rec)?
        } else {
            None
        };
        let new = f(cur.as_deref())?;
        let mut w = Writes::new();
        w.put_member(self.h.db, self.h.key, &rec, &new);
        let was = self.h.meta.clone();
        if cur.is_none() {
            self.h.meta.size += 1;
        }
        self.convert_for(limits, &[field, &new]);
        self.convert_for_size(limits);
        if self.h.meta != was || !self.h.existed {
            w.meta(self.h.db, self.h.key, Some(&self.h.meta));
        }
        self.h.tx.apply(w)?;
        self.h.existed = true;
        Ok(new)
    }

    /// `count` distinct random fields (`count < len()`), in random order (HRANDFIELD).
    pub fn sample_distinct(&self, count: usize) -> Result<Vec<Member>> {
        collection::sample_distinct(self.h.tx, self.h.db, self.h.key, &self.h.meta, count)
    }

    /// `count` random fields with repetition, each passed to `f` (HRANDFIELD with a
    /// negative count).
    pub fn sample_repeating(&self, count: u64, f: impl FnMut(&[u8], &[u8])) -> Result<()> {
        collection::sample_repeating(self.h.tx, self.h.db, self.h.key, &self.h.meta, count, f)
    }
}

#[cfg(test)]
#[path = "hash_tests.rs"]
mod tests;
