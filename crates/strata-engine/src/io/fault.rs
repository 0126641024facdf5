//! [`FaultFs`]: wraps another [`Fs`] and makes chosen operations fail.
//!
//! Two mechanisms:
//!
//! - **Rules** ([`FaultRule`]): "the n-th write whose path contains `MANIFEST` fails with
//!   ENOSPC", optionally persistent and/or with a seeded probability.
//! - **Crash point** ([`FaultFs::fail_after`]): the first `k` mutating-or-syncing operations
//!   succeed; from the next one on, every operation of any kind fails with EIO, as if the
//!   machine had died. Combined with [`super::MemFs::crash`] this enumerates every crash point
//!   of a workload.
//!
//! Files returned by the inner file system are wrapped so that their operations are counted
//! and faulted too. The writable wrapper forwards each `append` at once (it buffers nothing),
//! so the inner file system holds exactly the bytes whose appends succeeded (plus the first
//! half of a short write).
//!
//! Operation classes, as matched by [`FaultOp`] and counted by [`FaultFs::op_count`]:
//!
//! | operation                          | `FaultOp` | counted (mutating) |
//! |------------------------------------|-----------|--------------------|
//! | `create`                           | `Create`  | yes                |
//! | `append`, `flush` (writable file)  | `Write`   | yes                |
//! | `sync` (file), `sync_file`, `sync_dir` | `Sync` | yes                |
//! | `rename`                           | `Rename`  | yes                |
//! | `remove`                           | `Remove`  | yes                |
//! | `read_at` (random-access file)     | `Read`    | no                 |
//! | `open`                             | `Open`    | no                 |
//! | `list`, `exists`, `file_size`, `create_dir_all`, `lock` | only `Any` | no |
//!
//! `size`, `path` and `readahead` of wrapped files are never faulted nor counted. Wrapped
//! files expose no raw descriptor, so batched reads of a `FaultFs` never bypass the faults
//! through io_uring (they run on the thread-pool or sync backend).
//!
//! A read rule can be narrowed to a byte range of the file ([`FaultRule::read_range`]): it
//! then matches only reads that overlap the range, which lets a test fail exactly one block.
//! Injected errors are [`Error::Io`] with a raw OS error (5 = EIO, 28 = ENOSPC), the operation
//! name and the path (for `rename`, the source path).

use super::mem::splitmix64;
use super::*;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::io;

const EIO: i32 = 5;
const ENOSPC: i32 = 28;

/// Which operations a rule matches (see the module docs for the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    /// `read_at` of a file opened through this `FaultFs`.
    Read,
    /// `append` or `flush` of a file created through this `FaultFs`.
    Write,
    /// `sync` of a writable file, and `sync_dir`.
    Sync,
    Rename,
    Create,
    Remove,
    /// `open` for reading.
    Open,
    /// Every operation, including `list`, `exists`, `file_size`, `create_dir_all`, `lock`.
    Any,
}

/// What a matching operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Fails with EIO (raw OS error 5); nothing reaches the inner file system.
    Eio,
    /// Fails with ENOSPC (raw OS error 28); nothing reaches the inner file system.
    Enospc,
    /// For `append`: the first half (`len / 2` bytes) of the data is appended to the inner file,
    /// then the append fails with EIO. For any other operation: same as `Eio`.
    ShortWrite,
    /// For `read_at`: the first half of the buffer is read from the inner file, then the read
    /// fails as a read that hit the end of the file early (`UnexpectedEof`). For any other
    /// operation: same as `Eio`.
    ShortRead,
}

/// An injection rule. Build with [`FaultRule::new`] and the builder methods.
#[derive(Clone, Debug)]
pub struct FaultRule {
    /// Which operations the rule looks at.
    pub op: FaultOp,
    /// The rule fires on the `nth` matching operation, 1-based, counted from when the rule was
    /// added (0 is treated as 1). Persistent rules also fire on every later matching operation.
    pub nth: u64,
    /// What happens when it fires.
    pub kind: FaultKind,
    /// Only operations whose path contains this substring match (for `rename`: either path).
    pub path_contains: Option<String>,
    /// With `Some(p)`, each matching operation from the `nth` on fires with probability `p`,
    /// drawn from a generator seeded with `seed` (deterministic for a given operation sequence).
    pub probability: Option<f64>,
    /// Seed of the probability draws.
    pub seed: u64,
    /// Fire on every matching operation from the `nth` on, instead of once.
    pub persistent: bool,
    /// Reads only: match only reads overlapping the byte range `[start, end)` of the file.
    pub read_range: Option<(u64, u64)>,
}

