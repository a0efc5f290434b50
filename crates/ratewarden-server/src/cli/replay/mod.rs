//! `ratewarden replay`: decides a recorded trace of requests, one per line
//! of standard input, and prints one decision per line on standard output.
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
//! ([`Key::single`] of its bytes, not necessarily UTF-8) and is echoed
//! byte for byte. `retry_after_ms` is 0 when allowed and rounded up to
//! whole milliseconds when denied ([`ceil_millis`](ratewarden_core::ceil_millis)).
//!
//! Design decisions:
//! - **Streaming, on two threads.** The input is read in blocks of whole
//!   lines (256 KiB reads, so non-UTF-8 keys pass), fields parsed in place,
//!   numbers formatted with `itoa` into a [`BufWriter`](std::io::BufWriter). One thread reads,
//!   parses and writes; a second decides each block's requests while the
//!   first parses the next block and writes the previous one
//!   (`replay/pipeline.rs`): 1.2–1.7× the decisions per second of one
//!   thread on the memory store (the cheaper the algorithm's decision, the
//!   more), with the same output byte for byte. On the memory store
//!   nothing is allocated per line and no lock is taken
//!   ([`MemoryStore::acquire_single_mut`](ratewarden_core::MemoryStore::acquire_single_mut)
//!   takes the key's bytes, and the deciding thread owns the store);
//!   other stores get a [`Key`] per request.
//! - **The store directly, not the decision layer.** Replay is an offline
//!   simulator: the trace brings its own times and there is one policy, so
//!   it needs neither the limiter's clock nor its policy set, failure modes
//!   or metrics; it feeds the store the same batches the limiter would.
//! - **One decision at a time, in trace order.** One thread decides, on
//!   one store, exactly as a plain loop would: a request may depend on the
//!   one before it for the same key. [`MemoryStore::acquire_now`](ratewarden_core::MemoryStore::acquire_now)
//!   never waits, so the memory path calls it directly; other stores go
//!   through the async [`Store`](ratewarden_core::Store) trait on a
//!   current-thread runtime.
//! - **Bounded memory.** A line is at most [`MAX_LINE_BYTES`] (64 KiB),
//!   refused as soon as it is longer, not once read whole; blocks in
//!   flight are a few MiB. Besides the store's own state (bounded by expiry),
//!   the only per-key data is the exact denial count of each key that was
//!   ever denied, for the top-ten summary: at most one small entry per
//!   distinct key, tens of megabytes for a million distinct keys. A bounded
//!   heavy-hitter sketch (Space-Saving) would cap it, but its top ten is
//!   approximate and depends on arrival order; exact counts keep the summary
//!   deterministic (ties are broken by the key's bytes).
//! - **Redis keeps a replay's state a day.** Redis expires keys on its
//!   own clock, the replay decides at its trace's times: every TTL gets
//!   [`REDIS_TTL_SLACK`] (a day) on top, so a replay slower than its trace,
//!   or one continuing on the same Redis later that day, finds its state.
//! - **Not on a live file.** A SQLite file that a running service holds
//!   (its store's shared advisory lock, [`SqliteStore::in_use`]) is
//!   refused before the store is opened: the replay's policy is named
//!   `replay`, and a service with a policy of that name would see its
//!   counters change under it. `--allow-live-store` proceeds with a
//!   warning ([`LiveStore::Allow`]).
//! - **Errors.** A malformed or out-of-order line stops the replay with a
//!   [`ReplayError::Input`] naming the line number (counting every line,
//!   blank and comment lines too) and the offending text; the decisions
//!   printed before it are flushed first, and nothing after it is decided.

mod parse;
mod pipeline;

use std::collections::HashMap;
use std::fmt;
use std::io::{self, IsTerminal, Read, Write};
use std::num::NonZeroU64;

use ratewarden_config::{StoreConfig, StoreOptions};
use ratewarden_core::{Acquire, Attempt, Batch, Key, Policy, StoreError};
use ratewarden_sqlite::SqliteStore;

use super::args::{LiveStore, ReplaySettings};
use crate::startup::{OpenedStore, StartupError, open_store};
use parse::Quoted;
pub use parse::{LineError, MAX_DATE, MAX_LINE_BYTES, MAX_UNIX_MS, Request, parse_line};
use pipeline::BLOCK_BYTES;

