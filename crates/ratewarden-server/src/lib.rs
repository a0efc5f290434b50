//! ratewarden's service: the command line, the axum application and its
//! HTTP interface. Only this crate knows HTTP and JSON; it turns requests
//! into checks for the decision layer (`ratewarden-limiter`) and its
//! answers back into responses.
//!
//! # Layout
//! - [`cli`]: flags and subcommands (`serve`, `replay`, `check-config`).
//! - [`startup`]: [`startup::Application`] (build, then run), the store's
//!   composition root, the shutdown signal.
//! - [`logging`]: `RATEWARDEN_LOG` and `RATEWARDEN_LOG_FORMAT`.
//! - [`reload`]: configuration reload on SIGHUP and on file change.
//! - [`envoy_setup`]: envoyproxy/ratelimit's environment variables read
//!   and reported at start; what a load of the Envoy rules left out.
//! - [`state`]: [`state::AppState`], shared by every handler.
//! - [`conn`]: serving HTTP/1.1 connections: the header read and idle
//!   timeouts, the maximum of connections, lingering close.
//! - [`http`]: the routes (seed routes, the JSON API, the operator's
//!   routes), problem details, the rate-limit headers.

pub mod cli;
pub mod conn;
pub mod envoy_setup;
pub mod http;
pub mod logging;
pub mod reload;
pub mod startup;
pub mod state;