impl FaultRule {
    /// A one-shot rule: the `nth` operation matching `op` fails with `kind`.
    pub fn new(op: FaultOp, nth: u64, kind: FaultKind) -> Self {
        FaultRule {
            op,
            nth,
            kind,
            path_contains: None,
            probability: None,
            seed: 0,
            persistent: false,
            read_range: None,
        }
    }

    /// Only match operations on paths containing `s`.
    pub fn path_contains(mut self, s: impl Into<String>) -> Self {
        self.path_contains = Some(s.into());
        self
    }

    /// Fire with probability `p` (per matching operation from the `nth` on), seeded.
    pub fn probability(mut self, p: f64, seed: u64) -> Self {
        self.probability = Some(p);
        self.seed = seed;
        self
    }

    /// Keep firing after the first time.
    pub fn persistent(mut self) -> Self {
        self.persistent = true;
        self
    }

    /// Only match reads that overlap bytes `[start, end)` of the file (other operations never
    /// match a rule with a range).
    pub fn read_range(mut self, start: u64, end: u64) -> Self {
        self.read_range = Some((start, end));
        self
    }
}

/// Internal operation, finer than [`FaultOp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Create,
    Open,
    Append,
    Flush,
    Sync,
    SyncDir,
    Rename,
    Remove,
    Read,
    List,
    Exists,
    FileSize,
    CreateDir,
    Lock,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Open => "open",
            Op::Append => "append",
            Op::Flush => "flush",
            Op::Sync => "sync",
            Op::SyncDir => "sync_dir",
            Op::Rename => "rename",
            Op::Remove => "remove",
            Op::Read => "read",
            Op::List => "list",
            Op::Exists => "exists",
            Op::FileSize => "file_size",
            Op::CreateDir => "create_dir_all",
            Op::Lock => "lock",
        }
    }

    /// Mutating-or-syncing operations: counted by `op_count` and by `fail_after`.
    fn counted(self) -> bool {
        matches!(
            self,
            Op::Create | Op::Append | Op::Flush | Op::Sync | Op::SyncDir | Op::Rename | Op::Remove
        )
    }

    fn class(self) -> Option<FaultOp> {
        match self {
            Op::Create => Some(FaultOp::Create),
            Op::Open => Some(FaultOp::Open),
            Op::Append | Op::Flush => Some(FaultOp::Write),
            Op::Sync | Op::SyncDir => Some(FaultOp::Sync),
            Op::Rename => Some(FaultOp::Rename),
            Op::Remove => Some(FaultOp::Remove),
            Op::Read => Some(FaultOp::Read),
            Op::List | Op::Exists | Op::FileSize | Op::CreateDir | Op::Lock => None,
        }
    }
}

struct ActiveRule {
    rule: FaultRule,
    /// Matching operations seen since the rule was added.
    seen: u64,
    /// Generator state for probability draws.
    rng: u64,
    /// A one-shot rule that fired.
    spent: bool,
}

impl ActiveRule {
    fn matches(&self, op: Op, paths: &[&Path], range: Option<(u64, u64)>) -> bool {
        let class_ok = self.rule.op == FaultOp::Any || op.class() == Some(self.rule.op);
        let range_ok = match (self.rule.read_range, range) {
            (None, _) => true,
            (Some((lo, hi)), Some((start, end))) => start < hi && lo < end,
            (Some(_), None) => false,
        };
        class_ok
            && range_ok
            && match &self.rule.path_contains {
                None => true,
                Some(s) => paths
                    .iter()
                    .any(|p| p.as_os_str().to_string_lossy().contains(s.as_str())),
            }
    }

