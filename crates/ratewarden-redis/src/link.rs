//! The store's link to Redis: the connection, what its failures mean,
//! the breaker, and the probe that runs while the breaker is open.
//!
//! The connection is a [`ConnectionManager`] that makes one attempt per
//! connection (no retries of its own: a refused connection fails at once,
//! and its cause is reported rather than hidden behind the call timeout).
//! A new connection first sends `PING`, so that a missing password shows
//! as `NOAUTH` (Redis answers a large first command of an unauthenticated
//! client with a protocol error and closes), then loads the scripts.
//!
//! Every command goes through [`Conn`], which reports a failure that says
//! the server is down or unusable (`breaker.rs`): the breaker opens at
//! once, the connection is dropped (the next one starts afresh, so a
//! password fixed on the server is picked up), and a probe task tries
//! Redis every [`PROBE_INTERVAL`] — connecting, then `PING` within the
//! call timeout — until it answers, which closes the breaker. No request
//! ever waits for the probe.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ratewarden_core::StoreError;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};

use crate::breaker::{Breaker, Failure};
use crate::config::RedisConfig;
use crate::redis_error;
use crate::scripts::Scripts;

/// How often the probe tries Redis while the breaker is open.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(250);

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// A monotonic instant, for the breaker.
pub(crate) fn monotonic() -> Duration {
    EPOCH.elapsed()
}

/// What a Redis error says about the server, when it says it is down or
/// unusable; `None` for anything else (a timeout, a script's error).
pub(crate) fn down(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || e.kind() == redis::ErrorKind::Parse
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || (e.is_io_error() && !e.is_timeout())
}

/// The connection and its health, shared by the store and the probe.
pub(crate) struct Link {
    pub(crate) config: RedisConfig,
    client: redis::Client,
    pub(crate) scripts: Arc<Scripts>,
    /// The connection once made; dropped when the server is found down.
    current: Mutex<Option<ConnectionManager>>,
    /// One connection attempt at a time.
    connecting: tokio::sync::Mutex<()>,
    pub(crate) breaker: Breaker,
    probing: AtomicBool,
    pub(crate) closed: AtomicBool,
}

