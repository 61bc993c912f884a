//! RDMA Extended Transport Header: 16 bytes in WRITE First/Only, READ requests, FLUSH and
//! ATOMIC WRITE (IBA vol. 1 §9.3.3).

use crate::bytes::{get_u32, get_u64, header_view, set_u32, set_u64};
use crate::{Layer, ParseError};

mod field {
    use crate::field::Field;
    pub(super) const VA: Field = 0..8;
    pub(super) const RKEY: Field = 8..12;
    pub(super) const DMA_LEN: Field = 12..16;
}

/// Length of the RETH.
pub const HEADER_LEN: usize = field::DMA_LEN.end;

header_view!(
    "A view of an RDMA Extended Transport Header.",
    Layer::Reth,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual Address: where in the remote region the operation starts.
    pub fn va(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::VA)
    }

    /// R_Key of the remote region.
    pub fn rkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::RKEY)
    }

    /// DMA Length: bytes of the whole message.
    pub fn dma_len(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::DMA_LEN)
    }
}

/// The fields of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Virtual Address.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// DMA Length.
    pub dma_len: u32,
}

impl Repr {
    /// Reads a RETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            va: packet.va(),
            rkey: packet.rkey(),
            dma_len: packet.dma_len(),
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
        set_u32(buf, field::DMA_LEN, self.dma_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RETH of the first WRITE_FIRST in `mtu1500-write_bw.pcap`'s key exchange style.
    static BYTES: [u8; 16] = [
        0x00, 0x00, 0x7f, 0x57, 0xa7, 0x1e, 0xc0, 0x00, // VA
        0x00, 0x00, 0x03, 0xa8, // R_Key
        0x00, 0x01, 0x00, 0x00, // DMA length 65536
    ];

    #[test]
    fn deconstruct_and_construct() {
        let repr = Repr::parse(&Packet::new_checked(&BYTES[..]).unwrap()).unwrap();
        assert_eq!(
            repr,
            Repr {
                va: 0x7f57_a71e_c000,
                rkey: 0x3a8,
                dma_len: 65536
            }
        );
        let mut buf = [0; 16];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn truncated() {
        let err = Packet::new_checked(&BYTES[..15]).unwrap_err();
        assert_eq!(
            err,
            ParseError::Truncated {
                layer: Layer::Reth,
                need: 16,
                got: 15
            }
        );
    }
}
