//! [`RateLimitLayer`] and the service it wraps around yours.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{Either, Full};
use ratewarden_core::{Clock, Key, MemoryStore, Store, SystemClock};
use ratewarden_limiter::{Check, CheckError, KeyPart, Limiter, Outcome, PolicyDef, PolicySet};
use serde_json::Map;
use smallvec::SmallVec;

use crate::client_ip::TrustedProxies;
use crate::policy::{BuildError, KeyFn, PolicyBuilder};
use crate::render::{PROBLEM_JSON, denial, insert_outcome_headers, problem_json};
use crate::request::{KeyProblem, RequestFacts, RequestPath, key_of, matches};

/// The body of a response from a [`RateLimitService`]: your service's own
/// body, or the layer's answer (a 429, a 503, the missing-key answer).
pub type ResponseBody<B> = Either<B, Full<Bytes>>;

/// What the layer answers when a request has no key for a policy: the
/// client address is unknown (no connection info), or a key function
/// returned `None`. Never a panic, never a 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingKey {
    /// Answer with this status and problem details naming the policy
    /// (gRPC: `UNAUTHENTICATED` for 401, `PERMISSION_DENIED` for 403,
    /// `INVALID_ARGUMENT` otherwise). The default is 400.
    Refuse(StatusCode),
    /// Let the request through without that policy (the others still
    /// apply).
    Skip,
}

impl Default for MissingKey {
    fn default() -> MissingKey {
        MissingKey::Refuse(StatusCode::BAD_REQUEST)
    }
}

/// A tower [`Layer`](tower_layer::Layer) that decides every request with
/// ratewarden's policies before your service sees it: allowed requests
/// get the rate-limit headers on your response, refused ones a 429 with
/// problem details and `Retry-After` (gRPC: `RESOURCE_EXHAUSTED` with a
/// `RetryInfo` and `retry-after` metadata), and your service is never
/// called for them. Clones share one limiter.
///
/// Build it with [`RateLimitLayer::builder`] (policies in code, any
/// store) or [`RateLimitLayer::from_limiter`] (a limiter you hold, whose
/// policies may come from a configuration file and change on reload).
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    limiter: Arc<Limiter>,
    /// `None`: every policy of the limiter's set that has a key.
    only: Option<Vec<String>>,
    key_fns: Vec<(String, KeyFn)>,
    trusted: TrustedProxies,
    on_missing_key: MissingKey,
    /// Per-policy answers, before `on_missing_key`.
    missing_by_policy: Vec<(String, MissingKey)>,
    warned_no_client_ip: AtomicBool,
}

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

#[derive(Debug)]
enum Source {
    New {
        store: Option<Arc<dyn Store>>,
        clock: Option<Arc<dyn Clock>>,
        policies: Vec<PolicyBuilder>,
    },
    Limiter(Arc<Limiter>),
}

impl RateLimitLayer {
    /// A layer whose policies are written in code
    /// ([`RateLimitLayerBuilder::policy`]), on the memory store unless
    /// [`RateLimitLayerBuilder::store`] says otherwise.
    pub fn builder() -> RateLimitLayerBuilder {
        RateLimitLayerBuilder::new(Source::New {
            store: None,
            clock: None,
            policies: Vec::new(),
        })
    }

    /// A layer over `limiter`: every policy of its set that has `key`
    /// parts (or a [`RateLimitLayerBuilder::key_fn`]) and whose `match`
    /// fits applies, read at each request, so a reload of the limiter's
    /// policies takes effect at once.
    pub fn from_limiter(limiter: Arc<Limiter>) -> RateLimitLayerBuilder {
        RateLimitLayerBuilder::new(Source::Limiter(limiter))
    }

    /// The limiter deciding (to read a status or reset a counter).
    pub fn limiter(&self) -> &Arc<Limiter> {
        &self.shared.limiter
    }
}

impl RateLimitLayerBuilder {
    fn new(source: Source) -> RateLimitLayerBuilder {
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

impl<S> tower_layer::Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> RateLimitService<S> {
        RateLimitService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service a [`RateLimitLayer`] wraps around `S`.
#[derive(Debug, Clone)]
pub struct RateLimitService<S> {
    inner: S,
    shared: Arc<Shared>,
}

/// A boxed, sendable future.
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for RateLimitService<S>
where
    S: tower_service::Service<Request<ReqBody>, Response = Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The service that was polled ready serves this request; the clone
        // stays for the next one.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            match shared.decide(&parts).await {
                Ok(outcome) => {
                    let response = inner.call(Request::from_parts(parts, body)).await?;
                    let mut response = response.map(Either::Left);
                    if let Some(outcome) = outcome {
                        // Straight into the response's map: no second map.
                        insert_outcome_headers(response.headers_mut(), &outcome);
                    }
                    Ok(response)
                }
                Err(answer) => Ok(answer.map(Either::Right)),
            }
        })
    }
}

