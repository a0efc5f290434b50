//! What ratewarden says, and how fast it answers, when its Redis cannot
//! be used: a missing password (`NOAUTH`), a refused one (`WRONGPASS`), a
//! closed port, a listener that accepts and never answers, a peer that
//! speaks another protocol. Each is named as what it is in `/readyz`, the
//! log and `check-config`; a refused connection fails at once, and while
//! Redis is down no request waits for the store (the breaker's probe runs
//! in the background).
//!
//! Real `redis-server` processes and listeners of the tests' own, on free
//! ports. No assertion is about how fast the machine is: where an answer
//! must come "at once", the store timeout is 30 s and the bound 10 s.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Instance, RedisServer, free_port, run};
use ratewarden_testkit::peer::FakePeer;
use serde_json::Value;

/// A store timeout that no answer in these tests may wait for.
const LONG_TIMEOUT_MS: &str = "30000";

/// A generous bound on an answer that takes milliseconds, far from
/// [`LONG_TIMEOUT_MS`].
const AT_ONCE: Duration = Duration::from_secs(10);

const PASSWORD: &str = "s3cret";

/// `serve` on `url`, failing open, with the store timeout `timeout_ms`.
async fn serve(url: &str, timeout_ms: &str) -> Instance {
    Instance::start(
        url,
        &["--on-store-error", "open", "--store-timeout-ms", timeout_ms],
    )
    .await
}

/// `/readyz`'s status and detail.
async fn readyz(base: &str) -> (u16, String) {
    let r = reqwest::get(format!("{base}/readyz")).await.unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    (
        status,
        body["detail"].as_str().unwrap_or_default().to_owned(),
    )
}

/// `/readyz` once it reports the store unavailable (the first probe may
/// still be under way at start).
async fn unready(base: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, detail) = readyz(base).await;
        if status == 503 {
            return detail;
        }
        assert!(Instant::now() < deadline, "/readyz stayed {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `GET /ping`: its status and how long it took.
async fn ping(base: &str) -> (u16, Duration) {
    let started = Instant::now();
    let r = reqwest::Client::new()
        .get(format!("{base}/ping"))
        .header("X-Client-Key", "k")
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), started.elapsed())
}

/// `check-config` on a file naming `url` as its store: exit code,
/// standard output, standard error.
fn check_config(dir: &Path, url: &str) -> (i32, String, String) {
    let file = dir.join("rw.toml");
    std::fs::write(&file, format!("store = \"{url}\"\n")).unwrap();
    let out = run(&["check-config", file.to_str().unwrap()], dir);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn with_password(redis: &RedisServer, password: &str) -> String {
    format!("redis://:{password}@127.0.0.1:{}/0", redis.port())
}

#[tokio::test]
async fn the_right_password_is_ready_and_check_config_says_redis_answers() {
    let redis = RedisServer::start_with(free_port(), &["--requirepass", PASSWORD]);
    let url = with_password(&redis, PASSWORD);
    let app = serve(&url, common::TEST_STORE_TIMEOUT_MS).await;
    let (status, _) = readyz(&app.base).await;
    assert_eq!(status, 200, "{}", app.log());
    assert!(
        app.wait_for_log(AT_ONCE, |l| l.contains("Redis answers"))
            .await,
        "{}",
        app.log()
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check_config(dir.path(), &url);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Redis answers"), "{out}");
    assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD));
}

#[tokio::test]
async fn a_wrong_password_is_named_as_such_not_as_a_timeout() {
    let redis = RedisServer::start_with(free_port(), &["--requirepass", PASSWORD]);
    let url = with_password(&redis, "wrong");
    // The default 100 ms timeout: the cause must not read as a timeout.
    let app = serve(&url, "100").await;
    let detail = unready(&app.base).await;
    assert!(
        detail.contains("refused the password") && detail.contains("WRONGPASS"),
        "{detail}"
    );
    assert!(!detail.contains("within"), "not a timeout: {detail}");
    let (status, took) = ping(&app.base).await;
    assert_eq!(status, 200, "fails open");
    assert!(took < AT_ONCE, "{took:?}");
    assert!(
        app.wait_for_log(AT_ONCE, |l| l.contains("ERROR") && l.contains("WRONGPASS"))
            .await,
        "{}",
        app.log()
    );
    assert!(
        !app.log().contains("wrong@"),
        "the password is never logged"
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check_config(dir.path(), &url);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("WRONGPASS"), "{err}");
}

