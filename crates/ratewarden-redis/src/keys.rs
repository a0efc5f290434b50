//! Redis key names.
//!
//! `<prefix>rw:<algorithm>:<policy>:{<hex of Key::encoded()>}`, and for
//! the fixed window one key per window, `…}:<k>`. State belongs to
//! (policy name, algorithm, key), so two policies never share a key. The
//! policy name is written with every byte outside `[A-Za-z0-9_.-]`
//! percent-encoded (so `:`, braces and glob characters never appear in
//! it). The key encoding is injective and hex keeps it so while keeping
//! `{`, `}` and glob characters out of the name: different keys never
//! collide, the braces make the hex the Redis Cluster hash tag (one
//! rate-limit key's state lives in one slot), and because the hex of a
//! prefix of the encoding is a prefix of the hex, a reset finds every key
//! under a prefix with one `SCAN MATCH` pattern.

use ratewarden_core::{Algorithm, Key, Policy};

/// Hex digits, lower case for the key's bytes, upper case for the policy
/// name's percent-encoding (a table, not `write!`: names are built for
/// every decision).
const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";
const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex(name: &mut String, b: u8, digits: &[u8; 16]) {
    name.push(char::from(digits[usize::from(b >> 4)]));
    name.push(char::from(digits[usize::from(b & 0x0f)]));
}

/// `<prefix>rw:<algorithm>:<policy>:{` + hex of `bytes`.
fn open(prefix: &str, policy: &Policy, bytes: &[u8]) -> String {
    let mut name = String::with_capacity(prefix.len() + 32 + policy.name.len() + 2 * bytes.len());
    name.push_str(prefix);
    name.push_str("rw:");
    name.push_str(policy.algorithm.as_str());
    name.push(':');
    for b in policy.name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-') {
            name.push(char::from(b));
        } else {
            name.push('%');
            push_hex(&mut name, b, HEX_UPPER);
        }
    }
    name.push_str(":{");
    for &b in bytes {
        push_hex(&mut name, b, HEX_LOWER);
    }
    name
}

/// The one key holding `key`'s state (sliding log, sliding window, GCRA).
pub(crate) fn state(prefix: &str, policy: &Policy, key: &Key) -> String {
    let mut name = open(prefix, policy, key.encoded());
    name.push('}');
    name
}

/// The fixed-window counter of `key` in window `k`.
pub(crate) fn fixed_window(prefix: &str, policy: &Policy, key: &Key, k: u64) -> String {
    let mut name = state(prefix, policy, key);
    name.push(':');
    name.push_str(itoa::Buffer::new().format(k));
    name
}

/// The `SCAN MATCH` pattern of every key of `policy` whose rate-limit key
/// starts with `key_prefix`'s parts. The configured prefix holds no glob
/// characters (checked by `RedisConfig::with_key_prefix`), nor does the rest.
pub(crate) fn scan_pattern(prefix: &str, policy: &Policy, key_prefix: &Key) -> String {
    let mut pattern = open(prefix, policy, key_prefix.encoded());
    pattern.push('*');
    pattern
}

/// The pattern of `key`'s fixed-window counters, one per window.
pub(crate) fn windows_pattern(prefix: &str, policy: &Policy, key: &Key) -> String {
    let mut pattern = state(prefix, policy, key);
    pattern.push_str(":*");
    pattern
}

/// The part of a key name that names the rate-limit key, up to its `}`:
/// the fixed-window counters of one key share it.
pub(crate) fn counter_of(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|&b| b == b'}') {
        Some(end) => &name[..=end],
        None => name,
    }
}

/// The window index of a fixed-window counter's name (`…}:<k>`).
pub(crate) fn window_of(name: &[u8]) -> Option<u64> {
    let end = name.iter().rposition(|&b| b == b'}')?;
    let digits = name.get(end + 2..)?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The algorithm's code in the batch script.
pub(crate) fn script_code(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::FixedWindow => "fw",
        Algorithm::SlidingLog => "sl",
        Algorithm::SlidingWindow => "sw",
        Algorithm::Gcra => "gc",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, algorithm: Algorithm) -> Policy {
        let quota = ratewarden_core::Quota::new(1, std::time::Duration::from_secs(1)).unwrap();
        Policy::new(name, algorithm, quota)
    }

    #[test]
    fn names_are_hex_with_a_hash_tag() {
        let key = Key::new(["7", "/o"]).unwrap();
        let gcra = policy("api", Algorithm::Gcra);
        assert_eq!(state("p:", &gcra, &key), "p:rw:gcra:api:{0137022f6f}");
        let ping = policy("ping", Algorithm::FixedWindow);
        assert_eq!(
            fixed_window("", &ping, &key, 42),
            "rw:fixed_window:ping:{0137022f6f}:42"
        );
        assert_eq!(window_of(b"rw:fixed_window:ping:{0137022f6f}:42"), Some(42));
        assert_eq!(
            counter_of(b"rw:fixed_window:ping:{0137022f6f}:42"),
            b"rw:fixed_window:ping:{0137022f6f}"
        );
        let check = policy("check", Algorithm::SlidingLog);
        assert_eq!(
            scan_pattern("", &check, &Key::single("7").unwrap()),
            "rw:sliding_log:check:{0137*"
        );
    }

    #[test]
    fn policy_names_cannot_reach_into_the_key_or_the_pattern() {
        let odd = policy("a:{b}*?[c]%", Algorithm::Gcra);
        let key = Key::single("k").unwrap();
        assert_eq!(
            state("", &odd, &key),
            "rw:gcra:a%3A%7Bb%7D%2A%3F%5Bc%5D%25:{016b}"
        );
    }

    #[test]
    fn keys_that_join_to_the_same_bytes_get_different_names() {
        let p = policy("p", Algorithm::Gcra);
        let a = state("", &p, &Key::new(["ab", "c"]).unwrap());
        let b = state("", &p, &Key::new(["a", "bc"]).unwrap());
        assert_ne!(a, b);
    }
}
