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
//! whole milliseconds when denied ([`ceil_millis`]).
//!
//! Design decisions:
//! - **Streaming.** One reused line buffer ([`BufRead::read_until`] over
//!   64 KiB reads, so non-UTF-8 keys pass), fields parsed in place,
//!   numbers formatted with `itoa` into a [`BufWriter`]. On the memory
//!   store nothing is allocated per line
//!   ([`MemoryStore::acquire_single_now`](ratewarden_core::MemoryStore::acquire_single_now)
//!   takes the key's bytes); other stores get a [`Key`] per request.
//! - **The store directly, not the decision layer.** Replay is an offline
//!   simulator: the trace brings its own times and there is one policy, so
//!   it needs neither the limiter's clock nor its policy set, failure modes
//!   or metrics; it feeds the store the same batches the limiter would.
//! - **Memory store without async.** [`MemoryStore::acquire_now`](ratewarden_core::MemoryStore::acquire_now) never
//!   waits, so the memory path is a plain loop. Other stores go through the
//!   async [`Store`](ratewarden_core::Store) trait on a current-thread runtime, one request at a
//!   time: a request may depend on the one before it for the same key.
//! - **Bounded memory.** Besides the store's own state (bounded by expiry),
//!   the only per-key data is the exact denial count of each key that was
//!   ever denied, for the top-ten summary: at most one small entry per
//!   distinct key, tens of megabytes for a million distinct keys. A bounded
//!   heavy-hitter sketch (Space-Saving) would cap it, but its top ten is
//!   approximate and depends on arrival order; exact counts keep the summary
//!   deterministic (ties are broken by the key's bytes).
//! - **Not on a live file.** A SQLite file that a running service holds
//!   (its store's shared advisory lock, [`SqliteStore::in_use`]) is
//!   refused before the store is opened: the replay's policy is named
//!   `replay`, and a service with a policy of that name would see its
//!   counters change under it. `--allow-live-store` proceeds with a
//!   warning ([`LiveStore::Allow`]).
//! - **Errors.** A malformed or out-of-order line stops the replay with a
//!   [`ReplayError::Input`] naming the line number (counting every line,
//!   blank and comment lines too) and the offending text; the decisions
//!   printed before it are flushed first.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufRead, BufWriter, IsTerminal, Write};
use std::num::NonZeroU64;

use ratewarden_config::{StoreConfig, StoreOptions};
use ratewarden_core::algorithm::gcra::MAX_TAT;
use ratewarden_core::{
    Acquire, Attempt, Batch, Decision, Key, KeyError, Outcome, Policy, StoreError, Timestamp,
    ceil_millis,
};
use ratewarden_sqlite::SqliteStore;

use super::args::{LiveStore, ReplaySettings};
use crate::startup::{OpenedStore, StartupError, open_store};

/// The latest time a trace may use, in milliseconds since the epoch
/// (2262-04-11T23:47:16.854Z): the engine's instants are exact only up to
/// `i64::MAX` nanoseconds, where GCRA's stored instant saturates
/// ([`MAX_TAT`]) and the SQLite and Redis
/// stores' signed 64-bit integers end. A later time would be decided
/// wrongly (GCRA would allow every request), so it is refused like any
/// other malformed line.
pub const MAX_UNIX_MS: u64 = MAX_TAT / 1_000_000;

/// [`MAX_UNIX_MS`]'s date, for error messages.
pub const MAX_DATE: &str = "2262-04-11";

/// How often progress is shown on a terminal, in lines.
const PROGRESS_EVERY: u64 = 100_000;

/// How much of an offending line an error message quotes, in bytes.
const QUOTE_MAX: usize = 80;

/// One request of the trace, borrowing the line it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The request time, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// The key's bytes.
    pub key: &'a [u8],
    /// The units it costs.
    pub cost: NonZeroU64,
}

