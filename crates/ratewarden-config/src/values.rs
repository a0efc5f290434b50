//! The values a setting can take, parsed the same way from a flag, an
//! environment variable or the configuration file. Each parser returns a
//! message naming the offending value; the caller adds where it came from
//! (the flag, or `FILE:LINE:COLUMN` and the key).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use ratewarden_core::Algorithm;
use ratewarden_core::quota::MAX_COUNT;
use ratewarden_redis::RedisConfig;

use crate::types::{LimitHeaders, StoreConfig};

/// The longest window or duration any setting takes: 100 years.
pub const MAX_WINDOW_SECS: u64 = 100 * 365 * 24 * 60 * 60;

/// A whole number of 0 or more, as decimal ASCII digits.
pub fn whole_number(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{s}' is not a whole number of 0 or more"));
    }
    t.parse::<u64>().map_err(|_| format!("'{s}' is too large"))
}

/// A limit: a whole number from 0 (refuse everything) up to 2^63 − 2.
pub fn parse_limit(s: &str) -> Result<u64, String> {
    check_limit(whole_number(s)?)
}

/// [`parse_limit`]'s range check on a number.
pub fn check_limit(n: u64) -> Result<u64, String> {
    if n >= MAX_COUNT {
        return Err(format!(
            "{n} is too large; the maximum is {}",
            MAX_COUNT - 1
        ));
    }
    Ok(n)
}

/// A GCRA burst: a limit of at least 1 (a burst of 0 would make every
/// request "never").
pub fn parse_burst(s: &str) -> Result<u64, String> {
    check_burst(whole_number(s)?)
}

/// [`parse_burst`]'s range check on a number.
pub fn check_burst(n: u64) -> Result<u64, String> {
    match check_limit(n)? {
        0 => Err("a burst must be at least 1".to_owned()),
        n => Ok(n),
    }
}

/// A duration in whole seconds, at least 1 (a window of 0 is refused) and
/// at most 100 years.
pub fn parse_secs(s: &str) -> Result<u64, String> {
    check_secs(whole_number(s)?)
}

/// [`parse_secs`]'s range check on a number.
pub fn check_secs(n: u64) -> Result<u64, String> {
    match n {
        0 => Err(format!("{n} must be at least 1 second")),
        n if n > MAX_WINDOW_SECS => Err(format!(
            "{n} is longer than the maximum of {MAX_WINDOW_SECS} seconds (100 years)"
        )),
        n => Ok(n),
    }
}

/// A duration with a unit: a whole number of at least 1 followed by `ms`,
/// `s`, `m`, `h` or `d` (`500ms`, `60s`, `1h`), at most 100 years.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let digits_end = s
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    let (digits, unit) = s.split_at(digits_end);
    let unit_millis: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    if digits.is_empty() || unit_millis == 0 {
        return Err(format!(
            "'{s}' is not a whole number followed by a unit ms, s, m, h or d (e.g. 500ms, 60s, 1h)"
        ));
    }
    let too_long = || format!("'{s}' is longer than the maximum of 100 years");
    let millis = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_millis))
        .ok_or_else(too_long)?;
    match millis {
        0 => Err(format!("'{s}' must be longer than zero")),
        m if m > MAX_WINDOW_SECS * 1_000 => Err(too_long()),
        m => Ok(Duration::from_millis(m)),
    }
}

/// `fixed_window`, `sliding_log`, `sliding_window` or `gcra`.
pub fn parse_algorithm(s: &str) -> Result<Algorithm, String> {
    s.parse::<Algorithm>().map_err(|e| e.to_string())
}

/// Milliseconds from 1 to one hour.
pub fn parse_timeout_ms(s: &str) -> Result<u64, String> {
    check_timeout_ms(whole_number(s)?)
}

/// [`parse_timeout_ms`]'s range check on a number.
pub fn check_timeout_ms(n: u64) -> Result<u64, String> {
    match n {
        0 => Err(format!("{n} must be at least 1 millisecond")),
        n if n > 3_600_000 => Err(format!("{n} is longer than one hour")),
        n => Ok(n),
    }
}

/// A connection timeout in whole seconds: at least 1, at most one hour.
pub fn parse_timeout_secs(s: &str) -> Result<u64, String> {
    check_timeout_secs(whole_number(s)?)
}

/// [`parse_timeout_secs`]'s range check on a number.
pub fn check_timeout_secs(n: u64) -> Result<u64, String> {
    match n {
        0 => Err(format!("{n} must be at least 1 second")),
        n if n > 3_600 => Err(format!("{n} is longer than one hour (3600 seconds)")),
        n => Ok(n),
    }
}

/// A maximum number of open connections: at least 1.
pub fn parse_max_connections(s: &str) -> Result<usize, String> {
    check_max_connections(whole_number(s)?)
}

/// [`parse_max_connections`]'s range check on a number.
pub fn check_max_connections(n: u64) -> Result<usize, String> {
    usize::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{n} must be at least 1 connection"))
}

