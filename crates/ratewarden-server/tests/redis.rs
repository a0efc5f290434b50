//! ratewarden on Redis, end to end: several `ratewarden serve` processes
//! sharing their limits through one Redis, what they do when Redis goes
//! away (under load) and comes back, and `ratewarden replay` on Redis
//! printing what it prints on the memory store.
//!
//! Each test starts its own `redis-server` on a free port (never the one on
//! 6379) and real `ratewarden` processes, and talks to them over HTTP.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;

mod common;

use common::{Instance, RedisServer, TEST_STORE_TIMEOUT_MS, avoid_window_edge};

/// The ping window of these tests (`--ping-window 86400`): a UTC day.
const DAY: Duration = Duration::from_secs(86_400);

/// Sends `n` requests at once, alternating between `instances`; returns
/// the status codes.
async fn stampede(
    instances: &[&Instance],
    n: usize,
    request: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
) -> Vec<u16> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client");
    let barrier = Arc::new(Barrier::new(n));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let builder = request(&client, &instances[i % instances.len()].base);
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            builder
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }));
    }
    let mut codes = Vec::with_capacity(n);
    for task in tasks {
        codes.push(task.await.expect("task"));
    }
    codes
}

const LIMIT: usize = 20;
const REQUESTS: usize = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_on_one_redis_admit_exactly_the_limit_for_every_algorithm() {
    let redis = RedisServer::start();
    for algorithm in ["fixed_window", "sliding_log", "sliding_window", "gcra"] {
        let args = [
            "--ping-algorithm",
            algorithm,
            "--ping-limit",
            "20",
            "--ping-window",
            "86400",
        ];
        let a = Instance::start(&redis.url(), &args).await;
        let b = Instance::start(&redis.url(), &args).await;
        // The fixed window's count starts over at UTC midnight: no round
        // may straddle it.
        avoid_window_edge(DAY, Duration::from_secs(60)).await;
        for round in 0..3 {
            let key = format!("{algorithm}-{round}");
            let codes = stampede(&[&a, &b], REQUESTS, |c, base| {
                c.get(format!("{base}/ping"))
                    .header("X-Client-Key", key.as_str())
            })
            .await;
            let allowed = codes.iter().filter(|&&c| c == 200).count();
            let refused = codes.iter().filter(|&&c| c == 429).count();
            assert_eq!(
                (allowed, refused),
                (LIMIT, REQUESTS - LIMIT),
                "{algorithm}, round {round}: {codes:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_on_one_redis_admit_exactly_the_limit_on_rate_check() {
    let redis = RedisServer::start();
    let args = ["--check-limit", "20", "--check-window", "86400"];
    let a = Instance::start(&redis.url(), &args).await;
    let b = Instance::start(&redis.url(), &args).await;
    for round in 0..3 {
        let user = (round + 1).to_string();
        let codes = stampede(&[&a, &b], REQUESTS, |c, base| {
            c.post(format!("{base}/rate/check"))
                .header("X-User-Id", user.as_str())
                .header("Content-Type", "application/json")
                .body(r#"{"endpoint":"/orders"}"#)
        })
        .await;
        let allowed = codes.iter().filter(|&&c| c == 200).count();
        assert_eq!(allowed, LIMIT, "round {round}: {codes:?}");
        assert_eq!(
            codes.iter().filter(|&&c| c == 429).count(),
            REQUESTS - LIMIT
        );
    }
}

/// One request's status and how long it took.
async fn ping(client: &reqwest::Client, instance: &Instance, key: &str) -> (u16, Duration, String) {
    let started = Instant::now();
    let response = client
        .get(format!("{}/ping", instance.base))
        .header("X-Client-Key", key)
        .send()
        .await
        .expect("ratewarden answers even when Redis is gone");
    let status = response.status().as_u16();
    let ctype = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    (status, started.elapsed(), ctype)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_outage_follows_the_failure_policy_and_ratewarden_recovers_on_its_own() {
    // An answer while Redis is down comes at once (refused connection, then
    // the breaker); one that waited for the 10 s store timeout would not
    // come within half of it, however busy the machine.
    const NO_HANG: Duration = Duration::from_secs(5);
    let mut redis = RedisServer::start();
    let port = redis.port();
    // The store timeout is the tests' (TEST_STORE_TIMEOUT_MS, 10 s, from
    // `Instance::start`) rather than the default 100 ms, so that the exact
    // answers before and after the outage do not depend on how busy the
    // machine is. Calls to a dead Redis fail at once whatever the timeout
    // (the connection is refused), which is what `NO_HANG` checks.
    let args = ["--ping-limit", "5", "--ping-window", "86400"];
    let closed = Instance::start(
        &redis.url(),
        &[&args[..], &["--on-store-error", "closed"]].concat(),
    )
    .await;
    let open = Instance::start(
        &redis.url(),
        &[&args[..], &["--on-store-error", "open"]].concat(),
    )
    .await;
    let client = reqwest::Client::new();
    assert_eq!(ping(&client, &closed, "before").await.0, 200);

    // Load on both instances while Redis dies: every answer follows the
    // policy (no 5xx but the documented 503, no hang). The client's timeout
    // only turns a hang into a failed assertion (status 0); it is generous
    // so that a request slowed by a busy machine is not one.
    let load: Vec<_> = (0..8)
        .map(|task| {
            let (closed, open) = (closed.base.clone(), open.base.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(30))
                    .build()
                    .expect("client");
                let mut seen = Vec::new();
                for i in 0..60 {
                    let base = if i % 2 == 0 { &closed } else { &open };
                    let status = client
                        .get(format!("{base}/ping"))
                        .header("X-Client-Key", format!("load-{task}-{i}"))
                        .send()
                        .await
                        .map(|r| r.status().as_u16())
                        .unwrap_or(0);
                    seen.push((i % 2 == 0, status));
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                seen
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    redis.kill();
    for task in load {
        for (is_closed, status) in task.await.expect("load task") {
            let allowed: &[u16] = if is_closed { &[200, 503] } else { &[200] };
            assert!(
                allowed.contains(&status),
                "closed={is_closed}: status {status}"
            );
        }
    }
    for i in 0..20 {
        let (status, took, ctype) = ping(&client, &closed, &format!("down-{i}")).await;
        assert_eq!(status, 503, "closed: refuse while Redis is down");
        assert!(ctype.starts_with("application/problem+json"), "{ctype}");
        assert!(took < NO_HANG, "closed took {took:?}");
        let (status, took, _) = ping(&client, &open, &format!("down-{i}")).await;
        assert_eq!(status, 200, "open: allow while Redis is down");
        assert!(took < NO_HANG, "open took {took:?}");
    }

    let _redis = RedisServer::start_on(port);
    let back = Instant::now();
    loop {
        if ping(&client, &closed, "probe-after").await.0 == 200 {
            break;
        }
        // Reconnecting takes at most a breaker pause and a 250 ms backoff
        // once the machine runs the service; 30 s allow for a loaded one
        // (the loop ends as soon as a request passes).
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "no recovery 30 s after Redis came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Decisions are correct again: exactly the limit for a fresh key (on
    // the closed instance, so a call that still failed would show as a 503,
    // never as an extra 200).
    avoid_window_edge(DAY, Duration::from_secs(30)).await;
    let codes: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..8 {
            v.push(ping(&client, &closed, "after").await.0);
        }
        v
    };
    assert_eq!(codes, [200, 200, 200, 200, 200, 429, 429, 429]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_following_redis_time_share_limits_too() {
    let redis = RedisServer::start();
    let args = [
        "--time-source",
        "redis",
        "--ping-limit",
        "20",
        "--ping-window",
        "86400",
    ];
    let a = Instance::start(&redis.url(), &args).await;
    let b = Instance::start(&redis.url(), &args).await;
    avoid_window_edge(DAY, Duration::from_secs(30)).await;
    let codes = stampede(&[&a, &b], REQUESTS, |c, base| {
        c.get(format!("{base}/ping"))
            .header("X-Client-Key", "redis-time")
    })
    .await;
    assert_eq!(
        codes.iter().filter(|&&c| c == 200).count(),
        LIMIT,
        "{codes:?}"
    );
}

/// A deterministic trace: several keys, costs 1 to 3, times in steps of 0
/// to 40 ms.
fn trace(lines: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut t = 1_767_225_600_000u64;
    let mut out = String::new();
    for _ in 0..lines {
        t += next() % 41;
        let key = next() % 7;
        let cost = 1 + next() % 3;
        out.push_str(&format!("{t} k{key} {cost}\n"));
    }
    out
}

fn replay(store: &str, algorithm: &str, input: &str) -> String {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratewarden"))
        .args([
            "replay",
            "--algorithm",
            algorithm,
            "--limit",
            "5",
            "--window",
            "1s",
            "--store",
            store,
            // Passed even though it is replay's default: a call past it
            // stops the replay, and the memory store ignores it.
            "--store-timeout-ms",
            TEST_STORE_TIMEOUT_MS,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("replay starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write trace");
    let output = child.wait_with_output().expect("replay ends");
    assert!(output.status.success(), "replay on {store} failed");
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[test]
fn replay_on_redis_prints_what_replay_on_memory_prints() {
    let redis = RedisServer::start();
    let input = trace(2_000);
    let algorithms = ["fixed_window", "sliding_log", "sliding_window", "gcra"];
    for (db, algorithm) in algorithms.into_iter().enumerate() {
        // A database of its own per algorithm: replay continues from stored state.
        let url = format!("redis://127.0.0.1:{}/{}", redis.port(), db + 1);
        let on_memory = replay("memory", algorithm, &input);
        let on_redis = replay(&url, algorithm, &input);
        assert_eq!(on_memory.lines().count(), 2_000);
        assert!(
            on_memory.contains(" deny "),
            "{algorithm}: the trace exercises denials"
        );
        assert_eq!(on_memory, on_redis, "{algorithm}");
    }
}
