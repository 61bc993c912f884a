//! In-band network telemetry for HPCC (Li et al., "HPCC: High Precision Congestion Control",
//! SIGCOMM 2019, §3.2 and Fig. 4): a fixed-size header right after the BTH of a request packet,
//! to which every switch egress on the path appends one hop record (its queue length, the bytes
//! it has sent, a timestamp and its line rate), and which the responder echoes back in its ACK.
//! The hop record is that of HPCC's ns-3 simulator (`simulation/src/network/utils/int-header.h`
//! `IntHop`, alibaba-edu/High-Precision-Congestion-Control): 64 bits per hop, five hops.
//!
//! Not an IBTA header: rxe and RDMA hardware would take its bytes for the RETH or the payload, so
//! only NICs that both run HPCC (roce-emu's, and the simulator's) send it.
//!
//! # PINT
//!
//! HPCC-PINT (Ben Basat et al., "PINT: Probabilistic In-band Network Telemetry", SIGCOMM 2020,
//! §4.3; HPCC's ns-3, CC_MODE 10) carries one value instead of the records: the largest
//! utilisation on the path, which each switch egress raises to its own, encoded on a log scale
//! ([`crate::pint`]). Its header is 4 bytes, flagged by the next reserved bit
//! ([`PINT_BTH_FLAG`], bit 5 of BTH byte 8):
//!
//! ```text
//! byte 0      E (bit 7): echo; bits 6..0 reserved, sent 0, ignored
//! byte 1      reserved, sent 0, ignored
//! bytes 2..4  the encoded utilisation (`crate::pint::encode`), big-endian
//! ```
//!
//! ns-3's is 2 bytes (the value alone, at its log base of 1.01); this one is 4, so that every
//! header after the BTH stays a multiple of 4 bytes, as IBTA's are. A BTH with both flags is
//! malformed.
//!
//! # Marking
//!
//! A packet carries the header when bit 6 of BTH byte 8 is set ([`BTH_FLAG`]: the first of the
//! seven reserved bits after AckReq, "Resv7", IBTA vol. 1 §9.2). A reserved bit, rather than a
//! UDP port or an opcode, because the packet stays an ordinary RoCEv2 packet to every switch and
//! capture tool (port 4791, its real opcode), the bit costs no byte, and it is one the ICRC
//! covers (unlike Resv6a in byte 4, which the ICRC masks): a flipped flag is caught as an ICRC
//! error rather than misread as 44 bytes of telemetry. Receivers that ignore reserved bits (rxe)
//! would misparse such a packet; this is why it is sent only between HPCC NICs.
//!
//! # Layout (44 bytes, big-endian, bits numbered from the most significant)
//!
//! ```text
//! byte 0      E (bit 7): echo — the responder's copy, which switches do not stamp
//!             bits 6..4: reserved, sent 0, ignored
//!             bits 3..0: nhop, the hop records that follow (0..=5)
//! bytes 1..4  reserved, sent 0, ignored
//! bytes 4..44 five hop records of 8 bytes; record i (i < nhop) at 4 + 8·i, the rest 0
//!
//! hop record, one 64-bit word:
//! bits 63..61 rate: the port's line-rate code (LINE_RATES: 25, 50, 100, 200, 400, 10 Gb/s,
//!                  1 Gb/s, 100 Mb/s)
//! bits 60..37 time: the egress timestamp, ns, modulo 2^24
//! bits 36..17 bytes: the port's transmitted bytes in units of 128·m, modulo 2^20
//! bits 16..0  qlen: the egress queue in units of 80·m, saturating
//! ```
//!
//! The widths and units are ns-3's (`timeWidth` 24, `bytesWidth` 20, `qlenWidth` 17,
//! `byteUnit` 128, `qlenUnit` 80). ns-3 scales both units by one global `multi` (`INT_MULTI`,
//! host bandwidth / 25 Gb/s); here each record's multiplier follows from its own rate code
//! (m = max(1, rate / 25 Gb/s)), so that a record is self-describing on a fabric of mixed speeds.
//! ns-3's header is 42 bytes (a 16-bit nhop after the hops); this one puts a 32-bit word first,
//! so that the hops are 4-byte aligned after the 12-byte BTH.
//!
//! # ICRC
//!
//! Switches rewrite the header, so the ICRC treats its 44 bytes as variant fields, as it treats
//! the IP TTL and BTH byte 4: they are hashed as ones ([`crate::icrc`]). The ICRC still covers
//! the flag (and so whether the header is there) and its length (through the UDP length); a
//! switch that stamps a record has no ICRC to recompute.