impl Shared {
    /// Decides a request: `Ok` with the allowed outcome whose headers the
    /// response gets (none when no policy applied), or `Err` with the
    /// answer instead of the service's.
    async fn decide(&self, parts: &Parts) -> Result<Option<Outcome>, Response<Full<Bytes>>> {
        let set = self.limiter.policies();
        let method = parts.method.as_str();
        let path = RequestPath::new(parts.uri.path());
        let mut applied: SmallVec<[(&Arc<PolicyDef>, Key); 2]> = SmallVec::new();
        let mut client_ip = None;
        for def in set.iter() {
            if self
                .only
                .as_ref()
                .is_some_and(|o| !o.iter().any(|n| n == def.name()))
            {
                continue;
            }
            let key_fn = self
                .key_fns
                .iter()
                .find(|(n, _)| n == def.name())
                .map(|(_, f)| f);
            if def.key.is_empty() && key_fn.is_none() {
                continue;
            }
            match matches(def, method, &path) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    return Err(self.missing_key(
                        parts,
                        def.name(),
                        &KeyProblem::Path(e),
                        StatusCode::BAD_REQUEST,
                    ));
                }
            }
            let key = match key_fn {
                Some(f) => (f.0)(parts),
                None => {
                    // Read (and warned about) only when a policy keys by it.
                    let ip = if def.key.contains(&KeyPart::ClientIp) {
                        *client_ip.get_or_insert_with(|| self.client_ip(parts, def.name()))
                    } else {
                        None
                    };
                    let facts = RequestFacts {
                        method,
                        path: &path,
                        query: parts.uri.query(),
                        headers: &parts.headers,
                        client_ip: ip,
                    };
                    key_of(&def.key, &facts)
                }
            };
            match key {
                Ok(key) => applied.push((def, key)),
                // The client sent it: never "missing", never skipped, or a
                // long header (or a path spelled to have no normal form)
                // would escape every limit.
                Err(problem) if problem.is_bad_request() => {
                    return Err(self.missing_key(
                        parts,
                        def.name(),
                        &problem,
                        StatusCode::BAD_REQUEST,
                    ));
                }
                Err(problem) => match self.on_missing_key_of(def.name()) {
                    MissingKey::Skip => {}
                    MissingKey::Refuse(status) => {
                        return Err(self.missing_key(parts, def.name(), &problem, status));
                    }
                },
            }
        }
        if applied.is_empty() {
            return Ok(None);
        }
        let checks: SmallVec<[Check<'_>; 2]> = applied
            .iter()
            .map(|(def, key)| Check::one(*def, key))
            .collect();
        match self.limiter.check(&checks).await {
            Ok(outcome) if outcome.allowed => Ok(Some(outcome)),
            Ok(outcome) => Err(refusal(parts, &outcome)),
            Err(e) => Err(failure(parts, &e)),
        }
    }

    /// The answer for a request without a key for `policy`.
    fn on_missing_key_of(&self, policy: &str) -> MissingKey {
        self.missing_by_policy
            .iter()
            .find(|(n, _)| n == policy)
            .map_or(self.on_missing_key, |&(_, answer)| answer)
    }

    /// The client's address: the peer from the request's extensions (a
    /// `SocketAddr`, axum's `ConnectInfo<SocketAddr>`, tonic's
    /// `TcpConnectInfo`), behind trusted proxies the rightmost untrusted
    /// `X-Forwarded-For` hop.
    fn client_ip(&self, parts: &Parts, policy: &str) -> Option<IpAddr> {
        let peer = peer_addr(parts);
        if peer.is_none() && !self.warned_no_client_ip.swap(true, Ordering::Relaxed) {
            warn_once(&format!(
                "policy '{policy}' keys by client_ip but requests carry no peer address, so each \
                 one gets the MissingKey answer (400 by default): serve axum with \
                 into_make_service_with_connect_info::<SocketAddr>() (tonic's server adds the peer \
                 itself), or insert a SocketAddr into the request's extensions (logged once per \
                 layer)"
            ));
        }
        Some(self.trusted.client_ip(peer?, &parts.headers))
    }

    fn missing_key(
        &self,
        parts: &Parts,
        policy: &str,
        problem: &KeyProblem,
        status: StatusCode,
    ) -> Response<Full<Bytes>> {
        let detail = match problem {
            KeyProblem::TooLong(e) => {
                format!("the request's key for policy '{policy}' is unusable: {e}")
            }
            KeyProblem::Path(e) => format!(
                "the request's path has no single meaning, so policy '{policy}' cannot match it: {e}"
            ),
            KeyProblem::RepeatedParameter(_) => {
                format!("the request's key for policy '{policy}' is ambiguous: {problem}")
            }
            KeyProblem::NoClientIp | KeyProblem::NoKey => {
                format!("the request has no key for policy '{policy}': {problem}")
            }
        };
        #[cfg(feature = "grpc")]
        if crate::grpc::is_grpc(parts) {
            let code = match status {
                StatusCode::UNAUTHORIZED => tonic::Code::Unauthenticated,
                StatusCode::FORBIDDEN => tonic::Code::PermissionDenied,
                _ => tonic::Code::InvalidArgument,
            };
            return crate::grpc::status(code, detail, HeaderMap::new());
        }
        let kind = match problem {
            KeyProblem::TooLong(_) => "key-too-long",
            KeyProblem::Path(_) => "ambiguous-path",
            KeyProblem::RepeatedParameter(_) => "ambiguous-query",
            KeyProblem::NoClientIp | KeyProblem::NoKey => "missing-key",
        };
        problem_response(parts, status, kind, &detail, HeaderMap::new())
    }
}

