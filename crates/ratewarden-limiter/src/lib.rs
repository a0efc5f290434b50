//! ratewarden's decision layer: what every interface asks.
//!
//! A [`Limiter`] holds the store, the clock and the current [`PolicySet`]
//! (swapped atomically on reload), and answers [`Limiter::check`] for a
//! list of [`Check`]s, all or nothing: the request passes only if every
//! policy allows it, and a denied request charges no policy. Around the
//! store's atomic step it applies what is policy, not algorithm: shadow
//! mode (a would-be denial passes and is reported as `shadow_denied`),
//! fail open / fail closed per policy when the store cannot answer,
//! pruning, and the decision metrics. It knows policies, not wire
//! formats: HTTP, gRPC and the tower Layer translate their requests into
//! checks and the [`Outcome`] into their answers (the HTTP ones through
//! `ratewarden-http`, which holds the headers, problem details and
//! request matching they share).
//!
//! ```
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use ratewarden_core::{Algorithm, Key, MemoryStore, Policy, Quota, SystemClock};
//! use ratewarden_limiter::{Check, FailureMode, Limiter, PolicyDef, PolicySet};
//!
//! let minute = Duration::from_secs(60);
//! let policies = PolicySet::new([
//!     PolicyDef::new(Policy::new("per-user", Algorithm::Gcra, Quota::new(100, minute)?), FailureMode::Open),
//!     PolicyDef::new(Policy::new("global", Algorithm::FixedWindow, Quota::new(10_000, minute)?), FailureMode::Closed),
//! ])?;
//! let limiter = Limiter::new(Arc::new(MemoryStore::new()), Arc::new(SystemClock), policies);
//! let (user, all) = (Key::single("alice")?, Key::single("all")?);
//! let outcome = limiter.check(&[Check::one("per-user", &user), Check::one("global", &all)]).await?;
//! assert!(outcome.allowed);
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - `policy.rs`: [`PolicyDef`], [`PolicySet`], [`FailureMode`],
//!   [`KeyPart`], [`RequestMatch`] and [`PathPattern`].
//! - `path.rs`: [`normalise_path`], the one spelling of a request's path
//!   that `match.path` and the `path` key part read, and [`PathError`].
//! - `limiter.rs`: [`Limiter`], [`Check`], [`Outcome`], [`CheckResult`],
//!   [`Status`], [`CheckError`].
//! - `prune.rs`: [`Pruner`], the background deletion of expired state.
//! - [`activity`]: recent decisions and store latency for the dashboard.
//! - [`log`]: [`LogSummary`] (repeated errors summarised), [`for_log`]
//!   (request-supplied text shortened and escaped).
//!
//! # Metrics
//! Through the `metrics` facade (free when no recorder is installed):
//! `ratewarden_decisions_total{policy, outcome}` with outcome `allowed`,
//! `denied`, `never`, `shadow_denied` or `failed_open` (a check of a
//! batch that another policy denied was not charged and is not counted
//! for its own policy);
//! `ratewarden_decision_duration_seconds` (a whole check, in seconds);
//! `ratewarden_store_duration_seconds{store}` (the store's atomic step,
//! in seconds); `ratewarden_store_errors_total{store}`;
//! `ratewarden_store_failures_total{handling="open"|"closed"}` (checks
//! decided without the store). No key is ever a label.
//!
//! # Logs
//! Store errors are logged once, then summarised every
//! [`STORE_ERROR_SUMMARY`] ([`LogSummary`]); the interfaces do not log
//! them again.

pub mod activity;
mod limiter;
pub mod log;
mod meters;
mod path;
mod policy;
mod prune;

pub use limiter::{
    Basis, Check, CheckError, CheckResult, Limiter, Outcome, PolicyRef, STORE_ERROR_SUMMARY, Status,
};
pub use log::{LogSummary, for_log};
pub use path::{PathError, normalise_path};
pub use policy::{
    Changes, DuplicatePolicy, FailureMode, KeyPart, PathPattern, PolicyDef, PolicySet,
    RequestMatch, check_method, check_policy_name,
};
pub use prune::{Pruner, SAMPLE_GAP};
