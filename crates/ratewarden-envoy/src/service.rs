//! `ShouldRateLimit` as the decision layer answers it, independent of the
//! wire (gRPC or protobuf JSON): a request's descriptors become checks of
//! the limits their rules reach, the [`Limiter`] decides them all or
//! nothing, and its outcome becomes one status per descriptor.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use ratewarden_config::envoy::options::EnvoyOptions;
use ratewarden_config::envoy::{EnvoyConfig, Limit, Rule, Unit};
use ratewarden_core::algorithm::fixed_window;
use ratewarden_core::{
    Algorithm, Decision, Key, KeyError, Outcome as CoreOutcome, Policy, Quota, Timestamp, ceil_secs,
};
use ratewarden_http::fields::FieldItem;
use ratewarden_limiter::{
    Basis, Check, CheckError, CheckResult, FailureMode, Limiter, PolicyDef, PolicyRef,
};
use sha2::{Digest, Sha256};

use crate::headers::{header_values, limit_headers};

/// `limit_remaining` of an `unlimited` descriptor (the reference's).
pub const UNLIMITED_REMAINING: u32 = u32::MAX;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request is malformed: gRPC `INVALID_ARGUMENT`, HTTP 400.
    #[error("{0}")]
    InvalidArgument(String),
    /// The store could not answer and a limit of the request fails
    /// closed: gRPC `UNAVAILABLE` (Envoy's `failure_mode_deny` decides),
    /// HTTP 503.
    #[error("the rate limit store is unavailable")]
    Unavailable(#[source] CheckError),
    /// The store failed permanently: gRPC `INTERNAL`, HTTP 500.
    #[error("the rate limit store failed")]
    Internal(#[source] CheckError),
}

impl From<CheckError> for ServiceError {
    fn from(e: CheckError) -> ServiceError {
        match e {
            CheckError::Unavailable(_) => ServiceError::Unavailable(e),
            CheckError::UnknownPolicy(_) | CheckError::Failed(_) => ServiceError::Internal(e),
        }
    }
}

/// The rules in force, the failure mode of request-given limits and the
/// service's options, swapped together on reload.
#[derive(Debug)]
struct Rules {
    config: Arc<EnvoyConfig>,
    failure: FailureMode,
    options: EnvoyOptions,
}

/// Envoy's rate limit service over the decision layer. Cheap to share
/// behind an `Arc`; the rules are swapped atomically by
/// [`RateLimitService::replace_rules`].
#[derive(Debug)]
pub struct RateLimitService {
    limiter: Arc<Limiter>,
    rules: ArcSwap<Rules>,
}

/// What one descriptor asks for.
#[derive(Debug)]
enum Plan<'a> {
    /// No limit applies: an unknown domain, an unmatched descriptor, a
    /// whitelisting value entry, a replaced limit.
    NoLimit,
    /// `unlimited: true` (the rule, for its `replaces` and `name`).
    Unlimited(&'a Rule),
    /// A limit to decide (or only to read, when `hits` is 0).
    Limited(Limited<'a>),
}

#[derive(Debug)]
struct Limited<'a> {
    /// The configured rule; `None` for the request's own `limit`.
    rule: Option<&'a Rule>,
    def: Arc<PolicyDef>,
    key: Key,
    requests_per_unit: u32,
    unit: Unit,
    hits: u64,
    /// The item name of its `RateLimit` header entry.
    display: std::borrow::Cow<'a, str>,
    /// The name its statistics go under, when it differs from the rule's
    /// path (`detailed_metric`, `value_to_metric`).
    metric: Option<String>,
}

impl RateLimitService {
    /// A service deciding through `limiter` with `config`'s rules and the
    /// default options; limits a request gives itself fail as `failure`
    /// says.
    pub fn new(
        limiter: Arc<Limiter>,
        config: Arc<EnvoyConfig>,
        failure: FailureMode,
    ) -> RateLimitService {
        RateLimitService {
            limiter,
            rules: ArcSwap::from_pointee(Rules {
                config,
                failure,
                options: EnvoyOptions::default(),
            }),
        }
    }

    /// The same service with `options`.
    #[must_use]
    pub fn with_options(self, options: EnvoyOptions) -> RateLimitService {
        let rules = self.rules.load();
        self.rules.store(Arc::new(Rules {
            config: Arc::clone(&rules.config),
            failure: rules.failure,
            options,
        }));
        drop(rules);
        self
    }

    /// Swaps in new rules (a reload), keeping the options. Counters
    /// survive: they belong to the rules' paths in the store. The
    /// limiter's policy set must hold the new rules' limits too (their
    /// windows decide pruning).
    pub fn replace_rules(&self, config: Arc<EnvoyConfig>, failure: FailureMode) {
        let options = self.rules.load().options.clone();
        self.rules.store(Arc::new(Rules {
            config,
            failure,
            options,
        }));
    }

    /// Swaps in new rules and options together (a reload).
    pub fn reload(&self, config: Arc<EnvoyConfig>, failure: FailureMode, options: EnvoyOptions) {
        self.rules.store(Arc::new(Rules {
            config,
            failure,
            options,
        }));
    }

    /// The rules in force.
    pub fn rules(&self) -> Arc<EnvoyConfig> {
        Arc::clone(&self.rules.load().config)
    }

    /// The options in force.
    pub fn options(&self) -> EnvoyOptions {
        self.rules.load().options.clone()
    }

    /// Whether the service counts as healthy as far as its rules go: not
    /// when [`EnvoyOptions::require_rules`] asks for a domain and none is
    /// loaded.
    pub fn has_required_rules(&self) -> bool {
        let rules = self.rules.load();
        !rules.options.require_rules || rules.config.domain_count() > 0
    }

    /// The decision layer it asks.
    pub fn limiter(&self) -> &Arc<Limiter> {
        &self.limiter
    }

    /// Decides `request` (see docs/envoy.md): all descriptors all or
    /// nothing; one status per descriptor, in order.
    ///
    /// # Errors
    /// [`ServiceError::InvalidArgument`] for an empty domain, no
    /// descriptors or more than [`EnvoyOptions::max_descriptors`], a
    /// descriptor `limit` with an unknown unit or `is_negative_hits`;
    /// [`ServiceError::Unavailable`] when the store cannot answer and a
    /// limit fails closed; [`ServiceError::Internal`] when it failed.
    pub async fn should_rate_limit(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, ServiceError> {
        if request.domain.is_empty() {
            return Err(ServiceError::InvalidArgument(
                "the rate limit domain must not be empty".into(),
            ));
        }
        if request.descriptors.is_empty() {
            return Err(ServiceError::InvalidArgument(
                "the request must have at least one descriptor".into(),
            ));
        }
        let rules = self.rules.load();
        let max = rules.options.max_descriptors;
        if request.descriptors.len() > max {
            return Err(ServiceError::InvalidArgument(format!(
                "the request has {} descriptors; at most {max} are accepted \
                 (envoy_max_descriptors)",
                request.descriptors.len()
            )));
        }
        let mut plans = Vec::with_capacity(request.descriptors.len());
        for (i, descriptor) in request.descriptors.iter().enumerate() {
            plans.push(plan(&rules, request, i, descriptor)?);
        }
        drop_replaced(&mut plans);
        let checks: Vec<Check<'_>> = plans
            .iter()
            .filter_map(|p| match p {
                Plan::Limited(l) => NonZeroU64::new(l.hits).map(|cost| Check {
                    policy: PolicyRef::Given(&l.def),
                    key: &l.key,
                    cost,
                    audit: None,
                }),
                _ => None,
            })
            .collect();
        let outcome = if checks.is_empty() {
            None
        } else {
            Some(self.limiter.check(&checks).await?)
        };
        let mut results = outcome.as_ref().map(|o| o.results.iter());
        let allowed = outcome.as_ref().is_none_or(|o| o.allowed);
        let mut statuses = Vec::with_capacity(plans.len());
        let mut items: Vec<FieldItem<'_>> = Vec::new();
        for p in &plans {
            let (status, counted) = match p {
                Plan::NoLimit => (no_limit(0), None),
                Plan::Unlimited(_) => (no_limit(UNLIMITED_REMAINING), None),
                Plan::Limited(l) if l.hits == 0 => (self.peek(l).await?, Some("within_limit")),
                Plan::Limited(l) => {
                    let now = outcome.as_ref().map_or(Timestamp::EPOCH, |o| o.now);
                    match results.as_mut().and_then(Iterator::next) {
                        Some(r) => decided(l, r, now),
                        None => (no_limit(0), None),
                    }
                }
            };
            if let (Plan::Limited(l), Some(outcome)) = (p, counted) {
                count_metric(l, outcome);
            }
            if let (Plan::Limited(l), Some(limit)) = (p, &status.current_limit) {
                let reset = status.duration_until_reset.map_or(0, |d| d.seconds.max(0));
                let item = FieldItem {
                    name: &l.display,
                    quota: u64::from(limit.requests_per_unit),
                    window_secs: ceil_secs(l.def.policy.quota.window()),
                    remaining: u64::from(status.limit_remaining),
                    reset_secs: u64::try_from(reset).unwrap_or(0),
                };
                items.push(item);
            }
            statuses.push(status);
        }
        let mut headers = header_values(items);
        if let Some(names) = &rules.options.limit_headers {
            headers.extend(limit_headers(names, &statuses));
        }
        Ok(RateLimitResponse {
            overall_code: if allowed { Code::Ok } else { Code::OverLimit } as i32,
            statuses,
            response_headers_to_add: headers,
            ..RateLimitResponse::default()
        })
    }

    /// A descriptor with `hits_addend` 0: read, never charged, never
    /// denying (nothing over the limit is ever stored).
    async fn peek(&self, l: &Limited<'_>) -> Result<DescriptorStatus, ServiceError> {
        match self.limiter.status(PolicyRef::Given(&l.def), &l.key).await {
            Ok(status) => {
                let decision = Decision {
                    outcome: CoreOutcome::Allowed,
                    ..status.decision
                };
                Ok(limited_status(l, Code::Ok, &decision, status.now))
            }
            // The decision layer has logged the error (summarised).
            Err(CheckError::Unavailable(_)) if l.def.on_store_error == FailureMode::Open => {
                Ok(no_limit(0))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// What `descriptor` (the `index`th of `request`) asks for.
fn plan<'a>(
    rules: &'a Rules,
    request: &RateLimitRequest,
    index: usize,
    descriptor: &'a RateLimitDescriptor,
) -> Result<Plan<'a>, ServiceError> {
    if descriptor.is_negative_hits {
        return Err(ServiceError::InvalidArgument(format!(
            "descriptors[{index}]: is_negative_hits (giving quota back) is not supported"
        )));
    }
    // The reference's rule: the descriptor's own hits_addend when set (0
    // checks without charging), else the request's, where 0 means 1.
    let hits = descriptor
        .hits_addend
        .map_or(u64::from(request.hits_addend.max(1)), |h| h.value);
    let Some(domain) = rules.config.domain(&request.domain) else {
        return Ok(Plan::NoLimit);
    };
    let entries: Vec<(&str, &str)> = descriptor
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str()))
        .collect();
    let too_long = |e| ServiceError::InvalidArgument(format!("descriptors[{index}]: {e}"));
    if let Some(given) = &descriptor.limit {
        let unit = Unit::from_number(given.unit)
            .filter(|u| *u != Unit::Unknown)
            .ok_or_else(|| {
                ServiceError::InvalidArgument(format!(
                    "descriptors[{index}].limit: unit {} is not SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR",
                    given.unit
                ))
            })?;
        let secs = unit.seconds().unwrap_or(1);
        let quota = Quota::new(
            u64::from(given.requests_per_unit),
            Duration::from_secs(secs),
        )
        .map_err(|e| ServiceError::InvalidArgument(format!("descriptors[{index}].limit: {e}")))?;
        let path = descriptor_path(&request.domain, &entries);
        // One counter per domain, limit and unit: two descriptors with
        // the same entries and unit but other limits must not share a
        // counter, or whichever came first would decide both.
        let name = format!(
            "{}:limit:{}/{}",
            request.domain,
            given.requests_per_unit,
            unit.as_str()
        );
        let def = Arc::new(PolicyDef::new(
            Policy::new(name, Algorithm::FixedWindow, quota),
            rules.failure,
        ));
        // Every entry's key and value; a descriptor without entries has
        // one counter too (one empty part, since a key needs a part).
        let parts: Vec<&str> = if entries.is_empty() {
            vec![""]
        } else {
            entries.iter().flat_map(|(k, v)| [*k, *v]).collect()
        };
        let key = counter_key(&parts).map_err(too_long)?;
        return Ok(Plan::Limited(Limited {
            rule: None,
            def,
            key,
            requests_per_unit: given.requests_per_unit,
            unit,
            hits,
            display: path.into(),
            metric: None,
        }));
    }
    let Some((found, metric)) = domain.find_with_metric(&entries) else {
        return Ok(Plan::NoLimit);
    };
    let rule = found.rule.as_ref();
    match &rule.limit {
        Limit::Unlimited => Ok(Plan::Unlimited(rule)),
        Limit::Limited {
            def,
            requests_per_unit,
            unit,
        } => {
            let key = counter_key(&found.key_parts).map_err(too_long)?;
            let metric = (metric != rule.path).then(|| metric.into_owned());
            Ok(Plan::Limited(Limited {
                rule: Some(rule),
                def: Arc::clone(def),
                key,
                requests_per_unit: *requests_per_unit,
                unit: *unit,
                hits,
                display: rule.display_name().into(),
                metric,
            }))
        }
    }
}

impl<'a> Plan<'a> {
    /// The configured rule this plan applies, if any.
    fn rule(&self) -> Option<&'a Rule> {
        match self {
            Plan::Limited(Limited { rule, .. }) => *rule,
            Plan::Unlimited(rule) => Some(rule),
            Plan::NoLimit => None,
        }
    }
}

/// `replaces`: a limit whose `name` another limit of the same request
/// replaces is not applied (the reference's rule: the names are gathered
/// from every matched rule, unlimited ones included, before any is
/// dropped, so an unlimited rule's `replaces` counts too).
fn drop_replaced(plans: &mut [Plan<'_>]) {
    let names: Vec<&str> = plans
        .iter()
        .filter_map(Plan::rule)
        .flat_map(|rule| rule.replaces.iter().map(String::as_str))
        .collect();
    if names.is_empty() {
        return;
    }
    for p in plans.iter_mut() {
        if p.rule()
            .is_some_and(|rule| !rule.name.is_empty() && names.contains(&rule.name.as_str()))
        {
            *p = Plan::NoLimit;
        }
    }
}

/// The first part of a digest key: not UTF-8, so no descriptor (whose
/// keys and values are UTF-8 strings) can name the same counter.
const DIGEST_PART: &[u8] = b"\xffsha256";

/// The counter key of a descriptor's `parts`. Parts longer than
/// [`Key::MAX_BYTES`] (4096 bytes) together are counted under their
/// SHA-256 digest, so padding a value never escapes a limit (answering
/// INVALID_ARGUMENT instead would let them through: Envoy passes a
/// request on an error with `failure_mode_deny: false`). The digest covers each
/// part's length too, so other parts never give the same digest.
///
/// # Errors
/// None in practice: only an empty `parts` (every caller gives one part
/// or more).
fn counter_key<S: AsRef<str>>(parts: &[S]) -> Result<Key, KeyError> {
    match Key::new(parts.iter().map(|p| p.as_ref().as_bytes())) {
        Err(KeyError::TooLong { .. }) => {}
        built => return built,
    }
    let mut digest = Sha256::new();
    for part in parts {
        let part = part.as_ref().as_bytes();
        digest.update((part.len() as u64).to_le_bytes());
        digest.update(part);
    }
    let digest: [u8; 32] = digest.finalize().into();
    Key::new([DIGEST_PART, &digest[..]])
}

/// `domain.key_value.key…` of a request's entries (an override's name).
fn descriptor_path(domain: &str, entries: &[(&str, &str)]) -> String {
    let mut path = domain.to_owned();
    for (k, v) in entries {
        path.push('.');
        path.push_str(k);
        if !v.is_empty() {
            path.push('_');
            path.push_str(v);
        }
    }
    path
}

/// A status without a limit: OK, `remaining` as given.
fn no_limit(remaining: u32) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        limit_remaining: remaining,
        ..DescriptorStatus::default()
    }
}

