//! Errors outside the seed routes' own validation: unknown routes, wrong
//! methods, oversized and non-JSON bodies (docs/semantics.md §6).

use crate::helpers::{
    ADMIN_KEY, AppOptions, TestApp, assert_no_leak, header, ok_json, problem, spawn, spawn_app,
};

#[tokio::test]
async fn an_unknown_route_is_a_404_problem() {
    let app = spawn_app().await;
    for path in [
        "/nope",
        "/",
        "/rate",
        "/rate/reset",
        "/ping/extra",
        "/status/x",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 404, "{path}");
        let (_, body) = problem(response, 404).await;
        assert_eq!(body["instance"], path);
        assert_eq!(body["title"], "Not Found");
    }
}

#[tokio::test]
async fn a_wrong_method_is_a_405_problem_with_an_allow_header() {
    let app = spawn_app().await;
    let cases = [
        (reqwest::Method::POST, "/ping", "GET"),
        (reqwest::Method::DELETE, "/ping", "GET"),
        (reqwest::Method::POST, "/status", "GET"),
        (reqwest::Method::GET, "/rate/check", "POST"),
        (reqwest::Method::PUT, "/rate/check", "POST"),
        (reqwest::Method::POST, "/rate/status", "GET"),
        (reqwest::Method::GET, "/rate/reset/7", "DELETE"),
        (reqwest::Method::POST, "/rate/reset/7", "DELETE"),
    ];
    for (method, path, allowed) in cases {
        let response = app
            .client
            .request(method.clone(), app.url(path))
            .header("X-Admin-Key", ADMIN_KEY)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 405, "{method} {path}");
        let (headers, body) = problem(response, 405).await;
        assert_eq!(body["instance"], path);
        let allow = header(&headers, "allow");
        assert!(
            allow.split(',').any(|m| m.trim() == allowed),
            "{method} {path}: Allow {allow:?} lacks {allowed}"
        );
    }
}

async fn post_check(app: &TestApp, content_type: Option<&str>, body: Vec<u8>) -> reqwest::Response {
    let mut request = app
        .client
        .post(app.url("/rate/check"))
        .header("X-User-Id", "7");
    if let Some(ctype) = content_type {
        request = request.header("Content-Type", ctype);
    }
    request.body(body).send().await.expect("POST /rate/check")
}

/// A JSON object body of exactly `len` bytes.
fn body_of(len: usize) -> Vec<u8> {
    let prefix = br#"{"endpoint":"/a","pad":""#;
    let suffix = br#""}"#;
    let mut body = prefix.to_vec();
    body.resize(len - suffix.len(), b'x');
    body.extend_from_slice(suffix);
    body
}

#[tokio::test]
async fn a_body_over_the_default_maximum_is_a_413_problem() {
    let app = spawn_app().await;
    let response = post_check(&app, Some("application/json"), body_of(16_384)).await;
    assert_eq!(response.status(), 200, "exactly the maximum passes");
    let (_, body) = problem(
        post_check(&app, Some("application/json"), body_of(16_385)).await,
        413,
    )
    .await;
    assert_eq!(body["instance"], "/rate/check");
    assert!(
        body["detail"].as_str().expect("detail").contains("16384"),
        "{body}"
    );
    problem(
        post_check(&app, Some("application/json"), body_of(1 << 20)).await,
        413,
    )
    .await;
}

/// Sends `request` over a raw connection and returns the status code and
/// the whole response text (headers and body).
async fn raw_exchange(app: &TestApp, request: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = app.address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request).await.expect("write");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"));
    (status, text)
}

#[tokio::test]
async fn a_chunked_body_over_the_maximum_is_a_413_problem() {
    let app = spawn_app().await;
    let body = body_of(20_000);
    let mut request = b"POST /rate/check HTTP/1.1\r\nHost: x\r\nX-User-Id: 7\r\n\
Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        .to_vec();
    for chunk in body.chunks(4096) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    let (status, text) = raw_exchange(&app, &request).await;
    assert_eq!(status, 413, "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("content-type: application/problem+json"),
        "{text}"
    );
    assert!(text.contains("\"status\":413"), "{text}");
    let (_, usage) = ok_json(app.rate_status("7", "/a").await).await;
    assert_eq!(usage["count"], 0, "the refused body recorded nothing");
}

#[tokio::test]
async fn a_body_over_a_configured_maximum_is_a_413_problem() {
    let app = spawn(AppOptions::args(&["--max-body-bytes", "100"]), |_| {}).await;
    let response = post_check(&app, Some("application/json"), body_of(100)).await;
    assert_eq!(response.status(), 200);
    problem(
        post_check(&app, Some("application/json"), body_of(101)).await,
        413,
    )
    .await;
}