use crate::bytes::{get_u64, set_u64, view};
use crate::{Layer, ParseError, bth};

/// Length of the INT header.
pub const HEADER_LEN: usize = 4 + MAX_HOPS * HOP_LEN;
/// Hop records the header has room for (ns-3 `IntHeader::maxHop`).
pub const MAX_HOPS: usize = 5;
/// Length of one hop record.
pub const HOP_LEN: usize = 8;
/// The flag in BTH byte 8 that says the INT header follows the BTH.
pub const BTH_FLAG: u8 = 0x40;
/// The byte of the BTH that holds [`BTH_FLAG`] and [`PINT_BTH_FLAG`] (AckReq and Resv7).
pub const BTH_FLAG_BYTE: usize = 8;
/// The flag in BTH byte 8 that says a PINT header follows the BTH (see "PINT" above).
pub const PINT_BTH_FLAG: u8 = 0x20;
/// Length of the PINT header.
pub const PINT_HEADER_LEN: usize = 4;
/// Both flags.
const FLAGS: u8 = BTH_FLAG | PINT_BTH_FLAG;
/// Line rates by code, bits per second: ns-3's `lineRateValues` (25, 50, 100, 200, 400 Gb/s),
/// and in its unused codes 10 Gb/s (the simulator's incasts), 1 Gb/s and 100 Mb/s (`roce
/// switch` between veths).
pub const LINE_RATES: [u64; 8] = [
    25_000_000_000,
    50_000_000_000,
    100_000_000_000,
    200_000_000_000,
    400_000_000_000,
    10_000_000_000,
    1_000_000_000,
    100_000_000,
];
/// ns-3 `IntHop::byteUnit`.
pub const BYTE_UNIT: u64 = 128;
/// ns-3 `IntHop::qlenUnit`.
pub const QLEN_UNIT: u64 = 80;

const ECHO: u8 = 0x80;
const NHOP_MASK: u8 = 0x0f;
const TIME_BITS: u32 = 24;
const BYTES_BITS: u32 = 20;
const QLEN_BITS: u32 = 17;

/// Whether the UDP payload `packet` carries an INT or a PINT header (its BTH has [`BTH_FLAG`]
/// or [`PINT_BTH_FLAG`]).
#[inline]
pub fn flagged(packet: &[u8]) -> bool {
    packet.len() >= bth::HEADER_LEN && packet[BTH_FLAG_BYTE] & FLAGS != 0
}

/// The length of the header a [`flagged`] packet's BTH announces: [`PINT_HEADER_LEN`] for a
/// PINT header, else [`HEADER_LEN`].
#[inline]
pub fn header_len(packet: &[u8]) -> usize {
    match packet.get(BTH_FLAG_BYTE) {
        Some(flags) if flags & FLAGS == PINT_BTH_FLAG => PINT_HEADER_LEN,
        _ => HEADER_LEN,
    }
}

