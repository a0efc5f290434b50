//! [`RedisConfig`]: where Redis is and how long to wait for it. Its
//! `Display` and `Debug` never show a password.

use std::fmt;
use std::time::Duration;

/// Settings of a [`RedisStore`](crate::RedisStore).
///
/// ```
/// use ratewarden_redis::RedisConfig;
/// use std::time::Duration;
///
/// let config = RedisConfig::from_url("redis://:s3cret@127.0.0.1:6379/0")?
///     .with_key_prefix("app1:")?
///     .with_timeout(Duration::from_millis(50));
/// assert_eq!(config.to_string(), "redis://:<redacted>@127.0.0.1:6379/0");
/// # Ok::<(), ratewarden_redis::RedisConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RedisConfig {
    url: String,
    key_prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
    ttl_slack: Duration,
}

/// Why a [`RedisConfig`] was refused. Messages show the URL redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedisConfigError {
    /// Not a URL the Redis client understands.
    #[error(
        "'{0}' is not a Redis URL: use redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or redis+unix:///PATH"
    )]
    InvalidUrl(String),
    /// A URL that the client would read otherwise than written, silently
    /// falling back to a default: an empty or out-of-range port, a
    /// database that is not a whole number, a query parameter or fragment
    /// it ignores, a user name without a password (never sent), spaces or
    /// control characters. The message names the part, never a password.
    #[error("'{url}' is not a valid Redis URL: {problem}")]
    Malformed {
        /// The URL, redacted.
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// `rediss://` needs TLS, which this build does not include.
    #[error("'{0}': TLS (rediss://) is not supported by this build; use redis://")]
    TlsUnsupported(String),
    /// A key prefix may only hold ASCII letters, digits and `:_.-` (no
    /// braces, which would change the Redis Cluster hash tag, and no glob
    /// characters, which would break the prefix scan of a reset).
    #[error("key prefix {0:?} may only contain ASCII letters, digits and ':', '_', '.', '-'")]
    InvalidKeyPrefix(String),
}

impl RedisConfig {
    /// Default [`RedisConfig::timeout`]: 100 ms.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);
    /// Default [`RedisConfig::connect_timeout`]: 1 s.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
    /// Default [`RedisConfig::ttl_slack`]: 1 s.
    pub const DEFAULT_TTL_SLACK: Duration = Duration::from_secs(1);

    /// A configuration for the server at `url`, with the default prefix
    /// (none), timeouts and TTL slack. The URL is
    /// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`: without `:PORT` the
    /// port is 6379, without `/DB` the database is 0; the only query
    /// parameter is `protocol` (`resp2`, `resp3`). For a Unix socket,
    /// `redis+unix:///PATH[?db=DB&user=USER&pass=PASSWORD&protocol=P]`.
    ///
    /// What the client would silently read as a default is refused
    /// instead: `redis://h:/0` (an empty port, not 6379), `redis://h:0`,
    /// `redis://h/x`, `redis://h?db=2` (the database is the path),
    /// `redis://user@h` (a password is needed for the user to be sent).
    ///
    /// # Errors
    /// [`RedisConfigError::TlsUnsupported`] for `rediss://`,
    /// [`RedisConfigError::Malformed`] for a URL the client would read
    /// otherwise than written, [`RedisConfigError::InvalidUrl`] for
    /// anything else the client cannot parse.
    pub fn from_url(url: &str) -> Result<RedisConfig, RedisConfigError> {
        let redacted = redact_url(url);
        if url.starts_with("rediss://") {
            return Err(RedisConfigError::TlsUnsupported(redacted));
        }
        let known = ["redis://", "redis+unix://", "unix://"];
        if !known.iter().any(|scheme| url.starts_with(scheme)) {
            return Err(RedisConfigError::InvalidUrl(redacted));
        }
        if let Err(problem) = check_shape(url) {
            return Err(RedisConfigError::Malformed {
                url: redacted,
                problem,
            });
        }
        redis::Client::open(url).map_err(|_| RedisConfigError::InvalidUrl(redacted))?;
        Ok(RedisConfig {
            url: url.to_owned(),
            key_prefix: String::new(),
            timeout: RedisConfig::DEFAULT_TIMEOUT,
            connect_timeout: RedisConfig::DEFAULT_CONNECT_TIMEOUT,
            ttl_slack: RedisConfig::DEFAULT_TTL_SLACK,
        })
    }

