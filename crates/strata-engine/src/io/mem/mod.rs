//! [`MemFs`]: an in-memory file system that can simulate a power loss.
//!
//! # Model
//!
//! - A file is an *inode*: its bytes and `synced_len`, the prefix made durable by
//!   [`WritableFile::sync`]. File data durability belongs to the inode, independent of the
//!   directory entries that name it (as on ext4).
//! - A directory maps names to inodes and has two views: the *live* view, changed by `create`,
//!   `rename`, `remove` (and `lock`, which may create its file), and the *durable* view, which
//!   [`Fs::sync_dir`] sets to a copy of the live view.
//! - Directories made by [`Fs::create_dir_all`] are never removed by the program. Their own
//!   entry in the parent is durable only after `sync_dir` of the parent, but a crash drops an
//!   unsynced directory only in a [`CrashMode`] that asks for it (the default keeps it).
//!   `""` (parent of relative names) and `"/"` always exist.
//! - `create` of an existing file truncates that inode in place, and the truncation is
//!   treated as durable at once (`synced_len` drops to 0): the worst case for a program that
//!   overwrites a file instead of writing a new one and renaming it.
//! - [`MemFs::crash`] (power loss): every directory's live view becomes its durable view;
//!   every inode still named by some directory loses the bytes after `synced_len` (see
//!   [`MemFs::crash`] for the torn-write variant, and [`MemFs::crash_with`] for unsynced
//!   appends that survive out of order and for new directories that vanish; the rules are
//!   in `crash.rs`); every lock is released; every handle opened
//!   before the crash (writable or readable) fails from then on with an I/O error, so that
//!   threads of the "dead" process cannot change the disk the next process recovers from.
//!
//! Paths are keys: `a/./b` and `a/b` are the same, but `..` is not resolved and symbolic links
//! do not exist.

use super::*;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashSet};
use std::io::{self, ErrorKind};
use std::path::Component;
use std::sync::atomic::{AtomicU64, Ordering};

mod crash;
pub use crash::{CrashMode, UnsyncedWrites};

/// One file's contents.
#[derive(Default)]
struct FileData {
    data: Vec<u8>,
    /// Bytes guaranteed to survive a crash.
    synced_len: usize,
    /// Offset and length of each append since the last sync, oldest first (see `crash.rs`).
    unsynced: Vec<(usize, usize)>,
}

type Inode = Arc<Mutex<FileData>>;

#[derive(Clone)]
struct Dir {
    live: BTreeMap<String, Inode>,
    durable: BTreeMap<String, Inode>,
    /// Whether this directory's own name in its parent is durable (parent synced since it
    /// was created, or it survived a crash).
    entry_durable: bool,
}

impl Dir {
    fn new(entry_durable: bool) -> Self {
        Dir {
            live: BTreeMap::new(),
            durable: BTreeMap::new(),
            entry_durable,
        }
    }
}

struct State {
    /// Every directory, by normalized path.
    dirs: BTreeMap<PathBuf, Dir>,
    /// Held locks: path → id of the `MemFileLock` holding it.
    locks: BTreeMap<PathBuf, u64>,
    next_lock_id: u64,
}

struct Shared {
    state: Mutex<State>,
    /// Number of crashes so far; a handle opened in an earlier epoch is dead.
    epoch: AtomicU64,
    /// Seed of the torn-write length choice.
    seed: u64,
}

/// In-memory file system with crash simulation. Cloning is cheap and shares the files, so a
/// test can hand `Arc::new(fs.clone())` to the engine as an `Arc<dyn Fs>` and keep `fs` to call
/// [`MemFs::crash`].
#[derive(Clone)]
pub struct MemFs {
    shared: Arc<Shared>,
}

impl Default for MemFs {
    fn default() -> Self {
        Self::new()
    }
}

