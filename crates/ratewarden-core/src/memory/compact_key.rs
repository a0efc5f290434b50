//! [`CompactKey`]: a key's encoding in 16 bytes.

/// A key's encoding in 16 bytes: inline when it fits in 15 bytes, else a
/// thin pointer to the heap. `InlineLen` has 16 values, so the other 240
/// values of its byte tell the two variants apart and the enum needs no
/// extra tag (checked by a test): a GCRA entry is 24 bytes.
#[derive(Debug, Clone)]
pub(super) enum CompactKey {
    Inline { len: InlineLen, bytes: [u8; INLINE] },
    Heap(Box<Box<[u8]>>),
}

/// The longest key stored inline, in bytes.
const INLINE: usize = 15;

/// 0 ..= 15, the length of an inline key.
#[derive(Debug, Clone, Copy)]
#[repr(u8)]
#[rustfmt::skip]
pub(super) enum InlineLen { L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15 }

impl InlineLen {
    const ALL: [InlineLen; 16] = [
        InlineLen::L0,
        InlineLen::L1,
        InlineLen::L2,
        InlineLen::L3,
        InlineLen::L4,
        InlineLen::L5,
        InlineLen::L6,
        InlineLen::L7,
        InlineLen::L8,
        InlineLen::L9,
        InlineLen::L10,
        InlineLen::L11,
        InlineLen::L12,
        InlineLen::L13,
        InlineLen::L14,
        InlineLen::L15,
    ];
}

impl CompactKey {
    pub(super) fn new(key: &[u8]) -> CompactKey {
        match InlineLen::ALL.get(key.len()) {
            Some(&len) => {
                let mut bytes = [0u8; INLINE];
                bytes[..key.len()].copy_from_slice(key);
                CompactKey::Inline { len, bytes }
            }
            None => CompactKey::Heap(Box::new(key.into())),
        }
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            CompactKey::Inline { len, bytes } => &bytes[..*len as usize],
            CompactKey::Heap(b) => b,
        }
    }
}

/// A key being looked up, in the form [`CompactKey`] would store it: a
/// short key is compared with a stored one as two fixed-size arrays,
/// without a `memcmp` call per probed entry.
#[derive(Debug, Clone, Copy)]
pub(super) enum Probe<'a> {
    Inline { len: InlineLen, bytes: [u8; INLINE] },
    Heap(&'a [u8]),
}

impl<'a> Probe<'a> {
    pub(super) fn new(key: &'a [u8]) -> Probe<'a> {
        match InlineLen::ALL.get(key.len()) {
            Some(&len) => {
                let mut bytes = [0u8; INLINE];
                bytes[..key.len()].copy_from_slice(key);
                Probe::Inline { len, bytes }
            }
            None => Probe::Heap(key),
        }
    }

    /// Whether `stored` holds this key. [`CompactKey::new`] stores every
    /// key that fits inline, zero-padded as here, so an inline key never
    /// equals a heap one.
    #[inline]
    pub(super) fn matches(&self, stored: &CompactKey) -> bool {
        match (self, stored) {
            (Probe::Inline { len, bytes }, CompactKey::Inline { len: l, bytes: b }) => {
                *len as u8 == *l as u8 && bytes == b
            }
            (Probe::Heap(key), CompactKey::Heap(b)) => **key == ***b,
            _ => false,
        }
    }
}
