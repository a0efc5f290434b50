//! UTC ISO 8601 text for the seeds' TEXT time columns.
//!
//! `created_at` and `called_at` always carry nine fractional digits, so
//! that text order is time order and `created_at > ?` compares exactly.
//! `window_start` is `YYYY-MM-DDTHH:MM:SSZ` as seed A writes it; a window
//! that starts inside a second (sub-second windows, used by replay) gets the
//! fractional form.

use ratewarden_core::Timestamp;
use time::format_description::FormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

const SECONDS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
const NANOS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z");

const NANOS_PER_SEC: u64 = 1_000_000_000;

fn datetime(t: Timestamp) -> OffsetDateTime {
    // u64 nanoseconds end in 2554, well inside the time crate's range.
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.as_unix_nanos()))
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `t` with nine fractional digits: `2026-01-01T00:00:45.000000000Z`.
pub(crate) fn nanos(t: Timestamp) -> String {
    datetime(t).format(NANOS).unwrap_or_default()
}

/// A window start: whole seconds as `2026-01-01T00:00:00Z` (seed A), else
/// the fractional form.
pub(crate) fn window_start(t: Timestamp) -> String {
    if t.as_unix_nanos().is_multiple_of(NANOS_PER_SEC) {
        seconds(t)
    } else {
        nanos(t)
    }
}

/// `t` truncated to whole seconds: `2026-01-01T00:00:45Z`.
pub(crate) fn seconds(t: Timestamp) -> String {
    let whole = Timestamp::from_unix_nanos(t.as_unix_nanos() - t.as_unix_nanos() % NANOS_PER_SEC);
    datetime(whole).format(SECONDS).unwrap_or_default()
}

/// Parses text written by [`nanos`] (or [`seconds`]); `None` otherwise.
pub(crate) fn parse(text: &str) -> Option<Timestamp> {
    let dt = PrimitiveDateTime::parse(text, NANOS)
        .or_else(|_| PrimitiveDateTime::parse(text, SECONDS))
        .ok()?
        .assume_utc();
    u64::try_from(dt.unix_timestamp_nanos())
        .ok()
        .map(Timestamp::from_unix_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_example_window_start() {
        // docs/semantics.md §6: W = 60 at 2026-01-01T00:00:45Z gives 00:00:00Z.
        let t = Timestamp::from_unix_secs(1_767_225_600);
        assert_eq!(window_start(t), "2026-01-01T00:00:00Z");
        assert_eq!(
            nanos(Timestamp::from_unix_nanos(1_767_225_645_000_000_001)),
            "2026-01-01T00:00:45.000000001Z"
        );
    }

    #[test]
    fn text_order_is_time_order() {
        let a = nanos(Timestamp::from_unix_nanos(999_999_999));
        let b = nanos(Timestamp::from_unix_nanos(1_000_000_000));
        assert!(a < b);
    }

    #[test]
    fn parse_inverts_formatting() {
        for n in [0, 1, 1_767_225_645_123_456_789, u64::MAX] {
            let t = Timestamp::from_unix_nanos(n);
            assert_eq!(parse(&nanos(t)), Some(t));
        }
        assert_eq!(
            parse("2026-01-01T00:00:00Z"),
            Some(Timestamp::from_unix_secs(1_767_225_600))
        );
        assert_eq!(parse("yesterday"), None);
    }
}
