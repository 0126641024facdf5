//! The database map: which physical database (the first byte of a record, `keys.rs`) holds
//! each logical database (what SELECT, SWAPDB and clients name). SWAPDB swaps two entries
//! and rewrites no record. Format of its server record: `docs/format/redis-keys.md`.
//!
//! **Readers** load one entry (an atomic byte) per request: the connection translates its
//! selected database when it fixes a command's database (`conn.rs`, `cmd::run_locked`),
//! services translate back at their edge (keyspace notifications, INFO keyspace). **The
//! writer** ([`swap_databases`]) holds every
//! stripe exclusively while it changes the map (design §13.19), so a command holding any
//! stripe sees the map unchanged for its run; the mutex below only keeps two swaps from
//! interleaving their two stores.
//!
//! Layer: store and types.

use crate::keys::{MAX_DATABASES, SERVER_PREFIX};
use crate::store::{Store, Tx};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

/// Format version byte of the map's record. On-disk: do not renumber.
const FORMAT: u8 = 1;

/// The server record holding the map. On-disk: do not change.
pub fn record_key() -> Vec<u8> {
    let mut k = vec![SERVER_PREFIX];
    k.extend_from_slice(b"dbmap");
    k
}

/// Logical → physical database and back, a permutation of `0..MAX_DATABASES`.
pub struct DbMap {
    physical: [AtomicU8; MAX_DATABASES],
    logical: [AtomicU8; MAX_DATABASES],
    /// Held by a swap across its two stores and its record's encoding.
    writer: Mutex<()>,
}

impl Default for DbMap {
    fn default() -> DbMap {
        DbMap {
            physical: std::array::from_fn(|i| AtomicU8::new(i as u8)),
            logical: std::array::from_fn(|i| AtomicU8::new(i as u8)),
            writer: Mutex::new(()),
        }
    }
}

impl DbMap {
    /// The map a stored record describes (`None`: no record, the identity); an error says
    /// what is wrong with the record.
    pub fn decode(stored: Option<&[u8]>) -> Result<DbMap, String> {
        let map = DbMap::default();
        let Some(b) = stored else {
            return Ok(map);
        };
        let (&version, perm) = b.split_first().ok_or("the database map record is empty")?;
        if version != FORMAT {
            return Err(format!(
                "database map record in format {version}; this server reads {FORMAT}"
            ));
        }
        if perm.len() != MAX_DATABASES {
            return Err(format!(
                "database map record holds {} entries, not {MAX_DATABASES}",
                perm.len()
            ));
        }
        let mut seen = [false; MAX_DATABASES];
        for (l, &p) in perm.iter().enumerate() {
            let p = usize::from(p);
            if p >= MAX_DATABASES || std::mem::replace(&mut seen[p], true) {
                return Err(format!("database map record is not a permutation (at {l})"));
            }
            map.physical[l].store(p as u8, Ordering::Relaxed);
            map.logical[p].store(l as u8, Ordering::Relaxed);
        }
        Ok(map)
    }

    /// The record's value: format byte, then the physical database of each logical one.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(1 + MAX_DATABASES);
        v.push(FORMAT);
        v.extend(self.physical.iter().map(|p| p.load(Ordering::Acquire)));
        v
    }

    /// The physical database holding logical database `db`.
    pub fn physical(&self, db: u8) -> u8 {
        self.physical
            .get(usize::from(db))
            .map_or(db, |p| p.load(Ordering::Acquire))
    }

    /// The logical database physical database `db` is.
    pub fn logical(&self, db: u8) -> u8 {
        self.logical
            .get(usize::from(db))
            .map_or(db, |l| l.load(Ordering::Acquire))
    }

    /// Whether every logical database is its physical one.
    #[cfg(test)]
    pub fn is_identity(&self) -> bool {
        (0..MAX_DATABASES).all(|i| usize::from(self.physical(i as u8)) == i)
    }

    /// The entries that are not the identity, `(logical, physical)`, for `strata check`.
    pub fn moved(&self) -> Vec<(u8, u8)> {
        (0..MAX_DATABASES as u8)
            .map(|l| (l, self.physical(l)))
            .filter(|(l, p)| l != p)
            .collect()
    }

    /// The record after swapping logical databases `a` and `b`, and the physical databases
    /// they hold before the swap; `persist` stores the record before the map changes, and
    /// if it fails the map is unchanged. The caller excludes every reader (§13.19).
    pub fn swap(
        &self,
        a: u8,
        b: u8,
        persist: impl FnOnce(&[u8]) -> Result<(), String>,
    ) -> Result<(u8, u8), String> {
        let _w = self.writer.lock();
        let (pa, pb) = (self.physical(a), self.physical(b));
        let mut record = self.encode();
        record[1 + usize::from(a)] = pb;
        record[1 + usize::from(b)] = pa;
        persist(&record)?;
        self.physical[usize::from(a)].store(pb, Ordering::Release);
        self.physical[usize::from(b)].store(pa, Ordering::Release);
        self.logical[usize::from(pa)].store(b, Ordering::Release);
        self.logical[usize::from(pb)].store(a, Ordering::Release);
        Ok((pa, pb))
    }
}

