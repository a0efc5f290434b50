//! ratewarden's Redis store: several ratewarden instances share one set of
//! limits, each decision one Lua script in one round trip.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ratewarden_core::{Acquire, Algorithm, Batch, Clock, Key, Policy, Quota, Store, SystemClock};
//! use ratewarden_redis::{RedisConfig, RedisStore};
//! use std::time::Duration;
//!
//! let config = RedisConfig::from_url("redis://127.0.0.1:6379/0")?.with_key_prefix("app:")?;
//! let store = RedisStore::connect(config).await?;
//! let policy = Policy::new("api", Algorithm::Gcra, Quota::new(100, Duration::from_secs(60))?);
//! let key = Key::single("alice")?;
//! let batch = Batch::one(SystemClock.now(), Acquire::one(&policy, &key));
//! let decisions = store.acquire(&batch).await?;
//! println!("allowed: {}", decisions[0].allowed());
//! # Ok(()) }
//! ```
//!
//! # Consistency
//! Every decision is one Lua script, which Redis runs atomically: reading
//! the keys' state, deciding every check of the batch, applying the
//! all-or-nothing rule and writing (with expiries) cannot interleave with
//! another instance's decision, so a single Redis server never
//! over-admits and a denied batch never leaves a charge. The answers are those
//! of docs/semantics.md §2, exactly as the memory and SQLite stores give them
//! (the conformance suite checks it): the script returns the state it
//! saw, and Rust runs the reference algorithm of `ratewarden_core` on it.
//! What Redis itself may lose is outside this promise: with asynchronous
//! replication a failover can drop the last writes (a key may then admit
//! again what it admitted just before), and without persistence a Redis
//! restart forgets every counter.
//!
//! `reset` is not atomic across keys: it scans for the keys under the
//! prefix and unlinks them in batches, so a decision running meanwhile may
//! recreate a key, and a failure midway leaves part of them deleted.
//!
//! Redis Cluster: a batch's keys must then live in one slot, which keys
//! of different rate-limit keys do not; this store speaks to a single
//! Redis server (or Valkey, or a primary with replicas) only.
//! `prune` does nothing (and returns 0): every key expires by itself.
//!
//! # Why Lua
//! A decision must read, decide and write as one step. `WATCH`/`MULTI`
//! needs retries under contention and two round trips; a read from Rust
//! followed by a write could interleave with another instance. A script
//! is one round trip and atomic. The batch runs as `FCALL` of a function
//! library on Redis ≥ 7.0 (its code is loaded once, not re-run per call),
//! else as `EVALSHA` of the same code (scripts.rs says when); after a
//! Redis restart, `SCRIPT FLUSH` or `FUNCTION FLUSH`, the store loads
//! the code again and retries once. The scripts keep only the state
//! transition; everything that depends on the request alone (the window
//! index, the window's end, `c·T`, `B·T`, `L·W`, thresholds, TTLs) is
//! computed in Rust.
//!
//! # Numbers: Lua has only doubles
//! Redis runs Lua 5.1, whose numbers are doubles, exact only up to 2^53,
//! while times are `u64` nanoseconds (about 1.8·10^18 today), counts go up
//! to `i64::MAX` and the sliding window compares products up to 2^127. So
//! every such number crosses into Lua as a decimal string, and the scripts
//! compare, add and multiply them exactly (`lua/decimal.lua`), as cheaply
//! as exactness allows: a string of at most 15 digits is below 10^15 <
//! 2^53, so `tonumber` is exact on it and on the sum of two; up to 30
//! digits (every `u64`: times, counts, GCRA instants) a value is compared
//! and added as two such halves of 15 digits, and a time span is turned
//! into milliseconds the same way; only longer values, and the sliding
//! window's products when they pass 15 digits, go through limbs of 7
//! digits. Otherwise `tonumber` is used only on values known to be small
//! (live event counts, TTLs in milliseconds). Counters are added by Redis's
//! own `INCRBY` (exact on 64-bit integers; the script checks first that
//! the sum stays within `i64::MAX`) and read with `GET`, never from an
//! `INCRBY` reply (an integer reply becomes a double in Lua). Sliding-log
//! events are members of a sorted set named by their zero-padded
//! nanosecond time, all scored 0, because a double score would round
//! nanoseconds.
//!
//! # Time and clock skew
//! The caller passes the time (its [`ratewarden_core::Clock`]); Redis's
//! `TIME` is not used, so tests drive window edges to the nanosecond and
//! every store agrees on the same inputs. With several instances, each
//! instance's clock decides its windows: if two clocks differ by `d`, then
//! around a window edge one instance still counts in the old window while
//! the other has moved on, which lets through at most the requests of `d`
//! extra time. Keep the instances' clocks synchronised (NTP).
//!
//! # Expiry
//! Every key gets its expiry in the same script that writes it, so no key
//! ever lives without one: a fixed-window counter until its window ends, a
//! sliding window until `(k+2)·W`, a sliding log until its newest event is
//! `W` old, a GCRA `tat` until that instant — each rounded up to whole
//! milliseconds, at least 1 ms, plus [`RedisConfig::ttl_slack`], and never
//! shortened by a later write. A TTL that is too short would silently
//! forget counts; one that is a little too long changes no answer, because
//! the state carries its window index or its instants.
//!
//! # Keys
//! `<prefix>rw:<algorithm>:<policy>:{<hex of Key::encoded()>}` (fixed
//! window: `…:<k>` per window): state is namespaced by policy. The
//! length-prefixed encoding keeps different keys apart; hex keeps braces
//! and glob characters out; the braces make the hex the Redis Cluster
//! hash tag, so one key's state lives in one slot.
//!
//! # Failures
//! Every call has a timeout ([`RedisConfig::timeout`], 100 ms by default);
//! a timeout, a lost connection or a server that is loading or busy is
//! [`StoreError::Unavailable`] (transient: the server's fail-open or
//! fail-closed policy applies). The connection is a
//! [`redis::aio::ConnectionManager`], which reconnects by itself after
//! Redis comes back.
//!
//! While Redis is down, a call would wait for the whole timeout (the
//! connection manager retries inside it): after [`BREAKER_FAILURES`]
//! unavailable calls in a row, calls fail at once for [`BREAKER_PAUSE`];
//! then one call tries Redis again while the others keep failing fast,
//! and its answer closes the breaker or opens it for another pause. A
//! dead Redis so costs a request microseconds, not the timeout, and one
//! request per pause pays for the probe.
//!
//! # Layout
//! - `config.rs`: [`RedisConfig`] (redacted `Display`), [`RedisConfigError`].
//! - `keys.rs`: key names and the reset pattern.
//! - `numbers.rs`: decimal strings, TTLs.
//! - `scripts.rs` and `lua/`: the batch script (`batch.lua`: every
//!   algorithm, all or nothing), the shared decimal arithmetic and the
//!   sliding log's read-only script.
//! - `batch.rs`: one batch's arguments for the script; the reference
//!   algorithms on the state it saw.
//! - `coalesce.rs`: the batches of requests waiting at once, sent as one
//!   call.
//! - `fixed_window.rs`, `sliding_log.rs`, `sliding_window.rs`, `gcra.rs`:
//!   per algorithm the script's arguments, the state it returns, and a
//!   read-only status.
//! - `reset.rs`: deleting a policy's keys and counting those in use.

