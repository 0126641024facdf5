//! The master's history across restarts: the replication ids and the offset its data is
//! at, kept in `dir/repl-log/HISTORY` (format: `docs/format/repl-log.md`, "The history
//! file"; design §13.32), as Redis 7.0 keeps them in its RDB's aux fields.
//!
//! **The rule.** The file exists only while the data is exactly the log's stream up to the
//! file's offset: nothing is written to the data that is not in the log before it. It is
//! written at a clean shutdown (after the last command, with the log flushed and synced)
//! and by the log's upkeep once no write came for [`QUIET_AFTER`] (under the sequencer's
//! cut, with the log's tail written to its files). The first write after that removes it
//! *before* it writes ([`Quiet::busy`], called by `Sequencer::enter`), so a process killed
//! at any point leaves either no file or a file whose offset is the data's. A restart that
//! finds the file and a log ending exactly at its offset keeps the ids, the offset and the
//! log: replicas resume with a partial resync. Otherwise (no file: the process died while
//! writing; or a log cut short) the restarted master starts a new history, and its replicas
//! full-sync, which is never wrong.
//!
//! **Protocol between threads.** [`Quiet`] holds whether the file exists (an atomic the
//! command path reads, and a mutex for the file operations). Marking happens under the
//! sequencer's write guard (no command between its write and its append); un-marking under
//! a read guard, before the write. Appends that write no data (PING, `REPLCONF GETACK`) keep
//! the file and rewrite it with the new offset under the same mutex.

use parking_lot::Mutex;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The file's name in the log's directory.
pub const FILE: &str = "HISTORY";
/// The file's first bytes.
const MAGIC: &[u8; 8] = b"STRPHIST";
/// Format version. On-disk: bump on any change.
const VERSION: u32 = 1;
const ID_LEN: usize = 40;
/// magic, version, replid, replid2, second offset, offset, CRC32C.
const FILE_LEN: usize = 8 + 4 + ID_LEN + ID_LEN + 8 + 8 + 4;
/// The upkeep marks the history once no write came for this long.
pub const QUIET_AFTER: Duration = Duration::from_millis(500);

/// What a master's data is: stream `replid` up to `offset` (and `replid2` up to
/// `second_offset - 1`, as INFO shows them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    pub replid: String,
    pub replid2: String,
    /// Redis's `second_repl_offset`; -1: none.
    pub second_offset: i64,
    /// The log's end (`master_repl_offset`).
    pub offset: u64,
}

impl History {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(FILE_LEN);
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&VERSION.to_le_bytes());
        for id in [&self.replid, &self.replid2] {
            let mut b = id.as_bytes().to_vec();
            b.resize(ID_LEN, b'0');
            v.extend_from_slice(&b);
        }
        v.extend_from_slice(&self.second_offset.to_le_bytes());
        v.extend_from_slice(&self.offset.to_le_bytes());
        let crc = crc32c::crc32c(&v);
        v.extend_from_slice(&crc.to_le_bytes());
        v
    }

    /// The history a file holds; an error says what is wrong with it.
    pub fn decode(b: &[u8]) -> Result<History, String> {
        if b.len() != FILE_LEN {
            return Err(format!("{} bytes, not {FILE_LEN}", b.len()));
        }
        if &b[..8] != MAGIC {
            return Err("not a history file (magic)".into());
        }
        let version = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        if version != VERSION {
            return Err(format!(
                "format version {version}; this server reads {VERSION}"
            ));
        }
        let body = FILE_LEN - 4;
        let crc = u32::from_le_bytes([b[body], b[body + 1], b[body + 2], b[body + 3]]);
        if crc32c::crc32c(&b[..body]) != crc {
            return Err("checksum mismatch".into());
        }
        let id = |from: usize| -> Result<String, String> {
            let raw = &b[from..from + ID_LEN];
            if !raw.iter().all(u8::is_ascii_alphanumeric) {
                return Err("malformed replication id".into());
            }
            Ok(String::from_utf8_lossy(raw).into_owned())
        };
        let n = |from: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[from..from + 8]);
            a
        };
        let at = 12 + 2 * ID_LEN;
        Ok(History {
            replid: id(12)?,
            replid2: id(12 + ID_LEN)?,
            second_offset: i64::from_le_bytes(n(at)),
            offset: u64::from_le_bytes(n(at + 8)),
        })
    }
}

