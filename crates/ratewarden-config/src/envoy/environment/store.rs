//! The reference's Redis variables as a `redis://` or `redis+unix://`
//! store, and its Go durations.

use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use ratewarden_redis::RedisConfig;

use super::{Environment, Own, Vars};
use crate::types::StoreConfig;
use crate::values::check_timeout_ms;

/// The reference's `REDIS_URL` default (with `REDIS_SOCKET_TYPE` `unix`).
pub const REFERENCE_REDIS_SOCKET: &str = "/var/run/nutcracker/ratelimit.sock";

impl Environment {
    /// `BACKEND_TYPE`, `REDIS_SOCKET_TYPE`, `REDIS_URL`, `REDIS_AUTH`,
    /// `REDIS_TYPE`, `REDIS_TLS`, `CACHE_KEY_PREFIX`: the store;
    /// `REDIS_TIMEOUT`: the store's call timeout.
    pub(super) fn store(&mut self, vars: &mut Vars<'_>) {
        let mut shown = Vec::new();
        let mut ok = true;
        if let Some(backend) = vars.value("BACKEND_TYPE") {
            if backend.trim().eq_ignore_ascii_case("redis") {
                shown.push(format!("BACKEND_TYPE={backend}"));
            } else {
                let why = if backend.trim().eq_ignore_ascii_case("memcache") {
                    "ratewarden has no memcache store; use Redis (REDIS_URL) or one of \
                     ratewarden's stores (--store memory|sqlite:PATH|redis://…)"
                } else {
                    "the reference knows redis and memcache, and ratewarden only redis"
                };
                vars.refuse("BACKEND_TYPE", &backend, why);
                ok = false;
            }
        }
        if let Some(kind) = vars.value("REDIS_TYPE") {
            if kind.trim().eq_ignore_ascii_case("single") {
                shown.push(format!("REDIS_TYPE={kind}"));
            } else {
                vars.refuse(
                    "REDIS_TYPE",
                    &kind,
                    "ratewarden's Redis store talks to one server (SINGLE); it has no \
                     Sentinel or Cluster client",
                );
                ok = false;
            }
        }
        let socket = vars.value("REDIS_SOCKET_TYPE");
        let unix = match socket.as_deref().map(str::trim) {
            None => true,
            Some(s) if s.eq_ignore_ascii_case("unix") => true,
            Some(s) if s.eq_ignore_ascii_case("tcp") => false,
            Some(other) => {
                let other = other.to_owned();
                vars.error("REDIS_SOCKET_TYPE", &other, "expected tcp or unix");
                ok = false;
                false
            }
        };
        if let Some(s) = &socket {
            shown.push(format!("REDIS_SOCKET_TYPE={s}"));
        }
        let url = vars.value("REDIS_URL");
        let auth = vars.value("REDIS_AUTH");
        match &url {
            Some(u) => shown.push(format!("REDIS_URL={}", shown_url(u))),
            None => shown.push(format!(
                "REDIS_URL unset (the reference's default, {REFERENCE_REDIS_SOCKET})"
            )),
        }
        if auth.is_some() {
            shown.push("REDIS_AUTH=<redacted>".into());
        }
        if vars.boolean("REDIS_TLS") == Some(false) {
            shown.push("REDIS_TLS=false".into());
        }
        let prefix = vars.value("CACHE_KEY_PREFIX");
        if let Some(p) = &prefix {
            shown.push(format!("CACHE_KEY_PREFIX={p}"));
        }
        if !ok {
            return;
        }
        let url = url.unwrap_or_else(|| REFERENCE_REDIS_SOCKET.to_owned());
        let built = redis_url(url.trim(), unix, auth.as_deref())
            .and_then(|u| RedisConfig::from_url(&u).map_err(|e| e.to_string()));
        let config = match built {
            Ok(config) => config,
            Err(why) => {
                vars.error("REDIS_URL", &shown_url(&url), why);
                return;
            }
        };
        let config = match prefix {
            Some(p) => match config.with_key_prefix(&p) {
                Ok(config) => config,
                Err(e) => {
                    vars.error("CACHE_KEY_PREFIX", &p, e);
                    return;
                }
            },
            None => config,
        };
        let prefix_note = if config.key_prefix().is_empty() {
            String::new()
        } else {
            format!(", keys prefixed {:?}", config.key_prefix())
        };
        self.read_into(
            shown,
            format!("store = {config}{prefix_note}"),
            Own::Setting(|o| o.store.is_some() || o.db.is_some()),
        );
        self.overrides.store = Some(StoreConfig::Redis(config));
        if let Some(text) = vars.value("REDIS_TIMEOUT") {
            match go_duration(text.trim())
                .and_then(|d| check_timeout_ms(ceil_millis(d)).map_err(|e| format!("{e} ({d:?})")))
            {
                Ok(ms) => {
                    self.read_into(
                        vec![format!("REDIS_TIMEOUT={text}")],
                        format!("store_timeout_ms = {ms}"),
                        Own::Setting(|o| o.store_timeout_ms.is_some()),
                    );
                    self.overrides.store_timeout_ms = Some(ms);
                }
                Err(why) => vars.error("REDIS_TIMEOUT", &text, why),
            }
        }
        if let Some(v) = vars.boolean("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION") {
            self.read_into(
                vec![format!("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION={v}")],
                "agrees: GET /healthcheck and gRPC health always follow whether the store \
                 answers"
                    .into(),
                Own::Nothing,
            );
        }
        if let Some(v) = vars.value("REDIS_SENTINEL_AUTH") {
            let _ = v;
            self.ignore(
                "REDIS_SENTINEL_AUTH=<redacted>".into(),
                "only read with REDIS_TYPE=sentinel",
                false,
            );
        }
        match vars.boolean("REDIS_PERSECOND") {
            Some(true) => self.ignore(
                "REDIS_PERSECOND=true".into(),
                "per-second limits are kept in REDIS_URL's store with the others (the \
                 decisions are the same)",
                true,
            ),
            Some(false) => self.ignore(
                "REDIS_PERSECOND=false".into(),
                "no second Redis for per-second limits",
                false,
            ),
            None => {}
        }
    }
}

