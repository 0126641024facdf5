//! The whole dataset of a snapshot as an RDB file (version 9), for a replica's full sync.
//!
//! Placeholder: the lead replaces this body with the full writer when merging.
//! It writes the header, every database's string keys (with their expiry) and EOF with the
//! CRC64; other types are skipped.

use crate::keys::{db_range, user_key_of_meta};
use crate::store::{Meta, RType};
use strata::EngineIter;

/// What was written.
#[derive(Debug, Default, Clone, Copy)]
pub struct DatasetStats {
    pub keys: u64,
    pub bytes: u64,
}

/// Why the dataset could not be written.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("reading the snapshot: {0}")]
    Store(#[from] strata::Error),
    #[error("writing the RDB: {0}")]
    Io(#[from] std::io::Error),
}

/// The writer's output with the running CRC64.
struct Out<W> {
    w: W,
    crc: u64,
    bytes: u64,
}

impl<W: std::io::Write> Out<W> {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.crc = super::crc64::update(self.crc, b);
        self.bytes += b.len() as u64;
        self.w.write_all(b)
    }
}

/// Writes the whole dataset seen by `snap` as an RDB file (version 9) to `out`:
/// header, aux fields, every database with its keys, function libraries, EOF, CRC64.
pub fn write_dataset<W: std::io::Write>(
    snap: &strata::Snapshot<'_, strata::StrataEngine>,
    shared: &crate::server::Shared,
    out: W,
) -> Result<DatasetStats, DatasetError> {
    // Placeholder: the lead replaces this body with the full writer when merging.
    let mut o = Out {
        w: out,
        crc: 0,
        bytes: 0,
    };
    o.put(b"REDIS0009")?;
    let databases = shared.config.read().databases;
    let now = crate::store::now_ms();
    let mut keys = 0;
    for logical in 0..databases.min(255) as u8 {
        let physical = shared.store.dbs.physical(logical);
        let (lo, hi) = db_range(physical);
        let mut it = snap.iter_opt(&strata::IterOptions {
            lower_bound: Some(lo),
            upper_bound: Some(hi),
        })?;
        it.seek_to_first();
        let mut selected = false;
        while it.valid() {
            if let (Some(key), Some(meta)) = (user_key_of_meta(it.key()), Meta::decode(it.value()))
            {
                if meta.rtype == RType::String && !meta.expired_at(now) {
                    if !selected {
                        let mut b = vec![0xFE];
                        super::write::length(&mut b, u64::from(logical));
                        o.put(&b)?;
                        selected = true;
                    }
                    let mut b = Vec::new();
                    if meta.expire_ms != 0 {
                        b.push(0xFC);
                        b.extend_from_slice(&meta.expire_ms.to_le_bytes());
                    }
                    b.push(0);
                    super::write::string(&mut b, key);
                    super::write::string(&mut b, &meta.value);
                    o.put(&b)?;
                    keys += 1;
                }
            }
            it.next();
        }
        it.status()?;
    }
    o.put(&[0xFF])?;
    let crc = o.crc.to_le_bytes();
    o.w.write_all(&crc)?;
    o.w.flush()?;
    Ok(DatasetStats {
        keys,
        bytes: o.bytes + 8,
    })
}
