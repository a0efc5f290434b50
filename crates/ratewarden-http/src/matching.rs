//! Which policies apply to a request: a policy's `match` (methods, a
//! path pattern) read against the request's method and path, the path in
//! its normal form and as received. Forward auth and the tower Layer both
//! match requests through this module, so they agree on every rule.

use std::borrow::Cow;
use std::sync::OnceLock;

use ratewarden_limiter::{PathError, PolicyDef, normalise_path};

/// A request's path as received, and its normal form
/// ([`normalise_path`]), worked out when a policy first reads it: a
/// request no policy's `match.path` or `path` key part reads is never
/// refused for its path.
#[derive(Debug, Clone)]
pub struct RequestPath<'a> {
    received: &'a str,
    /// `Ok(None)`: `received` is normal.
    normal: OnceLock<Result<Option<String>, PathError>>,
}

impl<'a> RequestPath<'a> {
    /// The path `received` (without the query).
    pub fn new(received: &'a str) -> RequestPath<'a> {
        RequestPath {
            received,
            normal: OnceLock::new(),
        }
    }

    /// The path as received.
    pub fn received(&self) -> &'a str {
        self.received
    }

    /// The normal form: what `match.path` and the `path` key part read.
    ///
    /// # Errors
    /// [`PathError`] when the path has none (an encoded `..`, a
    /// backslash, …): the request is refused with 400, not matched under a
    /// guess.
    pub fn normal(&self) -> Result<&str, PathError> {
        let normal = self.normal.get_or_init(|| {
            normalise_path(self.received).map(|n| match n {
                Cow::Borrowed(_) => None,
                Cow::Owned(n) => Some(n),
            })
        });
        match normal {
            Ok(None) => Ok(self.received),
            Ok(Some(n)) => Ok(n),
            Err(e) => Err(*e),
        }
    }
}

/// Whether `def` applies to requests ratewarden sees itself: it has `key`
/// parts and its `match` (if any) fits `method` and `path`. A policy
/// without `key` parts is for callers that give the key (the JSON API,
/// the seed routes) and never applies here.
///
/// # Errors
/// [`PathError`] when `def` matches paths, its methods fit, and the path
/// has no normal form.
pub fn applies(def: &PolicyDef, method: &str, path: &RequestPath<'_>) -> Result<bool, PathError> {
    if def.key.is_empty() {
        return Ok(false);
    }
    matches(def, method, path)
}

/// Whether `def`'s `match` fits (no `match`: every request). A path
/// pattern is tried on the normal form of the path and, when it differs,
/// on the path as received: an application that routes the path as
/// received (axum, Express: `/files/../x` reaches `/files/{*rest}`) and
/// one that normalises it (nginx, Tomcat: `/x`) both reach only routes
/// whose policies apply.
///
/// # Errors
/// [`PathError`] when `def` matches paths, its methods fit, and the path
/// has no normal form.
pub fn matches(def: &PolicyDef, method: &str, path: &RequestPath<'_>) -> Result<bool, PathError> {
    let Some(m) = &def.matcher else {
        return Ok(true);
    };
    if m.methods
        .as_ref()
        .is_some_and(|ms| !ms.iter().any(|x| x == method))
    {
        return Ok(false);
    }
    let Some(pattern) = &m.path else {
        return Ok(true);
    };
    let normal = path.normal()?;
    Ok(pattern.matches(normal) || (normal != path.received() && pattern.matches(path.received())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewarden_core::{Algorithm, Policy, Quota};
    use ratewarden_limiter::{FailureMode, KeyPart, PathPattern, RequestMatch};
    use std::time::Duration;

    fn parts(texts: &[&str]) -> Vec<KeyPart> {
        texts.iter().map(|t| t.parse().unwrap()).collect()
    }

    fn policy(key: &[&str], path: Option<&str>) -> PolicyDef {
        let quota = Quota::new(1, Duration::from_secs(1)).unwrap();
        let mut def = PolicyDef::new(Policy::new("p", Algorithm::Gcra, quota), FailureMode::Open);
        def.key = parts(key);
        def.matcher = path.map(|p| RequestMatch {
            methods: None,
            path: Some(PathPattern::new(p).unwrap()),
        });
        def
    }

    #[test]
    fn only_policies_with_key_parts_apply_and_match_is_honoured() {
        let mut def = policy(&[], None);
        let x = RequestPath::new("/x");
        assert_eq!(
            applies(&def, "GET", &x),
            Ok(false),
            "no key parts: the JSON API's policy"
        );
        def.key = parts(&["client_ip"]);
        assert_eq!(applies(&def, "GET", &x), Ok(true));
        def.matcher = Some(RequestMatch {
            methods: Some(vec!["GET".into()]),
            path: Some(PathPattern::new("/api/*").unwrap()),
        });
        assert_eq!(applies(&def, "GET", &RequestPath::new("/api/x")), Ok(true));
        assert_eq!(applies(&def, "GET", &RequestPath::new("/api")), Ok(false));
        assert_eq!(applies(&def, "get", &RequestPath::new("/api/x")), Ok(false));
    }

    #[test]
    fn every_spelling_of_a_path_matches_its_policy() {
        let def = policy(&["client_ip"], Some("/api/*"));
        for spelling in [
            "/api/orders",
            "/%61pi/orders",
            "//api/orders",
            "/x/../api/orders",
            "/api%2Forders",
            "/api;v=1/orders",
        ] {
            assert_eq!(
                applies(&def, "GET", &RequestPath::new(spelling)),
                Ok(true),
                "{spelling}"
            );
        }
    }

    #[test]
    fn a_pattern_also_matches_the_path_as_received() {
        // axum routes `/files/../x` to `/files/{*rest}`: the policy on
        // `/files/*` applies although the normal form is `/x`.
        let files = policy(&["client_ip"], Some("/files/*"));
        let x = policy(&["client_ip"], Some("/x"));
        let path = RequestPath::new("/files/../x");
        assert_eq!(path.normal(), Ok("/x"));
        assert_eq!(applies(&files, "GET", &path), Ok(true));
        assert_eq!(applies(&x, "GET", &path), Ok(true));
    }

    #[test]
    fn a_path_without_a_normal_form_is_refused_only_where_a_pattern_reads_it() {
        let path = RequestPath::new("/api/%2e%2e/admin");
        let on_api = policy(&["client_ip"], Some("/api/*"));
        assert_eq!(
            applies(&on_api, "GET", &path),
            Err(PathError::DotSegmentWithEscape)
        );
        let everywhere = policy(&["client_ip"], None);
        assert_eq!(applies(&everywhere, "GET", &path), Ok(true));
        let mut posts = policy(&["client_ip"], Some("/api/*"));
        if let Some(m) = posts.matcher.as_mut() {
            m.methods = Some(vec!["POST".into()]);
        }
        assert_eq!(applies(&posts, "GET", &path), Ok(false));
    }

    #[test]
    fn the_normal_form_is_worked_out_once_and_borrowed_when_it_is_the_path() {
        let path = RequestPath::new("/api/orders");
        assert!(std::ptr::eq(path.normal().unwrap(), path.received()));
        let path = RequestPath::new("/%61pi");
        let first: *const str = path.normal().unwrap();
        assert!(std::ptr::eq(first, path.normal().unwrap()));
        assert_eq!(path.normal(), Ok("/api"));
    }
}
