//! Who the client is behind proxies: the rightmost untrusted hop of
//! `X-Forwarded-For`.
//!
//! `X-Forwarded-For` is a list that every proxy appends the address it
//! received the request from to; the client can write anything into the
//! part left of its own proxy. So the header is believed only when the
//! TCP peer is a proxy the operator named, and it is read from the right,
//! skipping trusted proxies: the first untrusted hop is the client. (The
//! leftmost hop, which tower_governor's `SmartIpKeyExtractor` and many
//! frameworks take, is whatever the client chose to send.)

use std::net::IpAddr;

use http::HeaderMap;
use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed, as CIDRs (a bare
/// address is a /32 or /128). Empty: the header is never believed and the
/// TCP peer is the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
}

impl TrustedProxies {
    /// No trusted proxy: the TCP peer is always the client.
    pub fn none() -> TrustedProxies {
        TrustedProxies::default()
    }

    /// The proxies in `nets`.
    pub fn new(nets: impl IntoIterator<Item = IpNet>) -> TrustedProxies {
        TrustedProxies {
            nets: nets.into_iter().collect(),
        }
    }

    /// The CIDRs, as given.
    pub fn nets(&self) -> &[IpNet] {
        &self.nets
    }

    /// Whether `ip` (IPv4-mapped IPv6 addresses as IPv4) is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request that arrived from `peer` with `headers`:
    /// from an untrusted peer, the peer itself (the header is ignored);
    /// from a trusted one, `X-Forwarded-For` (every field line, in order,
    /// as one list) walked from the right while the hop is trusted. The
    /// first untrusted hop is the client; when every hop is trusted, the
    /// leftmost; a hop that is not an IP address ends the walk, and the
    /// last address to its right is used. The answer is canonical
    /// (IPv4-mapped IPv6 as IPv4).
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.contains(peer) {
            return peer;
        }
        let lines: Vec<&[u8]> = headers
            .get_all("x-forwarded-for")
            .iter()
            .map(|v| v.as_bytes())
            .collect();
        let hops = lines
            .iter()
            .rev()
            .flat_map(|line| line.rsplit(|&b| b == b','))
            .map(|hop| hop.trim_ascii())
            .filter(|hop| !hop.is_empty());
        let mut client = peer;
        for hop in hops {
            match parse_ip(hop) {
                Some(ip) if self.contains(ip) => client = ip,
                Some(ip) => return ip,
                // Written by the client, not by a trusted proxy.
                None => break,
            }
        }
        client
    }
}

fn parse_ip(hop: &[u8]) -> Option<IpAddr> {
    std::str::from_utf8(hop)
        .ok()?
        .parse::<IpAddr>()
        .ok()
        .map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(lines: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in lines {
            h.append("x-forwarded-for", HeaderValue::from_static(v));
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn trusted() -> TrustedProxies {
        TrustedProxies::new(["10.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()])
    }

    #[test]
    fn the_header_is_ignored_from_an_untrusted_peer() {
        let h = headers(&["1.2.3.4"]);
        assert_eq!(trusted().client_ip(ip("192.0.2.7"), &h), ip("192.0.2.7"));
        assert_eq!(
            TrustedProxies::none().client_ip(ip("10.0.0.1"), &h),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client_across_field_lines() {
        let h = headers(&["6.6.6.6, 203.0.113.9", "10.1.1.1"]);
        assert_eq!(trusted().client_ip(ip("10.0.0.2"), &h), ip("203.0.113.9"));
    }

    #[test]
    fn every_hop_trusted_gives_the_leftmost_and_no_header_the_peer() {
        let h = headers(&["10.3.3.3, 10.2.2.2"]);
        assert_eq!(trusted().client_ip(ip("10.0.0.2"), &h), ip("10.3.3.3"));
        assert_eq!(
            trusted().client_ip(ip("10.0.0.2"), &headers(&[])),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn a_hop_that_is_no_address_ends_the_walk() {
        let h = headers(&["6.6.6.6, garbage, 10.1.1.1"]);
        assert_eq!(trusted().client_ip(ip("10.0.0.2"), &h), ip("10.1.1.1"));
        let h = headers(&["unknown"]);
        assert_eq!(trusted().client_ip(ip("10.0.0.2"), &h), ip("10.0.0.2"));
    }

    #[test]
    fn mapped_and_v6_addresses_are_canonical() {
        let h = headers(&[" ::ffff:198.51.100.1 ,"]);
        assert_eq!(trusted().client_ip(ip("::1"), &h), ip("198.51.100.1"));
        assert_eq!(
            trusted().client_ip(ip("::ffff:10.0.0.9"), &headers(&["2001:db8::1"])),
            ip("2001:db8::1")
        );
    }
}
