//! Building and running the application. [`Application::build`] binds the
//! listener (so tests know the port) before [`Application::run_until_stopped`]
//! serves.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ratewarden_config::{Settings, StoreConfig, StoreOptions};
use ratewarden_core::{Clock, MemoryStore, Store};
use ratewarden_envoy::RateLimitService;
use ratewarden_limiter::Limiter;
use ratewarden_redis::RedisStore;
use ratewarden_sqlite::{SqliteOptions, SqliteStore};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::conn::ConnectionRules;
use crate::http;
use crate::state::{AppState, Shared};

/// How long in-flight requests may take to finish after a shutdown signal
/// before their connections are closed.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The store could not be opened.
    #[error("cannot open the store {store}")]
    Store {
        /// Which store (path or URL, without secrets).
        store: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The `--listen` or `--grpc-listen` address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// The composition root of the store: the one function that turns a
/// [`StoreConfig`] into a store, for `serve` and `replay` alike.
///
/// # Errors
/// [`StartupError::Store`] when it cannot be opened.
pub fn open_store(
    config: &StoreConfig,
    options: &StoreOptions,
) -> Result<Arc<dyn Store>, StartupError> {
    match config {
        StoreConfig::Memory => Ok(Arc::new(MemoryStore::new().with_max_keys(options.max_keys))),
        StoreConfig::Sqlite(path) => {
            let defaults = SqliteOptions::default();
            let options = SqliteOptions {
                audit_retention: options.audit_retention,
                audit_sample: options.audit_sample,
                audit_max_rows: options.audit_max_rows,
                wal_autocheckpoint: options
                    .wal_autocheckpoint
                    .unwrap_or(defaults.wal_autocheckpoint),
                ..defaults
            };
            let store = SqliteStore::open(path, options).map_err(|e| StartupError::Store {
                store: config.to_string(),
                source: Box::new(e),
            })?;
            Ok(Arc::new(store))
        }
        StoreConfig::Redis(redis) => Ok(open_redis(redis, options)?),
    }
}

/// The Redis store of `config`. It connects on first use, so that the
/// service starts while Redis is down; until it is up, decisions follow
/// `--on-store-error`.
fn open_redis(
    config: &ratewarden_redis::RedisConfig,
    options: &StoreOptions,
) -> Result<Arc<RedisStore>, StartupError> {
    let redis = config.clone().with_timeout(options.call_timeout);
    let store = RedisStore::new(redis).map_err(|e| StartupError::Store {
        store: config.to_string(),
        source: Box::new(e),
    })?;
    Ok(Arc::new(store))
}

/// Says at start whether Redis answers, and if not why (`NOAUTH`, a
/// refused password, a refused connection, another protocol, no answer),
/// without holding up the start.
async fn report_redis(store: Arc<RedisStore>) {
    match store.check().await {
        Ok(()) => tracing::info!(
            redis = %store.config(),
            functions = store.uses_functions(),
            "Redis answers"
        ),
        Err(e) => tracing::error!(
            error = %e,
            "Redis cannot answer at start; decisions follow on_store_error until it does"
        ),
    }
}

/// A bound, ready-to-run service.
#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    /// The gRPC listener, when `--grpc-listen` is given.
    grpc_listener: Option<TcpListener>,
    state: AppState,
    settings: Settings,
    rules: ConnectionRules,
}

impl Application {
    /// Binds the listeners, then opens the store (a port in use leaves
    /// no database file behind); `clock` is the only source of time (a
    /// [`ratewarden_core::ManualClock`] in tests).
    ///
    /// # Errors
    /// [`StartupError`] when an address cannot be bound or the store
    /// opened.
    pub async fn build(
        settings: Settings,
        clock: Arc<dyn Clock>,
    ) -> Result<Application, StartupError> {
        let listeners = bind(&settings).await?;
        let options = settings.store_options();
        let store = match &settings.store {
            StoreConfig::Redis(config) => {
                let redis = open_redis(config, &options)?;
                tokio::spawn(report_redis(Arc::clone(&redis)));
                redis
            }
            other => open_store(other, &options)?,
        };
        Ok(Application::assemble(settings, store, clock, listeners))
    }

