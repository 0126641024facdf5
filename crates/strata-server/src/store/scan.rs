//! Whole-database reads and deletes through a command's transaction ([`Tx`]): SCAN and
//! RANDOMKEY's walk of the metadata records, DBSIZE/KEYS/INFO keyspace's full scan, and
//! FLUSHDB's batched deletes (also the cleaner of a replica's dropped dataset).
//!
//! Layer: store and types.

use super::meta::corrupt;
use super::{now_ms, Meta, Tx};
use crate::keys::{db_range, user_key_of_meta};
use strata::WriteBatch;
use strata_engine::Result;

impl Tx<'_> {
    /// Calls `f(slot, user_key, meta)` for the metadata records of database `db` from the
    /// first key of hash slot `slot` that is not below `from` onwards, in store order (slot,
    /// then key bytes), until `f` returns false. Expired keys are passed as `None` (and not
    /// deleted). SCAN and RANDOMKEY.
    pub fn scan_from(
        &self,
        db: u8,
        slot: u16,
        from: &[u8],
        mut f: impl FnMut(u16, &[u8], Option<&Meta>) -> bool,
    ) -> Result<()> {
        let mut lo = vec![db];
        lo.extend_from_slice(&slot.to_be_bytes());
        lo.push(crate::keys::KIND_META);
        lo.extend_from_slice(from);
        let now = now_ms();
        self.scan_metas(db, &lo, |sk, k, m| {
            let slot = u16::from_be_bytes([sk[1], sk[2]]);
            f(slot, k, (!m.expired_at(now)).then_some(m))
        })
    }

    /// Calls `f(store_key, user_key, meta)` for the metadata records of database `db` from
    /// `lo` on, in store order, until `f` returns false (seeing an EXEC's own writes).
    fn scan_metas(
        &self,
        db: u8,
        lo: &[u8],
        mut f: impl FnMut(&[u8], &[u8], &Meta) -> bool,
    ) -> Result<()> {
        let (_, hi) = db_range(db);
        let mut bad = None;
        self.scan_range(lo, &hi, false, |sk, v| {
            let Some(k) = user_key_of_meta(sk) else {
                return true;
            };
            match Meta::decode(v) {
                Some(m) => f(sk, k, &m),
                None => {
                    bad = Some(corrupt(k));
                    false
                }
            }
        })?;
        bad.map_or(Ok(()), Err)
    }

    /// A live key of `db` chosen at random (RANDOMKEY): the first live key at or after a
    /// random hash slot, wrapping around once. Keys in sparsely filled slots are likelier
    /// than others (Redis's choice is not uniform either: it picks a random bucket).
    pub fn random_key(&self, db: u8) -> Result<Option<Vec<u8>>> {
        let start = (crate::random::next_u64() % u64::from(crate::keys::SLOTS)) as u16;
        let mut found = None;
        for (from, below) in [(start, u32::MAX), (0, u32::from(start))] {
            self.scan_from(db, from, b"", |s, k, m| {
                if u32::from(s) >= below {
                    return false;
                }
                if m.is_some() {
                    found = Some(k.to_vec());
                }
                found.is_none()
            })?;
            if found.is_some() {
                break;
            }
        }
        Ok(found)
    }

    /// Calls `f(user_key, meta)` for every live key of database `db`, in store order, at
    /// one snapshot. Reads the whole database: DBSIZE, KEYS, INFO keyspace.
    pub fn scan_db(&self, db: u8, mut f: impl FnMut(&[u8], &Meta)) -> Result<()> {
        let (lo, _) = db_range(db);
        let now = now_ms();
        self.scan_metas(db, &lo, |_, k, m| {
            if !m.expired_at(now) {
                f(k, m);
            }
            true
        })
    }

    /// Deletes every record of database `db`, in batches of 1000 (in an EXEC: all in its
    /// one write). Not atomic with commands running at the same time (a key written during
    /// the flush may survive it).
    pub fn flush_db(&self, db: u8) -> Result<()> {
        let (lo, hi) = db_range(db);
        let mut b = WriteBatch::new();
        let mut metas: Vec<Vec<u8>> = Vec::new();
        let mut failed = Ok(());
        self.scan_range(&lo, &hi, false, |k, _| {
            b.delete(k);
            if let Some(k) = user_key_of_meta(k) {
                metas.push(k.to_vec());
            }
            if b.len() >= 1000 {
                failed = self.flush_batch(db, std::mem::take(&mut b), std::mem::take(&mut metas));
                return failed.is_ok();
            }
            true
        })?;
        failed?;
        if !b.is_empty() {
            self.flush_batch(db, b, metas)?;
        }
        Ok(())
    }

    /// Deletes up to `limit` records of database `db` in one batch (a dropped generation of
    /// the keyspace, cleaned in the background between checks for shutdown); returns how
    /// many it deleted (0: the database is empty).
    pub fn delete_some(&self, db: u8, limit: usize) -> Result<usize> {
        let (lo, hi) = db_range(db);
        let mut b = WriteBatch::new();
        let mut metas: Vec<Vec<u8>> = Vec::new();
        self.scan_range(&lo, &hi, false, |k, _| {
            b.delete(k);
            if let Some(k) = user_key_of_meta(k) {
                metas.push(k.to_vec());
            }
            b.len() < limit
        })?;
        let n = b.len();
        if n > 0 {
            self.flush_batch(db, b, metas)?;
        }
        Ok(n)
    }

    /// One batch of FLUSHDB: the deletes and the expiry index entries of the deleted keys,
    /// under their stripes so that a key rewritten concurrently keeps its index entry.
    fn flush_batch(&self, db: u8, b: WriteBatch, keys: Vec<Vec<u8>>) -> Result<()> {
        let _g = self.lock_for_command(keys.iter().map(|k| (db, &k[..])), false);
        self.raw_write(b)?;
        for k in &keys {
            self.note_write(db, k, None);
        }
        Ok(())
    }
}