/// Whether a switch egress would stamp the UDP payload `packet`: its BTH flags an INT header
/// (not PINT's) that is whole, a request's (not an echo) and not full.
#[inline]
pub fn stampable(packet: &[u8]) -> bool {
    packet.len() >= bth::HEADER_LEN
        && packet[BTH_FLAG_BYTE] & FLAGS == BTH_FLAG
        && packet
            .get(bth::HEADER_LEN..bth::HEADER_LEN + HEADER_LEN)
            .is_some_and(|h| h[0] & ECHO == 0 && usize::from(h[0] & NHOP_MASK) < MAX_HOPS)
}

/// A switch egress appends `hop` to the INT header of the UDP payload `packet` if it is
/// [`stampable`]: whether it did. Allocation-free, and total on any bytes.
#[inline]
pub fn stamp(packet: &mut [u8], hop: Hop) -> bool {
    stampable(packet) && Packet::new_unchecked(&mut packet[bth::HEADER_LEN..]).push_hop(hop)
}

/// Whether a switch egress would raise the PINT value of the UDP payload `packet`: its BTH
/// flags a PINT header (and not INT's) that is whole and a request's (not an echo).
#[inline]
pub fn pint_stampable(packet: &[u8]) -> bool {
    packet.len() >= bth::HEADER_LEN + PINT_HEADER_LEN
        && packet[BTH_FLAG_BYTE] & FLAGS == PINT_BTH_FLAG
        && packet[bth::HEADER_LEN] & ECHO == 0
}

/// A switch egress raises the PINT value of the UDP payload `packet` to `value` if that is
/// higher and the packet is [`pint_stampable`] (ns-3 `SwitchNotifyDequeue`, CC_MODE 10: the
/// path's largest): whether it did. Allocation-free, and total on any bytes.
#[inline]
pub fn raise_pint(packet: &mut [u8], value: u16) -> bool {
    if !pint_stampable(packet) {
        return false;
    }
    let at = bth::HEADER_LEN + 2;
    let old = u16::from_be_bytes([packet[at], packet[at + 1]]);
    if value <= old {
        return false;
    }
    packet[at..at + 2].copy_from_slice(&value.to_be_bytes());
    true
}

/// Takes a packet whose BTH flags an INT header ([`flagged`]) apart as its receiver does: returns
/// the header, and writes into `out` the packet without it, the flag cleared — the packet as it
/// was before the header went in, its ICRC (which masks the header) as it came. An error when
/// the header is not whole or not well formed; `out` is then left empty.
pub fn strip(packet: &[u8], out: &mut Vec<u8>) -> Result<Repr, ParseError> {
    out.clear();
    let header = header(packet)?;
    out.extend_from_slice(&packet[..bth::HEADER_LEN]);
    out[BTH_FLAG_BYTE] &= !FLAGS;
    out.extend_from_slice(&packet[bth::HEADER_LEN + header.buffer_len()..]);
    Ok(header)
}

/// The INT header of a packet whose BTH flags one ([`flagged`]), checked as [`strip`] checks
/// it, the packet left as it is.
#[inline]
pub fn header(packet: &[u8]) -> Result<Repr, ParseError> {
    let after = packet.get(bth::HEADER_LEN..).unwrap_or_default();
    match packet.get(BTH_FLAG_BYTE).map(|flags| flags & FLAGS) {
        Some(FLAGS) => Err(ParseError::BadIntFlags),
        Some(PINT_BTH_FLAG) => match after.get(..PINT_HEADER_LEN) {
            Some(h) => Ok(Repr::pint(
                h[0] & ECHO != 0,
                u16::from_be_bytes([h[2], h[3]]),
            )),
            None => Err(ParseError::Truncated {
                layer: Layer::Int,
                need: PINT_HEADER_LEN,
                got: after.len(),
            }),
        },
        _ => Packet::new_checked(after).and_then(|p| Repr::parse(&p)),
    }
}

