//! The RoCEv2 invariant CRC (IBA vol. 1 Annex A17.4.3; the kernel's rxe_icrc.c).
//!
//! The ICRC is CRC-32 (IEEE 802.3, as `crc32fast::hash`) over:
//! 1. 8 bytes of 0xff, standing for the InfiniBand LRH that RoCEv2 does not have;
//! 2. the IP header with the fields that routers may change set to ones: for IPv4 the TOS byte
//!    (DSCP and ECN), the TTL and the header checksum; for IPv6 the traffic class, the flow label
//!    and the hop limit;
//! 3. the UDP header with its checksum set to ones;
//! 4. the BTH with byte 4 (FECN, BECN and the reserved bits) set to ones;
//! 5. everything after the BTH up to the ICRC: extension headers, payload and pad — but an INT
//!    header ([`crate::int`], flagged in the BTH) as ones, for switches rewrite it.
//!
//! It is sent least significant byte first. Two paths compute it: from the fields the ICRC
//! covers ([`PseudoHeader`], for the sans-IO core and the UDP backend, which never see the IP
//! header as bytes), and from the IP and UDP headers of a captured frame ([`compute_raw`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::OnceLock;

use crate::packet::ICRC_LEN;
use crate::{ParseError, bth, int};

pub mod ipv4_id;

/// The IP and UDP fields that the ICRC covers. Length fields are derived from the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PseudoHeader {
    /// The IP part.
    pub ip: IpFields,
    /// UDP source port (flow entropy; covered by the ICRC).
    pub src_port: u16,
    /// UDP destination port, 4791.
    pub dst_port: u16,
}

impl PseudoHeader {
    /// The covered fields of a datagram from `src` to `dst`, as roce-emu sends them: DF set and
    /// the IPv4 identification `ip_id` (0 on what it sends). `None` when the two addresses are
    /// not of one family.
    pub fn for_datagram(src: SocketAddr, dst: SocketAddr, ip_id: u16) -> Option<Self> {
        let ip = match (src.ip(), dst.ip()) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => IpFields::V4 {
                src,
                dst,
                identification: ip_id,
                dont_fragment: true,
            },
            (IpAddr::V6(src), IpAddr::V6(dst)) => IpFields::V6 { src, dst },
            _ => return None,
        };
        Some(Self {
            ip,
            src_port: src.port(),
            dst_port: dst.port(),
        })
    }
}

/// The covered fields of the IP header. A 20-byte IPv4 header (no options) and a 40-byte IPv6
/// header followed directly by UDP are assumed, as rxe assumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpFields {
    /// IPv4.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
        /// Identification: covered, so a sender must know the ID the kernel will use.
        identification: u16,
        /// The DF flag.
        dont_fragment: bool,
    },
    /// IPv6.
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
    },
}

/// Computes the ICRC of `packet`, a whole RoCEv2 UDP payload whose last 4 bytes are the ICRC slot
/// (their content is ignored). Total: a packet shorter than a BTH is hashed as it is.
//= ibta:annex17/A17.4.3
//# the ICRC: CRC-32 over 8 bytes of ones, the IP header with TOS/TTL/checksum (or TC/flow label/hop limit) as ones, UDP with its checksum as ones, the BTH with byte 4 as ones, and the rest up to the ICRC
pub fn compute(header: &PseudoHeader, packet: &[u8]) -> u32 {
    let mut masked = [0; IPV6_LEN + UDP_LEN];
    let len = write_masked_ip_udp(header, packet.len(), &mut masked);
    crc(&masked[..len], packet)
}

/// Length of the masked IP and UDP headers.
const fn masked_len(header: &PseudoHeader) -> usize {
    match header.ip {
        IpFields::V4 { .. } => IPV4_LEN + UDP_LEN,
        IpFields::V6 { .. } => IPV6_LEN + UDP_LEN,
    }
}

