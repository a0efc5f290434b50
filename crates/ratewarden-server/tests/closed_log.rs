//! Logging never stops serving or shutting down: `ratewarden serve` with
//! its standard error a pipe whose reader has gone (a log shipper, `tee`
//! or a supervisor that died) answers every request, fails open as
//! configured, and stops on SIGTERM after finishing what is in flight.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;
use ratewarden_testkit::peer::FakePeer;

/// A generous bound on a shutdown that takes a fraction of a second (at
/// most the store timeout of an in-flight request).
const EXIT_DEADLINE: Duration = Duration::from_secs(30);

/// `ratewarden serve ARGS` with `RATEWARDEN_LOG=level`, once it has
/// logged that it listens; its standard error is then closed.
fn serve_then_close_the_log(args: &[&str], level: &str) -> (Child, String) {
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratewarden"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(args)
        .env("RATEWARDEN_LOG", level)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ratewarden starts");
    let stderr = child.stderr.take().expect("a pipe");
    let mut lines = BufReader::new(stderr).lines();
    loop {
        match lines.next() {
            Some(Ok(line)) if line.contains("listening (HTTP)") => break,
            Some(Ok(_)) => {}
            other => panic!("ratewarden ended its log before listening: {other:?}"),
        }
    }
    // The reader's end closes: every later write gets EPIPE.
    drop(lines);
    (child, format!("http://127.0.0.1:{port}"))
}

/// Sends SIGTERM and waits (up to [`EXIT_DEADLINE`]) for a clean exit.
fn terminate_and_wait(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = Instant::now() + EXIT_DEADLINE;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "it stopped cleanly: {status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("SIGTERM was lost: still running {EXIT_DEADLINE:?} after it");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// At debug level every request logs (the access log), so every request
/// hits the closed pipe; so does the shutdown.
#[tokio::test]
async fn a_closed_log_pipe_neither_stops_answers_nor_loses_sigterm() {
    let (mut child, base) = serve_then_close_the_log(&["--store", "memory"], "debug");
    let client = reqwest::Client::new();
    for i in 0..40 {
        let r = client
            .get(format!("{base}/ping"))
            .header("X-Client-Key", format!("k{}", i % 4))
            .send()
            .await
            .expect("an answer with the log closed");
        assert!(matches!(r.status().as_u16(), 200 | 429), "{}", r.status());
        let r = client
            .post(format!("{base}/v1/check"))
            .json(&serde_json::json!({"policy": "nope", "key": "k"}))
            .send()
            .await
            .expect("an answer with the log closed");
        assert_eq!(r.status(), 404, "an unknown policy is logged and answered");
    }
    let r = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ratewarden_log_lines_dropped_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("the dropped lines are counted:\n{metrics}"));
    assert!(dropped >= 40.0, "{dropped} lines dropped");
    terminate_and_wait(&mut child);
}

/// A Redis that accepts and never answers: requests wait for the store
/// timeout and fail open, logging store errors into the closed pipe; one
/// in flight when SIGTERM comes is still answered before the exit.
#[tokio::test]
async fn with_a_closed_log_pipe_an_unanswering_redis_fails_open_and_sigterm_drains() {
    let redis = FakePeer::silent();
    let url = redis.url();
    let args = [
        "--store",
        &url,
        "--on-store-error",
        "open",
        "--store-timeout-ms",
        "2000",
    ];
    let (mut child, base) = serve_then_close_the_log(&args, "info");
    let in_flight = tokio::spawn({
        let base = base.clone();
        async move {
            reqwest::Client::new()
                .get(format!("{base}/ping"))
                .header("X-Client-Key", "a")
                .send()
                .await
        }
    });
    // Nothing but a request connects to the store (it is opened lazily):
    // once the peer has a connection, the request waits on it.
    let peer = redis.clone();
    let connected =
        tokio::task::spawn_blocking(move || peer.wait_for_connection(Duration::from_secs(20)))
            .await
            .unwrap();
    assert!(connected, "the request reached the store");
    terminate_and_wait(&mut child);
    let r = in_flight
        .await
        .unwrap()
        .expect("the request in flight at SIGTERM is answered");
    assert_eq!(r.status(), 200, "the documented fail-open answer");
}

/// A Redis nobody listens for: every request fails open (each logging
/// into the closed pipe), then SIGTERM stops the process.
#[tokio::test]
async fn with_a_closed_log_pipe_an_unreachable_redis_fails_open_and_sigterm_stops() {
    let url = format!("redis://127.0.0.1:{}/0", free_port());
    let args = ["--store", &url, "--on-store-error", "open"];
    let (mut child, base) = serve_then_close_the_log(&args, "info");
    let client = reqwest::Client::new();
    for i in 0..10 {
        let r = client
            .get(format!("{base}/ping"))
            .header("X-Client-Key", format!("k{i}"))
            .send()
            .await
            .expect("an answer with the log closed");
        assert_eq!(r.status(), 200, "the documented fail-open answer");
    }
    let r = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    terminate_and_wait(&mut child);
}
