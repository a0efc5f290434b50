//! How every JSON body is read (`POST /v1/check`, `/rate/check`,
//! `/json`): a member given twice is a 400 naming it, not the last one
//! silently winning, and a body in a content coding (gzip, …) is a 415
//! with `Accept-Encoding: identity` (RFC 9110 §15.5.16), not read as if
//! it were plain.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use reqwest::Response;
use serde_json::Value;

use crate::helpers::{TestApp, header, ok_json, problem, spawn_app};

/// `{"policy":"ping","key":"zipped"}`, gzipped (mtime 0).
const GZIPPED_CHECK: &[u8] = &[
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x56, 0x2a, 0xc8, 0xcf, 0xc9,
    0x4c, 0xae, 0x54, 0xb2, 0x52, 0x2a, 0xc8, 0xcc, 0x4b, 0x57, 0xd2, 0x51, 0xca, 0x4e, 0x05, 0x71,
    0xaa, 0x32, 0x0b, 0x0a, 0x52, 0x53, 0x94, 0x6a, 0x01, 0x7c, 0x82, 0x4a, 0xf3, 0x20, 0x00, 0x00,
    0x00,
];

async fn post(app: &TestApp, path: &str, body: &[u8], headers: &[(&str, &str)]) -> Response {
    let mut request = app
        .client
        .post(app.url(path))
        .header("Content-Type", "application/json")
        .header("X-User-Id", "7");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(body.to_vec()).send().await.unwrap()
}

/// What `/v1/status` says `ping` has counted for `key`.
async fn used(app: &TestApp, key: &str) -> u64 {
    let (_, body) = ok_json(app.get(&format!("/v1/status?policy=ping&key={key}")).await).await;
    body["limit"].as_u64().unwrap() - body["remaining"].as_u64().unwrap()
}

const RATE_LIMIT_REQUEST: &str =
    r#"{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#;

#[tokio::test]
async fn a_member_given_twice_is_a_400_naming_it_on_every_json_body() {
    let app = spawn_app().await;
    for (path, body, member, at) in [
        (
            "/v1/check",
            r#"{"policy":"check","policy":"ping","key":"twice"}"#,
            "policy",
            "/policy",
        ),
        (
            "/v1/check",
            r#"{"checks":[{"policy":"ping","key":"twice","key":"other"}]}"#,
            "key",
            "/checks/0/key",
        ),
        (
            "/rate/check",
            r#"{"endpoint":"/a","endpoint":"/b"}"#,
            "endpoint",
            "/endpoint",
        ),
        (
            "/json",
            r#"{"domain":"edge","domain":"other","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#,
            "domain",
            "/domain",
        ),
        (
            "/json",
            r#"{"domain":"edge","descriptors":[{"entries":[{"key":"k","key":"j","value":"v"}]}]}"#,
            "key",
            "/descriptors/0/entries/0/key",
        ),
    ] {
        let (_, problem) = problem(post(&app, path, body.as_bytes(), &[]).await, 400).await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!(
                "the member '{member}' is given more than once, at {at}"
            )),
            "{path} {body}: {detail}"
        );
        assert_eq!(problem["instance"], path);
    }
    assert_eq!(used(&app, "twice").await, 0, "nothing was charged");
    // The same names in different objects are fine.
    let batch = r#"{"checks":[{"policy":"ping","key":"a"},{"policy":"ping","key":"b"}]}"#;
    ok_json(post(&app, "/v1/check", batch.as_bytes(), &[]).await).await;
}

#[tokio::test]
async fn a_body_in_a_content_coding_is_a_415_with_accept_encoding_identity() {
    let app = spawn_app().await;
    let check = br#"{"policy":"ping","key":"zipped"}"#;
    for (path, body) in [
        ("/v1/check", &check[..]),
        ("/rate/check", br#"{"endpoint":"/zipped"}"#),
        ("/json", RATE_LIMIT_REQUEST.as_bytes()),
    ] {
        for coding in [
            "gzip",
            "br",
            "deflate",
            "GZIP",
            "identity, gzip",
            "x-custom",
        ] {
            let r = post(&app, path, body, &[("Content-Encoding", coding)]).await;
            let (headers, problem) = problem(r, 415).await;
            assert_eq!(
                header(&headers, "accept-encoding"),
                "identity",
                "{path} {coding}"
            );
            assert_eq!(
                problem["type"], "urn:ratewarden:problem:unsupported-content-coding",
                "{path} {coding}"
            );
            let detail = problem["detail"].as_str().unwrap().to_ascii_lowercase();
            let named = coding.rsplit(", ").next().unwrap().to_ascii_lowercase();
            assert!(detail.contains(&named), "{path} {coding}: {detail}");
        }
    }
    // A gzipped body is not read, and not charged.
    let r = post(
        &app,
        "/v1/check",
        GZIPPED_CHECK,
        &[("Content-Encoding", "gzip")],
    )
    .await;
    problem(r, 415).await;
    assert_eq!(used(&app, "zipped").await, 0);
    // `identity` (and empty list elements) are no coding.
    for (i, coding) in ["identity", "IDENTITY", "", " , identity"]
        .iter()
        .enumerate()
    {
        let body = format!(r#"{{"policy":"ping","key":"plain-{i}"}}"#);
        let r = post(
            &app,
            "/v1/check",
            body.as_bytes(),
            &[("Content-Encoding", coding)],
        )
        .await;
        let (_, answer): (_, Value) = ok_json(r).await;
        assert_eq!(answer["allowed"], true, "{coding:?}");
    }
    // A request without a body is not refused for the header.
    let r = app
        .client
        .get(app.url("/ping"))
        .header("Content-Encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