    /// Counts a matching operation and says whether the rule fires on it. With `may_fire`
    /// false (an earlier rule already fired) it only counts.
    fn observe(&mut self, may_fire: bool) -> bool {
        self.seen += 1;
        if self.spent || !may_fire || self.seen < self.rule.nth.max(1) {
            return false;
        }
        if let Some(p) = self.rule.probability {
            let draw = (splitmix64(&mut self.rng) >> 11) as f64 / (1u64 << 53) as f64;
            if draw >= p {
                return false;
            }
        }
        if !self.rule.persistent {
            self.spent = true;
        }
        true
    }
}

#[derive(Default)]
struct State {
    rules: Vec<ActiveRule>,
    /// Counted operations attempted so far.
    ops: u64,
    /// `(ops when fail_after was called, k)`.
    crash_point: Option<(u64, u64)>,
    /// The crash point was reached: everything fails.
    dead: bool,
    injected: u64,
}

/// What to do with an operation.
enum Verdict {
    Pass,
    Fail(i32),
    /// Append (or read) the first half, then fail.
    Short,
}

struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn check(&self, op: Op, paths: &[&Path], range: Option<(u64, u64)>) -> Verdict {
        let mut st = self.state.lock();
        if st.dead {
            st.injected += 1;
            return Verdict::Fail(EIO);
        }
        if op.counted() {
            st.ops += 1;
            if let Some((base, k)) = st.crash_point {
                if st.ops - base > k {
                    st.dead = true;
                    st.injected += 1;
                    return Verdict::Fail(EIO);
                }
            }
        }
        let mut verdict = Verdict::Pass;
        for r in st.rules.iter_mut() {
            if r.matches(op, paths, range) && r.observe(matches!(verdict, Verdict::Pass)) {
                verdict = match r.rule.kind {
                    FaultKind::Eio => Verdict::Fail(EIO),
                    FaultKind::Enospc => Verdict::Fail(ENOSPC),
                    FaultKind::ShortWrite if op == Op::Append => Verdict::Short,
                    FaultKind::ShortRead if op == Op::Read => Verdict::Short,
                    FaultKind::ShortWrite | FaultKind::ShortRead => Verdict::Fail(EIO),
                };
            }
        }
        if !matches!(verdict, Verdict::Pass) {
            st.injected += 1;
        }
        verdict
    }

    /// `Ok` to go on, or the injected error. `Short` is only returned for appends and reads.
    /// `other` is the second path of a rename.
    fn gate(&self, op: Op, path: &Path, other: Option<&Path>) -> Result<bool> {
        self.gate_range(op, path, other, None)
    }

    /// [`Shared::gate`] for an operation on bytes `range` of the file (reads).
    fn gate_range(
        &self,
        op: Op,
        path: &Path,
        other: Option<&Path>,
        range: Option<(u64, u64)>,
    ) -> Result<bool> {
        let paths = [path, other.unwrap_or(path)];
        match self.check(op, &paths, range) {
            Verdict::Pass => Ok(false),
            Verdict::Short => Ok(true),
            Verdict::Fail(code) => Err(injected(op, path, code)),
        }
    }
}

fn injected(op: Op, path: &Path, code: i32) -> Error {
    Error::io(op.name(), path, io::Error::from_raw_os_error(code))
}

/// A file system that injects faults into another one. Cloning is cheap and shares the rules
/// and counters.
#[derive(Clone)]
pub struct FaultFs {
    inner: Arc<dyn Fs>,
    shared: Arc<Shared>,
}

