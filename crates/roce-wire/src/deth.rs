//! Datagram Extended Transport Header: 8 bytes in every UD packet (IBA vol. 1 §9.3.2).

use crate::bytes::{get_u24, get_u32, header_view, set_u24, set_u32};
use crate::{Layer, ParseError, Qpn};

mod field {
    use crate::field::Field;
    pub(super) const QKEY: Field = 0..4;
    /// Resv8 then the 24-bit source QP.
    pub(super) const SRC_QP: Field = 5..8;
}

/// Length of the DETH.
pub const HEADER_LEN: usize = field::SRC_QP.end;
/// The Q_Key of QP1, the General Services Interface (rxe_hdr.h `GSI_QKEY`).
pub const GSI_QKEY: u32 = 0x8001_0000;

header_view!(
    "A view of a Datagram Extended Transport Header.",
    Layer::Deth,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Q_Key: must match the destination QP's Q_Key.
    pub fn qkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::QKEY)
    }

    /// Source QP of the datagram.
    pub fn src_qp(&self) -> Qpn {
        Qpn::new(get_u24(self.buffer.as_ref(), field::SRC_QP))
    }
}

/// The fields of a DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Q_Key.
    pub qkey: u32,
    /// Source QP.
    pub src_qp: Qpn,
}

impl Repr {
    /// Reads a DETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            qkey: packet.qkey(),
            src_qp: packet.src_qp(),
        })
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the reserved byte becomes 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let buf = packet.buffer.as_mut();
        set_u32(buf, field::QKEY, self.qkey);
        buf[field::SRC_QP.start - 1] = 0;
        set_u24(buf, field::SRC_QP, self.src_qp.value());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DETH of ibv_ud_pingpong (`mtu1500-ud_s512.pcap`): Q_Key 0x11111111.
    static BYTES: [u8; 8] = [
        0x11, 0x11, 0x11, 0x11, // Q_Key
        0x00, // reserved
        0x00, 0x00, 0x12, // source QP
    ];

    #[test]
    fn deconstruct_and_construct() {
        let repr = Repr::parse(&Packet::new_checked(&BYTES[..]).unwrap()).unwrap();
        assert_eq!(
            repr,
            Repr {
                qkey: 0x1111_1111,
                src_qp: Qpn::new(0x12)
            }
        );
        let mut buf = [0xff; 8];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn truncated() {
        let err = Packet::new_checked(&BYTES[..7]).unwrap_err();
        assert_eq!(
            err,
            ParseError::Truncated {
                layer: Layer::Deth,
                need: 8,
                got: 7
            }
        );
    }
}
