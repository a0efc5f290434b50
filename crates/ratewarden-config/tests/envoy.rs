//! envoyproxy/ratelimit's YAML format: the reference's own files load
//! unchanged, lookups follow the reference's precedence, and every
//! mistake is named with file, line and key.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::path::{Path, PathBuf};

use ratewarden_config::envoy::{EnvoyConfig, Limit, Unit};
use ratewarden_core::{Algorithm, Mode};
use ratewarden_limiter::FailureMode;

fn reference(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/envoy/reference")
        .join(path)
}

fn parse(yaml: &str) -> Result<EnvoyConfig, String> {
    EnvoyConfig::parse(Path::new("rules.yaml"), yaml, FailureMode::Open).map_err(|e| e.to_string())
}

/// The reference example without the keys ratewarden does not implement.
fn example_without_unimplemented() -> String {
    let text = std::fs::read_to_string(reference("examples/example.yaml")).unwrap();
    let mut out = Vec::new();
    let mut skipping_under: Option<usize> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(at) = skipping_under {
            if indent > at {
                continue;
            }
            skipping_under = None;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("quota_mode:") {
            continue;
        }
        if trimmed.starts_with("metadata:") {
            skipping_under = Some(indent);
            continue;
        }
        out.push(line);
    }
    out.join("\n")
}

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
            "burst applies to algorithm gcra only",
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
fn a_file_with_errors_is_refused_alone_with_its_lines_and_the_others_load() {
    // Regression: one bad file (the reference's own example directory,
    // whose example.yaml uses quota_mode) refused the whole directory, so
    // the service did not start.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        "domain: same\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("b.yml"), "domain: same\n").unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        "domain: other\ndescriptors:\n  - key: x\n    quota_mode: true\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".hidden.yaml"), "not: [valid").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
    std::fs::create_dir(dir.path().join("nested")).unwrap();
    let config = EnvoyConfig::load(dir.path(), FailureMode::Open).unwrap();
    assert_eq!(config.domain_count(), 1);
    assert!(config.domain("same").unwrap().find(&[("k", "v")]).is_some());
    assert_eq!(names(&config), ["same.k"]);
    let refused: Vec<String> = config
        .refused()
        .iter()
        .map(|r| format!("{}", r.errors))
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].contains("b.yml:1:9: domain: the domain 'same' is already defined at"),
        "{refused:?}"
    );
    assert!(refused[0].contains("a.yaml:1:9"), "{refused:?}");
    assert!(
        refused[1].contains("c.yaml:4:5: descriptors[0].quota_mode"),
        "{refused:?}"
    );
    assert!(config.refused().iter().all(|r| !r.kept));
    // What was not read is said, dot names aside.
    let skipped: Vec<String> = config
        .skipped()
        .iter()
        .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(skipped, ["nested", "notes.txt"]);
    // check-config names every refused file's errors.
    let err = ratewarden_config::check_config(dir.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("b.yml:1:9") && err.contains("c.yaml:4:5"),
        "{err}"
    );
    let missing = EnvoyConfig::load(&dir.path().join("none.yaml"), FailureMode::Open).unwrap_err();
    assert!(missing.to_string().contains("none.yaml"), "{missing}");
}

#[test]
fn the_reference_example_directory_loads_config_yaml_and_refuses_example_yaml() {
    let dir = reference("examples");
    let config = EnvoyConfig::load(&dir, FailureMode::Open).unwrap();
    assert!(config.domain("mongo_cps").is_some());
    assert!(config.domain("rl").is_none());
    let [refused] = config.refused() else {
        panic!("{:?}", config.refused());
    };
    assert_eq!(refused.file, dir.join("example.yaml"));
    assert_eq!(refused.errors.0.len(), 4, "{}", refused.errors);
    for e in refused.errors.iter() {
        let at = e.location.as_ref().unwrap();
        assert!(at.line > 1 && at.file == refused.file, "{e}");
    }
}

