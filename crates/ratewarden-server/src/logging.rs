//! The log: `RATEWARDEN_LOG` (an `EnvFilter` directive list, default
//! `info`) and `RATEWARDEN_LOG_FORMAT` (`text`, the default, or `json`:
//! one JSON object per line), on standard error. With `RUNTIME_ROOT` set,
//! envoyproxy/ratelimit's `LOG_LEVEL` and `LOG_FORMAT` apply where ours
//! are unset.
//!
//! Logging never stops the service: a line that cannot be written is
//! dropped and counted ([`dropped_lines`], `ratewarden_log_lines_dropped_total`
//! on `/metrics`), never reported on standard error itself. Once standard
//! error is a closed pipe (a log shipper, `tee` or a supervisor gone), the
//! descriptor is pointed at `/dev/null`, so that no other writer to it
//! (the panic message, a library's `eprintln!`, which panics on a failed
//! write) can fail either.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tracing_subscriber::EnvFilter;

/// The variable holding the log filter.
pub const LOG_ENV: &str = "RATEWARDEN_LOG";

/// The variable choosing the log format.
pub const LOG_FORMAT_ENV: &str = "RATEWARDEN_LOG_FORMAT";

/// The levels a directive may name.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// The log's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (colours on a terminal only).
    Text,
    /// One JSON object per line, the event's fields at the top level.
    Json,
}

/// Reads [`LOG_ENV`] and [`LOG_FORMAT_ENV`] and installs the subscriber.
///
/// # Errors
/// A message naming the variable and its value when either is invalid:
/// a filter that does not parse, or a bare word that is neither a level
/// nor a `ratewarden` target (`RATEWARDEN_LOG=verbose` would otherwise
/// silently log nothing), or a format other than `text` and `json`.
pub fn init() -> Result<(), String> {
    // envoyproxy/ratelimit's LOG_LEVEL and LOG_FORMAT stand in for ours.
    let (reference_filter, reference_format) = crate::envoy_setup::log_defaults()?;
    let filter = filter(std::env::var(LOG_ENV).ok().as_deref().or(reference_filter))?;
    let format = format(
        std::env::var(LOG_FORMAT_ENV)
            .ok()
            .as_deref()
            .or(reference_format),
    )?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogWriter)
        // Its report of a failed write is an `eprintln!`: a panic in
        // whichever task logged. LogWriter never fails; this is for the
        // formatting errors it would report the same way.
        .log_internal_errors(false);
    match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
        // Colours only on a terminal: log files get plain text.
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
    Ok(())
}

/// Lines of the log that could not be written since the start.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Set once standard error is a closed pipe: lines are dropped unwritten.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// The count of log lines that could not be written since the start (a
/// closed or failing standard error).
pub fn dropped_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Standard error as the log's writer: a line that cannot be written is
/// counted and dropped, and the write reported as done, so that nothing
/// above it sees an error (tracing-subscriber would `eprintln!` it).
#[derive(Debug, Clone, Copy)]
struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        write_line(&mut std::io::stderr().lock(), buf);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `line` to `out` unless standard error is known closed; a failed
/// write is counted, and a broken pipe closes the log for good.
fn write_line(out: &mut impl Write, line: &[u8]) {
    if CLOSED.load(Ordering::Relaxed) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let Err(e) = out.write_all(line) else {
        return;
    };
    DROPPED.fetch_add(1, Ordering::Relaxed);
    // A pipe whose reader is gone never comes back; any other error (a
    // full disk, EAGAIN) may pass, so the next line is tried again.
    if e.kind() == std::io::ErrorKind::BrokenPipe && !CLOSED.swap(true, Ordering::Relaxed) {
        silence_stderr();
    }
}

/// Points standard error at `/dev/null`, so that every later write to it
/// succeeds: std's `eprintln!` panics on a failed write, and the panic
/// message itself would be written there.
fn silence_stderr() {
    #[cfg(unix)]
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        // Nowhere to report a failure: the log is what failed.
        let _ = rustix::stdio::dup2_stderr(&null);
    }
}

/// The filter of `value` (`info` when unset or empty).
///
/// # Errors
/// As [`init`].
pub fn filter(value: Option<&str>) -> Result<EnvFilter, String> {
    let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(EnvFilter::new("info"));
    };
    let bad = |why: String| {
        format!(
            "invalid value '{value}' in the environment variable {LOG_ENV}: {why} \
             (write a level such as info or debug, or target=level pairs such as \
             warn,ratewarden_limiter=debug)"
        )
    };
    for directive in value.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = !directive.contains('=') && !directive.contains('[');
        let level = LEVELS.contains(&directive.to_ascii_lowercase().as_str());
        if bare && !level && !directive.starts_with("ratewarden") && !directive.contains("::") {
            return Err(bad(format!("'{directive}' is not a level")));
        }
    }
    EnvFilter::builder()
        .parse(value)
        .map_err(|e| bad(e.to_string()))
}

/// The format of `value`, in any case (`text` when unset or empty).
///
/// # Errors
/// As [`init`].
pub fn format(value: Option<&str>) -> Result<LogFormat, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "text") => Ok(LogFormat::Text),
        Some("json") => Ok(LogFormat::Json),
        Some(_) => Err(format!(
            "invalid value '{}' in the environment variable {LOG_FORMAT_ENV}: \
             write text or json",
            value.unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{LogFormat, filter, format};

    /// A writer that fails as a closed pipe does.
    struct Failing(std::io::ErrorKind);

    impl std::io::Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(self.0.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A full disk is counted and the next line tried again; no error
    /// reaches the caller either way. (The broken pipe's path points
    /// this process's standard error at /dev/null: the black-box test
    /// `closed_log.rs` runs it.)
    #[test]
    fn a_failed_log_write_is_counted_and_never_an_error() {
        let before = super::dropped_lines();
        super::write_line(&mut Failing(std::io::ErrorKind::StorageFull), b"a line\n");
        super::write_line(&mut Failing(std::io::ErrorKind::StorageFull), b"a line\n");
        assert!(super::dropped_lines() >= before + 2);
        assert!(!super::CLOSED.load(std::sync::atomic::Ordering::Relaxed));
        let mut ok = Vec::new();
        super::write_line(&mut ok, b"next\n");
        assert_eq!(ok, b"next\n");
    }

    #[test]
    fn filters_and_formats_are_checked() {
        assert!(filter(None).is_ok());
        assert!(filter(Some("debug")).is_ok());
        assert!(filter(Some("warn,ratewarden_limiter=debug")).is_ok());
        assert!(filter(Some("ratewarden_server")).is_ok());
        let e = filter(Some("verbose")).err().unwrap_or_default();
        assert!(
            e.contains("RATEWARDEN_LOG") && e.contains("'verbose'"),
            "{e}"
        );
        assert!(filter(Some("info,x=lots")).is_err());
        assert_eq!(format(Some("json")), Ok(LogFormat::Json));
        assert_eq!(format(Some(" JSON ")), Ok(LogFormat::Json));
        assert_eq!(format(None), Ok(LogFormat::Text));
        let e = format(Some("yaml")).err().unwrap_or_default();
        assert!(
            e.contains("RATEWARDEN_LOG_FORMAT") && e.contains("'yaml'"),
            "{e}"
        );
    }
}
