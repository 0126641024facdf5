//! What a simulated power loss keeps of the writes that were not made durable: [`CrashMode`]
//! and the per-file rule that applies it.
//!
//! A real disk writes dirty page-cache pages back in any order, so after a power loss an
//! unsynced file can hold a later write while an earlier one is missing: the missing range
//! reads as zeros (a hole in the extended file) or as stale garbage (a block allocated but
//! never written). A new directory is itself a name in its parent, durable only once the
//! parent is synced. The modes here let a test choose how hostile the crash is; the default
//! is the gentlest (unsynced bytes vanish from the end of each file, directories stay).

use super::{splitmix64, FileData};

/// How [`super::MemFs::crash_with`] treats what was not made durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrashMode {
    /// What happens to each file's bytes appended since its last sync.
    pub unsynced_writes: UnsyncedWrites,
    /// Whether a directory made by `create_dir_all` vanishes (with everything in it) unless
    /// its parent was synced with `sync_dir` after it was created. Default `false`: new
    /// directories are durable at once.
    pub new_dirs_need_parent_sync: bool,
}

/// What a crash keeps of the appends made to a file since its last sync.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnsyncedWrites {
    /// All are lost: the file is cut to its synced length.
    #[default]
    Lost,
    /// The appends before the last one survive whole; the last one keeps a strict, non-empty
    /// prefix (a last append of one byte is dropped).
    TearLast,
    /// Each append independently survives, is lost, or is torn to a prefix (a seeded choice).
    /// The file is as long as the furthest surviving byte; lost ranges below that read as
    /// zeros or as garbage.
    Scattered,
}

impl CrashMode {
    /// `Lost`, or `TearLast` when `tear` (what [`super::MemFs::crash`] does).
    pub fn tear_last(tear: bool) -> Self {
        CrashMode {
            unsynced_writes: if tear {
                UnsyncedWrites::TearLast
            } else {
                UnsyncedWrites::Lost
            },
            new_dirs_need_parent_sync: false,
        }
    }

    /// The most hostile mode: scattered unsynced writes, and new directories need their
    /// parent synced.
    pub fn adversarial() -> Self {
        CrashMode {
            unsynced_writes: UnsyncedWrites::Scattered,
            new_dirs_need_parent_sync: true,
        }
    }
}

/// Appends tracked per file before neighbours are merged (bounds the memory of a file that is
/// appended to many times and never synced; merging only coarsens the crash choices).
const MAX_TRACKED_APPENDS: usize = 1024;

/// Records an append of `len` bytes at `start` since the last sync.
pub(super) fn note_append(f: &mut FileData, start: usize, len: usize) {
    if len == 0 {
        return;
    }
    if f.unsynced.len() >= MAX_TRACKED_APPENDS {
        // Appends are contiguous, so each pair merges into one range.
        f.unsynced = f
            .unsynced
            .chunks(2)
            .map(|c| match c {
                [a, b] => (a.0, b.0 + b.1 - a.0),
                [a] => *a,
                _ => unreachable!("chunks(2) yields one or two items"),
            })
            .collect();
    }
    f.unsynced.push((start, len));
}

/// Cuts the tracked appends of a file that was truncated to `len` bytes.
pub(super) fn truncate_appends(f: &mut FileData, len: usize) {
    f.unsynced.retain(|&(start, _)| start < len);
    for a in &mut f.unsynced {
        a.1 = a.1.min(len - a.0);
    }
}

/// Applies a crash to one file: afterwards it holds what survived, all of it synced. `h` is a
/// seeded hash, distinct per file and per crash, that makes every choice.
pub(super) fn crash_file(f: &mut FileData, mode: UnsyncedWrites, mut h: u64) {
    let synced = f.synced_len.min(f.data.len());
    let appends: Vec<(usize, usize)> = f
        .unsynced
        .iter()
        .filter_map(|&(s, n)| {
            let s = s.max(synced);
            let e = (s + n).min(f.data.len());
            (e > s).then_some((s, e - s))
        })
        .collect();
    let keep = match mode {
        UnsyncedWrites::Lost => synced,
        UnsyncedWrites::TearLast => match appends.last() {
            Some(&(start, len)) if len >= 2 => {
                start + 1 + (splitmix64(&mut h) % (len as u64 - 1)) as usize
            }
            // A last append of one byte cannot be torn: nothing unsynced survives.
            _ => synced,
        },
        UnsyncedWrites::Scattered => {
            scatter(f, synced, &appends, h);
            return;
        }
    };
    f.data.truncate(keep.max(synced));
    f.synced_len = f.data.len();
    f.unsynced.clear();
}

