//! STUB: SSTables (to be written).
