//! SIDR_REP, service ID resolution response: the service's QP number and Q_Key, or why not
//! (IBA vol. 1 §12.11.2, Table 120; kernel `ibta_vol1_c12.h` `CM_SIDR_REP_*`).

use core::fmt;

use crate::bytes::{get_u24, get_u32, get_u64, set_u24, set_u32, set_u64};
use crate::{ParseError, Qpn};

mod field {
    use crate::field::Field;
    pub(super) const REQUEST_ID: Field = 0..4;
    pub(super) const STATUS: usize = 4;
    pub(super) const ADDITIONAL_INFORMATION_LENGTH: usize = 5;
    /// Vendor ID (high 16 bits): reserved here.
    pub(super) const VENDOR_ID_H: core::ops::Range<usize> = 6..8;
    /// QPN (24 bits), then the vendor ID's low 8 bits.
    pub(super) const QPN: Field = 8..11;
    pub(super) const VENDOR_ID_L: usize = 11;
    pub(super) const SERVICE_ID: Field = 12..20;
    pub(super) const Q_KEY: Field = 20..24;
    pub(super) const ADDITIONAL_INFORMATION: Field = 24..96;
    pub(super) const PRIVATE_DATA: Field = 96..232;
}

/// Bytes of additional information a SIDR_REP carries.
pub const ADDITIONAL_INFORMATION_LEN: usize =
    field::ADDITIONAL_INFORMATION.end - field::ADDITIONAL_INFORMATION.start;

/// Bytes of private data a SIDR_REP carries.
pub const PRIVATE_DATA_LEN: usize = field::PRIVATE_DATA.end - field::PRIVATE_DATA.start;

/// The status of a SIDR_REP (Table 120; kernel `enum ib_cm_sidr_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SidrStatus {
    /// 0: the QPN and Q_Key are valid.
    Success,
    /// 1: no service behind the service ID.
    Unsupported,
    /// 2: the service rejected the request.
    Reject,
    /// 3: the service has no QP for it.
    NoQp,
    /// 4: ask elsewhere (the additional information says where).
    Redirect,
    /// 5: the class version is not supported.
    UnsupportedVersion,
    /// Any other number.
    Other(u8),
}

impl From<u8> for SidrStatus {
    fn from(raw: u8) -> Self {
        match raw {
            0 => Self::Success,
            1 => Self::Unsupported,
            2 => Self::Reject,
            3 => Self::NoQp,
            4 => Self::Redirect,
            5 => Self::UnsupportedVersion,
            other => Self::Other(other),
        }
    }
}

impl From<SidrStatus> for u8 {
    fn from(status: SidrStatus) -> Self {
        match status {
            SidrStatus::Success => 0,
            SidrStatus::Unsupported => 1,
            SidrStatus::Reject => 2,
            SidrStatus::NoQp => 3,
            SidrStatus::Redirect => 4,
            SidrStatus::UnsupportedVersion => 5,
            SidrStatus::Other(raw) => raw,
        }
    }
}

impl fmt::Display for SidrStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::Success => "success",
            Self::Unsupported => "unsupported service",
            Self::Reject => "rejected",
            Self::NoQp => "no QP",
            Self::Redirect => "redirect",
            Self::UnsupportedVersion => "unsupported version",
            Self::Other(raw) => return write!(f, "{raw}"),
        };
        write!(f, "{} ({text})", u8::from(*self))
    }
}

crate::bytes::header_view!(
    "A view of a CM SIDR_REP message: the 232 bytes after the MAD header.",
    crate::Layer::Cm("SIDR_REP"),
    crate::mad::DATA_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Request ID: the SIDR_REQ's.
    pub fn request_id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::REQUEST_ID)
    }

    /// Status.
    pub fn status(&self) -> SidrStatus {
        self.buffer.as_ref()[field::STATUS].into()
    }

    /// Additional Information Length.
    pub fn additional_information_length(&self) -> u8 {
        self.buffer.as_ref()[field::ADDITIONAL_INFORMATION_LENGTH]
    }

    /// The service's QP.
    pub fn qpn(&self) -> Qpn {
        Qpn::new(get_u24(self.buffer.as_ref(), field::QPN))
    }

    /// Service ID resolved.
    pub fn service_id(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::SERVICE_ID)
    }

    /// The service QP's Q_Key.
    pub fn q_key(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::Q_KEY)
    }

    /// Additional information.
    pub fn additional_information(&self) -> &[u8] {
        &self.buffer.as_ref()[field::ADDITIONAL_INFORMATION]
    }

    /// The private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

/// The fields of a SIDR_REP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request ID.
    pub request_id: u32,
    /// Status.
    pub status: SidrStatus,
    /// Additional Information Length.
    pub additional_information_length: u8,
    /// QPN.
    pub qpn: Qpn,
    /// Service ID.
    pub service_id: u64,
    /// Q_Key.
    pub q_key: u32,
    /// Additional information.
    pub additional_information: [u8; ADDITIONAL_INFORMATION_LEN],
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Reads a SIDR_REP.
    //= ibta:vol1/12.11.2
    //# Table 120 SIDR_REP Message Contents: Request ID, status, additional information
    //# length, QPN (24 bits) at byte 8, Service ID at byte 12, Q_Key at 20, additional
    //# information from 24, private data from 96
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            request_id: packet.request_id(),
            status: packet.status(),
            additional_information_length: packet.additional_information_length(),
            qpn: packet.qpn(),
            service_id: packet.service_id(),
            q_key: packet.q_key(),
            additional_information: crate::mad::array(
                packet.buffer.as_ref(),
                field::ADDITIONAL_INFORMATION.start,
            ),
            private_data: crate::mad::array(packet.buffer.as_ref(), field::PRIVATE_DATA.start),
        })
    }

    /// Length of the emitted message.
    pub const fn buffer_len(&self) -> usize {
        crate::mad::DATA_LEN
    }

    /// Writes the message; the vendor ID becomes 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let buf = packet.buffer.as_mut();
        set_u32(buf, field::REQUEST_ID, self.request_id);
        buf[field::STATUS] = self.status.into();
        buf[field::ADDITIONAL_INFORMATION_LENGTH] = self.additional_information_length;
        buf[field::VENDOR_ID_H].fill(0);
        set_u24(buf, field::QPN, self.qpn.value());
        buf[field::VENDOR_ID_L] = 0;
        set_u64(buf, field::SERVICE_ID, self.service_id);
        set_u32(buf, field::Q_KEY, self.q_key);
        buf[field::ADDITIONAL_INFORMATION].copy_from_slice(&self.additional_information);
        buf[field::PRIVATE_DATA].copy_from_slice(&self.private_data);
    }
}
