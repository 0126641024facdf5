//! STUB: block cache (to be written with the SST module).
