//! Atomic Extended Transport Header: 28 bytes in CmpSwap and FetchAdd requests
//! (IBA vol. 1 §9.3.4).

use crate::bytes::{get_u32, get_u64, header_view, set_u32, set_u64};
use crate::{Layer, ParseError};

mod field {
    use crate::field::Field;
    pub(super) const VA: Field = 0..8;
    pub(super) const RKEY: Field = 8..12;
    pub(super) const SWAP_ADD: Field = 12..20;
    pub(super) const COMPARE: Field = 20..28;
}

/// Length of the AtomicETH.
pub const HEADER_LEN: usize = field::COMPARE.end;

header_view!(
    "A view of an Atomic Extended Transport Header.",
    Layer::AtomicEth,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual Address of the 8-byte target (must be 8-byte aligned).
    pub fn va(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::VA)
    }

    /// R_Key of the remote region.
    pub fn rkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::RKEY)
    }

    /// Swap (CmpSwap) or Add (FetchAdd) data.
    pub fn swap_add(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::SWAP_ADD)
    }

    /// Compare data (CmpSwap only).
    pub fn compare(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::COMPARE)
    }
}

/// The fields of an AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Virtual Address.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// Swap or Add data.
    pub swap_add: u64,
    /// Compare data.
    pub compare: u64,
}

impl Repr {
    /// Reads the header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            va: packet.va(),
            rkey: packet.rkey(),
            swap_add: packet.swap_add(),
            compare: packet.compare(),
        })
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let buf = packet.buffer.as_mut();
        set_u64(buf, field::VA, self.va);
        set_u32(buf, field::RKEY, self.rkey);
        set_u64(buf, field::SWAP_ADD, self.swap_add);
        set_u64(buf, field::COMPARE, self.compare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static BYTES: [u8; 28] = [
        0x00, 0x00, 0x55, 0x55, 0x00, 0x00, 0x10, 0x08, // VA
        0x00, 0x00, 0x01, 0x02, // R_Key
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, // swap / add
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // compare
    ];

    #[test]
    fn deconstruct_and_construct() {
        let repr = Repr::parse(&Packet::new_checked(&BYTES[..]).unwrap()).unwrap();
        let expected = Repr {
            va: 0x5555_0000_1008,
            rkey: 0x102,
            swap_add: 7,
            compare: 0x0102_0304_0506_0708,
        };
        assert_eq!(repr, expected);
        let mut buf = [0; 28];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
        let err = Packet::new_checked(&BYTES[..27]).unwrap_err();
        assert_eq!(
            err,
            ParseError::Truncated {
                layer: Layer::AtomicEth,
                need: 28,
                got: 27
            }
        );
    }
}