/// How often progress is shown on a terminal, in lines.
const PROGRESS_EVERY: u64 = 100_000;

/// What a replay adds to the TTL of every key it writes to Redis: one day
/// (the service adds 1 s). Redis counts a TTL down on its own clock, while
/// a replay decides at its trace's times: a replay slower than its trace,
/// or a second replay continuing on the same Redis later, would otherwise
/// find state forgotten that its trace still needs (a fixed window's count
/// gone after a pause, and the next request allowed). A longer TTL changes
/// no answer, since the state carries its window or its instants
/// ([`RedisConfig::ttl_slack`](ratewarden_redis::RedisConfig::ttl_slack)); a replay's
/// keys stay in Redis up to a day after their last write.
pub const REDIS_TTL_SLACK: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// Why a replay stopped early.
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
    /// The store could not be opened.
    #[error(transparent)]
    Startup(#[from] StartupError),
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
    LiveStore(std::path::PathBuf),
    /// Whether the SQLite file is in use could not be found out.
    #[error("cannot tell whether the SQLite file {} is in use: {error}", .path.display())]
    InUseCheck {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        error: io::Error,
    },
}

/// Totals of a replay, printed on standard error at the end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Requests decided (blank and comment lines are not requests).
    pub requests: u64,
    /// Requests allowed.
    pub allowed: u64,
    /// Requests denied.
    pub denied: u64,
    /// Requests that could never pass.
    pub never: u64,
    /// Up to ten keys with the most denials and their counts, most first,
    /// ties in byte order of the key.
    pub most_denied: Vec<(Vec<u8>, u64)>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "requests: {}", self.requests)?;
        writeln!(f, "allowed: {}", self.allowed)?;
        writeln!(f, "denied: {}", self.denied)?;
        writeln!(f, "never: {}", self.never)?;
        if self.most_denied.is_empty() {
            return writeln!(f, "most denied keys: none");
        }
        writeln!(f, "most denied keys:")?;
        for (key, denials) in &self.most_denied {
            writeln!(f, "{denials:>12} {}", Quoted(key))?;
        }
        Ok(())
    }
}

/// Whether to show progress on standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Every `PROGRESS_EVERY` lines, on one overwritten line.
    Terminal,
    /// Not at all (standard error is a file or a pipe).
    Off,
}