    /// As [`Application::build`], with a store already made (`settings.store`
    /// is ignored): for tests that need a store misbehaving on purpose.
    ///
    /// # Errors
    /// [`StartupError::Bind`] when the address cannot be bound.
    pub async fn with_store(
        settings: Settings,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<Application, StartupError> {
        let listeners = bind(&settings).await?;
        Ok(Application::assemble(settings, store, clock, listeners))
    }

    fn assemble(
        settings: Settings,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        (listener, grpc_listener): (TcpListener, Option<TcpListener>),
    ) -> Application {
        // Before the limiter registers its metric handles.
        http::ops::metrics::install();
        let limiter = Arc::new(Limiter::new(store, clock, settings.policies.clone()));
        let rules = settings.envoy.clone().unwrap_or_default();
        let envoy = Arc::new(
            RateLimitService::new(Arc::clone(&limiter), rules, settings.on_store_error)
                .with_options(settings.envoy_options.clone()),
        );
        let state = AppState::new(Shared {
            limiter,
            envoy,
            ping_key: settings.ping_key.clone(),
            trusted_proxies: ratewarden_http::TrustedProxies::new(
                settings.trusted_proxies.iter().copied(),
            ),
            admin_key: settings.admin_key.clone(),
            max_body_bytes: settings.max_body_bytes,
            stopping: CancellationToken::new(),
        });
        let rules = ConnectionRules::from_limits(&settings.connections);
        Application {
            listener,
            grpc_listener,
            state,
            settings,
            rules,
        }
    }

    /// The connection rules in effect (the maximum of connections
    /// resolved from the descriptor limit when not set).
    pub fn connection_rules(&self) -> ConnectionRules {
        self.rules
    }

    /// The decision layer (to reload its policies).
    pub fn limiter(&self) -> &Arc<Limiter> {
        &self.state.limiter
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The bound gRPC address, when gRPC is served.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// The bound address (useful with port 0).
    ///
    /// # Panics
    /// Never: a bound listener always has a local address.
    pub fn local_addr(&self) -> SocketAddr {
        #[allow(clippy::expect_used)] // a bound TCP listener always has an address
        self.listener
            .local_addr()
            .expect("bound listener has an address")
    }

    /// As [`Application::run_until_stopped`], reloading the configuration
    /// file (when the settings name one) on SIGHUP and on change, with
    /// `given` (the flags and environment of the start) still winning;
    /// `loaded` is what the files held when they were read
    /// ([`crate::reload::Baseline::take`]), so a change since is applied.
    ///
    /// # Errors
    /// The server's I/O error, if serving fails.
    pub async fn run_until_stopped_reloading(
        self,
        given: ratewarden_config::Overrides,
        loaded: crate::reload::Baseline,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let stop = CancellationToken::new();
        let reloader = crate::reload::Reloader::new(
            Arc::clone(self.limiter()),
            Arc::clone(&self.state.envoy),
            given,
            self.settings.clone(),
            loaded,
        );
        // Without a file, SIGHUP must still be taken (its default action
        // would end the process) and is answered with a log line.
        let hangups = crate::reload::hangup_signals();
        let reloading = match reloader {
            // The watcher is in place before the first request is served.
            Some(r) => {
                let watching = r.watch();
                tokio::spawn(Arc::new(r).run(watching, hangups, stop.clone()))
            }
            None => tokio::spawn(crate::reload::without_file(hangups, stop.clone())),
        };
        let served = self.run_until_stopped(shutdown).await;
        stop.cancel();
        let _ = reloading.await;
        served
    }

    /// Serves HTTP (and gRPC, when bound) until `shutdown` completes or
    /// either server fails, then lets in-flight requests finish (for at
    /// most [`SHUTDOWN_GRACE`]), stops the pruning task and closes the
    /// store. Both servers stop together.
    ///
    /// # Errors
    /// A server's I/O error, if serving fails.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let stop = CancellationToken::new();
        let limiter = Arc::clone(&self.state.limiter);
        let pruning = tokio::spawn(Arc::clone(limiter.pruner()).run_until(stop.clone()));
        let activity = tokio::spawn(
            Arc::clone(limiter.activity()).run_until(Arc::clone(limiter.clock()), stop.clone()),
        );
        let summaries = tokio::spawn(tick_logs(Arc::clone(&limiter), stop.clone()));
        let upkeep = tokio::spawn(http::ops::metrics::upkeep_until(stop.clone()));
        let store = Arc::clone(limiter.store());
        // Cancelled by the signal, or by a server that ends on its own;
        // `/readyz` answers 503 from then on. The log line comes after the
        // cancel, so that nothing a log write does can lose the signal.
        let servers = self.state.stopping.clone();
        let signalled = {
            let servers = servers.clone();
            tokio::spawn(async move {
                shutdown.await;
                servers.cancel();
                tracing::info!("stopping: finishing in-flight requests");
            })
        };
        let grpc = self.grpc_listener.map(|listener| {
            let servers = servers.clone();
            let envoy = Arc::clone(&self.state.envoy);
            tokio::spawn(async move {
                let served = ratewarden_envoy::grpc::serve(listener, envoy, servers.clone()).await;
                if let Err(e) = &served {
                    tracing::error!(error = %e, "the gRPC server failed; stopping");
                }
                servers.cancel();
                served
            })
        });
        // A client that never finishes its request would hold graceful
        // shutdown open forever: after the signal, connections get
        // SHUTDOWN_GRACE to finish, then they are dropped.
        let mut served = crate::conn::serve(
            self.listener,
            http::router(self.state),
            self.rules,
            servers.clone(),
            SHUTDOWN_GRACE,
        )
        .await;
        if let Err(e) = &served {
            tracing::error!(error = %e, "the HTTP server failed; stopping");
        }
        servers.cancel();
        signalled.abort();
        if let Some(grpc) = grpc {
            let abort = grpc.abort_handle();
            match tokio::time::timeout(SHUTDOWN_GRACE, grpc).await {
                Ok(Ok(Ok(()))) | Ok(Err(_)) => {}
                Ok(Ok(Err(e))) => served = served.and(Err(std::io::Error::other(e))),
                Err(_) => {
                    tracing::warn!(
                        grace_secs = SHUTDOWN_GRACE.as_secs(),
                        "gRPC calls still open after the shutdown grace period; closing them"
                    );
                    abort.abort();
                }
            }
        }
        stop.cancel();
        let _ = pruning.await;
        let _ = activity.await;
        let _ = summaries.await;
        let _ = upkeep.await;
        store.close().await;
        tracing::info!("stopped");
        served
    }
}

/// Logs the summaries of repeated errors that are due, every second, so
/// that a burst that stops is summarised without waiting for the next.
async fn tick_logs(limiter: Arc<Limiter>, stop: CancellationToken) {
    repeat_until(Duration::from_secs(1), stop, || {
        limiter.tick_logs();
        http::admin::tick_logs();
        std::future::ready(())
    })
    .await;
}

/// Awaits `step()` every `period` (the first after one period) until
/// `stop`; a step that runs late delays the next rather than bunching.
pub(crate) async fn repeat_until<F, S>(period: Duration, stop: CancellationToken, mut step: S)
where
    S: FnMut() -> F,
    F: Future<Output = ()>,
{
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => step().await,
            () = stop.cancelled() => return,
        }
    }
}

