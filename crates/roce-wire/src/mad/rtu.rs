//! RTU, ready to use: the active side's last word of the handshake (IBA vol. 1 §12.6.9,
//! Table 111; kernel `ibta_vol1_c12.h` `CM_RTU_*`).

use crate::ParseError;
use crate::mad::message::cm_message;

mod field {
    use crate::field::Field;
    pub(super) const LOCAL_COMM_ID: Field = 0..4;
    pub(super) const REMOTE_COMM_ID: Field = 4..8;
    pub(super) const PRIVATE_DATA: Field = 8..232;
}

cm_message! {
    name: "RTU",
    a: "an",
    remote: remote_comm_id,
    emit_doc: "Writes the message.",
}

impl Repr {
    /// Reads an RTU.
    //= ibta:vol1/12.6.9
    //# Table 111 RTU Message Contents: comm IDs, private data from byte 8
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self::read(packet))
    }
}
