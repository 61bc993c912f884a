//! A whole RoCEv2 packet, the UDP payload: BTH, the extension headers its opcode calls for, the
//! payload, the pad and the ICRC (IBA vol. 1 §9.2–9.3, Annex A17.4).
//!
//! [`Packet::new_checked`] checks the structure once (lengths, TVer, opcode, pad, fixed payload
//! sizes); after it every accessor is total. The ICRC is not checked here because it also
//! covers the IP and UDP headers: see [`crate::icrc`].

use crate::bytes::view;
use crate::opcode::{self, Headers, Layout, PayloadRule};
use crate::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, EmitError, FethRepr, IethRepr,
    ImmDtRepr, Layer, ParseError, RethRepr, aeth, atomic_ack_eth, atomic_eth, bth, cnp, deth, feth,
    ieth, immdt, reth,
};

/// Length of the invariant CRC at the end of every packet.
pub const ICRC_LEN: usize = 4;

view!(
    /// A view of a RoCEv2 packet: the whole UDP payload, ICRC included.
    check: check
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks everything but the ICRC, in wire order, and returns the first problem: the BTH
    /// length, TVer, the opcode, room for the ICRC, each extension header, the pad count, then the
    /// payload length of opcodes that carry a fixed amount.
    pub fn check(&self) -> Result<(), ParseError> {
        let buf = self.buffer.as_ref();
        let got = buf.len();
        let bth = bth::Packet::new_checked(buf)?;
        if bth.tver() != 0 {
            return Err(ParseError::BadTver(bth.tver()));
        }
        let opcode = buf[0];
        let layout = opcode::layout_of(opcode).ok_or(ParseError::UnsupportedOpcode(opcode))?;
        let min = bth::HEADER_LEN + ICRC_LEN;
        if got < min {
            return Err(ParseError::Truncated {
                layer: Layer::Icrc,
                need: min,
                got,
            });
        }
        let body = got - ICRC_LEN;
        let end = opcode::header_len_of(opcode);
        if end > body {
            return Err(truncated_at(&layout.headers, body, got));
        }
        let available = body - end;
        let pad = bth.pad_count();
        if usize::from(pad) > available {
            return Err(ParseError::BadPad { pad, available });
        }
        // Opcodes with a fixed payload (none, or ATOMIC WRITE's 8 bytes) carry no pad either.
        let expected = match layout.payload {
            PayloadRule::None => Some(0),
            PayloadRule::Fixed(n) => Some(n),
            PayloadRule::Mtu | PayloadRule::OneToMtu | PayloadRule::UpToMtu => None,
        };
        match expected {
            Some(expected) if expected != available || pad != 0 => {
                Err(ParseError::BadPayloadLength {
                    opcode,
                    expected,
                    got: available - usize::from(pad),
                })
            }
            _ => Ok(()),
        }
    }

    /// The whole packet.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The BTH.
    pub fn bth(&self) -> bth::Packet<&[u8]> {
        bth::Packet::new_unchecked(self.buffer.as_ref())
    }

    /// The opcode's row of the table.
    ///
    /// # Panics
    /// On an unchecked packet with an unknown opcode.
    pub fn layout(&self) -> Layout {
        *self.table_row()
    }

    /// The FETH, if the opcode has one.
    pub fn feth(&self) -> Option<feth::Packet<&[u8]>> {
        self.header(Layer::Feth).map(feth::Packet::new_unchecked)
    }

    /// The DETH, if the opcode has one.
    pub fn deth(&self) -> Option<deth::Packet<&[u8]>> {
        self.header(Layer::Deth).map(deth::Packet::new_unchecked)
    }

    /// The RETH, if the opcode has one.
    pub fn reth(&self) -> Option<reth::Packet<&[u8]>> {
        self.header(Layer::Reth).map(reth::Packet::new_unchecked)
    }

    /// The AtomicETH, if the opcode has one.
    pub fn atomic_eth(&self) -> Option<atomic_eth::Packet<&[u8]>> {
        self.header(Layer::AtomicEth)
            .map(atomic_eth::Packet::new_unchecked)
    }

    /// The AETH, if the opcode has one.
    pub fn aeth(&self) -> Option<aeth::Packet<&[u8]>> {
        self.header(Layer::Aeth).map(aeth::Packet::new_unchecked)
    }

    /// The AtomicAckETH, if the opcode has one.
    pub fn atomic_ack_eth(&self) -> Option<atomic_ack_eth::Packet<&[u8]>> {
        self.header(Layer::AtomicAckEth)
            .map(atomic_ack_eth::Packet::new_unchecked)
    }

    /// The ImmDt, if the opcode has one.
    pub fn immdt(&self) -> Option<immdt::Packet<&[u8]>> {
        self.header(Layer::ImmDt).map(immdt::Packet::new_unchecked)
    }

    /// The IETH, if the opcode has one.
    pub fn ieth(&self) -> Option<ieth::Packet<&[u8]>> {
        self.header(Layer::Ieth).map(ieth::Packet::new_unchecked)
    }

    /// Offset of the payload: BTH plus every extension header.
    pub fn payload_offset(&self) -> usize {
        opcode::header_len_of(self.buffer.as_ref()[0])
    }

    /// The payload, without pad and ICRC.
    pub fn payload(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        let end = buf.len() - ICRC_LEN - usize::from(self.bth().pad_count());
        &buf[self.payload_offset()..end]
    }

    /// The pad bytes between the payload and the ICRC.
    pub fn pad(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        let end = buf.len() - ICRC_LEN;
        &buf[end - usize::from(self.bth().pad_count())..end]
    }

    /// The ICRC the packet carries (sent least significant byte first, IBA Annex A17.4.3).
    pub fn icrc(&self) -> u32 {
        let buf = self.buffer.as_ref();
        let mut raw = [0; ICRC_LEN];
        raw.copy_from_slice(&buf[buf.len() - ICRC_LEN..]);
        u32::from_le_bytes(raw)
    }

    /// The opcode's row of the compile-time table: accessors run on every packet, so they
    /// index it rather than `match` on the opcode.
    fn table_row(&self) -> &'static Layout {
        opcode::layout_of(self.buffer.as_ref()[0]).expect("a checked packet has a known opcode")
    }

    /// The bytes of one extension header, if the opcode has it (the compile-time table of
    /// offsets, [`opcode::extension_at`]).
    fn header(&self, wanted: Layer) -> Option<&[u8]> {
        let buf = self.buffer.as_ref();
        let (offset, len) = opcode::extension_at(buf[0], extension_index(wanted)?)?;
        Some(&buf[offset..offset + len])
    }
}

