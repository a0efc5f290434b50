//! [`Limiter`]: the one place that asks a store anything.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use ratewarden_core::{
    Acquire, Audit, Batch, Clock, Decision, Key, KeyMatch, Mode, Outcome as CoreOutcome, Store,
    StoreError, Timestamp,
};

use crate::activity::Activity;
use crate::log::LogSummary;
use crate::meters::{Counted, Meters};
use crate::policy::{Changes, FailureMode, PolicyDef, PolicySet};
use crate::prune::Pruner;

/// Which policy a [`Check`] is against.
#[derive(Debug, Clone, Copy)]
pub enum PolicyRef<'a> {
    /// A policy of the current [`PolicySet`], by name.
    Named(&'a str),
    /// A policy the caller holds: one of a set the caller keeps beside the
    /// limiter's (the Envoy rules, which hold their policies), or one made
    /// for this request only (an Envoy request's own `limit`). Its state
    /// is namespaced by its name like any other's.
    Given(&'a Arc<PolicyDef>),
}

impl<'a> From<&'a str> for PolicyRef<'a> {
    fn from(name: &'a str) -> PolicyRef<'a> {
        PolicyRef::Named(name)
    }
}

impl<'a> From<&'a String> for PolicyRef<'a> {
    fn from(name: &'a String) -> PolicyRef<'a> {
        PolicyRef::Named(name)
    }
}

impl<'a> From<&'a Arc<PolicyDef>> for PolicyRef<'a> {
    fn from(def: &'a Arc<PolicyDef>) -> PolicyRef<'a> {
        PolicyRef::Given(def)
    }
}

/// One check: which policy, whose key, how many units.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The policy.
    pub policy: PolicyRef<'a>,
    /// The key, in parts.
    pub key: &'a Key,
    /// Units, at least 1.
    pub cost: NonZeroU64,
    /// An audit entry to record with an allowed, charged check (stores
    /// with an audit log only; the seed route `/ping` uses it).
    pub audit: Option<Audit<'a>>,
}

impl<'a> Check<'a> {
    /// A check of cost 1 without an audit entry, against the policy
    /// named `policy` or a given one.
    pub fn one(policy: impl Into<PolicyRef<'a>>, key: &'a Key) -> Check<'a> {
        Check {
            policy: policy.into(),
            key,
            cost: NonZeroU64::MIN,
            audit: None,
        }
    }
}

/// How a [`CheckResult`] was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The store decided and recorded it.
    Counted,
    /// The store was unavailable and the policy fails open: allowed
    /// unchecked. The decision describes no real window (nothing was
    /// counted), so interfaces send no rate-limit headers with it.
    FailedOpen,
}

/// One check's answer.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// The policy that decided.
    pub policy: Arc<PolicyDef>,
    /// Its own decision (in a denied batch, for a check its policy would
    /// have allowed: allowed, with the key's standing, nothing charged).
    pub decision: Decision,
    /// A shadow policy would have denied this check; the request was let
    /// through and this policy charged nothing.
    pub shadow_denied: bool,
    /// Whether the store decided.
    pub basis: Basis,
}

impl CheckResult {
    /// Whether the check passes as far as its own policy is concerned (a
    /// shadow policy's would-be denial passes).
    pub fn allowed(&self) -> bool {
        self.decision.allowed() || self.shadow_denied
    }

    /// Whether the check can never pass (its cost is above the limit or
    /// burst); never true for a shadow policy.
    pub fn never(&self) -> bool {
        matches!(self.decision.outcome, CoreOutcome::Never) && !self.shadow_denied
    }

    /// What orders results from the most restrictive (smallest) to the
    /// least: the smallest `remaining`, ties broken by the longest wait
    /// (`retry_after`, else `reset_after`).
    pub fn restrictiveness(&self) -> (u64, std::cmp::Reverse<std::time::Duration>) {
        let wait = self.retry_after().unwrap_or(self.decision.reset_after);
        (self.decision.remaining, std::cmp::Reverse(wait))
    }

    /// The wait after which the same check would pass; `None` when it
    /// passes, can never pass, or is a shadow policy's would-be denial.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        if self.shadow_denied {
            None
        } else {
            self.decision.retry_after()
        }
    }
}

/// The answer to a batch of checks, all or nothing.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Whether the request may pass: every check allowed by its policy
    /// (shadow policies never deny).
    pub allowed: bool,
    /// The instant it was decided for.
    pub now: Timestamp,
    /// One result per check, in the order given.
    pub results: Vec<CheckResult>,
}

