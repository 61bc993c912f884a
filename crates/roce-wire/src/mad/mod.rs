//! Management Datagrams: the 24-byte MAD common header, and the Communication Management
//! messages that the RDMA connection manager exchanges through QP 1 (IBA vol. 1 ch. 12–13).
//!
//! A MAD is 256 bytes: this header, then 232 bytes of class data (kernel `ib_mad.h`
//! `IB_MGMT_MAD_HDR`, `IB_MGMT_MAD_DATA`). The CM messages ([`req`], [`mra`], [`rej`], [`rep`],
//! [`rtu`], [`dreq`], [`drep`], and for UD [`sidr_req`], [`sidr_rep`]) are views over those 232 bytes, each with a `Repr`; [`cm`] picks one by
//! attribute ID, [`cma`] reads the RDMA IP CM service ID and private-data header, and [`gsi`]
//! puts a MAD into a UD SEND to QP 1.

use crate::bytes::{get_u16, get_u32, get_u64, header_view, set_u16, set_u32, set_u64};
use crate::{Layer, ParseError};

pub mod cm;
pub mod cma;
pub mod drep;
pub mod dreq;
pub mod examples;
pub mod gsi;
mod message;
pub mod mra;
pub mod rej;
pub mod rep;
pub mod req;
pub mod rtu;
pub mod sidr_rep;
pub mod sidr_req;

mod field {
    use crate::field::Field;
    pub(super) const BASE_VERSION: usize = 0;
    pub(super) const MGMT_CLASS: usize = 1;
    pub(super) const CLASS_VERSION: usize = 2;
    pub(super) const METHOD: usize = 3;
    pub(super) const STATUS: Field = 4..6;
    pub(super) const CLASS_SPECIFIC: Field = 6..8;
    pub(super) const TID: Field = 8..16;
    pub(super) const ATTR_ID: Field = 16..18;
    pub(super) const RESERVED: Field = 18..20;
    pub(super) const ATTR_MOD: Field = 20..24;
}

/// Length of the MAD common header.
pub const HEADER_LEN: usize = field::ATTR_MOD.end;
/// Length of the class data after the header.
pub const DATA_LEN: usize = 232;
/// Length of a whole MAD.
pub const MAD_LEN: usize = HEADER_LEN + DATA_LEN;

/// The only base version (`IB_MGMT_BASE_VERSION`).
pub const BASE_VERSION: u8 = 1;
/// The Communication Management class (`IB_MGMT_CLASS_CM`).
pub const MGMT_CLASS_CM: u8 = 0x07;
/// The CM class version of IBA 1.2 and later (`IB_CM_CLASS_VERSION`).
pub const CM_CLASS_VERSION: u8 = 2;
/// Method `Send`: every CM message but ClassPortInfo uses it (`IB_MGMT_METHOD_SEND`).
pub const METHOD_SEND: u8 = 0x03;
/// Method `Get` (`IB_MGMT_METHOD_GET`).
pub const METHOD_GET: u8 = 0x01;
/// Method `Set` (`IB_MGMT_METHOD_SET`).
pub const METHOD_SET: u8 = 0x02;
/// Method `TrapRepress`, a response without the response bit (`IB_MGMT_METHOD_TRAP_REPRESS`).
pub const METHOD_TRAP_REPRESS: u8 = 0x07;
/// The response bit of a method (`IB_MGMT_METHOD_RESP`).
pub const METHOD_RESP: u8 = 0x80;
/// Method `GetResp`: the answer to a Get or a Set (`IB_MGMT_METHOD_GET_RESP`).
pub const METHOD_GET_RESP: u8 = 0x81;
/// The LID-routed subnet management class (`IB_MGMT_CLASS_SUBN_LID_ROUTED`): QP 0's only.
pub const MGMT_CLASS_SUBN_LID_ROUTED: u8 = 0x01;
/// The directed-route subnet management class (`IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE`): QP 0's
/// only.
pub const MGMT_CLASS_SUBN_DIRECTED_ROUTE: u8 = 0x81;
/// Class versions an agent can be registered for are below this (`MAX_MGMT_VERSION`).
pub const MAX_CLASS_VERSION: u8 = 8;
/// AttributeID ClassPortInfo, common to every class (`IB_MGMT_CLASSPORTINFO_ATTR_ID`).
pub const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
/// Status "unsupported method/attribute combination": what ib_mad answers a Get or Set that no
/// agent takes with (`IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB`).
pub const STATUS_UNSUPPORTED_METHOD_ATTRIB: u16 = 0x000c;

