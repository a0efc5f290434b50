//! The reference's own files, its lookup precedence, and its YAML
//! library's reading of scalars.

use ratewarden_config::envoy::{EnvoyConfig, Limit, Unit};
use ratewarden_core::{Algorithm, Mode};
use ratewarden_limiter::FailureMode;

use super::{example_without_unimplemented, parse, reference};

#[test]
fn the_reference_example_names_each_unimplemented_key_with_file_and_line() {
    let path = reference("examples/example.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let err = EnvoyConfig::load(&path, FailureMode::Open)
        .unwrap_err()
        .to_string();
    let line_of = |needle: &str, nth: usize| {
        text.lines()
            .enumerate()
            .filter(|(_, l)| l.trim_start().starts_with(needle))
            .nth(nth)
            .map(|(i, _)| i + 1)
            .unwrap()
    };
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    for (i, (key, nth)) in [
        ("quota_mode", 0),
        ("metadata", 0),
        ("quota_mode", 1),
        ("metadata", 1),
    ]
    .into_iter()
    .enumerate()
    {
        let prefix = format!("{}:{}:", path.display(), line_of(key, nth));
        assert!(lines[i].starts_with(&prefix), "{} / {prefix}", lines[i]);
        assert!(lines[i].contains(&format!("{key} ")), "{}", lines[i]);
        assert!(lines[i].contains("not implemented"), "{}", lines[i]);
    }
}

#[test]
fn the_reference_example_minus_unimplemented_keys_loads_with_the_reference_precedence() {
    let config = parse(&example_without_unimplemented()).unwrap();
    let rl = config.domain("rl").unwrap();
    let path = |entries: &[(&str, &str)]| rl.find(entries).map(|f| f.rule.path.clone());
    // Exact value beats the key-only entry at the same level.
    assert_eq!(
        path(&[("foo", "x"), ("bar", "bkthomps")]).as_deref(),
        Some("rl.foo.bar_bkthomps")
    );
    assert_eq!(
        path(&[("foo", "x"), ("bar", "other")]).as_deref(),
        Some("rl.foo.bar")
    );
    assert_eq!(path(&[("foo", "x")]).as_deref(), Some("rl.foo"));
    // No fallback to a parent: more entries than the tree has levels.
    assert_eq!(path(&[("foo", "x"), ("bar", "y"), ("extra", "z")]), None);
    // A level without rate_limit limits nothing.
    assert_eq!(path(&[("source_cluster", "proxy")]), None);
    assert_eq!(
        path(&[("source_cluster", "proxy"), ("destination_cluster", "mock")]).as_deref(),
        Some("rl.source_cluster_proxy.destination_cluster_mock")
    );
    assert_eq!(
        path(&[("source_cluster", "other"), ("destination_cluster", "mock")]),
        None
    );
    assert_eq!(path(&[("nothing", "here")]), None);
    let bay = rl.find(&[("foo", "x"), ("bay", "y")]).unwrap();
    assert_eq!(bay.rule.limit, Limit::Unlimited);
    let account = rl.find(&[("category", "account")]).unwrap().rule;
    assert_eq!(account.replaces, ["bkthomps", "fake_name"]);
    let Limit::Limited {
        def,
        requests_per_unit,
        unit,
    } = &account.limit
    else {
        panic!("limited");
    };
    assert_eq!((*requests_per_unit, *unit), (4, Unit::Minute));
    assert_eq!(def.policy.algorithm, Algorithm::FixedWindow);
    assert_eq!(def.policy.quota.window().as_secs(), 60);
    let shady = rl.find(&[("foo", "x"), ("baz", "shady")]).unwrap().rule;
    let Limit::Limited { def, .. } = &shady.limit else {
        panic!("limited");
    };
    assert_eq!(def.policy.mode, Mode::Shadow);
    let banned = rl.find(&[("foo", "x"), ("bar", "banned")]).unwrap().rule;
    assert_eq!(banned.name, "banned_limit");
    assert_eq!(banned.display_name(), "banned_limit");
    assert_eq!(account.display_name(), "rl.category_account");
    // Every limited rule is a policy; unlimited ones are not.
    assert!(config.policies().any(|p| p.name() == "rl.foo.bar_banned"));
    assert!(!config.policies().any(|p| p.name() == "rl.qux"));
}

#[test]
fn every_reference_file_with_implemented_keys_loads_and_a_directory_loads_as_one() {
    for file in ["examples/config.yaml", "integration/reload.yaml"] {
        EnvoyConfig::load(&reference(file), FailureMode::Open)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    let config = EnvoyConfig::load(&reference("integration/config"), FailureMode::Open).unwrap();
    assert_eq!(config.domain_count(), 3);
    assert_eq!(config.files.len(), 3);
    let basic = config.domain("basic").unwrap();
    assert_eq!(
        basic.find(&[("key1", "foo")]).unwrap().rule.path,
        "basic.key1"
    );
    // share_threshold: every value the wildcard matches shares one counter.
    let shared = config.domain("share-threshold-test").unwrap();
    let a = shared.find(&[("files", "files/a.pdf")]).unwrap();
    let b = shared.find(&[("files", "files/b.csv")]).unwrap();
    assert_eq!(a.key_parts, b.key_parts);
    assert_eq!(a.key_parts[0], "files/*");
    let c = shared
        .find(&[("files_no_share", "files_no_share/a")])
        .unwrap();
    let d = shared
        .find(&[("files_no_share", "files_no_share/b")])
        .unwrap();
    assert_ne!(c.key_parts, d.key_parts);
    assert_eq!(c.rule.path, d.rule.path);
}

#[test]
fn wildcards_come_after_exact_values_and_before_key_only_entries_in_file_order() {
    let config = parse(
        "domain: d\ndescriptors:\n\
         - key: path\n  value: /api/*\n  rate_limit: {unit: second, requests_per_unit: 1}\n\
         - key: path\n  value: /api/v1*\n  rate_limit: {unit: second, requests_per_unit: 2}\n\
         - key: path\n  value: /api/health\n  rate_limit: {unit: second, requests_per_unit: 3}\n\
         - key: path\n  value: /a*b*c\n  rate_limit: {unit: second, requests_per_unit: 4}\n\
         - key: path\n  rate_limit: {unit: second, requests_per_unit: 5}\n",
    )
    .unwrap();
    let d = config.domain("d").unwrap();
    let limit = |v: &str| match &d.find(&[("path", v)]).unwrap().rule.limit {
        Limit::Limited {
            requests_per_unit, ..
        } => *requests_per_unit,
        Limit::Unlimited => u32::MAX,
    };
    assert_eq!(limit("/api/health"), 3);
    assert_eq!(limit("/api/v1/x"), 1, "the first wildcard in file order");
    assert_eq!(limit("/axbyc"), 4);
    assert_eq!(limit("/other"), 5);
}

#[test]
fn extension_keys_choose_the_algorithm_burst_and_window() {
    let config = parse(
        "domain: d\ndescriptors:\n\
         - key: user\n  rate_limit:\n    requests_per_unit: 10\n    window: 30s\n    algorithm: gcra\n    burst: 4\n\
         - key: org\n  rate_limit: {requests_per_unit: 5, window: 1h, algorithm: sliding_window}\n",
    )
    .unwrap();
    let d = config.domain("d").unwrap();
    let Limit::Limited { def, unit, .. } = &d.find(&[("user", "u")]).unwrap().rule.limit else {
        panic!("limited");
    };
    assert_eq!(def.policy.algorithm, Algorithm::Gcra);
    assert_eq!(def.policy.quota.window().as_secs(), 30);
    assert_eq!(def.policy.quota.burst(), 4);
    assert_eq!(*unit, Unit::Unknown, "30 s is not a unit");
    let Limit::Limited { unit, .. } = &d.find(&[("org", "o")]).unwrap().rule.limit else {
        panic!("limited");
    };
    assert_eq!(*unit, Unit::Hour, "a window of one unit reports that unit");
}

#[test]
fn scalars_read_as_the_reference_reads_them() {
    let config = parse(
        "domain: d\ndescriptors:\n\
         - key: code\n  value: 007\n  shadow_mode: yes\n  rate_limit: {unit: MINUTE, requests_per_unit: 1}\n\
         - key: anchor\n  rate_limit: &limit {unit: minute, requests_per_unit: 9}\n\
         - key: alias\n  rate_limit: *limit\n",
    )
    .unwrap();
    let d = config.domain("d").unwrap();
    let rule = d.find(&[("code", "007")]).unwrap().rule;
    assert_eq!(rule.path, "d.code_007");
    let Limit::Limited { def, .. } = &rule.limit else {
        panic!()
    };
    assert_eq!(def.policy.mode, Mode::Shadow);
    let Limit::Limited {
        requests_per_unit, ..
    } = &d.find(&[("alias", "x")]).unwrap().rule.limit
    else {
        panic!()
    };
    assert_eq!(*requests_per_unit, 9);

    // Regression: merge keys and YAML 1.1 integers were refused.
    let config = parse(
        "domain: d\ndefaults: &defaults {unit: hour}\ndescriptors:\n\
         - key: merged\n  rate_limit:\n    <<: *defaults\n    requests_per_unit: 1_000\n\
         - key: hex\n  rate_limit: {<<: [{unit: second}, {unit: day}], requests_per_unit: 0x10}\n\
         - key: octal\n  rate_limit: {unit: minute, requests_per_unit: 010}\n",
    );
    let err = config.unwrap_err();
    assert!(err.contains("defaults: unknown key"), "{err}");
    let config = parse(
        "domain: d\ndescriptors:\n\
         - &first\n  key: merged\n  rate_limit: {unit: hour, requests_per_unit: 1_000}\n\
         - <<: *first\n  key: again\n\
         - key: hex\n  rate_limit: {<<: [{unit: second}, {unit: day}], requests_per_unit: 0x10}\n\
         - key: octal\n  rate_limit: {unit: minute, requests_per_unit: 010}\n\
         - key: quoted\n  rate_limit: {unit: minute, requests_per_unit: \"010\"}\n",
    )
    .unwrap();
    let d = config.domain("d").unwrap();
    let limit_of = |key: &str| match &d.find(&[(key, "x")]).unwrap().rule.limit {
        Limit::Limited {
            requests_per_unit,
            unit,
            ..
        } => (*requests_per_unit, *unit),
        Limit::Unlimited => panic!("{key} is unlimited"),
    };
    assert_eq!(limit_of("merged"), (1000, Unit::Hour));
    assert_eq!(limit_of("again"), (1000, Unit::Hour));
    assert_eq!(limit_of("hex"), (16, Unit::Second));
    assert_eq!(limit_of("octal"), (8, Unit::Minute));
    assert_eq!(limit_of("quoted"), (10, Unit::Minute));
}

#[test]
fn metric_names_follow_detailed_metric_and_value_to_metric() {
    let config = parse(
        "domain: d\ndescriptors:\n\
         - key: user\n  detailed_metric: true\n  rate_limit: {unit: minute, requests_per_unit: 1}\n\
         - key: route\n  value_to_metric: true\n  descriptors:\n    - key: method\n      rate_limit: {unit: minute, requests_per_unit: 1}\n\
         - key: plain\n  rate_limit: {unit: minute, requests_per_unit: 1}\n",
    )
    .unwrap();
    let d = config.domain("d").unwrap();
    let metric = |e: &[(&str, &str)]| d.find_with_metric(e).unwrap().1.into_owned();
    assert_eq!(metric(&[("user", "alice")]), "d.user_alice");
    assert_eq!(
        metric(&[("route", "/a"), ("method", "GET")]),
        "d.route_/a.method"
    );
    assert_eq!(metric(&[("plain", "x")]), "d.plain");
}
