//! ACK Extended Transport Header: a syndrome and the MSN, in ACKs, NAKs, READ responses and atomic
//! ACKs (IBA vol. 1 §9.3.5 and §9.7.5.2, Tables 44–46).
//!
//! The syndrome is decoded once, into [`Syndrome`], rather than masked at every use.

use core::fmt;

use crate::bytes::{get_u24, header_view, set_u24};
use crate::{Layer, ParseError};

mod field {
    use crate::field::Field;
    pub(super) const SYNDROME: usize = 0;
    pub(super) const MSN: Field = 1..4;
}

/// Length of the AETH.
pub const HEADER_LEN: usize = field::MSN.end;

const TYPE_MASK: u8 = 0x60;
const VALUE_MASK: u8 = 0x1f;
const TYPE_ACK: u8 = 0x00;
const TYPE_RNR_NAK: u8 = 0x20;
const TYPE_NAK: u8 = 0x60;

header_view!(
    "A view of an ACK Extended Transport Header.",
    Layer::Aeth,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The raw syndrome byte.
    pub fn syndrome_raw(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }

    /// The decoded syndrome.
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from(self.syndrome_raw())
    }

    /// MSN: the responder's message sequence number.
    pub fn msn(&self) -> u32 {
        get_u24(self.buffer.as_ref(), field::MSN)
    }
}

/// What an AETH says (IBA vol. 1 Table 44: bits 6:5 are the type, 4:0 its value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// ACK, with an end-to-end flow-control credit code.
    Ack {
        /// The credit code, 0..=31 (31: no credit information, what rxe always sends).
        credits: CreditCode,
    },
    /// Receiver Not Ready NAK: retry after the timer.
    RnrNak {
        /// The RNR timer code, 0..=31.
        timer: RnrTimer,
    },
    /// NAK.
    Nak(NakCode),
    /// Bit 7 set or type 0b10: reserved encodings, kept so that every byte round-trips.
    Reserved(u8),
}

impl From<u8> for Syndrome {
    fn from(raw: u8) -> Self {
        let value = raw & VALUE_MASK;
        if raw & 0x80 != 0 {
            return Self::Reserved(raw);
        }
        match raw & TYPE_MASK {
            TYPE_ACK => Self::Ack {
                credits: CreditCode(value),
            },
            TYPE_RNR_NAK => Self::RnrNak {
                timer: RnrTimer(value),
            },
            TYPE_NAK => Self::Nak(NakCode::from(value)),
            _ => Self::Reserved(raw),
        }
    }
}

impl From<Syndrome> for u8 {
    fn from(syndrome: Syndrome) -> Self {
        match syndrome {
            Syndrome::Ack { credits } => TYPE_ACK | (credits.0 & VALUE_MASK),
            Syndrome::RnrNak { timer } => TYPE_RNR_NAK | (timer.0 & VALUE_MASK),
            Syndrome::Nak(code) => TYPE_NAK | (Self::from(code) & VALUE_MASK),
            Syndrome::Reserved(raw) => raw,
        }
    }
}

impl fmt::Display for Syndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ack { credits } => write!(f, "ACK credits={credits}"),
            Self::RnrNak { timer } => write!(f, "RNR_NAK timer={timer}"),
            Self::Nak(code) => write!(f, "NAK {code}"),
            Self::Reserved(raw) => write!(f, "RESERVED({raw:#04x})"),
        }
    }
}

/// An AETH credit code (IBA vol. 1 Table 45).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreditCode(u8);

impl CreditCode {
    /// Code 31: the ACK carries no credit information (rxe's `AETH_ACK_UNLIMITED`).
    pub const UNLIMITED: Self = Self(0x1f);

    /// A credit code from its low 5 bits.
    pub const fn new(code: u8) -> Self {
        Self(code & VALUE_MASK)
    }

    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The number of receive WQEs the code stands for, or `None` for code 31 (no information).
    pub const fn credits(self) -> Option<u32> {
        if self.0 == Self::UNLIMITED.0 {
            None
        } else {
            Some(CREDITS[self.0 as usize])
        }
    }
}

impl fmt::Display for CreditCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.credits() {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("unlimited"),
        }
    }
}

/// An RNR NAK timer code (IBA vol. 1 Table 46): how long the requester waits before retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RnrTimer(u8);

impl RnrTimer {
    /// A timer code from its low 5 bits.
    pub const fn new(code: u8) -> Self {
        Self(code & VALUE_MASK)
    }

    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The delay in microseconds. Code 0 is the longest, 655.36 ms. Code 0x19 is 61.44 ms as the
    /// spec says (rxe's table has 61410, a typo; rdmavt's `ib_rvt_rnr_table` has 61440).
    pub const fn micros(self) -> u32 {
        RNR_TIMER_MICROS[self.0 as usize]
    }
}

impl fmt::Display for RnrTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({}us)", self.0, self.micros())
    }
}