impl Link {
    pub(crate) fn new(config: RedisConfig, client: redis::Client) -> Link {
        Link {
            config,
            client,
            scripts: Arc::new(Scripts::new()),
            current: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            breaker: Breaker::default(),
            probing: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    fn current(self: &Arc<Self>) -> Option<Conn> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().map(|manager| Conn {
            manager: manager.clone(),
            link: Arc::clone(self),
        })
    }

    /// The connection, made (`PING`, then the scripts) if there is none.
    pub(crate) async fn connection(self: &Arc<Self>) -> Result<Conn, RedisError> {
        if let Some(conn) = self.current() {
            return Ok(conn);
        }
        let _one = self.connecting.lock().await;
        if let Some(conn) = self.current() {
            return Ok(conn);
        }
        let options = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.config.connect_timeout()))
            .set_response_timeout(None)
            .set_number_of_retries(0);
        let manager = ConnectionManager::new_lazy_with_config(self.client.clone(), options)?;
        let mut conn = Conn {
            manager: manager.clone(),
            link: Arc::clone(self),
        };
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        self.scripts.load(&mut conn).await?;
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(manager);
        Ok(conn)
    }

    /// A command failed with `e`: when it says the server is down, the
    /// connection is dropped and the breaker opens (with a probe).
    fn saw(self: &Arc<Self>, e: &RedisError) {
        if !down(e) {
            return;
        }
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let cause = self.cause(&redis_error(e.clone()));
        if self.breaker.failed(Failure::Down, &cause, monotonic()) {
            self.opened(&cause);
        }
    }

    /// A call ended in a transient failure other than a down server (a
    /// timeout, LOADING): counted into the breaker's run.
    pub(crate) fn slow(self: &Arc<Self>, e: &StoreError) {
        let cause = self.cause(e);
        if self.breaker.failed(Failure::Slow, &cause, monotonic()) {
            self.opened(&cause);
        }
    }

    /// A call answered.
    pub(crate) fn answered(&self) {
        if self.breaker.succeeded() {
            tracing::info!(redis = %self.config, "Redis answers again; decisions use it again");
        }
    }

    /// What the calls failed fast say.
    fn cause(&self, e: &StoreError) -> String {
        let text = match e {
            StoreError::Unavailable(t) | StoreError::Failed(t) => t.as_str(),
            StoreError::Closed => "the store is closed",
        };
        let text = text.strip_prefix("Redis: ").unwrap_or(text);
        format!("Redis at {} cannot answer: {text}", self.config)
    }

    /// The breaker has just opened: say so, and start the probe.
    fn opened(self: &Arc<Self>, cause: &str) {
        // INFO: the failures themselves are the limiter's to log (once,
        // then summaries), with this same cause.
        tracing::info!(
            cause,
            probe_interval_ms = u64::try_from(PROBE_INTERVAL.as_millis()).unwrap_or(u64::MAX),
            "Redis breaker open: decisions fail fast (the policies' on_store_error) until a probe answers"
        );
        if !self.probing.swap(true, Ordering::AcqRel) {
            tokio::spawn(Arc::clone(self).probe());
        }
    }

    /// Tries Redis now and every [`PROBE_INTERVAL`] until it answers or
    /// the store closes.
    async fn probe(self: Arc<Self>) {
        loop {
            while !self.closed.load(Ordering::Acquire) && self.breaker.is_open() {
                match self.check().await {
                    Ok(()) => self.answered(),
                    Err(e) => {
                        self.breaker.set_cause(&self.cause(&e));
                        tokio::time::sleep(PROBE_INTERVAL).await;
                    }
                }
            }
            self.probing.store(false, Ordering::Release);
            // Opened again between the last look and the flag's release,
            // by a caller that saw the flag still set: go on probing.
            let reopened = !self.closed.load(Ordering::Acquire) && self.breaker.is_open();
            if !reopened || self.probing.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }

    /// Connects (within the connect timeout) and `PING`s (within the call
    /// timeout): whether Redis answers, and why not.
    pub(crate) async fn check(self: &Arc<Self>) -> Result<(), StoreError> {
        self.diagnose().await.map_err(|(_, e)| e)
    }

    /// As [`Link::check`], telling apart a configuration Redis refuses
    /// (`true`: a missing or refused password, another protocol) from a
    /// server that is not reachable or does not answer (`false`).
    pub(crate) async fn diagnose(self: &Arc<Self>) -> Result<(), (bool, StoreError)> {
        let refused = |e: RedisError| {
            let misconfigured = e.kind() == redis::ErrorKind::AuthenticationFailed
                || e.kind() == redis::ErrorKind::Parse
                || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"));
            (misconfigured, redis_error(e))
        };
        let connect_timeout = self.config.connect_timeout();
        let mut conn = match tokio::time::timeout(connect_timeout, self.connection()).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(refused(e)),
            Err(_) => {
                return Err((
                    false,
                    StoreError::Unavailable(format!(
                        "Redis: no connection within the connect timeout ({connect_timeout:?}): \
                         the address accepts connections but nothing answers, or none are accepted"
                    )),
                ));
            }
        };
        let timeout = self.config.timeout();
        let cmd = redis::cmd("PING");
        let ping = cmd.query_async::<String>(&mut conn);
        match tokio::time::timeout(timeout, ping).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(refused(e)),
            Err(_) => Err((
                false,
                StoreError::Unavailable(format!("Redis: PING not answered within {timeout:?}")),
            )),
        }
    }
}

/// The connection as every command uses it: the manager, reporting what
/// its failures say to the link.
#[derive(Clone)]
pub(crate) struct Conn {
    manager: ConnectionManager,
    link: Arc<Link>,
}

impl Conn {
    /// Reports a failed command, or a server error in its reply (the
    /// client turns those into errors only later): `NOAUTH`, say.
    fn report(&self, result: Result<&Value, &RedisError>) {
        match result {
            Err(e) => self.link.saw(e),
            Ok(Value::ServerError(e)) if matches!(e.code(), "NOAUTH" | "WRONGPASS") => {
                self.link.saw(&RedisError::from(e.clone()));
            }
            Ok(_) => {}
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let result = self.manager.req_packed_command(cmd).await;
            self.report(result.as_ref());
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let result = self.manager.req_packed_commands(cmd, offset, count).await;
            match &result {
                Ok(values) => values.iter().for_each(|v| self.report(Ok(v))),
                Err(e) => self.report(Err(e)),
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.manager.get_db()
    }
}
