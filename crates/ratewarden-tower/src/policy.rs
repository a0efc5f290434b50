//! Policies written in code: [`PolicyBuilder`], with the units in the
//! method names (`limit` is units per window, `per` the window as a
//! [`Duration`]) so no number is ambiguous.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use ratewarden_core::{Algorithm, Key, Policy, Quota};
use ratewarden_http::KeyProblem;
use ratewarden_limiter::{FailureMode, KeyPart, PathPattern, PolicyDef, RequestMatch};

use crate::MissingKey;

/// A custom key: a function of the request's head (method, URI, headers,
/// extensions) giving the key's bytes, or `None` when the request has no
/// key (an unauthenticated request, say), which is answered as
/// [`crate::MissingKey`] says.
#[derive(Clone)]
pub struct KeyFn(pub(crate) Arc<KeyFnBody>);

/// What a [`KeyFn`] holds: the request's head to its key, or why none.
type KeyFnBody = dyn Fn(&Parts) -> Result<Key, KeyProblem> + Send + Sync;

impl KeyFn {
    /// A key function from `f`.
    pub fn new<F, K>(f: F) -> KeyFn
    where
        F: Fn(&Parts) -> Option<K> + Send + Sync + 'static,
        K: AsRef<[u8]>,
    {
        KeyFn(Arc::new(move |parts| match f(parts) {
            Some(k) => Key::single(k.as_ref()).map_err(KeyProblem::TooLong),
            None => Err(KeyProblem::NoKey),
        }))
    }
}

impl fmt::Debug for KeyFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyFn(..)")
    }
}

/// Why a policy or a layer could not be built. Every message names the
/// policy and the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BuildError(pub(crate) String);

/// A policy built in code: the same settings as a `[[policies]]` table of
/// the configuration file.
///
/// ```
/// use std::time::Duration;
/// use ratewarden_tower::{KeyPart, PolicyBuilder};
///
/// // 100 requests per minute per client address, bursts of 20.
/// let api = PolicyBuilder::gcra("api")
///     .limit(100)
///     .per(Duration::from_secs(60))
///     .burst(20)
///     .key([KeyPart::ClientIp]);
/// // 5 logins per 10 minutes per user name, counting refused attempts,
/// // refusing when the store cannot answer.
/// let logins = PolicyBuilder::fixed_window("logins")
///     .limit(5)
///     .per(Duration::from_secs(600))
///     .count_denied()
///     .key([KeyPart::Query("user".into())])
///     .methods(["POST"])
///     .path("/login")
///     .fail_closed();
/// # let _ = (api, logins);
/// ```
#[derive(Debug, Clone)]
pub struct PolicyBuilder {
    name: String,
    algorithm: Algorithm,
    limit: Option<u64>,
    window: Option<Duration>,
    burst: Option<u64>,
    count_denied: bool,
    shadow: bool,
    on_store_error: FailureMode,
    key: Vec<KeyPart>,
    key_fn: Option<KeyFn>,
    missing_key: Option<MissingKey>,
    methods: Option<Vec<String>>,
    path: Option<String>,
}

impl PolicyBuilder {
    fn new(name: &str, algorithm: Algorithm) -> PolicyBuilder {
        PolicyBuilder {
            name: name.to_owned(),
            algorithm,
            limit: None,
            window: None,
            burst: None,
            count_denied: false,
            shadow: false,
            on_store_error: FailureMode::Open,
            key: Vec::new(),
            key_fn: None,
            missing_key: None,
            methods: None,
            path: None,
        }
    }

    /// A fixed window: at most `limit` units per window, the counter
    /// starting afresh at each window boundary (aligned to the epoch).
    pub fn fixed_window(name: &str) -> PolicyBuilder {
        PolicyBuilder::new(name, Algorithm::FixedWindow)
    }

    /// A sliding log: at most `limit` units in any window-long span
    /// ending now (exact; one entry per unit).
    pub fn sliding_log(name: &str) -> PolicyBuilder {
        PolicyBuilder::new(name, Algorithm::SlidingLog)
    }