#[tokio::test]
async fn no_password_against_a_redis_that_needs_one_is_noauth() {
    let redis = RedisServer::start_with(free_port(), &["--requirepass", PASSWORD]);
    let url = format!("redis://127.0.0.1:{}/0", redis.port());
    let app = serve(&url, "100").await;
    let detail = unready(&app.base).await;
    assert!(
        detail.contains("NOAUTH") && detail.contains("requires a password"),
        "{detail}"
    );
    assert!(!detail.contains("unauthenticated bulk length"), "{detail}");
    assert_eq!(ping(&app.base).await.0, 200, "fails open");
    assert!(
        app.wait_for_log(AT_ONCE, |l| l.contains("ERROR") && l.contains("NOAUTH"))
            .await,
        "{}",
        app.log()
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check_config(dir.path(), &url);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("NOAUTH"), "{err}");
}

#[tokio::test]
async fn a_closed_port_is_a_refusal_answered_at_once_even_with_a_long_timeout() {
    let url = format!("redis://127.0.0.1:{}/0", free_port());
    let app = serve(&url, LONG_TIMEOUT_MS).await;
    for _ in 0..5 {
        let (status, took) = ping(&app.base).await;
        assert_eq!(status, 200, "fails open");
        assert!(took < AT_ONCE, "a refused connection waited {took:?}");
    }
    let detail = unready(&app.base).await;
    assert!(detail.contains("connection refused"), "{detail}");
    assert!(
        app.wait_for_log(AT_ONCE, |l| l.contains("connection refused"))
            .await,
        "{}",
        app.log()
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check_config(dir.path(), &url);
    assert_eq!(code, 0, "the file is valid: {out}{err}");
    assert!(
        err.contains("warning") && err.contains("connection refused"),
        "{err}"
    );
}

#[tokio::test]
async fn a_listener_that_never_answers_is_no_answer_and_check_config_warns() {
    let peer = FakePeer::silent();
    let app = serve(&peer.url(), "100").await;
    let detail = unready(&app.base).await;
    assert!(detail.contains("no answer"), "{detail}");
    assert_eq!(ping(&app.base).await.0, 200, "fails open");
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check_config(dir.path(), &peer.url());
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("warning") && err.contains("no "), "{err}");
}

#[tokio::test]
async fn a_peer_of_another_protocol_is_named_as_such() {
    let peer = FakePeer::replying(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    let app = serve(&peer.url(), LONG_TIMEOUT_MS).await;
    let detail = unready(&app.base).await;
    assert!(
        detail.contains("is the address a Redis server?"),
        "{detail}"
    );
    let (status, took) = ping(&app.base).await;
    assert_eq!(status, 200, "fails open");
    assert!(took < AT_ONCE, "{took:?}");
    assert!(
        app.wait_for_log(AT_ONCE, |l| l.contains("is the address a Redis server?"))
            .await,
        "{}",
        app.log()
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check_config(dir.path(), &peer.url());
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("is the address a Redis server?"), "{err}");
}

/// Redis killed under a running instance: every request is answered at
/// once (none waits for the 30 s timeout, nor for the probe) while it is
/// down, and decisions use Redis again once it is back.
#[tokio::test]
async fn while_redis_is_down_no_request_waits_and_the_probe_brings_it_back() {
    let mut redis = RedisServer::start();
    let app = serve(&redis.url(), LONG_TIMEOUT_MS).await;
    let checked = |r: &reqwest::Response| r.headers().contains_key("ratelimit");
    let client = reqwest::Client::new();
    let get = || {
        client
            .get(format!("{}/ping", app.base))
            .header("X-Client-Key", "k")
            .send()
    };
    assert!(checked(&get().await.unwrap()), "decided by Redis");
    redis.kill();
    // Through several probe intervals.
    let down_until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < down_until {
        let (status, took) = ping(&app.base).await;
        assert_eq!(status, 200, "fails open");
        assert!(took < AT_ONCE, "a request waited {took:?} on a dead Redis");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = get().await.unwrap();
        if checked(&r) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Redis is back but unused:\n{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        app.wait_for_log(AT_ONCE, |l| l.contains("Redis answers again"))
            .await,
        "{}",
        app.log()
    );
}
