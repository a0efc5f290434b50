//! The answer to "may this request pass now?".

use std::time::Duration;

/// Whether a request passed. A denial is not an error (ARCHITECTURE.md, "Invariants").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The request passed and its cost was recorded.
    Allowed,
    /// The request was refused; the same request would pass after
    /// `retry_after` if nothing else arrived (docs/semantics.md §2, the shortest
    /// such wait).
    Denied {
        /// Always longer than zero.
        retry_after: Duration,
    },
    /// The request can never pass: its cost exceeds the limit (a limit of 0
    /// refuses everything). Nothing was recorded.
    Never,
}

/// A limiter's decision for one key at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Allowed, denied (with the wait) or never.
    pub outcome: Outcome,
    /// The quota's limit, in units per window.
    pub limit: u64,
    /// Units that could still pass now.
    pub remaining: u64,
    /// Units the window holds after this decision. Fixed window: every
    /// attempt in the current window, refused ones included (seed A);
    /// sliding log: the live events.
    pub used: u64,
    /// Time until the usage counted now has fully expired (fixed window:
    /// the end of the current window). Zero when nothing is counted.
    pub reset_after: Duration,
}

impl Decision {
    /// Whether the request passed.
    pub fn allowed(&self) -> bool {
        matches!(self.outcome, Outcome::Allowed)
    }

    /// The wait after which the same request would pass; `None` when it
    /// was allowed or can never pass.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.outcome {
            Outcome::Denied { retry_after } => Some(retry_after),
            Outcome::Allowed | Outcome::Never => None,
        }
    }
}
