//! A layer that can never work as set up says so on the server, once:
//! a `client_ip` policy on a service without connection info answers 400
//! to every request, and the operator must learn why from the logs, not
//! from a client. Through `tracing` when the application installed a
//! subscriber, on standard error when it did not (as the quick start).

mod common;

use std::io::Write;
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use common::{build, clock, layer_of, per_minute};
use http::{Request, StatusCode};
use ratewarden_tower::KeyPart;
use tower::ServiceExt;

const FIX: &str = "into_make_service_with_connect_info::<SocketAddr>()";

/// Three requests without connection info through a `client_ip` layer;
/// each is answered 400.
async fn three_requests_without_connect_info() {
    let clock = clock();
    let layer = build(layer_of(
        &clock,
        [per_minute("per-client", 10, [KeyPart::ClientIp])],
    ));
    let app = Router::new().fallback(|| async { "inner" }).layer(layer);
    for _ in 0..3 {
        let request = Request::get("/").body(Body::empty()).expect("a request");
        let response = app.clone().oneshot(request).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    }
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn without_connect_info_one_warning_goes_to_the_tracing_subscriber() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    three_requests_without_connect_info().await;
    let text =
        String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("UTF-8 logs");
    assert_eq!(
        text.matches(FIX).count(),
        1,
        "once, not per request: {text}"
    );
    assert!(
        text.contains("WARN") && text.contains("policy 'per-client'"),
        "{text}"
    );
}

/// Run by the test below as a child process with no tracing subscriber.
#[tokio::test(flavor = "current_thread")]
async fn child_without_a_subscriber() {
    if std::env::var_os("RATEWARDEN_TOWER_WARNING_CHILD").is_none() {
        return;
    }
    three_requests_without_connect_info().await;
}

#[test]
fn without_connect_info_or_a_subscriber_one_warning_goes_to_standard_error() {
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "child_without_a_subscriber",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RATEWARDEN_TOWER_WARNING_CHILD", "1")
        .output()
        .expect("the child runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    assert_eq!(stderr.matches(FIX).count(), 1, "once: {stderr}");
    let line = stderr.lines().find(|l| l.contains(FIX)).unwrap_or_default();
    assert!(
        line.starts_with("WARN ratewarden_tower: policy 'per-client'"),
        "{line}"
    );
}
