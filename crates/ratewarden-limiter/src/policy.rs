//! Policies as the decision layer holds them: [`PolicyDef`] (a core
//! [`Policy`] plus what the layer needs around it: its failure mode, how a
//! request becomes its key, which requests it applies to) and the
//! [`PolicySet`] of all of them, looked up by name.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use ratewarden_core::{Algorithm, Policy};

use crate::path::normalise_path;

/// What a decision does when the store cannot answer (a transient error:
/// down, timed out, busy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureMode {
    /// Fail open: allow the request unchecked, log and count it.
    Open,
    /// Fail closed: refuse to decide; interfaces answer 503 (gRPC
    /// `UNAVAILABLE`).
    Closed,
}

impl FailureMode {
    /// `open` or `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureMode::Open => "open",
            FailureMode::Closed => "closed",
        }
    }
}

impl FromStr for FailureMode {
    type Err = String;

    fn from_str(s: &str) -> Result<FailureMode, String> {
        match s {
            "open" => Ok(FailureMode::Open),
            "closed" => Ok(FailureMode::Closed),
            _ => Err(format!(
                "'{s}' is not a failure mode; expected open or closed"
            )),
        }
    }
}

/// One part of a key built from a request that ratewarden sees itself
/// (forward auth, the tower Layer). A part whose source is absent (no
/// such header) is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyPart {
    /// `header:NAME`: the header's value (names compare case-insensitively;
    /// kept lowercase).
    Header(String),
    /// `client_ip`: the client's address (behind trusted proxies, the
    /// rightmost untrusted `X-Forwarded-For` hop).
    ClientIp,
    /// `path`: the request path, without the query.
    Path,
    /// `method`: the request method, uppercase.
    Method,
    /// `query:NAME`: the first value of that query parameter.
    Query(String),
    /// `literal:TEXT`: always `TEXT` (a global counter, or a separator).
    Literal(String),
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPart::Header(name) => write!(f, "header:{name}"),
            KeyPart::ClientIp => f.write_str("client_ip"),
            KeyPart::Path => f.write_str("path"),
            KeyPart::Method => f.write_str("method"),
            KeyPart::Query(name) => write!(f, "query:{name}"),
            KeyPart::Literal(text) => write!(f, "literal:{text}"),
        }
    }
}

impl FromStr for KeyPart {
    type Err = String;

    /// `header:NAME`, `client_ip`, `path`, `method`, `query:NAME` or
    /// `literal:TEXT`. Header names must be valid HTTP field names
    /// (RFC 9110 tokens); query names and literals must not be empty.
    fn from_str(s: &str) -> Result<KeyPart, String> {
        let expected = "expected header:NAME, client_ip, path, method, query:NAME or literal:TEXT";
        match s.split_once(':') {
            None => match s {
                "client_ip" => Ok(KeyPart::ClientIp),
                "path" => Ok(KeyPart::Path),
                "method" => Ok(KeyPart::Method),
                _ => Err(format!("'{s}' is not a key part; {expected}")),
            },
            Some(("header", name)) if is_token(name) => {
                Ok(KeyPart::Header(name.to_ascii_lowercase()))
            }
            Some(("header", _)) => Err(format!("'{s}' does not name a valid header")),
            Some(("query", name)) if !name.is_empty() => Ok(KeyPart::Query(name.to_owned())),
            Some(("literal", text)) if !text.is_empty() => Ok(KeyPart::Literal(text.to_owned())),
            Some(("query", _)) => Err(format!("'{s}' needs a parameter name after the colon")),
            Some(("literal", _)) => Err(format!("'{s}' needs a text after the colon")),
            Some(_) => Err(format!("'{s}' is not a key part; {expected}")),
        }
    }
}

/// An RFC 9110 token: the characters a header name may hold.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A method as `match.methods` takes it: an RFC 9110 token without
/// lowercase letters (`GET`, `M-SEARCH`), since methods compare
/// case-sensitively and are uppercase by convention.
///
/// # Errors
/// A message naming the value.
pub fn check_method(m: &str) -> Result<&str, String> {
    if is_token(m) && !m.bytes().any(|b| b.is_ascii_lowercase()) {
        Ok(m)
    } else {
        Err(format!(
            "'{m}' is not a method; methods are uppercase RFC 9110 tokens, e.g. GET or M-SEARCH"
        ))
    }
}

