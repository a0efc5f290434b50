//! Settings of the Envoy rate limit service beside its rules: how many
//! descriptors one call may carry, the reference server's optional
//! `RateLimit-Limit` / `-Remaining` / `-Reset` response headers, and
//! whether health needs rules loaded.

use std::fmt;

/// The most descriptors one `ShouldRateLimit` call may carry by default.
/// Envoy sends one descriptor per `rate_limits` action list that applies
/// to a request, a handful in the configurations we know; every
/// descriptor is a lookup and a counter, so a call of 20,000 took 0.79 s
/// of a core.
pub const DEFAULT_MAX_DESCRIPTORS: usize = 256;

/// The largest `envoy_max_descriptors` accepted.
pub const MAX_MAX_DESCRIPTORS: usize = 65_536;

/// `envoy_max_descriptors`: a whole number from 1 to [`MAX_MAX_DESCRIPTORS`].
///
/// # Errors
/// A message naming the value.
pub fn parse_max_descriptors(s: &str) -> Result<usize, String> {
    check_max_descriptors(crate::values::whole_number(s)?)
}

/// [`parse_max_descriptors`]'s range check on a number.
///
/// # Errors
/// A message naming the value.
pub fn check_max_descriptors(n: u64) -> Result<usize, String> {
    match usize::try_from(n) {
        Ok(n @ 1..=MAX_MAX_DESCRIPTORS) => Ok(n),
        _ => Err(format!(
            "{n} is not from 1 to {MAX_MAX_DESCRIPTORS} descriptors"
        )),
    }
}

/// The Envoy service's settings beside its rules (`envoy_max_descriptors`,
/// `envoy_limit_headers`, `envoy_require_rules`), applied on reload with
/// the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvoyOptions {
    /// A call with more descriptors is refused (gRPC `INVALID_ARGUMENT`,
    /// `POST /json` 400).
    pub max_descriptors: usize,
    /// The reference's optional headers, of the most restrictive
    /// descriptor; `None`: not sent (the default; the IETF `RateLimit`
    /// and `RateLimit-Policy` fields are sent either way).
    pub limit_headers: Option<LimitHeaders>,
    /// `GET /healthcheck` and gRPC health report the service down while
    /// no rules domain is loaded (the reference's
    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`).
    pub require_rules: bool,
}

impl Default for EnvoyOptions {
    /// [`DEFAULT_MAX_DESCRIPTORS`], no extra headers, healthy without rules.
    fn default() -> EnvoyOptions {
        EnvoyOptions {
            max_descriptors: DEFAULT_MAX_DESCRIPTORS,
            limit_headers: None,
            require_rules: false,
        }
    }
}

/// The names of the three headers envoyproxy/ratelimit adds to a
/// response when `LIMIT_RESPONSE_HEADERS_ENABLED` is true: the limit, the
/// remaining quota and the seconds until the window resets, of the
/// request's most restrictive descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitHeaders {
    /// `RateLimit-Limit` by default (`LIMIT_LIMIT_HEADER`).
    pub limit: String,
    /// `RateLimit-Remaining` by default (`LIMIT_REMAINING_HEADER`).
    pub remaining: String,
    /// `RateLimit-Reset` by default (`LIMIT_RESET_HEADER`).
    pub reset: String,
}

impl Default for LimitHeaders {
    /// The reference server's names.
    fn default() -> LimitHeaders {
        LimitHeaders {
            limit: "RateLimit-Limit".into(),
            remaining: "RateLimit-Remaining".into(),
            reset: "RateLimit-Reset".into(),
        }
    }
}

impl fmt::Display for LimitHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{},{}", self.limit, self.remaining, self.reset)
    }
}

impl LimitHeaders {
    /// The three names, each checked as an HTTP field name.
    ///
    /// # Errors
    /// A message naming the first name that is not a field name, or a
    /// name given twice.
    pub fn new(limit: &str, remaining: &str, reset: &str) -> Result<LimitHeaders, String> {
        for name in [limit, remaining, reset] {
            check_field_name(name)?;
        }
        let lower = |s: &str| s.to_ascii_lowercase();
        if lower(limit) == lower(remaining)
            || lower(limit) == lower(reset)
            || lower(remaining) == lower(reset)
        {
            return Err(format!(
                "'{limit},{remaining},{reset}' names one header twice; give three names"
            ));
        }
        Ok(LimitHeaders {
            limit: limit.to_owned(),
            remaining: remaining.to_owned(),
            reset: reset.to_owned(),
        })
    }
}

/// `envoy_limit_headers`: `off` (none, the default), `on` (the
/// reference's names), or three header names separated by commas.
///
/// # Errors
/// A message naming the value.
pub fn parse_limit_headers(s: &str) -> Result<Option<LimitHeaders>, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "off" => return Ok(None),
        "on" => return Ok(Some(LimitHeaders::default())),
        _ => {}
    }
    let names: Vec<&str> = s.split(',').map(str::trim).collect();
    match names.as_slice() {
        [limit, remaining, reset] => LimitHeaders::new(limit, remaining, reset).map(Some),
        _ => Err(format!(
            "'{s}' is not off, on or three header names LIMIT,REMAINING,RESET \
             (e.g. X-RateLimit-Limit,X-RateLimit-Remaining,X-RateLimit-Reset)"
        )),
    }
}

/// An HTTP field name (RFC 9110 §5.1: a token).
fn check_field_name(name: &str) -> Result<(), String> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(format!(
            "'{name}' is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_headers_are_off_on_or_three_names() {
        assert_eq!(parse_limit_headers("off"), Ok(None));
        assert_eq!(parse_limit_headers("ON"), Ok(Some(LimitHeaders::default())));
        let custom =
            parse_limit_headers("X-RateLimit-Limit, X-RateLimit-Remaining,X-RateLimit-Reset")
                .unwrap()
                .unwrap();
        assert_eq!(custom.remaining, "X-RateLimit-Remaining");
        for bad in ["", "a,b", "a,b,c,d", "a b,c,d", "a,,c", "x:y,b,c", "a,A,c"] {
            let e = parse_limit_headers(bad).unwrap_err();
            assert!(e.contains('\''), "{bad}: {e}");
        }
    }

    #[test]
    fn the_descriptor_cap_is_from_one_to_its_maximum() {
        assert_eq!(parse_max_descriptors("1"), Ok(1));
        assert_eq!(parse_max_descriptors("65536"), Ok(65_536));
        for bad in ["0", "65537", "-1", "x", ""] {
            assert!(parse_max_descriptors(bad).is_err(), "{bad}");
        }
    }
}
