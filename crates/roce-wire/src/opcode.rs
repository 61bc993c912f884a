//! The BTH opcode and the one table that says what follows it.
//!
//! An opcode is a transport (bits 7:5: RC 0x00, UC 0x20, RD 0x40, UD 0x60, CNP 0x80) and an
//! operation (bits 4:0), IBTA vol. 1 §9.2 Table 35 (opcodes) and §9.3 (which headers each carries).
//! The layouts below mirror the kernel's `rxe_opcode[]` (drivers/infiniband/sw/rxe/rxe_opcode.c)
//! and `include/rdma/ib_pack.h`; the payload rules mirror rxe's `check_length` (rxe_resp.c). RD is
//! not used by RoCE and is not in the table, so RD opcodes are `Unknown` and rejected.

use core::fmt;

/// Which transport service an opcode belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected.
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
    /// RoCEv2 Congestion Notification Packet (Annex A17.9.3).
    Cnp,
}

/// What an opcode does, whatever its transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND (also with immediate data or invalidate).
    Send,
    /// RDMA WRITE (also with immediate data).
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response.
    RdmaReadResponse,
    /// ACKNOWLEDGE (ACK, NAK, RNR NAK).
    Acknowledge,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAcknowledge,
    /// ATOMIC compare and swap.
    CompareSwap,
    /// ATOMIC fetch and add.
    FetchAdd,
    /// FLUSH (IBA 1.5).
    Flush,
    /// ATOMIC WRITE (IBA 1.5).
    AtomicWrite,
    /// Congestion notification.
    Cnp,
}

/// Where a packet stands in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The whole message in one packet.
    Only,
}

/// Which extension headers follow the BTH. They always come in the order of the fields here
/// (IBTA vol. 1 §9.2 Figure 104; FETH precedes RETH in FLUSH, rxe_opcode.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[allow(clippy::struct_excessive_bools)]
pub struct Headers {
    /// FLUSH Extended Transport Header, 4 bytes.
    pub feth: bool,
    /// Datagram Extended Transport Header, 8 bytes.
    pub deth: bool,
    /// RDMA Extended Transport Header, 16 bytes.
    pub reth: bool,
    /// Atomic Extended Transport Header, 28 bytes.
    pub atomic_eth: bool,
    /// ACK Extended Transport Header, 4 bytes.
    pub aeth: bool,
    /// Atomic ACK Extended Transport Header, 8 bytes.
    pub atomic_ack_eth: bool,
    /// Immediate data, 4 bytes.
    pub immdt: bool,
    /// Invalidate Extended Transport Header, 4 bytes.
    pub ieth: bool,
    /// The 16 reserved bytes of a RoCEv2 CNP.
    pub cnp_reserved: bool,
}

impl Headers {
    /// No extension header.
    pub const NONE: Self = Self {
        feth: false,
        deth: false,
        reth: false,
        atomic_eth: false,
        aeth: false,
        atomic_ack_eth: false,
        immdt: false,
        ieth: false,
        cnp_reserved: false,
    };

    /// Total length of the extension headers, BTH excluded.
    pub const fn len(&self) -> usize {
        let mut len = 0;
        if self.feth {
            len += crate::feth::HEADER_LEN;
        }
        if self.deth {
            len += crate::deth::HEADER_LEN;
        }
        if self.reth {
            len += crate::reth::HEADER_LEN;
        }
        if self.atomic_eth {
            len += crate::atomic_eth::HEADER_LEN;
        }
        if self.aeth {
            len += crate::aeth::HEADER_LEN;
        }
        if self.atomic_ack_eth {
            len += crate::atomic_ack_eth::HEADER_LEN;
        }
        if self.immdt {
            len += crate::immdt::HEADER_LEN;
        }
        if self.ieth {
            len += crate::ieth::HEADER_LEN;
        }
        if self.cnp_reserved {
            len += crate::cnp::RESERVED_LEN;
        }
        len
    }

    /// Whether there is no extension header.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How much payload an opcode carries. `Mtu` rules can only be checked by a receiver that knows
/// the path MTU (rxe_resp.c `check_length`); the wire crate checks `None` and `Fixed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadRule {
    /// No payload.
    None,
    /// Exactly this many bytes.
    Fixed(usize),
    /// Exactly the path MTU (FIRST and MIDDLE packets).
    Mtu,
    /// 1 to path MTU bytes (LAST packets).
    OneToMtu,
    /// 0 to path MTU bytes (ONLY packets).
    UpToMtu,
}

