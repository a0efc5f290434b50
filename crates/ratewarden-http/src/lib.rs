//! The HTTP vocabulary ratewarden's server and its tower Layer share: the
//! rate-limit headers, problem details, the JSON answer of a check, which
//! policies apply to a request and with what key, and who the client is
//! behind trusted proxies. The service's forward auth (`/v1/authorize`)
//! and `ratewarden-tower`'s `RateLimitLayer` both read requests and write
//! answers through this crate, so they agree on every rule and every byte.
//!
//! The decision layer ([`ratewarden_limiter`]) knows policies, not wire
//! formats: this crate turns a request into the checks it asks for, and
//! an [`Outcome`](ratewarden_limiter::Outcome) into headers and bodies.
//! It reads and writes `http` types and JSON; it serves nothing.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::net::IpAddr;
//! use http::HeaderMap;
//! use ratewarden_http::{RequestPath, TrustedProxies};
//!
//! // Behind a proxy in 10.0.0.0/8 the client is the rightmost hop it did
//! // not add itself.
//! let proxies = TrustedProxies::new(["10.0.0.0/8".parse()?]);
//! let mut headers = HeaderMap::new();
//! headers.insert("x-forwarded-for", "198.51.100.7, 203.0.113.9, 10.1.1.1".parse()?);
//! let client = proxies.client_ip("10.0.0.2".parse()?, &headers);
//! assert_eq!(client, "203.0.113.9".parse::<IpAddr>()?);
//!
//! // Policies match a path in its normal form; a path that servers read
//! // in different ways has none, and is refused where a policy reads it.
//! assert_eq!(RequestPath::new("//%61pi/orders").normal(), Ok("/api/orders"));
//! assert_eq!(RequestPath::new("/x/../api/orders").normal(), Ok("/api/orders"));
//! assert!(RequestPath::new("/api/%2e%2e/admin").normal().is_err());
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//! - [`headers`]: `RateLimit-Policy`, `RateLimit`, `X-RateLimit-*` and
//!   `Retry-After`, from an outcome or from `(policy, decision)` pairs.
//! - [`fields`]: the `RateLimit-Policy` and `RateLimit` field values,
//!   also sent by Envoy's rate limit service.
//! - [`problem`]: RFC 9457 problem details, and a denial's body and
//!   headers.
//! - `answer.rs`: [`CheckAnswer`], one check's answer as JSON.
//! - [`matching`]: [`RequestPath`] (a path as received and its normal
//!   form) and which policies apply to a request.
//! - [`key`]: [`RequestFacts`], the key a policy counts a request against,
//!   and [`KeyProblem`], why a request has none.
//! - `trusted_proxies.rs`: [`TrustedProxies`], the client behind
//!   `X-Forwarded-For`.
//!
//! The normal form of a path is [`ratewarden_limiter::normalise_path`]'s:
//! the decision layer holds it, as a policy's path pattern is put in that
//! form when the policy is built.

mod answer;
pub mod fields;
pub mod headers;
pub mod key;
pub mod matching;
pub mod problem;
mod trusted_proxies;

pub use answer::CheckAnswer;
pub use key::{KeyProblem, RequestFacts};
pub use matching::RequestPath;
pub use trusted_proxies::TrustedProxies;