#[tokio::test]
async fn a_body_that_is_not_json_by_content_type_is_a_415_problem() {
    let app = spawn_app().await;
    for ctype in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
    ] {
        let response = post_check(&app, Some(ctype), br#"{"endpoint":"/a"}"#.to_vec()).await;
        assert_eq!(response.status(), 415, "{ctype}");
        let (_, body) = problem(response, 415).await;
        assert_eq!(body["instance"], "/rate/check");
    }
    let response = post_check(
        &app,
        Some("application/json; charset=utf-8"),
        br#"{"endpoint":"/a"}"#.to_vec(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let response = post_check(&app, None, br#"{"endpoint":"/a"}"#.to_vec()).await;
    assert_eq!(
        response.status(),
        200,
        "a body without a content type is read as JSON"
    );
}

#[tokio::test]
async fn no_error_body_contains_sql_or_panic_text() {
    let app = spawn_app().await;
    for _ in 0..4 {
        app.ping(Some("leak")).await;
    }
    let mut bodies = Vec::new();
    let requests = [
        app.ping(Some("leak")).await,
        app.ping(Some(&"k".repeat(5000))).await,
        app.get("/status").await,
        app.get(&format!("/status?key={}", "k".repeat(5000))).await,
        app.get("/nope").await,
        app.client
            .post(app.url("/ping"))
            .send()
            .await
            .expect("POST"),
        app.check_raw(None, None).await,
        app.check_raw(Some("7"), Some("{not json")).await,
        app.check_raw(
            Some("7"),
            Some(r#"{"endpoint":"'; SELECT * FROM rate_events;--"}"#),
        )
        .await,
        app.check_raw(Some("7"), Some(r#"{"endpoint":5}"#)).await,
        app.check("7", &"e".repeat(129)).await,
        app.reset("abc", "", Some(ADMIN_KEY)).await,
        app.reset("7", "", Some("wrong")).await,
        app.reset("7", "?endpoint=", Some(ADMIN_KEY)).await,
        post_check(&app, Some("text/plain"), b"x".to_vec()).await,
        post_check(&app, Some("application/json"), body_of(20_000)).await,
    ];
    for response in requests {
        let status = response.status();
        let text = response.text().await.expect("body");
        bodies.push((status, text));
    }
    for (status, text) in &bodies {
        if status.is_success() {
            continue;
        }
        assert_no_leak(text);
    }
    assert!(bodies.iter().filter(|(s, _)| !s.is_success()).count() >= 14);
}

/// Regression: a declared `Content-Length` over the maximum waited for a
/// body that never came instead of answering 413.
#[tokio::test]
async fn a_declared_oversized_body_is_refused_at_once_without_waiting_for_it() {
    let app = spawn_app().await;
    let request = b"POST /rate/check HTTP/1.1\r\nHost: x\r\nX-User-Id: 7\r\n\
Content-Type: application/json\r\nContent-Length: 99999999999\r\nConnection: close\r\n\r\n{";
    let exchange = raw_exchange(&app, request);
    // An answer that waited for the body would come only at the request
    // timeout (10 s, and as a 408); 2 s short of it tells the two apart
    // however long a loaded machine takes to answer at once.
    let at_once = ratewarden_server::http::REQUEST_TIMEOUT - std::time::Duration::from_secs(2);
    let (status, text) = tokio::time::timeout(at_once, exchange)
        .await
        .expect("answered at once, not at the request timeout");
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("\"status\":413"), "{text}");
}

/// Regression: a request whose body never arrives held its connection and
/// handler forever; it now gets a 408 problem after the request timeout.
#[tokio::test]
async fn a_body_that_never_arrives_gets_a_408_problem() {
    let app = spawn_app().await;
    let request = b"POST /rate/check HTTP/1.1\r\nHost: x\r\nX-User-Id: 7\r\n\
Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = app.address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request).await.expect("write");
    let mut response = vec![0u8; 4096];
    let limit = ratewarden_server::http::REQUEST_TIMEOUT + std::time::Duration::from_secs(5);
    let n = tokio::time::timeout(limit, stream.read(&mut response))
        .await
        .expect("answered within the request timeout")
        .expect("read");
    let text = String::from_utf8_lossy(&response[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("application/problem+json"), "{text}");
}

/// Regression: a client that never finished its request headers kept
/// graceful shutdown waiting forever.
#[tokio::test]
async fn shutdown_ends_even_when_a_client_never_finishes_its_request() {
    use tokio::io::AsyncWriteExt;
    let mut app = spawn_app().await;
    let addr = app.address.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let limit = ratewarden_server::startup::SHUTDOWN_GRACE + std::time::Duration::from_secs(5);
    tokio::time::timeout(limit, app.stop())
        .await
        .expect("stopped after the grace period");
    drop(stream);
}
