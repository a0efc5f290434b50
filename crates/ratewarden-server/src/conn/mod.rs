//! Serving HTTP/1.1 connections under the connection rules of
//! docs/operations.md#hardening: a header read timeout (408), an idle
//! keep-alive timeout, a maximum of open connections at which the oldest
//! one without a request in progress is closed to make room, a lingering
//! close, and an answer to every request that was counted, also to a
//! client that half-closed its side after sending it (hyper's
//! `half_close`).
//!
//! - [`serve`]: the accept loop and graceful shutdown.
//! - `io.rs`: `io::GuardedIo`, the socket that enforces the timeouts.
//!
//! Metrics: `ratewarden_connections{state="open"}` (a gauge),
//! `ratewarden_connections_closed_total{reason}` with `header_timeout`,
//! `idle_timeout`, `evicted` or `lingered` (closed after draining unread
//! input).

mod io;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use atomic_waker::AtomicWaker;
use axum::extract::ConnectInfo;
use hyper_util::rt::TokioIo;
use ratewarden_config::ConnectionLimits;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::io::{Bounds, GuardedIo};
use crate::http::App;

/// How long a closing connection drains what the client still sends, at
/// most (as nginx's `lingering_time`, shorter).
pub const LINGER: Duration = Duration::from_secs(5);

/// How many unread bytes a closing connection drains, at most.
pub const LINGER_BYTES: u64 = 64 * 1024 * 1024;

/// Descriptors kept free for the store, the gRPC service and logs when
/// the maximum of connections comes from the file-descriptor limit: a
/// tenth of the limit, at least this many.
pub const FD_RESERVE: u64 = 32;

/// The connection rules in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionRules {
    /// A request's headers must be complete this long after the
    /// connection opened (or after the request's first byte).
    pub header_read_timeout: Duration,
    /// A kept-alive connection may wait this long for its next request.
    pub idle_timeout: Duration,
    /// The most open client connections.
    pub max_connections: usize,
}

impl ConnectionRules {
    /// The settings' rules, the maximum of connections from the
    /// file-descriptor limit when the settings give none; raises the
    /// process's soft descriptor limit to its hard limit first (as Go's
    /// runtime and nginx's `worker_rlimit_nofile` do).
    pub fn from_limits(limits: &ConnectionLimits) -> ConnectionRules {
        ConnectionRules {
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            max_connections: limits
                .max_connections
                .unwrap_or_else(|| max_from_fd_limit(raise_fd_limit())),
        }
    }
}

/// The soft descriptor limit, raised to the hard one when it is lower.
fn raise_fd_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    // An unlimited hard limit is capped: the kernel refuses more than
    // fs.nr_open (1,048,576 by default) anyway.
    let hard = limit.maximum.unwrap_or(1 << 20).min(1 << 20);
    match limit.current {
        Some(soft) if soft < hard => {
            limit.current = Some(hard);
            match setrlimit(Resource::Nofile, limit) {
                Ok(()) => hard,
                Err(e) => {
                    tracing::debug!(error = %e, "cannot raise the file-descriptor limit");
                    soft
                }
            }
        }
        Some(soft) => soft,
        None => hard,
    }
}

/// The descriptor limit less a tenth (at least [`FD_RESERVE`]), at least 1.
fn max_from_fd_limit(limit: u64) -> usize {
    let reserve = (limit / 10).max(FD_RESERVE);
    usize::try_from(limit.saturating_sub(reserve).max(1)).unwrap_or(usize::MAX)
}

/// Why ratewarden closed a connection (a label of
/// `ratewarden_connections_closed_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closed {
    HeaderTimeout,
    IdleTimeout,
    Evicted,
    Lingered,
}

impl Closed {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Closed::HeaderTimeout => "header_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::Evicted => "evicted",
            Closed::Lingered => "lingered",
        }
    }

    pub(crate) fn count(self) {
        metrics::counter!("ratewarden_connections_closed_total", "reason" => self.as_str())
            .increment(1);
    }
}