/// Runs `ratewarden replay` on the process's standard streams: opens the
/// store, replays standard input to standard output, prints the summary
/// on standard error. A closed standard output (`| head`) ends the replay
/// quietly.
///
/// # Errors
/// [`ReplayError`]; the decisions before it have been written.
pub fn run(settings: &ReplaySettings) -> Result<(), ReplayError> {
    check_not_live(&settings.store, settings.live_store)?;
    let options = StoreOptions {
        call_timeout: settings.store_timeout,
        // Offline, a trace's keys are the user's own: no bound but theirs.
        max_keys: NonZeroU64::MAX,
        ..StoreOptions::default()
    };
    let store = open_store(&for_replay(&settings.store), &options)?;
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

/// The store's configuration for a replay: a Redis store's keys get
/// [`REDIS_TTL_SLACK`] on top of their TTLs.
fn for_replay(store: &StoreConfig) -> StoreConfig {
    match store {
        StoreConfig::Redis(config) => {
            StoreConfig::Redis(config.clone().with_ttl_slack(REDIS_TTL_SLACK))
        }
        other => other.clone(),
    }
}

/// Refuses (or, with [`LiveStore::Allow`], warns about) a SQLite store
/// whose file a running service holds. Runs before this process opens
/// the file (see [`SqliteStore::in_use`]).
///
/// # Errors
/// [`ReplayError::LiveStore`] for a held file, unless allowed;
/// [`ReplayError::InUseCheck`] when it cannot be told.
pub fn check_not_live(store: &StoreConfig, live: LiveStore) -> Result<(), ReplayError> {
    let StoreConfig::Sqlite(path) = store else {
        return Ok(());
    };
    let in_use = SqliteStore::in_use(path).map_err(|error| ReplayError::InUseCheck {
        path: path.clone(),
        error,
    })?;
    match (in_use, live) {
        (false, _) => Ok(()),
        (true, LiveStore::Refuse) => Err(ReplayError::LiveStore(path.clone())),
        (true, LiveStore::Allow) => {
            tracing::warn!(
                file = %path.display(),
                "the SQLite file is in use by a running ratewarden service; \
                 replaying on it anyway (--allow-live-store) changes its live counters"
            );
            Ok(())
        }
    }
}

/// Replays the trace read from `input` against `store` under `policy`,
/// writing one decision per request to `output`.
///
/// # Errors
/// [`ReplayError`] at the first malformed line, IO or store failure; what
/// was decided before it has been written and flushed.
pub fn replay(
    policy: &Policy,
    store: OpenedStore,
    input: impl Read,
    output: impl Write,
    progress: Progress,
) -> Result<Summary, ReplayError> {
    match store {
        OpenedStore::Memory(mut store) => {
            // The deciding thread is the store's only user: no locks.
            let decide = |key: &[u8], attempt| {
                // The reader has refused over-long keys already.
                store
                    .acquire_single_mut(policy, key, attempt)
                    .map_err(|e| StoreError::Failed(e.to_string()))
            };
            pipeline::replay_with(decide, input, output, progress, BLOCK_BYTES)
        }
        OpenedStore::Dyn(store) => {
            // Timers and IO: the Redis store needs both.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(ReplayError::Runtime)?;
            let decide = |key: &[u8], attempt: Attempt| {
                let key = Key::single(key).map_err(|e| StoreError::Failed(e.to_string()))?;
                let check = Acquire {
                    cost: attempt.cost,
                    ..Acquire::one(policy, &key)
                };
                let batch = Batch::one(attempt.now, check);
                let decisions = runtime.block_on(store.acquire(&batch))?;
                decisions
                    .first()
                    .copied()
                    .ok_or_else(|| StoreError::Failed("the store answered no decision".into()))
            };
            let result = pipeline::replay_with(decide, input, output, progress, BLOCK_BYTES);
            runtime.block_on(store.close());
            result
        }
    }
}

/// The `n` keys with the most denials, most first, ties by key bytes.
fn most_denied(
    denials: HashMap<Box<[u8]>, u64, impl std::hash::BuildHasher>,
    n: usize,
) -> Vec<(Vec<u8>, u64)> {
    let order =
        |a: &(Box<[u8]>, u64), b: &(Box<[u8]>, u64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0));
    let mut all: Vec<(Box<[u8]>, u64)> = denials.into_iter().collect();
    if all.len() > n {
        all.select_nth_unstable_by(n, order);
        all.truncate(n);
    }
    all.sort_unstable_by(order);
    all.into_iter().map(|(k, c)| (k.into_vec(), c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewarden_core::{Algorithm, MemoryStore, Quota};
    use std::time::Duration;

    #[test]
    fn times_past_i64_nanoseconds_are_refused_not_decided_wrongly() {
        // The largest time is the last millisecond whose nanoseconds fit an
        // i64 (GCRA's MAX_TAT, the stores' integers), and its date is right.
        assert_eq!(MAX_UNIX_MS, 9_223_372_036_854);
        assert!(u128::from(MAX_UNIX_MS) * 1_000_000 <= i64::MAX as u128);
        assert!(u128::from(MAX_UNIX_MS + 1) * 1_000_000 > i64::MAX as u128);
        let max =
            time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(MAX_UNIX_MS) * 1_000_000)
                .unwrap();
        assert_eq!(max.date().to_string(), MAX_DATE);

        // The tester's repro: past it GCRA's tat saturated below t and
        // every request was allowed; now the line stops the replay.
        let trace = "9300000000000 a\n9300000000000 a\n";
        let err = run_trace(Algorithm::Gcra, 1, Duration::from_secs(1), trace).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: time 9300000000000 is after the largest supported time 9223372036854 (2262-04-11)"
        );
        let last = format!("{MAX_UNIX_MS} a\n{MAX_UNIX_MS} a\n{} a\n", MAX_UNIX_MS + 1);
        let err = run_trace(Algorithm::Gcra, 1, Duration::from_secs(1), &last).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("line 3: time 9223372036855 is after"),
            "{err}"
        );
        // Every algorithm still limits at the largest time, and is refused
        // one millisecond later (the check is the parser's).
        for algorithm in Algorithm::ALL {
            let (out, _) = run_trace(
                algorithm,
                1,
                Duration::from_secs(1),
                &format!("{MAX_UNIX_MS} a\n{MAX_UNIX_MS} a\n"),
            )
            .unwrap();
            let outcomes: Vec<&str> = out.lines().map(|l| l.split(' ').nth(2).unwrap()).collect();
            assert_eq!(outcomes, ["allow", "deny"], "{algorithm}: {out}");
            assert!(run_trace(algorithm, 1, Duration::from_secs(1), "9223372036855 a\n").is_err());
        }
    }

    fn run_trace(
        algorithm: Algorithm,
        limit: u64,
        window: Duration,
        trace: &str,
    ) -> Result<(String, Summary), ReplayError> {
        let policy = Policy::new("t", algorithm, Quota::new(limit, window).unwrap());
        let mut out = Vec::new();
        let summary = replay(
            &policy,
            OpenedStore::Memory(MemoryStore::new()),
            trace.as_bytes(),
            &mut out,
            Progress::Off,
        )?;
        Ok((String::from_utf8(out).unwrap(), summary))
    }

    #[test]
    fn errors_carry_the_line_number_counting_blank_and_comment_lines() {
        let trace = "# header\n1000 a\n\n2000 b\n1999 c\n";
        let err = run_trace(Algorithm::FixedWindow, 2, Duration::from_secs(1), trace).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 5: time 1999 is before the previous 2000"
        );
        let err = run_trace(
            Algorithm::FixedWindow,
            2,
            Duration::from_secs(1),
            "1 a\n2 b c d\n",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 2: expected '<unix_ms> <key> [<cost>]', found '2 b c d'"
        );
        let long = format!("1 {}\n", "k".repeat(Key::MAX_BYTES + 1));
        let err = run_trace(Algorithm::FixedWindow, 2, Duration::from_secs(1), &long).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("line 1: key is 4097 bytes long; the maximum is 4096 bytes ('kkk"),
            "{err}"
        );
    }

    #[test]
    fn equal_times_keep_their_order_and_the_last_line_needs_no_newline() {
        let (out, _) = run_trace(
            Algorithm::FixedWindow,
            5,
            Duration::from_secs(1),
            "5 a\n5 a",
        )
        .unwrap();
        assert_eq!(out, "5 a allow 4 0\n5 a allow 3 0\n");
    }

    #[test]
    fn the_summary_counts_outcomes_and_ranks_denied_keys_with_ties_by_key() {
        let mut trace = String::new();
        // Limit 1 per second: key k<i> gets i denials at time 0.
        for i in 0..13u64 {
            for _ in 0..=i {
                trace.push_str(&format!("0 k{i:02}\n"));
            }
        }
        trace.push_str("0 tie 1\n0 tie\n0 big 2\n");
        let (_, summary) =
            run_trace(Algorithm::FixedWindow, 1, Duration::from_secs(1), &trace).unwrap();
        assert_eq!(
            (
                summary.requests,
                summary.allowed,
                summary.denied,
                summary.never
            ),
            (94, 14, 79, 1)
        );
        let top: Vec<(String, u64)> = summary
            .most_denied
            .iter()
            .map(|(k, n)| (String::from_utf8(k.clone()).unwrap(), *n))
            .collect();
        let expected: Vec<(String, u64)> =
            (3..13u64).rev().map(|i| (format!("k{i:02}"), i)).collect();
        assert_eq!(top, expected);
        let (_, summary) =
            run_trace(Algorithm::FixedWindow, 0, Duration::from_secs(1), "0 a\n").unwrap();
        assert!(
            summary
                .to_string()
                .ends_with("never: 1\nmost denied keys: none\n")
        );
    }

    #[test]
    fn ties_in_the_top_ten_are_broken_by_key() {
        let trace: String = ["b", "a", "c", "a", "b", "c"]
            .iter()
            .map(|k| format!("0 {k}\n0 {k}\n"))
            .collect();
        let (_, summary) =
            run_trace(Algorithm::FixedWindow, 1, Duration::from_secs(1), &trace).unwrap();
        assert_eq!(
            summary.most_denied,
            vec![(b"a".to_vec(), 3), (b"b".to_vec(), 3), (b"c".to_vec(), 3)]
        );
        assert!(
            summary
                .to_string()
                .contains("           3 a\n           3 b\n")
        );
    }
}
