//! What only Redis has: key expiry, script and function caching, and
//! reconnection.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::future::Future;
use std::num::NonZeroU64;
use std::task::Poll;
use std::time::{Duration, Instant};

use common::{RedisServer, fresh_prefix, server_without_functions, store_on, test_store_timeout};
use ratewarden_core::{
    Acquire, Algorithm, Batch, Decision, Key, Policy, Quota, Store, StoreError, Timestamp,
};
use ratewarden_redis::{RedisConfig, RedisStore};

const SEC: u64 = 1_000_000_000;
/// 2026-01-01T00:00:00Z.
const T0: u64 = 1_767_225_600 * SEC;

fn policy(algorithm: Algorithm, limit: u64, window: Duration) -> Policy {
    Policy::new("t", algorithm, Quota::new(limit, window).unwrap())
}

async fn acquire(
    store: &RedisStore,
    policy: &Policy,
    key: &Key,
    t: u64,
    cost: u64,
) -> Result<Decision, StoreError> {
    let check = Acquire {
        cost: NonZeroU64::new(cost).unwrap(),
        ..Acquire::one(policy, key)
    };
    let decisions = store
        .acquire(&Batch::one(Timestamp::from_unix_nanos(t), check))
        .await?;
    Ok(decisions[0])
}

/// Every key under `prefix` with its PTTL in ms.
fn ttls(server: &RedisServer, prefix: &str) -> Vec<(String, i64)> {
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let mut cursor = 0u64;
    let mut out = Vec::new();
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query(&mut con)
            .unwrap();
        for key in keys {
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
            out.push((key, ttl));
        }
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

#[tokio::test]
async fn no_key_lives_without_a_ttl_after_runs_across_several_windows() {
    let server = RedisServer::start();
    let store = store_on(&server).await;
    let prefix = store.config().key_prefix().to_owned();
    for algorithm in Algorithm::ALL {
        for (i, window) in [
            Duration::from_nanos(3),
            Duration::from_millis(7),
            Duration::from_secs(60),
        ]
        .into_iter()
        .enumerate()
        {
            let p = policy(algorithm, 3, window);
            let w = u64::try_from(window.as_nanos()).unwrap();
            for k in 0..4u64 {
                let key = Key::new(["ttl".as_bytes(), &[i as u8], &k.to_be_bytes()]).unwrap();
                // Several windows, allowed and denied requests, costs 1 and 2.
                for step in 0..12u64 {
                    let t = T0 + step * w / 3 + k;
                    acquire(&store, &p, &key, t, 1 + step % 2).await.unwrap();
                }
            }
        }
    }
    let keys = ttls(&server, &prefix);
    assert!(!keys.is_empty(), "the runs left no keys at all");
    let immortal: Vec<_> = keys.iter().filter(|(_, ttl)| *ttl <= 0).collect();
    assert!(immortal.is_empty(), "keys without a TTL: {immortal:?}");
}

#[tokio::test]
async fn ttls_last_exactly_as_long_as_the_state_is_needed() {
    let server = RedisServer::start();
    let config = RedisConfig::from_url(&server.url())
        .unwrap()
        .with_key_prefix(&fresh_prefix())
        .unwrap()
        .with_ttl_slack(Duration::ZERO)
        .with_timeout(test_store_timeout());
    let prefix = config.key_prefix().to_owned();
    let store = RedisStore::connect(config).await.unwrap();
    let w = Duration::from_secs(60);
    // Half-way through a window: t = T0 + 30 s.
    let t = T0 + 30 * SEC;
    let cases = [
        // until the window's end
        (Algorithm::FixedWindow, 30_000),
        // until the newest event is W old
        (Algorithm::SlidingLog, 60_000),
        // until (k+2)·W, when curr stops weighing
        (Algorithm::SlidingWindow, 90_000),
        // until tat = t + 3·T, T = 6 s
        (Algorithm::Gcra, 18_000),
    ];
    for (algorithm, expected_ms) in cases {
        let p = policy(algorithm, 10, w);
        let key = Key::single(algorithm.as_str()).unwrap();
        let written = Instant::now();
        assert!(acquire(&store, &p, &key, t, 3).await.unwrap().allowed());
        let keys = ttls(&server, &format!("{prefix}rw:{algorithm}:"));
        // The TTL counts down from the write to the read: up to 2 s below
        // the TTL written, plus however long a busy machine took between
        // the two (`waited`), so that only a TTL written too short fails.
        let waited = i64::try_from(written.elapsed().as_millis()).unwrap();
        assert_eq!(keys.len(), 1, "{algorithm}: {keys:?}");
        let ttl = keys[0].1;
        assert!(
            ttl <= expected_ms && ttl > expected_ms - 2_000 - waited,
            "{algorithm}: TTL {ttl} ms, expected {expected_ms} ms ({waited} ms after the write)"
        );
    }
}

/// GCRA's TTL: the state's span plus the slack, whatever the slack's size
/// (up to 15 digits of ms in doubles, beyond in decimal strings), and
/// never shorter than the TTL the key already has.
#[tokio::test]
async fn a_gcra_ttl_adds_any_slack_and_is_never_shortened() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let t = T0 + 30 * SEC;
    // tat = t + 3·T, T = 6 s: 18,000 ms of state.
    let p = policy(Algorithm::Gcra, 10, Duration::from_secs(60));
    for slack_ms in [0, 1_000, 999_999_999_999_999, 1_000_000_000_000_007] {
        let config = RedisConfig::from_url(&server.url())
            .unwrap()
            .with_key_prefix(&fresh_prefix())
            .unwrap()
            .with_ttl_slack(Duration::from_millis(slack_ms))
            .with_timeout(test_store_timeout());
        let prefix = config.key_prefix().to_owned();
        let store = RedisStore::connect(config).await.unwrap();
        let key = Key::single("k").unwrap();
        let written = Instant::now();
        assert!(acquire(&store, &p, &key, t, 3).await.unwrap().allowed());
        let keys = ttls(&server, &prefix);
        let waited = i64::try_from(written.elapsed().as_millis()).unwrap();
        let expected = 18_000 + i64::try_from(slack_ms).unwrap();
        assert_eq!(keys.len(), 1, "slack {slack_ms}: {keys:?}");
        let ttl = keys[0].1;
        assert!(
            ttl <= expected && ttl > expected - 2_000 - waited,
            "slack {slack_ms}: TTL {ttl} ms, expected {expected} ms"
        );
        // A longer TTL (set by an instance whose clock is behind) stays.
        let longer = expected + 5_000_000;
        let _: () = redis::cmd("PEXPIRE")
            .arg(&keys[0].0)
            .arg(longer)
            .query(&mut con)
            .unwrap();
        assert!(acquire(&store, &p, &key, t, 1).await.unwrap().allowed());
        let ttl = ttls(&server, &prefix)[0].1;
        assert!(
            ttl > longer - 2_000 - waited,
            "slack {slack_ms}: TTL {ttl} ms, kept at least {longer} ms"
        );
    }
}

