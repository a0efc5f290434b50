//! Every mistake refused with its file, line and key.

use ratewarden_config::envoy::EnvoyConfig;
use ratewarden_limiter::FailureMode;

use super::parse;

#[test]
fn every_mistake_is_named_with_line_and_key() {
    let cases: [(&str, &str); 21] = [
        // Regressions from a new user's trial: an empty unit dropped the
        // limit silently; a burst of 0 refused everything.
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: \"\", requests_per_unit: 1}\n",
            "rules.yaml:4:24: descriptors[0].rate_limit.unit: the unit is empty",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit:\n      requests_per_unit: 1\n",
            "descriptors[0].rate_limit.unit: the unit is empty",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: ~, requests_per_unit: 1}\n",
            "descriptors[0].rate_limit.unit: the unit is empty",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra, burst: 0}\n",
            "descriptors[0].rate_limit.burst: a burst must be at least 1",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra, burst: 18446744073709551615}\n",
            "descriptors[0].rate_limit.burst:",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    unit: minute\n",
            "rules.yaml:4:5: descriptors[0].unit: 'unit' belongs under rate_limit:",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    colour: red\n",
            "rules.yaml:4:5: descriptors[0].colour: unknown key 'colour'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
            "rules.yaml:4:24: descriptors[0].rate_limit.unit: 'fortnight' is not a unit",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, unlimited: true}\n",
            "descriptors[0].rate_limit: an unlimited limit takes no unit",
        ),
        (
            "descriptors: []\n",
            "rules.yaml:1:1: domain: the domain is missing or empty",
        ),
        (
            "domain: d\ndescriptors:\n  - value: a\n",
            "rules.yaml:3:5: descriptors[0].key: a descriptor needs a non-empty key",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n  - key: a\n",
            "rules.yaml:4:5: descriptors[1]: the descriptor 'd.a' is defined twice",
        ),
        (
            "domain: d\n---\ndomain: e\n",
            "rules.yaml:3:1: a second YAML document",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    share_threshold: true\n",
            "share_threshold needs a wildcard value",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {name: x, unit: second, requests_per_unit: 1, replaces: [{name: x}]}\n",
            "a limit cannot replace itself",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, window: 2s, requests_per_unit: 1}\n",
            "give unit or window, not both",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, burst: 2, requests_per_unit: 1}\n",
            "rules.yaml:4:39: descriptors[0].rate_limit.burst: burst applies only to the gcra algorithm, not fixed_window",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n",
            "'-1' is not a whole number from 0 to 4294967295",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 1}\n",
            "a limit needs a unit",
        ),
        (
            "domain: d\ndescriptors: [\n",
            "rules.yaml:3:1: not valid YAML",
        ),
        ("domain: d\ndomain: e\n", "not valid YAML"),
    ];
    for (yaml, expected) in cases {
        let err = parse(yaml).unwrap_err();
        assert!(
            err.contains(expected),
            "{yaml:?}\n  got: {err}\n  expected: {expected}"
        );
    }
}

/// `levels` descriptors, each nested in the one before, in block style.
fn nested(levels: usize) -> String {
    let mut yaml = String::from("domain: deep\ndescriptors:\n");
    for i in 0..levels {
        let pad = "    ".repeat(i);
        yaml.push_str(&format!("{pad}  - key: k{i}\n"));
        if i + 1 < levels {
            yaml.push_str(&format!("{pad}    descriptors:\n"));
        } else {
            yaml.push_str(&format!(
                "{pad}    rate_limit: {{unit: second, requests_per_unit: 1}}\n"
            ));
        }
    }
    yaml
}

#[test]
fn deep_nesting_is_refused_with_its_line_and_never_overflows_the_stack() {
    // Regression: 600 levels overflowed a worker thread's stack on reload
    // and ended the process. This runs on a test thread's small stack.
    for levels in [32, 600, 5_000] {
        let err = parse(&nested(levels)).unwrap_err();
        assert!(
            err.contains("rules.yaml:")
                && err.contains("nested more than 64 mappings and lists deep"),
            "{levels} levels: {err}"
        );
    }
    let config = parse(&nested(31)).unwrap();
    assert_eq!(config.policies().count(), 1);
}

#[test]
fn an_empty_unit_beside_a_window_or_unlimited_is_no_unit() {
    let config = parse(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: \"\", window: 5s, requests_per_unit: 2}\n  - key: b\n    rate_limit: {unit: \"\", unlimited: true}\n",
    )
    .unwrap();
    assert_eq!(config.policies().count(), 1);
}

#[test]
fn unreadable_files_are_named_with_their_position() {
    // Regressions: invalid UTF-8 was reported without a position, and a
    // dangling link in a directory was skipped silently.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        b"domain: a\ndescriptors:\n  - key: \xff\n",
    )
    .unwrap();
    let err = EnvoyConfig::load(&dir.path().join("a.yaml"), FailureMode::Open)
        .unwrap_err()
        .to_string();
    assert!(err.contains("a.yaml:3:10: not UTF-8 text"), "{err}");
    std::fs::remove_file(dir.path().join("a.yaml")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone.yaml"), dir.path().join("b.yaml")).unwrap();
    let err = EnvoyConfig::load(dir.path(), FailureMode::Open)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("b.yaml") && err.contains("cannot read"),
        "{err}"
    );
}
