//! One line of a trace: `<unix_ms> <key> [<cost>]`, parsed in place.

use std::num::NonZeroU64;

use ratewarden_core::KeyError;
use ratewarden_core::algorithm::gcra::MAX_TAT;

use crate::quote::{Cut, quote};

/// The latest time a trace may use, in milliseconds since the epoch
/// (2262-04-11T23:47:16.854Z): the engine's instants are exact only up to
/// `i64::MAX` nanoseconds, where GCRA's stored instant saturates
/// ([`MAX_TAT`]) and the SQLite and Redis
/// stores' signed 64-bit integers end. A later time would be decided
/// wrongly (GCRA would allow every request), so it is refused like any
/// other malformed line.
pub const MAX_UNIX_MS: u64 = MAX_TAT / 1_000_000;

/// [`MAX_UNIX_MS`]'s date, for error messages.
pub const MAX_DATE: &str = "2262-04-11";

/// The longest line a trace may have, in bytes, its newline not counted.
/// A request needs at most a time and a cost of 20 digits each and a key
/// of [`Key::MAX_BYTES`](ratewarden_core::Key::MAX_BYTES) (4,096) bytes;
/// a longer line, a comment too, is refused without being read whole, so
/// the memory a replay needs stays bounded whatever its input.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// One request of the trace, borrowing the line it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The request time, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// The key's bytes.
    pub key: &'a [u8],
    /// The units it costs.
    pub cost: NonZeroU64,
}

/// What is wrong with one line of the trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Not two or three fields.
    #[error("expected '<unix_ms> <key> [<cost>]', found '{}'", Cut(.0))]
    Fields(Vec<u8>),
    /// The time is not a whole number of milliseconds.
    #[error("time '{}' is not a whole number of milliseconds since the epoch", Cut(.0))]
    Time(Vec<u8>),
    /// The time is past [`MAX_UNIX_MS`] (its digits, however many).
    #[error("time {} is after the largest supported time {MAX_UNIX_MS} ({MAX_DATE})", Cut(.0))]
    TimeTooLate(Vec<u8>),
    /// The cost is not a whole number of at least 1.
    #[error("cost '{}' is not a whole number of at least 1", Cut(.0))]
    Cost(Vec<u8>),
    /// The cost's digits are past `u64::MAX`.
    #[error("cost '{}' is too large (at most {})", Cut(.0), u64::MAX)]
    CostTooLarge(Vec<u8>),
    /// The key is too long.
    #[error("{error} ('{}')", Cut(.text))]
    Key {
        /// The key's first bytes.
        text: Vec<u8>,
        /// Why it was refused.
        error: KeyError,
    },
    /// The line is longer than [`MAX_LINE_BYTES`].
    #[error("the line is longer than {MAX_LINE_BYTES} bytes ('{}')", Cut(.0))]
    TooLong(Vec<u8>),
    /// Times must not decrease.
    #[error("time {time} is before the previous {previous}")]
    Backwards {
        /// This line's time.
        time: u64,
        /// The latest time so far.
        previous: u64,
    },
}

/// Parses one line of a trace, with or without its newline: `Ok(None)`
/// for a blank or comment line. Takes any bytes (a key need not be
/// UTF-8); a malformed line is an error, never a panic.
///
/// It checks the line alone: that times do not decrease, that the key
/// fits a [`Key`](ratewarden_core::Key) and that the line is at most
/// [`MAX_LINE_BYTES`] long are checked by the replay, which has the
/// lines before it.
///
/// ```
/// use ratewarden_replay::parse_line;
///
/// let request = parse_line(b"1700000000000 alice 3\n").unwrap().unwrap();
/// assert_eq!(request.unix_ms, 1_700_000_000_000);
/// assert_eq!((request.key, request.cost.get()), (&b"alice"[..], 3));
/// assert_eq!(parse_line(b"# recorded on the gateway\n"), Ok(None));
/// assert!(parse_line(b"1700000000000 alice zero").is_err());
/// ```
///
/// # Errors
/// [`LineError`] for a malformed line (never [`LineError::Backwards`],
/// [`LineError::Key`] or [`LineError::TooLong`]: those need context).
pub fn parse_line(line: &[u8]) -> Result<Option<Request<'_>>, LineError> {
    if let Some(request) = parse_plain(line) {
        return Ok(Some(request));
    }
    let mut rest = line;
    let Some(time) = next_field(&mut rest) else {
        return Ok(None);
    };
    if time.first() == Some(&b'#') {
        return Ok(None);
    }
    let (Some(key), cost, None) = (
        next_field(&mut rest),
        next_field(&mut rest),
        next_field(&mut rest),
    ) else {
        return Err(LineError::Fields(quote(trim_end(line))));
    };
    // Digits that do not fit are too large, not malformed.
    let unix_ms = match parse_u64(time) {
        Some(ms) if ms <= MAX_UNIX_MS => ms,
        _ if all_digits(time) => return Err(LineError::TimeTooLate(quote(time))),
        _ => return Err(LineError::Time(quote(time))),
    };
    let cost = match cost {
        None => NonZeroU64::MIN,
        Some(text) => match parse_u64(text).map(NonZeroU64::new) {
            Some(Some(cost)) => cost,
            None if all_digits(text) => return Err(LineError::CostTooLarge(quote(text))),
            _ => return Err(LineError::Cost(quote(text))),
        },
    };
    Ok(Some(Request { unix_ms, key, cost }))
}