/// One step of the SplitMix64 generator: a good 64-bit mix for deterministic pseudo-random
/// choices (torn-write lengths here, fault probabilities in `FaultFs`).
pub(super) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn normalize(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

fn not_found(op: &'static str, path: &Path, what: &str) -> Error {
    Error::io(
        op,
        path,
        io::Error::new(ErrorKind::NotFound, what.to_string()),
    )
}

/// Splits a file path into its (normalized) directory and its name.
fn split(op: &'static str, path: &Path) -> Result<(PathBuf, String)> {
    let norm = normalize(path);
    let name = match norm.file_name().and_then(|n| n.to_str()) {
        Some(n) => n.to_string(),
        None => {
            return Err(Error::io(
                op,
                path,
                io::Error::new(ErrorKind::InvalidInput, "not a UTF-8 file name"),
            ))
        }
    };
    let parent = norm.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok((parent, name))
}

impl State {
    fn dir(&self, op: &'static str, dir: &Path, path: &Path) -> Result<&Dir> {
        self.dirs
            .get(dir)
            .ok_or_else(|| not_found(op, path, "no such directory"))
    }

    fn dir_mut(&mut self, op: &'static str, dir: &Path, path: &Path) -> Result<&mut Dir> {
        self.dirs
            .get_mut(dir)
            .ok_or_else(|| not_found(op, path, "no such directory"))
    }

    /// The live inode at `path`.
    fn file(&self, op: &'static str, path: &Path) -> Result<Inode> {
        let (dir, name) = split(op, path)?;
        self.dir(op, &dir, path)?
            .live
            .get(&name)
            .cloned()
            .ok_or_else(|| not_found(op, path, "no such file"))
    }
}

fn dead_handle(op: &'static str, path: &Path) -> Error {
    Error::io(
        op,
        path,
        io::Error::other("file handle was opened before a simulated crash (MemFs::crash)"),
    )
}

impl MemFs {
    /// An empty file system; torn writes use seed 0.
    pub fn new() -> Self {
        Self::with_seed(0)
    }

    /// An empty file system whose torn-write lengths derive from `seed`.
    pub fn with_seed(seed: u64) -> Self {
        let mut dirs = BTreeMap::new();
        dirs.insert(PathBuf::new(), Dir::new(true));
        dirs.insert(PathBuf::from("/"), Dir::new(true));
        MemFs {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    dirs,
                    locks: BTreeMap::new(),
                    next_lock_id: 0,
                }),
                epoch: AtomicU64::new(0),
                seed,
            }),
        }
    }

    /// Simulates a power loss followed by a reboot:
    /// `crash_with(CrashMode::tear_last(tear_last_write))`.
    ///
    /// - Every directory's live view becomes its durable view (creates, renames and removes
    ///   not followed by `sync_dir` of their directory are undone).
    /// - Every file named by some directory afterwards is cut to its synced length.
    /// - With `tear_last_write`, a file whose unsynced tail ends with an append of `n >= 2`
    ///   bytes at offset `s` is instead cut to `s + k`: the unsynced appends before the last one
    ///   survive whole and the last one keeps a strict, non-empty prefix of
    ///   `k = 1 + h % (n - 1)` bytes, where `h` is a SplitMix64 hash of the seed, the crash
    ///   number and the file's path. A last append of 1 byte is dropped whole. The result is a
    ///   deterministic function of the seed and the operations.
    /// - Every lock is released, and every handle opened before the crash fails with an I/O
    ///   error from now on (reads included).
    pub fn crash(&self, tear_last_write: bool) {
        self.crash_with(CrashMode::tear_last(tear_last_write));
    }

    /// Simulates a power loss in the given mode (see [`CrashMode`]). As [`MemFs::crash`], but
    /// unsynced appends follow `mode.unsynced_writes`, and with
    /// `mode.new_dirs_need_parent_sync` every directory whose entry is not durable vanishes
    /// first, with everything below it. Every choice derives from the seed, the crash number
    /// and the file's path.
    pub fn crash_with(&self, mode: CrashMode) {
        let mut state = self.shared.state.lock();
        // Kill old handles first: a writer checks the epoch while holding its inode's lock, so
        // an append either lands before this crash truncates the inode or fails.
        let epoch = self.shared.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        state.locks.clear();
        if mode.new_dirs_need_parent_sync {
            let lost: Vec<PathBuf> = state
                .dirs
                .iter()
                .filter(|(_, d)| !d.entry_durable)
                .map(|(p, _)| p.clone())
                .collect();
            state
                .dirs
                .retain(|p, _| !lost.iter().any(|l| p.starts_with(l)));
        }
        let mut seen: HashSet<*const Mutex<FileData>> = HashSet::new();
        for (dir_path, dir) in state.dirs.iter_mut() {
            // What survived a crash is on the disk.
            dir.entry_durable = true;
            dir.live = dir.durable.clone();
            for (name, inode) in &dir.durable {
                if !seen.insert(Arc::as_ptr(inode)) {
                    continue; // Named twice (e.g. by a half-durable rename); cut once.
                }
                let mut h = self.shared.seed ^ epoch.wrapping_mul(0xA24B_AED4_963E_E407);
                for b in dir_path.join(name).as_os_str().as_encoded_bytes() {
                    let mut s = h ^ u64::from(*b);
                    h = splitmix64(&mut s);
                }
                crash::crash_file(&mut inode.lock(), mode.unsynced_writes, h);
            }
        }
    }

    /// Every file in the live view with its size, sorted by path (for debugging tests).
    pub fn dump(&self) -> Vec<(PathBuf, u64)> {
        let state = self.shared.state.lock();
        let mut out = Vec::new();
        for (dir_path, dir) in &state.dirs {
            for (name, inode) in &dir.live {
                out.push((dir_path.join(name), inode.lock().data.len() as u64));
            }
        }
        out.sort();
        out
    }

    /// XORs the byte at `offset` of the file at `path` with `xor_mask`. The change is durable:
    /// it models bad bytes on the medium, so it survives [`MemFs::crash`] if the byte was synced.
    pub fn corrupt_byte(&self, path: &Path, offset: u64, xor_mask: u8) -> Result<()> {
        let inode = self.shared.state.lock().file("corrupt_byte", path)?;
        let mut f = inode.lock();
        let len = f.data.len();
        match f.data.get_mut(offset as usize) {
            Some(b) => {
                *b ^= xor_mask;
                Ok(())
            }
            None => Err(Error::io(
                "corrupt_byte",
                path,
                io::Error::new(
                    ErrorKind::InvalidInput,
                    format!("offset {offset} is past the end of the file ({len} bytes)"),
                ),
            )),
        }
    }

    /// Cuts the file at `path` to `len` bytes, durably (synced length included). `len` larger
    /// than the file is an error.
    pub fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let inode = self.shared.state.lock().file("truncate", path)?;
        let mut f = inode.lock();
        let len = len as usize;
        if len > f.data.len() {
            return Err(Error::io(
                "truncate",
                path,
                io::Error::new(
                    ErrorKind::InvalidInput,
                    format!("cannot grow a file of {} bytes to {len}", f.data.len()),
                ),
            ));
        }
        f.data.truncate(len);
        f.synced_len = f.synced_len.min(len);
        crash::truncate_appends(&mut f, len);
        Ok(())
    }

    fn epoch(&self) -> u64 {
        self.shared.epoch.load(Ordering::SeqCst)
    }
}