/// What is wrong with one line of the trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Not two or three fields.
    #[error("expected '<unix_ms> <key> [<cost>]', found '{}'", Quoted(.0))]
    Fields(Vec<u8>),
    /// The time is not a whole number of milliseconds.
    #[error("time '{}' is not a whole number of milliseconds since the epoch", Quoted(.0))]
    Time(Vec<u8>),
    /// The time is past [`MAX_UNIX_MS`].
    #[error("time {0} is after the largest supported time {MAX_UNIX_MS} ({MAX_DATE})")]
    TimeTooLate(u64),
    /// The cost is not a whole number of at least 1.
    #[error("cost '{}' is not a whole number of at least 1", Quoted(.0))]
    Cost(Vec<u8>),
    /// The key is too long.
    #[error("{error} ('{}…')", Quoted(.text))]
    Key {
        /// The key's first bytes.
        text: Vec<u8>,
        /// Why it was refused.
        error: KeyError,
    },
    /// Times must not decrease.
    #[error("time {time} is before the previous {previous}")]
    Backwards {
        /// This line's time.
        time: u64,
        /// The latest time so far.
        previous: u64,
    },
}

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
    let store = open_store(&settings.store, &StoreOptions::default())?;
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
    input: impl BufRead,
    output: impl Write,
    progress: Progress,
) -> Result<Summary, ReplayError> {
    match store {
        OpenedStore::Memory(store) => {
            let mut decide = |key: &[u8], attempt| {
                // The loop has refused over-long keys already.
                store
                    .acquire_single_now(policy, key, attempt)
                    .map_err(|e| StoreError::Failed(e.to_string()))
            };
            replay_with(&mut decide, input, output, progress)
        }
        OpenedStore::Dyn(store) => {
            // Timers and IO: the Redis store needs both.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(ReplayError::Runtime)?;
            let mut decide = |key: &[u8], attempt: Attempt| {
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
            let result = replay_with(&mut decide, input, output, progress);
            runtime.block_on(store.close());
            result
        }
    }
}

/// The loop, generic over how a request is decided (given the key's one
/// part) so the memory store's path is inlined.
fn replay_with<D>(
    decide: &mut D,
    input: impl BufRead,
    output: impl Write,
    progress: Progress,
) -> Result<Summary, ReplayError>
where
    D: FnMut(&[u8], Attempt) -> Result<Decision, StoreError>,
{
    // Standard input's own buffer reads 8 KiB at a time.
    let mut input = io::BufReader::with_capacity(64 * 1024, input);
    let mut out = BufWriter::with_capacity(64 * 1024, output);
    let mut summary = Summary::default();
    let mut denials: HashMap<Box<[u8]>, u64, foldhash::fast::RandomState> = HashMap::default();
    let mut line = Vec::with_capacity(256);
    let mut line_no = 0u64;
    let mut previous_ms = 0u64;
    let mut numbers = itoa::Buffer::new();
    let stopped = loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break None,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break Some(ReplayError::Read(e)),
        }
        line_no += 1;
        if progress == Progress::Terminal && line_no.is_multiple_of(PROGRESS_EVERY) {
            let _ = write!(io::stderr().lock(), "\r{line_no} lines");
        }
        let request = match parse_line(&line) {
            Ok(Some(r)) if r.unix_ms < previous_ms => Err(LineError::Backwards {
                time: r.unix_ms,
                previous: previous_ms,
            }),
            other => other,
        };
        let request = match request {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(problem) => {
                break Some(ReplayError::Input {
                    line: line_no,
                    problem,
                });
            }
        };
        previous_ms = request.unix_ms;
        if request.key.len() > Key::MAX_BYTES
            && let Err(e) = Key::single(request.key)
        {
            break Some(ReplayError::Input {
                line: line_no,
                problem: LineError::Key {
                    text: quote(request.key),
                    error: e,
                },
            });
        }
        let attempt = Attempt {
            now: Timestamp::from_unix_millis(request.unix_ms),
            cost: request.cost,
        };
        let decision = match decide(request.key, attempt) {
            Ok(d) => d,
            Err(error) => {
                break Some(ReplayError::Store {
                    line: line_no,
                    error,
                });
            }
        };
        summary.requests += 1;
        match decision.outcome {
            Outcome::Allowed => summary.allowed += 1,
            Outcome::Denied { .. } => {
                summary.denied += 1;
                match denials.get_mut(request.key) {
                    Some(n) => *n += 1,
                    None => {
                        denials.insert(request.key.into(), 1);
                    }
                }
            }
            Outcome::Never => summary.never += 1,
        }
        if let Err(e) = write_decision(&mut out, &mut numbers, &request, &decision) {
            break Some(ReplayError::Write(e));
        }
    };
    if progress == Progress::Terminal && line_no >= PROGRESS_EVERY {
        // Clear the progress line so the summary starts on a clean one.
        let _ = write!(io::stderr().lock(), "\r\x1b[2K");
    }
    let flushed = out.flush().map_err(ReplayError::Write);
    if let Some(e) = stopped {
        return Err(e);
    }
    flushed?;
    summary.most_denied = most_denied(denials, 10);
    Ok(summary)
}