impl Outcome {
    /// The results of the policies that denied the request, in order.
    pub fn denied_by(&self) -> impl Iterator<Item = &CheckResult> {
        self.results.iter().filter(|r| !r.allowed())
    }

    /// The longest wait among the denying checks: when the same request
    /// could pass. `None` when allowed, or when only checks that can never
    /// pass denied it.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        self.denied_by().filter_map(CheckResult::retry_after).max()
    }

    /// The results a client is told about: those the store counted, of
    /// enforcing policies (a shadow policy is a dry run, and a request let
    /// through unchecked has no quota to show).
    pub fn advertised(&self) -> impl Iterator<Item = &CheckResult> + Clone {
        self.results
            .iter()
            .filter(|r| r.basis == Basis::Counted && r.policy.policy.mode == Mode::Enforce)
    }

    /// The most restrictive of the [`Outcome::advertised`] results
    /// ([`CheckResult::restrictiveness`]). `None` when there is none.
    pub fn most_restrictive(&self) -> Option<&CheckResult> {
        self.advertised().min_by_key(|r| r.restrictiveness())
    }
}

/// What a status read reports.
#[derive(Debug, Clone)]
pub struct Status {
    /// The policy.
    pub policy: Arc<PolicyDef>,
    /// What a request of cost 1 would get now (nothing recorded).
    pub decision: Decision,
    /// The instant it was read for.
    pub now: Timestamp,
}