/// The audit log's sampling: one row per `N` allowed requests, `1` for
/// every one (the seed's behaviour), `0` for none.
pub fn parse_audit_sample(s: &str) -> Result<u64, String> {
    whole_number(s)
}

/// The memory store's bound on keys (`max_keys`): at least 1.
pub fn parse_max_keys(s: &str) -> Result<NonZeroU64, String> {
    check_max_keys(whole_number(s)?)
}

/// [`parse_max_keys`]'s range check on a number.
pub fn check_max_keys(n: u64) -> Result<NonZeroU64, String> {
    NonZeroU64::new(n).ok_or_else(|| "0 would refuse every new key: give at least 1".to_owned())
}

/// The audit log's bound on rows (`audit_max_rows`): at least 1 and at
/// most 2^63 − 1 (SQLite's largest integer).
pub fn parse_audit_max_rows(s: &str) -> Result<u64, String> {
    check_audit_max_rows(whole_number(s)?)
}

/// [`parse_audit_max_rows`]'s range check on a number.
pub fn check_audit_max_rows(n: u64) -> Result<u64, String> {
    match n {
        0 => Err(
            "0 would keep no audit row: turn the audit log off with audit_sample 0 instead"
                .to_owned(),
        ),
        n if n > i64::MAX as u64 => Err(format!("{n} is more than {}", i64::MAX)),
        n => Ok(n),
    }
}

/// The SQLite store's WAL limit in pages (`wal_autocheckpoint`): at least
/// 1 and at most 16,777,216 (64 GiB of 4 KiB pages).
pub fn parse_wal_autocheckpoint(s: &str) -> Result<u32, String> {
    check_wal_autocheckpoint(whole_number(s)?)
}

/// [`parse_wal_autocheckpoint`]'s range check on a number.
pub fn check_wal_autocheckpoint(n: u64) -> Result<u32, String> {
    match n {
        0 => Err("0 would let the WAL grow without bound: give at least 1 page".to_owned()),
        1..=16_777_216 => Ok(u32::try_from(n).unwrap_or(u32::MAX)),
        _ => Err(format!("{n} is more than 16777216 pages (64 GiB)")),
    }
}

/// A body size in bytes, at least 1.
pub fn parse_body_limit(s: &str) -> Result<usize, String> {
    check_body_limit(whole_number(s)?)
}

/// [`parse_body_limit`]'s range check on a number.
pub fn check_body_limit(n: u64) -> Result<usize, String> {
    usize::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{n} must be at least 1 byte"))
}

/// An IP address (a network of one) or a CIDR block.
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    let t = s.trim();
    t.parse::<IpNet>()
        .or_else(|_| t.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("'{s}' is neither an IP address nor a CIDR block"))
}

/// The HTTP address (`listen`, `--listen`): an IP address and a port, as
/// `127.0.0.1:8080` or `[::1]:8080` (port 0: any free port). Host names
/// are refused, not resolved, with a hint of what to write instead; so
/// are a missing, empty or out-of-range port.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    socket_addr(s, crate::defaults::LISTEN.port())
}

/// The gRPC address (`grpc_listen`, `--grpc-listen`): as [`parse_listen`],
/// its hints showing port 8081.
pub fn parse_grpc_listen(s: &str) -> Result<SocketAddr, String> {
    socket_addr(s, 8081)
}

/// `IP:PORT` or `[IPv6]:PORT`; the messages' examples use `example_port`
/// when `s` has no usable port of its own.
fn socket_addr(s: &str, example_port: u16) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let example = |ip: IpAddr, port: u16| SocketAddr::new(ip, port).to_string();
    // An address alone (`127.0.0.1`, `[::1]`, `::1`): the port is missing.
    let bracketed = s.strip_prefix('[').and_then(|rest| rest.strip_suffix(']'));
    if let Some(ip) = bracketed.map_or_else(
        || s.parse::<IpAddr>().ok(),
        |inner| inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
    ) {
        // `::1:8080` is a valid IPv6 address; its last group may be meant
        // as a port.
        let meant = s
            .rsplit_once(':')
            .filter(|_| bracketed.is_none())
            .and_then(|(ip, port)| Some((ip.parse::<Ipv6Addr>().ok()?, port.parse::<u16>().ok()?)));
        return Err(match meant {
            Some((ip, port)) => format!(
                "'{s}' has no port; an IPv6 address with a port is written in brackets, e.g. {}",
                example(IpAddr::V6(ip), port)
            ),
            None => format!(
                "'{s}' has no port; write an IP address and a port, e.g. {}",
                example(ip, example_port)
            ),
        });
    }
    // `HOST:PORT`, the host possibly in brackets.
    let (host, port) = match s.strip_prefix('[') {
        Some(rest) => match rest.split_once("]:") {
            Some((host, port)) => (host, Some(port)),
            None => (rest.trim_end_matches(']'), None),
        },
        None => match s.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (s, None),
        },
    };
    let ip = host.parse::<IpAddr>().ok();
    let port = match port {
        None => None,
        Some(p) if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) => {
            let what = if p.is_empty() {
                "has an empty port".to_owned()
            } else {
                format!("has the port '{p}', which is not a whole number")
            };
            let ip = ip.unwrap_or(IpAddr::from([127, 0, 0, 1]));
            return Err(format!(
                "'{s}' {what}; write a port from 0 to 65535, e.g. {}",
                example(ip, example_port)
            ));
        }
        Some(p) => match p.parse::<u16>() {
            Ok(port) => Some(port),
            Err(_) => {
                return Err(format!(
                    "'{s}' has the port {p}, which is out of range; ports are 0 to 65535"
                ));
            }
        },
    };
    let port = port.unwrap_or(example_port);
    if host.is_empty() {
        return Err(format!(
            "'{s}' has no IP address; use 127.0.0.1:{port} (this machine only), \
             0.0.0.0:{port} (every IPv4 interface) or [::]:{port}"
        ));
    }
    if let Some(ip) = ip {
        // Brackets around IPv4, or none around IPv6 with a port.
        return Err(format!(
            "'{s}' is not of the form IP:PORT or [IPv6]:PORT; write {}",
            example(ip, port)
        ));
    }
    if host.trim_end_matches('.').eq_ignore_ascii_case("localhost") {
        Err(format!(
            "'{s}' is not an IP address and port; use 127.0.0.1:{port} or [::1]:{port} \
             (host names are not resolved)"
        ))
    } else {
        Err(format!(
            "'{s}' is not an IP address and port (host names are not resolved); use the \
             IP address of an interface, e.g. 127.0.0.1:{port} (this machine only) or \
             0.0.0.0:{port} (every IPv4 interface)"
        ))
    }
}