/// Physical databases for a new generation of logical databases `0..databases` (a full
/// sync's load, `replica/load.rs`): one per logical database, none that a logical database
/// below `databases` maps to, none in `busy` (being cleaned or loaded), lowest first. An
/// error when the 254 physical databases have no room (twice `databases`, plus the busy
/// ones, must fit).
pub fn spare(map: &DbMap, databases: usize, busy: &[u8]) -> Result<Vec<u8>, String> {
    let live: Vec<u8> = (0..databases.min(MAX_DATABASES))
        .map(|l| map.physical(l as u8))
        .collect();
    let free: Vec<u8> = (0..MAX_DATABASES as u8)
        .filter(|p| !live.contains(p) && !busy.contains(p))
        .take(databases)
        .collect();
    if free.len() < databases {
        return Err(format!(
            "no room for a new dataset: {databases} databases in use need {databases} more \
             of the {MAX_DATABASES} physical ones ({} are being cleaned); lower 'databases' \
             or wait for the cleaning",
            busy.len()
        ));
    }
    Ok(free)
}

/// The permutation that maps logical database `l` to `targets[l]` (physical databases that
/// no logical database below `targets.len()` maps to, [`spare`]) and gives each logical
/// database that held a target the physical database it displaced: the old generation
/// ends up mapped only from logical databases nobody selects.
pub fn generation_map(map: &DbMap, targets: &[u8]) -> [u8; MAX_DATABASES] {
    let mut perm: [u8; MAX_DATABASES] = std::array::from_fn(|l| map.physical(l as u8));
    for (l, &t) in targets.iter().enumerate() {
        let old = map.physical(l as u8);
        let holder = map.logical(t);
        perm[usize::from(holder)] = old;
        perm[l] = t;
    }
    perm
}