/// Takes the INT (or PINT) header out of `packet` in place, where [`strip`] copies the rest:
/// the BTH moves forward over the header, its flags cleared, and the packet without the header
/// is the end of the buffer, [`header_len`] bytes in — the bytes [`strip`] writes. Moves 12
/// bytes where [`strip`] copies the whole packet; the header itself is not read (see
/// [`header`]). `None`, writing nothing, when `packet` is shorter than a BTH and a header.
#[inline]
pub fn strip_in_place(packet: &mut [u8]) -> Option<&mut [u8]> {
    let len = header_len(packet);
    if packet.len() < bth::HEADER_LEN + len {
        return None;
    }
    packet.copy_within(..bth::HEADER_LEN, len);
    let rest = &mut packet[len..];
    rest[BTH_FLAG_BYTE] &= !FLAGS;
    Some(rest)
}

view!(
    /// A view of an INT header.
    check: check
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Whether the buffer holds the whole header and at most [`MAX_HOPS`] records.
    pub fn check(&self) -> Result<(), ParseError> {
        let buf = self.buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::Int,
                need: HEADER_LEN,
                got: buf.len(),
            });
        }
        let nhop = buf[0] & NHOP_MASK;
        if usize::from(nhop) > MAX_HOPS {
            return Err(ParseError::BadIntHopCount(nhop));
        }
        Ok(())
    }

    /// E: the responder's echo.
    #[inline]
    pub fn echo(&self) -> bool {
        self.buffer.as_ref()[0] & ECHO != 0
    }

    /// The hop records present.
    #[inline]
    pub fn nhop(&self) -> usize {
        usize::from(self.buffer.as_ref()[0] & NHOP_MASK)
    }

    /// Record `i` (any `i` below [`MAX_HOPS`]).
    #[inline]
    pub fn hop(&self, i: usize) -> Hop {
        let at = 4 + HOP_LEN * i;
        Hop::from_word(get_u64(self.buffer.as_ref(), at..at + HOP_LEN))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// A switch egress appends `hop`: false, writing nothing, on an echo or a full header.
    /// Allocation-free; the ICRC needs no update ([`crate::icrc`] masks the header).
    #[inline]
    pub fn push_hop(&mut self, hop: Hop) -> bool {
        let nhop = self.nhop();
        if self.echo() || nhop >= MAX_HOPS {
            return false;
        }
        let buf = self.buffer.as_mut();
        let at = 4 + HOP_LEN * nhop;
        set_u64(buf, at..at + HOP_LEN, hop.word());
        buf[0] = (buf[0] & !NHOP_MASK) | (nhop as u8 + 1);
        true
    }
}

/// One switch egress's record, as the wire holds it: ns-3's 64-bit word (`IntHop`, a union of
/// the word and its bit fields), so that a header is read and echoed without taking its records
/// apart, and a field is taken out where it is used.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Hop(u64);

impl Hop {
    /// The record of a port of `rate_bps` at `now_ns`, having sent `tx_bytes`, its queue
    /// `qlen_bytes` (ns-3 `IntHop::Set`; a rate not in [`LINE_RATES`] takes the code of the
    /// nearest one).
    #[inline]
    pub fn new(now_ns: u64, tx_bytes: u64, qlen_bytes: u64, rate_bps: u64) -> Self {
        Self::with_rate_code(now_ns, tx_bytes, qlen_bytes, rate_code(rate_bps))
    }

    /// [`Hop::new`] for a port whose line rate's code ([`rate_code`]) its caller keeps: `rate`
    /// (only its low three bits are taken).
    #[inline]
    pub fn with_rate_code(now_ns: u64, tx_bytes: u64, qlen_bytes: u64, rate: u8) -> Self {
        let rate = rate & 7;
        // The units are 128·2^k and 80·2^k (`MULTIPLIER_SHIFT`): a shift, and a division by
        // the constant 5 (⌊⌊x/2^j⌋/5⌋ = ⌊x/(5·2^j)⌋).
        let k = multiplier_shift(rate);
        let bytes = tx_bytes >> (BYTE_UNIT.trailing_zeros() + k);
        let qlen = ((qlen_bytes >> (QLEN_UNIT_SHIFT + k)) / QLEN_UNIT_ODD).min(mask(QLEN_BITS));
        Self(
            (u64::from(rate & 7) << 61)
                | ((now_ns & mask(TIME_BITS)) << 37)
                | ((bytes & mask(BYTES_BITS)) << 17)
                | qlen,
        )
    }

