//! Why bytes were not accepted as a RoCEv2 packet.
//!
//! Every rejection has its own variant, so a receiver can count each reason under its own name
//! (as rxe's hw counters do) and a malformed capture maps to exactly one variant.

use core::fmt;

/// Why a datagram or frame was not accepted. Nothing in this crate panics on input; it returns one
/// of these instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Fewer bytes than the header (or the ICRC) needs.
    #[error("{layer}: need {need} bytes, got {got}")]
    Truncated {
        /// The header that did not fit.
        layer: Layer,
        /// Bytes needed from the start of that header's packet.
        need: usize,
        /// Bytes there were.
        got: usize,
    },
    /// BTH transport header version other than 0 (IBTA vol. 1 §9.2: TVer is 0).
    #[error("transport version {0}, expected 0")]
    BadTver(u8),
    /// An opcode that the opcode table does not define (RD, reserved, vendor).
    #[error("opcode {0:#04x} not supported")]
    UnsupportedOpcode(u8),
    /// The BTH pad count is larger than the bytes between the headers and the ICRC.
    #[error("pad count {pad} exceeds the {available} bytes after the headers")]
    BadPad {
        /// The BTH PadCnt field.
        pad: u8,
        /// Bytes between the last header and the ICRC.
        available: usize,
    },
    /// A payload on an opcode that carries a fixed amount (ACK, READ request, atomics, CNP, ...).
    #[error("opcode {opcode:#04x} carries {expected} payload bytes, got {got}")]
    BadPayloadLength {
        /// The opcode.
        opcode: u8,
        /// What the opcode table says it carries.
        expected: usize,
        /// What the packet carried.
        got: usize,
    },
    /// The invariant CRC does not match the packet.
    #[error("ICRC {found:#010x}, expected {expected:#010x}")]
    IcrcMismatch {
        /// The ICRC computed over the packet.
        expected: u32,
        /// The ICRC the packet carried.
        found: u32,
    },
    /// A frame whose Ethernet, VLAN, IP or UDP layer is malformed.
    #[error("{layer}: malformed")]
    Malformed {
        /// The layer that did not parse.
        layer: Layer,
    },
    /// A MAD whose base version is not 1 (ib_mad drops those, mad.c `validate_mad`).
    #[error("MAD base version {0}, expected 1")]
    BadMadBaseVersion(u8),
    /// A MAD of another management class or class version than CM's (class 0x07, version 2).
    #[error("MAD class {mgmt_class:#04x} version {class_version}, not CM (class 0x07 version 2)")]
    NotCm {
        /// The management class.
        mgmt_class: u8,
        /// The class version.
        class_version: u8,
    },
    /// A CM attribute that has no decoder here (ClassPortInfo, LAP, APR, or unknown).
    #[error("CM attribute {0:#06x} not supported")]
    UnsupportedCmAttribute(u16),
    /// A `cma_hdr` whose version is not 0 or whose IP version is neither 4 nor 6.
    #[error("cma_hdr version {version} IP version {ip_version}: not an RDMA IP CM header")]
    BadCmaHeader {
        /// The `cma_version` byte.
        version: u8,
        /// The high nibble of the `ip_version` byte.
        ip_version: u8,
    },
    /// An INT header whose hop count is above its five records ([`crate::int`]).
    #[error("INT header with {0} hops, at most 5")]
    BadIntHopCount(u8),
    /// A BTH that flags both an INT header and a PINT header ([`crate::int`]).
    #[error("BTH flags both an INT and a PINT header")]
    BadIntFlags,
}

/// A protocol layer, named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layer {
    /// Ethernet II (and its 802.1Q tags).
    Ethernet,
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
    /// UDP.
    Udp,
    /// Base Transport Header.
    Bth,
    /// Flush Extended Transport Header.
    Feth,
    /// Datagram Extended Transport Header.
    Deth,
    /// RDMA Extended Transport Header.
    Reth,
    /// Atomic Extended Transport Header.
    AtomicEth,
    /// ACK Extended Transport Header.
    Aeth,
    /// Atomic ACK Extended Transport Header.
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// Invalidate Extended Transport Header.
    Ieth,
    /// The 16 reserved bytes of a RoCEv2 CNP.
    CnpReserved,
    /// The 4-byte invariant CRC at the end of the packet.
    Icrc,
    /// The 24-byte MAD common header.
    Mad,
    /// A CM message (the 232 bytes after the MAD header) of the attribute named.
    Cm(&'static str),
    /// The 36-byte RDMA IP CM header (`cma_hdr`) at the start of a REQ's private data.
    CmaHdr,
    /// HPCC's 44-byte INT header, or HPCC-PINT's 4-byte one, after the BTH ([`crate::int`]).
    Int,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ethernet => "Ethernet",
            Self::Ipv4 => "IPv4",
            Self::Ipv6 => "IPv6",
            Self::Udp => "UDP",
            Self::Bth => "BTH",
            Self::Feth => "FETH",
            Self::Deth => "DETH",
            Self::Reth => "RETH",
            Self::AtomicEth => "AtomicETH",
            Self::Aeth => "AETH",
            Self::AtomicAckEth => "AtomicAckETH",
            Self::ImmDt => "ImmDt",
            Self::Ieth => "IETH",
            Self::CnpReserved => "CNP reserved",
            Self::Icrc => "ICRC",
            Self::Mad => "MAD",
            Self::Cm(name) => return write!(f, "CM {name}"),
            Self::CmaHdr => "cma_hdr",
            Self::Int => "INT",
        })
    }
}

/// Why a `Repr` could not be emitted: API misuse, never wire input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmitError {
    /// The buffer is not the length that `buffer_len()` asked for.
    #[error("buffer of {got} bytes, the packet needs exactly {need}")]
    BufferLength {
        /// What `buffer_len()` returned.
        need: usize,
        /// What was passed.
        got: usize,
    },
    /// The opcode needs an extension header that the `Repr` does not have.
    #[error("opcode {opcode:#04x} needs a {layer} header")]
    MissingHeader {
        /// The opcode.
        opcode: u8,
        /// The header.
        layer: Layer,
    },
    /// The `Repr` has an extension header that the opcode does not carry.
    #[error("opcode {opcode:#04x} does not carry a {layer} header")]
    UnexpectedHeader {
        /// The opcode.
        opcode: u8,
        /// The header.
        layer: Layer,
    },
    /// The opcode is not in the opcode table.
    #[error("opcode {0:#04x} not supported")]
    UnsupportedOpcode(u8),
    /// The payload length breaks the opcode's rule (for example a payload on an ACK).
    #[error("opcode {opcode:#04x} cannot carry {len} payload bytes")]
    PayloadLength {
        /// The opcode.
        opcode: u8,
        /// The payload length asked for.
        len: usize,
    },
}
