//! Trace bytes quoted in messages: error messages and the summary show a
//! line's text or a key as it is, but safely on a terminal, and cut short.

use std::fmt;

/// How much of an offending line an error message quotes, in bytes.
pub(crate) const QUOTE_MAX: usize = 80;

/// `text` kept for an error message: its first [`QUOTE_MAX`] bytes, and
/// one more when it is longer, so that [`Cut`] can show it was cut.
pub(crate) fn quote(text: &[u8]) -> Vec<u8> {
    text[..text.len().min(QUOTE_MAX + 1)].to_vec()
}

/// [`quote`]'s bytes shown as [`Quoted`], then `…` when the text was
/// longer than [`QUOTE_MAX`] bytes.
pub(crate) struct Cut<'a>(pub(crate) &'a [u8]);

impl fmt::Display for Cut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cut = self.0.len() > QUOTE_MAX;
        let mut end = self.0.len().min(QUOTE_MAX);
        // Not inside a character: back to the start of the one the cut
        // falls in (a UTF-8 character has at most 3 continuation bytes).
        while cut && end > QUOTE_MAX - 3 && self.0[end] & 0xC0 == 0x80 {
            end -= 1;
        }
        write!(f, "{}", Quoted(&self.0[..end]))?;
        if cut {
            f.write_str("…")?;
        }
        Ok(())
    }
}

/// Bytes shown safely on a terminal: UTF-8 with control characters and
/// invisible ones (a byte-order mark, a direction override, a zero-width
/// space: whatever Rust's `char::escape_debug` escapes) as `\u{…}` (NUL
/// too, as `\u{0}`, not `\0`, which digits after it would extend), other
/// bytes as `\xNN`.
pub(crate) struct Quoted<'a>(pub(crate) &'a [u8]);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(self.0) {
            // Text holding a quote or a backslash is shown by the arm
            // below, all as ASCII escapes, so that a backslash typed in the
            // text is never taken for one of these escapes.
            Ok(s) if !s.contains(['\'', '"', '\\']) => s.chars().try_for_each(|c| match c {
                '\0' => f.write_str("\\u{0}"),
                c => write!(f, "{}", c.escape_debug()),
            }),
            _ => write!(f, "{}", self.0.escape_ascii()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_text_escapes_control_characters_and_invalid_utf8() {
        assert_eq!(Quoted("clé".as_bytes()).to_string(), "clé");
        assert_eq!(Quoted(b"a\x1b[2Jb").to_string(), "a\\u{1b}[2Jb");
        assert_eq!(Quoted(b"\xffx").to_string(), "\\xffx");
        assert_eq!(Quoted(b"it's").to_string(), "it\\'s");
        // Invisible characters are escaped too: a byte-order mark shown
        // raw makes "'\u{feff}1000' is not a whole number" read as
        // "'1000' is not a whole number".
        for (text, shown) in [
            ("\u{feff}1000", "\\u{feff}1000"),
            ("b \u{202e} evil", "b \\u{202e} evil"),
            ("a\u{200b}b", "a\\u{200b}b"),
        ] {
            assert_eq!(Quoted(text.as_bytes()).to_string(), shown);
        }
        // Not "10\000", which reads as an octal escape.
        assert_eq!(Quoted(b"10\x0000").to_string(), "10\\u{0}00");
    }
}