/// The NAK codes (IBA vol. 1 Table 44).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// PSN sequence error: the responder expected another PSN; retry from it.
    PsnSeqErr,
    /// Invalid request (unsupported opcode, bad length, ...).
    InvalidRequest,
    /// Remote access error (R_Key, bounds, access rights).
    RemoteAccessError,
    /// Remote operational error.
    RemoteOperationalError,
    /// Invalid RD request (RD only).
    InvalidRdRequest,
    /// Codes 5..=31, reserved.
    Reserved(u8),
}

impl From<u8> for NakCode {
    fn from(code: u8) -> Self {
        match code & VALUE_MASK {
            0 => Self::PsnSeqErr,
            1 => Self::InvalidRequest,
            2 => Self::RemoteAccessError,
            3 => Self::RemoteOperationalError,
            4 => Self::InvalidRdRequest,
            other => Self::Reserved(other),
        }
    }
}

impl From<NakCode> for u8 {
    fn from(code: NakCode) -> Self {
        match code {
            NakCode::PsnSeqErr => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(other) => other & VALUE_MASK,
        }
    }
}

impl fmt::Display for NakCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PsnSeqErr => f.write_str("PSN_SEQ_ERR"),
            Self::InvalidRequest => f.write_str("INVALID_REQUEST"),
            Self::RemoteAccessError => f.write_str("REMOTE_ACCESS_ERROR"),
            Self::RemoteOperationalError => f.write_str("REMOTE_OPERATIONAL_ERROR"),
            Self::InvalidRdRequest => f.write_str("INVALID_RD_REQUEST"),
            Self::Reserved(code) => write!(f, "RESERVED({code})"),
        }
    }
}

/// The fields of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The decoded syndrome.
    pub syndrome: Syndrome,
    /// MSN, 24 bits.
    pub msn: u32,
}

impl Repr {
    /// An ACK with no credit information, as rxe sends (`AETH_ACK_UNLIMITED`).
    pub const fn ack(msn: u32) -> Self {
        Self {
            syndrome: Syndrome::Ack {
                credits: CreditCode::UNLIMITED,
            },
            msn,
        }
    }

    /// Reads the header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            syndrome: packet.syndrome(),
            msn: packet.msn(),
        })
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; only the low 24 bits of the MSN are kept.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let buf = packet.buffer.as_mut();
        buf[field::SYNDROME] = u8::from(self.syndrome);
        set_u24(buf, field::MSN, self.msn & 0x00ff_ffff);
    }
}

/// IBA vol. 1 Table 45 (rdmavt/rc.c `credit_table`), codes 0..=30.
const CREDITS: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// IBA vol. 1 Table 46 in microseconds (rdmavt/qp.c `ib_rvt_rnr_table`), codes 0..=31.
const RNR_TIMER_MICROS: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rxe_ack() {
        // An rxe ACK: syndrome 0x1f (ACK, unlimited credits), MSN 10.
        let bytes = [0x1f, 0x00, 0x00, 0x0a];
        let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(repr, Repr::ack(10));
        let mut buf = [0; 4];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, bytes);
    }

    #[test]
    fn syndromes_decode_once() {
        assert_eq!(Syndrome::from(0x60), Syndrome::Nak(NakCode::PsnSeqErr));
        assert_eq!(Syndrome::from(0x61), Syndrome::Nak(NakCode::InvalidRequest));
        assert_eq!(
            Syndrome::from(0x62),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            Syndrome::from(0x63),
            Syndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            Syndrome::from(0x2c),
            Syndrome::RnrNak {
                timer: RnrTimer::new(12)
            }
        );
        assert_eq!(
            Syndrome::from(0x05),
            Syndrome::Ack {
                credits: CreditCode::new(5)
            }
        );
        assert_eq!(Syndrome::from(0x40), Syndrome::Reserved(0x40));
        assert_eq!(Syndrome::from(0x9f), Syndrome::Reserved(0x9f));
    }

    #[test]
    fn every_syndrome_byte_round_trips() {
        for raw in 0..=u8::MAX {
            assert_eq!(u8::from(Syndrome::from(raw)), raw);
        }
    }

    #[test]
    fn rnr_timer_values() {
        // rc_pingpong's min_rnr_timer 12 is 0.64 ms.
        assert_eq!(RnrTimer::new(12).micros(), 640);
        assert_eq!(RnrTimer::new(0).micros(), 655_360);
        assert_eq!(RnrTimer::new(1).micros(), 10);
        assert_eq!(RnrTimer::new(0x19).micros(), 61_440);
        assert_eq!(RnrTimer::new(31).micros(), 491_520);
    }

    #[test]
    fn credit_codes() {
        assert_eq!(CreditCode::new(0).credits(), Some(0));
        assert_eq!(CreditCode::new(6).credits(), Some(8));
        assert_eq!(CreditCode::new(30).credits(), Some(32768));
        assert_eq!(CreditCode::UNLIMITED.credits(), None);
    }

    #[test]
    fn truncated() {
        let err = Packet::new_checked(&[0x1f, 0, 0][..]).unwrap_err();
        assert_eq!(
            err,
            ParseError::Truncated {
                layer: Layer::Aeth,
                need: 4,
                got: 3
            }
        );
    }
}