mod batch;
mod clock;
mod coalesce;
mod config;
mod fixed_window;
mod gcra;
mod keys;
mod numbers;
mod reset;
mod scripts;
mod sliding_log;
mod sliding_window;

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ratewarden_core::{
    Algorithm, Batch, Decision, Key, KeyMatch, Policy, Store, StoreError, Timestamp,
};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, RetryMethod};
use tokio::sync::OnceCell;

pub use clock::RedisClock;
use coalesce::Coalescer;
pub use config::{RedisConfig, RedisConfigError};
use scripts::Scripts;

/// Unavailable calls in a row after which calls fail fast.
pub const BREAKER_FAILURES: u32 = 3;

/// How long calls fail fast before one tries Redis again.
pub const BREAKER_PAUSE: Duration = Duration::from_millis(250);

/// Fail fast while Redis is known to be down (see the crate docs).
#[derive(Debug, Default)]
struct Breaker {
    failures: AtomicU32,
    /// Until when calls fail fast, in nanoseconds since [`EPOCH`]; 0: closed.
    open_until: AtomicU64,
}

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn nanos_now() -> u64 {
    u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl Breaker {
    /// `Err` with the time left when the call must fail fast.
    fn admit(&self) -> Result<(), Duration> {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Ok(());
        }
        let now = nanos_now();
        if now < until {
            return Err(Duration::from_nanos(until - now));
        }
        // The pause is over: one call tries, the others keep failing fast.
        let next = now.saturating_add(duration_nanos(BREAKER_PAUSE)).max(1);
        match self
            .open_until
            .compare_exchange(until, next, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(_) => Err(BREAKER_PAUSE),
        }
    }

    fn succeeded(&self) {
        if self.failures.load(Ordering::Relaxed) != 0
            || self.open_until.load(Ordering::Relaxed) != 0
        {
            self.failures.store(0, Ordering::Relaxed);
            self.open_until.store(0, Ordering::Release);
        }
    }

    fn failed(&self) {
        if self.failures.fetch_add(1, Ordering::AcqRel) + 1 >= BREAKER_FAILURES {
            let next = nanos_now()
                .saturating_add(duration_nanos(BREAKER_PAUSE))
                .max(1);
            self.open_until.store(next, Ordering::Release);
        }
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The Redis store. Cheap to share behind an `Arc`; see the crate docs for
/// its consistency promise.
pub struct RedisStore {
    config: RedisConfig,
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    scripts: Arc<Scripts>,
    /// Several requests' batches in one call (coalesce.rs).
    coalescer: Arc<Coalescer>,
    closed: AtomicBool,
    /// Random per store, so sliding-log members of two instances differ.
    instance: u64,
    requests: AtomicU64,
    breaker: Breaker,
}

impl RedisStore {
    /// A store that connects on its first call (so it can be built outside
    /// an async runtime, and a server can start while Redis is down: its
    /// calls fail with [`StoreError::Unavailable`] until Redis is up).
    ///
    /// # Errors
    /// [`RedisConfigError::InvalidUrl`] when the client refuses the URL.
    pub fn new(config: RedisConfig) -> Result<RedisStore, RedisConfigError> {
        let client = redis::Client::open(config.url())
            .map_err(|_| RedisConfigError::InvalidUrl(config.to_string()))?;
        let scripts = Arc::new(Scripts::new());
        let coalescer = Arc::new(Coalescer::new(Arc::clone(&scripts), config.timeout()));
        Ok(RedisStore {
            config,
            client,
            connection: OnceCell::new(),
            scripts,
            coalescer,
            closed: AtomicBool::new(false),
            instance: rand::random(),
            requests: AtomicU64::new(0),
            breaker: Breaker::default(),
        })
    }

    /// A store connected now, with its scripts loaded.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when Redis cannot be reached within the
    /// connect timeout, [`StoreError::Failed`] for an invalid URL.
    pub async fn connect(config: RedisConfig) -> Result<RedisStore, StoreError> {
        let timeout = config.connect_timeout().max(config.timeout());
        let store = RedisStore::new(config).map_err(|e| StoreError::Failed(e.to_string()))?;
        match tokio::time::timeout(timeout, store.connection()).await {
            Ok(Ok(_)) => Ok(store),
            Ok(Err(e)) => Err(redis_error(e)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "cannot connect to {} within {timeout:?}",
                store.config
            ))),
        }
    }

    /// The configuration (its `Display` hides the password).
    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// Whether batches run as `FCALL` of the store's function library
    /// (named `ratewarden_<12 hex digits of its SHA-1>`; Redis ≥ 7.0) rather
    /// than `EVALSHA` of the same code: decided when the store connects,
    /// `false` before. The answers are the same either way.
    pub fn uses_functions(&self) -> bool {
        self.scripts.uses_functions()
    }

    /// The connection, made (and the scripts loaded) on first use.
    async fn connection(&self) -> Result<ConnectionManager, RedisError> {
        let manager = self
            .connection
            .get_or_try_init(|| async {
                // Short, bounded backoff: after Redis comes back, the next
                // attempt is at most 250 ms away.
                let options = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.config.connect_timeout()))
                    .set_response_timeout(None)
                    .set_number_of_retries(4)
                    .set_min_delay(Duration::from_millis(25))
                    .set_max_delay(Duration::from_millis(250));
                let mut manager =
                    ConnectionManager::new_lazy_with_config(self.client.clone(), options)?;
                self.scripts.load(&mut manager).await?;
                Ok::<_, RedisError>(manager)
            })
            .await?;
        Ok(manager.clone())
    }

    /// Runs one round trip with the connection, bounded by the timeout.
    async fn call<'a, T, F, Fut>(&'a self, op: F) -> Result<T, StoreError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = Result<T, StoreError>> + 'a,
    {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        if let Err(left) = self.breaker.admit() {
            return Err(StoreError::Unavailable(format!(
                "Redis is unavailable: failing fast for {} ms more after \
                 {BREAKER_FAILURES} or more failed calls in a row",
                left.as_millis()
            )));
        }
        let timeout = self.config.timeout();
        let work = async {
            let con = self.connection().await.map_err(redis_error)?;
            op(con).await
        };
        let result = match tokio::time::timeout(timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable(format!(
                "Redis did not answer within {timeout:?}"
            ))),
        };
        match &result {
            Ok(_) => self.breaker.succeeded(),
            Err(e) if e.is_transient() => self.breaker.failed(),
            Err(_) => {}
        }
        result
    }

    /// Redis's own clock (`TIME`), for [`RedisClock`].
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when Redis does not answer in time.
    pub async fn server_time(&self) -> Result<Timestamp, StoreError> {
        self.call(|mut con| async move {
            let (secs, micros): (u64, u64) = redis::cmd("TIME")
                .query_async(&mut con)
                .await
                .map_err(redis_error)?;
            let nanos = secs
                .saturating_mul(1_000_000_000)
                .saturating_add(micros.saturating_mul(1_000));
            Ok(Timestamp::from_unix_nanos(nanos))
        })
        .await
    }

    /// A request id unique among this store's requests and, with the random
    /// instance number, among every instance's.
    fn next_request_id(&self) -> String {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}{n:x}", self.instance)
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("config", &self.config)
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Connection trouble, timeouts and a server that is loading, busy or
/// failing over are transient; anything else (a script error, a corrupt
/// value) is not. The message is one line (the client's parse errors span
/// several), and a reply that is not the Redis protocol says so: that is
/// what an address of another kind of server (HTTP, say) answers.
pub(crate) fn redis_error(e: RedisError) -> StoreError {
    let text = redis_text(&e);
    let transient_code = matches!(
        e.code(),
        Some("BUSY" | "LOADING" | "TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN" | "READONLY" | "OOM")
    );
    if e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || transient_code
        || !matches!(e.retry_method(), RetryMethod::NoRetry)
    {
        StoreError::Unavailable(text)
    } else {
        StoreError::Failed(text)
    }
}