/// The error of a packet of `got` bytes whose extension headers run past its `body` (the
/// bytes before the ICRC): the first header that does not fit.
#[cold]
fn truncated_at(headers: &Headers, body: usize, got: usize) -> ParseError {
    let mut end = bth::HEADER_LEN;
    for (layer, len) in present(headers) {
        end += len;
        if end > body {
            return ParseError::Truncated {
                layer,
                need: end + ICRC_LEN,
                got,
            };
        }
    }
    // Not reached (the caller saw them all run past it); the packet is refused either way.
    ParseError::Truncated {
        layer: Layer::Icrc,
        need: end + ICRC_LEN,
        got,
    }
}

/// An extension header's place in wire order ([`opcode::EXTENSION_LENS`]), `None` for a layer
/// that is none.
fn extension_index(wanted: Layer) -> Option<usize> {
    Some(match wanted {
        Layer::Feth => 0,
        Layer::Deth => 1,
        Layer::Reth => 2,
        Layer::AtomicEth => 3,
        Layer::Aeth => 4,
        Layer::AtomicAckEth => 5,
        Layer::ImmDt => 6,
        Layer::Ieth => 7,
        Layer::CnpReserved => 8,
        _ => return None,
    })
}

/// The extension headers of a layout that are present, in wire order, with their lengths.
fn present(headers: &Headers) -> impl Iterator<Item = (Layer, usize)> {
    [
        (headers.feth, Layer::Feth, feth::HEADER_LEN),
        (headers.deth, Layer::Deth, deth::HEADER_LEN),
        (headers.reth, Layer::Reth, reth::HEADER_LEN),
        (headers.atomic_eth, Layer::AtomicEth, atomic_eth::HEADER_LEN),
        (headers.aeth, Layer::Aeth, aeth::HEADER_LEN),
        (
            headers.atomic_ack_eth,
            Layer::AtomicAckEth,
            atomic_ack_eth::HEADER_LEN,
        ),
        (headers.immdt, Layer::ImmDt, immdt::HEADER_LEN),
        (headers.ieth, Layer::Ieth, ieth::HEADER_LEN),
        (headers.cnp_reserved, Layer::CnpReserved, cnp::RESERVED_LEN),
    ]
    .into_iter()
    .filter_map(|(present, layer, len)| present.then_some((layer, len)))
}