/// What an opcode means and what follows its BTH: one row of the opcode table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    /// The transport service.
    pub transport: Transport,
    /// The operation.
    pub operation: Operation,
    /// The packet's place in its message.
    pub position: Position,
    /// The extension headers after the BTH.
    pub headers: Headers,
    /// How much payload the packet carries.
    pub payload: PayloadRule,
    /// The name used by the kernel (`IB_OPCODE_<name>`), e.g. `RC_SEND_ONLY`.
    pub name: &'static str,
}

impl Layout {
    /// Whether this is a request (sent by a requester to a responder).
    pub const fn is_request(&self) -> bool {
        !matches!(
            self.operation,
            Operation::RdmaReadResponse
                | Operation::Acknowledge
                | Operation::AtomicAcknowledge
                | Operation::Cnp
        )
    }
}

macro_rules! opcodes {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $value:literal, $name:literal, $transport:ident, $operation:ident,
        $position:ident, [$($header:ident),*], $payload:expr;
    )*) => {
        /// A BTH opcode. Values the table does not know are kept as `Unknown`, so that any byte
        /// converts to an `Opcode` and back unchanged.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Opcode {
            $($(#[$doc])* $variant,)*
            /// Any opcode the table does not define.
            Unknown(u8),
        }

        impl From<u8> for Opcode {
            fn from(value: u8) -> Self {
                Self::from_byte(value)
            }
        }

        impl From<Opcode> for u8 {
            fn from(opcode: Opcode) -> Self {
                match opcode {
                    $(Opcode::$variant => $value,)*
                    Opcode::Unknown(other) => other,
                }
            }
        }

        impl Opcode {
            /// Every opcode the table defines, in numeric order.
            pub const ALL: &'static [Opcode] = &[$(Self::$variant),*];

            /// The opcode of a BTH byte (`From<u8>`, usable in `const`).
            pub const fn from_byte(value: u8) -> Self {
                match value {
                    $($value => Self::$variant,)*
                    other => Self::Unknown(other),
                }
            }

            /// The row of the opcode table, or `None` for an opcode that is not supported.
            pub const fn layout(self) -> Option<Layout> {
                match self {
                    $(Self::$variant => Some(Layout {
                        transport: Transport::$transport,
                        operation: Operation::$operation,
                        position: Position::$position,
                        headers: Headers { $($header: true,)* ..Headers::NONE },
                        payload: $payload,
                        name: $name,
                    }),)*
                    Self::Unknown(_) => None,
                }
            }
        }
    };
}

use PayloadRule::{Fixed, Mtu, OneToMtu, UpToMtu};

