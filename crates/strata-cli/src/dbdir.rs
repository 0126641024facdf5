//! Checks on a database directory named on the command line, before anything opens it.

use anyhow::{bail, Context, Result};
use std::path::Path;

/// Refuses, with a clear message, a directory that cannot hold a database. Commands that
/// only read call this before opening, so that they never create anything.
pub fn require_existing_db(dir: &Path) -> Result<()> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("no database exists at {shown}: the directory does not exist")
        }
        Err(e) => bail!("cannot access {shown}: {e}"),
        Ok(m) if !m.is_dir() => bail!("no database exists at {shown}: it is not a directory"),
        Ok(_) => {}
    }
    let mut entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read directory {shown}"))?;
    if entries.next().is_none() {
        bail!("no database exists at {shown}: the directory is empty");
    }
    Ok(())
}

/// A user-named directory for a new benchmark database must not hold anything: fresh
/// benchmarks wipe the directory, which is only safe when everything in it is ours.
pub fn require_new_or_empty(dir: &Path) -> Result<()> {
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot use {} as --db", dir.display())),
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!(
                    "{} is not empty: pass --use-existing-db to benchmark the database in it, \
                     or name a new or empty directory (fresh benchmarks delete what is there)",
                    dir.display()
                );
            }
            Ok(())
        }
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
    fn empty_directory_and_file_are_not_databases() {
        let tmp = tempfile::tempdir().unwrap();
        let e = require_existing_db(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("the directory is empty"), "{e}");
        let f = tmp.path().join("file");
        std::fs::write(&f, b"x").unwrap();
        let e = require_existing_db(&f).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        assert!(require_existing_db(tmp.path()).is_ok());
    }

    #[test]
    fn a_user_directory_must_be_new_or_empty() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(require_new_or_empty(&tmp.path().join("new")).is_ok());
        assert!(require_new_or_empty(tmp.path()).is_ok());
        std::fs::write(tmp.path().join("precious"), b"x").unwrap();
        let e = require_new_or_empty(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("is not empty"), "{e}");
    }
}
