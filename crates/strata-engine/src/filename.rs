//! File names inside a database directory (lifetimes of each kind: `docs/design.md` §2):
//!
//! | name | what |
//! |---|---|
//! | `NNNNNN.log` | write-ahead log (`docs/format/wal.md`) |
//! | `NNNNNN.sst` | table (`docs/format/sstable.md`) |
//! | `NNNNNN.vlog` | value log (`docs/format/vlog.md`) |
//! | `MANIFEST-NNNNNN` | version edits (`docs/format/manifest.md`) |
//! | `CURRENT` | name of the live MANIFEST, switched by atomic rename |
//! | `LOCK` | advisory lock held by the open instance |
//! | `*.dbtmp` | temporary files; removed on open |
//!
//! The L0 tier's tables, `NNNNNN.l0t`, live in `Options::l0_tier_dir` with its own `LOCK`.

use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    Wal,
    Table,
    Vlog,
    Manifest,
    Current,
    Lock,
    Temp,
    /// An L0 tier table (`*.l0t`), found in the tier directory only.
    L0Table,
}

pub fn wal(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.log"))
}

pub fn table(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.sst"))
}

/// An L0 table of the L0 tier, in `Options::l0_tier_dir` (not the database directory).
pub fn l0_table(tier_dir: &Path, n: u64) -> PathBuf {
    tier_dir.join(format!("{n:06}.l0t"))
}

pub fn vlog(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.vlog"))
}

pub fn manifest(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("MANIFEST-{n:06}"))
}

pub fn current(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

pub fn lock(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

pub fn temp(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.dbtmp"))
}

/// Parses a file name of the directory; `None` for names Strata does not own.
pub fn parse(name: &str) -> Option<(FileKind, u64)> {
    match name {
        "CURRENT" => return Some((FileKind::Current, 0)),
        "LOCK" => return Some((FileKind::Lock, 0)),
        _ => {}
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(|n| (FileKind::Manifest, n));
    }
    let (stem, ext) = name.rsplit_once('.')?;
    let n: u64 = stem.parse().ok()?;
    match ext {
        "log" => Some((FileKind::Wal, n)),
        "sst" => Some((FileKind::Table, n)),
        "vlog" => Some((FileKind::Vlog, n)),
        "dbtmp" => Some((FileKind::Temp, n)),
        "l0t" => Some((FileKind::L0Table, n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names_round_trip() {
        let d = Path::new("d");
        for (p, k, n) in [
            (wal(d, 7), FileKind::Wal, 7),
            (table(d, 1234567), FileKind::Table, 1234567),
            (vlog(d, 8), FileKind::Vlog, 8),
            (manifest(d, 3), FileKind::Manifest, 3),
            (temp(d, 9), FileKind::Temp, 9),
            (l0_table(d, 10), FileKind::L0Table, 10),
        ] {
            let name = p.file_name().unwrap().to_str().unwrap();
            assert_eq!(parse(name), Some((k, n)));
        }
        assert_eq!(parse("CURRENT"), Some((FileKind::Current, 0)));
        assert_eq!(parse("notes.txt"), None);
        assert_eq!(parse("MANIFEST-x"), None);
    }
}
