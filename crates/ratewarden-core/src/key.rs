//! Rate-limit keys: opaque byte strings in one or more parts.
//!
//! A key such as `(user 7, endpoint "/orders")` has two parts. Parts are
//! opaque bytes (colons, spaces, quotes, glob characters and non-UTF-8 are
//! ordinary data) and are length-prefixed in [`Key::encoded`], so no two
//! different keys share an encoding and a key made of the first parts of
//! another is a byte prefix of it: that is what [`Store::reset`] uses to
//! clear "every endpoint of user 7".
//!
//! [`Store::reset`]: crate::Store::reset

use std::fmt;

/// A rate-limit key: one or more opaque byte-string parts.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    encoded: Box<[u8]>,
}

/// Why a key could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// A key needs at least one part.
    #[error("a key needs at least one part")]
    NoParts,
    /// The parts add up to more than [`Key::MAX_BYTES`].
    #[error("key is {len} bytes long; the maximum is {max} bytes")]
    TooLong {
        /// The total length of the parts, in bytes.
        len: usize,
        /// [`Key::MAX_BYTES`].
        max: usize,
    },
}

impl Key {
    /// The largest total length of a key's parts, in bytes (4 KiB). Longer
    /// keys are refused so one client cannot make the store hold
    /// arbitrarily large keys.
    pub const MAX_BYTES: usize = 4096;

    /// A key from its parts, in order.
    ///
    /// # Errors
    /// [`KeyError::NoParts`] for an empty list, [`KeyError::TooLong`] when
    /// the parts add up to more than [`Key::MAX_BYTES`].
    pub fn new<I, P>(parts: I) -> Result<Key, KeyError>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<[u8]>,
    {
        let mut encoded = Vec::new();
        let mut len = 0usize;
        let mut count = 0usize;
        for part in parts {
            let part = part.as_ref();
            len += part.len();
            count += 1;
            if len > Key::MAX_BYTES {
                return Err(KeyError::TooLong {
                    len,
                    max: Key::MAX_BYTES,
                });
            }
            push_varint(&mut encoded, part.len());
            encoded.extend_from_slice(part);
        }
        if count == 0 {
            return Err(KeyError::NoParts);
        }
        Ok(Key {
            encoded: encoded.into_boxed_slice(),
        })
    }

    /// A key of one part.
    ///
    /// # Errors
    /// [`KeyError::TooLong`] when `part` is longer than [`Key::MAX_BYTES`].
    pub fn single(part: impl AsRef<[u8]>) -> Result<Key, KeyError> {
        Key::new([part])
    }

    /// The parts, in order.
    pub fn parts(&self) -> Parts<'_> {
        Parts {
            rest: &self.encoded,
        }
    }

    /// The canonical length-prefixed encoding: for each part, its length as
    /// an unsigned LEB128 varint, then its bytes. Injective, and the
    /// encoding of a key's first parts is a byte prefix of the key's.
    pub fn encoded(&self) -> &[u8] {
        &self.encoded
    }

    /// Rebuilds a key from [`Key::encoded`] bytes; `None` when `bytes` is
    /// not a valid encoding.
    pub fn from_encoded(bytes: &[u8]) -> Option<Key> {
        let mut rest = bytes;
        let mut parts = 0usize;
        while !rest.is_empty() {
            let (len, used) = read_varint(rest)?;
            rest = rest.get(used..)?.get(len..)?;
            parts += 1;
        }
        (parts > 0).then(|| Key {
            encoded: bytes.into(),
        })
    }

    /// Whether `prefix`'s parts are the first parts of this key (a key is a
    /// prefix of itself).
    pub fn starts_with(&self, prefix: &Key) -> bool {
        self.encoded.starts_with(&prefix.encoded)
    }
}

/// Iterator over a [`Key`]'s parts.
#[derive(Debug, Clone)]
pub struct Parts<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Parts<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (len, used) = read_varint(self.rest)?;
        // Key::new and Key::from_encoded only build well-formed encodings.
        let part = self.rest.get(used..used + len)?;
        self.rest = &self.rest[used + len..];
        Some(part)
    }
}