/// Writes the file (through a temporary and a rename; `sync`: both synced, and the
/// directory).
pub fn write(dir: &Path, h: &History, sync: bool) -> std::io::Result<()> {
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&h.encode())?;
    if sync {
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(FILE))?;
    if sync {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// The file in `dir`, if there is one; a file that does not decode is an error naming it.
pub fn read(dir: &Path) -> Result<Option<History>, String> {
    let path = dir.join(FILE);
    match std::fs::read(&path) {
        Ok(b) => History::decode(&b)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Removes the file (no error if it is not there).
pub fn remove(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Whether the history file exists (see the module documentation).
#[derive(Default)]
pub struct Quiet {
    /// Set while the file exists (read without the mutex on the command path).
    marked: AtomicBool,
    /// The log's directory while marked.
    file: Mutex<Option<PathBuf>>,
}

impl Quiet {
    pub fn is_marked(&self) -> bool {
        self.marked.load(Ordering::Acquire)
    }

    /// Before a write: removes the file if it exists. Called under a sequencer read guard.
    pub fn busy(&self) {
        if !self.is_marked() {
            return;
        }
        let mut f = self.file.lock();
        if let Some(dir) = f.take() {
            if let Err(e) = remove(&dir) {
                // The write goes on: a file left behind names an offset the data passes,
                // so the next start must not trust it. Say so loudly.
                eprintln!(
                    "strata-server: replication: removing {}/{FILE} failed ({e}); remove it \
                     before restarting, or replicas may miss writes",
                    dir.display()
                );
            }
        }
        self.marked.store(false, Ordering::Release);
    }

    /// Writes the file for `h` in `dir` and records it as marked. The caller holds the
    /// sequencer's write guard (or knows no command runs).
    pub fn mark(&self, dir: &Path, h: &History, sync: bool) -> std::io::Result<()> {
        let mut f = self.file.lock();
        write(dir, h, sync)?;
        *f = Some(dir.to_path_buf());
        self.marked.store(true, Ordering::Release);
        Ok(())
    }

    /// Runs `append` (an append that writes no data); if the file exists, `rewrite` gives
    /// the history after it, written in its place.
    pub fn control(&self, append: impl FnOnce(), rewrite: impl FnOnce() -> Option<History>) {
        let f = self.file.lock();
        append();
        if let Some(dir) = f.as_ref() {
            if let Some(h) = rewrite() {
                if let Err(e) = write(dir, &h, false) {
                    eprintln!("strata-server: replication: {}/{FILE}: {e}", dir.display());
                    drop(f);
                    self.busy();
                }
            }
        }
    }

    /// Forgets the file without touching it (this server follows a master: the file was
    /// removed by whoever called this).
    pub fn clear(&self) {
        *self.file.lock() = None;
        self.marked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h() -> History {
        History {
            replid: "0123456789abcdef0123456789abcdef01234567".into(),
            replid2: "0".repeat(40),
            second_offset: -1,
            offset: 123_456_789,
        }
    }

    #[test]
    fn round_trip_and_every_corruption_refused() {
        let good = h().encode();
        assert_eq!(History::decode(&good), Ok(h()));
        assert!(History::decode(&good[..good.len() - 1]).is_err());
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            assert!(History::decode(&bad).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn a_write_removes_the_mark_and_control_appends_keep_it() {
        let dir = tempfile::tempdir().unwrap();
        let q = Quiet::default();
        assert_eq!(read(dir.path()), Ok(None));
        q.mark(dir.path(), &h(), true).unwrap();
        assert!(q.is_marked());
        assert_eq!(read(dir.path()), Ok(Some(h())));
        let mut later = h();
        later.offset += 14;
        let mut appended = false;
        q.control(|| appended = true, || Some(later.clone()));
        assert!(appended);
        assert_eq!(read(dir.path()), Ok(Some(later)));
        q.busy();
        assert!(!q.is_marked());
        assert_eq!(read(dir.path()), Ok(None));
        // Unmarked: a control append writes no file.
        q.control(|| {}, || Some(h()));
        assert_eq!(read(dir.path()), Ok(None));
        std::fs::write(dir.path().join(FILE), b"junk").unwrap();
        assert!(read(dir.path()).unwrap_err().contains(FILE));
    }
}