/// A path pattern: `*` matches any run of characters, `/` included; every
/// other character matches itself. `/api/*` matches `/api/x` and
/// `/api/x/y` but not `/api`.
///
/// Paths are matched in their normal form ([`normalise_path`]), so a
/// pattern is held in that form too: `/%61pi/*` is `/api/*`, `/café` is
/// `/caf%C3%A9`, `/a//b` is `/a/b`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathPattern(String);

impl PathPattern {
    /// A pattern, in its normal form; it must start with `/` or `*`.
    ///
    /// # Errors
    /// A message naming the pattern when it does not start with `/` or
    /// `*`, or holds what no normal path holds: a `.` or `..` segment, a
    /// `;` (paths are matched without their `;` parameters), or what
    /// [`normalise_path`] refuses (a backslash, a control character, a
    /// malformed escape).
    pub fn new(pattern: &str) -> Result<PathPattern, String> {
        let rooted = match pattern.as_bytes().first() {
            Some(b'/') => Cow::Borrowed(pattern),
            // A leading `*` stands for the root too: normalised as `/*…`.
            Some(b'*') => Cow::Owned(format!("/{pattern}")),
            _ => {
                return Err(format!(
                    "the path pattern '{pattern}' must start with '/' or '*'"
                ));
            }
        };
        if rooted.contains(';') {
            return Err(format!(
                "the path pattern '{pattern}' holds ';': paths are matched without their ';' \
                 parameters (/login;jsessionid=1 is /login)"
            ));
        }
        if rooted.split('/').any(|s| s == "." || s == "..") {
            return Err(format!(
                "the path pattern '{pattern}' holds a '.' or '..' segment: paths are matched with \
                 their dot segments removed, so write the path it leads to"
            ));
        }
        let normal = normalise_path(&rooted)
            .map_err(|e| format!("the path pattern '{pattern}' can never match: {e}"))?;
        let normal = if pattern.starts_with('*') {
            normal[1..].to_owned()
        } else {
            normal.into_owned()
        };
        Ok(PathPattern(normal))
    }

    /// The pattern in its normal form (as written, unless it was spelled
    /// otherwise: `/%61pi/*` is `/api/*`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `path` (without its query) matches.
    pub fn matches(&self, path: &str) -> bool {
        let mut pieces = self.0.split('*');
        // split always yields at least one piece.
        let first = pieces.next().unwrap_or_default();
        let Some(mut rest) = path.strip_prefix(first) else {
            return false;
        };
        // Matched for every request a policy might apply to: no allocation.
        let mut pieces = pieces.peekable();
        if pieces.peek().is_none() {
            return rest.is_empty(); // no `*`: an exact match
        }
        while let Some(piece) = pieces.next() {
            if pieces.peek().is_none() {
                return rest.len() >= piece.len() && rest.ends_with(piece);
            }
            match rest.find(piece) {
                Some(at) => rest = &rest[at + piece.len()..],
                None => return false,
            }
        }
        true
    }
}

/// Which requests a policy applies to (forward auth, the tower Layer).
/// An absent field matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RequestMatch {
    /// Methods, uppercase, compared case-sensitively.
    pub methods: Option<Vec<String>>,
    /// The path pattern.
    pub path: Option<PathPattern>,
}

impl RequestMatch {
    /// Whether a request with `method` and `path` (no query) matches.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        self.methods
            .as_ref()
            .is_none_or(|m| m.iter().any(|x| x == method))
            && self.path.as_ref().is_none_or(|p| p.matches(path))
    }
}

/// A policy as the decision layer holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDef {
    /// Name, algorithm, quota (burst, whether denied attempts count) and
    /// mode (enforce or shadow).
    pub policy: Policy,
    /// What its decisions do when the store cannot answer.
    pub on_store_error: FailureMode,
    /// How a request becomes its key; empty when callers always give the
    /// key (the JSON API).
    pub key: Vec<KeyPart>,
    /// Which requests it applies to; `None`: every request.
    pub matcher: Option<RequestMatch>,
}