#[tokio::test]
async fn batches_run_as_fcall_of_the_versioned_library_on_redis_7() {
    let server = RedisServer::start();
    let store = store_on(&server).await;
    assert!(store.uses_functions());
    let list = server.command(&["FUNCTION", "LIST"]);
    assert!(list.contains("ratewarden_batch_"), "{list}");
    let (fcalls, evalshas) = (calls(&server, "fcall"), calls(&server, "evalsha"));
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 1, Duration::from_secs(60));
        let key = Key::single("fcall").unwrap();
        assert!(acquire(&store, &p, &key, T0, 1).await.unwrap().allowed());
        assert!(!acquire(&store, &p, &key, T0, 1).await.unwrap().allowed());
    }
    assert_eq!(calls(&server, "fcall"), fcalls + 8);
    assert_eq!(calls(&server, "evalsha"), evalshas, "no batch by EVALSHA");
    // A second store (another instance) finds the library loaded already.
    let other = store_on(&server).await;
    assert!(other.uses_functions());
}

/// `calls` of `cmdstat_<command>` in `INFO commandstats`, 0 when absent.
fn calls(server: &RedisServer, command: &str) -> u64 {
    let info = server.command(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// Each algorithm keeps its count across `flush` (which drops the code
/// the store runs), and the store goes on running it the same way.
async fn decisions_survive(server: &RedisServer, flush: &[&str], functions: bool) {
    let store = store_on(server).await;
    assert_eq!(store.uses_functions(), functions);
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 2, Duration::from_secs(60));
        let key = Key::single("flushed").unwrap();
        assert!(acquire(&store, &p, &key, T0, 1).await.unwrap().allowed());
        assert!(server.command(flush).starts_with("+OK"));
        let d = acquire(&store, &p, &key, T0, 1).await.unwrap();
        assert!(d.allowed(), "{algorithm}: after {flush:?}: {d:?}");
        assert_eq!(d.remaining, 0, "{algorithm}: the count was kept");
        let d = acquire(&store, &p, &key, T0, 1).await.unwrap();
        assert!(!d.allowed(), "{algorithm}: over the limit: {d:?}");
    }
    assert_eq!(store.uses_functions(), functions);
}

