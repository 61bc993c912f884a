//! Byte ranges of header fields, as in smoltcp's `wire::field`.

/// A header field: the bytes `start..end` of the header it belongs to.
pub(crate) type Field = core::ops::Range<usize>;
