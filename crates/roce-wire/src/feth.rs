//! FLUSH Extended Transport Header: 4 bytes before the RETH of a FLUSH (IBA 1.5, rxe_hdr.h).

use crate::bytes::{get_u32, header_view, set_u32};
use crate::{Layer, ParseError};

/// Length of the FETH.
pub const HEADER_LEN: usize = 4;

const PLT_MASK: u32 = 0x0f;
const SEL_SHIFT: u32 = 4;
const SEL_MASK: u32 = 0x30;

header_view!(
    "A view of a FLUSH Extended Transport Header.",
    Layer::Feth,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    fn raw(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 0..HEADER_LEN)
    }

    /// Placement type (bits 3:0): global visibility, persistence.
    pub fn placement_type(&self) -> u8 {
        (self.raw() & PLT_MASK) as u8
    }

    /// Selectivity level (bits 5:4): memory region or range.
    pub fn selectivity_level(&self) -> u8 {
        ((self.raw() & SEL_MASK) >> SEL_SHIFT) as u8
    }
}

/// The fields of a FETH; the other bits are reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Placement type, 0..=15.
    pub placement_type: u8,
    /// Selectivity level, 0..=3.
    pub selectivity_level: u8,
}

impl Repr {
    /// Reads the header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            placement_type: packet.placement_type(),
            selectivity_level: packet.selectivity_level(),
        })
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; only the defined bits of each field are kept.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let raw = (u32::from(self.placement_type) & PLT_MASK)
            | ((u32::from(self.selectivity_level) << SEL_SHIFT) & SEL_MASK);
        set_u32(packet.buffer.as_mut(), 0..HEADER_LEN, raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes = [0, 0, 0, 0x21];
        let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(
            repr,
            Repr {
                placement_type: 1,
                selectivity_level: 2
            }
        );
        let mut buf = [0xff; 4];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, bytes);
        let err = Packet::new_checked(&bytes[..2]).unwrap_err();
        assert_eq!(
            err,
            ParseError::Truncated {
                layer: Layer::Feth,
                need: 4,
                got: 2
            }
        );
    }
}
