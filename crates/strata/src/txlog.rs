//! The transaction log: commit records of cross-shard batches. Spec: `docs/format/shards.md`.
//!
//! ```text
//! file   := header record*
//! header := magic "STRATATX" (8) | version u32 LE (2) | crc32c(magic, version) u32 LE
//! record := committed_gsn u64 LE | watermark u64 LE | crc32c(bytes 0..16) u32 LE   (20 bytes)
//! ```
//! A record says "every GSN up to `committed_gsn` is committed". Values strictly increase.
//! The watermark is the offset through which the file was synced when the record was
//! written (every record is synced before the next is written, so it is the record's own
//! offset). A damaged record is an unsynced tail unless a valid record after it carries a
//! watermark above it (then synced bytes were damaged: corruption). Version-1 files (12-byte
//! records without a watermark) are still read by their rule: only the last record may be
//! torn or fail its checksum; a bad record followed by more bytes is corruption.
//!
//! GSNs are handed out by [`TxLog::assign`]; [`TxLog::commit`] marks a GSN ready and returns
//! once a record covering it is durable: group commit in GSN order, so commits are durable in
//! GSN order. An aborted GSN makes the log fail until reopen. The file is rewritten
//! (temporary file, sync, rename, directory sync) at every open and when it passes
//! [`ROTATE_BYTES`]. Protocol: `docs/design.md` §12.2.

use parking_lot::{Condvar, Mutex};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_engine::io::{Fs, WritableFile};
use strata_engine::{Error, Result};

const MAGIC: &[u8; 8] = b"STRATATX";
/// The format version written: records carry a sync watermark.
const VERSION: u32 = 2;
/// The first version (12-byte records, no watermark): read, never written.
const VERSION_NO_WATERMARK: u32 = 1;
const HEADER_LEN: usize = 16;
const RECORD_LEN: usize = 20;
const RECORD_LEN_V1: usize = 12;
/// Size past which the log is rewritten with only its last record.
pub const ROTATE_BYTES: u64 = 1 << 20;
/// Name of the file in the database root.
pub const FILE: &str = "TXLOG";

fn header(version: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    h
}

/// A version-2 record: `gsn`, written when the file was synced through `watermark`.
fn record(gsn: u64, watermark: u64) -> [u8; RECORD_LEN] {
    let mut r = [0u8; RECORD_LEN];
    r[..8].copy_from_slice(&gsn.to_le_bytes());
    r[8..16].copy_from_slice(&watermark.to_le_bytes());
    let crc = crc32c::crc32c(&r[..16]);
    r[16..].copy_from_slice(&crc.to_le_bytes());
    r
}

/// The (gsn, watermark) of the version-2 record at `off` if it is valid: its checksum
/// holds and its watermark lies at or below its own offset.
fn valid_record(data: &[u8], off: usize) -> Option<(u64, u64)> {
    let r = data.get(off..off + RECORD_LEN)?;
    let gsn = u64::from_le_bytes(r[..8].try_into().ok()?);
    let wm = u64::from_le_bytes(r[8..16].try_into().ok()?);
    let crc = u32::from_le_bytes(r[16..].try_into().ok()?);
    (crc32c::crc32c(&r[..16]) == crc && wm <= off as u64).then_some((gsn, wm))
}

/// What a walk over a transaction log found (see [`scan`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// Complete records whose checksum holds.
    pub records: u64,
    /// The last of them (0 for none): every GSN up to it is committed.
    pub committed: u64,
    /// Offset of a torn last record (partial, or failing its checksum), which recovery
    /// ignores: its commit was never acknowledged.
    pub torn_tail: Option<u64>,
}

/// Walks a transaction log, checking the header and every record's checksum and order.
/// A torn tail is reported in [`Scan::torn_tail`], not as an error; anything else wrong is
/// corruption.
pub fn scan(data: &[u8], file: &Path) -> Result<Scan> {
    if data.len() < HEADER_LEN {
        return Err(Error::corruption(
            file,
            0,
            "transaction log shorter than its header",
        ));
    }
    if data[..HEADER_LEN] == header(VERSION)[..] {
        scan_records(data, file)
    } else if data[..HEADER_LEN] == header(VERSION_NO_WATERMARK)[..] {
        scan_v1(data, file)
    } else {
        Err(Error::corruption(
            file,
            0,
            "bad transaction log header (magic, version or checksum)",
        ))
    }
}