impl FaultFs {
    /// Wraps `inner`, with no faults.
    pub fn new(inner: Arc<dyn Fs>) -> Self {
        FaultFs {
            inner,
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The wrapped file system.
    pub fn inner(&self) -> &Arc<dyn Fs> {
        &self.inner
    }

    /// Adds a rule; its operation count starts now. Rules are checked in the order added; the
    /// first that fires decides the fault (later ones still count the operation).
    pub fn add_rule(&self, rule: FaultRule) {
        let rng = rule.seed;
        self.shared.state.lock().rules.push(ActiveRule {
            rule,
            seen: 0,
            rng,
            spent: false,
        });
    }

    /// Crash-point mode: the next `k` counted (mutating or syncing) operations succeed; the
    /// one after fails with EIO and so does every later operation of any kind, until
    /// [`FaultFs::clear`]. Operations that are not counted succeed until that point.
    pub fn fail_after(&self, k: u64) {
        let mut st = self.shared.state.lock();
        st.crash_point = Some((st.ops, k));
        st.dead = false;
    }

    /// Counted (mutating or syncing) operations attempted since this `FaultFs` was made,
    /// including those a rule failed and the one that hit the crash point; operations attempted
    /// while dead are not counted. Run a workload without faults, read this, then replay it
    /// with `fail_after(k)` for every `k` in `0..count`.
    pub fn op_count(&self) -> u64 {
        self.shared.state.lock().ops
    }

    /// Operations that failed because of a rule or the crash point.
    pub fn injected_count(&self) -> u64 {
        self.shared.state.lock().injected
    }

    /// Whether the crash point was reached.
    pub fn is_dead(&self) -> bool {
        self.shared.state.lock().dead
    }

    /// Removes every rule and the crash point; a dead file system works again. Counters are
    /// kept.
    pub fn clear(&self) {
        let mut st = self.shared.state.lock();
        st.rules.clear();
        st.crash_point = None;
        st.dead = false;
    }
}

struct FaultWritableFile {
    inner: Box<dyn WritableFile>,
    shared: Arc<Shared>,
}

impl WritableFile for FaultWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.shared.gate(Op::Append, self.inner.path(), None)? {
            self.inner.append(&data[..data.len() / 2])?;
            return Err(injected(Op::Append, self.inner.path(), EIO));
        }
        self.inner.append(data)
    }

    fn flush(&mut self) -> Result<()> {
        self.shared.gate(Op::Flush, self.inner.path(), None)?;
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.shared.gate(Op::Sync, self.inner.path(), None)?;
        self.inner.sync()
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}

struct FaultRandomAccessFile {
    inner: Arc<dyn RandomAccessFile>,
    shared: Arc<Shared>,
}

impl RandomAccessFile for FaultRandomAccessFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let range = (offset, offset + buf.len() as u64);
        if self
            .shared
            .gate_range(Op::Read, self.inner.path(), None, Some(range))?
        {
            let half = buf.len() / 2;
            self.inner.read_at(offset, &mut buf[..half])?;
            let e = io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "short read: {half} of {} bytes at offset {offset} (injected)",
                    buf.len()
                ),
            );
            return Err(Error::io(Op::Read.name(), self.inner.path(), e));
        }
        self.inner.read_at(offset, buf)
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn readahead(&self, offset: u64, len: u64) {
        self.inner.readahead(offset, len)
    }
}

