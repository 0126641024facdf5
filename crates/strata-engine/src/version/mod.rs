//! Versions: the set of live tables per level, the MANIFEST, compaction picking.
pub mod edit;
