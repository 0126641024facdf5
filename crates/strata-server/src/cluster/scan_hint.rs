//! Where CLUSTER GETKEYSINSLOT starts its scan of a slot this node is migrating.
//!
//! A reshard (`redis-cli --cluster reshard`) calls `GETKEYSINSLOT slot 10` then MIGRATE of
//! the keys it got, in a loop, until the slot is empty. MIGRATE deletes the keys it moved,
//! and a deleted key leaves a tombstone in the store that a range scan from the slot's
//! first key must step over: without a hint, the n-th call of a slot of N keys steps over
//! n x 10 tombstones, O(N^2) per slot (measured: a quarter of the source's CPU in a reshard
//! of 1000 keys per slot). The hint is the first live key the last scan of the slot found;
//! the next scan starts there.
//!
//! The hint is only a start: while a slot is migrating no key is created in it here (a
//! command on a key missing from a migrating slot is redirected with `-ASK`), so no live
//! key lies below it; but a scan that finds fewer keys than asked for from the hint also
//! scans the keys below it (`cmd/cluster.rs`), so the number of keys returned is exact
//! even if something did create one there (a script's undeclared key).
//!
//! Concurrency: one `Mutex` around the map; it is taken only by GETKEYSINSLOT, twice per
//! call, never with another lock held inside it.
//!
//! Layer: cluster (a building block below commands).

use parking_lot::Mutex;
use std::collections::HashMap;

/// Most slots with a hint (each holds one key); past this the map is emptied.
const MAX_HINTS: usize = 1024;

/// The hints by (physical database, slot).
#[derive(Default)]
pub struct ScanHints(Mutex<HashMap<(u8, u16), Vec<u8>>>);

impl ScanHints {
    /// The key the scan of `slot` may start from (empty: the slot's first key).
    pub fn start(&self, db: u8, slot: u16) -> Vec<u8> {
        self.0.lock().get(&(db, slot)).cloned().unwrap_or_default()
    }

    /// Records `first`, the first live key a scan of `slot` found (`None`: it found none,
    /// and the hint is dropped).
    pub fn record(&self, db: u8, slot: u16, first: Option<&[u8]>) {
        let mut map = self.0.lock();
        match first {
            Some(k) => {
                if map.len() >= MAX_HINTS && !map.contains_key(&(db, slot)) {
                    map.clear();
                }
                map.insert((db, slot), k.to_vec());
            }
            None => {
                map.remove(&(db, slot));
            }
        }
    }

    /// Drops the hint of `slot` (it is not migrating: its scans start at its first key).
    pub fn forget(&self, db: u8, slot: u16) {
        let mut map = self.0.lock();
        if !map.is_empty() {
            map.remove(&(db, slot));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_is_kept_per_database_and_slot_until_dropped() {
        let h = ScanHints::default();
        assert_eq!(h.start(0, 7), b"");
        h.record(0, 7, Some(b"k5"));
        assert_eq!(h.start(0, 7), b"k5");
        assert_eq!(h.start(0, 8), b"");
        assert_eq!(h.start(1, 7), b"");
        h.record(0, 7, None);
        assert_eq!(h.start(0, 7), b"");
        h.record(0, 7, Some(b"k9"));
        h.forget(0, 7);
        assert_eq!(h.start(0, 7), b"");
    }

    #[test]
    fn the_map_is_bounded() {
        let h = ScanHints::default();
        for s in 0..(MAX_HINTS as u16 + 10) {
            h.record(0, s, Some(b"k"));
        }
        assert!(h.0.lock().len() <= MAX_HINTS);
        // The newest is always kept.
        assert_eq!(h.start(0, MAX_HINTS as u16 + 9), b"k");
    }
}
