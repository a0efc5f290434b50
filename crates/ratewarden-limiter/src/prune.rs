//! Deleting expired state: a background task every eighth of the shortest
//! window (between 1 s and 60 s), plus about 1 % of checks (sampled), as
//! seed A suggests. The windows follow the policy set: after a reload,
//! each algorithm is pruned with the longest window of its current
//! policies, so no policy loses live state.
//!
//! Why that often: state expires whether or not requests arrive, and what
//! expired during a pause in the load is best deleted during the pause.
//! Pruned once per window, a burst's state that expired while the service
//! sat idle would be deleted by the first sampled prune of the next burst,
//! with every decision queued behind it on SQLite's one writer
//! (docs/design/pruning.md#every-eighth-of-the-shortest-window). A prune
//! that finds nothing costs an index seek per table.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ratewarden_core::{Algorithm, Clock, Store};
use tokio_util::sync::CancellationToken;

/// Prunes each algorithm's state with the longest window of its policies.
#[derive(Debug)]
pub struct Pruner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// (algorithm, longest window of the policies using it).
    targets: Mutex<Vec<(Algorithm, Duration)>>,
    /// When the last sampled prune started, ns since the epoch.
    last_sampled: AtomicU64,
    /// Whether a sampled prune is running.
    running: AtomicBool,
}

/// One check in this many also prunes.
const SAMPLE_ONE_IN: u32 = 100;

/// The least time between two sampled prunes.
pub const SAMPLE_GAP: Duration = Duration::from_secs(1);

/// The background task runs this many times per shortest window.
const BACKGROUND_PER_WINDOW: u32 = 8;

/// The background task's period is kept between these.
const BACKGROUND_MIN: Duration = Duration::from_secs(1);
const BACKGROUND_MAX: Duration = Duration::from_secs(60);

impl Pruner {
    /// A pruner for policies using these (algorithm, longest window) pairs.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        windows: Vec<(Algorithm, Duration)>,
    ) -> Pruner {
        Pruner {
            store,
            clock,
            targets: Mutex::new(windows),
            last_sampled: AtomicU64::new(0),
            running: AtomicBool::new(false),
        }
    }

    /// Follows a new policy set's windows.
    pub fn set_windows(&self, windows: Vec<(Algorithm, Duration)>) {
        *self.targets() = windows;
    }

    fn targets(&self) -> std::sync::MutexGuard<'_, Vec<(Algorithm, Duration)>> {
        // The list is replaced whole; a panic elsewhere cannot leave it torn.
        self.targets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Prunes every algorithm once; errors are logged, not returned.
    pub async fn run_once(&self) {
        let now = self.clock.now();
        let targets = self.targets().clone();
        for (algorithm, window) in targets {
            match self.store.prune(algorithm, window, now).await {
                Ok(0) => {}
                Ok(deleted) => tracing::debug!(%algorithm, deleted, "pruned expired state"),
                Err(e) => tracing::warn!(%algorithm, error = %e, "pruning failed"),
            }
        }
    }

    /// With probability 1/100, prunes in the background, unless a prune
    /// is running or one started less than [`SAMPLE_GAP`] ago: under load
    /// 1 % of checks would otherwise mean hundreds of prunes a second.
    /// Needs a tokio runtime.
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

    /// How often the background task runs: an eighth of the shortest
    /// window, at most once a second and at least once a minute (60 s
    /// windows: every 7.5 s).
    pub fn interval(&self) -> Duration {
        let shortest = self
            .targets()
            .iter()
            .map(|&(_, w)| w)
            .min()
            .unwrap_or(Duration::from_secs(60));
        (shortest / BACKGROUND_PER_WINDOW).clamp(BACKGROUND_MIN, BACKGROUND_MAX)
    }

    /// Prunes every [`Pruner::interval`] (read again after each prune, so
    /// a reload's windows apply) until `stop` is cancelled.
    pub async fn run_until(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(self.interval()) => self.run_once().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use ratewarden_core::{ManualClock, MemoryStore, Timestamp};

    use super::*;

    fn pruner(windows: &[(Algorithm, u64)]) -> Pruner {
        let windows = windows
            .iter()
            .map(|&(a, secs)| (a, Duration::from_secs(secs)))
            .collect();
        let clock = ManualClock::new(Timestamp::from_unix_secs(1_767_225_600));
        Pruner::new(Arc::new(MemoryStore::new()), Arc::new(clock), windows)
    }

    /// An eighth of the shortest window, kept within 1 s and 60 s, and
    /// following a reload's windows.
    #[test]
    fn the_background_period_is_an_eighth_of_the_shortest_window() {
        use Algorithm::{FixedWindow, SlidingLog};
        let p = pruner(&[(FixedWindow, 60), (SlidingLog, 120)]);
        assert_eq!(p.interval(), Duration::from_millis(7_500));
        p.set_windows(vec![(SlidingLog, Duration::from_secs(2))]);
        assert_eq!(
            p.interval(),
            Duration::from_secs(1),
            "at most once a second"
        );
        p.set_windows(vec![(FixedWindow, Duration::from_secs(86_400))]);
        assert_eq!(
            p.interval(),
            Duration::from_secs(60),
            "at least once a minute"
        );
        p.set_windows(Vec::new());
        assert_eq!(
            p.interval(),
            Duration::from_millis(7_500),
            "no policy: as 60 s"
        );
    }
}