impl Fs for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.shared.gate(Op::Create, path, None)?;
        let inner = self.inner.create(path)?;
        Ok(Box::new(FaultWritableFile {
            inner,
            shared: self.shared.clone(),
        }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.shared.gate(Op::Open, path, None)?;
        let inner = self.inner.open(path)?;
        Ok(Arc::new(FaultRandomAccessFile {
            inner,
            shared: self.shared.clone(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.shared.gate(Op::Rename, from, Some(to))?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.shared.gate(Op::Remove, path, None)?;
        self.inner.remove(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.shared.gate(Op::List, dir, None)?;
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.shared.gate(Op::Exists, path, None)?;
        self.inner.exists(path)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.shared.gate(Op::CreateDir, dir, None)?;
        self.inner.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.shared.gate(Op::SyncDir, dir, None)?;
        self.inner.sync_dir(dir)
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        self.shared.gate(Op::Sync, path, None)?;
        self.inner.sync_file(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.shared.gate(Op::FileSize, path, None)?;
        self.inner.file_size(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.shared.gate(Op::Lock, path, None)?;
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemFs;

    fn setup() -> (MemFs, FaultFs, PathBuf) {
        let mem = MemFs::new();
        let ffs = FaultFs::new(Arc::new(mem.clone()));
        let dir = PathBuf::from("/db");
        ffs.create_dir_all(&dir).unwrap();
        (mem, ffs, dir)
    }

    #[test]
    fn nth_write_fails_with_enospc() {
        let (mem, ffs, dir) = setup();
        ffs.add_rule(FaultRule::new(FaultOp::Write, 3, FaultKind::Enospc));
        let p = dir.join("wal");
        let mut w = ffs.create(&p).unwrap();
        w.append(b"1").unwrap();
        w.append(b"2").unwrap();
        let e = w.append(b"3").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28));
        assert!(matches!(&e, Error::Io { op: "append", path, .. } if path == &p));
        // One-shot: the next write goes through.
        w.append(b"4").unwrap();
        assert_eq!(mem.read_all(&p).unwrap(), b"124");
        assert_eq!(ffs.injected_count(), 1);
    }

    #[test]
    fn persistent_rule_keeps_failing_and_clear_stops_it() {
        let (_mem, ffs, dir) = setup();
        ffs.add_rule(FaultRule::new(FaultOp::Sync, 2, FaultKind::Eio).persistent());
        let mut w = ffs.create(&dir.join("f")).unwrap();
        w.sync().unwrap();
        assert_eq!(w.sync().unwrap_err().raw_os_error(), Some(5));
        assert_eq!(ffs.sync_dir(&dir).unwrap_err().raw_os_error(), Some(5));
        ffs.clear();
        w.sync().unwrap();
        assert_eq!(ffs.injected_count(), 2);
    }

    #[test]
    fn short_write_leaves_half() {
        let (mem, ffs, dir) = setup();
        ffs.add_rule(FaultRule::new(FaultOp::Write, 2, FaultKind::ShortWrite));
        let p = dir.join("wal");
        let mut w = ffs.create(&p).unwrap();
        w.append(b"head").unwrap();
        let e = w.append(b"0123456789").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(5));
        assert_eq!(mem.read_all(&p).unwrap(), b"head01234");
    }

    #[test]
    fn path_filter_selects_files() {
        let (mem, ffs, dir) = setup();
        ffs.add_rule(
            FaultRule::new(FaultOp::Any, 1, FaultKind::Eio)
                .path_contains("MANIFEST")
                .persistent(),
        );
        let mut log = ffs.create(&dir.join("000003.log")).unwrap();
        log.append(b"ok").unwrap();
        log.sync().unwrap();
        let e = ffs.create(&dir.join("MANIFEST-000001")).err().unwrap();
        assert!(matches!(e, Error::Io { op: "create", .. }));
        // Rename matches on either path.
        assert!(ffs
            .rename(&dir.join("000003.log"), &dir.join("MANIFEST-000002"))
            .is_err());
        assert!(mem.exists(&dir.join("000003.log")).unwrap());
        assert_eq!(ffs.injected_count(), 2);
    }

    #[test]
    fn reads_and_opens_can_fail() {
        let (mem, ffs, dir) = setup();
        let p = dir.join("000005.sst");
        mem.write_all_synced(&p, b"table bytes").unwrap();
        ffs.add_rule(FaultRule::new(FaultOp::Read, 2, FaultKind::Eio));
        ffs.add_rule(FaultRule::new(FaultOp::Open, 2, FaultKind::Eio));
        let f = ffs.open(&p).unwrap();
        let mut buf = [0u8; 5];
        f.read_at(0, &mut buf).unwrap();
        assert_eq!(f.read_at(0, &mut buf).unwrap_err().raw_os_error(), Some(5));
        f.read_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"bytes");
        assert!(ffs.open(&p).is_err());
        // Reads and opens are not mutating operations.
        assert_eq!(ffs.op_count(), 0);
    }

    #[test]
    fn read_rules_can_target_a_byte_range_and_read_short() {
        let (mem, ffs, dir) = setup();
        let p = dir.join("000007.sst");
        let data: Vec<u8> = (0..100u8).collect();
        mem.write_all_synced(&p, &data).unwrap();
        ffs.add_rule(
            FaultRule::new(FaultOp::Read, 1, FaultKind::ShortRead)
                .read_range(40, 50)
                .persistent(),
        );
        let f = ffs.open(&p).unwrap();
        let mut buf = [0u8; 10];
        // Ranges that end at 40 or start at 50 do not overlap [40, 50).
        f.read_at(30, &mut buf).unwrap();
        f.read_at(50, &mut buf).unwrap();
        assert_eq!(buf[0], 50);
        for off in [35, 49] {
            let mut buf = [0u8; 10];
            let e = f.read_at(off, &mut buf).unwrap_err();
            match &e {
                Error::Io { op, source, .. } => {
                    assert_eq!((*op, source.kind()), ("read", io::ErrorKind::UnexpectedEof))
                }
                other => panic!("unexpected {other:?}"),
            }
            // The first half was read, as a short read would have.
            assert_eq!(buf[..5], data[off as usize..off as usize + 5]);
            assert_eq!(buf[5..], [0u8; 5]);
        }
        assert_eq!(ffs.injected_count(), 2);
        // A range rule never matches operations without a range.
        ffs.add_rule(FaultRule::new(FaultOp::Any, 1, FaultKind::Eio).read_range(0, 100));
        ffs.open(&p).unwrap();
        assert!(ffs.open(&p).unwrap().read_at(0, &mut buf).is_err());
    }

    #[test]
    fn probability_is_deterministic() {
        let run = |seed| {
            let (_mem, ffs, dir) = setup();
            ffs.add_rule(
                FaultRule::new(FaultOp::Write, 1, FaultKind::Eio)
                    .probability(0.3, seed)
                    .persistent(),
            );
            let mut w = ffs.create(&dir.join("f")).unwrap();
            (0..200)
                .map(|_| w.append(b"x").is_err())
                .collect::<Vec<bool>>()
        };
        let a = run(1);
        assert_eq!(a, run(1));
        let fails = a.iter().filter(|&&f| f).count();
        assert!((30..=90).contains(&fails), "{fails} failures of 200");
    }

    /// A small workload: create, write, sync, rename, sync_dir.
    fn workload(fs: &dyn Fs, dir: &Path) -> Result<()> {
        let tmp = dir.join("CURRENT.tmp");
        let mut w = fs.create(&tmp)?;
        w.append(b"MANIFEST-")?;
        w.append(b"000001\n")?;
        w.sync()?;
        drop(w);
        fs.rename(&tmp, &dir.join("CURRENT"))?;
        fs.sync_dir(dir)
    }

    #[test]
    fn fail_after_counts_exactly() {
        let (_mem, ffs, dir) = setup();
        workload(&ffs, &dir).unwrap();
        let count = ffs.op_count();
        // create, append, append, sync, rename, sync_dir
        assert_eq!(count, 6);
        for k in 0..=count {
            let (mem, ffs, dir) = setup();
            ffs.fail_after(k);
            let r = workload(&ffs, &dir);
            assert_eq!(r.is_ok(), k == count, "k={k}");
            if k < count {
                assert_eq!(r.unwrap_err().raw_os_error(), Some(5));
                assert!(ffs.is_dead());
                assert_eq!(ffs.op_count(), k + 1, "k={k}: stops at the first failure");
                // Dead: even reads and listings fail now.
                assert!(ffs.list(&dir).is_err());
                assert!(ffs.exists(&dir).is_err());
            }
            mem.crash(false);
            // Only the fully synced workload leaves CURRENT behind.
            assert_eq!(mem.exists(&dir.join("CURRENT")).unwrap(), k == count);
        }
    }

    #[test]
    fn fail_after_lets_exactly_k_appends_through() {
        let (mem, ffs, dir) = setup();
        let p = dir.join("wal");
        let mut w = ffs.create(&p).unwrap();
        ffs.fail_after(3);
        for b in b"abc" {
            w.append(&[*b]).unwrap();
        }
        assert!(w.append(b"d").is_err());
        assert!(w.sync().is_err());
        assert_eq!(mem.read_all(&p).unwrap(), b"abc");
        assert_eq!(ffs.injected_count(), 2);
        ffs.clear();
        w.append(b"e").unwrap();
        assert_eq!(mem.read_all(&p).unwrap(), b"abce");
    }
}
