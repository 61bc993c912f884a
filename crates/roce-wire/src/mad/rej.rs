//! REJ, reject: the answer to a REQ (or REP) that cannot be accepted, with a reason (IBA vol. 1
//! §12.6.7, Tables 108–109; kernel `ibta_vol1_c12.h` `CM_REJ_*`, `ib_cm.h` `ib_cm_rej_reason`).
//! Its Remote Communication ID is 0 when it rejects a REQ whose sender is unknown.

use core::fmt;

use crate::ParseError;
use crate::bytes::{get_u16, set_u16};
use crate::mad::message::cm_message;
use crate::mad::{array, bits, place};

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

cm_message! {
    name: "REJ",
    a: "a",
    remote: remote_comm_id,
    fields: {
        /// Message Rejected (2 bits).
        message_rejected: u8,
        /// Reject Info Length (7 bits).
        reject_info_length: u8,
        /// Reason.
        reason: RejectReason,
        /// Additional Rejection Information.
        ari: [u8; ARI_LEN] = ari_array,
    },
    emit_with: emit_fields,
    emit_doc: "Writes the message; reserved bits become 0.",
}

impl<T: AsRef<[u8]>> Packet<T> {
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

    /// The ARI as `Repr` keeps it.
    fn ari_array(&self) -> [u8; ARI_LEN] {
        array(self.buffer.as_ref(), field::ARI.start)
    }
}

impl Repr {
    /// Reads a REJ.
    //= ibta:vol1/12.6.7
    //# Table 108 REJ Message Contents: comm IDs, Message Rejected (2 bits), Reject Info
    //# Length (7 bits), Reason (16 bits), 72 bytes of ARI, private data from byte 84
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self::read(packet))
    }

    /// The fields of its own, for `emit`.
    fn emit_fields(&self, buf: &mut [u8]) {
        buf[field::BYTE_8] = place(self.message_rejected, MESSAGE_REJECTED);
        buf[field::BYTE_9] = place(self.reject_info_length, REJECT_INFO_LENGTH);
        set_u16(buf, field::REASON, self.reason.into());
        buf[field::ARI].copy_from_slice(&self.ari);
    }
}
