//! Recent activity, for the dashboard: decisions per policy and the
//! store's latency in buckets of [`BUCKET`] over the last [`BUCKETS`]
//! buckets, and the most-denied keys.
//!
//! A check adds to atomic totals (per policy, and the store's count, sum
//! and maximum of latencies); [`Activity::run_until`] closes a bucket
//! every [`BUCKET`] by taking the totals' differences. The most-denied
//! keys are counted with the space-saving algorithm (Metwally et al.,
//! 2005) over at most [`TRACKED_KEYS`] keys, in two generations of
//! [`BUCKET`] × [`BUCKETS`] each: heavy hitters are exact up to the
//! count of the least-counted tracked key, and a flood of distinct keys
//! costs a bounded table.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ratewarden_core::{Clock, Key, Timestamp};
use tokio_util::sync::CancellationToken;

/// The length of one bucket.
pub const BUCKET: Duration = Duration::from_secs(10);

/// How many closed buckets are kept (five minutes).
pub const BUCKETS: usize = 30;

/// How many keys the most-denied table tracks at most.
pub const TRACKED_KEYS: usize = 1024;

/// One policy's decisions: allowed, denied, shadow-denied, failed open.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Allowed decisions.
    pub allowed: u64,
    /// Denied (and never allowed) decisions.
    pub denied: u64,
    /// Denials of a shadow policy (let through).
    pub shadow_denied: u64,
    /// Decisions allowed because the store failed and the policy fails open.
    pub failed_open: u64,
}

impl Counts {
    fn minus(self, earlier: Counts) -> Counts {
        Counts {
            allowed: self.allowed.saturating_sub(earlier.allowed),
            denied: self.denied.saturating_sub(earlier.denied),
            shadow_denied: self.shadow_denied.saturating_sub(earlier.shadow_denied),
            failed_open: self.failed_open.saturating_sub(earlier.failed_open),
        }
    }

    /// The sum of `self` and `other`.
    pub fn plus(self, other: Counts) -> Counts {
        Counts {
            allowed: self.allowed + other.allowed,
            denied: self.denied + other.denied,
            shadow_denied: self.shadow_denied + other.shadow_denied,
            failed_open: self.failed_open + other.failed_open,
        }
    }
}

/// One policy's running totals (shared by every policy set that has a
/// policy of that name, so a reload keeps them).
#[derive(Debug, Default)]
pub(crate) struct PolicyTotals {
    pub(crate) allowed: AtomicU64,
    pub(crate) denied: AtomicU64,
    pub(crate) shadow_denied: AtomicU64,
    pub(crate) failed_open: AtomicU64,
}

impl PolicyTotals {
    fn load(&self) -> Counts {
        Counts {
            allowed: self.allowed.load(Ordering::Relaxed),
            denied: self.denied.load(Ordering::Relaxed),
            shadow_denied: self.shadow_denied.load(Ordering::Relaxed),
            failed_open: self.failed_open.load(Ordering::Relaxed),
        }
    }
}

/// The store's latency over a bucket.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Store calls.
    pub decisions: u64,
    /// Their mean, in milliseconds (0 without calls).
    pub mean_ms: f64,
    /// The slowest, in milliseconds.
    pub max_ms: f64,
}

#[derive(Debug, Default)]
struct LatencyTotals {
    count: AtomicU64,
    sum_nanos: AtomicU64,
    /// The maximum since the last bucket closed (reset by the sampler).
    max_nanos: AtomicU64,
}

/// One closed (or, last, the current) bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// When the bucket started.
    pub at: Timestamp,
    /// Decisions per policy name.
    pub policies: HashMap<Arc<str>, Counts>,
    /// The store's latency.
    pub store: Latency,
}

/// A key among the most denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedKey {
    /// The policy that denied it.
    pub policy: Arc<str>,
    /// The key.
    pub key: Key,
    /// Denials counted (space-saving: at least the true count).
    pub denied: u64,
    /// How much `denied` may exceed the true count: the count the key
    /// inherited when it took another's place.
    pub overestimate: u64,
}