    /// The same configuration with every key name starting with `prefix`
    /// (several applications, or tests, sharing one Redis).
    ///
    /// # Errors
    /// [`RedisConfigError::InvalidKeyPrefix`] unless `prefix` is ASCII
    /// letters, digits and `:_.-` only.
    pub fn with_key_prefix(self, prefix: &str) -> Result<RedisConfig, RedisConfigError> {
        let ok = prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":_.-".contains(&b));
        if !ok {
            return Err(RedisConfigError::InvalidKeyPrefix(prefix.to_owned()));
        }
        Ok(RedisConfig {
            key_prefix: prefix.to_owned(),
            ..self
        })
    }

    /// The same configuration with `timeout` for every store call.
    pub fn with_timeout(self, timeout: Duration) -> RedisConfig {
        RedisConfig { timeout, ..self }
    }

    /// The same configuration with `timeout` for each connection attempt.
    pub fn with_connect_timeout(self, timeout: Duration) -> RedisConfig {
        RedisConfig {
            connect_timeout: timeout,
            ..self
        }
    }

    /// The same configuration with `slack` added to every key's TTL.
    pub fn with_ttl_slack(self, slack: Duration) -> RedisConfig {
        RedisConfig {
            ttl_slack: slack,
            ..self
        }
    }

    /// `url` with its password (and any `pass…` query value) replaced by
    /// `<redacted>`, for messages about a URL that may not be valid.
    pub fn redact(url: &str) -> String {
        redact_url(url)
    }

    /// The server's URL, password included: do not log it (use `Display`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What every key name starts with (default: nothing).
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// How long one store call may take, connecting included, before it
    /// fails with `StoreError::Unavailable` (default 100 ms).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How long one connection attempt may take (default 1 s).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Added to every TTL (default 1 s): the TTL counts from when Redis runs
    /// the script, by Redis's clock, while the state is needed until an
    /// instant of the callers' clocks; the slack covers the round trip and
    /// clock skew between instances. A longer TTL never changes an answer
    /// (stored state carries its window or its instants), it only keeps
    /// expired state a little longer.
    pub fn ttl_slack(&self) -> Duration {
        self.ttl_slack
    }
}

/// The URL with its password (and any `password` query value) replaced by
/// `<redacted>`.
impl fmt::Display for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact_url(&self.url))
    }
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &redact_url(&self.url))
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("ttl_slack", &self.ttl_slack)
            .finish()
    }
}

const REDACTED: &str = "<redacted>";

/// The query parameters the client reads from a `redis://` URL.
const TCP_PARAMETERS: [&str; 1] = ["protocol"];

/// The query parameters the client reads from a Unix socket URL.
const UNIX_PARAMETERS: [&str; 4] = ["db", "user", "pass", "protocol"];

