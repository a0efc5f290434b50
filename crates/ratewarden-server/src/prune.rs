//! Deleting expired state (SPEC section 1, "Pruning"): a background task
//! once per shortest window, plus about 1 % of requests (sampled), as seed A
//! suggests. The task stops on the shutdown token.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ratewarden_core::{Algorithm, Clock, Store};
use tokio_util::sync::CancellationToken;

/// Prunes each algorithm's state with the longest window of its policies.
#[derive(Debug)]
pub struct Pruner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// (algorithm, longest window of the policies using it).
    targets: Vec<(Algorithm, Duration)>,
    /// When the last sampled prune started, ns since the epoch.
    last_sampled: AtomicU64,
    /// Whether a sampled prune is running.
    running: AtomicBool,
}

/// One request in this many also prunes.
const SAMPLE_ONE_IN: u32 = 100;

/// The least time between two sampled prunes.
pub const SAMPLE_GAP: Duration = Duration::from_secs(1);

impl Pruner {
    /// A pruner for policies using these (algorithm, window) pairs; several
    /// windows of one algorithm are reduced to the longest, so no policy
    /// loses live state.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        windows: impl IntoIterator<Item = (Algorithm, Duration)>,
    ) -> Pruner {
        let mut targets: Vec<(Algorithm, Duration)> = Vec::new();
        for (algorithm, window) in windows {
            match targets.iter_mut().find(|(a, _)| *a == algorithm) {
                Some((_, longest)) => *longest = (*longest).max(window),
                None => targets.push((algorithm, window)),
            }
        }
        Pruner {
            store,
            clock,
            targets,
            last_sampled: AtomicU64::new(0),
            running: AtomicBool::new(false),
        }
    }

    /// Prunes every algorithm once; errors are logged, not returned.
    pub async fn run_once(&self) {
        let now = self.clock.now();
        for &(algorithm, window) in &self.targets {
            match self.store.prune(algorithm, window, now).await {
                Ok(0) => {}
                Ok(deleted) => tracing::debug!(%algorithm, deleted, "pruned expired state"),
                Err(e) => tracing::warn!(%algorithm, error = %e, "pruning failed"),
            }
        }
    }

    /// With probability 1/100, prunes in the background, unless a prune
    /// is running or one started less than [`SAMPLE_GAP`] ago: under load
    /// 1 % of requests would otherwise mean hundreds of prunes a second.
    pub fn sample(self: &Arc<Self>) {
        if !rand::random_ratio(1, SAMPLE_ONE_IN) {
            return;
        }
        let now = self.clock.now().as_unix_nanos();
        let last = self.last_sampled.load(Ordering::Relaxed);
        let gap = ratewarden_core::clock::duration_nanos(SAMPLE_GAP);
        if now.saturating_sub(last) < gap || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        self.last_sampled.store(now, Ordering::Relaxed);
        let pruner = Arc::clone(self);
        tokio::spawn(async move {
            pruner.run_once().await;
            pruner.running.store(false, Ordering::Release);
        });
    }

    /// The shortest window: how often the background task runs (at least
    /// once a second, at most once an hour).
    pub fn interval(&self) -> Duration {
        let shortest = self
            .targets
            .iter()
            .map(|&(_, w)| w)
            .min()
            .unwrap_or(Duration::from_secs(60));
        shortest.clamp(Duration::from_secs(1), Duration::from_secs(3600))
    }

    /// Prunes every [`Pruner::interval`] until `stop` is cancelled.
    pub async fn run_until(self: Arc<Self>, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(self.interval());
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = ticks.tick() => self.run_once().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewarden_core::ManualClock;

    #[derive(Debug)]
    struct NoStore;

    #[async_trait::async_trait]
    impl Store for NoStore {
        async fn acquire(
            &self,
            _: ratewarden_core::Acquire<'_>,
        ) -> Result<ratewarden_core::Decision, ratewarden_core::StoreError> {
            Err(ratewarden_core::StoreError::Closed)
        }
        async fn status(
            &self,
            _: &ratewarden_core::Policy,
            _: &ratewarden_core::Key,
            _: ratewarden_core::Timestamp,
        ) -> Result<ratewarden_core::Decision, ratewarden_core::StoreError> {
            Err(ratewarden_core::StoreError::Closed)
        }
        async fn reset(
            &self,
            _: Algorithm,
            _: &ratewarden_core::Key,
        ) -> Result<u64, ratewarden_core::StoreError> {
            Ok(0)
        }
        async fn prune(
            &self,
            _: Algorithm,
            _: Duration,
            _: ratewarden_core::Timestamp,
        ) -> Result<u64, ratewarden_core::StoreError> {
            Ok(0)
        }
        fn keeps_audit_log(&self) -> bool {
            false
        }
    }

    #[test]
    fn one_algorithm_used_by_several_policies_is_pruned_with_the_longest_window() {
        let pruner = Pruner::new(
            Arc::new(NoStore),
            Arc::new(ManualClock::default()),
            [
                (Algorithm::FixedWindow, Duration::from_secs(60)),
                (Algorithm::SlidingLog, Duration::from_secs(5)),
                (Algorithm::FixedWindow, Duration::from_secs(3600)),
            ],
        );
        assert_eq!(
            pruner.targets,
            vec![
                (Algorithm::FixedWindow, Duration::from_secs(3600)),
                (Algorithm::SlidingLog, Duration::from_secs(5))
            ]
        );
        assert_eq!(pruner.interval(), Duration::from_secs(5));
    }
}