opcodes! {
    /// RC SEND First.
    RcSendFirst = 0x00, "RC_SEND_FIRST", Rc, Send, First, [], Mtu;
    /// RC SEND Middle.
    RcSendMiddle = 0x01, "RC_SEND_MIDDLE", Rc, Send, Middle, [], Mtu;
    /// RC SEND Last.
    RcSendLast = 0x02, "RC_SEND_LAST", Rc, Send, Last, [], OneToMtu;
    /// RC SEND Last with Immediate.
    RcSendLastWithImmediate = 0x03, "RC_SEND_LAST_WITH_IMMEDIATE", Rc, Send, Last, [immdt], OneToMtu;
    /// RC SEND Only.
    RcSendOnly = 0x04, "RC_SEND_ONLY", Rc, Send, Only, [], UpToMtu;
    /// RC SEND Only with Immediate.
    RcSendOnlyWithImmediate = 0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", Rc, Send, Only, [immdt], UpToMtu;
    /// RC RDMA WRITE First.
    RcRdmaWriteFirst = 0x06, "RC_RDMA_WRITE_FIRST", Rc, RdmaWrite, First, [reth], Mtu;
    /// RC RDMA WRITE Middle.
    RcRdmaWriteMiddle = 0x07, "RC_RDMA_WRITE_MIDDLE", Rc, RdmaWrite, Middle, [], Mtu;
    /// RC RDMA WRITE Last.
    RcRdmaWriteLast = 0x08, "RC_RDMA_WRITE_LAST", Rc, RdmaWrite, Last, [], OneToMtu;
    /// RC RDMA WRITE Last with Immediate.
    RcRdmaWriteLastWithImmediate = 0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Rc, RdmaWrite, Last, [immdt], OneToMtu;
    /// RC RDMA WRITE Only.
    RcRdmaWriteOnly = 0x0a, "RC_RDMA_WRITE_ONLY", Rc, RdmaWrite, Only, [reth], UpToMtu;
    /// RC RDMA WRITE Only with Immediate.
    RcRdmaWriteOnlyWithImmediate = 0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Rc, RdmaWrite, Only, [reth, immdt], UpToMtu;
    /// RC RDMA READ Request.
    RcRdmaReadRequest = 0x0c, "RC_RDMA_READ_REQUEST", Rc, RdmaReadRequest, Only, [reth], PayloadRule::None;
    /// RC RDMA READ Response First.
    RcRdmaReadResponseFirst = 0x0d, "RC_RDMA_READ_RESPONSE_FIRST", Rc, RdmaReadResponse, First, [aeth], Mtu;
    /// RC RDMA READ Response Middle (no AETH).
    RcRdmaReadResponseMiddle = 0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE", Rc, RdmaReadResponse, Middle, [], Mtu;
    /// RC RDMA READ Response Last.
    RcRdmaReadResponseLast = 0x0f, "RC_RDMA_READ_RESPONSE_LAST", Rc, RdmaReadResponse, Last, [aeth], OneToMtu;
    /// RC RDMA READ Response Only.
    RcRdmaReadResponseOnly = 0x10, "RC_RDMA_READ_RESPONSE_ONLY", Rc, RdmaReadResponse, Only, [aeth], UpToMtu;
    /// RC ACKNOWLEDGE.
    RcAcknowledge = 0x11, "RC_ACKNOWLEDGE", Rc, Acknowledge, Only, [aeth], PayloadRule::None;
    /// RC ATOMIC ACKNOWLEDGE.
    RcAtomicAcknowledge = 0x12, "RC_ATOMIC_ACKNOWLEDGE", Rc, AtomicAcknowledge, Only, [aeth, atomic_ack_eth], PayloadRule::None;
    /// RC CmpSwap.
    RcCompareSwap = 0x13, "RC_COMPARE_SWAP", Rc, CompareSwap, Only, [atomic_eth], PayloadRule::None;
    /// RC FetchAdd.
    RcFetchAdd = 0x14, "RC_FETCH_ADD", Rc, FetchAdd, Only, [atomic_eth], PayloadRule::None;
    /// RC SEND Last with Invalidate.
    RcSendLastWithInvalidate = 0x16, "RC_SEND_LAST_WITH_INVALIDATE", Rc, Send, Last, [ieth], OneToMtu;
    /// RC SEND Only with Invalidate.
    RcSendOnlyWithInvalidate = 0x17, "RC_SEND_ONLY_WITH_INVALIDATE", Rc, Send, Only, [ieth], UpToMtu;
    /// RC FLUSH (IBA 1.5).
    RcFlush = 0x1c, "RC_FLUSH", Rc, Flush, Only, [feth, reth], PayloadRule::None;
    /// RC ATOMIC WRITE (IBA 1.5): 8 bytes written atomically.
    RcAtomicWrite = 0x1d, "RC_ATOMIC_WRITE", Rc, AtomicWrite, Only, [reth], Fixed(8);
    /// UC SEND First.
    UcSendFirst = 0x20, "UC_SEND_FIRST", Uc, Send, First, [], Mtu;
    /// UC SEND Middle.
    UcSendMiddle = 0x21, "UC_SEND_MIDDLE", Uc, Send, Middle, [], Mtu;
    /// UC SEND Last.
    UcSendLast = 0x22, "UC_SEND_LAST", Uc, Send, Last, [], OneToMtu;
    /// UC SEND Last with Immediate.
    UcSendLastWithImmediate = 0x23, "UC_SEND_LAST_WITH_IMMEDIATE", Uc, Send, Last, [immdt], OneToMtu;
    /// UC SEND Only.
    UcSendOnly = 0x24, "UC_SEND_ONLY", Uc, Send, Only, [], UpToMtu;
    /// UC SEND Only with Immediate.
    UcSendOnlyWithImmediate = 0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", Uc, Send, Only, [immdt], UpToMtu;
    /// UC RDMA WRITE First.
    UcRdmaWriteFirst = 0x26, "UC_RDMA_WRITE_FIRST", Uc, RdmaWrite, First, [reth], Mtu;
    /// UC RDMA WRITE Middle.
    UcRdmaWriteMiddle = 0x27, "UC_RDMA_WRITE_MIDDLE", Uc, RdmaWrite, Middle, [], Mtu;
    /// UC RDMA WRITE Last.
    UcRdmaWriteLast = 0x28, "UC_RDMA_WRITE_LAST", Uc, RdmaWrite, Last, [], OneToMtu;
    /// UC RDMA WRITE Last with Immediate.
    UcRdmaWriteLastWithImmediate = 0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Uc, RdmaWrite, Last, [immdt], OneToMtu;
    /// UC RDMA WRITE Only.
    UcRdmaWriteOnly = 0x2a, "UC_RDMA_WRITE_ONLY", Uc, RdmaWrite, Only, [reth], UpToMtu;
    /// UC RDMA WRITE Only with Immediate.
    UcRdmaWriteOnlyWithImmediate = 0x2b, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Uc, RdmaWrite, Only, [reth, immdt], UpToMtu;
    /// UD SEND Only.
    UdSendOnly = 0x64, "UD_SEND_ONLY", Ud, Send, Only, [deth], UpToMtu;
    /// UD SEND Only with Immediate.
    UdSendOnlyWithImmediate = 0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", Ud, Send, Only, [deth, immdt], UpToMtu;
    /// RoCEv2 Congestion Notification Packet: BTH and 16 reserved bytes (Annex A17.9.3).
    Cnp = 0x81, "CNP", Cnp, Cnp, Only, [cnp_reserved], PayloadRule::None;
}

