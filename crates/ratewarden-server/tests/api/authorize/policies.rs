//! Which policies apply to a request and with which key: only those with
//! key parts, by `match`; absent key sources, keys over 4096 bytes, keys
//! of bytes that are not UTF-8.

use reqwest::header::HeaderValue;

use super::{advertised, allowed, app, ask, denied, remaining, request, unmatched};
use crate::helpers::{StoreKind, ok_json, policy, problem};

/// Only policies with `key` parts apply, by `match`: the path in its
/// normal form without its query, `*` any run (`/` too), methods exactly.
pub async fn policies_apply_by_key_and_match(store: StoreKind) {
    let app = app(
        store,
        &[],
        [
            policy("keyless").fixed_window(100, "1m"),
            policy("api")
                .fixed_window(100, "1m")
                .key(["literal:api"])
                .match_path("/api/*"),
            policy("login")
                .fixed_window(100, "1m")
                .key(["literal:login"])
                .match_methods(["POST"])
                .match_path("/login"),
            policy("encoded")
                .fixed_window(100, "1m")
                .key(["path"])
                .match_path("/files/a%2Fb"),
            policy("middle")
                .fixed_window(100, "1m")
                .key(["literal:middle"])
                .match_path("/v*/items"),
            policy("everything")
                .fixed_window(100, "1m")
                .key(["literal:all"])
                .match_all(),
        ],
    )
    .await;
    let ask_as = |method: &'static str, uri: &'static str| {
        request(&app, method).header("X-Forwarded-Uri", uri).send()
    };
    for (method, uri, expected) in [
        ("GET", "/api/x", &["api"][..]),
        ("GET", "/api/x/y?z=1", &["api"][..]),
        ("GET", "/api/", &["api"][..]),
        ("GET", "/api", &[][..]),
        ("GET", "/apix", &[][..]),
        ("GET", "/API/x", &[][..]),
        ("GET", "/x/api/y", &[][..]),
        ("POST", "/login", &["login"][..]),
        ("POST", "/login?next=/api/x", &["login"][..]),
        ("GET", "/login", &[][..]),
        ("POST", "/login/", &[][..]),
        ("GET", "/%61pi/x", &["api"][..]),
        ("GET", "/files/a%2Fb", &["encoded"][..]),
        ("GET", "/files/a/b", &["encoded"][..]),
        ("GET", "/v1/items", &["middle"][..]),
        ("GET", "/v1/x/items", &["middle"][..]),
        ("GET", "/v1/items/x", &[][..]),
    ] {
        let headers = allowed(ask_as(method, uri).await.unwrap()).await;
        let mut names = expected.to_vec();
        names.push("everything");
        assert_eq!(advertised(&headers), names, "{method} {uri}");
    }
    assert_eq!(
        remaining(&app, "encoded", &["/files/a/b"]).await,
        98,
        "one path however spelled: %2F is a '/'"
    );
}

/// The seed policies (`ping`, `check`) have no key parts: forward auth
/// never applies them, and with no other policy a request is answered
/// 200 without rate-limit headers.
pub async fn no_policy_matched_is_200_without_headers(store: StoreKind) {
    let app = app(
        store,
        &[],
        [
            policy("plain").fixed_window(0, "1m"),
            policy("narrow")
                .fixed_window(0, "1m")
                .key(["literal:n"])
                .match_path("/narrow"),
        ],
    )
    .await;
    for _ in 0..3 {
        let r = request(&app, "GET")
            .header("X-Forwarded-Uri", "/ping")
            .header("X-Client-Key", "k")
            .send()
            .await
            .unwrap();
        unmatched(r).await;
        let r = request(&app, "POST")
            .header("X-Forwarded-Uri", "/rate/check")
            .header("X-User-Id", "k")
            .send()
            .await
            .unwrap();
        unmatched(r).await;
    }
    let (_, status) = ok_json(app.status("k").await).await;
    assert_eq!(status["count"], 0, "ping's counter untouched: {status}");
    unmatched(ask(&app, "/").await).await;
    unmatched(ask(&app, "/narrow/x").await).await;
    assert_eq!(ask(&app, "/narrow").await.status(), 429);
}