/// Logs a misconfiguration at WARN through `tracing`, or, when the
/// application installed no tracing subscriber (the quick start does not),
/// on standard error: a service that answers 400 to every request must
/// say why somewhere. A failed write is ignored, never a panic.
fn warn_once(message: &str) {
    let no_subscriber =
        tracing::dispatcher::get_default(|d| d.is::<tracing::subscriber::NoSubscriber>());
    if no_subscriber {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), "WARN ratewarden_tower: {message}");
    } else {
        tracing::warn!("{message}");
    }
}

fn peer_addr(parts: &Parts) -> Option<IpAddr> {
    if let Some(addr) = parts.extensions.get::<SocketAddr>() {
        return Some(addr.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(info) = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(info.0.ip());
    }
    #[cfg(feature = "grpc")]
    if let Some(info) = parts
        .extensions
        .get::<tonic::transport::server::TcpConnectInfo>()
    {
        return info.remote_addr().map(|a| a.ip());
    }
    None
}

/// The answer to a denied request.
fn refusal(parts: &Parts, outcome: &Outcome) -> Response<Full<Bytes>> {
    #[cfg(feature = "grpc")]
    if crate::grpc::is_grpc(parts) {
        return crate::grpc::resource_exhausted(outcome);
    }
    let (headers, body) = denial(
        outcome,
        StatusCode::TOO_MANY_REQUESTS,
        Some(parts.uri.path()),
    );
    response(StatusCode::TOO_MANY_REQUESTS, headers, body)
}

/// The answer when the limiter could not decide: 503 with `Retry-After: 1`
/// (seconds) when the store is unavailable and a policy fails closed, 500
/// for a permanent store failure (both logged by the limiter).
fn failure(parts: &Parts, error: &CheckError) -> Response<Full<Bytes>> {
    let unavailable = matches!(error, CheckError::Unavailable(_));
    #[cfg(feature = "grpc")]
    if crate::grpc::is_grpc(parts) {
        let code = if unavailable {
            tonic::Code::Unavailable
        } else {
            tonic::Code::Internal
        };
        return crate::grpc::status(
            code,
            failure_detail(unavailable).to_owned(),
            HeaderMap::new(),
        );
    }
    if unavailable {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from(1u64));
        problem_response(
            parts,
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            failure_detail(true),
            headers,
        )
    } else {
        problem_response(
            parts,
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            failure_detail(false),
            HeaderMap::new(),
        )
    }
}

fn failure_detail(unavailable: bool) -> &'static str {
    if unavailable {
        "the rate-limit store is unavailable; try again shortly"
    } else {
        "the rate limiter failed to decide"
    }
}

fn problem_response(
    parts: &Parts,
    status: StatusCode,
    kind: &str,
    detail: &str,
    mut headers: HeaderMap,
) -> Response<Full<Bytes>> {
    let title = status.canonical_reason().unwrap_or("Error");
    let body = problem_json(
        kind,
        title,
        status,
        detail,
        Some(parts.uri.path()),
        &Map::new(),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    response(status, headers, body)
}

fn response(status: StatusCode, headers: HeaderMap, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
