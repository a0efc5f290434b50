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

    /// A configuration for the server at `url` (`redis://HOST:PORT/DB`,
    /// with optional `USER:PASSWORD@`; `redis+unix:///PATH` for a Unix
    /// socket), with the default prefix (none), timeouts and TTL slack.
    ///
    /// # Errors
    /// [`RedisConfigError::TlsUnsupported`] for `rediss://`,
    /// [`RedisConfigError::InvalidUrl`] for anything the client cannot parse.
    pub fn from_url(url: &str) -> Result<RedisConfig, RedisConfigError> {
        let redacted = redact_url(url);
        if url.starts_with("rediss://") {
            return Err(RedisConfigError::TlsUnsupported(redacted));
        }
        let known = ["redis://", "redis+unix://", "unix://"];
        if !known.iter().any(|scheme| url.starts_with(scheme)) {
            return Err(RedisConfigError::InvalidUrl(redacted));
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
            "redis://hunter2@127.0.0.1:6379/0",
            "redis://127.0.0.1:6379/0?password=hunter2",
        ] {
            let config = RedisConfig::from_url(url).unwrap();
            assert!(!config.to_string().contains("hunter2"), "{config}");
            assert!(!format!("{config:?}").contains("hunter2"), "{config:?}");
            assert!(config.to_string().contains(REDACTED), "{config}");
        }
        let tls = RedisConfig::from_url("rediss://:hunter2@h:6380/0").unwrap_err();
        assert!(!tls.to_string().contains("hunter2"), "{tls}");
        let bad = RedisConfig::from_url("redis://:hunter2@h:notaport/0").unwrap_err();
        assert!(!bad.to_string().contains("hunter2"), "{bad}");
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
