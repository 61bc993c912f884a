//! MRA, message receipt acknowledgement: "I got your REQ (or REP), wait longer" (IBA vol. 1
//! §12.6.6, Table 107; kernel `ibta_vol1_c12.h` `CM_MRA_*`).

use crate::ParseError;
use crate::mad::message::cm_message;
use crate::mad::{bits, place};

mod field {
    use crate::field::Field;
    pub(super) const LOCAL_COMM_ID: Field = 0..4;
    pub(super) const REMOTE_COMM_ID: Field = 4..8;
    /// Message MRAed (7:6).
    pub(super) const BYTE_8: usize = 8;
    /// Service Timeout (7:3).
    pub(super) const BYTE_9: usize = 9;
    pub(super) const PRIVATE_DATA: Field = 10..232;
}

const MESSAGE_MRAED: u8 = 0xc0;
const SERVICE_TIMEOUT: u8 = 0xf8;

/// Message MRAed: the REQ (`CM_MSG_RESPONSE_REQ`).
pub const MRAED_REQ: u8 = 0;
/// Message MRAed: the REP.
pub const MRAED_REP: u8 = 1;
/// Message MRAed: a LAP.
pub const MRAED_OTHER: u8 = 2;

cm_message! {
    name: "MRA",
    a: "an",
    remote: remote_comm_id,
    fields: {
        /// Message MRAed (2 bits).
        message_mraed: u8,
        /// Service Timeout (5 bits).
        service_timeout: u8,
    },
    emit_with: emit_fields,
    emit_doc: "Writes the message; reserved bits become 0.",
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Message MRAed (2 bits): [`MRAED_REQ`], [`MRAED_REP`], [`MRAED_OTHER`].
    pub fn message_mraed(&self) -> u8 {
        bits(self.buffer.as_ref()[field::BYTE_8], MESSAGE_MRAED)
    }

    /// Service Timeout (5 bits, 4.096 µs × 2^t): how long the sender needs.
    pub fn service_timeout(&self) -> u8 {
        bits(self.buffer.as_ref()[field::BYTE_9], SERVICE_TIMEOUT)
    }
}

impl Repr {
    /// Reads an MRA.
    //= ibta:vol1/12.6.6
    //# Table 107 MRA Message Contents: comm IDs, Message MRAed (2 bits), Service Timeout
    //# (5 bits), private data from byte 10
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self::read(packet))
    }

    /// The fields of its own, for `emit`.
    fn emit_fields(&self, buf: &mut [u8]) {
        buf[field::BYTE_8] = place(self.message_mraed, MESSAGE_MRAED);
        buf[field::BYTE_9] = place(self.service_timeout, SERVICE_TIMEOUT);
    }
}
