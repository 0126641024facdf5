//! `strata export-rdb`: a stopped server's database as one RDB file (`dataset.rs`), for
//! moving a dataset back to redis-server or into any tool that reads RDB.
//!
//! The database is opened as `strata serve` opens it (its logs replayed), a snapshot is
//! written to `OUT.tmp`, synced, and renamed to `OUT`, so a failed export never leaves a
//! partial file under the name asked for. Only a database `strata serve` created is opened
//! (one whose keys are routed by hash slot); anything else is refused untouched.

use super::dataset::{write_dataset_with, DatasetError, DatasetOptions, DatasetStats};
use crate::config::Config;
use std::path::{Path, PathBuf};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The directory is not a server's database, or it does not open.
    #[error("{0}")]
    Open(String),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error("{what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes the dataset of the server database in `dir` (not in use: the server stopped) to
/// the RDB file `out`, calling `progress` as `write_dataset_with` does.
pub fn export_rdb(
    dir: &Path,
    out: &Path,
    progress: &dyn Fn(&DatasetStats),
) -> Result<DatasetStats, ExportError> {
    let config = Config {
        dir: dir.to_path_buf(),
        ..Config::default()
    };
    let engine = config.engine.options();
    match strata::meta::ShardMeta::load(&*engine.fs, dir) {
        Ok(Some(m)) if m.routing == strata::Routing::Slot => {}
        Ok(Some(_)) => {
            return Err(ExportError::Open(format!(
                "{} is a Strata database, but not one `strata serve` created (its keys are \
                 not routed by hash slot)",
                dir.display()
            )))
        }
        Ok(None) => {
            return Err(ExportError::Open(format!(
                "no database of `strata serve` in {}",
                dir.display()
            )))
        }
        Err(e) => return Err(ExportError::Open(format!("{}: {e}", dir.display()))),
    }
    let shared = crate::server::open_shared(config, None, Vec::new())
        .map_err(|e| ExportError::Open(format!("opening {}: {e}", dir.display())))?;
    let written = write_file(&shared, out, progress);
    match std::sync::Arc::try_unwrap(shared) {
        Ok(s) => s
            .store
            .into_db()
            .close()
            .map_err(|e| ExportError::Open(format!("closing {}: {e}", dir.display())))?,
        // Nothing else holds it; if something did, dropping it closes the database.
        Err(s) => drop(s),
    }
    written
}

fn write_file(
    shared: &crate::server::Shared,
    out: &Path,
    progress: &dyn Fn(&DatasetStats),
) -> Result<DatasetStats, ExportError> {
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| ExportError::Io { what, path, source }
    };
    let mut file = std::fs::File::create(&tmp).map_err(io("creating", &tmp))?;
    let snap = shared
        .store
        .db()
        .snapshot()
        .map_err(|e| ExportError::Dataset(DatasetError::Read(e)))?;
    let opts = DatasetOptions {
        progress: Some(progress),
        ..DatasetOptions::default()
    };
    let stats = match write_dataset_with(&snap, shared, &opts, &mut file) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
    };
    file.sync_all().map_err(io("syncing", &tmp))?;
    drop(file);
    std::fs::rename(&tmp, out).map_err(io("renaming to", out))?;
    Ok(stats)
}