impl DbMap {
    /// Replaces the whole map with `perm` (a permutation, [`generation_map`]): `persist`
    /// stores its record first; if it fails the map is unchanged. The caller excludes every
    /// reader, as for a swap.
    pub fn install(
        &self,
        perm: &[u8; MAX_DATABASES],
        persist: impl FnOnce(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        let _w = self.writer.lock();
        let mut record = Vec::with_capacity(1 + MAX_DATABASES);
        record.push(FORMAT);
        record.extend_from_slice(perm);
        DbMap::decode(Some(&record))?;
        persist(&record)?;
        for (l, &p) in perm.iter().enumerate() {
            self.physical[l].store(p, Ordering::Release);
            self.logical[usize::from(p)].store(l as u8, Ordering::Release);
        }
        Ok(())
    }
}

/// A full sync's switch: every logical database below `targets.len()` to its new physical
/// database at once, under every stripe and after one empty turn of every worker, as
/// [`swap_databases`]. `persist` gets the map's record and writes it (with whatever must be
/// atomic with it) in one synced batch. Watched keys of the old and new databases flag their
/// watchers and follow their logical database; `moved(old, new)` runs for each database
/// still under the stripes (blocked clients). Returns the old physical databases.
pub fn install_generation(
    store: &Tx<'_>,
    targets: &[u8],
    persist: impl FnOnce(&[u8]) -> Result<(), String>,
    mut moved: impl FnMut(u8, u8),
) -> Result<Vec<u8>, String> {
    let _stripes = store.lock_every_stripe_for_command();
    drain_workers(store)?;
    let old: Vec<u8> = (0..targets.len())
        .map(|l| store.dbs.physical(l as u8))
        .collect();
    let perm = generation_map(&store.dbs, targets);
    store.dbs.install(&perm, persist)?;
    for (&o, &t) in old.iter().zip(targets) {
        store
            .watches
            .swap_dbs(o, t, |db, key| store.peek(db, key).ok().flatten().is_some());
        moved(o, t);
    }
    Ok(old)
}

/// SWAPDB's work: swaps logical databases `a` and `b` for every execution path at once
/// (design §13.19). Every stripe, exclusively (none more if this runs in an EXEC or a script,
/// which hold them already): no command that fixed its database before the swap is running
/// or queued with a write; then one empty turn of every shard worker, so the reads queued
/// before are done too; then the map's record, synced, and the map. Watchers of a key of
/// either database that exists in either are flagged (Redis's `touchAllWatchedKeysInDb`),
/// and their entries follow their logical database. `moved` runs last, still under the
/// stripes, with the two physical databases: the services above the store move their own
/// per-database state there (blocked clients).
pub fn swap_databases(
    store: &Tx<'_>,
    a: u8,
    b: u8,
    moved: impl FnOnce(u8, u8),
) -> Result<(), String> {
    let _stripes = store.lock_every_stripe_for_command();
    drain_workers(store)?;
    let (pa, pb) = store.dbs.swap(a, b, |record| {
        let mut b = strata::WriteBatch::new();
        b.put(&record_key(), record);
        store
            .write_server_records(b)
            .map_err(|e| format!("storing the database map failed: {e}"))
    })?;
    store.watches.swap_dbs(pa, pb, |db, key| {
        store.peek(db, key).ok().flatten().is_some()
    });
    moved(pa, pb);
    Ok(())
}

/// Waits until every shard worker has run what was queued to it before this call.
fn drain_workers(store: &Store) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let shards = store.db().shard_count();
    for s in 0..shards {
        let tx = tx.clone();
        store.db().exec(s, move |_| {
            let _ = tx.send(());
            None
        });
    }
    drop(tx);
    if rx.iter().count() != shards {
        return Err("a shard worker stopped".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_persist_and_decode_back() {
        let m = DbMap::default();
        assert!(m.is_identity());
        let mut stored = Vec::new();
        assert_eq!(
            m.swap(0, 3, |r| {
                stored = r.to_vec();
                Ok(())
            }),
            Ok((0, 3))
        );
        assert_eq!((m.physical(0), m.physical(3), m.logical(3)), (3, 0, 0));
        assert_eq!(m.swap(3, 5, |_| Ok(())), Ok((0, 5)));
        assert_eq!((m.physical(3), m.physical(5), m.logical(0)), (5, 0, 5));
        let back = DbMap::decode(Some(&m.encode())).unwrap();
        assert_eq!(back.moved(), vec![(0, 3), (3, 5), (5, 0)]);
        assert_eq!(
            DbMap::decode(Some(&stored)).unwrap().moved(),
            vec![(0, 3), (3, 0)]
        );
        // Swapping a database with itself changes nothing.
        m.swap(7, 7, |_| Ok(())).unwrap();
        assert_eq!(m.physical(7), 7);
    }

    #[test]
    fn a_new_generation_takes_spare_databases_and_hides_the_old() {
        let m = DbMap::default();
        m.swap(0, 1, |_| Ok(())).unwrap();
        let targets = spare(&m, 3, &[4]).unwrap();
        assert_eq!(targets, vec![3, 5, 6]);
        let perm = generation_map(&m, &targets);
        let mut rec = vec![FORMAT];
        rec.extend_from_slice(&perm);
        let back = DbMap::decode(Some(&rec)).unwrap();
        assert_eq!(
            (0..3).map(|l| back.physical(l)).collect::<Vec<_>>(),
            targets
        );
        // The old generation (physical 1, 0, 2) is mapped from logical 3, 5, 6 now.
        assert_eq!(
            (back.logical(1), back.logical(0), back.logical(2)),
            (3, 5, 6)
        );
        m.install(&perm, |_| Ok(())).unwrap();
        assert_eq!(m.encode(), rec);
        assert!(m.install(&perm, |_| Err("disk".into())).is_err());
        assert!(spare(&m, 200, &[]).unwrap_err().contains("no room"));
        assert_eq!(spare(&m, 127, &[]).map(|t| t.len()), Ok(127));
    }

    #[test]
    fn a_failed_store_leaves_the_map() {
        let m = DbMap::default();
        assert!(m.swap(1, 2, |_| Err("disk full".into())).is_err());
        assert!(m.is_identity());
    }

    #[test]
    fn bad_records_are_refused() {
        assert!(DbMap::decode(None).unwrap().is_identity());
        assert!(DbMap::decode(Some(b"")).is_err());
        assert!(DbMap::decode(Some(&[2; 1 + MAX_DATABASES])).is_err());
        let mut r = DbMap::default().encode();
        r[2] = 0; // logical 1 → physical 0 twice
        assert!(DbMap::decode(Some(&r))
            .err()
            .unwrap_or_default()
            .contains("permutation"));
        r.pop();
        assert!(DbMap::decode(Some(&r)).is_err());
    }
}
