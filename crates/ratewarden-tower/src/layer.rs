//! [`RateLimitLayer`] and the service it wraps around yours: which
//! policies apply to a request and with what key, the decision, and the
//! rate-limit headers on your response.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::{Either, Full};
use ratewarden_core::Key;
use ratewarden_http::headers::insert_outcome_headers;
use ratewarden_http::key::key_of;
use ratewarden_http::matching::matches;
use ratewarden_http::{KeyProblem, RequestFacts, RequestPath, TrustedProxies};
use ratewarden_limiter::{Check, KeyPart, Limiter, Outcome, PolicyDef};
use smallvec::SmallVec;

use crate::answer::{MissingKey, failure, missing_key, refusal};
use crate::builder::{RateLimitLayerBuilder, Source};
use crate::policy::KeyFn;

/// The body of a response from a [`RateLimitService`]: your service's own
/// body, or the layer's answer (a 429, a 503, the missing-key answer).
pub type ResponseBody<B> = Either<B, Full<Bytes>>;

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
    pub(crate) shared: Arc<Shared>,
}

/// What every clone of a layer, and every service it wraps, shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) limiter: Arc<Limiter>,
    /// `None`: every policy of the limiter's set that has a key.
    pub(crate) only: Option<Vec<String>>,
    pub(crate) key_fns: Vec<(String, KeyFn)>,
    pub(crate) trusted: TrustedProxies,
    pub(crate) on_missing_key: MissingKey,
    /// Per-policy answers, before `on_missing_key`.
    pub(crate) missing_by_policy: Vec<(String, MissingKey)>,
    pub(crate) warned_no_client_ip: AtomicBool,
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
                    return Err(missing_key(
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
                    return Err(missing_key(
                        parts,
                        def.name(),
                        &problem,
                        StatusCode::BAD_REQUEST,
                    ));
                }
                Err(problem) => match self.on_missing_key_of(def.name()) {
                    MissingKey::Skip => {}
                    MissingKey::Refuse(status) => {
                        return Err(missing_key(parts, def.name(), &problem, status));
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
