//! STUB: VersionEdit encoding (to be written).