    /// The record of a 64-bit word as the wire holds it.
    #[inline]
    const fn from_word(word: u64) -> Self {
        Self(word)
    }

    /// The 64-bit word the wire holds.
    #[inline]
    const fn word(self) -> u64 {
        self.0
    }

    /// The line-rate code, an index into [`LINE_RATES`].
    #[inline]
    pub const fn rate(&self) -> u8 {
        (self.0 >> 61) as u8
    }

    /// The timestamp, ns modulo 2^24.
    #[inline]
    pub const fn time(&self) -> u32 {
        ((self.0 >> 37) & mask(TIME_BITS)) as u32
    }

    /// Transmitted bytes in units of [`Hop::byte_unit`], modulo 2^20.
    #[inline]
    pub const fn bytes(&self) -> u32 {
        ((self.0 >> 17) & mask(BYTES_BITS)) as u32
    }

    /// Queue length in units of [`Hop::qlen_unit`] (at most 2^17 − 1).
    #[inline]
    pub const fn qlen(&self) -> u32 {
        (self.0 & mask(QLEN_BITS)) as u32
    }

    /// The line rate, bits per second.
    #[inline]
    pub fn line_rate_bps(&self) -> u64 {
        LINE_RATES[usize::from(self.rate())]
    }

    /// Bytes per unit of [`Hop::bytes`]: 128·m.
    #[inline]
    pub fn byte_unit(&self) -> u64 {
        BYTE_UNIT * multiplier(self.rate())
    }

    /// Bytes per unit of [`Hop::qlen`]: 80·m.
    #[inline]
    pub fn qlen_unit(&self) -> u64 {
        QLEN_UNIT * multiplier(self.rate())
    }

    /// The queue length, bytes.
    #[inline]
    pub fn qlen_bytes(&self) -> u64 {
        u64::from(self.qlen()) * self.qlen_unit()
    }

    /// ns since `earlier`'s timestamp, across a wrap (ns-3 `GetTimeDelta`).
    #[inline]
    pub fn time_delta(&self, earlier: &Self) -> u64 {
        u64::from(self.time().wrapping_sub(earlier.time())) & mask(TIME_BITS)
    }

    /// Bytes the port sent since `earlier`, across a wrap (ns-3 `GetBytesDelta`).
    #[inline]
    pub fn bytes_delta(&self, earlier: &Self) -> u64 {
        (u64::from(self.bytes().wrapping_sub(earlier.bytes())) & mask(BYTES_BITS))
            * self.byte_unit()
    }
}

impl core::fmt::Debug for Hop {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Hop")
            .field("rate", &self.rate())
            .field("time", &self.time())
            .field("bytes", &self.bytes())
            .field("qlen", &self.qlen())
            .finish()
    }
}

const fn mask(bits: u32) -> u64 {
    (1 << bits) - 1
}

/// m = max(1, rate / 25 Gb/s).
#[inline]
fn multiplier(rate: u8) -> u64 {
    1 << multiplier_shift(rate)
}

/// log2 m for the rate code `rate`.
#[inline]
fn multiplier_shift(rate: u8) -> u32 {
    MULTIPLIER_SHIFT[usize::from(rate & 7)]
}

