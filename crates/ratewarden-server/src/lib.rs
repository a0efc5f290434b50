//! ratewarden's service: the command line, the axum application and its
//! HTTP interface. Only this crate knows HTTP and JSON; it turns requests
//! into checks for the decision layer (`ratewarden-limiter`) and its
//! answers back into responses.
//!
//! # Layout
//! - [`cli`]: flags and subcommands (`serve`, `replay`, `check-config`).
//! - [`startup`]: [`startup::Application`] (build, then run), the store's
//!   composition root, the shutdown signal.
//! - [`reload`]: configuration reload on SIGHUP and on file change.
//! - [`state`]: [`state::AppState`], shared by every handler.
//! - [`http`]: the routes (seed routes, the JSON API), problem details,
//!   the rate-limit headers.

pub mod cli;
pub mod http;
pub mod reload;
pub mod startup;
pub mod state;
