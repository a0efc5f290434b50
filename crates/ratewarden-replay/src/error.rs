//! Why a replay stops early.

use std::io;
use std::path::PathBuf;

use ratewarden_core::StoreError;

use crate::line::LineError;

/// Why a replay stopped early. The decisions before it have been written.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A malformed or out-of-order line.
    #[error("line {line}: {problem}")]
    Input {
        /// The 1-based line number, counting every line.
        line: u64,
        /// What is wrong with it.
        problem: LineError,
    },
    /// Standard input could not be read.
    #[error("cannot read the trace: {0}")]
    Read(io::Error),
    /// Standard output could not be written.
    #[error("cannot write the decisions: {0}")]
    Write(io::Error),
    /// The store failed to decide a request.
    #[error("line {line}: {error}")]
    Store {
        /// The line being decided.
        line: u64,
        /// Why.
        error: StoreError,
    },
    /// The store could not be opened: the error of the function that
    /// opens stores ([`crate::run`]'s `open_store`), as it is.
    #[error(transparent)]
    Open(Box<dyn std::error::Error + Send + Sync>),
    /// The async runtime for the store could not be started.
    #[error("cannot start the async runtime: {0}")]
    Runtime(io::Error),
    /// The thread that decides could not be started.
    #[error("cannot start the decision thread: {0}")]
    Thread(io::Error),
    /// The SQLite file is held open by a running service (or another
    /// replay), and `--allow-live-store` was not given.
    #[error(
        "the SQLite file {} is in use by a running ratewarden service (or another replay); \
         replaying on it would change that service's live counters. Stop the service, \
         replay on a copy of the file, or pass --allow-live-store to replay on it anyway",
        .0.display()
    )]
    LiveStore(PathBuf),
    /// Whether the SQLite file is in use could not be found out.
    #[error("cannot tell whether the SQLite file {} is in use: {error}", .path.display())]
    InUseCheck {
        /// The file.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
}
