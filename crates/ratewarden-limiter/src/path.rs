//! The path `match.path` and the `path` key part read: the request's path
//! normalised, so that the spellings a server treats as one path are one
//! path to a policy (docs/forward-auth.md, "Which path is matched").
//!
//! A request for `/api/orders` can be spelled `/%61pi/orders`,
//! `//api//orders` or `/x/../api/orders`; nginx, Tomcat, Go and most
//! frameworks route all of them to `/api/orders`. A policy on `/api/*`
//! that compared the path as received would let those spellings through
//! uncounted. [`normalise_path`] gives the one spelling, and refuses the
//! paths that servers read in different ways (an encoded `..`, a
//! backslash), since any one reading of them would be a guess.
//!
//! No crate fits: `percent-encoding` decodes every escape (an encoded
//! `?` would become part of the path), and RFC 3986 normalisers such as
//! `fluent-uri` remove dot segments before merging slashes, where nginx
//! merges first (`/a//../b` is `/b` to nginx, `/a/b` to RFC 3986 §5.2.4
//! alone), and refuse nothing.

use std::borrow::Cow;

/// Why a path has no single normal form: the request is refused (400)
/// rather than matched under a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Neither `/…` (origin form) nor `*` (asterisk form).
    #[error("the path does not start with '/'")]
    NotAbsolute,
    /// A `%` not followed by two hexadecimal digits (nginx answers 400 too).
    #[error("'%' at byte {at} does not start a percent-encoded octet (%XX)")]
    MalformedEscape {
        /// The byte offset of the `%` in the path.
        at: usize,
    },
    /// A control character (0x00–0x1F, 0x7F), raw or percent-encoded: an
    /// encoded NUL ends the path for servers written in C (nginx refuses
    /// it), and CR or LF in a logged or forwarded path splits lines.
    #[error("the path holds a control character (byte 0x{0:02X}), raw or percent-encoded")]
    ControlCharacter(u8),
    /// A backslash, raw or as `%5C`: Windows servers and WHATWG URL
    /// parsers (Node's `URL`) read it as `/`, the others as a character.
    #[error(
        "the path holds a backslash ('\\' or %5C), which some servers read as '/' and others do not"
    )]
    Backslash,
    /// A `.` or `..` segment in a path that also holds a percent-encoded
    /// octet: servers that decode before removing dot segments (nginx,
    /// Tomcat), after it, or never (Express routes `/a/%2e%2e` as it is)
    /// reach different resources. Clients never send such paths: browsers
    /// and curl remove dot segments, encoded ones included, before sending.
    #[error(
        "the path holds both a '.' or '..' segment and a percent-encoded octet (an encoded dot \
         segment such as %2e%2e, say), which servers resolve in different orders"
    )]
    DotSegmentWithEscape,
    /// A `.` or `..` segment with `;` parameters (`/..;/`): servlet
    /// containers drop the parameters and resolve the dot segment, other
    /// servers route `..;` as a name.
    #[error(
        "the path holds a '.' or '..' segment with ';' parameters, which servers read differently"
    )]
    DotSegmentWithParameters,
    /// `..` above the root (`/..`, `/a/../..`); nginx answers 400 too.
    #[error("a '..' segment goes above the root")]
    AboveRoot,
}

/// The normal form of `path` (a request's path, without its query), or
/// why it has none. Borrowed when `path` is already normal (the common
/// case: no allocation).
///
/// In order:
///
/// 1. `*` (`OPTIONS *`) and the empty path (authority form) are returned
///    as they are; any other path must start with `/`.
/// 2. Every `%` must start `%XX` ([`PathError::MalformedEscape`]).
/// 3. Control characters (0x00–0x1F, 0x7F) and backslashes, raw or
///    encoded, are refused ([`PathError::ControlCharacter`],
///    [`PathError::Backslash`]).
/// 4. Escapes of the characters that mean the same raw in a path are
///    decoded (RFC 3986 §2.3, §6.2.2.2): the unreserved ones (`A-Z a-z
///    0-9 - . _ ~`), the sub-delimiters (`! $ & ' ( ) * + , ; =`), `:` and
///    `@`. `%2F` is decoded to a `/` that separates segments, as nginx
///    and CGI/WSGI servers do. Every other escape (`%20`, `%25`, `%3F`,
///    `%C3%A9`, …) stays encoded with uppercase hexadecimal digits (RFC
///    3986 §6.2.2.1); every other raw character (`"`, `{`, `|`, non-ASCII,
///    …) is encoded the same way, so `{` and `%7b` are both `%7B`.
/// 5. Each segment loses its `;` parameters (`/login;jsessionid=1` is
///    `/login`), as servlet containers route it.
/// 6. Empty segments are dropped (`//` is `/`), a trailing `/` kept.
/// 7. Dot segments are removed (RFC 3986 §5.2.4, after step 6 as nginx
///    does: `/a//../b` is `/b`); `..` above the root is refused
///    ([`PathError::AboveRoot`]), and so are dot segments in a path with
///    any escape or with `;` parameters ([`PathError::DotSegmentWithEscape`],
///    [`PathError::DotSegmentWithParameters`]).
///
/// The result is ASCII, starts with `/`, holds no `.`, `..` or empty
/// segment (but may end in `/`), no `;`, no `\`, and no escape that step 4
/// would decode; `normalise_path` of it is itself. Fully percent-decoded,
/// it is nginx's `$uri` for the same path (without `;` parameters).
///
/// # Errors
/// [`PathError`], naming the reason.
pub fn normalise_path(path: &str) -> Result<Cow<'_, str>, PathError> {
    if path == "*" || path.is_empty() {
        return Ok(Cow::Borrowed(path));
    }
    if !path.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    if is_normal(path) {
        return Ok(Cow::Borrowed(path));
    }
    normalise_slow(path).map(Cow::Owned)
}

