//! The key a policy counts a request against, from its `key` parts
//! (`header:NAME`, `client_ip`, `path`, `method`, `query:NAME`,
//! `literal:TEXT`), and why a request may have none.

use std::borrow::Cow;
use std::net::IpAddr;

use http::HeaderMap;
use percent_encoding::percent_decode;
use ratewarden_core::{Key, KeyError};
use ratewarden_limiter::{KeyPart, PathError};
use smallvec::SmallVec;

use crate::matching::RequestPath;

/// What `match` and `key` parts read from one request.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    /// The method, as sent (methods are uppercase by convention and
    /// compared case-sensitively).
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a RequestPath<'a>,
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
    /// The policy keys by `path` and the path has no normal form.
    #[error("the path cannot be matched: {0}")]
    Path(PathError),
    /// The policy keys by `query:NAME` and the request gives `NAME` more
    /// than once: servers differ in which one they read (the first, the
    /// last, all of them), so any one would be a guess.
    #[error("the query parameter '{0}' is given more than once")]
    RepeatedParameter(String),
}

impl KeyProblem {
    /// Whether the client sent something unusable (a key too long, a path
    /// with no normal form, a repeated parameter): such a request is
    /// always refused with 400, never let through as "missing", or a
    /// client could escape a limit by sending it.
    pub fn is_bad_request(&self) -> bool {
        matches!(
            self,
            KeyProblem::TooLong(_) | KeyProblem::Path(_) | KeyProblem::RepeatedParameter(_)
        )
    }
}

/// The key of a request under `parts`, in order: `header:NAME` the
/// header's value (several field lines joined with `, `), `client_ip` the
/// client's address as text, `path` the path's normal form, `method`,
/// `query:NAME` the value of the parameter (percent-decoded, `+` as a
/// space), `literal:TEXT`. A part whose source is absent (no such header
/// or parameter) is the empty string, so such requests share one counter.
///
/// # Errors
/// [`KeyProblem::NoClientIp`] for `client_ip` when the address is not
/// known; [`KeyProblem::Path`] for `path` when the path has no normal
/// form; [`KeyProblem::RepeatedParameter`] for `query:NAME` when the
/// parameter is given more than once; [`KeyProblem::TooLong`] when the
/// parts add up to more than 4096 bytes.
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
        KeyPart::Path => Cow::Borrowed(facts.path.normal().map_err(KeyProblem::Path)?.as_bytes()),
        KeyPart::Method => Cow::Borrowed(facts.method.as_bytes()),
        KeyPart::Query(name) => Cow::Owned(
            single_query_value(facts.query, name)
                .map_err(|()| KeyProblem::RepeatedParameter(name.clone()))?
                .unwrap_or_default(),
        ),
        KeyPart::Literal(text) => Cow::Borrowed(text.as_bytes()),
    })
}

/// The value of query parameter `name`, percent-decoded with `+` as a
/// space; `Ok(None)` when absent, `Err` when given more than once.
fn single_query_value(query: Option<&str>, name: &str) -> Result<Option<Vec<u8>>, ()> {
    let mut found = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if form_decode(k) == name.as_bytes() {
            if found.is_some() {
                return Err(());
            }
            found = Some(form_decode(v));
        }
    }
    Ok(found)
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

    fn facts<'a>(
        headers: &'a HeaderMap,
        path: &'a RequestPath<'a>,
        query: Option<&'a str>,
    ) -> RequestFacts<'a> {
        RequestFacts {
            method: "POST",
            path,
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
        let path = RequestPath::new("//api/%6Frders");
        let key = key_of(
            &parts(&[
                "header:X-Api-Key",
                "client_ip",
                "path",
                "method",
                "query:user",
                "literal:v1",
            ]),
            &facts(&h, &path, Some("a=1&user=al%20ice+b&b=2")),
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
        let orders = RequestPath::new("/api/orders");
        let key = key_of(
            &parts(&["header:x-api-key", "query:user"]),
            &facts(&h, &orders, None),
        )
        .unwrap();
        assert_eq!(strings(&key), ["", ""]);
        let mut f = facts(&h, &orders, Some("user"));
        assert_eq!(strings(&key_of(&parts(&["query:user"]), &f).unwrap()), [""]);
        f.client_ip = None;
        assert_eq!(
            key_of(&parts(&["client_ip"]), &f),
            Err(KeyProblem::NoClientIp)
        );
        let mut long = HeaderMap::new();
        long.insert("x", HeaderValue::from_str(&"a".repeat(5000)).unwrap());
        assert!(matches!(
            key_of(&parts(&["header:x"]), &facts(&long, &orders, None)),
            Err(KeyProblem::TooLong(_))
        ));
    }

    #[test]
    fn a_repeated_key_parameter_is_refused_not_guessed() {
        let h = HeaderMap::new();
        let orders = RequestPath::new("/api/orders");
        for query in ["user=a&user=victim", "user=a&us%65r=b", "user&user=b"] {
            let problem = key_of(&parts(&["query:user"]), &facts(&h, &orders, Some(query)));
            assert_eq!(
                problem,
                Err(KeyProblem::RepeatedParameter("user".into())),
                "{query}"
            );
            assert!(problem.unwrap_err().is_bad_request());
        }
        // Other parameters may repeat.
        let key = key_of(
            &parts(&["query:user"]),
            &facts(&h, &orders, Some("tag=a&tag=b&user=c")),
        )
        .unwrap();
        assert_eq!(strings(&key), ["c"]);
    }

    #[test]
    fn a_path_key_of_a_path_without_a_normal_form_is_a_bad_request() {
        let h = HeaderMap::new();
        let path = RequestPath::new("/api/%2e%2e/x");
        let problem = key_of(&parts(&["path"]), &facts(&h, &path, None)).unwrap_err();
        assert_eq!(problem, KeyProblem::Path(PathError::DotSegmentWithEscape));
        assert!(problem.is_bad_request());
        assert!(!KeyProblem::NoClientIp.is_bad_request());
        // No part reads the path: no problem.
        assert!(key_of(&parts(&["client_ip"]), &facts(&h, &path, None)).is_ok());
    }
}