/// `<unix_ms> <key> allow|deny <remaining> <retry_after_ms>` or
/// `<unix_ms> <key> never - -`.
fn write_decision(
    out: &mut impl Write,
    numbers: &mut itoa::Buffer,
    request: &Request<'_>,
    decision: &Decision,
) -> io::Result<()> {
    out.write_all(numbers.format(request.unix_ms).as_bytes())?;
    out.write_all(b" ")?;
    out.write_all(request.key)?;
    let retry_after_ms = match decision.outcome {
        Outcome::Allowed => {
            out.write_all(b" allow ")?;
            0
        }
        Outcome::Denied { retry_after } => {
            out.write_all(b" deny ")?;
            ceil_millis(retry_after)
        }
        Outcome::Never => return out.write_all(b" never - -\n"),
    };
    out.write_all(numbers.format(decision.remaining).as_bytes())?;
    out.write_all(b" ")?;
    out.write_all(numbers.format(retry_after_ms).as_bytes())?;
    out.write_all(b"\n")
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

/// Parses one line: `Ok(None)` for a blank or comment line.
///
/// # Errors
/// [`LineError`] for a malformed line (never [`LineError::Backwards`] or
/// [`LineError::Key`]: those need context).
pub fn parse_line(line: &[u8]) -> Result<Option<Request<'_>>, LineError> {
    if let Some(request) = parse_plain(line) {
        return Ok(Some(request));
    }
    let mut rest = line;
    let Some(time) = next_field(&mut rest) else {
        return Ok(None);
    };
    if time.first() == Some(&b'#') {
        return Ok(None);
    }
    let (Some(key), cost, None) = (
        next_field(&mut rest),
        next_field(&mut rest),
        next_field(&mut rest),
    ) else {
        return Err(LineError::Fields(quote(trim_end(line))));
    };
    let unix_ms = parse_u64(time).ok_or_else(|| LineError::Time(quote(time)))?;
    if unix_ms > MAX_UNIX_MS {
        return Err(LineError::TimeTooLate(unix_ms));
    }
    let cost = match cost {
        None => NonZeroU64::MIN,
        Some(text) => parse_u64(text)
            .and_then(NonZeroU64::new)
            .ok_or_else(|| LineError::Cost(quote(text)))?,
    };
    Ok(Some(Request { unix_ms, key, cost }))
}

/// The common line, `<digits> <key>[ <digits>]` with single spaces and an
/// optional `\n`, in one pass; `None` sends anything else (and every
/// error) to [`parse_line`]'s general path, which decides the same way.
fn parse_plain(line: &[u8]) -> Option<Request<'_>> {
    let (unix_ms, rest) = leading_u64(line)?;
    let rest = rest.strip_prefix(b" ")?;
    let key_len = rest
        .iter()
        .position(u8::is_ascii_whitespace)
        .unwrap_or(rest.len());
    if key_len == 0 || unix_ms > MAX_UNIX_MS {
        return None;
    }
    let (key, rest) = rest.split_at(key_len);
    let (cost, rest) = match rest.strip_prefix(b" ") {
        Some(rest) => {
            let (cost, rest) = leading_u64(rest)?;
            (NonZeroU64::new(cost)?, rest)
        }
        None => (NonZeroU64::MIN, rest),
    };
    matches!(rest, b"" | b"\n").then_some(Request { unix_ms, key, cost })
}

/// The number at the start of `text` (at least one digit, no overflow)
/// and what follows it.
fn leading_u64(text: &[u8]) -> Option<(u64, &[u8])> {
    let digits = text
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, rest) = text.split_at(digits);
    Some((parse_u64(number)?, rest))
}

/// The next run of non-whitespace bytes in `rest`, which moves past it.
fn next_field<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    let field = &rest[start..];
    let len = field
        .iter()
        .position(u8::is_ascii_whitespace)
        .unwrap_or(field.len());
    *rest = &field[len..];
    Some(&field[..len])
}

/// ASCII digits only (no sign, no spaces), without overflow.
fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

fn trim_end(line: &[u8]) -> &[u8] {
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &line[..end]
}

/// The first [`QUOTE_MAX`] bytes of `text`, for an error message.
fn quote(text: &[u8]) -> Vec<u8> {
    text[..text.len().min(QUOTE_MAX)].to_vec()
}

/// Bytes shown safely on a terminal: UTF-8 with control characters
/// escaped, other bytes as `\xNN`.
struct Quoted<'a>(&'a [u8]);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(self.0) {
            Ok(s) if !s.contains(['\'', '"', '\\']) => {
                for c in s.chars() {
                    if c.is_control() {
                        write!(f, "{}", c.escape_default())?;
                    } else {
                        write!(f, "{c}")?;
                    }
                }
                Ok(())
            }
            _ => write!(f, "{}", self.0.escape_ascii()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewarden_core::{Algorithm, MemoryStore, Quota};
    use std::time::Duration;

    fn req(unix_ms: u64, key: &str, cost: u64) -> Request<'_> {
        Request {
            unix_ms,
            key: key.as_bytes(),
            cost: NonZeroU64::new(cost).unwrap(),
        }
    }

