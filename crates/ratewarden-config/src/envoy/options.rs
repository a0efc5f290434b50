//! The Envoy service's settings beside its rules, where the Envoy
//! service looks for them: how many descriptors one call may carry, the
//! reference server's optional `RateLimit-Limit` / `-Remaining` /
//! `-Reset` response headers, and whether health needs rules loaded.
//! They are settings like any other: the types live in the crate's
//! `types.rs`, the parsers in [`crate::values`] and the defaults in
//! [`crate::defaults`].

pub use crate::defaults::ENVOY_MAX_DESCRIPTORS as DEFAULT_MAX_DESCRIPTORS;
pub use crate::types::{EnvoyOptions, LimitHeaders};
pub use crate::values::{
    MAX_MAX_DESCRIPTORS, check_max_descriptors, parse_limit_headers, parse_max_descriptors,
};
