//! Checks on a benchmark's database directory named on the command line (what a database
//! directory holds and how each command opens it: `store.rs`).

use anyhow::{bail, Context, Result};
use std::path::Path;

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
    fn a_user_directory_must_be_new_or_empty() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(require_new_or_empty(&tmp.path().join("new")).is_ok());
        assert!(require_new_or_empty(tmp.path()).is_ok());
        std::fs::write(tmp.path().join("precious"), b"x").unwrap();
        let e = require_new_or_empty(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("is not empty"), "{e}");
    }
}