/// Version 2: damage at `off` (a cut or bad record) is an unsynced tail unless a valid
/// record after it carries a watermark above `off`.
fn scan_records(data: &[u8], file: &Path) -> Result<Scan> {
    let mut s = Scan::default();
    let mut off = HEADER_LEN;
    while off < data.len() {
        let Some((gsn, _)) = valid_record(data, off) else {
            let later = (off + RECORD_LEN..data.len())
                .step_by(RECORD_LEN)
                .find_map(|at| valid_record(data, at).filter(|(_, wm)| *wm > off as u64));
            if let Some((_, wm)) = later {
                return Err(Error::corruption(
                    file,
                    off as u64,
                    format!(
                        "damaged commit record below a later record's sync watermark {wm} \
                         (expected intact records up to offset {wm})"
                    ),
                ));
            }
            s.torn_tail = Some(off as u64);
            return Ok(s);
        };
        check_order(&mut s, gsn, off, file)?;
        off += RECORD_LEN;
    }
    Ok(s)
}

fn check_order(s: &mut Scan, gsn: u64, off: usize, file: &Path) -> Result<()> {
    if gsn <= s.committed && s.committed != 0 {
        return Err(Error::corruption(
            file,
            off as u64,
            format!("commit record {gsn} does not follow {}", s.committed),
        ));
    }
    s.committed = gsn;
    s.records += 1;
    Ok(())
}

