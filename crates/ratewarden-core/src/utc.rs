//! UTC ISO 8601 text of a [`Timestamp`], as the seeds' SQLite columns and
//! JSON bodies write it: `2026-01-01T00:00:45Z` (whole seconds) and
//! `2026-01-01T00:00:45.000000001Z` (nine fractional digits, so that text
//! order is time order).
//!
//! Written by hand rather than with a date library because every allowed
//! request formats one or two of these on the hot path: the days-to-date
//! step is Howard Hinnant's `civil_from_days` (and its inverse for
//! parsing), exact for the proleptic Gregorian calendar; a `Timestamp`
//! (u64 nanoseconds) ends in the year 2554, so years always have four
//! digits. The tests compare both directions with the `time` crate.

use crate::Timestamp;

const NANOS_PER_SEC: u64 = 1_000_000_000;
const SECS_PER_DAY: u64 = 86_400;
/// Days from 0000-03-01 to 1970-01-01.
const EPOCH_SHIFT: u64 = 719_468;

/// `t` truncated to whole seconds: `2026-01-01T00:00:45Z`.
pub fn seconds(t: Timestamp) -> String {
    let mut out = String::with_capacity(20);
    push_datetime(&mut out, t.as_unix_nanos() / NANOS_PER_SEC);
    out.push('Z');
    out
}

/// `t` with nine fractional digits: `2026-01-01T00:00:45.000000001Z`.
pub fn nanos(t: Timestamp) -> String {
    let n = t.as_unix_nanos();
    let mut out = String::with_capacity(30);
    push_datetime(&mut out, n / NANOS_PER_SEC);
    out.push('.');
    push_digits(&mut out, n % NANOS_PER_SEC, 9);
    out.push('Z');
    out
}

/// Parses the text of [`nanos`] or [`seconds`] (exactly those forms, with
/// a valid calendar date); `None` for anything else or a time outside a
/// `Timestamp`'s range.
pub fn parse(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    let (fraction, rest) = match b.len() {
        20 => (0, &b[19..]),
        30 if b[19] == b'.' => (number(&b[20..29])?, &b[29..]),
        _ => return None,
    };
    if rest != b"Z" || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (number(&b[0..4])?, number(&b[5..7])?, number(&b[8..10])?);
    let (hour, minute, second) = (
        number(&b[11..13])?,
        number(&b[14..16])?,
        number(&b[17..19])?,
    );
    if year < 1970 || !(1..=12).contains(&month) || day == 0 || day > days_in(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * SECS_PER_DAY + hour * 3600 + minute * 60 + second;
    secs.checked_mul(NANOS_PER_SEC)?
        .checked_add(fraction)
        .map(Timestamp::from_unix_nanos)
}

/// `YYYY-MM-DDTHH:MM:SS` of `secs` since the epoch.
fn push_datetime(out: &mut String, secs: u64) {
    let (year, month, day) = civil_from_days(secs / SECS_PER_DAY);
    let of_day = secs % SECS_PER_DAY;
    push_digits(out, year, 4);
    out.push('-');
    push_digits(out, month, 2);
    out.push('-');
    push_digits(out, day, 2);
    out.push('T');
    push_digits(out, of_day / 3600, 2);
    out.push(':');
    push_digits(out, of_day / 60 % 60, 2);
    out.push(':');
    push_digits(out, of_day % 60, 2);
}

/// `value` as exactly `width` decimal digits (zero-padded; `value` has at
/// most `width` digits).
fn push_digits(out: &mut String, value: u64, width: u32) {
    let mut divisor = 10u64.pow(width - 1);
    while divisor > 0 {
        out.push(char::from(b'0' + (value / divisor % 10) as u8));
        divisor /= 10;
    }
}

/// ASCII digits only.
fn number(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
    })
}

/// (year, month 1–12, day 1–31) of `days` since 1970-01-01.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + EPOCH_SHIFT;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 of a date on or after it.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let (era, yoe) = (y / 400, y % 400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - EPOCH_SHIFT
}

fn days_in(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_example() {
        let t = Timestamp::from_unix_secs(1_767_225_645);
        assert_eq!(seconds(t), "2026-01-01T00:00:45Z");
        assert_eq!(
            nanos(Timestamp::from_unix_nanos(1_767_225_645_000_000_001)),
            "2026-01-01T00:00:45.000000001Z"
        );
        assert_eq!(
            seconds(Timestamp::from_unix_nanos(0)),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            nanos(Timestamp::from_unix_nanos(u64::MAX)),
            "2554-07-21T23:34:33.709551615Z"
        );
    }

    #[test]
    fn leap_days_and_month_ends() {
        // 2024-02-29, 2100-03-01 (2100 is no leap year), 2000-02-29.
        assert_eq!(
            seconds(Timestamp::from_unix_secs(1_709_164_800)),
            "2024-02-29T00:00:00Z"
        );
        assert_eq!(
            seconds(Timestamp::from_unix_secs(4_107_542_400)),
            "2100-03-01T00:00:00Z"
        );
        assert_eq!(
            seconds(Timestamp::from_unix_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(parse("2100-02-29T00:00:00Z"), None);
        assert_eq!(
            parse("2024-02-29T00:00:00Z"),
            Some(Timestamp::from_unix_secs(1_709_164_800))
        );
    }

    #[test]
    fn parse_refuses_other_forms() {
        for text in [
            "yesterday",
            "2026-01-01T00:00:00",
            "2026-01-01 00:00:00Z",
            "2026-01-01T00:00:00.000Z",
            "2026-13-01T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "1969-12-31T23:59:59Z",
            "2554-07-21T23:34:34Z",
            "2026-01-01T00:00:0+Z",
            "2026-01-01T00:00:00.00000000+Z",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn parse_inverts_formatting_day_by_day() {
        // Every day from 1970 to 2554, at a time of day that moves.
        let mut n = 0u64;
        while let Some(next) = n.checked_add(86_400 * NANOS_PER_SEC + 3_723_000_000_017) {
            let t = Timestamp::from_unix_nanos(n);
            assert_eq!(parse(&nanos(t)), Some(t), "{}", nanos(t));
            let whole = Timestamp::from_unix_secs(n / NANOS_PER_SEC);
            assert_eq!(parse(&seconds(t)), Some(whole));
            n = next;
        }
    }
}
