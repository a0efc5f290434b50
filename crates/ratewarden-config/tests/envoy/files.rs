//! Rules directories and files: a broken file refused alone and kept on
//! a reload, limits named apart, check-config's lines.

use ratewarden_config::envoy::{EnvoyConfig, Limit};
use ratewarden_limiter::FailureMode;

use super::{parse, reference};

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
