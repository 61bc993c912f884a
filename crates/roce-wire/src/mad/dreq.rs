//! DREQ, disconnect request (IBA vol. 1 §12.6.10, Table 112; kernel `ibta_vol1_c12.h`
//! `CM_DREQ_*`).

use crate::bytes::{get_u24, get_u32, header_view, set_u24, set_u32};
use crate::mad::{DATA_LEN, array};
use crate::{Layer, ParseError, Qpn};

mod field {
    use crate::field::Field;
    pub(super) const LOCAL_COMM_ID: Field = 0..4;
    pub(super) const REMOTE_COMM_ID: Field = 4..8;
    /// Remote QPN/EECN (24 bits), then 8 reserved bits.
    pub(super) const REMOTE_QPN: Field = 8..11;
    pub(super) const PRIVATE_DATA: Field = 12..232;
}

/// Bytes of private data a DREQ carries.
pub const PRIVATE_DATA_LEN: usize = field::PRIVATE_DATA.end - field::PRIVATE_DATA.start;

header_view!(
    "A view of a CM DREQ message: the 232 bytes after the MAD header.",
    Layer::Cm("DREQ"),
    DATA_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Local Communication ID: the sender's.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }

    /// Remote Communication ID: the receiver's.
    pub fn remote_comm_id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }

    /// Remote QPN/EECN: the receiver's QP.
    pub fn remote_qpn(&self) -> Qpn {
        Qpn::new(get_u24(self.buffer.as_ref(), field::REMOTE_QPN))
    }

    /// The private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

/// The fields of a DREQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID.
    pub local_comm_id: u32,
    /// Remote Communication ID.
    pub remote_comm_id: u32,
    /// Remote QPN/EECN.
    pub remote_qpn: Qpn,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Reads a DREQ.
    //= ibta:vol1/12.6.10
    //# Table 112 DREQ Message Contents: comm IDs, Remote QPN/EECN (24 bits), private data
    //# from byte 12
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            remote_qpn: packet.remote_qpn(),
            private_data: array(packet.buffer.as_ref(), field::PRIVATE_DATA.start),
        })
    }

    /// Length of the emitted message.
    pub const fn buffer_len(&self) -> usize {
        DATA_LEN
    }

    /// Writes the message; the reserved byte becomes 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let buf = packet.buffer.as_mut();
        set_u32(buf, field::LOCAL_COMM_ID, self.local_comm_id);
        set_u32(buf, field::REMOTE_COMM_ID, self.remote_comm_id);
        set_u24(buf, field::REMOTE_QPN, self.remote_qpn.value());
        buf[field::REMOTE_QPN.end] = 0;
        buf[field::PRIVATE_DATA].copy_from_slice(&self.private_data);
    }
}