/// The headers of a RoCEv2 packet and the length of its payload. The payload itself is not held:
/// [`Repr::emit`] asks for it through a closure, as smoltcp's `udp::Repr::emit` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The BTH; its `pad_count` says how many zero bytes follow the payload.
    pub bth: BthRepr,
    /// FETH (FLUSH).
    pub feth: Option<FethRepr>,
    /// DETH (UD).
    pub deth: Option<DethRepr>,
    /// RETH (WRITE First/Only, READ request, FLUSH, ATOMIC WRITE).
    pub reth: Option<RethRepr>,
    /// AtomicETH (CmpSwap, FetchAdd).
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH (ACK, READ response First/Last/Only, atomic ACK).
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH (atomic ACK).
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// ImmDt (… with Immediate).
    pub immdt: Option<ImmDtRepr>,
    /// IETH (SEND … with Invalidate).
    pub ieth: Option<IethRepr>,
    /// Bytes of payload, pad excluded.
    pub payload_len: usize,
}

impl Repr {
    /// A packet with this BTH, no extension header and no payload.
    pub const fn new(bth: BthRepr) -> Self {
        Self {
            bth,
            feth: None,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
            payload_len: 0,
        }
    }

    /// The pad count that makes a payload of `payload_len` bytes a multiple of 4.
    //= ibta:vol1/9.2
    //# the pad count makes the payload a multiple of 4 bytes
    pub const fn pad_for(payload_len: usize) -> u8 {
        (payload_len.wrapping_neg() & 3) as u8
    }