impl PolicyDef {
    /// A policy without key parts or match, with `on_store_error`.
    pub fn new(policy: Policy, on_store_error: FailureMode) -> PolicyDef {
        PolicyDef {
            policy,
            on_store_error,
            key: Vec::new(),
            matcher: None,
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.policy.name
    }
}

/// A policy name: 1 to 64 characters of `[A-Za-z0-9_.-]` (so that it
/// can stand in metric labels, Redis keys and header items unescaped).
///
/// # Errors
/// A message naming the value and the rule.
pub fn check_policy_name(s: &str) -> Result<&str, String> {
    let ok = (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(s)
    } else {
        Err(format!(
            "'{s}' is not a policy name: 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'"
        ))
    }
}

/// A policy name given twice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the policy name '{0}' is used twice")]
pub struct DuplicatePolicy(pub String);

/// Every policy, by name. Immutable: a reload builds a new set and the
/// [`crate::Limiter`] swaps it in atomically.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    by_name: HashMap<Arc<str>, Arc<PolicyDef>, foldhash::fast::RandomState>,
    order: Vec<Arc<PolicyDef>>,
}

impl PolicySet {
    /// A set of `defs`, kept in the order given.
    ///
    /// # Errors
    /// [`DuplicatePolicy`] when two share a name.
    pub fn new(defs: impl IntoIterator<Item = PolicyDef>) -> Result<PolicySet, DuplicatePolicy> {
        let mut set = PolicySet::default();
        for def in defs {
            let def = Arc::new(def);
            let name = Arc::clone(&def.policy.name);
            if set.by_name.insert(name, Arc::clone(&def)).is_some() {
                return Err(DuplicatePolicy(def.name().to_owned()));
            }
            set.order.push(def);
        }
        Ok(set)
    }

    /// The policy named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<PolicyDef>> {
        self.by_name.get(name)
    }

    /// Every policy, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<PolicyDef>> {
        self.order.iter()
    }

    /// The number of policies.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// For each algorithm in use, the longest window of its policies: what
    /// pruning must keep.
    pub fn longest_windows(&self) -> Vec<(Algorithm, Duration)> {
        let mut longest: Vec<(Algorithm, Duration)> = Vec::new();
        for def in &self.order {
            let (algorithm, window) = (def.policy.algorithm, def.policy.quota.window());
            match longest.iter_mut().find(|(a, _)| *a == algorithm) {
                Some((_, w)) => *w = (*w).max(window),
                None => longest.push((algorithm, window)),
            }
        }
        longest
    }

    /// What changes from `self` to `next`: names added, removed, and
    /// changed (any setting).
    pub fn changes(&self, next: &PolicySet) -> Changes {
        let mut changes = Changes::default();
        for def in &next.order {
            match self.get(def.name()) {
                None => changes.added.push(def.name().to_owned()),
                Some(old) if old.as_ref() != def.as_ref() => {
                    changes.changed.push(def.name().to_owned());
                }
                Some(_) => {}
            }
        }
        for def in &self.order {
            if next.get(def.name()).is_none() {
                changes.removed.push(def.name().to_owned());
            }
        }
        changes
    }
}