/// One open connection as the registry and the service see it.
#[derive(Debug)]
pub(crate) struct Slot {
    /// Requests being handled (the service's futures alive).
    in_flight: AtomicUsize,
    /// Requests handed to the service so far.
    served: AtomicU64,
    evict: AtomicBool,
    /// The connection task's waker, registered at every read.
    waker: AtomicWaker,
    shared: Arc<Shared>,
}

impl Slot {
    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    fn served(&self) -> u64 {
        self.served.load(Ordering::Acquire)
    }

    fn evicted(&self) -> bool {
        self.evict.load(Ordering::Acquire)
    }

    /// Asks the connection to close as soon as no request is in progress.
    fn evict(&self) {
        self.evict.store(true, Ordering::Release);
        self.waker.wake();
    }
}

/// Marks a request in progress on its connection while alive.
struct Busy(Arc<Slot>);

impl Busy {
    fn new(slot: &Arc<Slot>) -> Busy {
        slot.in_flight.fetch_add(1, Ordering::AcqRel);
        slot.served.fetch_add(1, Ordering::AcqRel);
        Busy(Arc::clone(slot))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The connection may be evicted now, and the acceptor may be
            // waiting for one to become evictable.
            self.0.waker.wake();
            if self.0.shared.full.load(Ordering::Acquire) {
                self.0.shared.changed.notify_waiters();
            }
        }
    }
}

#[derive(Debug, Default)]
struct Shared {
    /// A connection closed or became idle.
    changed: Notify,
    /// The acceptor waits for room.
    full: AtomicBool,
}

/// The open connections, oldest first.
#[derive(Debug, Default)]
struct Registry {
    slots: Mutex<Slots>,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Slots {
    next_id: u64,
    open: BTreeMap<u64, Arc<Slot>>,
    /// How many of `open` are closing for an eviction.
    evicting: usize,
}

impl Slots {
    fn evict(&mut self, slot: &Slot) {
        if !slot.evicted() {
            self.evicting += 1;
        }
        slot.evict();
    }

    fn gauge(&self) {
        metrics::gauge!("ratewarden_connections", "state" => "open").set(self.open.len() as f64);
    }
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn open(&self) -> (u64, Arc<Slot>) {
        let slot = Arc::new(Slot {
            in_flight: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            evict: AtomicBool::new(false),
            waker: AtomicWaker::new(),
            shared: Arc::clone(&self.shared),
        });
        let mut slots = self.lock();
        let id = slots.next_id;
        slots.next_id += 1;
        slots.open.insert(id, Arc::clone(&slot));
        slots.gauge();
        (id, slot)
    }

    fn close(&self, id: u64) {
        let mut slots = self.lock();
        if let Some(slot) = slots.open.remove(&id)
            && slot.evicted()
        {
            slots.evicting -= 1;
        }
        slots.gauge();
        drop(slots);
        self.shared.changed.notify_waiters();
    }

    /// Open connections, and those of them not closing for an eviction.
    fn counts(&self) -> (usize, usize) {
        let slots = self.lock();
        (slots.open.len(), slots.open.len() - slots.evicting)
    }

    /// Asks the oldest connection without a request in progress to close;
    /// false when every connection is busy.
    fn evict_oldest_idle(&self) -> bool {
        let mut slots = self.lock();
        let oldest = slots
            .open
            .values()
            .find(|s| !s.evicted() && !s.busy())
            .cloned();
        match oldest {
            Some(slot) => {
                slots.evict(&slot);
                true
            }
            None => false,
        }
    }

