//! Fixed-width hex text, as C's `%0Nx` writes it and a strict reader of it.

use crate::{OobError, escaped};

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Writes fixed-width fields into a buffer whose layout the caller has sized exactly.
pub(crate) struct TextWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> TextWriter<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// `%0{width}x` of a value that fits in `width` digits (callers check or mask first; the
    /// digits above `width` would be dropped).
    pub(crate) fn hex(&mut self, value: u64, width: usize) -> &mut Self {
        for i in (0..width).rev() {
            let shift = 4 * i;
            let nibble = if shift < 64 {
                (value >> shift) & 0xf
            } else {
                0
            };
            self.byte(DIGITS[nibble as usize]);
        }
        self
    }

    pub(crate) fn byte(&mut self, b: u8) -> &mut Self {
        if let Some(slot) = self.buf.get_mut(self.pos) {
            *slot = b;
        }
        self.pos += 1;
        self
    }

    /// How many bytes were written (the layout's length if it was sized right).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pos
    }
}

/// Reads fixed-width fields out of a message, naming what is wrong when they are not there.
pub(crate) struct TextReader<'a> {
    msg: &'a [u8],
    pos: usize,
    message: &'static str,
}

impl<'a> TextReader<'a> {
    pub(crate) fn new(msg: &'a [u8], message: &'static str) -> Self {
        Self {
            msg,
            pos: 0,
            message,
        }
    }

    /// Exactly `width` hex digits (either case, as `sscanf("%x")` takes them).
    pub(crate) fn hex(&mut self, field: &'static str, width: usize) -> Result<u64, OobError> {
        let start = self.pos;
        let end = start.saturating_add(width);
        let bad = |text: &[u8]| OobError::Hex {
            message: self.message,
            field,
            offset: start,
            width,
            text: escaped(text),
        };
        let Some(digits) = self.msg.get(start..end) else {
            return Err(bad(self.msg.get(start..).unwrap_or_default()));
        };
        let mut value: u64 = 0;
        for &d in digits {
            let nibble = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(bad(digits)),
            };
            value = (value << 4) | u64::from(nibble);
        }
        self.pos = end;
        Ok(value)
    }

    /// A `width`-digit hex field and the `':'` that ends it.
    pub(crate) fn hex_colon(&mut self, field: &'static str, width: usize) -> Result<u64, OobError> {
        let value = self.hex(field, width)?;
        self.delim(b':', field)?;
        Ok(value)
    }

    /// One delimiter byte (`':'` or the terminating NUL).
    pub(crate) fn delim(&mut self, expected: u8, after: &'static str) -> Result<(), OobError> {
        let found = self.msg.get(self.pos).copied();
        if found == Some(expected) {
            self.pos += 1;
            Ok(())
        } else {
            Err(OobError::Delimiter {
                message: self.message,
                after,
                offset: self.pos,
                expected: char::from(expected),
                found: found.unwrap_or(0),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_pads_and_reader_takes_both_cases() {
        let mut buf = [0u8; 9];
        let mut w = TextWriter::new(&mut buf);
        w.hex(0xab, 4).byte(b':').hex(0x0C, 2);
        let n = w.len();
        assert_eq!(&buf[..n], b"00ab:0c");

        let mut r = TextReader::new(b"00AB:0c", "t");
        assert_eq!(r.hex("a", 4).unwrap(), 0xab);
        r.delim(b':', "a").unwrap();
        assert_eq!(r.hex("b", 2).unwrap(), 0x0c);
    }

    #[test]
    fn reader_rejects_short_and_non_hex() {
        let mut r = TextReader::new(b"0g", "t");
        assert!(matches!(
            r.hex("f", 2),
            Err(OobError::Hex { field: "f", .. })
        ));
        let mut r = TextReader::new(b"0", "t");
        assert!(matches!(
            r.hex("f", 2),
            Err(OobError::Hex { offset: 0, .. })
        ));
        let mut r = TextReader::new(b"", "t");
        assert!(matches!(
            r.delim(b':', "x"),
            Err(OobError::Delimiter { found: 0, .. })
        ));
    }
}
