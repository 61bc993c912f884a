//! REJ, reject: the answer to a REQ (or REP) that cannot be accepted, with a reason (IBA vol. 1
//! §12.6.7, Tables 108–109; kernel `ibta_vol1_c12.h` `CM_REJ_*`, `ib_cm.h` `ib_cm_rej_reason`).

use core::fmt;

use crate::bytes::{get_u16, get_u32, header_view, set_u16, set_u32};
use crate::mad::{DATA_LEN, array, bits, place};
use crate::{Layer, ParseError};

mod field {
    use crate::field::Field;
    pub(super) const LOCAL_COMM_ID: Field = 0..4;
    pub(super) const REMOTE_COMM_ID: Field = 4..8;
    /// Message Rejected (7:6).
    pub(super) const BYTE_8: usize = 8;
    /// Reject Info Length (7:1).
    pub(super) const BYTE_9: usize = 9;
    pub(super) const REASON: Field = 10..12;
    pub(super) const ARI: Field = 12..84;
    pub(super) const PRIVATE_DATA: Field = 84..232;
}

/// Bytes of Additional Rejection Information.
pub const ARI_LEN: usize = field::ARI.end - field::ARI.start;
/// Bytes of private data a REJ carries.
pub const PRIVATE_DATA_LEN: usize = field::PRIVATE_DATA.end - field::PRIVATE_DATA.start;

const MESSAGE_REJECTED: u8 = 0xc0;
const REJECT_INFO_LENGTH: u8 = 0xfe;

/// Message Rejected: the REQ (`CM_MSG_RESPONSE_REQ`).
pub const REJECTED_REQ: u8 = 0;
/// Message Rejected: the REP.
pub const REJECTED_REP: u8 = 1;
/// Message Rejected: another message.
pub const REJECTED_OTHER: u8 = 2;

macro_rules! reasons {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $text:literal;)*) => {
        /// Why a REQ or REP was rejected, with the numbers of IBA vol. 1 Table 109 as the
        /// kernel's `enum ib_cm_rej_reason` gives them. Any other number is kept in `Other`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum RejectReason {
            $($(#[$doc])* $name,)*
            /// A number with no name here.
            Other(u16),
        }

        impl From<u16> for RejectReason {
            fn from(raw: u16) -> Self {
                match raw {
                    $($value => Self::$name,)*
                    other => Self::Other(other),
                }
            }
        }

        impl From<RejectReason> for u16 {
            fn from(reason: RejectReason) -> Self {
                match reason {
                    $(RejectReason::$name => $value,)*
                    RejectReason::Other(raw) => raw,
                }
            }
        }

        impl RejectReason {
            /// What the reason means, in a few words (`None` for `Other`).
            pub const fn text(self) -> Option<&'static str> {
                match self {
                    $(Self::$name => Some($text),)*
                    Self::Other(_) => None,
                }
            }
        }
    };
}

reasons! {
    /// No QP available.
    NoQp = 1, "no QP";
    /// No EEC available.
    NoEec = 2, "no EEC";
    /// No resources.
    NoResources = 3, "no resources";
    /// Timeout: the REQ's sender did not answer in time.
    Timeout = 4, "timeout";
    /// Unsupported request.
    Unsupported = 5, "unsupported";
    /// Invalid communication ID.
    InvalidCommId = 6, "invalid comm ID";
    /// Invalid communication instance.
    InvalidCommInstance = 7, "invalid comm instance";
    /// No listener for the service ID.
    InvalidServiceId = 8, "invalid service ID";
    /// Transport service type not the listener's.
    InvalidTransportType = 9, "invalid transport type";
    /// Stale connection: the QP is still in timewait with that peer.
    StaleConn = 10, "stale connection";
    /// RDC does not exist.
    RdcNotExist = 11, "RDC does not exist";
    /// Invalid primary GID.
    InvalidGid = 12, "invalid GID";
    /// Invalid primary LID.
    InvalidLid = 13, "invalid LID";
    /// Invalid primary SL.
    InvalidSl = 14, "invalid SL";
    /// Invalid primary traffic class.
    InvalidTrafficClass = 15, "invalid traffic class";
    /// Invalid primary hop limit.
    InvalidHopLimit = 16, "invalid hop limit";
    /// Invalid primary packet rate.
    InvalidPacketRate = 17, "invalid packet rate";
    /// Invalid alternate GID.
    InvalidAltGid = 18, "invalid alternate GID";
    /// Invalid alternate LID.
    InvalidAltLid = 19, "invalid alternate LID";
    /// Invalid alternate SL.
    InvalidAltSl = 20, "invalid alternate SL";
    /// Invalid alternate traffic class.
    InvalidAltTrafficClass = 21, "invalid alternate traffic class";
    /// Invalid alternate hop limit.
    InvalidAltHopLimit = 22, "invalid alternate hop limit";
    /// Invalid alternate packet rate.
    InvalidAltPacketRate = 23, "invalid alternate packet rate";
    /// Port CM redirect.
    PortCmRedirect = 24, "port CM redirect";
    /// Port redirect.
    PortRedirect = 25, "port redirect";
    /// Invalid path MTU.
    InvalidMtu = 26, "invalid MTU";
    /// Insufficient responder resources.
    InsufficientRespResources = 27, "insufficient responder resources";
    /// Consumer defined: what `rdma_reject` sends.
    ConsumerDefined = 28, "consumer defined";
    /// Invalid RNR retry count.
    InvalidRnrRetry = 29, "invalid RNR retry";
    /// Duplicate local communication ID.
    DuplicateLocalCommId = 30, "duplicate local comm ID";
    /// Unsupported class version.
    InvalidClassVersion = 31, "invalid class version";
    /// Invalid primary flow label.
    InvalidFlowLabel = 32, "invalid flow label";
    /// Invalid alternate flow label.
    InvalidAltFlowLabel = 33, "invalid alternate flow label";
    /// A vendor option (ECE) is not supported.
    VendorOptionNotSupported = 35, "vendor option not supported";
}