/// Writes the masked IP and UDP headers for a RoCE packet of `packet_len` bytes into the front of
/// `masked` (at least [`masked_len`] bytes), and returns their length.
fn write_masked_ip_udp(header: &PseudoHeader, packet_len: usize, masked: &mut [u8]) -> usize {
    let udp_len = UDP_LEN + packet_len;
    let ip_len = match header.ip {
        IpFields::V4 {
            src,
            dst,
            identification,
            dont_fragment,
        } => {
            let total_len = IPV4_LEN + udp_len;
            masked[..12].copy_from_slice(&[
                0x45, // version 4, IHL 5
                0xff, // TOS: masked
                (total_len >> 8) as u8,
                total_len as u8,
                (identification >> 8) as u8,
                identification as u8,
                if dont_fragment { 0x40 } else { 0 }, // flags, fragment offset 0
                0,
                0xff, // TTL: masked
                UDP_PROTOCOL,
                0xff, // header checksum: masked
                0xff,
            ]);
            masked[12..16].copy_from_slice(&src.octets());
            masked[16..20].copy_from_slice(&dst.octets());
            IPV4_LEN
        }
        IpFields::V6 { src, dst } => {
            // Version 6, then traffic class and flow label masked.
            masked[..4].copy_from_slice(&[0x6f, 0xff, 0xff, 0xff]);
            masked[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            masked[6] = UDP_PROTOCOL;
            masked[7] = 0xff; // hop limit: masked
            masked[8..24].copy_from_slice(&src.octets());
            masked[24..40].copy_from_slice(&dst.octets());
            IPV6_LEN
        }
    };
    let udp = &mut masked[ip_len..ip_len + UDP_LEN];
    udp[0..2].copy_from_slice(&header.src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&header.dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0xff, 0xff]); // checksum: masked
    ip_len + UDP_LEN
}

/// Computes the ICRC from the IP and UDP headers as captured. The IP header may be IPv4 (with
/// options) or IPv6; its version nibble decides. Returns `None` for anything else.
pub fn compute_raw(ip_header: &[u8], udp_header: &[u8], packet: &[u8]) -> Option<u32> {
    let mut masked = [0; IPV4_MAX_LEN + UDP_LEN];
    let ip_len = ip_header.len();
    if ip_len + UDP_LEN > masked.len() || udp_header.len() != UDP_LEN {
        return None;
    }
    masked[..ip_len].copy_from_slice(ip_header);
    match ip_header.first().map(|b| b >> 4) {
        Some(4) if ip_len >= IPV4_LEN => {
            masked[1] = 0xff; // TOS
            masked[8] = 0xff; // TTL
            masked[10..12].fill(0xff); // header checksum
        }
        Some(6) if ip_len == IPV6_LEN => {
            masked[0] |= 0x0f; // traffic class (high nibble)
            masked[1..4].fill(0xff); // traffic class (low nibble) and flow label
            masked[7] = 0xff; // hop limit
        }
        _ => return None,
    }
    masked[ip_len..ip_len + UDP_LEN].copy_from_slice(udp_header);
    masked[ip_len + 6..ip_len + 8].fill(0xff);
    Some(crc(&masked[..ip_len + UDP_LEN], packet))
}

/// Writes the ICRC into the last 4 bytes of `packet`.
pub fn seal(header: &PseudoHeader, packet: &mut [u8]) {
    let icrc = compute(header, packet);
    if let Some(slot) = packet.len().checked_sub(ICRC_LEN) {
        packet[slot..].copy_from_slice(&icrc.to_le_bytes());
    }
}

/// Writes the ICRC into the last 4 bytes of `packet` as [`seal`] does, but for a packet whose
/// bytes at `hole` are not in `packet`: `fill` hands them to the function it is given, in
/// order and in as many pieces as it likes (a payload that stays in its memory region and
/// leaves by address: the packet is gathered from pieces only as the kernel copies it). The
/// bytes of `packet` at `hole` are never read. Returns false, writing nothing, when `hole` is
/// not inside the part of the packet hashed as it is: past the BTH (and an INT header) and
/// before the ICRC.
pub fn seal_around(
    header: &PseudoHeader,
    packet: &mut [u8],
    hole: std::ops::Range<usize>,
    fill: impl FnOnce(&mut dyn FnMut(&[u8])),
) -> bool {
    let Some(slot) = packet.len().checked_sub(ICRC_LEN) else {
        return false;
    };
    let body = &packet[..slot];
    let hashed_as_is = int_range(body).map_or(bth::HEADER_LEN, |int| int.end);
    if hole.start < hashed_as_is || hole.start > hole.end || hole.end > slot {
        return false;
    }
    let mut masked = [0; IPV6_LEN + UDP_LEN];
    let len = write_masked_ip_udp(header, packet.len(), &mut masked);
    let icrc = crc_around(&masked[..len], packet, hole, fill);
    packet[slot..].copy_from_slice(&icrc.to_le_bytes());
    true
}

/// Room [`compute_in_place`] needs in front of the packet: the LRH ones and the largest masked
/// IP/UDP header.
pub const HEADROOM: usize = LRH_LEN + IPV6_LEN + UDP_LEN;