/// The difference between two policy sets, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Policies only in the new set.
    pub added: Vec<String>,
    /// Policies only in the old set (their state expires by itself).
    pub removed: Vec<String>,
    /// Policies in both whose settings differ.
    pub changed: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewarden_core::Quota;

    #[test]
    fn a_star_matches_any_run_of_characters_slashes_included() {
        let p = PathPattern::new("/api/*").unwrap();
        assert!(p.matches("/api/x"));
        assert!(p.matches("/api/x/y"));
        assert!(p.matches("/api/"));
        assert!(!p.matches("/api"));
        assert!(!p.matches("/apix"));
        let p = PathPattern::new("/users/*/orders").unwrap();
        assert!(p.matches("/users/7/orders"));
        assert!(p.matches("/users/7/x/orders"));
        assert!(!p.matches("/users/7/orders/1"));
        let exact = PathPattern::new("/login").unwrap();
        assert!(exact.matches("/login") && !exact.matches("/login/"));
        let ab = PathPattern::new("/a*b*b").unwrap();
        assert!(ab.matches("/abb") && ab.matches("/axbyb") && !ab.matches("/ab"));
        assert!(PathPattern::new("*").unwrap().matches(""));
        assert!(PathPattern::new("api/*").is_err());
    }

    #[test]
    fn patterns_are_held_in_the_normal_form_paths_are_matched_in() {
        for (written, normal) in [
            ("/api/*", "/api/*"),
            ("/%61pi/*", "/api/*"),
            ("//api//*", "/api/*"),
            ("/caf\u{e9}/*", "/caf%C3%A9/*"),
            ("/caf%c3%a9/*", "/caf%C3%A9/*"),
            ("/a%2Fb", "/a/b"),
            ("*", "*"),
            ("*.json", "*.json"),
            ("*//x", "*/x"),
            ("/", "/"),
        ] {
            assert_eq!(
                PathPattern::new(written).unwrap().as_str(),
                normal,
                "{written}"
            );
        }
        let caf = PathPattern::new("/caf\u{e9}/*").unwrap();
        assert!(caf.matches("/caf%C3%A9/menu"));
    }

    #[test]
    fn patterns_no_normal_path_can_match_are_refused_with_the_reason() {
        for (pattern, reason) in [
            ("/login;x", "';'"),
            ("/api/../admin", "dot segment"),
            ("/api/./x", "dot segment"),
            ("*/..", "dot segment"),
            ("/a\\b", "backslash"),
            ("/a%zz", "%XX"),
            ("/a/%2e%2e/b", "encoded dot segment"),
            ("/a%00", "control character"),
        ] {
            let e = PathPattern::new(pattern).unwrap_err();
            assert!(e.contains(pattern) && e.contains(reason), "{pattern}: {e}");
        }
    }

    #[test]
    fn methods_compare_case_sensitively_and_absent_fields_match_all() {
        let m = RequestMatch {
            methods: Some(vec!["GET".into(), "POST".into()]),
            path: Some(PathPattern::new("/api/*").unwrap()),
        };
        assert!(m.matches("GET", "/api/x"));
        assert!(!m.matches("get", "/api/x"));
        assert!(!m.matches("DELETE", "/api/x"));
        assert!(RequestMatch::default().matches("PATCH", "/anything"));
    }

    #[test]
    fn methods_are_uppercase_tokens_with_or_without_letters_only() {
        // `M-SEARCH` is a registered method: a token, not only letters.
        for ok in ["GET", "M-SEARCH", "PURGE", "BASELINE-CONTROL"] {
            assert_eq!(check_method(ok), Ok(ok));
        }
        for bad in ["get", "Get", "", "GE T", "POST,GET"] {
            assert!(
                check_method(bad).unwrap_err().contains("is not a method"),
                "{bad}"
            );
        }
    }

    #[test]
    fn key_parts_parse_and_print_the_same() {
        for text in [
            "header:x-api-key",
            "client_ip",
            "path",
            "method",
            "query:user",
            "literal:all",
            "literal:a:b",
        ] {
            let part: KeyPart = text.parse().unwrap();
            assert_eq!(part.to_string(), text);
        }
        assert_eq!(
            "header:X-Api-Key".parse::<KeyPart>().unwrap(),
            KeyPart::Header("x-api-key".into())
        );
        for bad in [
            "header:",
            "header:a b",
            "query:",
            "literal:",
            "cookie:x",
            "ip",
            "",
        ] {
            assert!(bad.parse::<KeyPart>().is_err(), "{bad}");
        }
    }

    fn def(name: &str, limit: u64) -> PolicyDef {
        let quota = Quota::new(limit, Duration::from_secs(60)).unwrap();
        PolicyDef::new(Policy::new(name, Algorithm::Gcra, quota), FailureMode::Open)
    }

    #[test]
    fn a_set_refuses_duplicate_names_and_reports_changes() {
        assert_eq!(
            PolicySet::new([def("a", 1), def("a", 2)]).unwrap_err(),
            DuplicatePolicy("a".into())
        );
        let old = PolicySet::new([def("a", 1), def("b", 1)]).unwrap();
        let new = PolicySet::new([def("a", 2), def("c", 1), def("b", 1)]).unwrap();
        assert_eq!(
            old.changes(&new),
            Changes {
                added: vec!["c".into()],
                removed: vec![],
                changed: vec!["a".into()],
            }
        );
        assert_eq!(
            new.iter().map(|d| d.name()).collect::<Vec<_>>(),
            ["a", "c", "b"]
        );
    }
}