/// Shows each part as an escaped string, parts separated by `/`:
/// `"7"/"/orders"`. Safe to put in logs and problem details.
impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, part) in self.parts().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            write!(f, "\"{}\"", part.escape_ascii())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({self})")
    }
}

/// Room for [`single_encoded_in`]: a part shorter than this has a
/// one-byte length prefix.
pub(crate) const SHORT_SINGLE: usize = 0x80;

/// The [`Key::encoded`] bytes of `Key::single(part)`, written into `buf`
/// without allocating, when `part` is shorter than [`SHORT_SINGLE`]
/// (its length is then one varint byte); `None` otherwise.
pub(crate) fn single_encoded_in<'a>(
    part: &[u8],
    buf: &'a mut [u8; SHORT_SINGLE],
) -> Option<&'a [u8]> {
    let len = part.len();
    if len >= SHORT_SINGLE {
        return None;
    }
    buf[0] = len as u8;
    buf[1..=len].copy_from_slice(part);
    Some(&buf[..=len])
}

fn push_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// (value, bytes used), or `None` for a truncated or oversized varint.
fn read_varint(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut n = 0usize;
    for (i, b) in bytes.iter().enumerate().take(4) {
        n |= usize::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((n, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_single_part_encodes_on_the_stack_as_key_single_does() {
        let mut buf = [0u8; SHORT_SINGLE];
        for part in [&b""[..], b"alice", &[7u8; SHORT_SINGLE - 1]] {
            let key = Key::single(part).unwrap();
            assert_eq!(single_encoded_in(part, &mut buf), Some(key.encoded()));
        }
        assert_eq!(single_encoded_in(&[7u8; SHORT_SINGLE], &mut buf), None);
    }

    #[test]
    fn parts_round_trip_through_the_encoding() {
        let long = vec![b'x'; 300];
        let key = Key::new([b"7".as_slice(), b"", b"a:b c", &long]).unwrap();
        let parts: Vec<&[u8]> = key.parts().collect();
        assert_eq!(parts, vec![b"7".as_slice(), b"", b"a:b c", &long]);
        assert_eq!(Key::from_encoded(key.encoded()), Some(key));
    }

    #[test]
    fn keys_that_join_to_the_same_bytes_stay_different() {
        let a = Key::new(["ab", "c"]).unwrap();
        let b = Key::new(["a", "bc"]).unwrap();
        let c = Key::single("abc").unwrap();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(a.encoded(), c.encoded());
    }

    #[test]
    fn a_key_starts_with_its_first_parts_only() {
        let key = Key::new(["7", "/orders"]).unwrap();
        assert!(key.starts_with(&Key::single("7").unwrap()));
        assert!(key.starts_with(&key));
        assert!(!key.starts_with(&Key::single("70").unwrap()));
        assert!(
            !Key::new(["70", "/orders"])
                .unwrap()
                .starts_with(&Key::single("7").unwrap())
        );
    }

    #[test]
    fn keys_over_the_maximum_are_refused() {
        assert!(Key::single(vec![0u8; Key::MAX_BYTES]).is_ok());
        assert_eq!(
            Key::single(vec![0u8; Key::MAX_BYTES + 1]),
            Err(KeyError::TooLong {
                len: Key::MAX_BYTES + 1,
                max: Key::MAX_BYTES
            })
        );
        assert_eq!(Key::new(Vec::<&str>::new()), Err(KeyError::NoParts));
    }

    #[test]
    fn invalid_encodings_are_rejected() {
        assert_eq!(Key::from_encoded(&[]), None);
        assert_eq!(Key::from_encoded(&[5, b'a']), None);
        assert_eq!(Key::from_encoded(&[0x80]), None);
    }

    #[test]
    fn display_escapes_quotes_and_control_bytes() {
        let key = Key::new(["7".as_bytes(), b"a\"b\n\xff"]).unwrap();
        assert_eq!(key.to_string(), r#""7"/"a\"b\n\xff""#);
    }
}