/// The opcode table indexed by the BTH byte, built at compile time: the packet path looks a
/// layout up with one index instead of a `match`.
static LAYOUTS: [Option<Layout>; 256] = {
    let mut table = [None; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = Opcode::from_byte(byte as u8).layout();
        byte += 1;
    }
    table
};

/// The layout of the opcode in a BTH byte, from the compile-time table.
pub(crate) fn layout_of(byte: u8) -> Option<&'static Layout> {
    LAYOUTS[usize::from(byte)].as_ref()
}

/// Per BTH opcode byte: the BTH and the extension headers its layout has, bytes (the BTH alone
/// for an opcode without one). Built at compile time, as [`LAYOUTS`] is: every packet asks for
/// it, and summing the headers' lengths each time cost a pass over nine flags.
static HEADER_LENS: [u8; 256] = {
    let mut table = [0; 256];
    let mut byte = 0;
    while byte < 256 {
        let ext = match &LAYOUTS[byte] {
            Some(layout) => layout.headers.len(),
            None => 0,
        };
        table[byte] = (crate::bth::HEADER_LEN + ext) as u8;
        byte += 1;
    }
    table
};

/// The extension headers in wire order, as [`extension_at`] numbers them, and their lengths.
pub(crate) const EXTENSION_LENS: [usize; 9] = [
    crate::feth::HEADER_LEN,
    crate::deth::HEADER_LEN,
    crate::reth::HEADER_LEN,
    crate::atomic_eth::HEADER_LEN,
    crate::aeth::HEADER_LEN,
    crate::atomic_ack_eth::HEADER_LEN,
    crate::immdt::HEADER_LEN,
    crate::ieth::HEADER_LEN,
    crate::cnp::RESERVED_LEN,
];

/// No such header in [`EXTENSION_OFFSETS`].
const ABSENT: u8 = u8::MAX;

/// Per BTH opcode byte and extension header ([`EXTENSION_LENS`]' order): where the header
/// starts in the packet, or [`ABSENT`]. Built at compile time: the responder reads three or
/// four headers of every packet, and each look-up summed the lengths of those before it.
static EXTENSION_OFFSETS: [[u8; 9]; 256] = {
    let mut table = [[ABSENT; 9]; 256];
    let mut byte = 0;
    while byte < 256 {
        if let Some(layout) = &LAYOUTS[byte] {
            let h = &layout.headers;
            let present = [
                h.feth,
                h.deth,
                h.reth,
                h.atomic_eth,
                h.aeth,
                h.atomic_ack_eth,
                h.immdt,
                h.ieth,
                h.cnp_reserved,
            ];
            let mut offset = crate::bth::HEADER_LEN;
            let mut i = 0;
            while i < 9 {
                if present[i] {
                    table[byte][i] = offset as u8;
                    offset += EXTENSION_LENS[i];
                }
                i += 1;
            }
        }
        byte += 1;
    }
    table
};

/// Where extension header `index` ([`EXTENSION_LENS`]' order) starts in a packet whose BTH
/// opcode byte is `byte`, and its length, if the opcode's layout has it.
pub(crate) fn extension_at(byte: u8, index: usize) -> Option<(usize, usize)> {
    let offset = *EXTENSION_OFFSETS[usize::from(byte)].get(index)?;
    (offset != ABSENT).then(|| (usize::from(offset), EXTENSION_LENS[index]))
}