#[test]
fn a_reload_keeps_the_rules_a_file_had_when_it_breaks() {
    let dir = tempfile::tempdir().unwrap();
    let limit = |n: u32| {
        format!(
            "domain: d{n}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: minute, requests_per_unit: {n}}}\n"
        )
    };
    std::fs::write(dir.path().join("a.yaml"), limit(1)).unwrap();
    std::fs::write(dir.path().join("b.yaml"), limit(2)).unwrap();
    let first = EnvoyConfig::load(dir.path(), FailureMode::Open).unwrap();
    // a.yaml breaks, b.yaml changes, c.yaml arrives broken.
    std::fs::write(
        dir.path().join("a.yaml"),
        "domain: d1\ndescriptors:\n  - key: k\n    quota_mode: true\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("b.yaml"), limit(3).replace("d3", "d2")).unwrap();
    std::fs::write(dir.path().join("c.yaml"), "domain: [").unwrap();
    let next = EnvoyConfig::load_after(dir.path(), FailureMode::Open, [], Some(&first)).unwrap();
    let limit_of = |c: &EnvoyConfig, domain: &str| match &c
        .domain(domain)
        .and_then(|d| d.find(&[("k", "v")]))
        .map(|f| f.rule.limit.clone())
    {
        Some(Limit::Limited {
            requests_per_unit, ..
        }) => Some(*requests_per_unit),
        _ => None,
    };
    assert_eq!(limit_of(&next, "d1"), Some(1), "a.yaml's last good rules");
    assert_eq!(limit_of(&next, "d2"), Some(3), "b.yaml's change applies");
    assert_eq!(names(&next), names(&first), "the same counters");
    let kept: Vec<(String, bool)> = next
        .refused()
        .iter()
        .map(|r| {
            (
                r.file.file_name().unwrap().to_string_lossy().into_owned(),
                r.kept,
            )
        })
        .collect();
    assert_eq!(
        kept,
        [("a.yaml".to_owned(), true), ("c.yaml".to_owned(), false)]
    );
    assert!(next.refused()[0].errors.to_string().contains("a.yaml:4:5"));
    // Kept again on the next reload while it stays broken.
    let again = EnvoyConfig::load_after(dir.path(), FailureMode::Open, [], Some(&next)).unwrap();
    assert_eq!(limit_of(&again, "d1"), Some(1));
    // Without a previous load there is nothing to keep.
    let fresh = EnvoyConfig::load(dir.path(), FailureMode::Open).unwrap();
    assert_eq!(limit_of(&fresh, "d1"), None);
}

/// The policy names of `config`'s limits, in file order.
fn names(config: &EnvoyConfig) -> Vec<String> {
    config
        .policies()
        .map(|d| d.policy.name.to_string())
        .collect()
}

#[test]
fn limits_whose_paths_coincide_get_names_of_their_own() {
    // Regression: these reference-valid files were refused with "the
    // policy name 'col.b.c' is used twice" and no location.
    let dir = tempfile::tempdir().unwrap();
    let limit = "rate_limit: {unit: minute, requests_per_unit: 1}";
    std::fs::write(
        dir.path().join("a.yaml"),
        format!("domain: col\ndescriptors:\n  - key: b\n    descriptors:\n      - key: c\n        {limit}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.yaml"),
        format!("domain: col.b\ndescriptors:\n  - key: c\n    {limit}\n"),
    )
    .unwrap();
    let config = EnvoyConfig::load(dir.path(), FailureMode::Open).unwrap();
    let found = names(&config);
    assert_eq!(found[0], "col.b.c");
    assert!(
        found[1].starts_with("col.b.c~") && found[1].len() == "col.b.c~".len() + 8,
        "{found:?}"
    );
    // The same name on every load (counters survive reloads).
    let again = EnvoyConfig::load(dir.path(), FailureMode::Open).unwrap();
    assert_eq!(names(&again), found);

    // Within one file.
    let one = parse(&format!(
        "domain: x\ndescriptors:\n  - key: p.q\n    descriptors:\n      - key: r\n        {limit}\n  - key: p\n    descriptors:\n      - key: q.r\n        {limit}\n"
    ))
    .unwrap();
    let found = names(&one);
    assert_eq!(found[0], "x.p.q.r");
    assert!(found[1].starts_with("x.p.q.r~"), "{found:?}");

    // Beside a policy of the policy file with that name.
    let file = dir.path().join("a.yaml");
    let beside = EnvoyConfig::load_beside(&file, FailureMode::Open, ["col.b.c"]).unwrap();
    assert!(
        names(&beside)[0].starts_with("col.b.c~"),
        "{:?}",
        names(&beside)
    );
}

#[test]
fn check_config_says_when_rules_hold_no_limit() {
    // Regression: a file with only a domain, or an empty directory,
    // printed nothing and exited 0.
    let dir = tempfile::tempdir().unwrap();
    let lines = ratewarden_config::check_config(dir.path()).unwrap();
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains("no limits"), "{lines:?}");
    let file = dir.path().join("only.yaml");
    std::fs::write(&file, "domain: only\n").unwrap();
    let lines = ratewarden_config::check_config(&file).unwrap();
    assert!(lines[0].contains("no limits"), "{lines:?}");
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