/// log2 m per rate code: every rate of [`LINE_RATES`] is 25 Gb/s times a power of two, or
/// below 25 Gb/s (m = 1), so that a unit of 128·m or 80·m divides by a shift (checked here,
/// at compile time).
const MULTIPLIER_SHIFT: [u32; 8] = {
    let mut shifts = [0; 8];
    let mut i = 0;
    while i < LINE_RATES.len() {
        let m = LINE_RATES[i] / LINE_RATES[0];
        let m = if m == 0 { 1 } else { m };
        assert!(m.is_power_of_two());
        shifts[i] = m.trailing_zeros();
        i += 1;
    }
    shifts
};

/// [`QLEN_UNIT`] as 2^`QLEN_UNIT_SHIFT` × `QLEN_UNIT_ODD`.
const QLEN_UNIT_SHIFT: u32 = QLEN_UNIT.trailing_zeros();
const QLEN_UNIT_ODD: u64 = QLEN_UNIT >> QLEN_UNIT_SHIFT;
const _: () = assert!(BYTE_UNIT.is_power_of_two());

/// The code of the line rate nearest `bps` (by ratio).
#[inline]
pub fn rate_code(bps: u64) -> u8 {
    // A switch stamps every packet: a rate of the table costs a scan of integers.
    if let Some(code) = LINE_RATES.iter().position(|&r| r == bps) {
        return code as u8;
    }
    nearest_rate_code(bps)
}

/// [`rate_code`] of a rate not in the table.
#[cold]
fn nearest_rate_code(bps: u64) -> u8 {
    let distance = |r: u64| {
        let (a, b) = (r.max(bps.max(1)) as f64, r.min(bps.max(1)) as f64);
        a / b
    };
    (0..LINE_RATES.len())
        .min_by(|&a, &b| distance(LINE_RATES[a]).total_cmp(&distance(LINE_RATES[b])))
        .unwrap_or(0) as u8
}

/// The fields of an INT header, or of a PINT header (`pint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// E: the responder's echo.
    pub echo: bool,
    /// The records, `hops[..nhop]`.
    pub nhop: u8,
    /// The hop records; those at `nhop` and beyond are sent as 0.
    pub hops: [Hop; MAX_HOPS],
    /// A PINT header's encoded utilisation (`crate::pint`); `None`: an INT header.
    pub pint: Option<u16>,
}

impl Repr {
    /// Reads the header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check()?;
        let mut hops = [Hop::default(); MAX_HOPS];
        let nhop = packet.nhop();
        for (i, hop) in hops.iter_mut().enumerate().take(nhop) {
            *hop = packet.hop(i);
        }
        Ok(Self {
            echo: packet.echo(),
            nhop: nhop as u8,
            hops,
            pint: None,
        })
    }

    /// A PINT header carrying `value`.
    pub const fn pint(echo: bool, value: u16) -> Self {
        Self {
            echo,
            nhop: 0,
            hops: [Hop(0); MAX_HOPS],
            pint: Some(value),
        }
    }

    /// The BTH flag that announces this header.
    pub const fn bth_flag(&self) -> u8 {
        if self.pint.is_some() {
            PINT_BTH_FLAG
        } else {
            BTH_FLAG
        }
    }

    /// The records present.
    pub fn hops(&self) -> &[Hop] {
        &self.hops[..usize::from(self.nhop).min(MAX_HOPS)]
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        if self.pint.is_some() {
            PINT_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header into the first [`Repr::buffer_len`] bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) {
        if let Some(value) = self.pint {
            let [hi, lo] = value.to_be_bytes();
            buf[..PINT_HEADER_LEN].copy_from_slice(&[u8::from(self.echo) * ECHO, 0, hi, lo]);
            return;
        }
        let nhop = usize::from(self.nhop).min(MAX_HOPS);
        buf[..HEADER_LEN].fill(0);
        buf[0] = (u8::from(self.echo) * ECHO) | nhop as u8;
        for (i, hop) in self.hops[..nhop].iter().enumerate() {
            let at = 4 + HOP_LEN * i;
            set_u64(buf, at..at + HOP_LEN, hop.word());
        }
    }
}

#[cfg(test)]
mod tests;