/// The status of a decided descriptor, and the outcome its statistics
/// count (none when it was not checked).
fn decided(
    l: &Limited<'_>,
    r: &CheckResult,
    now: Timestamp,
) -> (DescriptorStatus, Option<&'static str>) {
    if r.basis == Basis::FailedOpen {
        // Allowed unchecked: no quota to report.
        return (no_limit(0), None);
    }
    let (code, outcome) = match (r.allowed(), r.shadow_denied) {
        (_, true) => (Code::Ok, "shadow_mode"),
        (true, false) => (Code::Ok, "within_limit"),
        (false, false) => (Code::OverLimit, "over_limit"),
    };
    (limited_status(l, code, &r.decision, now), Some(outcome))
}

fn limited_status(l: &Limited<'_>, code: Code, d: &Decision, now: Timestamp) -> DescriptorStatus {
    let wait = duration_until_reset(&l.def.policy, d, now);
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(RateLimit {
            name: l.rule.map(|r| r.name.clone()).unwrap_or_default(),
            requests_per_unit: l.requests_per_unit,
            unit: l.unit as i32,
        }),
        limit_remaining: u32::try_from(d.remaining).unwrap_or(u32::MAX),
        duration_until_reset: Some(ProtoDuration {
            seconds: i64::try_from(ceil_secs(wait)).unwrap_or(i64::MAX),
            nanos: 0,
        }),
        ..DescriptorStatus::default()
    }
}

