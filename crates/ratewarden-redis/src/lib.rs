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
//! a timeout, a lost connection, a refused password or a server that is
//! loading or busy is [`StoreError::Unavailable`] (transient: the
//! policies' fail-open or fail-closed handling applies), its message
//! saying which: `NOAUTH` (the URL gives no password and Redis needs
//! one), a refused password (`WRONGPASS`), a refused connection, a peer
//! that does not speak the Redis protocol, or no answer in time. A
//! connection is one attempt (a refused one fails at once, not after
//! retries that outlast the call's timeout) and starts with `PING`, so a
//! missing password shows as `NOAUTH` before any script is sent.
//!
//! # When decisions go unchecked: the breaker
//! A decision is made without Redis (allowed unchecked with
//! `on_store_error = "open"`, refused with `"closed"`) exactly when its
//! call fails, and a call fails
//!
//! - when Redis does not answer within the timeout (the request waited
//!   that long), or answers with an error that says "later" (`LOADING`,
//!   `BUSY`, …);
//! - at once, while the **breaker** is open. It opens on a failure that
//!   says the server is down or unusable — a refused, reset or lost
//!   connection, a refused or missing password, another protocol — and on
//!   a sustained run of timeouts: at least [`TIMEOUTS_TO_OPEN`], the last
//!   [`TIMEOUT_SPAN`] (1 s) or more after the first, with no call
//!   answered in between. A single slow answer of a live Redis (a
//!   machine under CPU load) never opens it, since the calls around it
//!   answer. While it is open, a probe in the background tries Redis
//!   every [`PROBE_INTERVAL`] (a connection within the connect timeout,
//!   then `PING` within the call timeout); its answer closes the
//!   breaker. No request waits for the probe.
//!
//! So a dead Redis whose connections are refused costs no request any
//! wait; one that accepts connections and never answers costs the
//! requests of the first second the timeout each, then none.
//!
//! # Layout
//! - `config.rs`: [`RedisConfig`] (redacted `Display`), [`RedisConfigError`].
//! - `link.rs`: the connection, what its failures mean, the probe;
//!   `breaker.rs`: when calls fail fast.
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
mod breaker;
mod clock;
mod coalesce;
mod config;
mod fixed_window;
mod gcra;
mod keys;
mod link;
mod numbers;
mod reset;
mod scripts;
mod sliding_log;
mod sliding_window;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ratewarden_core::{
    Algorithm, Batch, Decision, Key, KeyMatch, Policy, Store, StoreError, Timestamp,
};
use redis::{RedisError, RetryMethod};

pub use breaker::{TIMEOUT_SPAN, TIMEOUTS_TO_OPEN};
pub use clock::RedisClock;
use coalesce::Coalescer;
pub use config::{RedisConfig, RedisConfigError};
pub use link::PROBE_INTERVAL;
use link::{Conn, Link};
use scripts::Scripts;

/// What [`RedisStore::diagnose`] found.
#[derive(Debug, Clone)]
pub enum Diagnosis {
    /// Redis answered `PING`.
    Answers,
    /// Redis refused this configuration: a missing password (`NOAUTH`), a
    /// refused one (`WRONGPASS`), or the address speaks another protocol.
    Refused(StoreError),
    /// No answer: the connection was refused, or timed out.
    Unreachable(StoreError),
}

