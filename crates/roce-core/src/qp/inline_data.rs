//! A send WR's inline data (`IBV_SEND_INLINE`), copied when the WR is posted: held in place up
//! to [`IN_PLACE`] bytes, so that a small message — a ping-pong's — costs no allocation and no
//! free; longer data on the heap (rxe copies inline data into its WQE, up to its `max_inline`
//! of 400 bytes).

/// Bytes of inline data held in place.
pub(crate) const IN_PLACE: usize = 32;

/// The bytes of an inline send: gathered by the engine from registered memory at the post
/// (`SendWr::inline`), or by a verbs library from any memory of the program's
/// (`SendWr::inline_data`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineData(Held);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Held {
    /// Up to [`IN_PLACE`] bytes: `bytes[..len]`.
    InPlace { len: u8, bytes: [u8; IN_PLACE] },
    /// Longer data, or data handed over already on the heap.
    Heap(Vec<u8>),
}

impl InlineData {
    /// `len` bytes that `fill` writes; `None` when it cannot (it returns false: an SGE names
    /// memory it may not read).
    pub fn gathered(len: usize, fill: impl FnOnce(&mut [u8]) -> bool) -> Option<Self> {
        if let Ok(short) = u8::try_from(len)
            && len <= IN_PLACE
        {
            let mut bytes = [0; IN_PLACE];
            return fill(&mut bytes[..len]).then_some(Self(Held::InPlace { len: short, bytes }));
        }
        let mut data = vec![0; len];
        fill(&mut data).then_some(Self(Held::Heap(data)))
    }

    /// The data.
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Held::InPlace { len, bytes } => &bytes[..usize::from(*len)],
            Held::Heap(data) => data,
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Vec<u8>> for InlineData {
    /// Bytes already on the heap: kept where they are.
    fn from(data: Vec<u8>) -> Self {
        Self(Held::Heap(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(out: &mut [u8]) -> bool {
        for (i, b) in out.iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        true
    }

    #[test]
    fn a_short_message_is_held_in_place() {
        let data = InlineData::gathered(8, numbered).unwrap();
        assert!(matches!(data.0, Held::InPlace { len: 8, .. }));
        assert_eq!(data.as_slice(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        let full = InlineData::gathered(IN_PLACE, numbered).unwrap();
        assert!(matches!(full.0, Held::InPlace { .. }));
        assert_eq!(full.len(), IN_PLACE);
        assert_eq!(full.as_slice()[IN_PLACE - 1], IN_PLACE as u8);
        assert!(InlineData::gathered(0, numbered).unwrap().is_empty());
    }

    #[test]
    fn a_longer_message_goes_to_the_heap_whole() {
        let data = InlineData::gathered(IN_PLACE + 1, numbered).unwrap();
        assert!(matches!(data.0, Held::Heap(_)));
        let expected: Vec<u8> = (1..=IN_PLACE as u8 + 1).collect();
        assert_eq!(data.as_slice(), &expected[..]);
        assert_eq!(InlineData::from(vec![7; 400]).as_slice(), &[7; 400][..]);
    }

    #[test]
    fn data_that_cannot_be_read_is_none_at_any_length() {
        assert_eq!(InlineData::gathered(8, |_| false), None);
        assert_eq!(InlineData::gathered(100, |_| false), None);
    }
}
