//! Over a real socket: the peer address is the key.

use std::net::SocketAddr;
use std::time::Duration;

use http::StatusCode;
use ratewarden_tower::KeyPart;
use serde_json::{Value, json};

use crate::app;
use crate::common::{build, clock, key, layer_of, per_minute};

#[tokio::test]
async fn over_a_real_socket_the_peer_address_is_the_key() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("api", 2, [KeyPart::ClientIp])],
    )));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    let service = app
        .router
        .clone()
        .into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client");
    let url = format!("http://{addr}/hello");

    let first = client.get(&url).send().await.expect("an answer");
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["ratelimit"], r#""api";r=1;t=60"#);
    assert_eq!(first.text().await.expect("a body"), "inner: GET /hello");
    assert_eq!(
        client.get(&url).send().await.expect("an answer").status(),
        StatusCode::OK
    );

    clock.advance(Duration::from_millis(500));
    let refused = client.get(&url).send().await.expect("an answer");
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "60");
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let body: Value =
        serde_json::from_slice(&refused.bytes().await.expect("a body")).expect("JSON");
    assert_eq!(body["instance"], "/hello");
    assert_eq!(body["violated-policies"], json!(["api"]));

    assert_eq!(app.used("api", &key("127.0.0.1")).await, 2);
    assert_eq!(app.calls(), 2);
    server.abort();
}
