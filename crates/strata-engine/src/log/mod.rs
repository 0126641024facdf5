//! STUB: record log used by the WAL and the MANIFEST (to be written).
