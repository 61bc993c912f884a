//! MRA, message receipt acknowledgement: "I got your REQ (or REP), wait longer" (IBA vol. 1
//! §12.6.6, Table 107; kernel `ibta_vol1_c12.h` `CM_MRA_*`).

use crate::bytes::{get_u32, header_view, set_u32};
use crate::mad::{DATA_LEN, array, bits, place};
use crate::{Layer, ParseError};

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

/// Bytes of private data an MRA carries.
pub const PRIVATE_DATA_LEN: usize = field::PRIVATE_DATA.end - field::PRIVATE_DATA.start;

const MESSAGE_MRAED: u8 = 0xc0;
const SERVICE_TIMEOUT: u8 = 0xf8;

/// Message MRAed: the REQ (`CM_MSG_RESPONSE_REQ`).
pub const MRAED_REQ: u8 = 0;
/// Message MRAed: the REP.
pub const MRAED_REP: u8 = 1;
/// Message MRAed: a LAP.
pub const MRAED_OTHER: u8 = 2;

header_view!(
    "A view of a CM MRA message: the 232 bytes after the MAD header.",
    Layer::Cm("MRA"),
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

    /// Message MRAed (2 bits): [`MRAED_REQ`], [`MRAED_REP`], [`MRAED_OTHER`].
    pub fn message_mraed(&self) -> u8 {
        bits(self.buffer.as_ref()[field::BYTE_8], MESSAGE_MRAED)
    }

    /// Service Timeout (5 bits, 4.096 µs × 2^t): how long the sender needs.
    pub fn service_timeout(&self) -> u8 {
        bits(self.buffer.as_ref()[field::BYTE_9], SERVICE_TIMEOUT)
    }

    /// The private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

/// The fields of an MRA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID.
    pub local_comm_id: u32,
    /// Remote Communication ID.
    pub remote_comm_id: u32,
    /// Message MRAed (2 bits).
    pub message_mraed: u8,
    /// Service Timeout (5 bits).
    pub service_timeout: u8,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Reads an MRA.
    //= ibta:vol1/12.6.6
    //# Table 107 MRA Message Contents: comm IDs, Message MRAed (2 bits), Service Timeout
    //# (5 bits), private data from byte 10
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            message_mraed: packet.message_mraed(),
            service_timeout: packet.service_timeout(),
            private_data: array(packet.buffer.as_ref(), field::PRIVATE_DATA.start),
        })
    }

    /// Length of the emitted message.
    pub const fn buffer_len(&self) -> usize {
        DATA_LEN
    }

    /// Writes the message; reserved bits become 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let buf = packet.buffer.as_mut();
        set_u32(buf, field::LOCAL_COMM_ID, self.local_comm_id);
        set_u32(buf, field::REMOTE_COMM_ID, self.remote_comm_id);
        buf[field::BYTE_8] = place(self.message_mraed, MESSAGE_MRAED);
        buf[field::BYTE_9] = place(self.service_timeout, SERVICE_TIMEOUT);
        buf[field::PRIVATE_DATA].copy_from_slice(&self.private_data);
    }
}