/// `UnsyncedWrites::Scattered` on one file.
fn scatter(f: &mut FileData, synced: usize, appends: &[(usize, usize)], mut h: u64) {
    // For each append: how many of its bytes survive (0 = lost) and whether a lost rest
    // reads as garbage rather than zeros.
    let fates: Vec<(usize, bool)> = appends
        .iter()
        .map(|&(_, len)| {
            let r = splitmix64(&mut h);
            let kept = match r % 3 {
                0 => len,
                1 => 0,
                _ => ((r >> 8) % len as u64) as usize,
            };
            (kept, (r >> 40).is_multiple_of(4))
        })
        .collect();
    let end = appends
        .iter()
        .zip(&fates)
        .filter(|(_, (kept, _))| *kept > 0)
        .map(|((start, _), (kept, _))| start + kept)
        .max()
        .unwrap_or(synced)
        .max(synced);
    for (&(start, len), &(kept, garbage)) in appends.iter().zip(&fates) {
        let lo = start + kept;
        let hi = (start + len).min(end);
        for b in &mut f.data[lo..hi.max(lo)] {
            *b = if garbage { splitmix64(&mut h) as u8 } else { 0 };
        }
    }
    f.data.truncate(end);
    f.synced_len = end;
    f.unsynced.clear();
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    fn scattered() -> CrashMode {
        CrashMode {
            unsynced_writes: UnsyncedWrites::Scattered,
            new_dirs_need_parent_sync: false,
        }
    }

    /// Eight unsynced appends of 16 bytes each, append `i` filled with byte `i + 1`, after a
    /// synced prefix; returns the file after a scattered crash.
    fn scattered_file(seed: u64) -> Vec<u8> {
        let mem = MemFs::with_seed(seed);
        let p = Path::new("/f");
        let mut w = mem.create(p).unwrap();
        mem.sync_dir(Path::new("/")).unwrap();
        w.append(b"synced").unwrap();
        w.sync().unwrap();
        for i in 0..8u8 {
            w.append(&[i + 1; 16]).unwrap();
        }
        mem.crash_with(scattered());
        mem.read_all(p).unwrap()
    }

    #[test]
    fn scattered_crash_loses_earlier_writes_and_keeps_later_ones() {
        let (mut holes, mut zeros, mut garbage, mut torn, mut whole) = (0, 0, 0, 0, 0);
        for seed in 0..200u64 {
            let got = scattered_file(seed);
            assert_eq!(&got[..6], b"synced", "seed {seed}: synced bytes changed");
            assert!(got.len() <= 6 + 8 * 16, "seed {seed}: the file grew");
            // Each append's range: a prefix of its own bytes, then filler.
            let mut lost_before_kept = false;
            let mut lost_seen = false;
            for (i, chunk) in got[6..].chunks(16).enumerate() {
                let own = chunk.iter().take_while(|&&b| b == i as u8 + 1).count();
                let rest = &chunk[own..];
                if own == 16 {
                    lost_before_kept |= lost_seen;
                } else {
                    lost_seen = true;
                    if own > 0 {
                        torn += 1;
                    }
                    if !rest.is_empty() && rest.iter().all(|&b| b == 0) {
                        zeros += 1;
                    } else if !rest.is_empty() {
                        garbage += 1;
                    }
                }
            }
            holes += lost_before_kept as usize;
            whole += (got.len() == 6 + 8 * 16 && lost_seen) as usize;
        }
        assert!(holes > 20, "a lost write below a surviving one: {holes}");
        assert!(zeros > 20, "holes that read as zeros: {zeros}");
        assert!(garbage > 5, "holes that read as garbage: {garbage}");
        assert!(torn > 20, "torn appends: {torn}");
        assert!(whole > 5, "full length with a hole inside: {whole}");
        // Deterministic: the same seed and operations give the same file.
        assert_eq!(scattered_file(9), scattered_file(9));
        assert_ne!(scattered_file(9), scattered_file(10));
    }

    #[test]
    fn scattered_crash_never_touches_synced_bytes() {
        for seed in 0..50u64 {
            let mem = MemFs::with_seed(seed);
            let p = Path::new("/f");
            let mut w = mem.create(p).unwrap();
            mem.sync_dir(Path::new("/")).unwrap();
            for i in 0..4u8 {
                w.append(&[b'a' + i; 10]).unwrap();
            }
            w.sync().unwrap();
            mem.crash_with(scattered());
            assert_eq!(mem.file_size(p).unwrap(), 40, "seed {seed}");
            // A second crash after the first changes nothing.
            let before = mem.read_all(p).unwrap();
            mem.crash_with(scattered());
            assert_eq!(mem.read_all(p).unwrap(), before, "seed {seed}");
        }
    }

    #[test]
    fn scattered_crash_tracks_many_appends() {
        let (mut shorter, mut holes) = (0, 0);
        for seed in 0..20u64 {
            let mem = MemFs::with_seed(seed);
            let p = Path::new("/f");
            let mut w = mem.create(p).unwrap();
            mem.sync_dir(Path::new("/")).unwrap();
            w.append(b"head").unwrap();
            w.sync().unwrap();
            let n = 3 * MAX_TRACKED_APPENDS;
            for i in 0..n {
                w.append(&[(i % 200) as u8 + 1]).unwrap();
            }
            // Truncation cuts the tracked ranges too.
            mem.truncate(p, 4 + n as u64 - 100).unwrap();
            mem.crash_with(scattered());
            let got = mem.read_all(p).unwrap();
            assert_eq!(&got[..4], b"head");
            assert!(got.len() <= 4 + n - 100);
            shorter += (got.len() < 4 + n - 100) as usize;
            // Merged ranges still fail independently: some byte below the end is not its own.
            holes += got[4..]
                .iter()
                .enumerate()
                .any(|(i, &b)| b != (i % 200) as u8 + 1) as usize;
        }
        assert!(shorter > 0, "some crash should lose the tail");
        assert!(holes > 0, "some crash should leave a hole");
    }

    #[test]
    fn new_directory_needs_its_parent_synced() {
        let mem = MemFs::new();
        let mode = CrashMode {
            new_dirs_need_parent_sync: true,
            ..CrashMode::default()
        };
        let file = Path::new("/a/b/f");
        let write = |mem: &MemFs| {
            mem.create_dir_all(Path::new("/a/b")).unwrap();
            mem.write_all_synced(file, b"data").unwrap();
            mem.sync_dir(Path::new("/a/b")).unwrap();
        };
        // Nothing synced above the file's own directory: all of it vanishes.
        write(&mem);
        mem.crash_with(mode);
        assert!(!mem.exists(Path::new("/a")).unwrap());
        assert!(mem.list(Path::new("/")).unwrap().is_empty());
        // "/" synced: "/a" stays, "/a/b" (and the file) vanish.
        write(&mem);
        mem.sync_dir(Path::new("/")).unwrap();
        mem.crash_with(mode);
        assert!(mem.exists(Path::new("/a")).unwrap());
        assert!(!mem.exists(Path::new("/a/b")).unwrap());
        assert!(!mem.exists(file).unwrap());
        // Every parent synced: the file survives.
        write(&mem);
        mem.sync_dir(Path::new("/a")).unwrap();
        mem.crash_with(mode);
        assert_eq!(mem.read_all(file).unwrap(), b"data");
        // A directory that survived a crash stays without another sync.
        mem.crash_with(mode);
        assert_eq!(mem.read_all(file).unwrap(), b"data");
        // The default mode keeps new directories.
        mem.create_dir_all(Path::new("/c")).unwrap();
        mem.crash_with(CrashMode::default());
        assert!(mem.exists(Path::new("/c")).unwrap());
    }
}