    fn evict_all(&self) {
        let mut slots = self.lock();
        let all: Vec<Arc<Slot>> = slots.open.values().cloned().collect();
        for slot in all {
            slots.evict(&slot);
        }
    }
}

/// Serves `app` on `listener` under `rules` until `stop` is cancelled,
/// then closes idle connections, lets requests in progress finish their
/// answers for at most `grace`, and drops what is left.
///
/// # Errors
/// Never for a connection's failure (logged at debug); the listener's
/// errors are logged and retried.
pub async fn serve(
    listener: TcpListener,
    app: App,
    rules: ConnectionRules,
    stop: CancellationToken,
    grace: Duration,
) -> std::io::Result<()> {
    let registry = Arc::new(Registry::default());
    let tasks = TaskTracker::new();
    let hard_stop = CancellationToken::new();
    let bounds = Bounds {
        header_read: rules.header_read_timeout,
        idle: rules.idle_timeout,
        linger: LINGER,
        linger_bytes: LINGER_BYTES,
    };
    let mut http = hyper::server::conn::http1::Builder::new();
    // The timeouts are GuardedIo's; hyper's own would need its timer.
    http.header_read_timeout(None).half_close(true);
    let accept_errors = ratewarden_limiter::LogSummary::new("accept failed", ACCEPT_SUMMARY);
    while !stop.is_cancelled() {
        if !make_room(&registry, rules.max_connections, &stop).await {
            break;
        }
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_errors.record(&e);
                    // Out of descriptors or memory: give closing
                    // connections a moment instead of spinning.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        accept_errors.recovered();
        let _ = stream.set_nodelay(true);
        let (id, slot) = registry.open();
        let io = TokioIo::new(GuardedIo::new(stream, Arc::clone(&slot), bounds));
        let service = per_connection(app.clone(), slot, peer);
        let connection = http.serve_connection(io, service);
        let (registry, stop, hard_stop) = (Arc::clone(&registry), stop.clone(), hard_stop.clone());
        tasks.spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let served = async {
                tokio::select! {
                    served = connection.as_mut() => served,
                    () = stop.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        connection.await
                    }
                }
            };
            tokio::select! {
                served = served => if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                },
                () = hard_stop.cancelled() => {}
            }
            registry.close(id);
        });
    }
    drop(listener);
    registry.evict_all();
    tasks.close();
    if tokio::time::timeout(grace, tasks.wait()).await.is_err() {
        tracing::warn!(
            grace_secs = grace.as_secs(),
            "connections still open after the shutdown grace period; closing them"
        );
        hard_stop.cancel();
        tasks.wait().await;
    }
    Ok(())
}

/// How often repeated accept errors are logged.
const ACCEPT_SUMMARY: Duration = Duration::from_secs(10);

/// Waits until fewer than `max` connections are open (those closing for
/// an eviction included, so descriptors stay within the reserve),
/// evicting the oldest idle one when as many as `max` stay; false when
/// `stop` came first. While every connection has a request in progress,
/// new ones wait in the kernel's backlog.
async fn make_room(registry: &Registry, max: usize, stop: &CancellationToken) -> bool {
    loop {
        let (open, staying) = registry.counts();
        if open < max {
            registry.shared.full.store(false, Ordering::Release);
            return true;
        }
        registry.shared.full.store(true, Ordering::Release);
        let changed = registry.shared.changed.notified();
        let mut changed = std::pin::pin!(changed);
        changed.as_mut().enable();
        if staying >= max {
            // Closes at its next poll (or after its answer, when a
            // request raced the eviction).
            registry.evict_oldest_idle();
        }
        tokio::select! {
            () = changed => {}
            // A connection that became idle without a notification (none
            // is sent unless the acceptor waits) is found on the next turn.
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            () = stop.cancelled() => return false,
        }
    }
}

/// The application as a hyper service for one connection: each request
/// gets the peer's address (`ConnectInfo`) and marks the connection busy
/// until its answer is ready.
fn per_connection(
    app: App,
    slot: Arc<Slot>,
    peer: SocketAddr,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<axum::response::Response, std::convert::Infallible>>
             + Send
             + 'static,
> + Clone {
    hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let busy = Busy::new(&slot);
        let answer = app.answer(request.map(axum::body::Body::new));
        async move {
            let answer = answer.await;
            drop(busy);
            Ok(answer)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::max_from_fd_limit;

    #[test]
    fn the_descriptor_reserve_is_a_tenth_and_at_least_32() {
        assert_eq!(max_from_fd_limit(256), 224);
        assert_eq!(max_from_fd_limit(1024), 922);
        assert_eq!(max_from_fd_limit(65_536), 58_983);
        assert_eq!(max_from_fd_limit(10), 1);
    }
}
