//! `ratewarden replay`: decides a recorded trace of requests, one per line
//! of its input, and writes one decision per line.
//!
//! ```text
//! input:   <unix_ms> <key> [<cost>]
//! output:  <unix_ms> <key> allow|deny <remaining> <retry_after_ms>
//!          <unix_ms> <key> never - -
//! ```
//!
//! Fields are separated by ASCII whitespace; blank lines and lines whose
//! first field starts with `#` are skipped; times must not decrease nor
//! pass [`MAX_UNIX_MS`] (2262-04-11, where the engine's exact instants
//! end); the cost is at least 1 (default 1). A key is one opaque part
//! ([`Key::single`](ratewarden_core::Key::single) of its bytes, not
//! necessarily UTF-8) and is echoed byte for byte. `retry_after_ms` is 0
//! when allowed and rounded up to whole milliseconds when denied
//! ([`ceil_millis`](ratewarden_core::ceil_millis)).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use ratewarden_core::{Algorithm, MemoryStore, Policy, Quota, Store};
//! use ratewarden_replay::{Progress, replay};
//!
//! let quota = Quota::new(2, Duration::from_secs(1)).unwrap();
//! let policy = Policy::new("replay", Algorithm::FixedWindow, quota);
//! let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
//! let mut out = Vec::new();
//! let trace = "1000 alice\n1200 alice\n1500 alice\n";
//! let summary = replay(&policy, store, trace.as_bytes(), &mut out, Progress::Off).unwrap();
//! assert_eq!(
//!     String::from_utf8(out).unwrap(),
//!     "1000 alice allow 1 0\n1200 alice allow 0 0\n1500 alice deny 0 500\n"
//! );
//! assert_eq!((summary.allowed, summary.denied), (2, 1));
//! ```
//!
//! # Layout
//! - [`run`]: the command on the process's standard streams, the store
//!   opened by the caller's composition root; [`replay`]: any input and
//!   output, on a store already open.
//! - `line`: one trace line parsed ([`parse_line`]); `quote`: trace bytes
//!   shown safely in messages.
//! - `pipeline`: reading, deciding and writing on two threads
//!   (`reader.rs`, `writer.rs`).
//! - `decide`: one request decided on the store: through the [`Store`]
//!   trait, or on a memory store that the replay alone holds without its
//!   locks.
//! - `summary`: the totals and the most denied keys ([`Summary`]).
//! - `settings`: [`ReplaySettings`], the replay's store options, the
//!   live SQLite file check; `error`: [`ReplayError`].
//!
//! # Design decisions
//! - **The store directly, not the decision layer.** Replay is an offline
//!   simulator: the trace brings its own times and there is one policy, so
//!   it needs neither the limiter's clock nor its policy set, failure modes
//!   or metrics. It decides on the store the server's composition root
//!   opens for the same `--store` (`run`'s `open_store`), through the
//!   [`Store`] trait as the limiter does; a memory store that the replay
//!   alone holds, through its own lock-free API for a sole user
//!   (`decide.rs` says why).
//! - **One decision at a time, in trace order.** One thread decides, on
//!   one store, exactly as a plain loop would: a request may depend on the
//!   one before it for the same key.
//! - **Streaming, on two threads.** The input is read in blocks of whole
//!   lines (256 KiB reads, so non-UTF-8 keys pass), fields parsed in
//!   place, numbers formatted with `itoa` into a buffered writer. One
//!   thread reads, parses and writes; a second decides each block's
//!   requests while the first parses the next block and writes the
//!   previous one: reading and writing overlap with deciding, and the
//!   output is the same byte for byte as one thread's.
//! - **Bounded memory.** A line is at most [`MAX_LINE_BYTES`] (64 KiB),
//!   refused as soon as it is longer, not once read whole; blocks in
//!   flight are a few MiB. Besides the store's own state (bounded by
//!   expiry), the only per-key data is the denial count of each denied
//!   key, for the summary (`summary.rs` says why exact counts).
//! - **Redis keeps a replay's state a day.** Redis expires keys on its
//!   own clock, the replay decides at its trace's times: every TTL gets
//!   [`REDIS_TTL_SLACK`] (a day) on top, so a replay slower than its trace,
//!   or one continuing on the same Redis later that day, finds its state.
//! - **Not on a live file.** A SQLite file that a running service holds
//!   (its store's shared advisory lock,
//!   [`SqliteStore::in_use`](ratewarden_sqlite::SqliteStore::in_use)) is
//!   refused before the store is opened ([`check_not_live`]);
//!   `--allow-live-store` proceeds with a warning ([`LiveStore::Allow`]).
//! - **Errors.** A malformed or out-of-order line stops the replay with a
//!   [`ReplayError::Input`] naming the line number (counting every line,
//!   blank and comment lines too) and the offending text; the decisions
//!   written before it are flushed first, and nothing after it is decided.

