//! Helpers shared by the axum and tonic tests: a clock standing on a
//! window edge, a store that cannot answer, small policy shorthands.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ratewarden_core::{
    Algorithm, Batch, Decision, Key, KeyMatch, ManualClock, Policy, Store, StoreError, Timestamp,
};
use ratewarden_tower::{KeyPart, PolicyBuilder};

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

/// A store whose every call fails: transiently (`unavailable`, what
/// fail open / fail closed is about) or for good (`broken`).
#[derive(Debug)]
pub struct FailingStore {
    transient: bool,
}

impl FailingStore {
    pub fn unavailable() -> Arc<FailingStore> {
        Arc::new(FailingStore { transient: true })
    }

    pub fn broken() -> Arc<FailingStore> {
        Arc::new(FailingStore { transient: false })
    }

    fn error(&self) -> StoreError {
        if self.transient {
            StoreError::Unavailable("connection refused".into())
        } else {
            StoreError::Failed("database disk image is malformed".into())
        }
    }
}

#[async_trait]
impl Store for FailingStore {
    async fn acquire(&self, _: &Batch<'_>) -> Result<Vec<Decision>, StoreError> {
        Err(self.error())
    }
    async fn status(&self, _: &Policy, _: &Key, _: Timestamp) -> Result<Decision, StoreError> {
        Err(self.error())
    }
    async fn reset(&self, _: &Policy, _: KeyMatch<'_>, _: Timestamp) -> Result<u64, StoreError> {
        Err(self.error())
    }
    async fn prune(&self, _: Algorithm, _: Duration, _: Timestamp) -> Result<u64, StoreError> {
        Err(self.error())
    }
    fn keeps_audit_log(&self) -> bool {
        false
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Err(self.error())
    }
}
