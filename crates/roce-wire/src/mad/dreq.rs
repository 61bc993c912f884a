//! DREQ, disconnect request (IBA vol. 1 §12.6.10, Table 112; kernel `ibta_vol1_c12.h`
//! `CM_DREQ_*`).

use crate::bytes::{get_u24, set_u24};
use crate::mad::message::cm_message;
use crate::{ParseError, Qpn};

mod field {
    use crate::field::Field;
    pub(super) const LOCAL_COMM_ID: Field = 0..4;
    pub(super) const REMOTE_COMM_ID: Field = 4..8;
    /// Remote QPN/EECN (24 bits), then 8 reserved bits.
    pub(super) const REMOTE_QPN: Field = 8..11;
    pub(super) const PRIVATE_DATA: Field = 12..232;
}

cm_message! {
    name: "DREQ",
    a: "a",
    remote: remote_comm_id,
    fields: {
        /// Remote QPN/EECN.
        remote_qpn: Qpn,
    },
    emit_with: emit_fields,
    emit_doc: "Writes the message; the reserved byte becomes 0.",
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Remote QPN/EECN: the receiver's QP.
    pub fn remote_qpn(&self) -> Qpn {
        Qpn::new(get_u24(self.buffer.as_ref(), field::REMOTE_QPN))
    }
}

impl Repr {
    /// Reads a DREQ.
    //= ibta:vol1/12.6.10
    //# Table 112 DREQ Message Contents: comm IDs, Remote QPN/EECN (24 bits), private data
    //# from byte 12
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self::read(packet))
    }

    /// The fields of its own, for `emit`.
    fn emit_fields(&self, buf: &mut [u8]) {
        set_u24(buf, field::REMOTE_QPN, self.remote_qpn.value());
        buf[field::REMOTE_QPN.end] = 0;
    }
}