/// The BTH's and the extension headers' length for the opcode in a BTH byte
/// ([`HEADER_LENS`]).
pub(crate) fn header_len_of(byte: u8) -> usize {
    usize::from(HEADER_LENS[usize::from(byte)])
}

impl Opcode {
    /// The opcode's transport, from the compile-time table (`None`: an opcode RoCE does not
    /// carry), without building its layout as [`Opcode::layout`] does.
    pub fn transport(self) -> Option<Transport> {
        layout_of(u8::from(self)).map(|layout| layout.transport)
    }

    /// The kernel's name for the opcode (`RC_SEND_ONLY`), or `UNKNOWN`.
    pub const fn name(self) -> &'static str {
        match self.layout() {
            Some(layout) => layout.name,
            None => "UNKNOWN",
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(value) => write!(f, "UNKNOWN({value:#04x})"),
            known => f.write_str(known.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_converts_to_an_opcode_and_back() {
        for byte in 0..=u8::MAX {
            assert_eq!(u8::from(Opcode::from(byte)), byte);
        }
    }

    #[test]
    fn known_opcodes_have_a_layout_and_unknown_ones_do_not() {
        assert_eq!(Opcode::ALL.len(), 40);
        for &opcode in Opcode::ALL {
            assert!(opcode.layout().is_some(), "{opcode:?}");
        }
        // RD (0x40..), reserved RC 0x15, UC 0x2c and vendor opcodes are not supported.
        for byte in [0x15, 0x18, 0x2c, 0x40, 0x4a, 0x60, 0x66, 0x80, 0xe0, 0xff] {
            assert_eq!(Opcode::from(byte).layout(), None, "{byte:#x}");
        }
    }

    #[test]
    fn transport_bits_match_the_transport() {
        for &opcode in Opcode::ALL {
            let layout = opcode.layout().unwrap();
            let expected = match u8::from(opcode) >> 5 {
                0 => Transport::Rc,
                1 => Transport::Uc,
                3 => Transport::Ud,
                4 => Transport::Cnp,
                other => panic!("transport bits {other}"),
            };
            assert_eq!(layout.transport, expected, "{opcode}");
            assert_eq!(opcode.transport(), Some(expected), "{opcode}");
            let prefix = match expected {
                Transport::Rc => "RC_",
                Transport::Uc => "UC_",
                Transport::Ud => "UD_",
                Transport::Cnp => "CNP",
            };
            assert!(layout.name.starts_with(prefix), "{}", layout.name);
        }
    }

    /// The compile-time table of header lengths agrees with every layout, byte for byte: the
    /// BTH and its headers, or the BTH alone for an opcode without a layout.
    #[test]
    fn the_header_length_table_is_the_layouts_sum() {
        for byte in 0..=255u8 {
            let want = 12 + Opcode::from(byte).layout().map_or(0, |l| l.headers.len());
            assert_eq!(header_len_of(byte), want, "{byte:#x}");
        }
        assert_eq!(header_len_of(u8::from(Opcode::RcRdmaWriteFirst)), 12 + 16);
    }

    #[test]
    fn header_lengths_follow_the_spec() {
        let len = |op: Opcode| op.layout().unwrap().headers.len();
        assert_eq!(len(Opcode::RcSendOnly), 0);
        assert_eq!(len(Opcode::RcRdmaWriteOnlyWithImmediate), 16 + 4);
        assert_eq!(len(Opcode::RcRdmaReadResponseMiddle), 0);
        assert_eq!(len(Opcode::RcAtomicAcknowledge), 4 + 8);
        assert_eq!(len(Opcode::RcCompareSwap), 28);
        assert_eq!(len(Opcode::UdSendOnlyWithImmediate), 8 + 4);
        assert_eq!(len(Opcode::RcFlush), 4 + 16);
        assert_eq!(len(Opcode::Cnp), 16);
    }

    #[test]
    fn the_static_table_is_the_const_table() {
        for byte in 0..=u8::MAX {
            assert_eq!(layout_of(byte).copied(), Opcode::from(byte).layout());
        }
    }

    #[test]
    fn requests_and_responses() {
        assert!(Opcode::RcRdmaReadRequest.layout().unwrap().is_request());
        assert!(
            !Opcode::RcRdmaReadResponseOnly
                .layout()
                .unwrap()
                .is_request()
        );
        assert!(!Opcode::RcAcknowledge.layout().unwrap().is_request());
        assert!(!Opcode::Cnp.layout().unwrap().is_request());
    }
}
