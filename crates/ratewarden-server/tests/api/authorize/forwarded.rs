//! Which request the forwarded headers describe: the method (the
//! authorize request's own unless `X-Forwarded-Method` says otherwise),
//! the URI (`X-Forwarded-Uri`, else `X-Original-URI`) and the client
//! address, walked from the right of `X-Forwarded-For` behind trusted
//! proxies.

use super::{advertised, allowed, app, denied, remaining, request, unmatched};
use crate::helpers::{PolicyToml, StoreKind, TestApp, header, policy, problem, retry_after};

/// Any method is accepted, and the authorize request's own is the
/// original one's unless `X-Forwarded-Method` says otherwise; the
/// authorize request's own query string is ignored.
pub async fn any_method_is_accepted_and_its_own_query_is_ignored(store: StoreKind) {
    let app = app(
        store,
        &[],
        [
            policy("per-method")
                .fixed_window(1, "1m")
                .key(["method"])
                .match_path("/m"),
            policy("posts")
                .fixed_window(100, "1m")
                .key(["literal:posts"])
                .match_methods(["POST"])
                .match_path("/p"),
            policy("purges")
                .fixed_window(100, "1m")
                .key(["literal:purges"])
                .match_methods(["PURGE"])
                .match_path("/p"),
            policy("per-user")
                .fixed_window(1, "1m")
                .key(["query:user"])
                .match_path("/q"),
        ],
    )
    .await;
    let methods = [
        "GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PURGE", "M-SEARCH",
    ];
    // Each method its own counter: the key is the authorize request's method.
    for method in methods {
        let r = request(&app, method)
            .header("X-Forwarded-Uri", "/m")
            .send()
            .await
            .unwrap();
        let headers = allowed(r).await;
        assert_eq!(advertised(&headers), ["per-method"], "{method}");
        assert_eq!(header(&headers, "x-ratelimit-remaining"), "0", "{method}");
    }
    for method in methods {
        let r = request(&app, method)
            .header("X-Forwarded-Uri", "/m")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 429, "{method}: the second one is denied");
        assert_eq!(retry_after(r.headers()), 60, "{method}");
    }
    // X-Forwarded-Method wins over the authorize request's own method.
    let r = request(&app, "GET")
        .header("X-Forwarded-Method", "POST")
        .header("X-Forwarded-Uri", "/p")
        .send()
        .await
        .unwrap();
    assert_eq!(advertised(&allowed(r).await), ["posts"]);
    let r = request(&app, "POST")
        .header("X-Forwarded-Method", "GET")
        .header("X-Forwarded-Uri", "/p")
        .send()
        .await
        .unwrap();
    unmatched(r).await;
    let r = request(&app, "PURGE")
        .header("X-Forwarded-Uri", "/p")
        .send()
        .await
        .unwrap();
    assert_eq!(advertised(&allowed(r).await), ["purges"]);
    let r = request(&app, "HEAD")
        .header("X-Forwarded-Method", "PURGE")
        .header("X-Forwarded-Uri", "/p")
        .send()
        .await
        .unwrap();
    assert_eq!(advertised(&allowed(r).await), ["purges"]);
    // Methods are compared case-sensitively.
    let r = request(&app, "GET")
        .header("X-Forwarded-Method", "post")
        .header("X-Forwarded-Uri", "/p")
        .send()
        .await
        .unwrap();
    unmatched(r).await;
    // The key's query is the forwarded URI's, never the authorize request's.
    let forwarded = |own: &'static str, uri: &'static str| {
        app.client
            .get(app.url(&format!("/v1/authorize?{own}")))
            .header("X-Forwarded-Uri", uri)
            .send()
    };
    allowed(forwarded("user=bob", "/q?user=alice").await.unwrap()).await;
    let r = forwarded("user=carol", "/q?user=alice").await.unwrap();
    denied(r, 429).await;
    allowed(forwarded("user=alice", "/q?user=bob").await.unwrap()).await;
    let r = forwarded("", "/q?user=bob").await.unwrap();
    denied(r, 429).await;
    assert_eq!(remaining(&app, "per-user", &["carol"]).await, 1);
    assert_eq!(remaining(&app, "per-user", &["alice"]).await, 0);
}

/// The URI is `X-Forwarded-Uri`, else `X-Original-URI`; neither, or one
/// that is not `/path?query`, is a 400 problem.
pub async fn the_uri_comes_from_x_forwarded_uri_else_x_original_uri(store: StoreKind) {
    let app = app(
        store,
        &[],
        [policy("api")
            .fixed_window(100, "1m")
            .key(["path"])
            .match_path("/api/*")],
    )
    .await;
    let r = request(&app, "GET")
        .header("X-Original-URI", "/api/a?x=1")
        .send()
        .await
        .unwrap();
    assert_eq!(advertised(&allowed(r).await), ["api"]);
    assert_eq!(
        remaining(&app, "api", &["/api/a"]).await,
        99,
        "the path without the query"
    );
    let r = request(&app, "GET")
        .header("X-Forwarded-Uri", "/other")
        .header("X-Original-URI", "/api/a")
        .send()
        .await
        .unwrap();
    unmatched(r).await;
    let r = request(&app, "GET")
        .header("X-Forwarded-Uri", "/api/b")
        .header("X-Original-URI", "/other")
        .send()
        .await
        .unwrap();
    assert_eq!(advertised(&allowed(r).await), ["api"]);
    // Neither header.
    for method in ["GET", "POST"] {
        let r = request(&app, method).send().await.unwrap();
        let (_, body) = problem(r, 400).await;
        assert!(
            body["detail"].as_str().unwrap().contains("X-Forwarded-Uri"),
            "{body}"
        );
    }
    let r = request(&app, "HEAD").send().await.unwrap();
    assert_eq!(r.status(), 400);
    // Not a request URI.
    for bad in [
        "",
        "api/x",
        "*",
        "example.com:80",
        "?x=1",
        "/a b",
        "%2Fapi/x",
    ] {
        for name in ["X-Forwarded-Uri", "X-Original-URI"] {
            let r = request(&app, "GET").header(name, bad).send().await.unwrap();
            problem(r, 400).await;
        }
    }
    // A method that is not one.
    let r = request(&app, "GET")
        .header("X-Forwarded-Method", "GE T")
        .header("X-Forwarded-Uri", "/api/x")
        .send()
        .await
        .unwrap();
    problem(r, 400).await;
    assert_eq!(
        remaining(&app, "api", &["/api/x"]).await,
        100,
        "nothing charged"
    );
}

