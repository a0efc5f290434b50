//! Which client a GET /ping counts against (docs/semantics.md §6, "Key source").
//!
//! `X-Forwarded-For` is only believed when the TCP peer is a proxy the
//! operator named: anyone else can write any address into it.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use ratewarden_config::KeySource;
use ratewarden_http::TrustedProxies;

/// The key used when `X-Client-Key` is missing or empty (seed A).
pub const DEFAULT_CLIENT_KEY: &str = "127.0.0.1";

/// The key bytes for a request from `peer` with `headers`; `trusted`
/// are the proxies whose `X-Forwarded-For` is believed.
pub fn client_key(
    source: &KeySource,
    trusted: &TrustedProxies,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Vec<u8> {
    match source {
        KeySource::Header => header_key(headers),
        KeySource::PeerIp => ip_key(peer.ip()),
        KeySource::Forwarded => ip_key(trusted.client_ip(peer.ip(), headers)),
    }
}
/// All `X-Client-Key` values joined with ", " (as PHP's `getHeaderLine`);
/// [`DEFAULT_CLIENT_KEY`] when there is none or it is empty (docs/semantics.md).
fn header_key(headers: &HeaderMap) -> Vec<u8> {
    let mut key = Vec::new();
    for (i, value) in headers.get_all("x-client-key").iter().enumerate() {
        if i > 0 {
            key.extend_from_slice(b", ");
        }
        key.extend_from_slice(value.as_bytes());
    }
    if key.is_empty() {
        key.extend_from_slice(DEFAULT_CLIENT_KEY.as_bytes());
    }
    key
}

fn ip_key(ip: IpAddr) -> Vec<u8> {
    ip.to_canonical().to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn none() -> TrustedProxies {
        TrustedProxies::none()
    }

    fn ten() -> TrustedProxies {
        TrustedProxies::new(["10.0.0.0/8".parse().unwrap()])
    }

    fn peer(ip: &str) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), 40000)
    }

    #[test]
    fn a_missing_or_empty_client_key_is_the_seed_default() {
        let s = KeySource::Header;
        assert_eq!(
            client_key(&s, &none(), &headers(&[]), peer("10.0.0.1")),
            b"127.0.0.1"
        );
        assert_eq!(
            client_key(
                &s,
                &none(),
                &headers(&[("x-client-key", "")]),
                peer("10.0.0.1")
            ),
            b"127.0.0.1"
        );
        assert_eq!(
            client_key(
                &s,
                &none(),
                &headers(&[("x-client-key", "alice")]),
                peer("10.0.0.1")
            ),
            b"alice"
        );
    }

    #[test]
    fn repeated_client_key_headers_are_joined() {
        let h = headers(&[("x-client-key", "a"), ("x-client-key", "b")]);
        assert_eq!(
            client_key(&KeySource::Header, &none(), &h, peer("10.0.0.1")),
            b"a, b"
        );
    }

    #[test]
    fn forwarded_for_is_ignored_from_an_untrusted_peer() {
        let s = KeySource::Forwarded;
        let h = headers(&[("x-forwarded-for", "1.2.3.4")]);
        assert_eq!(client_key(&s, &ten(), &h, peer("192.0.2.7")), b"192.0.2.7");
        assert_eq!(
            client_key(&KeySource::PeerIp, &none(), &h, peer("192.0.2.7")),
            b"192.0.2.7"
        );
    }

    #[test]
    fn forwarded_for_takes_the_rightmost_untrusted_hop() {
        let s = KeySource::Forwarded;
        let h = headers(&[
            ("x-forwarded-for", "6.6.6.6, 203.0.113.9"),
            ("x-forwarded-for", "10.1.1.1"),
        ]);
        assert_eq!(client_key(&s, &ten(), &h, peer("10.0.0.2")), b"203.0.113.9");
        let spoofed = headers(&[("x-forwarded-for", "garbage, 10.1.1.1")]);
        assert_eq!(
            client_key(&s, &ten(), &spoofed, peer("10.0.0.2")),
            b"10.1.1.1"
        );
        assert_eq!(
            client_key(&s, &ten(), &headers(&[]), peer("10.0.0.2")),
            b"10.0.0.2"
        );
    }
}
