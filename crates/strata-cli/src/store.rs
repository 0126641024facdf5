//! What `--db DIR` holds, and opening it through the right API.
//!
//! A directory is a sharded database (`strata::Db`) when it has a `SHARDS` file, a single
//! engine instance (`strata_engine::Db`) when it has a `CURRENT` file. Only a missing or empty
//! directory may receive a new database, of the kind the flags ask for (sharded unless
//! `--engine-only`). Everything else (a file, a directory holding other things, a database
//! of the other kind than `--engine-only` asks for) is refused before anything is written,
//! so that no command ever creates one kind of database inside another, or inside a
//! directory that is not a database at all.

use crate::opts::build_options;
use crate::DbArgs;
use anyhow::{bail, Context, Result};
use std::path::Path;
use strata::meta::ShardMeta;

/// The two kinds of database the command opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `strata::Db`: `SHARDS`, `TXLOG` and `shard-NNN/` directories.
    Sharded,
    /// `strata_engine::Db`: `CURRENT`, `MANIFEST-*`, WALs and tables in the directory itself.
    Engine,
}

impl Kind {
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Sharded => "a sharded database (SHARDS file)",
            Kind::Engine => "a single-engine database (CURRENT file)",
        }
    }
}

/// What is at a `--db` path, found without changing anything.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// A database of this kind.
    Db(Kind),
    /// Nothing yet: a new database may be created here. The text says why there is none.
    Nothing(&'static str),
}

/// Looks at `dir`. Errors for what can neither be opened nor receive a new database.
pub fn inspect(dir: &Path) -> Result<Found> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Found::Nothing("the directory does not exist"))
        }
        Err(e) => bail!("cannot access {shown}: {e}"),
        Ok(m) if !m.is_dir() => {
            bail!("{shown} is not a directory, so it holds no database and cannot receive one")
        }
        Ok(_) => {}
    }
    let sharded = dir.join(strata::meta::FILE).exists();
    let engine = dir.join("CURRENT").exists();
    match (sharded, engine) {
        (true, true) => bail!(
            "{shown} holds both a sharded database (SHARDS) and a single-engine database \
             (CURRENT) at its top level: refusing to guess which one to use. Earlier \
             versions of this command wrote a single engine into a sharded database; \
             moving CURRENT, MANIFEST-*, *.log, *.sst and *.vlog out of the top level \
             leaves the sharded one"
        ),
        (true, false) => return Ok(Found::Db(Kind::Sharded)),
        (false, true) => return Ok(Found::Db(Kind::Engine)),
        (false, false) => {}
    }
    let mut entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read directory {shown}"))?;
    if entries.next().is_none() {
        return Ok(Found::Nothing("the directory is empty"));
    }
    bail!(
        "{shown} is not a Strata database: the directory is not empty but has neither a SHARDS \
         file (sharded database) nor a CURRENT file (single-engine database); \
         nothing was written"
    )
}

/// The kind of the database at `dir`; an error when there is none (commands that only read
/// call this, so that they never create anything).
pub fn require_existing_db(dir: &Path) -> Result<Kind> {
    match inspect(dir)? {
        Found::Db(k) => Ok(k),
        Found::Nothing(why) => bail!("no database exists at {}: {why}", dir.display()),
    }
}

/// For `bench --use-existing-db`: `dir` must hold a database the benchmarked engine opens.
/// For Strata's engines (`want`), a database of that kind, so that a sharded database is
/// never benchmarked as a bare engine (which would write a second database into it); for
/// the others (`None`, their own files: RocksDB also has a CURRENT file), a non-empty
/// directory.
pub fn require_bench_db(dir: &Path, want: Option<Kind>, engine: &str) -> Result<()> {
    let Some(want) = want else {
        let shown = dir.display();
        if !dir.exists() {
            bail!("no database exists at {shown}: the directory does not exist");
        }
        if !dir.is_dir() {
            bail!("no database exists at {shown}: it is not a directory");
        }
        let mut entries =
            std::fs::read_dir(dir).with_context(|| format!("cannot read directory {shown}"))?;
        if entries.next().is_none() {
            bail!("no database exists at {shown}: the directory is empty");
        }
        return Ok(());
    };
    let found = require_existing_db(dir)?;
    if found != want {
        bail!(
            "{} holds {}, which --engine {engine} does not open; benchmark it with --engine {}",
            dir.display(),
            found.describe(),
            if found == Kind::Sharded {
                "sharded"
            } else {
                "strata"
            }
        );
    }
    Ok(())
}

/// Refuses an impossible --shards before anything is looked at or written.
pub fn check_shards_flag(a: &DbArgs) -> Result<()> {
    match a.shards {
        Some(n) if !(1..=strata::meta::MAX_SHARDS).contains(&n) => bail!(
            "--shards must be between 1 and {}, got {n}",
            strata::meta::MAX_SHARDS
        ),
        _ => Ok(()),
    }
}