/// Binds the HTTP listener, and the gRPC one when configured.
async fn bind(settings: &Settings) -> Result<(TcpListener, Option<TcpListener>), StartupError> {
    let bind = |addr: SocketAddr| async move {
        TcpListener::bind(addr)
            .await
            .map_err(|source| StartupError::Bind { addr, source })
    };
    let listener = bind(settings.listen).await?;
    let grpc_listener = match settings.grpc_listen {
        Some(addr) => Some(bind(addr).await?),
        None => None,
    };
    Ok((listener, grpc_listener))
}

/// Completes on Ctrl-C or SIGTERM. Logs nothing on the signal's path:
/// [`Application::run_until_stopped`] says it stops once it has acted.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::Notify;

    use super::*;

    /// The loop of the background tasks (the metrics upkeep, the log
    /// summaries) steps again and again, and ends at `stop` (the
    /// upkeep's bug: histograms kept every sample until a scrape). Waits
    /// for events, not for time: a 1 ms period, 10 s at most.
    #[tokio::test]
    async fn upkeep_repeats_until_stopped() {
        let steps = Arc::new(AtomicUsize::new(0));
        let stepped = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let task = tokio::spawn(repeat_until(Duration::from_millis(1), stop.clone(), {
            let (steps, stepped) = (Arc::clone(&steps), Arc::clone(&stepped));
            move || {
                steps.fetch_add(1, Ordering::SeqCst);
                stepped.notify_one();
                std::future::ready(())
            }
        }));
        let three = async {
            while steps.load(Ordering::SeqCst) < 3 {
                stepped.notified().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), three)
            .await
            .expect("three upkeeps within 10 s");
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the loop ends at stop")
            .unwrap();
    }
}