/// `memory`, `sqlite:PATH` or a Redis URL (`redis://HOST[:PORT][/DB]`,
/// the port 6379 and the database 0 when left out). The message never
/// repeats a Redis URL as typed (it may hold a password).
pub fn parse_store(s: &str) -> Result<StoreConfig, String> {
    match s.split_once(':') {
        _ if s == "memory" => Ok(StoreConfig::Memory),
        Some(("sqlite", path)) if !path.is_empty() => Ok(StoreConfig::Sqlite(PathBuf::from(path))),
        Some(("redis" | "rediss" | "redis+unix", _)) => RedisConfig::from_url(s)
            .map(StoreConfig::Redis)
            .map_err(|e| e.to_string()),
        _ => Err(format!(
            "'{s}' is not a store: use memory, sqlite:PATH or redis://HOST:PORT/DB"
        )),
    }
}

/// A store setting as it may be shown in a message: a URL (`…://…`) with
/// its password redacted, anything else as given.
pub fn store_for_display(s: &str) -> String {
    if s.contains("://") {
        RedisConfig::redact(s)
    } else {
        s.to_owned()
    }
}

/// The largest `envoy_max_descriptors` accepted.
pub const MAX_MAX_DESCRIPTORS: usize = 65_536;

/// `envoy_max_descriptors`: a whole number from 1 to [`MAX_MAX_DESCRIPTORS`].
///
/// # Errors
/// A message naming the value.
pub fn parse_max_descriptors(s: &str) -> Result<usize, String> {
    check_max_descriptors(whole_number(s)?)
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

/// A policy name: 1 to 64 characters of `[A-Za-z0-9_.-]`
/// ([`ratewarden_limiter::check_policy_name`]).
pub fn check_policy_name(s: &str) -> Result<&str, String> {
    ratewarden_limiter::check_policy_name(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit() {
        for (text, d) in [
            ("500ms", Duration::from_millis(500)),
            ("60s", Duration::from_secs(60)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("7d", Duration::from_secs(7 * 86_400)),
            ("36500d", Duration::from_secs(MAX_WINDOW_SECS)),
        ] {
            assert_eq!(parse_duration(text), Ok(d), "{text}");
        }
        for bad in [
            "60", "0s", "1.5s", "-1s", "s", "", "1S", " 1s", "1us", "36501d",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains(&format!("'{bad}'")), "{bad:?}: {err}");
        }
    }

    #[test]
    fn numbers_are_checked_with_the_value_named() {
        assert_eq!(parse_limit("0"), Ok(0));
        assert!(parse_limit("-1").unwrap_err().contains("'-1'"));
        assert!(parse_limit("9223372036854775807").is_err());
        assert!(parse_burst("0").is_err());
        assert!(parse_secs("0").is_err());
        assert!(parse_timeout_ms("3600001").is_err());
        assert!(parse_body_limit("0").is_err());
        assert!(parse_net("10.0.0.0/8").is_ok() && parse_net("::1").is_ok());
        assert!(parse_net("10.0.0.0/33").is_err());
    }

    #[test]
    fn policy_names_are_short_and_plain() {
        assert!(check_policy_name("api.v1-per_user").is_ok());
        for bad in ["", "a b", "a/b", "ä", &"x".repeat(65)] {
            assert!(check_policy_name(bad).is_err(), "{bad}");
        }
    }

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
