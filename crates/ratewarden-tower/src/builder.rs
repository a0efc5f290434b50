//! [`RateLimitLayerBuilder`]: a layer's policies (in code, or a limiter's
//! set), keys, trusted proxies and missing-key answers.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use http::request::Parts;
use ratewarden_core::{Clock, MemoryStore, Store, SystemClock};
use ratewarden_http::TrustedProxies;
use ratewarden_limiter::{Limiter, PolicySet};

use crate::answer::MissingKey;
use crate::layer::{RateLimitLayer, Shared};
use crate::policy::{BuildError, KeyFn, PolicyBuilder};

/// Builds a [`RateLimitLayer`].
#[derive(Debug)]
pub struct RateLimitLayerBuilder {
    source: Source,
    only: Option<Vec<String>>,
    key_fns: Vec<(String, KeyFn)>,
    trusted: TrustedProxies,
    on_missing_key: MissingKey,
    missing_by_policy: Vec<(String, MissingKey)>,
    /// A setting that does not fit the source, reported by `build`.
    misuse: Option<&'static str>,
}

/// Where a layer's limiter comes from: built from policies in code, or
/// one the caller holds.
#[derive(Debug)]
pub(crate) enum Source {
    New {
        store: Option<Arc<dyn Store>>,
        clock: Option<Arc<dyn Clock>>,
        policies: Vec<PolicyBuilder>,
    },
    Limiter(Arc<Limiter>),
}

impl RateLimitLayerBuilder {
    pub(crate) fn new(source: Source) -> RateLimitLayerBuilder {
        RateLimitLayerBuilder {
            source,
            only: None,
            key_fns: Vec::new(),
            trusted: TrustedProxies::none(),
            on_missing_key: MissingKey::default(),
            missing_by_policy: Vec::new(),
            misuse: None,
        }
    }

    /// Adds a policy (with [`RateLimitLayer::builder`] only).
    pub fn policy(mut self, policy: PolicyBuilder) -> RateLimitLayerBuilder {
        match &mut self.source {
            Source::New { policies, .. } => policies.push(policy),
            Source::Limiter(_) => self.misuse = Some(".policy(..)"),
        }
        self
    }

    /// The store (with [`RateLimitLayer::builder`]; default: a
    /// [`MemoryStore`] of this layer's own, with room for
    /// [`DEFAULT_MAX_KEYS`](ratewarden_core::memory::DEFAULT_MAX_KEYS)
    /// keys). Share a Redis store to share limits between instances; pass
    /// a memory store of another size to bound memory otherwise: at the
    /// bound a new key follows its policy's failure mode (fail open: let
    /// through uncounted; fail closed: 503), the keys held are decided
    /// exactly.
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use std::sync::Arc;
    /// use ratewarden_tower::{MemoryStore, RateLimitLayer};
    ///
    /// let store = MemoryStore::new().with_max_keys(NonZeroU64::new(100_000).unwrap());
    /// let builder = RateLimitLayer::builder().store(Arc::new(store));
    /// # let _ = builder;
    /// ```
    pub fn store(mut self, store: Arc<dyn Store>) -> RateLimitLayerBuilder {
        match &mut self.source {
            Source::New { store: s, .. } => *s = Some(store),
            Source::Limiter(_) => self.misuse = Some(".store(..)"),
        }
        self
    }