impl fmt::Display for RejectReason {
    /// The number, then what it means: `8 (invalid service ID)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = u16::from(*self);
        match self.text() {
            Some(text) => write!(f, "{raw} ({text})"),
            None => write!(f, "{raw}"),
        }
    }
}

header_view!(
    "A view of a CM REJ message: the 232 bytes after the MAD header.",
    Layer::Cm("REJ"),
    DATA_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Local Communication ID: the sender's.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }

    /// Remote Communication ID: the receiver's (0 when rejecting an unknown REQ's sender).
    pub fn remote_comm_id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }

    /// Message Rejected (2 bits): [`REJECTED_REQ`], [`REJECTED_REP`], [`REJECTED_OTHER`].
    pub fn message_rejected(&self) -> u8 {
        bits(self.buffer.as_ref()[field::BYTE_8], MESSAGE_REJECTED)
    }

    /// Reject Info Length (7 bits): the bytes of ARI that mean something.
    pub fn reject_info_length(&self) -> u8 {
        bits(self.buffer.as_ref()[field::BYTE_9], REJECT_INFO_LENGTH)
    }

    /// The raw reason.
    pub fn reason_raw(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::REASON)
    }

    /// The reason.
    pub fn reason(&self) -> RejectReason {
        RejectReason::from(self.reason_raw())
    }

    /// Additional Rejection Information (72 bytes, of which `reject_info_length` are used).
    pub fn ari(&self) -> &[u8] {
        &self.buffer.as_ref()[field::ARI]
    }

    /// The private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

/// The fields of a REJ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID.
    pub local_comm_id: u32,
    /// Remote Communication ID.
    pub remote_comm_id: u32,
    /// Message Rejected (2 bits).
    pub message_rejected: u8,
    /// Reject Info Length (7 bits).
    pub reject_info_length: u8,
    /// Reason.
    pub reason: RejectReason,
    /// Additional Rejection Information.
    pub ari: [u8; ARI_LEN],
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Reads a REJ.
    //= ibta:vol1/12.6.7
    //# Table 108 REJ Message Contents: comm IDs, Message Rejected (2 bits), Reject Info
    //# Length (7 bits), Reason (16 bits), 72 bytes of ARI, private data from byte 84
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        let buf = packet.buffer.as_ref();
        Ok(Self {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            message_rejected: packet.message_rejected(),
            reject_info_length: packet.reject_info_length(),
            reason: packet.reason(),
            ari: array(buf, field::ARI.start),
            private_data: array(buf, field::PRIVATE_DATA.start),
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
        buf[field::BYTE_8] = place(self.message_rejected, MESSAGE_REJECTED);
        buf[field::BYTE_9] = place(self.reject_info_length, REJECT_INFO_LENGTH);
        set_u16(buf, field::REASON, self.reason.into());
        buf[field::ARI].copy_from_slice(&self.ari);
        buf[field::PRIVATE_DATA].copy_from_slice(&self.private_data);
    }
}
