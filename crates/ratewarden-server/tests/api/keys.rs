//! Client keys are opaque: any key maps to its own counter, and an
//! oversized one is a 4xx problem (docs/semantics.md).

use crate::helpers::{encode, ok_json, problem, spawn_app};

fn awkward_keys() -> Vec<String> {
    vec![
        "a:b".to_owned(),
        "a".to_owned(),
        "a:b:c".to_owned(),
        "a b".to_owned(),
        "a+b".to_owned(),
        "a%20b".to_owned(),
        "\"quoted\"".to_owned(),
        "it's".to_owned(),
        "*".to_owned(),
        "?".to_owned(),
        "[ab]".to_owned(),
        "*?[]".to_owned(),
        "a&key=b".to_owned(),
        "ключ-🔑-é".to_owned(),
        "127.0.0.1:80".to_owned(),
        "k".repeat(1024),
        "κ".repeat(512),
    ]
}

#[tokio::test]
async fn awkward_keys_each_get_their_own_counter_readable_through_status() {
    let app = spawn_app().await;
    let keys = awkward_keys();
    // Key i gets i % 3 + 1 pings, so neighbours differ.
    for (i, key) in keys.iter().enumerate() {
        for n in 1..=(i % 3 + 1) {
            let (_, body) = ok_json(app.ping(Some(key)).await).await;
            assert_eq!(body["key"], key.as_str());
            assert_eq!(body["count"], n, "key {key:?}");
        }
    }
    for (i, key) in keys.iter().enumerate() {
        let (_, body) = ok_json(app.status(key).await).await;
        assert_eq!(body["key"], key.as_str());
        assert_eq!(body["count"], i % 3 + 1, "key {key:?}");
    }
    let (_, body) = ok_json(app.status("127.0.0.1").await).await;
    assert_eq!(body["count"], 0, "no awkward key fell back to the default");
}

#[tokio::test]
async fn a_plus_in_the_status_query_is_a_space() {
    let app = spawn_app().await;
    ok_json(app.ping(Some("a b")).await).await;
    for _ in 0..2 {
        ok_json(app.ping(Some("a+b")).await).await;
    }
    let (_, body) = ok_json(app.get("/status?key=a+b").await).await;
    assert_eq!(body["key"], "a b");
    assert_eq!(body["count"], 1);
    let (_, body) = ok_json(app.get("/status?key=a%20b").await).await;
    assert_eq!(body["count"], 1);
    let (_, body) = ok_json(app.get("/status?key=a%2Bb").await).await;
    assert_eq!(body["key"], "a+b");
    assert_eq!(body["count"], 2);
}

#[tokio::test]
async fn a_key_of_exactly_4096_bytes_is_accepted() {
    let app = spawn_app().await;
    let key = "k".repeat(4096);
    ok_json(app.ping(Some(&key)).await).await;
    let (_, body) = ok_json(app.status(&key).await).await;
    assert_eq!(body["count"], 1);
}

#[tokio::test]
async fn a_key_over_4096_bytes_is_a_400_from_ping_and_a_422_from_status() {
    let app = spawn_app().await;
    let key = "k".repeat(4097);
    let (_, body) = problem(app.ping(Some(&key)).await, 400).await;
    assert_eq!(body["instance"], "/ping");
    let (_, body) = problem(app.status(&key).await, 422).await;
    assert_eq!(body["instance"], "/status");
    let huge = "é".repeat(8000);
    problem(app.ping(Some(&huge)).await, 400).await;
    problem(app.status(&huge).await, 422).await;
}

#[tokio::test]
async fn the_test_encoder_escapes_every_byte_outside_the_unreserved_characters() {
    assert_eq!(encode("a b+c/é~"), "a%20b%2Bc%2F%C3%A9~");
}

#[tokio::test]
async fn keys_that_are_not_utf8_get_their_own_counters() {
    let app = spawn_app().await;
    let send = |bytes: &'static [u8]| {
        let value = reqwest::header::HeaderValue::from_bytes(bytes).expect("obs-text header");
        app.client
            .get(app.url("/ping"))
            .header("X-Client-Key", value)
            .send()
    };
    for _ in 0..2 {
        ok_json(send(b"\xff").await.expect("ping")).await;
    }
    ok_json(send(b"\xfe").await.expect("ping")).await;
    let (_, body) = ok_json(app.get("/status?key=%FF").await).await;
    assert_eq!(body["count"], 2);
    let (_, body) = ok_json(app.get("/status?key=%FE").await).await;
    assert_eq!(body["count"], 1);
    // U+FFFD, what both print as, is yet another key.
    let (_, body) = ok_json(app.status("\u{FFFD}").await).await;
    assert_eq!(body["count"], 0);
}