    /// A sliding window counter: the current window's count plus the
    /// previous one's, weighted by the part of it still in the span.
    pub fn sliding_window(name: &str) -> PolicyBuilder {
        PolicyBuilder::new(name, Algorithm::SlidingWindow)
    }

    /// GCRA (a token bucket without timers): `limit` units per window,
    /// evenly spaced, with bursts of [`PolicyBuilder::burst`] units.
    pub fn gcra(name: &str) -> PolicyBuilder {
        PolicyBuilder::new(name, Algorithm::Gcra)
    }

    /// Units per window (required; a request costs 1 unit).
    pub fn limit(mut self, units: u64) -> PolicyBuilder {
        self.limit = Some(units);
        self
    }

    /// The window (required): `limit` units per `window`.
    pub fn per(mut self, window: Duration) -> PolicyBuilder {
        self.window = Some(window);
        self
    }

    /// GCRA only: how many units may pass at once after a quiet period
    /// (default: the limit).
    pub fn burst(mut self, units: u64) -> PolicyBuilder {
        self.burst = Some(units);
        self
    }

    /// Fixed window only: denied attempts count too, so a client that
    /// keeps trying stays refused.
    pub fn count_denied(mut self) -> PolicyBuilder {
        self.count_denied = true;
        self
    }

    /// Shadow mode: decided and counted, never denying (a dry run; a
    /// would-be denial is logged and counted in metrics).
    pub fn shadow(mut self) -> PolicyBuilder {
        self.shadow = true;
        self
    }

    /// Fail open (the default): when the store cannot answer, requests
    /// pass unchecked (logged and counted).
    pub fn fail_open(mut self) -> PolicyBuilder {
        self.on_store_error = FailureMode::Open;
        self
    }

    /// Fail closed: when the store cannot answer, requests get 503 (gRPC
    /// `UNAVAILABLE`).
    pub fn fail_closed(mut self) -> PolicyBuilder {
        self.on_store_error = FailureMode::Closed;
        self
    }

    /// The key, from request parts in order ([`KeyPart`]: a header, the
    /// client address, the path, the method, a query parameter, a literal).
    pub fn key(mut self, parts: impl IntoIterator<Item = KeyPart>) -> PolicyBuilder {
        self.key = parts.into_iter().collect();
        self
    }

    /// The key from a function of the request's head, instead of parts:
    /// `None` means the request has no key ([`crate::MissingKey`]).
    pub fn key_fn<F, K>(mut self, f: F) -> PolicyBuilder
    where
        F: Fn(&Parts) -> Option<K> + Send + Sync + 'static,
        K: AsRef<[u8]>,
    {
        self.key_fn = Some(KeyFn::new(f));
        self
    }

    /// What the layer answers when a request has no key for this policy,
    /// in place of the layer's
    /// [`on_missing_key`](crate::RateLimitLayerBuilder::on_missing_key).
    pub fn on_missing_key(mut self, answer: MissingKey) -> PolicyBuilder {
        self.missing_key = Some(answer);
        self
    }

    pub(crate) fn missing_key(&self) -> Option<MissingKey> {
        self.missing_key
    }

    /// Applies only to these methods (uppercase, compared exactly).
    pub fn methods<I, M>(mut self, methods: I) -> PolicyBuilder
    where
        I: IntoIterator<Item = M>,
        M: Into<String>,
    {
        self.methods = Some(methods.into_iter().map(Into::into).collect());
        self
    }

    /// Applies only to paths matching `pattern`: `*` matches any run of
    /// characters, `/` included (`/api/*` matches `/api/x`, not `/api`).
    pub fn path(mut self, pattern: &str) -> PolicyBuilder {
        self.path = Some(pattern.to_owned());
        self
    }

