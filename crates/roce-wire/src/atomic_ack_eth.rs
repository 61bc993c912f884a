//! Atomic ACK Extended Transport Header: the 8-byte original value an atomic operation found
//! (IBA vol. 1 §9.3.8).

use crate::bytes::{get_u64, header_view, set_u64};
use crate::{Layer, ParseError};

/// Length of the AtomicAckETH.
pub const HEADER_LEN: usize = 8;

header_view!(
    "A view of an Atomic ACK Extended Transport Header.",
    Layer::AtomicAckEth,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The value at the target before the atomic operation.
    pub fn orig_data(&self) -> u64 {
        get_u64(self.buffer.as_ref(), 0..HEADER_LEN)
    }
}

/// The fields of an AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Original remote data.
    pub orig_data: u64,
}

impl Repr {
    /// Reads the header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            orig_data: packet.orig_data(),
        })
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        set_u64(packet.buffer.as_mut(), 0..HEADER_LEN, self.orig_data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes = [0, 0, 0, 0, 0, 0, 0x01, 0x00];
        let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(repr.orig_data, 0x100);
        let mut buf = [0xff; 8];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, bytes);
        let err = Packet::new_checked(&bytes[..4]).unwrap_err();
        assert_eq!(
            err,
            ParseError::Truncated {
                layer: Layer::AtomicAckEth,
                need: 8,
                got: 4
            }
        );
    }
}
