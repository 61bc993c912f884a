//! Immediate Data: 4 opaque bytes carried to the responder's completion (IBA vol. 1 §9.3.5).

use crate::bytes::{get_u32, header_view, set_u32};
use crate::{Layer, ParseError};

/// Length of the ImmDt header.
pub const HEADER_LEN: usize = 4;

header_view!(
    "A view of an Immediate Data header.",
    Layer::ImmDt,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The immediate data, read big-endian (verbs hand it to the application as `__be32`).
    pub fn imm_data(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 0..HEADER_LEN)
    }
}

/// The immediate data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The 4 bytes, big-endian.
    pub imm_data: u32,
}

impl Repr {
    /// Reads the header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            imm_data: packet.imm_data(),
        })
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        set_u32(packet.buffer.as_mut(), 0..HEADER_LEN, self.imm_data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_big_endian() {
        let bytes = [0xde, 0xad, 0xbe, 0xef];
        let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(repr.imm_data, 0xdead_beef);
        let mut buf = [0; 4];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, bytes);
        let err = Packet::new_checked(&bytes[..3]).unwrap_err();
        assert_eq!(
            err,
            ParseError::Truncated {
                layer: Layer::ImmDt,
                need: 4,
                got: 3
            }
        );
    }
}
