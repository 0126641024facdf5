//! The engine's one error type.
//!
//! Every fallible operation returns [`Result`]. Corruption is always reported as
//! [`Error::Corruption`] with the file and offset where it was found; it is never turned into
//! a wrong value or a not-found.

use std::path::PathBuf;
use std::sync::Arc;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error, with the operation and the file it concerned.
    #[error("I/O error during {op} on {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// Bytes read from disk do not form what they should (bad checksum, bad magic, truncated
    /// record, impossible length, ...).
    #[error("corruption in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    /// The caller asked for something impossible (bad option, empty key where one is needed...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A previous write, sync or background job failed; the instance refuses writes until it is
    /// reopened. The string is the original error.
    #[error("database is read-only after an earlier error (reopen to recover): {0}")]
    Poisoned(String),
    /// Another process (or another `Db` in this process) holds the directory's lock.
    #[error("database directory {} is locked by another user", .0.display())]
    Locked(PathBuf),
    /// The database was closed.
    #[error("database is closed")]
    Closed,
    /// The operation is not supported by this build or file system.
    #[error("not supported: {0}")]
    NotSupported(String),
}

impl Error {
    /// Builds an [`Error::Io`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// Builds an [`Error::Corruption`].
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// The raw OS error number of an I/O error, if any (e.g. 28 for ENOSPC).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}
