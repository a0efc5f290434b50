//! Deleting expired state: a background task once per shortest window,
//! plus about 1 % of checks (sampled), as seed A suggests. The windows
//! follow the policy set: after a reload, each algorithm is pruned with
//! the longest window of its current policies, so no policy loses live
//! state.

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

    /// The shortest window: how often the background task runs (at least
    /// once a second, at most once an hour).
    pub fn interval(&self) -> Duration {
        let shortest = self
            .targets()
            .iter()
            .map(|&(_, w)| w)
            .min()
            .unwrap_or(Duration::from_secs(60));
        shortest.clamp(Duration::from_secs(1), Duration::from_secs(3600))
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