header_view!("A view of a MAD common header.", Layer::Mad, HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// BaseVersion: 1.
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }

    /// MgmtClass: 0x07 for CM.
    pub fn mgmt_class(&self) -> u8 {
        self.buffer.as_ref()[field::MGMT_CLASS]
    }

    /// ClassVersion: 2 for CM.
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }

    /// Method, with the response bit (0x80).
    pub fn method(&self) -> u8 {
        self.buffer.as_ref()[field::METHOD]
    }

    /// Status.
    pub fn status(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::STATUS)
    }

    /// ClassSpecific.
    pub fn class_specific(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CLASS_SPECIFIC)
    }

    /// TransactionID.
    pub fn tid(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::TID)
    }

    /// AttributeID.
    pub fn attr_id(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ATTR_ID)
    }

    /// AttributeModifier (the ECE options of a CM message, 0 when unused).
    pub fn attr_mod(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ATTR_MOD)
    }
}

/// The fields of a MAD common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// BaseVersion.
    pub base_version: u8,
    /// MgmtClass.
    pub mgmt_class: u8,
    /// ClassVersion.
    pub class_version: u8,
    /// Method.
    pub method: u8,
    /// Status.
    pub status: u16,
    /// ClassSpecific.
    pub class_specific: u16,
    /// TransactionID.
    pub tid: u64,
    /// AttributeID.
    pub attr_id: u16,
    /// AttributeModifier.
    pub attr_mod: u32,
}

impl Repr {
    /// The header of a CM message of `attr`, as ib_cm writes it (`cm_format_mad_hdr`): base
    /// version 1, class CM version 2, method Send, status 0.
    pub const fn cm(attr: cm::Attr, tid: u64) -> Self {
        Self {
            base_version: BASE_VERSION,
            mgmt_class: MGMT_CLASS_CM,
            class_version: CM_CLASS_VERSION,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            tid,
            attr_id: attr.id(),
            attr_mod: 0,
        }
    }

    /// Reads a MAD header. Any value is accepted: [`cm::CmMad::parse`] checks the CM ones.
    //= ibta:vol1/13.4.2
    //# MAD common header: BaseVersion, MgmtClass, ClassVersion, Method, Status, ClassSpecific,
    //# TransactionID, AttributeID, a reserved 16 bits, AttributeModifier; 256 bytes in all
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            base_version: packet.base_version(),
            mgmt_class: packet.mgmt_class(),
            class_version: packet.class_version(),
            method: packet.method(),
            status: packet.status(),
            class_specific: packet.class_specific(),
            tid: packet.tid(),
            attr_id: packet.attr_id(),
            attr_mod: packet.attr_mod(),
        })
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the reserved 16 bits become 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let buf = packet.buffer.as_mut();
        buf[field::BASE_VERSION] = self.base_version;
        buf[field::MGMT_CLASS] = self.mgmt_class;
        buf[field::CLASS_VERSION] = self.class_version;
        buf[field::METHOD] = self.method;
        set_u16(buf, field::STATUS, self.status);
        set_u16(buf, field::CLASS_SPECIFIC, self.class_specific);
        set_u64(buf, field::TID, self.tid);
        set_u16(buf, field::ATTR_ID, self.attr_id);
        set_u16(buf, field::RESERVED, 0);
        set_u32(buf, field::ATTR_MOD, self.attr_mod);
    }
}

/// The bits of `byte` under `mask`, shifted down: the CM tables' sub-byte fields, numbered from
/// the most significant bit as `IBA_FIELD_BLOC` in the kernel's `iba.h` does.
pub(crate) const fn bits(byte: u8, mask: u8) -> u8 {
    (byte & mask) >> mask.trailing_zeros()
}

/// `value` placed under `mask` (its bits beyond the field's width dropped).
pub(crate) const fn place(value: u8, mask: u8) -> u8 {
    (value << mask.trailing_zeros()) & mask
}

/// Whether the bit under `mask` is set.
pub(crate) const fn flag(byte: u8, mask: u8) -> bool {
    byte & mask != 0
}

/// `mask` if `set`.
pub(crate) const fn place_flag(set: bool, mask: u8) -> u8 {
    if set { mask } else { 0 }
}

/// A fixed-length byte block of a CM message (private data, ARI) as an array.
pub(crate) fn array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

#[cfg(test)]
mod tests;