/// The Redis store. Cheap to share behind an `Arc`; see the crate docs for
/// its consistency promise.
pub struct RedisStore {
    config: RedisConfig,
    /// The connection, the breaker and the probe.
    link: Arc<Link>,
    scripts: Arc<Scripts>,
    /// Several requests' batches in one call (coalesce.rs).
    coalescer: Arc<Coalescer>,
    /// Random per store, so sliding-log members of two instances differ.
    instance: u64,
    requests: AtomicU64,
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
        let link = Arc::new(Link::new(config.clone(), client));
        let scripts = Arc::clone(&link.scripts);
        let coalescer = Arc::new(Coalescer::new(Arc::clone(&scripts), config.timeout()));
        Ok(RedisStore {
            config,
            link,
            scripts,
            coalescer,
            instance: rand::random(),
            requests: AtomicU64::new(0),
        })
    }

    /// A store connected now, with its scripts loaded.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when Redis cannot be reached within the
    /// connect timeout (the message says why: refused, `NOAUTH`, a refused
    /// password, another protocol, no answer), [`StoreError::Failed`] for
    /// an invalid URL.
    pub async fn connect(config: RedisConfig) -> Result<RedisStore, StoreError> {
        let store = RedisStore::new(config).map_err(|e| StoreError::Failed(e.to_string()))?;
        store.check().await?;
        Ok(store)
    }

    /// Connects if need be (within the connect timeout) and sends `PING`
    /// (within the call timeout), whether or not the breaker is open:
    /// `Ok` when Redis answers, else why not, in the words of
    /// [`RedisStore::connect`].
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] with the cause.
    pub async fn check(&self) -> Result<(), StoreError> {
        self.link.check().await
    }

    /// As [`RedisStore::check`], telling apart what the configuration
    /// must fix from a server that is down: [`Diagnosis`].
    pub async fn diagnose(&self) -> Diagnosis {
        match self.link.diagnose().await {
            Ok(()) => Diagnosis::Answers,
            Err((true, e)) => Diagnosis::Refused(e),
            Err((false, e)) => Diagnosis::Unreachable(e),
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

    /// Runs one round trip with the connection, bounded by the timeout;
    /// fails at once while the breaker is open (`breaker.rs`).
    async fn call<'a, T, F, Fut>(&'a self, op: F) -> Result<T, StoreError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = Result<T, StoreError>> + 'a,
    {
        if self.link.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        if let Err(cause) = self.link.breaker.admit() {
            return Err(StoreError::Unavailable(format!(
                "{cause} (failing fast until Redis answers a probe, every {} ms)",
                PROBE_INTERVAL.as_millis()
            )));
        }
        let timeout = self.config.timeout();
        let work = async {
            let con = self.link.connection().await.map_err(redis_error)?;
            op(con).await
        };
        let result = match tokio::time::timeout(timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable(format!(
                "Redis: no answer within the timeout ({timeout:?})"
            ))),
        };
        match &result {
            Ok(_) => self.link.answered(),
            // A failure that says the server is down has opened the
            // breaker already (link.rs); the others count into its run.
            Err(e) if e.is_transient() && !self.link.breaker.is_open() => self.link.slow(e),
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
            .field("closed", &self.link.closed.load(Ordering::Relaxed))
            .field("breaker_open", &self.link.breaker.is_open())
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
    // NOAUTH and WRONGPASS: the server is there but this configuration
    // cannot use it; transient as an unreachable server is (the password
    // may be set on the server meanwhile), so the failure policy applies.
    let transient_code = matches!(
        e.code(),
        Some(
            "BUSY"
                | "LOADING"
                | "TRYAGAIN"
                | "CLUSTERDOWN"
                | "MASTERDOWN"
                | "READONLY"
                | "OOM"
                | "NOAUTH"
                | "WRONGPASS"
        )
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

/// `Redis: <e>` on one line, the lines of `e` joined with `; `, saying
/// what the errors a misconfiguration gives mean: a missing or refused
/// password, a refused connection, a peer of another protocol.
fn redis_text(e: &RedisError) -> String {
    let full = e.to_string();
    let lines: Vec<&str> = full
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let text = lines.join("; ");
    if e.code() == Some("NOAUTH") {
        format!(
            "Redis: the server requires a password and the URL gives none (NOAUTH); \
             write it in the URL: redis://:PASSWORD@HOST:PORT/DB ({text})"
        )
    } else if e.kind() == redis::ErrorKind::AuthenticationFailed || e.code() == Some("WRONGPASS") {
        format!(
            "Redis: the server refused the password in the URL (WRONGPASS: a wrong \
             password or user, or a password sent to a server that has none) ({text})"
        )
    } else if e.is_timeout() {
        format!(
            "Redis: no answer in time: something accepts connections at that address \
             but does not answer, or nothing accepts them ({text})"
        )
    } else if e.is_connection_refusal() {
        format!("Redis: connection refused: nothing listens at that address and port ({text})")
    } else if e.kind() == redis::ErrorKind::Parse {
        format!(
            "Redis: the reply is not what a Redis server sends (is the address a \
             Redis server?): {text}"
        )
    } else {
        format!("Redis: {text}")
    }
}

/// The string at `name`, `None` when absent (a plain read, never a write).
pub(crate) async fn get(con: &mut Conn, name: &str) -> Result<Option<String>, StoreError> {
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
        if self.link.closed.load(Ordering::Acquire) {
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
        self.link.closed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the client reports when the address answers HTTP: one line
    /// naming the likely cause, not the parser's three lines without one.
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