/// The common line, `<digits> <key>[ <digits>]` with single spaces and an
/// optional `\n`, in one pass; `None` sends anything else (and every
/// error) to [`parse_line`]'s general path, which decides the same way.
fn parse_plain(line: &[u8]) -> Option<Request<'_>> {
    let (unix_ms, rest) = leading_u64(line)?;
    let rest = rest.strip_prefix(b" ")?;
    let key_len = rest
        .iter()
        .position(u8::is_ascii_whitespace)
        .unwrap_or(rest.len());
    if key_len == 0 || unix_ms > MAX_UNIX_MS {
        return None;
    }
    let (key, rest) = rest.split_at(key_len);
    let (cost, rest) = match rest.strip_prefix(b" ") {
        Some(rest) => {
            let (cost, rest) = leading_u64(rest)?;
            (NonZeroU64::new(cost)?, rest)
        }
        None => (NonZeroU64::MIN, rest),
    };
    matches!(rest, b"" | b"\n").then_some(Request { unix_ms, key, cost })
}

/// The number at the start of `text` (at least one digit, no overflow)
/// and what follows it.
fn leading_u64(text: &[u8]) -> Option<(u64, &[u8])> {
    let digits = text
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, rest) = text.split_at(digits);
    Some((parse_u64(number)?, rest))
}

/// The next run of non-whitespace bytes in `rest`, which moves past it.
fn next_field<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    let field = &rest[start..];
    let len = field
        .iter()
        .position(u8::is_ascii_whitespace)
        .unwrap_or(field.len());
    *rest = &field[len..];
    Some(&field[..len])
}

/// One ASCII digit or more, and nothing else.
fn all_digits(text: &[u8]) -> bool {
    !text.is_empty() && text.iter().all(u8::is_ascii_digit)
}

/// ASCII digits only (no sign, no spaces), without overflow.
fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