    #[test]
    fn lines_have_a_time_a_key_and_an_optional_cost() {
        assert_eq!(parse_line(b"1000 alice\n"), Ok(Some(req(1000, "alice", 1))));
        assert_eq!(parse_line(b"1000 alice 3"), Ok(Some(req(1000, "alice", 3))));
        assert_eq!(
            parse_line(b" \t0\talice   7 \r\n"),
            Ok(Some(req(0, "alice", 7)))
        );
        assert_eq!(parse_line(b"007 k 01"), Ok(Some(req(7, "k", 1))));
        let odd = parse_line(b"5 \xff:\"x\n").unwrap().unwrap();
        assert_eq!(odd.key, b"\xff:\"x");
    }

    #[test]
    fn the_plain_path_agrees_with_the_general_one() {
        for line in [
            &b"1000 alice\n"[..],
            b"1000 alice",
            b"1000 alice 3\n",
            b"1000 alice 0\n",
            b"1000 alice 3 \n",
            b"1000 alice 3x\n",
            b"1000  alice\n",
            b"1000 alice\r\n",
            b"1000 \xff\n",
            b"9223372036855 k\n",
            b"99999999999999999999 k\n",
            b"1000 \n",
            b"1000\n",
        ] {
            let general = || {
                let mut rest = line;
                let time = next_field(&mut rest)?;
                let key = next_field(&mut rest)?;
                let cost = next_field(&mut rest);
                if next_field(&mut rest).is_some() {
                    return None;
                }
                let unix_ms = parse_u64(time).filter(|&t| t <= MAX_UNIX_MS)?;
                let cost = match cost {
                    None => NonZeroU64::MIN,
                    Some(c) => parse_u64(c).and_then(NonZeroU64::new)?,
                };
                Some(Request { unix_ms, key, cost })
            };
            if let Some(plain) = parse_plain(line) {
                assert_eq!(
                    Some(plain),
                    general(),
                    "{:?}",
                    line.escape_ascii().to_string()
                );
            }
            assert_eq!(
                parse_line(line).ok().flatten(),
                general(),
                "{:?}",
                line.escape_ascii().to_string()
            );
        }
        assert!(parse_plain(b"1000 alice 3\n").is_some());
        assert!(parse_plain(b"1000 alice").is_some());
    }

    #[test]
    fn blank_and_comment_lines_are_skipped() {
        for line in [
            &b""[..],
            b"\n",
            b"   \t \r\n",
            b"# a comment",
            b"  #1000 alice",
            b"#\n",
        ] {
            assert_eq!(
                parse_line(line),
                Ok(None),
                "{:?}",
                line.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn malformed_lines_name_the_offending_text() {
        for (line, message) in [
            (
                &b"1000"[..],
                "expected '<unix_ms> <key> [<cost>]', found '1000'",
            ),
            (b"1000 a 1 extra\n", "found '1000 a 1 extra'"),
            (b"abc alice", "time 'abc' is not a whole number"),
            (b"-5 alice", "time '-5' is not"),
            (b"1.5 alice", "time '1.5' is not"),
            (
                b"99999999999999999999 alice",
                "time '99999999999999999999' is not",
            ),
            (
                b"9223372036855 alice",
                "time 9223372036855 is after the largest supported time 9223372036854 (2262-04-11)",
            ),
            (
                b"18446744073709 alice",
                "time 18446744073709 is after the largest supported time",
            ),
            (
                b"1000 alice 0",
                "cost '0' is not a whole number of at least 1",
            ),
            (b"1000 alice -1", "cost '-1' is not"),
            (b"1000 alice x", "cost 'x' is not"),
            (b"1000 alice 1e3", "cost '1e3' is not"),
        ] {
            let err = parse_line(line).unwrap_err().to_string();
            assert!(
                err.contains(message),
                "{:?}: {err}",
                line.escape_ascii().to_string()
            );
        }
        assert_eq!(
            parse_line(b"9223372036854 k").unwrap().unwrap().unix_ms,
            MAX_UNIX_MS
        );
    }

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

    #[test]
    fn quoted_text_escapes_control_characters_and_invalid_utf8() {
        assert_eq!(Quoted("clé".as_bytes()).to_string(), "clé");
        assert_eq!(Quoted(b"a\x1b[2Jb").to_string(), "a\\u{1b}[2Jb");
        assert_eq!(Quoted(b"\xffx").to_string(), "\\xffx");
        assert_eq!(Quoted(b"it's").to_string(), "it\\'s");
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