/// Version 1 (no watermark): only the last record may be torn or fail its checksum.
fn scan_v1(data: &[u8], file: &Path) -> Result<Scan> {
    let mut s = Scan::default();
    let mut off = HEADER_LEN;
    while off + RECORD_LEN_V1 <= data.len() {
        let r = &data[off..off + RECORD_LEN_V1];
        let gsn = u64::from_le_bytes(r[..8].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(r[8..].try_into().expect("4 bytes"));
        if crc32c::crc32c(&r[..8]) != crc {
            if off + RECORD_LEN_V1 == data.len() {
                s.torn_tail = Some(off as u64);
                return Ok(s);
            }
            return Err(Error::corruption(
                file,
                off as u64,
                "commit record checksum mismatch before the end of the log",
            ));
        }
        check_order(&mut s, gsn, off, file)?;
        off += RECORD_LEN_V1;
    }
    if off < data.len() {
        s.torn_tail = Some(off as u64);
    }
    Ok(s)
}

/// Parses a transaction log; returns the last committed GSN (0 for none).
pub fn parse(data: &[u8], file: &Path) -> Result<u64> {
    scan(data, file).map(|s| s.committed)
}

/// Reads the last committed GSN from `dir/TXLOG` (0 if the file does not exist).
pub fn recover(fs: &dyn Fs, dir: &Path) -> Result<u64> {
    let path = dir.join(FILE);
    if !fs.exists(&path)? {
        return Ok(0);
    }
    parse(&fs.read_all(&path)?, &path)
}

struct TxState {
    next_gsn: u64,
    /// Batches whose parts are all applied, waiting for their commit record.
    ready: BTreeSet<u64>,
    /// Every GSN up to this one is committed durably.
    durable: u64,
    /// A thread is appending and syncing (the file is taken out of `file`).
    writing: bool,
    failed: Option<Error>,
    file: Option<Box<dyn WritableFile>>,
}

/// The live transaction log (protocol: `docs/design.md` §12.2).
pub struct TxLog {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    st: Mutex<TxState>,
    cv: Condvar,
}

impl TxLog {
    /// Writes a fresh log whose only record is `committed` and opens it for appending. The next
    /// GSN handed out is `committed + 1`.
    pub fn create(fs: Arc<dyn Fs>, dir: &Path, committed: u64) -> Result<TxLog> {
        let file = Self::rewrite(&*fs, dir, committed)?;
        Ok(TxLog {
            fs,
            dir: dir.to_path_buf(),
            st: Mutex::new(TxState {
                next_gsn: committed + 1,
                ready: BTreeSet::new(),
                durable: committed,
                writing: false,
                failed: None,
                file: Some(file),
            }),
            cv: Condvar::new(),
        })
    }

    fn rewrite(fs: &dyn Fs, dir: &Path, committed: u64) -> Result<Box<dyn WritableFile>> {
        let tmp = dir.join("TXLOG.tmp");
        let mut f = fs.create(&tmp)?;
        f.append(&header(VERSION))?;
        f.append(&record(committed, HEADER_LEN as u64))?;
        f.sync()?;
        fs.rename(&tmp, &dir.join(FILE))?;
        fs.sync_dir(dir)?;
        Ok(f)
    }

    /// Hands out the next GSN.
    pub fn assign(&self) -> u64 {
        let mut st = self.st.lock();
        let g = st.next_gsn;
        st.next_gsn += 1;
        g
    }

    /// Every GSN up to this one is durably committed.
    pub fn committed(&self) -> u64 {
        self.st.lock().durable
    }

    /// Marks `gsn` ready and returns once its commit record is durable (group commit, GSN
    /// order). Fails if the log failed (an earlier abort or I/O error).
    pub fn commit(&self, gsn: u64) -> Result<()> {
        self.commit_many(&[gsn])
    }

    /// Marks every GSN of `gsns` ready and returns once a commit record covering them all is
    /// durable.
    pub fn commit_many(&self, gsns: &[u64]) -> Result<()> {
        let Some(&gsn) = gsns.iter().max() else {
            return Ok(());
        };
        let mut st = self.st.lock();
        st.ready.extend(gsns.iter().copied());
        loop {
            if st.durable >= gsn {
                return Ok(());
            }
            if let Some(e) = &st.failed {
                return Err(e.clone());
            }
            let next = st.durable + 1;
            if !st.writing && st.ready.contains(&next) {
                let mut hi = next;
                while st.ready.remove(&hi) {
                    hi += 1;
                }
                let hi = hi - 1;
                st.writing = true;
                let file = st.file.take().expect("log file present when nobody writes");
                drop(st);
                let r = self.append(file, hi);
                st = self.st.lock();
                st.writing = false;
                match r {
                    Ok(f) => {
                        st.file = Some(f);
                        st.durable = hi;
                    }
                    Err(e) => {
                        st.failed = Some(Error::Poisoned(format!(
                            "transaction log write failed: {e}"
                        )));
                    }
                }
                self.cv.notify_all();
                continue;
            }
            self.cv.wait(&mut st);
        }
    }

    /// Appends and syncs the record of `gsn`; returns the file to append to next.
    fn append(&self, mut file: Box<dyn WritableFile>, gsn: u64) -> Result<Box<dyn WritableFile>> {
        // Every byte before this record is synced: the rewrite synced the file, each append
        // is synced before the next, and a failed one fails the log for good.
        let watermark = file.size();
        file.append(&record(gsn, watermark))?;
        file.sync()?;
        if file.size() >= ROTATE_BYTES {
            return Self::rewrite(&*self.fs, &self.dir, gsn);
        }
        Ok(file)
    }

    /// `gsn` will never commit (one of its parts failed): no GSN after it can commit either.
    pub fn abort(&self, gsn: u64, err: &Error) {
        let mut st = self.st.lock();
        if st.failed.is_none() {
            st.failed = Some(Error::Poisoned(format!(
                "cross-shard batch {gsn} failed: {err}"
            )));
        }
        self.cv.notify_all();
    }

    /// Waits until `gsn` is durably committed, or the log failed.
    pub fn wait_committed(&self, gsn: u64) -> Result<()> {
        let mut st = self.st.lock();
        loop {
            if st.durable >= gsn {
                return Ok(());
            }
            if let Some(e) = &st.failed {
                return Err(e.clone());
            }
            self.cv.wait(&mut st);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_engine::io::MemFs;

    #[test]
    fn commits_in_order_and_recovers() {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        assert_eq!(recover(&*fs, dir).unwrap(), 0);
        let log = Arc::new(TxLog::create(fs.clone(), dir, 0).unwrap());
        let (a, b) = (log.assign(), log.assign());
        assert_eq!((a, b), (1, 2));
        // b is ready first but cannot commit before a.
        let l2 = log.clone();
        let t = std::thread::spawn(move || l2.commit(b));
        log.commit(a).unwrap();
        t.join().unwrap().unwrap();
        assert_eq!(log.committed(), 2);
        assert_eq!(recover(&*fs, dir).unwrap(), 2);
        let c = log.assign();
        log.abort(c, &Error::Closed);
        assert!(log.commit(c).is_err());
        assert!(log.wait_committed(c).is_err());
        log.wait_committed(2).unwrap();
    }

    #[test]
    fn commit_many_covers_every_gsn_with_one_record() {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let log = Arc::new(TxLog::create(fs.clone(), dir, 0).unwrap());
        let gs: Vec<u64> = (0..4).map(|_| log.assign()).collect();
        let size = fs.file_size(&dir.join(FILE)).unwrap();
        // 1 and 3 are ready; 2 is not: nothing can commit past 1 until it is.
        let l2 = log.clone();
        let ready = [gs[0], gs[2], gs[3]];
        let t = std::thread::spawn(move || l2.commit_many(&ready));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(log.committed(), gs[0]);
        log.commit(gs[1]).unwrap();
        t.join().unwrap().unwrap();
        assert_eq!(log.committed(), gs[3]);
        assert_eq!(recover(&*fs, dir).unwrap(), gs[3]);
        // At most two records: 1 alone, then 2..4 together.
        let grown = fs.file_size(&dir.join(FILE)).unwrap() - size;
        assert!(grown <= 2 * RECORD_LEN as u64, "{grown} bytes of records");
        log.commit_many(&[]).unwrap();
    }

    /// A version-2 log of `gsns`, each record written after the previous one was synced.
    fn log_of(gsns: &[u64]) -> Vec<u8> {
        let mut d = header(VERSION);
        for &g in gsns {
            let wm = d.len() as u64;
            d.extend_from_slice(&record(g, wm));
        }
        d
    }

    #[test]
    fn torn_tail_is_ignored_mid_log_corruption_is_not() {
        let p = Path::new("TXLOG");
        let d = log_of(&[3, 9]);
        assert_eq!(parse(&d, p).unwrap(), 9);
        assert_eq!(parse(&d[..d.len() - 5], p).unwrap(), 3);
        let mut torn = d.clone();
        let n = torn.len();
        torn[n - 2] ^= 1;
        assert_eq!(parse(&torn, p).unwrap(), 3);
        // Damage below the second record's watermark: that record was synced.
        for at in HEADER_LEN..HEADER_LEN + RECORD_LEN {
            let mut mid = d.clone();
            mid[at] ^= 1;
            let e = parse(&mid, p).unwrap_err();
            assert!(
                e.is_corruption() && e.to_string().contains("watermark"),
                "{e}"
            );
        }
        assert!(parse(&log_of(&[9, 3, 11]), p).is_err());
        assert!(parse(&d[..10], p).is_err());
        let full = scan(&d, p).unwrap();
        assert_eq!((full.records, full.committed, full.torn_tail), (2, 9, None));
        let cut = scan(&d[..d.len() - 5], p).unwrap();
        assert_eq!((cut.records, cut.committed), (1, 3));
        assert_eq!(cut.torn_tail, Some((HEADER_LEN + RECORD_LEN) as u64));
        assert_eq!(scan(&torn, p).unwrap().torn_tail, cut.torn_tail);
        // A damaged last record followed by bytes that hold no record written after a sync
        // covering it (stale bytes, a record with a low watermark): an unsynced tail.
        let mut stale = d.clone();
        stale[n - 2] ^= 1;
        stale.extend_from_slice(&record(12, (HEADER_LEN + RECORD_LEN) as u64));
        stale.extend_from_slice(&[0x5a; 7]);
        assert_eq!(parse(&stale, p).unwrap(), 3);
    }

    /// Files written before the watermark (version 1) read as before.
    #[test]
    fn version_1_logs_are_still_read() {
        let p = Path::new("TXLOG");
        let rec1 = |gsn: u64| {
            let mut r = gsn.to_le_bytes().to_vec();
            r.extend_from_slice(&crc32c::crc32c(&gsn.to_le_bytes()).to_le_bytes());
            r
        };
        let mut d = header(VERSION_NO_WATERMARK);
        d.extend(rec1(3));
        d.extend(rec1(9));
        assert_eq!(parse(&d, p).unwrap(), 9);
        assert_eq!(parse(&d[..d.len() - 5], p).unwrap(), 3);
        let mut mid = d.clone();
        mid[HEADER_LEN + 1] ^= 1;
        assert!(parse(&mid, p).unwrap_err().is_corruption());
        let mut torn = d.clone();
        let n = torn.len();
        torn[n - 2] ^= 1;
        assert_eq!(
            scan(&torn, p).unwrap().torn_tail,
            Some((HEADER_LEN + 12) as u64)
        );
    }

    #[test]
    fn rotation_keeps_the_last_record() {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let log = TxLog::create(fs.clone(), dir, 0).unwrap();
        let n = ROTATE_BYTES / RECORD_LEN as u64 + 10;
        for _ in 0..n {
            let g = log.assign();
            log.commit(g).unwrap();
        }
        assert_eq!(recover(&*fs, dir).unwrap(), n);
        assert!(fs.file_size(&dir.join(FILE)).unwrap() < ROTATE_BYTES);
    }
}
