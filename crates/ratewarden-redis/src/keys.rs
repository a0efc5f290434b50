//! Redis key names.
//!
//! `<prefix>rw:<algorithm>:{<hex of Key::encoded()>}`, and for the fixed
//! window one key per window, `…}:<k>`. The encoding is injective and
//! hex keeps it so while keeping `{`, `}` and glob characters out of the
//! name: different keys never collide, the braces make the hex the Redis
//! Cluster hash tag (one rate-limit key's state lives in one slot), and
//! because the hex of a prefix of the encoding is a prefix of the hex, a
//! reset finds every key under a prefix with one `SCAN MATCH` pattern.

use std::fmt::Write;

use ratewarden_core::{Algorithm, Key};

/// `<prefix>rw:<algorithm>:{` + hex of `bytes`.
fn open(prefix: &str, algorithm: Algorithm, bytes: &[u8]) -> String {
    let mut name = String::with_capacity(prefix.len() + 24 + 2 * bytes.len());
    name.push_str(prefix);
    name.push_str("rw:");
    name.push_str(algorithm.as_str());
    name.push_str(":{");
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(name, "{b:02x}");
    }
    name
}

/// The one key holding `key`'s state (sliding log, sliding window, GCRA).
pub(crate) fn state(prefix: &str, algorithm: Algorithm, key: &Key) -> String {
    let mut name = open(prefix, algorithm, key.encoded());
    name.push('}');
    name
}

/// The fixed-window counter of `key` in window `k`.
pub(crate) fn fixed_window(prefix: &str, key: &Key, k: u64) -> String {
    let mut name = state(prefix, Algorithm::FixedWindow, key);
    let _ = write!(name, ":{k}");
    name
}

/// The `SCAN MATCH` pattern of every `algorithm` key whose rate-limit key
/// starts with `key_prefix`'s parts. The configured prefix holds no glob
/// characters (checked by `RedisConfig::with_key_prefix`), nor does the rest.
pub(crate) fn scan_pattern(prefix: &str, algorithm: Algorithm, key_prefix: &Key) -> String {
    let mut pattern = open(prefix, algorithm, key_prefix.encoded());
    pattern.push('*');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_hex_with_a_hash_tag() {
        let key = Key::new(["7", "/o"]).unwrap();
        assert_eq!(state("p:", Algorithm::Gcra, &key), "p:rw:gcra:{0137022f6f}");
        assert_eq!(
            fixed_window("", &key, 42),
            "rw:fixed_window:{0137022f6f}:42"
        );
        assert_eq!(
            scan_pattern("", Algorithm::SlidingLog, &Key::single("7").unwrap()),
            "rw:sliding_log:{0137*"
        );
    }

    #[test]
    fn keys_that_join_to_the_same_bytes_get_different_names() {
        let a = state("", Algorithm::Gcra, &Key::new(["ab", "c"]).unwrap());
        let b = state("", Algorithm::Gcra, &Key::new(["a", "bc"]).unwrap());
        assert_ne!(a, b);
    }
}
