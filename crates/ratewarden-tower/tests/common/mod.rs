//! Helpers shared by the axum and tonic tests: a clock standing on a
//! window edge, a store that cannot answer, small policy shorthands.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use ratewarden_core::{Key, ManualClock, Timestamp};
use ratewarden_tower::{KeyPart, PolicyBuilder, RateLimitLayer, RateLimitLayerBuilder};

/// A whole number of minutes and hours since the epoch, so fixed windows
/// of a minute or an hour start exactly here.
pub const START: Timestamp = Timestamp::from_unix_secs(1_800_000_000);

pub const MINUTE: Duration = Duration::from_secs(60);

pub fn clock() -> ManualClock {
    ManualClock::new(START)
}

/// A fixed window of `limit` requests per minute keyed by `key`.
pub fn per_minute(name: &str, limit: u64, key: impl IntoIterator<Item = KeyPart>) -> PolicyBuilder {
    PolicyBuilder::fixed_window(name)
        .limit(limit)
        .per(MINUTE)
        .key(key)
}

pub fn header(name: &str) -> KeyPart {
    KeyPart::Header(name.to_ascii_lowercase())
}

pub fn literal(text: &str) -> KeyPart {
    KeyPart::Literal(text.to_owned())
}

pub fn key(part: &str) -> Key {
    Key::single(part).expect("a short key")
}

#[allow(unused_imports)] // not every test file fails a store
pub use ratewarden_testkit::FailingStore;

/// A layer of `policies` on the memory store and `clock`.
pub fn layer_of(
    clock: &ManualClock,
    policies: impl IntoIterator<Item = PolicyBuilder>,
) -> RateLimitLayerBuilder {
    policies.into_iter().fold(
        RateLimitLayer::builder().clock(Arc::new(clock.clone())),
        |b, p| b.policy(p),
    )
}

pub fn build(builder: RateLimitLayerBuilder) -> RateLimitLayer {
    builder.build().expect("a valid layer")
}
