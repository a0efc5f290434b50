//! What ratewarden writes to its log under load: repeated errors
//! summarised ([`LogSummary`]) and request-supplied text shortened and
//! escaped ([`for_log`]).

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The longest request-supplied text [`for_log`] keeps, in characters.
pub const LOGGED_TEXT_CHARS: usize = 64;

/// `bytes` as a log field: invalid UTF-8 replaced, control characters and
/// quotes escaped (so a key cannot forge log lines), at most
/// [`LOGGED_TEXT_CHARS`] characters, then `…(N bytes)` with the full
/// length.
pub fn for_log(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len().min(LOGGED_TEXT_CHARS) + 16);
    for (i, c) in text.chars().enumerate() {
        if i == LOGGED_TEXT_CHARS {
            out.push_str(&format!("…({} bytes)", bytes.len()));
            return out;
        }
        out.extend(c.escape_debug());
    }
    out
}

/// Summarises a repeated error: the first one is logged at once (WARN);
/// later ones are counted, and one line per interval gives their number
/// and the first and last of them; the first success after errors logs
/// the remaining count and that the errors stopped (INFO).
///
/// Without errors, [`LogSummary::recovered`] costs one atomic load.
#[derive(Debug)]
pub struct LogSummary {
    what: &'static str,
    every: Duration,
    failing: AtomicBool,
    state: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    started: Option<Instant>,
    last_at: Option<Instant>,
    count: u64,
    total: u64,
    first: Option<String>,
    last: Option<String>,
}

impl LogSummary {
    /// A summary of the errors named `what` (e.g. "store unavailable"),
    /// one line every `every` at most while they last.
    pub fn new(what: &'static str, every: Duration) -> LogSummary {
        LogSummary {
            what,
            every,
            failing: AtomicBool::new(false),
            state: Mutex::new(Window::default()),
        }
    }

    /// Counts one error; logs it when it is the first since the last
    /// success, or a summary line when an interval has passed.
    pub fn record(&self, error: &dyn Display) {
        let now = Instant::now();
        let mut w = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        w.total += 1;
        let quiet = w
            .last_at
            .is_none_or(|at| now.duration_since(at) >= self.every);
        w.last_at = Some(now);
        let started = match w.started {
            // A run starts (or starts again after a quiet interval): this
            // one is logged in full, at once.
            Some(started) if quiet => {
                self.flush(&mut w, now.duration_since(started));
                None
            }
            started => started,
        };
        let Some(started) = started else {
            self.failing.store(true, Ordering::Release);
            w.started = Some(now);
            tracing::warn!(
                error = %error,
                summary_secs = self.every.as_secs(),
                "{}; repeats are summarised",
                self.what
            );
            return;
        };
        w.count += 1;
        if w.first.is_none() {
            w.first = Some(error.to_string());
        } else {
            w.last = Some(error.to_string());
        }
        if now.duration_since(started) >= self.every {
            self.flush(&mut w, now.duration_since(started));
            w.started = Some(now);
        }
    }

    /// The operation succeeded: ends a run of errors, logging what was
    /// not summarised yet.
    pub fn recovered(&self) {
        if !self.failing.load(Ordering::Acquire) {
            return;
        }
        let mut w = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(started) = w.started {
            self.flush(&mut w, started.elapsed());
        }
        tracing::info!(errors = w.total, "{}: recovered", self.what);
        *w = Window::default();
        self.failing.store(false, Ordering::Release);
    }

    /// Logs what is due without waiting for the next error: the summary
    /// of an interval that has passed, and the end of a run that has been
    /// quiet for an interval (the next error is then logged in full).
    /// Call it about every second.
    pub fn tick(&self) {
        if !self.failing.load(Ordering::Acquire) {
            return;
        }
        let now = Instant::now();
        let mut w = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(started) = w.started else {
            return;
        };
        let quiet = w
            .last_at
            .is_none_or(|at| now.duration_since(at) >= self.every);
        if quiet {
            self.flush(&mut w, now.duration_since(started));
            w.started = None;
        } else if now.duration_since(started) >= self.every {
            self.flush(&mut w, now.duration_since(started));
            w.started = Some(now);
        }
    }

    /// Whether the last operation failed.
    pub fn failing(&self) -> bool {
        self.failing.load(Ordering::Acquire)
    }

    fn flush(&self, w: &mut Window, over: Duration) {
        if w.count > 0 {
            let first = w.first.take().unwrap_or_default();
            let last = w.last.take().unwrap_or_else(|| first.clone());
            tracing::warn!(
                count = w.count,
                over_secs = over.as_secs(),
                first = %first,
                last = %last,
                "{}: {} more",
                self.what,
                w.count
            );
        }
        w.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::{LOGGED_TEXT_CHARS, for_log};

    #[test]
    fn long_and_hostile_text_is_shortened_and_escaped() {
        assert_eq!(for_log(b"alice"), "alice");
        assert_eq!(for_log(b"a\nb\"c"), "a\\nb\\\"c");
        assert_eq!(for_log(&[0xff, b'x']), "\u{fffd}x");
        let long = vec![b'k'; 5000];
        let shown = for_log(&long);
        assert!(shown.starts_with(&"k".repeat(LOGGED_TEXT_CHARS)));
        assert!(shown.ends_with("…(5000 bytes)"), "{shown}");
    }
}