fn trim_end(line: &[u8]) -> &[u8] {
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &line[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quote::QUOTE_MAX;

    fn req(unix_ms: u64, key: &str, cost: u64) -> Request<'_> {
        Request {
            unix_ms,
            key: key.as_bytes(),
            cost: NonZeroU64::new(cost).unwrap(),
        }
    }

    #[test]
    fn lines_have_a_time_a_key_and_an_optional_cost() {
        assert_eq!(parse_line(b"1000 alice\n"), Ok(Some(req(1000, "alice", 1))));
        assert_eq!(parse_line(b"1000 alice 3"), Ok(Some(req(1000, "alice", 3))));
        assert_eq!(
            parse_line(b" \t0\talice   7 \r\n"),
            Ok(Some(req(0, "alice", 7)))
        );
        assert_eq!(parse_line(b"007 k 01"), Ok(Some(req(7, "k", 1))));
        let odd = parse_line(b"5 \xff:\"x\n").unwrap().unwrap();
        assert_eq!(odd.key, b"\xff:\"x");
    }

    #[test]
    fn the_plain_path_agrees_with_the_general_one() {
        for line in [
            &b"1000 alice\n"[..],
            b"1000 alice",
            b"1000 alice 3\n",
            b"1000 alice 0\n",
            b"1000 alice 3 \n",
            b"1000 alice 3x\n",
            b"1000  alice\n",
            b"1000 alice\r\n",
            b"1000 \xff\n",
            b"9223372036855 k\n",
            b"99999999999999999999 k\n",
            b"1000 \n",
            b"1000\n",
        ] {
            let general = || {
                let mut rest = line;
                let time = next_field(&mut rest)?;
                let key = next_field(&mut rest)?;
                let cost = next_field(&mut rest);
                if next_field(&mut rest).is_some() {
                    return None;
                }
                let unix_ms = parse_u64(time).filter(|&t| t <= MAX_UNIX_MS)?;
                let cost = match cost {
                    None => NonZeroU64::MIN,
                    Some(c) => parse_u64(c).and_then(NonZeroU64::new)?,
                };
                Some(Request { unix_ms, key, cost })
            };
            if let Some(plain) = parse_plain(line) {
                assert_eq!(
                    Some(plain),
                    general(),
                    "{:?}",
                    line.escape_ascii().to_string()
                );
            }
            assert_eq!(
                parse_line(line).ok().flatten(),
                general(),
                "{:?}",
                line.escape_ascii().to_string()
            );
        }
        assert!(parse_plain(b"1000 alice 3\n").is_some());
        assert!(parse_plain(b"1000 alice").is_some());
    }

    #[test]
    fn blank_and_comment_lines_are_skipped() {
        for line in [
            &b""[..],
            b"\n",
            b"   \t \r\n",
            b"# a comment",
            b"  #1000 alice",
            b"#\n",
        ] {
            assert_eq!(
                parse_line(line),
                Ok(None),
                "{:?}",
                line.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn malformed_lines_name_the_offending_text() {
        for (line, message) in [
            (
                &b"1000"[..],
                "expected '<unix_ms> <key> [<cost>]', found '1000'",
            ),
            (b"1000 a 1 extra\n", "found '1000 a 1 extra'"),
            (b"abc alice", "time 'abc' is not a whole number"),
            (b"-5 alice", "time '-5' is not"),
            (b"1.5 alice", "time '1.5' is not"),
            (
                b"99999999999999999999x alice",
                "time '99999999999999999999x' is not",
            ),
            // Digits past u64: too late, not malformed (as for the cost:
            // too large, not "not a whole number").
            (
                b"99999999999999999999 alice",
                "time 99999999999999999999 is after the largest supported time",
            ),
            (
                b"9223372036855 alice",
                "time 9223372036855 is after the largest supported time 9223372036854 (2262-04-11)",
            ),
            (
                b"18446744073709 alice",
                "time 18446744073709 is after the largest supported time",
            ),
            (
                b"1000 alice 0",
                "cost '0' is not a whole number of at least 1",
            ),
            (b"1000 alice -1", "cost '-1' is not"),
            (b"1000 alice x", "cost 'x' is not"),
            (b"1000 alice 1e3", "cost '1e3' is not"),
            (
                b"1000 alice 99999999999999999999999",
                "cost '99999999999999999999999' is too large (at most 18446744073709551615)",
            ),
            (
                b"1000 alice\t18446744073709551616",
                "cost '18446744073709551616' is too large",
            ),
        ] {
            let err = parse_line(line).unwrap_err().to_string();
            assert!(
                err.contains(message),
                "{:?}: {err}",
                line.escape_ascii().to_string()
            );
        }
        assert_eq!(
            parse_line(b"9223372036854 k").unwrap().unwrap().unix_ms,
            MAX_UNIX_MS
        );
        for line in [
            &b"1 k 18446744073709551615"[..],
            b"1\tk 18446744073709551615",
        ] {
            assert_eq!(parse_line(line).unwrap().unwrap().cost.get(), u64::MAX);
        }
    }

    #[test]
    fn a_quoted_text_cut_short_says_so() {
        let long = "9".repeat(100);
        let err = parse_line(format!("{long} alice").as_bytes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "time {}… is after the largest supported time {MAX_UNIX_MS} ({MAX_DATE})",
                "9".repeat(QUOTE_MAX)
            )
        );
        let exact = "x".repeat(QUOTE_MAX);
        let err = parse_line(format!("1 a {exact}").as_bytes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("cost '{exact}' is not a whole number of at least 1")
        );
        let err = parse_line(format!("1 a {exact}y").as_bytes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("cost '{exact}…' is not a whole number of at least 1")
        );
        // A cut never splits a character: half a character would turn
        // the whole text into \xNN escapes.
        let cost = |text: &str| {
            let err = parse_line(format!("1 a {text}").as_bytes()).unwrap_err();
            err.to_string()
        };
        let x79 = "x".repeat(QUOTE_MAX - 1);
        for wide in ["é", "\u{200b}", "😀"] {
            assert_eq!(
                cost(&format!("{x79}{wide}")),
                format!("cost '{x79}…' is not a whole number of at least 1"),
                "{wide:?}"
            );
        }
        assert_eq!(
            cost(&format!("x{}", "é".repeat(40))),
            format!(
                "cost 'x{}…' is not a whole number of at least 1",
                "é".repeat(39)
            )
        );
    }
}
