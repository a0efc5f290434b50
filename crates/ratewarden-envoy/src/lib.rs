//! ratewarden as Envoy's external rate limit service: a drop-in for
//! envoyproxy/ratelimit, deciding through the ratewarden decision layer
//! (all descriptors of a request all or nothing, on every store, with any
//! of the four algorithms).
//!
//! - [`service`]: [`RateLimitService::should_rate_limit`], the protocol's
//!   one call as the decision layer answers it: each descriptor is matched
//!   against envoyproxy/ratelimit's rules
//!   ([`ratewarden_config::envoy`]) or takes the request's own `limit`,
//!   the [`ratewarden_limiter::Limiter`] decides them together, and the
//!   outcome becomes one status per descriptor plus the `RateLimit` /
//!   `RateLimit-Policy` headers.
//! - [`grpc`]: the tonic server, `envoy.service.ratelimit.v3` and
//!   `grpc.health.v1` (NOT_SERVING while the store cannot answer).
//! - [`json`]: the protobuf JSON form for `POST /json` on the HTTP port.
//!
//! What the rules and answers mean, in full: docs/envoy.md.

pub mod grpc;
mod headers;
pub mod json;
pub mod service;

pub use service::{RateLimitService, ServiceError, UNLIMITED_REMAINING};