/// `REDIS_URL` as it may be shown: a URL with its password redacted.
fn shown_url(url: &str) -> String {
    if url.contains("://") {
        RedisConfig::redact(url)
    } else {
        url.to_owned()
    }
}

/// What a part of a URL keeps unencoded: RFC 3986's unreserved characters.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A path in a URL: unreserved characters and `/` kept.
const PATH: &AsciiSet = &UNRESERVED.remove(b'/');

/// The `redis://` or `redis+unix://` URL of the reference's `REDIS_URL`
/// (`HOST:PORT` over TCP, a socket path over Unix), with `REDIS_AUTH`
/// (`PASSWORD` or `USER:PASSWORD`, split at the first `:` as the
/// reference does). A URL with a scheme is taken as ratewarden's own.
fn redis_url(url: &str, unix: bool, auth: Option<&str>) -> Result<String, String> {
    if url.contains("://") {
        if auth.is_some() {
            return Err(
                "a URL with a scheme is read as ratewarden's own, with its password \
                        in it (redis://:PASSWORD@HOST:PORT); REDIS_AUTH applies to the \
                        reference's HOST:PORT form only"
                    .into(),
            );
        }
        return Ok(url.to_owned());
    }
    if url.contains(',') {
        return Err(
            "a list of servers is for REDIS_TYPE sentinel or cluster, which \
                    ratewarden does not have"
                .into(),
        );
    }
    let (user, pass) = match auth {
        None => (None, None),
        Some(a) => match a.split_once(':') {
            Some((user, pass)) => (Some(user), Some(pass)),
            None => (None, Some(a)),
        },
    };
    let enc = |s: &str| utf8_percent_encode(s, UNRESERVED).to_string();
    if unix {
        if !url.starts_with('/') {
            return Err(
                "with REDIS_SOCKET_TYPE unix (the reference's default) REDIS_URL is \
                        the socket's absolute path; for HOST:PORT set REDIS_SOCKET_TYPE=tcp"
                    .into(),
            );
        }
        let mut query = Vec::new();
        if let Some(user) = user.filter(|u| !u.is_empty()) {
            query.push(format!("user={}", enc(user)));
        }
        if let Some(pass) = pass {
            query.push(format!("pass={}", enc(pass)));
        }
        let path = utf8_percent_encode(url, PATH);
        return Ok(if query.is_empty() {
            format!("redis+unix://{path}")
        } else {
            format!("redis+unix://{path}?{}", query.join("&"))
        });
    }
    if url.starts_with('/') {
        return Err(
            "with REDIS_SOCKET_TYPE tcp REDIS_URL is HOST:PORT; for a socket path \
                    set REDIS_SOCKET_TYPE=unix"
                .into(),
        );
    }
    let userinfo = match (user, pass) {
        (_, None) => String::new(),
        (Some(user), Some(pass)) => format!("{}:{}@", enc(user), enc(pass)),
        (None, Some(pass)) => format!(":{}@", enc(pass)),
    };
    Ok(format!("redis://{userinfo}{url}"))
}

/// `d` in whole milliseconds, rounded up.
fn ceil_millis(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// A duration as Go's `time.ParseDuration` reads it: decimal numbers,
/// each with an optional fraction and a unit (`ns`, `us`, `µs`, `ms`,
/// `s`, `m`, `h`), one after another (`1m30s`, `1.5s`, `300ms`), or `0`.
///
/// # Errors
/// A message showing the expected form.
pub fn go_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "'{text}' is not a duration such as 10s, 500ms or 1m30s (units ns, us, ms, s, m, h)"
        )
    };
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = text;
    let mut total_nanos: u128 = 0;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(bad)?;
        let (number, after) = rest.split_at(number_end);
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(bad());
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad())?
        };
        let mut part = whole.checked_mul(unit_nanos).ok_or_else(bad)?;
        let mut scale = unit_nanos;
        for digit in fraction.bytes() {
            scale /= 10;
            part += u128::from(digit - b'0') * scale;
        }
        total_nanos = total_nanos.checked_add(part).ok_or_else(bad)?;
        rest = next;
    }
    let nanos = u64::try_from(total_nanos).map_err(|_| bad())?;
    Ok(Duration::from_nanos(nanos))
}