/// What in `url` (one of the known schemes) the client would silently
/// read as a default or ignore. Messages never quote the user
/// information, nor a query value.
fn check_shape(url: &str) -> Result<(), String> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it contains spaces or control characters".to_owned());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("it has no scheme".to_owned());
    };
    let (rest, fragment) = rest
        .split_once('#')
        .map_or((rest, None), |(r, f)| (r, Some(f)));
    if fragment.is_some() {
        return Err("a fragment ('#…') is not read; remove it".to_owned());
    }
    let (rest, query) = rest
        .split_once('?')
        .map_or((rest, None), |(r, q)| (r, Some(q)));
    let unix = scheme != "redis";
    let known: &[&str] = if unix {
        &UNIX_PARAMETERS
    } else {
        &TCP_PARAMETERS
    };
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !known.contains(&name) {
            let hint = match name {
                "db" if !unix => "; the database is the path: redis://HOST:PORT/DB",
                n if n.contains("pass") && !unix => {
                    "; the password goes before the host: redis://:PASSWORD@HOST:PORT/DB"
                }
                _ => "",
            };
            let shown = if name.is_empty() { pair } else { name };
            return Err(format!(
                "the query parameter '{}' is not read (only {}){hint}",
                shown.escape_default(),
                known.join(", ")
            ));
        }
        if name == "db" && !is_whole_number(value) {
            return Err(format!(
                "the database '{}' is not a whole number from 0",
                value.escape_default()
            ));
        }
    }
    if unix {
        // The path is the socket; the client checks it.
        return Ok(());
    }
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host_port = match authority.rsplit_once('@') {
        Some((userinfo, host_port)) => {
            match userinfo.split_once(':') {
                None => {
                    return Err("it has a user name but no password, and a user is only \
                         sent with a password: write redis://USER:PASSWORD@HOST or \
                         redis://:PASSWORD@HOST"
                        .to_owned());
                }
                Some((_, "")) => return Err("its password is empty".to_owned()),
                Some(_) => {}
            }
            host_port
        }
        None => authority,
    };
    let (host, port) = match host_port.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, after)) => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err("the text after an IPv6 address must be ':PORT'".to_owned()),
            },
            None => return Err("an IPv6 address has no closing ']'".to_owned()),
        },
        None => host_port
            .split_once(':')
            .map_or((host_port, None), |(h, p)| (h, Some(p))),
    };
    if host.is_empty() {
        return Err("the host is missing: redis://HOST[:PORT][/DB]".to_owned());
    }
    match port {
        None => {}
        Some("") => {
            return Err(
                "the port after ':' is empty; write one (e.g. :6379), or leave \
                 out ':' for the default port 6379"
                    .to_owned(),
            );
        }
        Some(p) if !is_whole_number(p) => {
            return Err(format!(
                "the port '{}' is not a whole number from 1 to 65535",
                p.escape_default()
            ));
        }
        Some(p) => match p.parse::<u16>() {
            Ok(1..) => {}
            _ => {
                return Err(format!(
                    "the port {p} is out of range; ports are 1 to 65535"
                ));
            }
        },
    }
    match path.strip_prefix('/') {
        None | Some("") => Ok(()),
        Some(db) if is_whole_number(db) && db.parse::<i64>().is_ok() => Ok(()),
        Some(db) => Err(format!(
            "the database '{}' is not a whole number from 0 (redis://HOST:PORT/DB)",
            db.escape_default()
        )),
    }
}

