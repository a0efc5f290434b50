//! Redis `TIME` as the time source (`--time-source redis`).
//!
//! By default every instance decides windows with its own clock, so clock
//! skew between instances shifts their window edges. With this clock all
//! instances follow Redis's clock instead: each measures the offset between
//! its own clock and Redis `TIME` (taken at the midpoint of the round trip)
//! and re-measures it every second. A decision still costs one round trip:
//! the time is not read from Redis per request, so the remaining error is
//! about half a round trip plus a second of drift.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use ratewarden_core::{Clock, StoreError, SystemClock, Timestamp};

use crate::RedisStore;

/// The local clock corrected by the last measured offset to Redis `TIME`.
/// Clones share one offset.
#[derive(Debug, Clone, Default)]
pub struct RedisClock {
    /// Redis time minus local time, in nanoseconds.
    offset_nanos: Arc<AtomicI64>,
}

impl RedisClock {
    /// A clock with no offset yet (the local time until the first sync).
    pub fn new() -> RedisClock {
        RedisClock::default()
    }

    /// Measures the offset to `store`'s Redis once.
    ///
    /// # Errors
    /// [`StoreError`] when Redis does not answer; the old offset is kept.
    pub async fn sync(&self, store: &RedisStore) -> Result<(), StoreError> {
        let before = SystemClock.now();
        let remote = store.server_time().await?;
        let after = SystemClock.now();
        self.offset_nanos
            .store(offset_nanos(before, after, remote), Ordering::Relaxed);
        Ok(())
    }

    /// Re-measures the offset every `every`, forever (end it by dropping
    /// the task); failures keep the last offset and are logged by the caller
    /// through the returned errors being ignored here on purpose.
    pub async fn follow(self, store: Arc<RedisStore>, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            // A failed measurement keeps the previous offset.
            let _ = self.sync(&store).await;
        }
    }

    /// The current offset (Redis minus local), in nanoseconds.
    pub fn offset_nanos(&self) -> i64 {
        self.offset_nanos.load(Ordering::Relaxed)
    }
}

impl Clock for RedisClock {
    fn now(&self) -> Timestamp {
        let local = i128::from(SystemClock.now().as_unix_nanos());
        let corrected = local + i128::from(self.offset_nanos());
        Timestamp::from_unix_nanos(u64::try_from(corrected.max(0)).unwrap_or(u64::MAX))
    }
}

/// `remote − midpoint(before, after)`, saturating into an `i64`.
fn offset_nanos(before: Timestamp, after: Timestamp, remote: Timestamp) -> i64 {
    let mid = (i128::from(before.as_unix_nanos()) + i128::from(after.as_unix_nanos())) / 2;
    let offset = i128::from(remote.as_unix_nanos()) - mid;
    i64::try_from(offset).unwrap_or(if offset < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_taken_at_the_midpoint_of_the_round_trip() {
        let t = Timestamp::from_unix_nanos;
        assert_eq!(offset_nanos(t(1_000), t(3_000), t(5_000)), 3_000);
        assert_eq!(offset_nanos(t(10_000), t(10_000), t(4_000)), -6_000);
    }

    #[test]
    fn a_clock_applies_its_offset() {
        let clock = RedisClock::new();
        clock.offset_nanos.store(-1_000_000_000, Ordering::Relaxed);
        let behind = clock.now().as_unix_nanos();
        let local = SystemClock.now().as_unix_nanos();
        assert!(local - behind >= 999_000_000, "{local} {behind}");
    }
}