/// For a fixed window, the time to the window's end; for the other
/// algorithms, the wait until more quota on a denial (a window when the
/// request can never pass) and until the key is back to full otherwise.
fn duration_until_reset(policy: &Policy, d: &Decision, now: Timestamp) -> Duration {
    if policy.algorithm == Algorithm::FixedWindow {
        let k = fixed_window::window_index(&policy.quota, now);
        let end = fixed_window::window_start(&policy.quota, k.saturating_add(1));
        return Duration::from_nanos(end.as_unix_nanos().saturating_sub(now.as_unix_nanos()));
    }
    match d.outcome {
        CoreOutcome::Denied { retry_after } => retry_after,
        CoreOutcome::Never => policy.quota.window(),
        CoreOutcome::Allowed => d.reset_after,
    }
}

/// `ratewarden_envoy_descriptors_total{descriptor, outcome}` for limits
/// whose statistics name carries request values (`detailed_metric`,
/// `value_to_metric`); the others are counted by the decision layer's
/// `ratewarden_decisions_total{policy}` under their path.
fn count_metric(l: &Limited<'_>, outcome: &'static str) {
    let Some(name) = &l.metric else {
        return;
    };
    metrics::counter!("ratewarden_envoy_descriptors_total", "descriptor" => name.clone(), "outcome" => outcome)
        .increment(1);
}
