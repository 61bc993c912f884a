//! SIDR_REQ, service ID resolution request: a UD client asks the service behind a service ID
//! for its QP number and Q_Key (IBA vol. 1 §12.11.1, Table 119; kernel `ibta_vol1_c12.h`
//! `CM_SIDR_REQ_*`). rdma_cm sends it for `RDMA_PS_UDP` ids, with the `cma_hdr` at the head of
//! the private data.

use crate::ParseError;
use crate::bytes::{get_u16, get_u32, get_u64, set_u16, set_u32, set_u64};

mod field {
    use crate::field::Field;
    pub(super) const REQUEST_ID: Field = 0..4;
    pub(super) const PARTITION_KEY: Field = 4..6;
    /// Two reserved bytes.
    pub(super) const RESERVED: Field = 6..8;
    pub(super) const SERVICE_ID: Field = 8..16;
    pub(super) const PRIVATE_DATA: Field = 16..232;
}

/// Bytes of private data a SIDR_REQ carries.
pub const PRIVATE_DATA_LEN: usize = field::PRIVATE_DATA.end - field::PRIVATE_DATA.start;

crate::bytes::header_view!(
    "A view of a CM SIDR_REQ message: the 232 bytes after the MAD header.",
    crate::Layer::Cm("SIDR_REQ"),
    crate::mad::DATA_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Request ID: the sender's, which the SIDR_REP names.
    pub fn request_id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::REQUEST_ID)
    }

    /// Partition Key of the UD QP the client will send from.
    pub fn partition_key(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PARTITION_KEY)
    }

    /// Service ID to resolve.
    pub fn service_id(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::SERVICE_ID)
    }

    /// The private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

/// The fields of a SIDR_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request ID.
    pub request_id: u32,
    /// Partition Key.
    pub partition_key: u16,
    /// Service ID.
    pub service_id: u64,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Reads a SIDR_REQ.
    //= ibta:vol1/12.11.1
    //# Table 119 SIDR_REQ Message Contents: Request ID, P_Key, 2 reserved bytes, Service ID at
    //# byte 8, private data from byte 16
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            request_id: packet.request_id(),
            partition_key: packet.partition_key(),
            service_id: packet.service_id(),
            private_data: crate::mad::array(packet.buffer.as_ref(), field::PRIVATE_DATA.start),
        })
    }

    /// Length of the emitted message.
    pub const fn buffer_len(&self) -> usize {
        crate::mad::DATA_LEN
    }

    /// Writes the message; the reserved bytes become 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let buf = packet.buffer.as_mut();
        set_u32(buf, field::REQUEST_ID, self.request_id);
        set_u16(buf, field::PARTITION_KEY, self.partition_key);
        buf[field::RESERVED].fill(0);
        set_u64(buf, field::SERVICE_ID, self.service_id);
        buf[field::PRIVATE_DATA].copy_from_slice(&self.private_data);
    }
}