fn per_client() -> [PolicyToml; 1] {
    [policy("per-client")
        .fixed_window(100, "1m")
        .key(["client_ip"])]
}

/// Sends one request with these `X-Forwarded-For` lines and asserts that
/// exactly `client`'s counter was charged.
async fn assert_client(app: &TestApp, lines: &[&str], client: &str) {
    let before = remaining(app, "per-client", &[client]).await;
    let mut r = request(app, "GET").header("X-Forwarded-Uri", "/");
    for line in lines {
        r = r.header("X-Forwarded-For", *line);
    }
    allowed(r.send().await.unwrap()).await;
    let after = remaining(app, "per-client", &[client]).await;
    assert_eq!(after + 1, before, "{lines:?} should be client {client}");
}

/// From a trusted peer, `X-Forwarded-For` (every field line, in order) is
/// walked from the right while the hop is trusted.
pub async fn x_forwarded_for_is_walked_from_the_right_behind_trusted_proxies(store: StoreKind) {
    let app = app(store, &["127.0.0.1/32", "10.0.0.0/8"], per_client()).await;
    for (lines, client) in [
        (&["6.6.6.6, 203.0.113.9"][..], "203.0.113.9"),
        (&["203.0.113.10, 10.1.1.1"][..], "203.0.113.10"),
        // Several field lines are one list, in order.
        (&["6.6.6.6, 203.0.113.11", "10.1.1.1"][..], "203.0.113.11"),
        (&["203.0.113.12", "10.1.1.1, 10.2.2.2"][..], "203.0.113.12"),
        (&["203.0.113.13", "6.6.6.6"][..], "6.6.6.6"),
        // Every hop trusted: the leftmost.
        (&["10.3.3.3, 10.2.2.2"][..], "10.3.3.3"),
        (&["10.4.4.4", "10.2.2.2"][..], "10.4.4.4"),
        // A hop that is no address ends the walk: the last address to its right.
        (&["6.6.6.6, garbage, 10.5.5.5"][..], "10.5.5.5"),
        (&["6.6.6.6", "unknown"][..], "127.0.0.1"),
        (&["203.0.113.14:4711"][..], "127.0.0.1"),
        // No header: the peer.
        (&[][..], "127.0.0.1"),
        // Canonical addresses.
        (&["::ffff:198.51.100.1"][..], "198.51.100.1"),
        (&[" 2001:db8::1 ,"][..], "2001:db8::1"),
    ] {
        assert_client(&app, lines, client).await;
    }
    assert_eq!(
        remaining(&app, "per-client", &["6.6.6.6"]).await,
        99,
        "only once, above"
    );
}

/// From an untrusted peer the header is ignored: the peer is the client.
pub async fn x_forwarded_for_from_an_untrusted_peer_is_ignored(store: StoreKind) {
    for trusted in [&["10.0.0.0/8"][..], &[][..]] {
        let app = app(store, trusted, per_client()).await;
        for lines in [
            &["203.0.113.9"][..],
            &["10.1.1.1"][..],
            &["6.6.6.6", "203.0.113.9"][..],
        ] {
            assert_client(&app, lines, "127.0.0.1").await;
        }
        assert_eq!(remaining(&app, "per-client", &["203.0.113.9"]).await, 100);
        assert_eq!(remaining(&app, "per-client", &["10.1.1.1"]).await, 100);
    }
}

/// An absolute-form `X-Forwarded-Uri` (`http://host/path?query`) is read
/// for its path, as docs/forward-auth.md says: a proxy may forward the
/// form it received, and the path is what the application serves.
#[tokio::test]
async fn an_absolute_form_uri_is_matched_by_its_path() {
    // RFC 9112 §3.2.2: a proxy may forward the absolute form it received;
    // its path is what `match.path` and `path` key parts read.
    let app = app(
        StoreKind::Memory,
        &[],
        [policy("api")
            .fixed_window(10, "1m")
            .key(["literal:a"])
            .match_path("/api/*")],
    )
    .await;
    for (uri, charged) in [
        ("http://example.com/api/x", true),
        ("https://example.com", false),
        ("http://h/api/x?q=1", true),
    ] {
        for name in ["X-Forwarded-Uri", "X-Original-URI"] {
            let before = remaining(&app, "api", &["a"]).await;
            let r = request(&app, "GET").header(name, uri).send().await.unwrap();
            assert_eq!(r.status(), 200, "{name}: {uri}");
            assert_eq!(
                r.headers().contains_key("ratelimit"),
                charged,
                "{name}: {uri}"
            );
            let after = remaining(&app, "api", &["a"]).await;
            assert_eq!(before - after, u64::from(charged), "{name}: {uri}");
        }
    }
}

on_every_store!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    any_method_is_accepted_and_its_own_query_is_ignored,
    the_uri_comes_from_x_forwarded_uri_else_x_original_uri,
    x_forwarded_for_is_walked_from_the_right_behind_trusted_proxies,
    x_forwarded_for_from_an_untrusted_peer_is_ignored,
);