/// A writable handle on an inode.
struct MemWritableFile {
    shared: Arc<Shared>,
    epoch: u64,
    inode: Inode,
    path: PathBuf,
    size: u64,
}

impl MemWritableFile {
    fn alive(&self) -> bool {
        self.shared.epoch.load(Ordering::SeqCst) == self.epoch
    }
}

impl WritableFile for MemWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut f = self.inode.lock();
        if !self.alive() {
            return Err(dead_handle("append", &self.path));
        }
        let start = f.data.len();
        f.data.extend_from_slice(data);
        crash::note_append(&mut f, start, data.len());
        self.size += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let _f = self.inode.lock();
        if !self.alive() {
            return Err(dead_handle("flush", &self.path));
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let mut f = self.inode.lock();
        if !self.alive() {
            return Err(dead_handle("sync", &self.path));
        }
        f.synced_len = f.data.len();
        f.unsynced.clear();
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// A read handle on an inode. Reads see the inode's current bytes (like a real open file);
/// `size` is the size at open.
struct MemRandomAccessFile {
    shared: Arc<Shared>,
    epoch: u64,
    inode: Inode,
    path: PathBuf,
    size: u64,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let f = self.inode.lock();
        if self.shared.epoch.load(Ordering::SeqCst) != self.epoch {
            return Err(dead_handle("read", &self.path));
        }
        let end = offset.checked_add(buf.len() as u64);
        match end {
            Some(end) if end <= f.data.len() as u64 => {
                buf.copy_from_slice(&f.data[offset as usize..end as usize]);
                Ok(())
            }
            _ => Err(Error::io(
                "read",
                &self.path,
                io::Error::new(
                    ErrorKind::UnexpectedEof,
                    format!(
                        "read of {} bytes at offset {offset} goes past the end of the file \
                         ({} bytes)",
                        buf.len(),
                        f.data.len()
                    ),
                ),
            )),
        }
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

struct MemFileLock {
    shared: Arc<Shared>,
    path: PathBuf,
    id: u64,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        // After a crash the path may be locked again by a new holder: leave that one alone.
        if state.locks.get(&self.path) == Some(&self.id) {
            state.locks.remove(&self.path);
        }
    }
}

impl Fs for MemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let (dir_path, name) = split("create", path)?;
        let mut state = self.shared.state.lock();
        if state.dirs.contains_key(&normalize(path)) {
            return Err(Error::io(
                "create",
                path,
                io::Error::new(ErrorKind::AlreadyExists, "is a directory"),
            ));
        }
        let dir = state.dir_mut("create", &dir_path, path)?;
        let inode = match dir.live.get(&name) {
            Some(inode) => {
                // O_TRUNC on the existing inode; see the module docs for why it is durable.
                let mut f = inode.lock();
                f.data.clear();
                f.synced_len = 0;
                f.unsynced.clear();
                drop(f);
                inode.clone()
            }
            None => {
                let inode = Inode::default();
                dir.live.insert(name, inode.clone());
                inode
            }
        };
        Ok(Box::new(MemWritableFile {
            shared: self.shared.clone(),
            epoch: self.epoch(),
            inode,
            path: path.to_path_buf(),
            size: 0,
        }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let inode = self.shared.state.lock().file("open", path)?;
        let size = inode.lock().data.len() as u64;
        Ok(Arc::new(MemRandomAccessFile {
            shared: self.shared.clone(),
            epoch: self.epoch(),
            inode,
            path: path.to_path_buf(),
            size,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (from_dir, from_name) = split("rename", from)?;
        let (to_dir, to_name) = split("rename", to)?;
        let mut state = self.shared.state.lock();
        if state.dirs.contains_key(&normalize(to)) {
            return Err(Error::io(
                "rename",
                to,
                io::Error::new(ErrorKind::AlreadyExists, "target is a directory"),
            ));
        }
        // Check the target directory before touching the source.
        state.dir("rename", &to_dir, to)?;
        let inode = state
            .dir_mut("rename", &from_dir, from)?
            .live
            .remove(&from_name)
            .ok_or_else(|| not_found("rename", from, "no such file"))?;
        state
            .dir_mut("rename", &to_dir, to)?
            .live
            .insert(to_name, inode);
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let (dir, name) = split("remove", path)?;
        let mut state = self.shared.state.lock();
        state
            .dir_mut("remove", &dir, path)?
            .live
            .remove(&name)
            .map(|_| ())
            .ok_or_else(|| not_found("remove", path, "no such file"))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let dir = normalize(dir);
        let state = self.shared.state.lock();
        let d = state.dir("list", &dir, &dir)?;
        let mut names: Vec<String> = d.live.keys().cloned().collect();
        for sub in state.dirs.keys() {
            if sub != &dir && sub.parent() == Some(dir.as_path()) {
                if let Some(n) = sub.file_name().and_then(|n| n.to_str()) {
                    names.push(n.to_string());
                }
            }
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let norm = normalize(path);
        let state = self.shared.state.lock();
        if state.dirs.contains_key(&norm) {
            return Ok(true);
        }
        let (dir, name) = split("exists", path)?;
        Ok(state
            .dirs
            .get(&dir)
            .is_some_and(|d| d.live.contains_key(&name)))
    }

    /// Creates `dir` and its parents, durably at once (see the module docs).
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let norm = normalize(dir);
        let mut state = self.shared.state.lock();
        let mut todo = Vec::new();
        let mut cur = Some(norm.as_path());
        while let Some(p) = cur {
            if state.dirs.contains_key(p) {
                break;
            }
            todo.push(p.to_path_buf());
            cur = p.parent();
        }
        for p in todo.into_iter().rev() {
            let (parent, name) = split("create_dir_all", &p)?;
            if state
                .dirs
                .get(&parent)
                .is_some_and(|d| d.live.contains_key(&name))
            {
                return Err(Error::io(
                    "create_dir_all",
                    dir,
                    io::Error::new(
                        ErrorKind::AlreadyExists,
                        format!("{} is a file", p.display()),
                    ),
                ));
            }
            state.dirs.insert(p, Dir::new(false));
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let norm = normalize(dir);
        let mut state = self.shared.state.lock();
        let d = state.dir_mut("sync_dir", &norm, dir)?;
        d.durable = d.live.clone();
        for (p, sub) in state.dirs.iter_mut() {
            if p != &norm && p.parent() == Some(norm.as_path()) {
                sub.entry_durable = true;
            }
        }
        Ok(())
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        let inode = self.shared.state.lock().file("sync", path)?;
        let mut f = inode.lock();
        f.synced_len = f.data.len();
        f.unsynced.clear();
        Ok(())
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let inode = self.shared.state.lock().file("file_size", path)?;
        let len = inode.lock().data.len() as u64;
        Ok(len)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let norm = normalize(path);
        let (dir, name) = split("lock", path)?;
        let mut state = self.shared.state.lock();
        if state.locks.contains_key(&norm) {
            return Err(Error::Locked(path.to_path_buf()));
        }
        state
            .dir_mut("lock", &dir, path)?
            .live
            .entry(name)
            .or_default();
        let id = state.next_lock_id;
        state.next_lock_id += 1;
        state.locks.insert(norm.clone(), id);
        Ok(Box::new(MemFileLock {
            shared: self.shared.clone(),
            path: norm,
            id,
        }))
    }
}

#[cfg(test)]
mod tests;