mod decide;
mod error;
mod line;
mod pipeline;
mod quote;
mod settings;
mod summary;

use std::io::{self, IsTerminal, Read, Write};
use std::sync::Arc;

use ratewarden_config::{StoreConfig, StoreOptions};
use ratewarden_core::{Policy, Store};

pub use error::ReplayError;
pub use line::{LineError, MAX_DATE, MAX_LINE_BYTES, MAX_UNIX_MS, Request, parse_line};
pub use pipeline::Progress;
pub use settings::{LiveStore, REDIS_TTL_SLACK, ReplaySettings, check_not_live};
pub use summary::Summary;

/// Runs `ratewarden replay` on the process's standard streams: checks
/// that a SQLite file is not in use, opens the store with `open_store`
/// (the caller's composition root, given the replay's configuration and
/// options), replays standard input to standard output and prints the
/// summary on standard error. A closed standard output (`| head`) ends
/// the replay quietly.
///
/// # Errors
/// [`ReplayError`]; the decisions before it have been written. An error
/// of `open_store` is [`ReplayError::Open`].
pub fn run<E>(
    settings: &ReplaySettings,
    open_store: impl FnOnce(&StoreConfig, &StoreOptions) -> Result<Arc<dyn Store>, E>,
) -> Result<(), ReplayError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    check_not_live(&settings.store, settings.live_store)?;
    let store = open_store(&settings.store_config(), &settings.store_options())
        .map_err(|e| ReplayError::Open(Box::new(e)))?;
    let stdin = io::stdin().lock();
    let stdout = io::stdout().lock();
    let progress = if io::stderr().is_terminal() {
        Progress::Terminal
    } else {
        Progress::Off
    };
    match replay(&settings.policy, store, stdin, stdout, progress) {
        Ok(summary) => {
            // Nothing useful is left to do when standard error is closed.
            let _ = write!(io::stderr().lock(), "{summary}");
            Ok(())
        }
        Err(ReplayError::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e),
    }
}

/// Replays the trace read from `input` against `store` under `policy`,
/// writing one decision per request to `output`, then closes the store.
/// A memory store that no one else holds is decided on without its locks
/// (`decide.rs`).
///
/// # Errors
/// [`ReplayError`] at the first malformed line, IO or store failure; what
/// was decided before it has been written and flushed.
pub fn replay(
    policy: &Policy,
    mut store: Arc<dyn Store>,
    input: impl Read,
    output: impl Write,
    progress: Progress,
) -> Result<Summary, ReplayError> {
    let block_bytes = pipeline::BLOCK_BYTES;
    if let Some(memory) = decide::sole_memory(&mut store) {
        let decide_one = |key: &[u8], attempt| decide::on_sole_memory(memory, policy, key, attempt);
        return pipeline::replay_with(decide_one, input, output, progress, block_bytes);
    }
    let decider = decide::Decider::new(policy, store.as_ref())?;
    let decide_one = |key: &[u8], attempt| decider.decide(key, attempt);
    let result = pipeline::replay_with(decide_one, input, output, progress, block_bytes);
    decider.close();
    result
}

#[cfg(test)]
mod tests;