/// `Redis: <e>` on one line, the lines of `e` joined with `; `.
fn redis_text(e: &RedisError) -> String {
    let full = e.to_string();
    let lines: Vec<&str> = full
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let text = lines.join("; ");
    if e.kind() == redis::ErrorKind::Parse {
        format!(
            "Redis: the reply is not what a Redis server sends (is the address a \
             Redis server?): {text}"
        )
    } else {
        format!("Redis: {text}")
    }
}

/// The string at `name`, `None` when absent (a plain read, never a write).
pub(crate) async fn get(
    con: &mut ConnectionManager,
    name: &str,
) -> Result<Option<String>, StoreError> {
    redis::cmd("GET")
        .arg(name)
        .query_async(con)
        .await
        .map_err(redis_error)
}

#[async_trait]
impl Store for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }

    /// One call of the batch function (`FCALL`, or `EVALSHA` of the same
    /// code), whatever the batch holds; under load, shared with other
    /// requests' batches (coalesce.rs).
    async fn acquire(&self, batch: &Batch<'_>) -> Result<Vec<Decision>, StoreError> {
        batch::acquire(self, batch).await
    }

    /// A read: plain `GET`/`HMGET`, or for the sliding log a script that
    /// only reads. Never creates, changes or re-expires a key.
    async fn status(
        &self,
        policy: &Policy,
        key: &Key,
        now: Timestamp,
    ) -> Result<Decision, StoreError> {
        self.call(|mut con| async move {
            match policy.algorithm {
                Algorithm::FixedWindow => {
                    fixed_window::status(self, &mut con, policy, key, now).await
                }
                Algorithm::SlidingLog => {
                    sliding_log::status(self, &mut con, policy, key, now).await
                }
                Algorithm::SlidingWindow => {
                    sliding_window::status(self, &mut con, policy, key, now).await
                }
                Algorithm::Gcra => gcra::status(self, &mut con, policy, key, now).await,
            }
        })
        .await
    }

    /// `SCAN` and `UNLINK` in batches, reading each state first to count
    /// the counters in use (see `reset.rs`). Not atomic across keys (see
    /// the crate docs).
    async fn reset(
        &self,
        policy: &Policy,
        keys: KeyMatch<'_>,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        reset::reset(self, policy, keys, now).await
    }

    /// Does nothing and returns 0: every key carries its own expiry, so
    /// Redis drops state by itself once no algorithm needs it.
    async fn prune(
        &self,
        _algorithm: Algorithm,
        _longest_window: Duration,
        _now: Timestamp,
    ) -> Result<u64, StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        Ok(0)
    }

    fn keeps_audit_log(&self) -> bool {
        false
    }

    /// Marks the store closed; the connection goes with the store.
    /// One `PING`, bounded by the call timeout.
    async fn ping(&self) -> Result<(), StoreError> {
        self.call(|mut con| async move {
            let _: String = redis::cmd("PING")
                .query_async(&mut con)
                .await
                .map_err(redis_error)?;
            Ok(())
        })
        .await
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the client reports when the address answers HTTP (found by a
    /// fresh user's trial: three lines, and no hint of the cause).
    #[test]
    fn a_reply_that_is_not_redis_is_one_line_naming_the_likely_cause() {
        let parse =
            redis::ParsingError::from("Parse error at 1\nUnexpected `33`\nUnexpected `60`\n");
        let StoreError::Unavailable(text) = redis_error(RedisError::from(parse)) else {
            panic!("a reply that is not Redis is transient, as a wrong address is");
        };
        assert_eq!(
            text,
            "Redis: the reply is not what a Redis server sends (is the address a Redis \
             server?): Incompatible type - Parse error at 1; Unexpected `33`; Unexpected `60`"
        );
    }
}