    /// The clock (with [`RateLimitLayer::builder`]; default: the system
    /// clock). Tests pass a `ManualClock` to step through windows exactly.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> RateLimitLayerBuilder {
        match &mut self.source {
            Source::New { clock: c, .. } => *c = Some(clock),
            Source::Limiter(_) => self.misuse = Some(".clock(..)"),
        }
        self
    }

    /// Applies only the policies named (with
    /// [`RateLimitLayer::from_limiter`]: one layer per route, say).
    pub fn only<I, N>(mut self, names: I) -> RateLimitLayerBuilder
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.only = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// The key of policy `policy` from a function of the request's head
    /// instead of its `key` parts (an authenticated user id from the
    /// request's extensions, say); `None` means the request has no key
    /// ([`MissingKey`]).
    pub fn key_fn<F, K>(mut self, policy: &str, f: F) -> RateLimitLayerBuilder
    where
        F: Fn(&Parts) -> Option<K> + Send + Sync + 'static,
        K: AsRef<[u8]>,
    {
        self.key_fns.push((policy.to_owned(), KeyFn::new(f)));
        self
    }

    /// The proxies whose `X-Forwarded-For` is believed for `client_ip`
    /// (CIDRs; default none: the TCP peer is the client). Behind them the
    /// client is the rightmost untrusted hop, never the leftmost, which
    /// the client writes itself.
    pub fn trusted_proxies(
        mut self,
        nets: impl IntoIterator<Item = ipnet::IpNet>,
    ) -> RateLimitLayerBuilder {
        self.trusted = TrustedProxies::new(nets);
        self
    }

    /// What to answer when a request has no key for a policy (default:
    /// 400 problem details). A key over 4096 bytes is not missing: it is
    /// always refused with 400, so a long header cannot escape a limit.
    pub fn on_missing_key(mut self, answer: MissingKey) -> RateLimitLayerBuilder {
        self.on_missing_key = answer;
        self
    }

    /// What to answer when a request has no key for policy `policy`, in
    /// place of [`on_missing_key`](RateLimitLayerBuilder::on_missing_key)'s
    /// answer (a per-user policy refusing with 401 beside a per-address one
    /// that skips, say).
    pub fn on_missing_key_for(mut self, policy: &str, answer: MissingKey) -> RateLimitLayerBuilder {
        self.missing_by_policy.push((policy.to_owned(), answer));
        self
    }

    /// The layer.
    ///
    /// # Errors
    /// [`BuildError`] naming the policy and the value: an invalid policy,
    /// two with one name, `policy`, `store` or `clock` on a layer from a
    /// limiter, or a name in [`only`](RateLimitLayerBuilder::only) or
    /// [`key_fn`](RateLimitLayerBuilder::key_fn) that is no policy.
    pub fn build(mut self) -> Result<RateLimitLayer, BuildError> {
        if let Some(setting) = self.misuse {
            return Err(BuildError(format!(
                "{setting} is for RateLimitLayer::builder(); a layer from a limiter uses the \
                 limiter's store, clock and policy set"
            )));
        }
        let limiter = match self.source {
            Source::Limiter(limiter) => limiter,
            Source::New {
                store,
                clock,
                policies,
            } => {
                let mut defs = Vec::with_capacity(policies.len());
                for p in policies {
                    let missing = p.missing_key();
                    let (def, key_fn) = p.build()?;
                    if let Some(f) = key_fn {
                        self.key_fns.push((def.name().to_owned(), f));
                    }
                    if let Some(answer) = missing {
                        self.missing_by_policy.push((def.name().to_owned(), answer));
                    }
                    defs.push(def);
                }
                let set = PolicySet::new(defs).map_err(|e| BuildError(e.to_string()))?;
                let store = store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
                let clock = clock.unwrap_or_else(|| Arc::new(SystemClock));
                Arc::new(Limiter::new(store, clock, set))
            }
        };
        let set = limiter.policies();
        let named = self
            .only
            .iter()
            .flatten()
            .chain(self.key_fns.iter().map(|(n, _)| n))
            .chain(self.missing_by_policy.iter().map(|(n, _)| n));
        for name in named {
            if set.get(name).is_none() {
                return Err(BuildError(format!("no policy is named '{name}'")));
            }
        }
        Ok(RateLimitLayer {
            shared: Arc::new(Shared {
                limiter,
                only: self.only,
                key_fns: self.key_fns,
                trusted: self.trusted,
                on_missing_key: self.on_missing_key,
                missing_by_policy: self.missing_by_policy,
                warned_no_client_ip: AtomicBool::new(false),
            }),
        })
    }
}