/// One or more ASCII digits.
fn is_whole_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `redis://user:pw@host/0` → `redis://user:<redacted>@host/0`; userinfo
/// without a colon is redacted whole (people put passwords there too);
/// query values of keys containing `pass` are redacted.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return REDACTED.to_owned();
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((a, q)) => (a, Some(q)),
        None => (rest, None),
    };
    let authority_end = before_query.find('/').unwrap_or(before_query.len());
    let (authority, path) = before_query.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:{REDACTED}@{host}"),
            None => format!("{REDACTED}@{host}"),
        },
        None => authority.to_owned(),
    };
    let mut out = format!("{scheme}://{authority}{path}");
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if k.to_ascii_lowercase().contains("pass") => {
                    format!("{k}={REDACTED}")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_appear_in_display_debug_or_errors() {
        for url in [
            "redis://:hunter2@127.0.0.1:6379/0",
            "redis://alice:hunter2@127.0.0.1:6379/0",
            "redis+unix:///tmp/redis.sock?pass=hunter2",
        ] {
            let config = RedisConfig::from_url(url).unwrap();
            assert!(!config.to_string().contains("hunter2"), "{config}");
            assert!(!format!("{config:?}").contains("hunter2"), "{config:?}");
            assert!(config.to_string().contains(REDACTED), "{config}");
        }
        let tls = RedisConfig::from_url("rediss://:hunter2@h:6380/0").unwrap_err();
        assert!(!tls.to_string().contains("hunter2"), "{tls}");
        for bad in [
            "redis://:hunter2@h:notaport/0",
            "redis://:hunter2@h:/0",
            "redis://hunter2@127.0.0.1:6379/0",
            "redis://127.0.0.1:6379/0?password=hunter2",
            "redis://:hunter2@h:6379/x",
        ] {
            let err = RedisConfig::from_url(bad).unwrap_err().to_string();
            assert!(!err.contains("hunter2"), "{err}");
            assert!(err.contains(REDACTED), "{err}");
        }
    }

    #[test]
    fn urls_the_client_would_read_as_a_default_are_refused_naming_the_part() {
        for (url, problem) in [
            ("redis://127.0.0.1:/0", "the port after ':' is empty"),
            ("redis://127.0.0.1:", "the port after ':' is empty"),
            ("redis://[::1]:/0", "the port after ':' is empty"),
            ("redis://127.0.0.1:0/0", "the port 0 is out of range"),
            (
                "redis://127.0.0.1:65536/0",
                "the port 65536 is out of range",
            ),
            (
                "redis://127.0.0.1:99999999999/0",
                "the port 99999999999 is out of range",
            ),
            (
                "redis://127.0.0.1:+80/0",
                "the port '+80' is not a whole number",
            ),
            (
                "redis://127.0.0.1:6379/x",
                "the database 'x' is not a whole number",
            ),
            ("redis://127.0.0.1:6379/-1", "the database '-1' is not"),
            ("redis://127.0.0.1:6379//0", "the database '/0' is not"),
            ("redis://127.0.0.1:6379/0/", "the database '0/' is not"),
            (
                "redis://127.0.0.1:6379?db=2",
                "the query parameter 'db' is not read",
            ),
            (
                "redis://127.0.0.1/0?timeout=1",
                "the query parameter 'timeout'",
            ),
            ("redis://127.0.0.1/0#x", "a fragment"),
            ("redis://127.0.0.1/0 ", "spaces or control characters"),
            ("redis://127.0.0.1:63\n79/0", "spaces or control characters"),
            ("redis://user@127.0.0.1/0", "a user name but no password"),
            ("redis://user:@127.0.0.1/0", "its password is empty"),
            ("redis://:6379/0", "the host is missing"),
            ("redis+unix:///tmp/r.sock?db=x", "the database 'x'"),
        ] {
            let err = RedisConfig::from_url(url).unwrap_err();
            assert!(
                matches!(err, RedisConfigError::Malformed { .. }),
                "{url:?}: {err:?}"
            );
            let message = err.to_string();
            assert!(message.contains(problem), "{url:?}: {message}");
            assert!(message.contains("is not a valid Redis URL"), "{message}");
        }
    }

    #[test]
    fn a_url_without_a_port_means_6379_and_without_a_database_means_0() {
        for url in [
            "redis://127.0.0.1/0",
            "redis://127.0.0.1",
            "redis://127.0.0.1/",
            "redis://localhost:6379/15",
            "redis://[::1]:6380/1",
            "redis://[::1]/1",
            "redis://:pw@127.0.0.1/0?protocol=resp3",
            "redis://user:pw@127.0.0.1:6379/0",
            "redis+unix:///tmp/r.sock?db=2&pass=pw",
        ] {
            assert!(RedisConfig::from_url(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn a_url_without_secrets_shows_as_is() {
        let config = RedisConfig::from_url("redis://127.0.0.1:6379/2").unwrap();
        assert_eq!(config.to_string(), "redis://127.0.0.1:6379/2");
    }

    #[test]
    fn non_redis_urls_and_odd_prefixes_are_refused() {
        assert!(matches!(
            RedisConfig::from_url("http://127.0.0.1/"),
            Err(RedisConfigError::InvalidUrl(_))
        ));
        assert!(matches!(
            RedisConfig::from_url("rediss://127.0.0.1/"),
            Err(RedisConfigError::TlsUnsupported(_))
        ));
        let config = RedisConfig::from_url("redis://127.0.0.1/").unwrap();
        for bad in ["{x}", "a*", "a b", "é"] {
            assert!(config.clone().with_key_prefix(bad).is_err(), "{bad}");
        }
        assert!(config.with_key_prefix("app-1:test_2.x").is_ok());
    }
}
