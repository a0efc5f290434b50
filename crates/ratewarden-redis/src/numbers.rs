//! Numbers as Redis and the Lua scripts take them: decimal strings, so
//! nothing passes through a Lua double (exact only to 2^53).

use std::time::Duration;

use ratewarden_core::StoreError;

/// Nanoseconds as 20 zero-padded digits (`u64::MAX` has 20), so that the
/// string order of sliding-log members is time order.
pub(crate) fn pad20(nanos: u64) -> String {
    format!("{nanos:020}")
}

/// The TTL in milliseconds for state needed `needed_nanos` from now:
/// rounded up, at least 1 ms, plus `slack`.
pub(crate) fn ttl_ms(needed_nanos: u128, slack: Duration) -> String {
    let ms = needed_nanos.div_ceil(1_000_000).max(1);
    decimal(ms + slack_ms(slack))
}

/// `n` in decimal (itoa: these are built for every decision).
pub(crate) fn decimal(n: impl itoa::Integer) -> String {
    itoa::Buffer::new().format(n).to_owned()
}

/// `slack` in whole milliseconds, rounded up.
pub(crate) fn slack_ms(slack: Duration) -> u128 {
    slack.as_nanos().div_ceil(1_000_000)
}

/// A stored decimal that must be a `u64`.
pub(crate) fn parse_u64(what: &str, text: &str) -> Result<u64, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Failed(format!("Redis holds a corrupt {what}: {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_round_up_and_never_reach_zero() {
        assert_eq!(ttl_ms(1, Duration::ZERO), "1");
        assert_eq!(ttl_ms(0, Duration::ZERO), "1");
        assert_eq!(ttl_ms(1_000_000, Duration::ZERO), "1");
        assert_eq!(ttl_ms(1_000_001, Duration::ZERO), "2");
        assert_eq!(ttl_ms(1_000_001, Duration::from_secs(1)), "1002");
        assert_eq!(pad20(5), "00000000000000000005");
        assert_eq!(pad20(u64::MAX).len(), 20);
    }
}
