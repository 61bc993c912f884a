//! Big-endian field access shared by the header views.

use crate::field::Field;

#[inline]
pub(crate) fn get_u16(buf: &[u8], field: Field) -> u16 {
    let mut raw = [0; 2];
    raw.copy_from_slice(&buf[field]);
    u16::from_be_bytes(raw)
}

/// A 24-bit big-endian field.
#[inline]
pub(crate) fn get_u24(buf: &[u8], field: Field) -> u32 {
    let b = &buf[field];
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

#[inline]
pub(crate) fn get_u32(buf: &[u8], field: Field) -> u32 {
    let mut raw = [0; 4];
    raw.copy_from_slice(&buf[field]);
    u32::from_be_bytes(raw)
}

#[inline]
pub(crate) fn get_u64(buf: &[u8], field: Field) -> u64 {
    let mut raw = [0; 8];
    raw.copy_from_slice(&buf[field]);
    u64::from_be_bytes(raw)
}

#[inline]
pub(crate) fn set_u16(buf: &mut [u8], field: Field, value: u16) {
    buf[field].copy_from_slice(&value.to_be_bytes());
}

#[inline]
pub(crate) fn set_u24(buf: &mut [u8], field: Field, value: u32) {
    buf[field].copy_from_slice(&value.to_be_bytes()[1..]);
}

#[inline]
pub(crate) fn set_u32(buf: &mut [u8], field: Field, value: u32) {
    buf[field].copy_from_slice(&value.to_be_bytes());
}

#[inline]
pub(crate) fn set_u64(buf: &mut [u8], field: Field, value: u64) {
    buf[field].copy_from_slice(&value.to_be_bytes());
}

/// A `Packet<T>` view over a buffer with smoltcp's contract: `new_unchecked`, `new_checked`
/// (which calls the view's own `$check` method) and `into_inner`, documented by the attributes
/// given.
macro_rules! view {
    ($(#[$attr:meta])* check: $check:ident) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wraps a buffer without checking it; accessors may panic on one that
            #[doc = concat!("[`Packet::", stringify!($check), "`] refuses.")]
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            #[doc = concat!("Wraps a buffer after [`Packet::", stringify!($check), "`].")]
            pub fn new_checked(buffer: T) -> Result<Self, $crate::ParseError> {
                let packet = Self::new_unchecked(buffer);
                packet.$check()?;
                Ok(packet)
            }

            /// The wrapped buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
pub(crate) use view;

/// The view boilerplate every fixed-size header shares: a [`view`] whose check is `check_len`,
/// that the buffer holds the whole header.
macro_rules! header_view {
    ($doc:expr, $layer:expr, $len:expr) => {
        $crate::bytes::view!(
            #[doc = $doc]
            ///
            /// Accessors read the header at the start of the buffer. `new_unchecked` does not check
            /// the length, so accessors may panic on a short buffer; `new_checked` makes them total.
            check: check_len
        );

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Whether the buffer holds the whole header.
            pub fn check_len(&self) -> Result<(), $crate::ParseError> {
                let got = self.buffer.as_ref().len();
                if got < $len {
                    Err($crate::ParseError::Truncated {
                        layer: $layer,
                        need: $len,
                        got,
                    })
                } else {
                    Ok(())
                }
            }
        }
    };
}
pub(crate) use header_view;
