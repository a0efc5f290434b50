//! Logging never stops serving or shutting down: `ratewarden serve` with
//! its standard error a pipe whose reader has gone (a log shipper, `tee`
//! or a supervisor that died) answers every request, fails open as
//! configured, and stops on SIGTERM after finishing what is in flight.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
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

/// Sends SIGTERM.
fn terminate(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// Sends SIGTERM and waits (up to [`EXIT_DEADLINE`]) for a clean exit.
fn terminate_and_wait(child: &mut Child) {
    terminate(child);
    wait_for_exit(child);
}

/// Waits (up to [`EXIT_DEADLINE`]) for a clean exit.
fn wait_for_exit(child: &mut Child) {
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
    // A request in flight when SIGTERM comes is finished and answered.
    let body = r#"{"policy": "ping", "key": "in-flight"}"#;
    let mut stream = in_handler(&base, body.len());
    terminate(&child);
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.1 429"),
        "the request in flight at SIGTERM is answered: {answer:?}"
    );
    wait_for_exit(&mut child);
}

/// A `POST /v1/check` whose handler is running: its head sent with
/// `Expect: 100-continue`, and the server's `100 Continue` read (sent when
/// the handler asks for the body); the body is the caller's to send.
fn in_handler(base: &str, length: usize) -> TcpStream {
    let addr = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "POST /v1/check HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        let n = stream
            .read(&mut byte)
            .expect("the server asks for the body");
        assert_eq!(n, 1, "closed before asking for the body: {seen:?}");
        seen.push(byte[0]);
    }
    assert!(
        seen.starts_with(b"HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    stream
}

/// A Redis that accepts and never answers: requests wait for the store
/// timeout (or fail fast once the breaker opens) and fail open, logging
/// store errors into the closed pipe; then SIGTERM stops the process.
#[tokio::test]
async fn with_a_closed_log_pipe_an_unanswering_redis_fails_open_and_sigterm_stops() {
    let redis = FakePeer::silent();
    let url = redis.url();
    let args = [
        "--store",
        &url,
        "--on-store-error",
        "open",
        "--store-timeout-ms",
        "300",
    ];
    let (mut child, base) = serve_then_close_the_log(&args, "info");
    let client = reqwest::Client::new();
    for i in 0..5 {
        let r = client
            .get(format!("{base}/ping"))
            .header("X-Client-Key", format!("k{i}"))
            .send()
            .await
            .expect("an answer with the log closed");
        assert_eq!(r.status(), 200, "the documented fail-open answer");
    }
    terminate_and_wait(&mut child);
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
