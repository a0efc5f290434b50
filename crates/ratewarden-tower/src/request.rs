//! A request as a policy sees it: which policies apply (`match`) and what
//! key each one counts it against (`key` parts). Forward auth and the
//! [`crate::RateLimitLayer`] both read requests through this module, so
//! they agree on every rule.

use std::borrow::Cow;
use std::net::IpAddr;

use http::HeaderMap;
use percent_encoding::percent_decode;
use ratewarden_core::{Key, KeyError};
use ratewarden_limiter::{KeyPart, PolicyDef};
use smallvec::SmallVec;

/// What `match` and `key` parts read from one request.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    /// The method, as sent (methods are uppercase by convention and
    /// compared case-sensitively).
    pub method: &'a str,
    /// The path, as received (not percent-decoded), without the query.
    pub path: &'a str,
    /// The query, without the `?`.
    pub query: Option<&'a str>,
    /// The request's headers.
    pub headers: &'a HeaderMap,
    /// The client's address ([`crate::TrustedProxies::client_ip`]), when
    /// known.
    pub client_ip: Option<IpAddr>,
}

/// Why a request has no key for a policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyProblem {
    /// The policy keys by `client_ip` and the client's address is not
    /// known (a tower service without connection info).
    #[error(
        "the client's address is not known (the service must put the peer address into the \
         request: axum's into_make_service_with_connect_info::<SocketAddr>(), tonic's TcpConnectInfo, \
         or a SocketAddr extension)"
    )]
    NoClientIp,
    /// A custom key function found no key (an unauthenticated request,
    /// say).
    #[error("the key function found no key")]
    NoKey,
    /// The parts add up to more than [`Key::MAX_BYTES`] (4096 bytes).
    #[error("the key is too long: {0}")]
    TooLong(KeyError),
}

/// Whether `def` applies to requests ratewarden sees itself: it has `key`
/// parts and its `match` (if any) fits `method` and `path`. A policy
/// without `key` parts is for callers that give the key (the JSON API,
/// the seed routes) and never applies here.
pub fn applies(def: &PolicyDef, method: &str, path: &str) -> bool {
    !def.key.is_empty() && matches(def, method, path)
}

/// Whether `def`'s `match` fits (no `match`: every request).
pub fn matches(def: &PolicyDef, method: &str, path: &str) -> bool {
    def.matcher.as_ref().is_none_or(|m| m.matches(method, path))
}

/// The key of a request under `parts`, in order: `header:NAME` the
/// header's value (several field lines joined with `, `), `client_ip` the
/// client's address as text, `path`, `method`, `query:NAME` the first
/// value of the parameter (percent-decoded, `+` as a space),
/// `literal:TEXT`. A part whose source is absent (no such header or
/// parameter) is the empty string, so such requests share one counter.
///
/// # Errors
/// [`KeyProblem::NoClientIp`] for `client_ip` when the address is not
/// known; [`KeyProblem::TooLong`] when the parts add up to more than 4096
/// bytes.
pub fn key_of(parts: &[KeyPart], facts: &RequestFacts<'_>) -> Result<Key, KeyProblem> {
    // Borrowed where the request holds the bytes: a key is built for
    // every request.
    let mut values: SmallVec<[Cow<'_, [u8]>; 4]> = SmallVec::new();
    for part in parts {
        values.push(part_value(part, facts)?);
    }
    Key::new(&values).map_err(KeyProblem::TooLong)
}

fn part_value<'a>(
    part: &'a KeyPart,
    facts: &RequestFacts<'a>,
) -> Result<Cow<'a, [u8]>, KeyProblem> {
    Ok(match part {
        KeyPart::Header(name) => header_value(facts.headers, name),
        KeyPart::ClientIp => {
            let ip = facts.client_ip.ok_or(KeyProblem::NoClientIp)?;
            Cow::Owned(ip.to_canonical().to_string().into_bytes())
        }
        KeyPart::Path => Cow::Borrowed(facts.path.as_bytes()),
        KeyPart::Method => Cow::Borrowed(facts.method.as_bytes()),
        KeyPart::Query(name) => Cow::Owned(query_value(facts.query, name).unwrap_or_default()),
        KeyPart::Literal(text) => Cow::Borrowed(text.as_bytes()),
    })
}