    /// The policy as the decision layer holds it, and its key function:
    /// for a [`PolicySet`](ratewarden_limiter::PolicySet) of a limiter you
    /// build yourself ([`crate::RateLimitLayer::from_limiter`]; give the
    /// key function to its
    /// [`key_fn`](crate::RateLimitLayerBuilder::key_fn)).
    ///
    /// # Errors
    /// [`BuildError`] naming the policy and the value: an invalid name, no
    /// limit or window, a zero window, `burst` on a policy that is not
    /// GCRA, `count_denied` on one that is not a fixed window, no key, an
    /// empty or lowercase method, a path pattern not starting with `/`.
    pub fn build(self) -> Result<(PolicyDef, Option<KeyFn>), BuildError> {
        let name = &self.name;
        let fail = |what: String| Err(BuildError(format!("policy '{name}': {what}")));
        if let Err(e) = ratewarden_limiter::check_policy_name(name) {
            return Err(BuildError(e));
        }
        let (Some(limit), Some(window)) = (self.limit, self.window) else {
            return fail("needs .limit(units) and .per(window)".into());
        };
        let mut quota = match Quota::new(limit, window) {
            Ok(q) => q,
            Err(e) => return fail(format!("limit {limit} per {window:?}: {e}")),
        };
        match (self.burst, self.algorithm) {
            (Some(burst), Algorithm::Gcra) => quota = quota.with_burst(burst),
            (Some(burst), other) => {
                return fail(format!("burst {burst} is for gcra only, not {other}"));
            }
            (None, _) => {}
        }
        if self.count_denied {
            if self.algorithm != Algorithm::FixedWindow {
                return fail(format!(
                    "count_denied is for fixed_window only, not {}",
                    self.algorithm
                ));
            }
            quota = quota.counting_denied();
        }
        if self.key.is_empty() && self.key_fn.is_none() {
            return fail("needs a key: .key([KeyPart::ClientIp]) or .key_fn(..)".into());
        }
        let methods = match self.methods {
            Some(m) if m.is_empty() => {
                return fail("an empty list of methods matches no request".into());
            }
            Some(m) => {
                if let Some(Err(e)) = m
                    .iter()
                    .map(|m| ratewarden_limiter::check_method(m))
                    .find(Result::is_err)
                {
                    return fail(e);
                }
                Some(m)
            }
            None => None,
        };
        let path = match self.path.as_deref().map(PathPattern::new).transpose() {
            Ok(p) => p,
            Err(e) => return fail(e),
        };
        let matcher =
            (methods.is_some() || path.is_some()).then_some(RequestMatch { methods, path });
        let mut policy = Policy::new(name.as_str(), self.algorithm, quota);
        if self.shadow {
            policy = policy.in_shadow();
        }
        let mut def = PolicyDef::new(policy, self.on_store_error);
        def.key = self.key;
        def.matcher = matcher;
        Ok((def, self.key_fn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(b: PolicyBuilder) -> String {
        b.build().unwrap_err().to_string()
    }

    #[test]
    fn mistakes_are_refused_with_the_policy_and_the_value_named() {
        let ok = || {
            PolicyBuilder::gcra("api")
                .limit(10)
                .per(Duration::from_secs(1))
                .key([KeyPart::ClientIp])
        };
        assert!(ok().build().is_ok());
        assert!(
            error(PolicyBuilder::gcra("api").limit(1).key([KeyPart::Path]))
                .contains(".per(window)")
        );
        assert!(error(ok().per(Duration::ZERO)).contains("policy 'api'"));
        assert!(
            error(
                PolicyBuilder::fixed_window("f")
                    .limit(1)
                    .per(Duration::from_secs(1))
                    .burst(3)
                    .key([KeyPart::Path])
            )
            .contains("burst 3 is for gcra only")
        );
        assert!(error(ok().count_denied()).contains("count_denied is for fixed_window only"));
        assert!(error(ok().key([])).contains("needs a key"));
        assert!(error(ok().methods(["get"])).contains("'get' is not a method"));
        assert!(ok().methods(["M-SEARCH", "PURGE"]).build().is_ok());
        assert!(error(ok().methods(Vec::<String>::new())).contains("matches no request"));
        assert!(error(ok().path("api/*")).contains("'api/*'"));
        assert!(error(PolicyBuilder::gcra("a b")).contains("'a b' is not a policy name"));
        let with_fn = PolicyBuilder::sliding_log("user")
            .limit(1)
            .per(Duration::from_secs(1))
            .key_fn(|p: &Parts| p.headers.get("x-user").map(|v| v.as_bytes().to_vec()));
        let (def, key_fn) = with_fn.build().unwrap();
        assert!(def.key.is_empty() && key_fn.is_some());
    }
}