/// Why the limiter could not answer.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// No policy has this name.
    #[error("no policy is named '{0}'")]
    UnknownPolicy(String),
    /// The store could not answer and a policy of the batch fails closed
    /// (or the operation is a status read or a reset, which never
    /// pretend).
    #[error("the store is unavailable")]
    Unavailable(#[source] StoreError),
    /// The store failed in a way that retrying does not mend (corrupt
    /// data, a full disk, a bug).
    #[error("the store failed")]
    Failed(#[source] StoreError),
}

impl CheckError {
    fn from_store(e: StoreError) -> CheckError {
        if e.is_transient() || matches!(e, StoreError::Closed) {
            CheckError::Unavailable(e)
        } else {
            CheckError::Failed(e)
        }
    }
}

/// The decision layer: the store, the clock and the current policy set.
/// Every interface (HTTP routes, gRPC, the tower Layer) turns its input
/// into [`Check`]s, asks [`Limiter::check`] and renders the [`Outcome`];
/// no interface talks to a store itself.
///
/// Cheap to share behind an `Arc`. The policy set is swapped atomically
/// by [`Limiter::replace_policies`]: a check sees the old set or the new
/// one, never a mix, and counters survive because state belongs to
/// (policy name, algorithm, key) in the store.
#[derive(Debug)]
pub struct Limiter {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    active: ArcSwap<Active>,
    pruner: Arc<Pruner>,
    activity: Arc<Activity>,
    /// Store errors, logged once and then summarised.
    store_errors: LogSummary,
}

/// How often a run of store errors is summarised in the log.
pub const STORE_ERROR_SUMMARY: std::time::Duration = std::time::Duration::from_secs(10);

/// The policy set in force and its metric handles, swapped together.
#[derive(Debug)]
struct Active {
    set: Arc<PolicySet>,
    meters: Meters,
}

impl Active {
    fn new(set: Arc<PolicySet>, activity: &Activity, store: &'static str) -> Active {
        let meters = Meters::new(&set, activity, store);
        Active { set, meters }
    }
}

impl Limiter {
    /// A limiter over `store`, deciding with `clock`'s time and `policies`.
    ///
    /// Install a metrics recorder before: the decision metrics are
    /// registered here (and again on each reload).
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, policies: PolicySet) -> Limiter {
        let pruner = Arc::new(Pruner::new(
            Arc::clone(&store),
            Arc::clone(&clock),
            policies.longest_windows(),
        ));
        let activity = Arc::new(Activity::default());
        let active = Active::new(Arc::new(policies), &activity, store.kind());
        Limiter {
            store,
            clock,
            active: ArcSwap::from_pointee(active),
            pruner,
            activity,
            store_errors: LogSummary::new("store unavailable", STORE_ERROR_SUMMARY),
        }
    }

    /// The current policy set.
    pub fn policies(&self) -> Arc<PolicySet> {
        Arc::clone(&self.active.load().set)
    }

    /// Swaps in `next` atomically; returns what changed. State is kept:
    /// a policy whose limit or window changed applies them to its stored
    /// state, one whose algorithm changed starts afresh, and the state of
    /// removed policies expires by itself.
    pub fn replace_policies(&self, next: PolicySet) -> Changes {
        let changes = self.active.load().set.changes(&next);
        self.pruner.set_windows(next.longest_windows());
        let active = Active::new(Arc::new(next), &self.activity, self.store.kind());
        self.active.store(Arc::new(active));
        changes
    }

    /// The clock decisions are made with.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The clock's current time.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The store (to close it at shutdown; interfaces decide through the
    /// limiter).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The recent activity, for the dashboard (close its buckets with
    /// [`Activity::run_until`]).
    pub fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    /// Logs the store-error summary that is due ([`LogSummary::tick`]);
    /// the service calls it every second.
    pub fn tick_logs(&self) {
        self.store_errors.tick();
    }

    /// Whether the last store call failed.
    pub fn store_failing(&self) -> bool {
        self.store_errors.failing()
    }

    /// How many entries the store holds, when it can tell
    /// ([`Store::entries`]).
    pub async fn store_entries(&self) -> Option<u64> {
        self.store.entries().await
    }

    /// The background pruner (run it with [`Pruner::run_until`]).
    pub fn pruner(&self) -> &Arc<Pruner> {
        &self.pruner
    }

    /// Decides `checks` together, all or nothing: allowed only if every
    /// check's policy allows it; a denied request charges no policy (a
    /// fixed window counting denied attempts still counts its own).
    /// Checks of the same policy and key count as one with the summed
    /// cost. An empty list is allowed.
    ///
    /// # Errors
    /// [`CheckError::UnknownPolicy`] for a name not in the policy set
    /// (nothing is decided); [`CheckError::Unavailable`] when the store
    /// cannot answer and a policy of the batch fails closed;
    /// [`CheckError::Failed`] for a permanent store failure.
    pub async fn check(&self, checks: &[Check<'_>]) -> Result<Outcome, CheckError> {
        // A guard, not a clone: no shared reference count is touched per
        // check; the policies it holds are borrowed until the answer.
        let active = self.active.load();
        let defs = checks
            .iter()
            .map(|c| match c.policy {
                PolicyRef::Named(name) => active
                    .set
                    .get(name)
                    .ok_or_else(|| CheckError::UnknownPolicy(name.to_owned())),
                PolicyRef::Given(def) => Ok(def),
            })
            .collect::<Result<Vec<&Arc<PolicyDef>>, CheckError>>()?;
        let now = self.clock.now();
        let batch = Batch::new(
            now,
            checks.iter().zip(&defs).map(|(c, def)| Acquire {
                policy: &def.policy,
                key: c.key,
                cost: c.cost,
                audit: c.audit,
            }),
        );
        let started = Instant::now();
        let result = self.store.acquire(&batch).await;
        let took = started.elapsed();
        active.meters.store_seconds.record(took.as_secs_f64());
        self.activity.store_call(took);
        self.pruner.sample();
        let decisions = match result {
            Ok(decisions) if decisions.len() == batch.items().len() => decisions,
            Ok(decisions) => {
                let e = StoreError::Failed(format!(
                    "the store answered {} decisions for {} checks",
                    decisions.len(),
                    batch.items().len()
                ));
                return Err(CheckError::Failed(e));
            }
            Err(e) => {
                self.count_store_error(&active.meters, &e);
                return failed(&active.meters, &defs, e, now);
            }
        };
        self.store_errors.recovered();
        let results: Vec<CheckResult> = batch
            .slots()
            .iter()
            .zip(&defs)
            .map(|(&slot, &policy)| {
                // Every slot indexes an item, and there is one decision per item.
                let decision = decisions[slot];
                let shadow_denied = policy.policy.mode == Mode::Shadow && !decision.allowed();
                CheckResult {
                    policy: Arc::clone(policy),
                    decision,
                    shadow_denied,
                    basis: Basis::Counted,
                }
            })
            .collect();
        let allowed = results.iter().all(CheckResult::allowed);
        for (r, check) in results.iter().zip(checks) {
            if r.shadow_denied {
                // One line per request would flood the log under load;
                // the metric counts every one.
                tracing::debug!(
                    policy = r.policy.name(),
                    "a shadow policy would have denied a request"
                );
            }
            if !r.decision.allowed() && !r.shadow_denied {
                self.activity.denied(&r.policy.policy.name, check.key);
            }
            // A check its policy allowed in a batch another policy denied
            // was not charged: not an `allowed` decision of its policy.
            let uncharged = !allowed && r.decision.allowed() && !r.shadow_denied;
            if uncharged {
                continue;
            }
            if let Some(m) = active.meters.of(r.policy.name()) {
                m.record(match r.decision.outcome {
                    _ if r.shadow_denied => Counted::ShadowDenied,
                    CoreOutcome::Allowed => Counted::Allowed,
                    CoreOutcome::Denied { .. } => Counted::Denied,
                    CoreOutcome::Never => Counted::Never,
                });
            }
        }
        active
            .meters
            .decision_seconds
            .record(started.elapsed().as_secs_f64());
        Ok(Outcome {
            allowed,
            now,
            results,
        })
    }

    /// What a request of cost 1 for `key` under `policy` would get now.
    /// Changes nothing.
    ///
    /// # Errors
    /// [`CheckError::UnknownPolicy`]; [`CheckError::Unavailable`] or
    /// [`CheckError::Failed`] when the store cannot answer (a status read
    /// never fails open).
    pub async fn status(
        &self,
        policy: impl Into<PolicyRef<'_>>,
        key: &Key,
    ) -> Result<Status, CheckError> {
        let def = match policy.into() {
            PolicyRef::Named(name) => self.policy(name)?,
            PolicyRef::Given(def) => Arc::clone(def),
        };
        let now = self.clock.now();
        let decision = self
            .store
            .status(&def.policy, key, now)
            .await
            .map_err(|e| self.store_error(&self.active.load().meters, e))?;
        Ok(Status {
            policy: def,
            decision,
            now,
        })
    }

    /// Deletes `policy`'s state for the keys `keys` selects; returns how
    /// many counters held usage.
    ///
    /// # Errors
    /// As [`Limiter::status`]: a reset never pretends to have happened.
    pub async fn reset(&self, policy: &str, keys: KeyMatch<'_>) -> Result<u64, CheckError> {
        let def = self.policy(policy)?;
        self.store
            .reset(&def.policy, keys, self.clock.now())
            .await
            .map_err(|e| self.store_error(&self.active.load().meters, e))
    }

    /// Whether the store can answer now (one cheap round trip for a
    /// networked store): what readiness and gRPC health report.
    ///
    /// # Errors
    /// [`CheckError::Unavailable`] or [`CheckError::Failed`] as the store
    /// answers.
    pub async fn ready(&self) -> Result<(), CheckError> {
        self.store.ping().await.map_err(CheckError::from_store)
    }

    /// Counts and logs (summarised) a store error.
    fn store_error(&self, meters: &Meters, e: StoreError) -> CheckError {
        self.count_store_error(meters, &e);
        CheckError::from_store(e)
    }

    fn count_store_error(&self, meters: &Meters, e: &StoreError) {
        meters.store_errors.increment(1);
        self.store_errors.record(e);
    }

    fn policy(&self, name: &str) -> Result<Arc<PolicyDef>, CheckError> {
        self.active
            .load()
            .set
            .get(name)
            .cloned()
            .ok_or_else(|| CheckError::UnknownPolicy(name.to_owned()))
    }
}

/// A store error during a check: fail open when every policy of the
/// batch does and the error is transient, else refuse.
fn failed(
    meters: &Meters,
    defs: &[&Arc<PolicyDef>],
    error: StoreError,
    now: Timestamp,
) -> Result<Outcome, CheckError> {
    let open = error.is_transient() && defs.iter().all(|d| d.on_store_error == FailureMode::Open);
    if !open {
        meters.failed_closed.increment(1);
        return Err(CheckError::from_store(error));
    }
    meters.failed_open.increment(1);
    let results = defs
        .iter()
        .map(|def| {
            if let Some(m) = meters.of(def.name()) {
                m.record(Counted::FailedOpen);
            }
            CheckResult {
                decision: Decision {
                    limit: def.policy.quota.limit(),
                    remaining: def.policy.quota.limit(),
                    ..FAILED_OPEN
                },
                policy: Arc::clone(def),
                shadow_denied: false,
                basis: Basis::FailedOpen,
            }
        })
        .collect();
    Ok(Outcome {
        allowed: true,
        now,
        results,
    })
}

/// A decision that describes no window: allowed, nothing counted.
const FAILED_OPEN: Decision = Decision {
    outcome: CoreOutcome::Allowed,
    limit: 0,
    remaining: 0,
    used: 0,
    reset_after: std::time::Duration::ZERO,
};