/// Computes the ICRC of the packet at `buf[at..]` in one pass over contiguous memory: the masked
/// IP/UDP header (and up to 8 bytes of the LRH ones, see `crc`) is written into the headroom in
/// front of the packet (at most [`HEADROOM`] bytes, left overwritten), and BTH byte 4 is masked
/// while hashing and then restored. For a sender or
/// receiver that owns its buffer this is the fast path; [`compute`] borrows and costs one more
/// small hasher call. Returns `None` if `at` is less than the header needs.
pub fn compute_in_place(header: &PseudoHeader, buf: &mut [u8], at: usize) -> Option<u32> {
    let packet_len = buf.len().checked_sub(at)?;
    let len = masked_len(header);
    let end = buf.len() - ICRC_LEN.min(packet_len);
    let literal = lrh_split(len + end - at);
    let start = at.checked_sub(len + literal)?;
    buf[start..start + literal].fill(0xff);
    write_masked_ip_udp(header, packet_len, &mut buf[start + literal..at]);
    let fecn_becn = at + BTH_FECN_BECN;
    let saved = (fecn_becn < end).then(|| std::mem::replace(&mut buf[fecn_becn], 0xff));
    // The INT header, if any, is hashed as ones too, and put back.
    let int = int_range(&buf[at..end]).map(|r| at + r.start..at + r.end);
    let mut int_saved = [0; int::HEADER_LEN];
    if let Some(int) = &int {
        int_saved[..int.len()].copy_from_slice(&buf[int.clone()]);
        buf[int.clone()].fill(0xff);
    }
    let mut hasher = after_ones(LRH_LEN - literal);
    hasher.update(&buf[start..end]);
    if let Some(byte) = saved {
        buf[fecn_becn] = byte;
    }
    if let Some(int) = int {
        let len = int.len();
        buf[int].copy_from_slice(&int_saved[..len]);
    }
    Some(hasher.finalize())
}

/// Writes the ICRC into the last 4 bytes of the packet at `buf[at..]`, computed in place (see
/// [`compute_in_place`]). Returns `None`, writing nothing, without enough headroom.
pub fn seal_in_place(header: &PseudoHeader, buf: &mut [u8], at: usize) -> Option<()> {
    let icrc = compute_in_place(header, buf, at)?;
    let slot = buf.len().checked_sub(ICRC_LEN).filter(|&slot| slot >= at)?;
    buf[slot..].copy_from_slice(&icrc.to_le_bytes());
    Some(())
}

/// Checks the ICRC in the last 4 bytes of `packet`.
///
/// Under `cfg(fuzzing)` every ICRC is accepted, so that a fuzzer reaches the code behind it (as
/// smoltcp does for checksums).
pub fn verify(header: &PseudoHeader, packet: &[u8]) -> Result<(), ParseError> {
    check(compute(header, packet), packet)
}

/// Compares a computed ICRC with the one in the last 4 bytes of `packet`.
pub(crate) fn check(expected: u32, packet: &[u8]) -> Result<(), ParseError> {
    let Some(slot) = packet.len().checked_sub(ICRC_LEN) else {
        return Err(ParseError::Truncated {
            layer: crate::Layer::Icrc,
            need: ICRC_LEN,
            got: packet.len(),
        });
    };
    let mut raw = [0; ICRC_LEN];
    raw.copy_from_slice(&packet[slot..]);
    let found = u32::from_le_bytes(raw);
    if cfg!(fuzzing) || found == expected {
        Ok(())
    } else {
        Err(ParseError::IcrcMismatch { expected, found })
    }
}

/// CRC-32 over the ones that stand for the LRH, the masked IP/UDP headers, then the packet with
/// BTH byte 4 masked, up to its ICRC. No copy of the packet is made: the masked headers and the
/// masked BTH go to the hasher as one small block, then the rest of the packet as one slice.
///
/// crc32fast folds 16 bytes at a time and finishes a block's last `len % 16` bytes with a slow
/// table loop, so the small block takes as many of the 8 LRH bytes literally as make it a
/// multiple of 16 long, and resumes from the CRC of the rest ([`lrh_split`]).
fn crc(masked_ip_udp: &[u8], packet: &[u8]) -> u32 {
    let (mut hasher, body, rest) = crc_of_headers(masked_ip_udp, packet);
    hasher.update(&body[rest..]);
    hasher.finalize()
}

/// [`crc`], with the bytes at `hole` (past the BTH and any INT header, before the ICRC) taken
/// from `fill` instead of `packet`.
fn crc_around(
    masked_ip_udp: &[u8],
    packet: &[u8],
    hole: std::ops::Range<usize>,
    fill: impl FnOnce(&mut dyn FnMut(&[u8])),
) -> u32 {
    let (mut hasher, body, rest) = crc_of_headers(masked_ip_udp, packet);
    // The callers keep the hole inside [rest, body.len()].
    let hole = hole.start.clamp(rest, body.len())..hole.end.clamp(rest, body.len());
    hasher.update(&body[rest..hole.start]);
    fill(&mut |bytes| hasher.update(bytes));
    hasher.update(&body[hole.end..]);
    hasher.finalize()
}