/// A key part whose source is absent is the empty string: such requests
/// share one counter. Several field lines of a header are joined.
pub async fn absent_key_sources_share_one_counter(store: StoreKind) {
    let app = app(
        store,
        &[],
        [policy("api-key")
            .fixed_window(2, "1m")
            .key(["header:x-api-key", "query:user"])],
    )
    .await;
    let send = |key: Option<&'static [&'static str]>, uri: &'static str| {
        let mut r = request(&app, "GET").header("X-Forwarded-Uri", uri);
        for line in key.unwrap_or_default() {
            r = r.header("X-Api-Key", *line);
        }
        r.send()
    };
    allowed(send(None, "/").await.unwrap()).await;
    allowed(send(None, "/x?other=1").await.unwrap()).await;
    denied(send(None, "/y").await.unwrap(), 429).await;
    denied(send(None, "/y?user=").await.unwrap(), 429).await;
    // ("a", "") and ("", "a") are two keys, neither the shared one.
    for _ in 0..2 {
        allowed(send(Some(&["a"]), "/").await.unwrap()).await;
        allowed(send(None, "/?user=a").await.unwrap()).await;
    }
    // Two field lines are one value, "k1, k2".
    allowed(send(Some(&["k1", "k2"]), "/?user=u").await.unwrap()).await;
    allowed(send(Some(&["k1, k2"]), "/?user=u").await.unwrap()).await;
    denied(send(Some(&["k1", "k2"]), "/?user=u").await.unwrap(), 429).await;
    assert_eq!(remaining(&app, "api-key", &["k1, k2", "u"]).await, 0);
}

/// A key over 4096 bytes is a 400 and charges nothing; 4096 is fine.
pub async fn a_key_over_4096_bytes_is_refused(store: StoreKind) {
    let app = app(
        store,
        &[],
        [
            policy("other").fixed_window(10, "1m").key(["literal:x"]),
            policy("by-header")
                .fixed_window(10, "1m")
                .key(["header:x-big"]),
            policy("two-parts")
                .fixed_window(10, "1m")
                .key(["header:x-big", "header:x-more"])
                .match_path("/two"),
        ],
    )
    .await;
    let send = |big: usize, more: usize, uri: &'static str| {
        request(&app, "GET")
            .header("X-Forwarded-Uri", uri)
            .header("X-Big", "b".repeat(big))
            .header("X-More", "m".repeat(more))
            .send()
    };
    let (_, body) = problem(send(4097, 0, "/").await.unwrap(), 400).await;
    assert!(
        body["detail"].as_str().unwrap().contains("by-header"),
        "{body}"
    );
    problem(send(100_000, 0, "/").await.unwrap(), 400).await;
    problem(send(2048, 2049, "/two").await.unwrap(), 400).await;
    assert_eq!(
        remaining(&app, "other", &["x"]).await,
        10,
        "nothing charged"
    );
    let big = "b".repeat(4096);
    assert_eq!(
        remaining(&app, "by-header", &[&big]).await,
        10,
        "nothing charged"
    );
    let headers = allowed(send(4096, 0, "/").await.unwrap()).await;
    assert_eq!(advertised(&headers), ["other", "by-header"]);
    assert_eq!(remaining(&app, "by-header", &[&big]).await, 9);
    allowed(send(2048, 2048, "/two").await.unwrap()).await;
}

/// Header bytes that are not UTF-8 (obs-text) are a key like any other.
pub async fn a_key_of_bytes_that_are_not_utf8_is_counted(store: StoreKind) {
    let app = app(
        store,
        &[],
        [policy("raw").fixed_window(1, "1m").key(["header:x-user"])],
    )
    .await;
    let send = |value: &'static [u8]| {
        request(&app, "GET")
            .header("X-Forwarded-Uri", "/")
            .header("X-User", HeaderValue::from_bytes(value).unwrap())
            .send()
    };
    allowed(send(b"caf\xe9").await.unwrap()).await;
    denied(send(b"caf\xe9").await.unwrap(), 429).await;
    allowed(send(b"caf\xc3\xa9").await.unwrap()).await;
}

on_every_store!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    policies_apply_by_key_and_match,
    no_policy_matched_is_200_without_headers,
    absent_key_sources_share_one_counter,
    a_key_over_4096_bytes_is_refused,
    a_key_of_bytes_that_are_not_utf8_is_counted,
);
