//! The `SHARDS` file: what a sharded database was created with (shard count, routing hash,
//! engine). Spec: `docs/format/shards.md`.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "STRSHARD"
//!      8     4  format version, u32 LE (1)
//!     12     4  shard count, u32 LE (1..=1024)
//!     16     4  routing id, u32 LE (1 = xxh3_64 mod count, 2 = slot ranges; routing.rs)
//!     20     1  engine name length n (1..=32)
//!     21     n  engine name, ASCII ("strata", "rocksdb")
//!   21+n     4  crc32c of bytes [0, 21+n), u32 LE
//! ```
//!
//! Written once, when the database is created, through a temporary file, a sync, a rename and a
//! sync of the directory: it is either absent or whole.

use crate::routing::Routing;
use std::path::{Path, PathBuf};
use strata_engine::io::Fs;
use strata_engine::{Error, Result};

const MAGIC: &[u8; 8] = b"STRSHARD";
const VERSION: u32 = 1;
/// Largest shard count accepted.
pub const MAX_SHARDS: usize = 1024;

/// Name of the file in the database root.
pub const FILE: &str = "SHARDS";

/// The persisted layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardMeta {
    pub shards: usize,
    pub routing: Routing,
    pub engine: String,
}

impl ShardMeta {
    pub fn new(shards: usize, routing: Routing, engine: &str) -> Self {
        ShardMeta {
            shards,
            routing,
            engine: engine.to_string(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&(self.shards as u32).to_le_bytes());
        b.extend_from_slice(&self.routing.id().to_le_bytes());
        b.push(self.engine.len() as u8);
        b.extend_from_slice(self.engine.as_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(data: &[u8], file: &Path) -> Result<ShardMeta> {
        let bad = |off: usize, r: &str| Error::corruption(file, off as u64, r.to_string());
        if data.len() < 25 {
            return Err(bad(0, "SHARDS file too short"));
        }
        if &data[0..8] != MAGIC {
            return Err(bad(0, "bad magic (not a Strata SHARDS file)"));
        }
        let n = data[20] as usize;
        if data.len() != 25 + n {
            return Err(bad(
                20,
                "SHARDS file length does not match its engine name length",
            ));
        }
        let stored = u32::from_le_bytes(data[21 + n..25 + n].try_into().expect("4 bytes"));
        if crc32c::crc32c(&data[..21 + n]) != stored {
            return Err(bad(21 + n, "SHARDS checksum mismatch"));
        }
        let u32_at = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().expect("4 bytes"));
        let version = u32_at(8);
        if version != VERSION {
            return Err(bad(
                8,
                &format!("unsupported SHARDS format version {version}"),
            ));
        }
        let shards = u32_at(12) as usize;
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(bad(12, &format!("impossible shard count {shards}")));
        }
        let id = u32_at(16);
        let Some(routing) = Routing::from_id(id) else {
            return Err(bad(16, &format!("unknown routing id {id}")));
        };
        let engine = std::str::from_utf8(&data[21..21 + n])
            .map_err(|_| bad(21, "engine name is not UTF-8"))?
            .to_string();
        Ok(ShardMeta {
            shards,
            routing,
            engine,
        })
    }

    /// Reads `dir/SHARDS`, or `None` if it does not exist.
    pub fn load(fs: &dyn Fs, dir: &Path) -> Result<Option<ShardMeta>> {
        let path = dir.join(FILE);
        if !fs.exists(&path)? {
            return Ok(None);
        }
        ShardMeta::decode(&fs.read_all(&path)?, &path).map(Some)
    }

    /// Writes `dir/SHARDS` durably (temporary file, sync, rename, directory sync).
    pub fn store(&self, fs: &dyn Fs, dir: &Path) -> Result<()> {
        let tmp = dir.join("SHARDS.tmp");
        fs.write_all_synced(&tmp, &self.encode())?;
        fs.rename(&tmp, &dir.join(FILE))?;
        fs.sync_dir(dir)
    }
}

/// Directory of shard `i` under the database root.
pub fn shard_dir(root: &Path, i: usize) -> PathBuf {
    root.join(format!("shard-{i:03}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let m = ShardMeta::new(8, Routing::Slot, "strata");
        let e = m.encode();
        assert_eq!(e[16], 2);
        assert_eq!(e.len(), 25 + 6);
        let p = Path::new("SHARDS");
        assert_eq!(ShardMeta::decode(&e, p).unwrap(), m);
        for i in 0..e.len() {
            let mut c = e.clone();
            c[i] ^= 0x40;
            assert!(ShardMeta::decode(&c, p).is_err(), "flip at {i} accepted");
        }
        assert!(ShardMeta::decode(&e[..e.len() - 1], p).is_err());
    }
}