/// Checks that the database of kind `kind` at `a.db` is what `--engine-only` and `--shards`
/// ask for.
pub fn require_flags_fit(a: &DbArgs, kind: Kind, fs: &dyn strata_engine::io::Fs) -> Result<()> {
    let shown = a.db.display();
    match kind {
        Kind::Sharded if a.engine_only => bail!(
            "{shown} holds {}, but --engine-only asks for a single-engine database; \
             leave out --engine-only to use it",
            kind.describe()
        ),
        Kind::Engine if a.shards.is_some() => bail!(
            "{shown} holds {}, which has no shards; leave out --shards to use it",
            kind.describe()
        ),
        Kind::Engine => Ok(()),
        Kind::Sharded => {
            let meta = ShardMeta::load(fs, &a.db)
                .with_context(|| format!("cannot read the SHARDS file of {shown}"))?
                .with_context(|| format!("{shown} lost its SHARDS file"))?;
            if meta.engine != "strata" {
                bail!(
                    "{shown} holds a sharded database over engine {:?}; the strata command \
                     opens only sharded databases over Strata's engine",
                    meta.engine
                );
            }
            match a.shards {
                Some(n) if n != meta.shards => bail!(
                    "{shown} holds a sharded database of {} shards, but --shards asks for {n}; \
                     the shard count is fixed when a database is created",
                    meta.shards
                ),
                _ => Ok(()),
            }
        }
    }
}

/// An open database of either kind.
pub enum Store {
    Sharded(strata::Db),
    Engine(strata_engine::Db),
}

impl Store {
    /// Opens the database at `a.db`. With `create`, a missing or empty directory receives a
    /// new one (sharded, or a single engine with `--engine-only`) unless an `--opt` turned
    /// create_if_missing off; without it, there must be a database already.
    pub fn open(a: &DbArgs, create: bool) -> Result<Store> {
        let mut o = build_options(&a.opts)?;
        check_shards_flag(a)?;
        let kind = match inspect(&a.db)? {
            Found::Db(k) => {
                require_flags_fit(a, k, &*o.fs)?;
                o.create_if_missing = false;
                k
            }
            Found::Nothing(why) if !create || !o.create_if_missing => {
                bail!("no database exists at {}: {why}", a.db.display())
            }
            Found::Nothing(_) => {
                std::fs::create_dir_all(&a.db)
                    .with_context(|| format!("cannot create directory {}", a.db.display()))?;
                if a.engine_only {
                    Kind::Engine
                } else {
                    Kind::Sharded
                }
            }
        };
        let shown = a.db.display();
        let store = match kind {
            Kind::Engine => Store::Engine(
                strata_engine::Db::open(&a.db, o)
                    .with_context(|| format!("cannot open database at {shown}"))?,
            ),
            Kind::Sharded => {
                let opts = strata::DbOptions {
                    shards: a.shards,
                    ..strata::DbOptions::with_engine(o)
                };
                Store::Sharded(
                    strata::Db::open(&a.db, opts)
                        .with_context(|| format!("cannot open sharded database at {shown}"))?,
                )
            }
        };
        store.report_recovery();
        Ok(store)
    }

    /// Prints to stderr what the open's recovery dropped (per log file: records replayed and
    /// bytes of unsynced tail truncated), when it dropped anything: what a crash cost.
    fn report_recovery(&self) {
        let infos: Vec<strata_engine::RecoveryInfo> = match self {
            Store::Engine(db) => vec![db.recovery_info()],
            Store::Sharded(db) => (0..db.shard_count())
                .map(|i| db.engine(i).db().recovery_info())
                .collect(),
        };
        for info in infos.iter().filter(|i| i.truncated_bytes() > 0) {
            eprintln!("{info}");
        }
    }

    pub fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        match self {
            Store::Sharded(db) => db.put_opt(&strata::WriteOptions { sync }, key, value)?,
            Store::Engine(db) => db.put_opt(&engine_wo(sync), key, value)?,
        }
        Ok(())
    }

    pub fn delete(&self, key: &[u8], sync: bool) -> Result<()> {
        match self {
            Store::Sharded(db) => db.delete_opt(&strata::WriteOptions { sync }, key)?,
            Store::Engine(db) => db.delete_opt(&engine_wo(sync), key)?,
        }
        Ok(())
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(match self {
            Store::Sharded(db) => db.get(key)?,
            Store::Engine(db) => db.get(key)?,
        })
    }

    pub fn close(self, dir: &Path) -> Result<()> {
        match self {
            Store::Sharded(db) => db.close(),
            Store::Engine(db) => db.close(),
        }
        .with_context(|| format!("cannot close database at {} cleanly", dir.display()))
    }
}

fn engine_wo(sync: bool) -> strata_engine::WriteOptions {
    strata_engine::WriteOptions {
        sync,
        ..strata_engine::WriteOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_directory_is_reported_and_not_created() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("nope");
        let e = require_existing_db(&dir).unwrap_err().to_string();
        assert!(e.contains("no database exists at"), "{e}");
        assert!(e.contains("does not exist"), "{e}");
        assert!(!dir.exists());
    }

    #[test]
    fn empty_directory_file_and_other_files_are_not_databases() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            inspect(tmp.path()).unwrap(),
            Found::Nothing("the directory is empty")
        );
        let e = require_existing_db(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("the directory is empty"), "{e}");
        let f = tmp.path().join("file");
        std::fs::write(&f, b"x").unwrap();
        let e = inspect(&f).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        let e = inspect(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("is not a Strata database"), "{e}");
    }

    #[test]
    fn the_marker_file_decides_the_kind() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("CURRENT"), b"MANIFEST-000001\n").unwrap();
        assert_eq!(inspect(tmp.path()).unwrap(), Found::Db(Kind::Engine));
        std::fs::write(tmp.path().join("SHARDS"), b"").unwrap();
        let e = inspect(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("holds both"), "{e}");
        std::fs::remove_file(tmp.path().join("CURRENT")).unwrap();
        assert_eq!(inspect(tmp.path()).unwrap(), Found::Db(Kind::Sharded));
    }
}