/// How a byte of a path is written in the normal form.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// As itself (raw or decoded from an escape).
    Plain,
    /// Percent-encoded.
    Encoded,
    /// `/`.
    Slash,
    /// `;`: starts a segment's parameters.
    Semicolon,
    /// `%`: starts an escape (raw only).
    Percent,
    /// Refused.
    Control,
    /// Refused.
    Backslash,
}

const fn class(b: u8) -> Class {
    match b {
        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => Class::Plain,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b'=' | b':' | b'@' => {
            Class::Plain
        }
        b'/' => Class::Slash,
        b';' => Class::Semicolon,
        b'%' => Class::Percent,
        b'\\' => Class::Backslash,
        0x00..=0x1F | 0x7F => Class::Control,
        _ => Class::Encoded,
    }
}

/// Whether `path` (starting with `/`) is its own normal form: checked
/// without allocating, for the paths of every request.
fn is_normal(path: &str) -> bool {
    let bytes = path.as_bytes();
    let mut i = 0;
    let mut segment_start = 1;
    while i < bytes.len() {
        let b = bytes[i];
        match class(b) {
            Class::Plain => i += 1,
            Class::Slash => {
                if i > 0 && !is_plain_segment(&bytes[segment_start..i]) {
                    return false;
                }
                segment_start = i + 1;
                i += 1;
            }
            Class::Percent => match escape_at(bytes, i) {
                Some(d)
                    if matches!(class(d), Class::Encoded | Class::Percent)
                        && is_upper_hex(&bytes[i + 1..i + 3]) =>
                {
                    i += 3;
                }
                _ => return false,
            },
            _ => return false,
        }
    }
    // The last segment may be empty (a trailing slash), not a dot segment.
    let last = &bytes[segment_start..];
    last.is_empty() || is_plain_segment(last)
}

/// A segment that is neither empty nor `.` nor `..`.
fn is_plain_segment(segment: &[u8]) -> bool {
    !matches!(segment, b"" | b"." | b"..")
}

fn is_upper_hex(digits: &[u8]) -> bool {
    digits.iter().all(|d| !d.is_ascii_lowercase())
}

/// The octet `%XX` at `bytes[at]` encodes, if it is one.
fn escape_at(bytes: &[u8], at: usize) -> Option<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let high = hex(*bytes.get(at + 1)?)?;
    let low = hex(*bytes.get(at + 2)?)?;
    // Two hexadecimal digits: at most 0xFF.
    u8::try_from(high * 16 + low).ok()
}

/// One segment being built: its normal text, and whether it had `;`
/// parameters (dropped).
#[derive(Default)]
struct Segment {
    text: String,
    in_parameters: bool,
    had_parameters: bool,
}

fn normalise_slow(path: &str) -> Result<String, PathError> {
    let bytes = path.as_bytes();
    let mut segments: Vec<Segment> = Vec::new();
    let mut current = Segment::default();
    let mut escaped = false;
    let mut i = 1;
    while i < bytes.len() {
        let raw = bytes[i];
        let (b, width) = if raw == b'%' {
            let d = escape_at(bytes, i).ok_or(PathError::MalformedEscape { at: i })?;
            escaped = true;
            (d, 3)
        } else {
            (raw, 1)
        };
        match class(b) {
            Class::Control => return Err(PathError::ControlCharacter(b)),
            Class::Backslash => return Err(PathError::Backslash),
            Class::Slash => segments.push(std::mem::take(&mut current)),
            Class::Semicolon => {
                current.in_parameters = true;
                current.had_parameters = true;
            }
            _ if current.in_parameters => {}
            Class::Plain => current.text.push(char::from(b)),
            // A decoded `%` (`%25`) stays encoded; a raw one was an escape.
            Class::Encoded | Class::Percent => {
                current.text.push('%');
                current.text.push(char::from(HEX[usize::from(b >> 4)]));
                current.text.push(char::from(HEX[usize::from(b & 0xF)]));
            }
        }
        i += width;
    }
    segments.push(current);

    let mut out: Vec<String> = Vec::with_capacity(segments.len());
    let mut trailing_slash = false;
    let last = segments.len() - 1;
    for (n, segment) in segments.into_iter().enumerate() {
        let dot = matches!(segment.text.as_str(), "." | "..");
        if dot && segment.had_parameters {
            return Err(PathError::DotSegmentWithParameters);
        }
        if dot && escaped {
            return Err(PathError::DotSegmentWithEscape);
        }
        trailing_slash = n == last;
        match segment.text.as_str() {
            "" | "." => {}
            ".." => {
                out.pop().ok_or(PathError::AboveRoot)?;
            }
            _ => {
                out.push(segment.text);
                trailing_slash = false;
            }
        }
    }
    let mut normal = String::with_capacity(path.len());
    for segment in &out {
        normal.push('/');
        normal.push_str(segment);
    }
    if trailing_slash || out.is_empty() {
        normal.push('/');
    }
    Ok(normal)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

#[cfg(test)]
#[path = "path_tests.rs"]
mod tests;
