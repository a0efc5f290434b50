//! The builder's errors: each names the policy and the value.

use std::sync::Arc;

use ratewarden_core::MemoryStore;
use ratewarden_tower::{KeyPart, PolicyBuilder, RateLimitLayer, RateLimitLayerBuilder};

use crate::common::{MINUTE, clock, layer_of, per_minute};
use crate::{def, memory_limiter};

fn build_error(builder: RateLimitLayerBuilder) -> String {
    builder.build().expect_err("an invalid layer").to_string()
}

#[test]
fn builder_mistakes_are_errors_naming_the_policy_and_the_value() {
    let clock = clock();
    let no_window = PolicyBuilder::fixed_window("api")
        .limit(3)
        .key([KeyPart::ClientIp]);
    let e = build_error(layer_of(&clock, [no_window]));
    assert!(
        e.contains("policy 'api'") && e.contains(".per(window)"),
        "{e}"
    );

    let no_limit = PolicyBuilder::gcra("api")
        .per(MINUTE)
        .key([KeyPart::ClientIp]);
    let e = build_error(layer_of(&clock, [no_limit]));
    assert!(
        e.contains("policy 'api'") && e.contains(".limit(units)"),
        "{e}"
    );

    let burst = PolicyBuilder::sliding_log("logins")
        .limit(3)
        .per(MINUTE)
        .burst(5)
        .key([KeyPart::Path]);
    let e = build_error(layer_of(&clock, [burst]));
    assert!(
        e.contains("policy 'logins'") && e.contains("burst 5 is for gcra only"),
        "{e}"
    );

    let e = build_error(layer_of(
        &clock,
        [PolicyBuilder::gcra("keyless").limit(1).per(MINUTE)],
    ));
    assert!(
        e.contains("policy 'keyless'") && e.contains("needs a key"),
        "{e}"
    );

    let e = build_error(layer_of(
        &clock,
        [per_minute("api", 1, [KeyPart::Path]).methods(["get"])],
    ));
    assert!(e.contains("policy 'api'") && e.contains("'get'"), "{e}");

    let e = build_error(layer_of(
        &clock,
        [
            per_minute("api", 1, [KeyPart::Path]),
            per_minute("api", 2, [KeyPart::Path]),
        ],
    ));
    assert!(e.contains("'api'") && e.contains("used twice"), "{e}");

    let e = build_error(layer_of(&clock, [per_minute("api", 1, [KeyPart::Path])]).only(["nope"]));
    assert_eq!(e, "no policy is named 'nope'");

    let e = build_error(
        layer_of(&clock, [per_minute("api", 1, [KeyPart::Path])]).key_fn("ghost", |_| Some("k")),
    );
    assert_eq!(e, "no policy is named 'ghost'");

    let e = build_error(RateLimitLayer::builder().policy(per_minute("a b", 1, [KeyPart::Path])));
    assert!(e.contains("'a b' is not a policy name"), "{e}");
}

#[test]
fn store_clock_and_policy_settings_on_a_layer_from_a_limiter_are_errors() {
    let clock = clock();
    let limiter = || memory_limiter(&clock, [def("api", 1, [KeyPart::ClientIp])]);
    let e = build_error(RateLimitLayer::from_limiter(limiter()).policy(per_minute(
        "more",
        1,
        [KeyPart::Path],
    )));
    assert!(
        e.contains(".policy(..)") && e.contains("RateLimitLayer::builder()"),
        "{e}"
    );
    let e =
        build_error(RateLimitLayer::from_limiter(limiter()).store(Arc::new(MemoryStore::new())));
    assert!(e.contains(".store(..)"), "{e}");
    let e = build_error(RateLimitLayer::from_limiter(limiter()).clock(Arc::new(clock.clone())));
    assert!(e.contains(".clock(..)"), "{e}");
    let e = build_error(RateLimitLayer::from_limiter(limiter()).only(["api", "nope"]));
    assert_eq!(e, "no policy is named 'nope'");
}