#[derive(Debug, Default)]
struct Ring {
    closed: VecDeque<Bucket>,
    /// The totals when the current bucket started.
    base: HashMap<Arc<str>, Counts>,
    base_latency: (u64, u64),
    current_since: Option<Timestamp>,
}

#[derive(Debug, Default)]
struct TopKeys {
    /// (count, inherited over-estimate) per key.
    current: HashMap<(Arc<str>, Key), (u64, u64)>,
    previous: HashMap<(Arc<str>, Key), (u64, u64)>,
    generation_buckets: usize,
}

fn millis(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

/// The recent activity of one limiter.
#[derive(Debug, Default)]
pub struct Activity {
    totals: Mutex<HashMap<Arc<str>, Arc<PolicyTotals>>>,
    latency: LatencyTotals,
    ring: Mutex<Ring>,
    top: Mutex<TopKeys>,
}

impl Activity {
    /// The totals of the policy `name`, made on first use.
    pub(crate) fn totals_of(&self, name: &Arc<str>) -> Arc<PolicyTotals> {
        let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(totals.entry(Arc::clone(name)).or_default())
    }

    /// Adds one store call's latency.
    pub(crate) fn store_call(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.latency.count.fetch_add(1, Ordering::Relaxed);
        self.latency.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.latency.max_nanos.fetch_max(nanos, Ordering::Relaxed);
    }

    /// Counts a denial of `key` by `policy`. Skipped when another thread
    /// holds the table (the table is a sample under contention).
    pub(crate) fn denied(&self, policy: &Arc<str>, key: &Key) {
        let Ok(mut top) = self.top.try_lock() else {
            return;
        };
        let id = (Arc::clone(policy), key.clone());
        if let Some((n, _)) = top.current.get_mut(&id) {
            *n += 1;
            return;
        }
        if top.current.len() < TRACKED_KEYS {
            top.current.insert(id, (1, 0));
            return;
        }
        // Space-saving: the new key takes the place of the least counted,
        // inheriting its count as its possible over-estimate.
        let least = top
            .current
            .iter()
            .min_by_key(|(_, (n, _))| *n)
            .map(|(k, (n, _))| (k.clone(), *n));
        if let Some((old, n)) = least {
            top.current.remove(&old);
            top.current.insert(id, (n + 1, n));
        }
    }

    /// Closes the current bucket at `now`.
    pub fn close_bucket(&self, now: Timestamp) {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        // One reading of the totals ends this bucket and starts the next:
        // nothing counted in between is lost.
        let (mut bucket, totals, latency) = self.current(&ring, now);
        let max = self.latency.max_nanos.swap(0, Ordering::Relaxed);
        bucket.store.max_ms = millis(max);
        ring.base = totals;
        ring.base_latency = latency;
        ring.current_since = Some(now);
        ring.closed.push_back(bucket);
        while ring.closed.len() > BUCKETS {
            ring.closed.pop_front();
        }
        drop(ring);
        let mut top = self.top.lock().unwrap_or_else(PoisonError::into_inner);
        top.generation_buckets += 1;
        if top.generation_buckets >= BUCKETS {
            top.previous = std::mem::take(&mut top.current);
            top.generation_buckets = 0;
        }
    }

    /// The closed buckets, oldest first, then the current one (from its
    /// start to `now`).
    pub fn buckets(&self, now: Timestamp) -> Vec<Bucket> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let (current, _, _) = self.current(&ring, now);
        ring.closed.iter().cloned().chain([current]).collect()
    }

    /// The `n` most-denied keys of the last one or two generations, most
    /// denied first.
    pub fn most_denied(&self, n: usize) -> Vec<DeniedKey> {
        let top = self.top.lock().unwrap_or_else(PoisonError::into_inner);
        let mut merged: HashMap<&(Arc<str>, Key), (u64, u64)> = HashMap::new();
        for (id, (count, over)) in top.previous.iter().chain(&top.current) {
            let entry = merged.entry(id).or_default();
            entry.0 += count;
            entry.1 += over;
        }
        let mut keys: Vec<DeniedKey> = merged
            .into_iter()
            .map(|((policy, key), (denied, overestimate))| DeniedKey {
                policy: Arc::clone(policy),
                key: key.clone(),
                denied,
                overestimate,
            })
            .collect();
        keys.sort_by(|a, b| {
            b.denied
                .cmp(&a.denied)
                .then_with(|| a.key.encoded().cmp(b.key.encoded()))
        });
        keys.truncate(n);
        keys
    }

    fn snapshot(&self) -> HashMap<Arc<str>, Counts> {
        let totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
        totals
            .iter()
            .map(|(name, t)| (Arc::clone(name), t.load()))
            .collect()
    }

    /// The current bucket (from its start to `now`), with the totals and
    /// the store calls' (count, sum) it was read from.
    fn current(
        &self,
        ring: &Ring,
        now: Timestamp,
    ) -> (Bucket, HashMap<Arc<str>, Counts>, (u64, u64)) {
        let totals = self.snapshot();
        let policies = totals
            .iter()
            .map(|(name, counts)| {
                let base = ring.base.get(name).copied().unwrap_or_default();
                (Arc::clone(name), counts.minus(base))
            })
            .collect();
        let latency = (
            self.latency.count.load(Ordering::Relaxed),
            self.latency.sum_nanos.load(Ordering::Relaxed),
        );
        let count = latency.0.saturating_sub(ring.base_latency.0);
        let sum = latency.1.saturating_sub(ring.base_latency.1);
        let bucket = Bucket {
            at: ring.current_since.unwrap_or(now),
            policies,
            store: Latency {
                decisions: count,
                mean_ms: if count == 0 {
                    0.0
                } else {
                    millis(sum) / count as f64
                },
                max_ms: millis(self.latency.max_nanos.load(Ordering::Relaxed)),
            },
        };
        (bucket, totals, latency)
    }

    /// Closes a bucket every [`BUCKET`] until `stop`.
    pub async fn run_until(self: Arc<Self>, clock: Arc<dyn Clock>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(BUCKET);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        {
            let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
            ring.current_since.get_or_insert(clock.now());
        }
        loop {
            tokio::select! {
                _ = tick.tick() => self.close_bucket(clock.now()),
                () = stop.cancelled() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ratewarden_core::{Key, Timestamp};

    use super::{Activity, TRACKED_KEYS};

    #[test]
    fn a_flood_of_distinct_keys_keeps_the_heavy_hitter() {
        let activity = Activity::default();
        let policy: Arc<str> = Arc::from("api");
        let heavy = Key::single("heavy").unwrap_or_else(|_| unreachable!());
        for i in 0..(TRACKED_KEYS * 3) {
            activity.denied(&policy, &heavy);
            let other = Key::single(format!("k{i}")).unwrap_or_else(|_| unreachable!());
            activity.denied(&policy, &other);
        }
        let top = activity.most_denied(3);
        assert_eq!(top[0].key, heavy);
        assert!(top[0].denied >= (TRACKED_KEYS * 3) as u64);
        assert_eq!(
            top[0].denied - top[0].overestimate,
            (TRACKED_KEYS * 3) as u64
        );
    }

    #[test]
    fn buckets_hold_the_differences() {
        let activity = Activity::default();
        let name: Arc<str> = Arc::from("p");
        let t = activity.totals_of(&name);
        t.allowed.fetch_add(5, std::sync::atomic::Ordering::Relaxed);
        activity.close_bucket(Timestamp::from_unix_nanos(10));
        t.allowed.fetch_add(2, std::sync::atomic::Ordering::Relaxed);
        let buckets = activity.buckets(Timestamp::from_unix_nanos(20));
        assert_eq!(buckets.len(), 2);
        assert_eq!(buckets[0].policies["p"].allowed, 5);
        assert_eq!(buckets[1].policies["p"].allowed, 2);
        assert_eq!(buckets[1].at, Timestamp::from_unix_nanos(10));
    }
}