/// Every field line of header `name`, joined with `, ` (RFC 9110 §5.3);
/// empty when there is none.
fn header_value<'a>(headers: &'a HeaderMap, name: &str) -> Cow<'a, [u8]> {
    let mut lines = headers.get_all(name).iter();
    let Some(first) = lines.next() else {
        return Cow::Borrowed(b"");
    };
    let mut rest = lines.peekable();
    if rest.peek().is_none() {
        return Cow::Borrowed(first.as_bytes());
    }
    let mut value = first.as_bytes().to_vec();
    for line in rest {
        value.extend_from_slice(b", ");
        value.extend_from_slice(line.as_bytes());
    }
    Cow::Owned(value)
}

/// The first value of query parameter `name`, percent-decoded with `+` as
/// a space (`application/x-www-form-urlencoded`); `None` when absent.
pub fn query_value(query: Option<&str>, name: &str) -> Option<Vec<u8>> {
    query?
        .split('&')
        .filter(|pair| !pair.is_empty())
        .find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(k) == name.as_bytes()).then(|| form_decode(v))
        })
}

/// `s` percent-decoded with `+` as a space
/// (`application/x-www-form-urlencoded`): how every query parameter is
/// read.
pub fn form_decode(s: &str) -> Vec<u8> {
    let spaced = s.replace('+', " ");
    percent_decode(spaced.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use ratewarden_core::{Algorithm, Policy, Quota};
    use ratewarden_limiter::{FailureMode, PathPattern, RequestMatch};
    use std::time::Duration;

    fn facts<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> RequestFacts<'a> {
        RequestFacts {
            method: "POST",
            path: "/api/orders",
            query,
            headers,
            client_ip: Some("::ffff:192.0.2.1".parse().unwrap()),
        }
    }

    fn parts(texts: &[&str]) -> Vec<KeyPart> {
        texts.iter().map(|t| t.parse().unwrap()).collect()
    }

    fn strings(key: &Key) -> Vec<String> {
        key.parts()
            .map(|p| String::from_utf8(p.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn every_part_reads_its_source_in_order() {
        let mut h = HeaderMap::new();
        h.append("x-api-key", HeaderValue::from_static("k1"));
        h.append("x-api-key", HeaderValue::from_static("k2"));
        let key = key_of(
            &parts(&[
                "header:X-Api-Key",
                "client_ip",
                "path",
                "method",
                "query:user",
                "literal:v1",
            ]),
            &facts(&h, Some("a=1&user=al%20ice+b&user=bob")),
        )
        .unwrap();
        assert_eq!(
            strings(&key),
            [
                "k1, k2",
                "192.0.2.1",
                "/api/orders",
                "POST",
                "al ice b",
                "v1"
            ]
        );
    }

    #[test]
    fn absent_sources_are_empty_and_an_unknown_client_is_a_problem() {
        let h = HeaderMap::new();
        let key = key_of(
            &parts(&["header:x-api-key", "query:user"]),
            &facts(&h, None),
        )
        .unwrap();
        assert_eq!(strings(&key), ["", ""]);
        let mut f = facts(&h, Some("user"));
        assert_eq!(strings(&key_of(&parts(&["query:user"]), &f).unwrap()), [""]);
        f.client_ip = None;
        assert_eq!(
            key_of(&parts(&["client_ip"]), &f),
            Err(KeyProblem::NoClientIp)
        );
        let mut long = HeaderMap::new();
        long.insert("x", HeaderValue::from_str(&"a".repeat(5000)).unwrap());
        assert!(matches!(
            key_of(&parts(&["header:x"]), &facts(&long, None)),
            Err(KeyProblem::TooLong(_))
        ));
    }

    #[test]
    fn only_policies_with_key_parts_apply_and_match_is_honoured() {
        let quota = Quota::new(1, Duration::from_secs(1)).unwrap();
        let mut def = PolicyDef::new(Policy::new("p", Algorithm::Gcra, quota), FailureMode::Open);
        assert!(
            !applies(&def, "GET", "/x"),
            "no key parts: the JSON API's policy"
        );
        def.key = parts(&["client_ip"]);
        assert!(applies(&def, "GET", "/x"));
        def.matcher = Some(RequestMatch {
            methods: Some(vec!["GET".into()]),
            path: Some(PathPattern::new("/api/*").unwrap()),
        });
        assert!(applies(&def, "GET", "/api/x"));
        assert!(!applies(&def, "GET", "/api"));
        assert!(!applies(&def, "get", "/api/x"));
    }
}