/// The hasher of [`crc`] after the ones, the masked IP/UDP headers, the masked BTH and any INT
/// header; the packet up to its ICRC (its body); where in the body the rest begins. `crc` then
/// hashes the rest in one update: an update costs a call into crc32fast even when its slice is
/// empty (two more per packet were 19 instructions each).
#[inline(always)]
fn crc_of_headers<'a>(
    masked_ip_udp: &[u8],
    packet: &'a [u8],
) -> (crc32fast::Hasher, &'a [u8], usize) {
    let body = &packet[..packet.len().saturating_sub(ICRC_LEN)];
    let bth_len = body.len().min(bth::HEADER_LEN);
    let literal = lrh_split(masked_ip_udp.len() + bth_len);
    let mut head = [0xff; LRH_LEN + IPV4_MAX_LEN + UDP_LEN + bth::HEADER_LEN];
    let ip_udp = literal + masked_ip_udp.len();
    head[literal..ip_udp].copy_from_slice(masked_ip_udp);
    head[ip_udp..ip_udp + bth_len].copy_from_slice(&body[..bth_len]);
    if bth_len > BTH_FECN_BECN {
        head[ip_udp + BTH_FECN_BECN] = 0xff;
    }
    let mut hasher = after_ones(LRH_LEN - literal);
    hasher.update(&head[..ip_udp + bth_len]);
    let rest = match int_range(body) {
        Some(int) => {
            hasher.update(&[0xff; int::HEADER_LEN][..int.len()]);
            int.end
        }
        None => bth_len,
    };
    (hasher, body, rest)
}

/// Where the INT (or PINT) header of `body` (a packet without its ICRC) lies, if its BTH flags
/// one and it fits: the bytes hashed as ones ([`crate::int`]; switches rewrite them).
fn int_range(body: &[u8]) -> Option<std::ops::Range<usize>> {
    let range = bth::HEADER_LEN..bth::HEADER_LEN + int::header_len(body);
    (int::flagged(body) && body.len() >= range.end).then_some(range)
}

/// How many of the 8 LRH bytes of ones to hash literally in front of `len` bytes so that the block
/// is a multiple of 16 long where that is possible (else as close to one as 8 bytes allow); the
/// hasher that has taken the others is [`after_ones`]`(LRH_LEN - literal)`.
fn lrh_split(len: usize) -> usize {
    let need = (16 - len % 16) % 16;
    if need <= LRH_LEN { need } else { 0 }
}

/// A hasher that has taken `ones` bytes of 0xff (at most [`LRH_LEN`]): its CRC so far is
/// `CRC_OF_ONES[ones]`. crc32fast looks at the CPU's features each time it makes a hasher
/// (`Hasher::new_with_initial`: about 35 instructions, a quarter of what a short packet's CRC
/// costs), so the nine are made once and copied.
fn after_ones(ones: usize) -> crc32fast::Hasher {
    static HASHERS: OnceLock<[crc32fast::Hasher; LRH_LEN + 1]> = OnceLock::new();
    let hashers = HASHERS.get_or_init(|| {
        std::array::from_fn(|ones| {
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(&[0xff; LRH_LEN][..ones]);
            hasher
        })
    });
    let ones = ones.min(LRH_LEN);
    let hasher = hashers[ones].clone();
    debug_assert_eq!(hasher.clone().finalize(), CRC_OF_ONES[ones]);
    hasher
}

/// `CRC_OF_ONES[k]`: the CRC-32 of `k` bytes of 0xff, computed at compile time.
const CRC_OF_ONES: [u32; LRH_LEN + 1] = {
    let mut table = [0; LRH_LEN + 1];
    let mut k = 1;
    while k <= LRH_LEN {
        let mut crc = !0u32;
        let mut byte = 0;
        while byte < k {
            crc ^= 0xff;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
                bit += 1;
            }
            byte += 1;
        }
        table[k] = !crc;
        k += 1;
    }
    table
};

/// The masked LRH: 8 bytes of ones. (rxe starts from the raw register state they leave,
/// 0xdebb20e3, the bitwise inverse of their CRC.)
const LRH_LEN: usize = 8;
/// BTH byte holding FECN, BECN and Resv6a (rxe: `bth->qpn |= ~BTH_QPN_MASK`).
const BTH_FECN_BECN: usize = 4;
const IPV4_LEN: usize = 20;
const IPV4_MAX_LEN: usize = 60;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;
const UDP_PROTOCOL: u8 = 17;
const _: () = assert!(bth::HEADER_LEN > BTH_FECN_BECN);

#[cfg(test)]
mod tests;