#[tokio::test]
async fn decisions_survive_a_script_flush() {
    // The script form: a server without functions (with them, SCRIPT
    // FLUSH would not touch the batch).
    decisions_survive(&server_without_functions(), &["SCRIPT", "FLUSH"], false).await;
}

#[tokio::test]
async fn decisions_survive_a_function_flush() {
    decisions_survive(&RedisServer::start(), &["FUNCTION", "FLUSH"], true).await;
}

#[tokio::test]
async fn a_user_not_permitted_to_load_functions_runs_batches_by_evalsha() {
    let server = RedisServer::start();
    let created = server.command(&[
        "ACL",
        "SETUSER",
        "nofunc",
        "on",
        ">secret",
        "~*",
        "+@all",
        "-function",
    ]);
    assert!(created.starts_with("+OK"), "{created}");
    let url = format!("redis://nofunc:secret@127.0.0.1:{}/0", server.port());
    let config = RedisConfig::from_url(&url)
        .unwrap()
        .with_key_prefix(&fresh_prefix())
        .unwrap()
        .with_timeout(test_store_timeout());
    let store = RedisStore::connect(config).await.unwrap();
    assert!(!store.uses_functions(), "FUNCTION LOAD is refused (NOPERM)");
    let p = policy(Algorithm::Gcra, 1, Duration::from_secs(60));
    let key = Key::single("acl").unwrap();
    assert!(acquire(&store, &p, &key, T0, 1).await.unwrap().allowed());
    assert!(!acquire(&store, &p, &key, T0, 1).await.unwrap().allowed());
}

#[tokio::test]
async fn without_functions_batches_run_by_evalsha_with_the_same_answers() {
    let server = server_without_functions();
    let store = store_on(&server).await;
    assert!(!store.uses_functions());
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 2, Duration::from_secs(60));
        let key = Key::single("evalsha").unwrap();
        let d = acquire(&store, &p, &key, T0, 1).await.unwrap();
        assert!(d.allowed() && d.remaining == 1, "{algorithm}: {d:?}");
        let d = acquire(&store, &p, &key, T0, 1).await.unwrap();
        assert!(d.allowed() && d.remaining == 0, "{algorithm}: {d:?}");
        let d = acquire(&store, &p, &key, T0, 1).await.unwrap();
        assert!(!d.allowed(), "{algorithm}: over the limit: {d:?}");
    }
    assert_eq!(calls(&server, "evalsha"), 12);
}

/// Requests waiting at once share calls: 64 concurrent requests for one
/// key (limit 10) are decided exactly, in fewer calls than requests.
async fn concurrent_requests_share_calls(server: &RedisServer, command: &str) {
    let store = std::sync::Arc::new(store_on(server).await);
    let before = calls(server, command);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move {
            let p = policy(Algorithm::FixedWindow, 10, Duration::from_secs(60));
            let key = Key::single("shared").unwrap();
            acquire(&store, &p, &key, T0, 1).await.unwrap().allowed()
        });
    }
    let allowed = tasks.join_all().await.into_iter().filter(|a| *a).count();
    assert_eq!(allowed, 10, "exactly the limit");
    let sent = calls(server, command) - before;
    assert!(
        (1..=4).contains(&sent),
        "64 requests in {sent} {command} calls"
    );
}

#[tokio::test]
async fn concurrent_requests_share_fcalls() {
    concurrent_requests_share_calls(&RedisServer::start(), "fcall").await;
}

#[tokio::test]
async fn concurrent_requests_share_evalshas() {
    concurrent_requests_share_calls(&server_without_functions(), "evalsha").await;
}

/// A batch that raises an error in a shared call (its key holds another
/// type: `WRONGTYPE`) fails alone, having written nothing; the batch that
/// shares its call is decided and written as usual.
async fn an_error_in_a_shared_call_fails_only_its_batch(server: &RedisServer, command: &str) {
    let store = store_on(server).await;
    let p = policy(Algorithm::Gcra, 2, Duration::from_secs(60));
    let (good, bad) = (Key::single("good").unwrap(), Key::single("bad").unwrap());
    assert!(acquire(&store, &p, &bad, T0, 1).await.unwrap().allowed());
    let (name, _) = ttls(server, "").pop().unwrap();
    server.command(&["DEL", &name]);
    server.command(&["HSET", &name, "other", "data"]);
    let before = calls(server, command);
    let (ok, failed) = tokio::join!(
        acquire(&store, &p, &good, T0, 1),
        acquire(&store, &p, &bad, T0, 1)
    );
    assert_eq!(calls(server, command), before + 1, "one call carried both");
    let d = ok.unwrap();
    assert!(d.allowed() && d.remaining == 1, "{d:?}");
    match failed {
        Err(StoreError::Failed(m)) => assert!(m.contains("WRONGTYPE"), "{m}"),
        other => panic!("a key of another type: {other:?}"),
    }
    assert!(
        server.command(&["TYPE", &name]).contains("hash"),
        "left alone"
    );
    let d = acquire(&store, &p, &good, T0, 1).await.unwrap();
    assert!(
        d.allowed() && d.remaining == 0,
        "the good batch was written: {d:?}"
    );
}

