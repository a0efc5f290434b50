//! UTC ISO 8601 text for the seeds' TEXT time columns.
//!
//! `created_at` and `called_at` always carry nine fractional digits, so
//! that text order is time order and `created_at > ?` compares exactly.
//! `window_start` is `YYYY-MM-DDTHH:MM:SSZ` as seed A writes it; a window
//! that starts inside a second (sub-second windows, used by replay) gets the
//! fractional form.

use ratewarden_core::{Timestamp, utc};

/// `t` with nine fractional digits (`2026-01-01T00:00:45.000000000Z`),
/// whole seconds (`2026-01-01T00:00:45Z`), and the parser of both.
pub(crate) use ratewarden_core::utc::{nanos, parse, seconds};

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A window start: whole seconds as `2026-01-01T00:00:00Z` (seed A), else
/// the fractional form.
pub(crate) fn window_start(t: Timestamp) -> String {
    if t.as_unix_nanos().is_multiple_of(NANOS_PER_SEC) {
        utc::seconds(t)
    } else {
        utc::nanos(t)
    }
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

    /// The hand-written text of `ratewarden_core::utc` is the `time`
    /// crate's, both ways, across the whole range of a `Timestamp`.
    #[test]
    fn the_text_is_the_time_crates() {
        use time::format_description::FormatItem;
        use time::macros::format_description;
        use time::{OffsetDateTime, PrimitiveDateTime};
        const SECONDS: &[FormatItem<'static>] =
            format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
        const NANOS: &[FormatItem<'static>] = format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z"
        );
        let mut n = 0u64;
        let step = 7_919 * 3_600 * NANOS_PER_SEC + 123_456_789;
        loop {
            let dt = OffsetDateTime::from_unix_timestamp_nanos(i128::from(n)).unwrap();
            let t = Timestamp::from_unix_nanos(n);
            assert_eq!(nanos(t), dt.format(NANOS).unwrap());
            assert_eq!(seconds(t), dt.format(SECONDS).unwrap());
            let parsed = PrimitiveDateTime::parse(&nanos(t), NANOS).unwrap();
            assert_eq!(parsed.assume_utc().unix_timestamp_nanos(), i128::from(n));
            let Some(next) = n.checked_add(step) else {
                break;
            };
            n = next;
        }
    }
}