    /// Reads a packet (after [`Packet::check`]), walking its headers once.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check()?;
        let buf = packet.as_bytes();
        let mut repr = Self::new(BthRepr::parse(&packet.bth())?);
        let mut offset = bth::HEADER_LEN;
        for (layer, len) in present(&packet.layout().headers) {
            let h = &buf[offset..offset + len];
            match layer {
                Layer::Feth => repr.feth = Some(FethRepr::parse(&feth::Packet::new_unchecked(h))?),
                Layer::Deth => repr.deth = Some(DethRepr::parse(&deth::Packet::new_unchecked(h))?),
                Layer::Reth => repr.reth = Some(RethRepr::parse(&reth::Packet::new_unchecked(h))?),
                Layer::AtomicEth => {
                    repr.atomic_eth =
                        Some(AtomicEthRepr::parse(&atomic_eth::Packet::new_unchecked(h))?);
                }
                Layer::Aeth => repr.aeth = Some(AethRepr::parse(&aeth::Packet::new_unchecked(h))?),
                Layer::AtomicAckEth => {
                    repr.atomic_ack_eth = Some(AtomicAckEthRepr::parse(
                        &atomic_ack_eth::Packet::new_unchecked(h),
                    )?);
                }
                Layer::ImmDt => {
                    repr.immdt = Some(ImmDtRepr::parse(&immdt::Packet::new_unchecked(h))?)
                }
                Layer::Ieth => repr.ieth = Some(IethRepr::parse(&ieth::Packet::new_unchecked(h))?),
                _ => {}
            }
            offset += len;
        }
        repr.payload_len = packet.payload().len();
        Ok(repr)
    }

    /// Length of the headers (BTH included) that the opcode calls for; 12 for an unknown opcode.
    pub fn header_len(&self) -> usize {
        // The compile-time table, not `Opcode::layout`'s match, which builds the row anew.
        opcode::header_len_of(u8::from(self.bth.opcode))
    }

    /// Length of the whole packet: headers, payload, pad and ICRC.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len + (self.bth.pad_count & 3) as usize + ICRC_LEN
    }

    /// Writes the packet into `buffer`, which must be exactly [`Repr::buffer_len`] bytes:
    /// headers, then the payload through `fill_payload`, then zero pad bytes. The ICRC is left
    /// zero; [`crate::icrc::seal`] writes it once the IP and UDP fields are known.
    pub fn emit(
        &self,
        buffer: &mut [u8],
        fill_payload: impl FnOnce(&mut [u8]),
    ) -> Result<(), EmitError> {
        let opcode = u8::from(self.bth.opcode);
        let layout = opcode::layout_of(opcode).ok_or(EmitError::UnsupportedOpcode(opcode))?;
        self.check_headers(opcode, &layout.headers)?;
        let payload_ok = match layout.payload {
            PayloadRule::None => self.payload_len == 0 && self.bth.pad_count == 0,
            PayloadRule::Fixed(n) => self.payload_len == n && self.bth.pad_count == 0,
            PayloadRule::Mtu | PayloadRule::OneToMtu | PayloadRule::UpToMtu => true,
        };
        if !payload_ok || self.bth.pad_count > 3 {
            return Err(EmitError::PayloadLength {
                opcode,
                len: self.payload_len,
            });
        }
        let need = self.buffer_len();
        if buffer.len() != need {
            return Err(EmitError::BufferLength {
                need,
                got: buffer.len(),
            });
        }

        self.bth
            .emit(&mut bth::Packet::new_unchecked(&mut buffer[..]));
        // In wire order; `check_headers` made the headers present those the opcode calls for.
        let mut offset = bth::HEADER_LEN;
        let mut next = |len: usize| {
            offset += len;
            offset - len..offset
        };
        // Each header the Repr holds, in wire order (field and module share a name).
        macro_rules! emit_present {
            ($($header:ident),*) => {$(
                if let Some(r) = self.$header {
                    let range = next($header::HEADER_LEN);
                    r.emit(&mut $header::Packet::new_unchecked(&mut buffer[range]));
                }
            )*};
        }
        emit_present!(
            feth,
            deth,
            reth,
            atomic_eth,
            aeth,
            atomic_ack_eth,
            immdt,
            ieth
        );
        if layout.headers.cnp_reserved {
            // The CNP's reserved block is zero.
            buffer[next(cnp::RESERVED_LEN)].fill(0);
        }
        let payload_end = offset + self.payload_len;
        fill_payload(&mut buffer[offset..payload_end]);
        buffer[payload_end..].fill(0);
        Ok(())
    }

    /// Every header the opcode calls for is present, and no other.
    fn check_headers(&self, opcode: u8, headers: &Headers) -> Result<(), EmitError> {
        let same = self.feth.is_some() == headers.feth
            && self.deth.is_some() == headers.deth
            && self.reth.is_some() == headers.reth
            && self.atomic_eth.is_some() == headers.atomic_eth
            && self.aeth.is_some() == headers.aeth
            && self.atomic_ack_eth.is_some() == headers.atomic_ack_eth
            && self.immdt.is_some() == headers.immdt
            && self.ieth.is_some() == headers.ieth;
        if same {
            return Ok(());
        }
        self.header_mismatch(opcode, headers)
    }

    /// Which header `check_headers` found missing or unexpected, first in wire order.
    #[cold]
    fn header_mismatch(&self, opcode: u8, headers: &Headers) -> Result<(), EmitError> {
        let have = [
            (self.feth.is_some(), headers.feth, Layer::Feth),
            (self.deth.is_some(), headers.deth, Layer::Deth),
            (self.reth.is_some(), headers.reth, Layer::Reth),
            (
                self.atomic_eth.is_some(),
                headers.atomic_eth,
                Layer::AtomicEth,
            ),
            (self.aeth.is_some(), headers.aeth, Layer::Aeth),
            (
                self.atomic_ack_eth.is_some(),
                headers.atomic_ack_eth,
                Layer::AtomicAckEth,
            ),
            (self.immdt.is_some(), headers.immdt, Layer::ImmDt),
            (self.ieth.is_some(), headers.ieth, Layer::Ieth),
        ];
        for (has, wants, layer) in have {
            match (has, wants) {
                (false, true) => return Err(EmitError::MissingHeader { opcode, layer }),
                (true, false) => return Err(EmitError::UnexpectedHeader { opcode, layer }),
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