/// A batch whose caller gives up before it is sent (its future polled
/// once, which queues the batch, then dropped) is never sent, so never
/// charged.
#[tokio::test]
async fn a_batch_given_up_before_it_is_sent_is_never_charged() {
    let server = RedisServer::start();
    let store = store_on(&server).await;
    let p = policy(Algorithm::FixedWindow, 1, Duration::from_secs(60));
    let key = Key::single("gave-up").unwrap();
    let before = calls(&server, "fcall");
    let mut caller = Box::pin(acquire(&store, &p, &key, T0, 1));
    // One poll, without yielding: this test's runtime has one thread, so
    // the driver task the poll spawned has not run yet.
    let polled = std::future::poll_fn(|cx| Poll::Ready(caller.as_mut().poll(cx))).await;
    assert!(polled.is_pending(), "queued, waiting for its answer");
    drop(caller);
    // The driver sends batches in the order they were queued, so once the
    // next one is answered the dropped one had its turn, however late the
    // driver ran: one call, this one's, and the limit whole.
    let d = acquire(&store, &p, &key, T0, 1).await.unwrap();
    assert!(d.allowed() && d.remaining == 0, "the limit is whole: {d:?}");
    assert_eq!(
        calls(&server, "fcall"),
        before + 1,
        "the dropped batch was not sent"
    );
}

#[tokio::test]
async fn an_error_in_a_shared_fcall_fails_only_its_batch() {
    an_error_in_a_shared_call_fails_only_its_batch(&RedisServer::start(), "fcall").await;
}

#[tokio::test]
async fn an_error_in_a_shared_evalsha_fails_only_its_batch() {
    let server = server_without_functions();
    an_error_in_a_shared_call_fails_only_its_batch(&server, "evalsha").await;
}

/// How long a store on a Redis that came back may take to decide again:
/// the breaker's next probe (`PROBE_INTERVAL`, 250 ms away at most) and
/// loading the functions again, well under a second on an idle machine. 30 s allow for a loaded one; the
/// tests stop waiting as soon as a call succeeds.
const RECOVERY: Duration = Duration::from_secs(30);

