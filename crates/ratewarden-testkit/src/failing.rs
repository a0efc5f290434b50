//! [`FailingStore`]: a store whose every call fails, for the failure modes
//! (fail open / fail closed, 503 and 500 answers, health checks).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ratewarden_core::{
    Algorithm, Batch, Decision, Key, KeyMatch, Policy, Store, StoreError, Timestamp,
};

/// A store whose every call fails: transiently ([`FailingStore::unavailable`],
/// what fail open / fail closed is about) or for good
/// ([`FailingStore::broken`]).
#[derive(Debug)]
pub struct FailingStore {
    transient: bool,
}

impl FailingStore {
    /// Every call fails with [`StoreError::Unavailable`] ("connection
    /// refused").
    pub fn unavailable() -> Arc<FailingStore> {
        Arc::new(FailingStore { transient: true })
    }

    /// Every call fails with [`StoreError::Failed`] (a corrupt database).
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
