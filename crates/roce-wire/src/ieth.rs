//! Invalidate Extended Transport Header: the R_Key that SEND with Invalidate asks the responder
//! to invalidate (IBA vol. 1 §9.3.6).

use crate::bytes::{get_u32, header_view, set_u32};
use crate::{Layer, ParseError};

/// Length of the IETH.
pub const HEADER_LEN: usize = 4;

header_view!(
    "A view of an Invalidate Extended Transport Header.",
    Layer::Ieth,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The R_Key to invalidate.
    pub fn rkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 0..HEADER_LEN)
    }
}

/// The fields of an IETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The R_Key to invalidate.
    pub rkey: u32,
}

impl Repr {
    /// Reads the header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            rkey: packet.rkey(),
        })
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        set_u32(packet.buffer.as_mut(), 0..HEADER_LEN, self.rkey);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes = [0x00, 0x00, 0x12, 0x34];
        let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(repr.rkey, 0x1234);
        let mut buf = [0; 4];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, bytes);
        let err = Packet::new_checked(&bytes[..0]).unwrap_err();
        assert_eq!(
            err,
            ParseError::Truncated {
                layer: Layer::Ieth,
                need: 4,
                got: 0
            }
        );
    }
}