/// What a call to a dead Redis may take past the store's timeout on a
/// loaded machine (waking up, the error's way back).
const SLACK: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_is_unavailable_then_recovers_by_itself() {
    let mut server = RedisServer::start();
    // The tests' timeout (10 s) rather than the default 100 ms: the calls
    // before the outage and after the restart must succeed however busy
    // the machine is. Calls while Redis is down fail without waiting for
    // it (the connection is refused), and never wait longer.
    let timeout = test_store_timeout();
    let config = RedisConfig::from_url(&server.url())
        .unwrap()
        .with_key_prefix(&fresh_prefix())
        .unwrap()
        .with_timeout(timeout);
    let store = RedisStore::connect(config).await.unwrap();
    let p = policy(Algorithm::Gcra, 5, Duration::from_secs(60));
    let key = Key::single("restart").unwrap();
    assert!(acquire(&store, &p, &key, T0, 1).await.unwrap().allowed());

    server.kill();
    for i in 0..5u64 {
        let started = Instant::now();
        let result = acquire(&store, &p, &key, T0 + i, 1).await;
        let took = started.elapsed();
        match result {
            Err(StoreError::Unavailable(_)) => {}
            other => panic!("call {i} while Redis is down: {other:?}"),
        }
        // A killed server refuses connections: the call fails at once, far
        // within the 10 s timeout, which it would take only if it waited.
        assert!(
            took < SLACK,
            "call {i} took {took:?}: it waited (timeout {timeout:?})"
        );
        let status = store.status(&p, &key, Timestamp::from_unix_nanos(T0)).await;
        assert!(
            matches!(status, Err(ref e) if e.is_transient()),
            "{status:?}"
        );
    }

    server.restart();
    let restarted = Instant::now();
    loop {
        match acquire(&store, &p, &key, T0 + SEC, 1).await {
            Ok(d) => {
                assert!(d.allowed(), "{d:?}");
                break;
            }
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                assert!(
                    restarted.elapsed() < RECOVERY,
                    "still failing {:?} after the restart: {e}",
                    restarted.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    println!(
        "decisions work again {:?} after the restart",
        restarted.elapsed()
    );
}

#[tokio::test]
async fn a_closed_store_refuses_calls() {
    let server = RedisServer::start();
    let store = store_on(&server).await;
    store.close().await;
    let p = policy(Algorithm::FixedWindow, 1, Duration::from_secs(1));
    let key = Key::single("closed").unwrap();
    assert!(matches!(
        acquire(&store, &p, &key, T0, 1).await,
        Err(StoreError::Closed)
    ));
}

#[test]
fn the_harness_names_the_install_command() {
    assert!(common::INSTALL.contains("apt-get install -y redis-server"));
}

/// The scripts' decimal arithmetic against Rust's `u128`, on values far
/// past a double's 2^53.
#[test]
fn decimal_arithmetic_in_lua_is_exact_past_2_pow_53() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let script = redis::Script::new(&format!(
        "{}\n{}",
        include_str!("../src/lua/decimal.lua"),
        "local a, b = big(ARGV[1]), big(ARGV[2])
         local d = '0'
         if cmp(a, b) >= 0 then d = str(sub(a, b)) end
         return { str(add(a, b)), d, str(mul(a, b)), cmp(a, b),
                  str(div_ceil_small(a, 1000000)) }"
    ));
    let big = [
        0u128,
        1,
        9_999_999,
        10_000_000,
        (1 << 53) + 1,
        u128::from(i64::MAX as u64),
        u128::from(u64::MAX),
        1_767_225_600_000_000_007,
        u128::from(u64::MAX) * 3 + 17,
    ];
    for &a in &big {
        for &b in &big {
            let (sum, diff, product, order, ms): (String, String, String, i64, String) = script
                .arg(a.to_string())
                .arg(b.to_string())
                .invoke(&mut con)
                .unwrap();
            assert_eq!(sum, (a + b).to_string(), "{a} + {b}");
            assert_eq!(diff, a.saturating_sub(b).to_string(), "{a} - {b}");
            if let Some(p) = a.checked_mul(b) {
                assert_eq!(product, p.to_string(), "{a} * {b}");
            }
            assert_eq!(order, a.cmp(&b) as i64, "cmp({a}, {b})");
            assert_eq!(ms, a.div_ceil(1_000_000).to_string(), "ceil({a} / 10^6)");
        }
    }
}

/// While Redis is down no call waits for the timeout: a refused
/// connection opens the breaker at once, and every call after it fails
/// fast until the probe finds Redis back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_fails_fast_after_one_refusal_and_recovers() {
    let mut server = RedisServer::start();
    // The tests' timeout (10 s), so that the calls before the outage and
    // after the restart succeed however busy the machine is; failing fast
    // is then all the more visible: a call that waited for the timeout
    // would take 10 s.
    let timeout = test_store_timeout();
    let config = RedisConfig::from_url(&server.url())
        .unwrap()
        .with_key_prefix(&fresh_prefix())
        .unwrap()
        .with_timeout(timeout);
    let store = RedisStore::connect(config).await.unwrap();
    let p = policy(Algorithm::FixedWindow, 5, Duration::from_secs(60));
    let key = Key::single("breaker").unwrap();
    assert!(acquire(&store, &p, &key, T0, 1).await.unwrap().allowed());
    server.kill();
    // A refused connection says the server is down: the breaker opens at
    // the first failure, and no call tries Redis while it is open (the
    // probe does, in the background).
    assert!(acquire(&store, &p, &key, T0, 1).await.is_err());
    let started = Instant::now();
    for _ in 0..50 {
        match acquire(&store, &p, &key, T0, 1).await {
            Err(StoreError::Unavailable(m)) if m.contains("failing fast") => {}
            other => panic!("while Redis is down: {other:?}"),
        }
    }
    // At once: together far less than one call waiting for the timeout,
    // where the 50 calls would take 50 timeouts (500 s) without it.
    let took = started.elapsed();
    assert!(took < timeout, "50 calls that failed fast took {took:?}");
    server.restart();
    let restarted = Instant::now();
    while acquire(&store, &p, &key, T0 + SEC, 1).await.is_err() {
        assert!(
            restarted.elapsed() < RECOVERY,
            "still failing {:?} after the restart",
            restarted.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
