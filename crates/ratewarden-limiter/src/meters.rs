//! The decision metrics, registered once per policy set: a check only
//! increments handles (no label strings built per request).
//!
//! Through the `metrics` facade: register a recorder (an exporter) before
//! building the [`crate::Limiter`]; handles registered while none is
//! installed stay no-ops.

use std::collections::HashMap;
use std::sync::Arc;

use metrics::{Counter, Histogram, SharedString};

use crate::activity::{Activity, PolicyTotals};
use crate::policy::PolicySet;

/// One policy's `ratewarden_decisions_total{policy, outcome}` counters.
#[derive(Debug, Clone)]
pub(crate) struct PolicyMeters {
    pub(crate) allowed: Counter,
    pub(crate) denied: Counter,
    pub(crate) never: Counter,
    pub(crate) shadow_denied: Counter,
    pub(crate) failed_open: Counter,
    /// The dashboard's totals of this policy.
    pub(crate) totals: Arc<PolicyTotals>,
}

/// What a check counts as, for its policy.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counted {
    Allowed,
    Denied,
    Never,
    ShadowDenied,
    FailedOpen,
}

impl PolicyMeters {
    /// Counts one check in the metric and in the dashboard's totals (a
    /// `never` is a denial there).
    pub(crate) fn record(&self, counted: Counted) {
        let (counter, total) = match counted {
            Counted::Allowed => (&self.allowed, &self.totals.allowed),
            Counted::Denied => (&self.denied, &self.totals.denied),
            Counted::Never => (&self.never, &self.totals.denied),
            Counted::ShadowDenied => (&self.shadow_denied, &self.totals.shadow_denied),
            Counted::FailedOpen => (&self.failed_open, &self.totals.failed_open),
        };
        counter.increment(1);
        total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn new(name: &Arc<str>, activity: &Activity) -> PolicyMeters {
        let counter = |outcome: &'static str| {
            let policy = SharedString::from(Arc::clone(name));
            metrics::counter!("ratewarden_decisions_total", "policy" => policy, "outcome" => outcome)
        };
        PolicyMeters {
            allowed: counter("allowed"),
            denied: counter("denied"),
            never: counter("never"),
            shadow_denied: counter("shadow_denied"),
            failed_open: counter("failed_open"),
            totals: activity.totals_of(name),
        }
    }
}

/// Every handle the limiter records to.
#[derive(Debug)]
pub(crate) struct Meters {
    by_policy: HashMap<Arc<str>, PolicyMeters, foldhash::fast::RandomState>,
    /// `ratewarden_decision_duration_seconds`: a whole check.
    pub(crate) decision_seconds: Histogram,
    /// `ratewarden_store_duration_seconds{store}`: the store's atomic step.
    pub(crate) store_seconds: Histogram,
    /// `ratewarden_store_errors_total{store}`.
    pub(crate) store_errors: Counter,
    /// `ratewarden_store_failures_total{handling="open"}`.
    pub(crate) failed_open: Counter,
    /// `ratewarden_store_failures_total{handling="closed"}`.
    pub(crate) failed_closed: Counter,
}

impl Meters {
    pub(crate) fn new(set: &PolicySet, activity: &Activity, store: &'static str) -> Meters {
        Meters {
            by_policy: set
                .iter()
                .map(|d| {
                    (
                        Arc::clone(&d.policy.name),
                        PolicyMeters::new(&d.policy.name, activity),
                    )
                })
                .collect(),
            decision_seconds: metrics::histogram!("ratewarden_decision_duration_seconds"),
            store_seconds: metrics::histogram!("ratewarden_store_duration_seconds", "store" => store),
            store_errors: metrics::counter!("ratewarden_store_errors_total", "store" => store),
            failed_open: metrics::counter!("ratewarden_store_failures_total", "handling" => "open"),
            failed_closed: metrics::counter!("ratewarden_store_failures_total", "handling" => "closed"),
        }
    }

    /// The counters of the policy named `name` (every policy of the set
    /// has them).
    pub(crate) fn of(&self, name: &str) -> Option<&PolicyMeters> {
        self.by_policy.get(name)
    }
}
