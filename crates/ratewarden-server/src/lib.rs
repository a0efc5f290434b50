//! ratewarden's service: configuration, the axum application and its
//! routes. Only this crate knows HTTP and JSON; it turns requests into
//! [`ratewarden_core`] calls and decisions back into responses.
//!
//! # Layout
//! - [`config`]: flags and `RATEWARDEN_*` variables → [`config::Settings`].
//! - [`startup`]: [`startup::Application`] (build, then run), the store's
//!   composition root, the shutdown signal.
//! - [`state`]: [`state::AppState`], shared by every handler.
//! - `routes/`: one file per route.
//! - [`problem`]: [`problem::ApiError`], RFC 9457 problem details.
//! - [`extract`]: input validation (SPEC section 2's table).
//! - [`headers`]: the rate-limit response headers.
//! - [`key_source`]: which client a `/ping` counts against.
//! - [`prune`]: the pruning task.
//! - [`replay`]: `ratewarden replay`, a trace of requests through a store.

pub mod config;
pub mod extract;
pub mod headers;
pub mod key_source;
pub mod problem;
pub mod prune;
pub mod replay;
pub mod routes;
pub mod startup;
pub mod state;
