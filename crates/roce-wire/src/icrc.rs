//! The RoCEv2 invariant CRC (IBA vol. 1 Annex A17.4.3; the kernel's rxe_icrc.c).
//!
//! The ICRC is CRC-32 (IEEE 802.3, as `crc32fast::hash`) over:
//! 1. 8 bytes of 0xff, standing for the InfiniBand LRH that RoCEv2 does not have;
//! 2. the IP header with the fields that routers may change set to ones: for IPv4 the TOS byte
//!    (DSCP and ECN), the TTL and the header checksum; for IPv6 the traffic class, the flow label
//!    and the hop limit;
//! 3. the UDP header with its checksum set to ones;
//! 4. the BTH with byte 4 (FECN, BECN and the reserved bits) set to ones;
//! 5. everything after the BTH up to the ICRC: extension headers, payload and pad.
//!
//! It is sent least significant byte first. Two paths compute it: from the fields the ICRC
//! covers ([`PseudoHeader`], for the sans-IO core and the UDP backend, which never see the IP
//! header as bytes), and from the IP and UDP headers of a captured frame ([`compute_raw`]).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::packet::ICRC_LEN;
use crate::{ParseError, bth};

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
pub fn compute(header: &PseudoHeader, packet: &[u8]) -> u32 {
    let udp_len = UDP_LEN + packet.len();
    let mut masked = [0; IPV6_LEN + UDP_LEN];
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
    crc(&masked[..ip_len + UDP_LEN], packet)
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
/// BTH byte 4 masked, up to its ICRC. No copy of the packet is made.
fn crc(masked_ip_udp: &[u8], packet: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&LRH_ONES);
    hasher.update(masked_ip_udp);
    let body = &packet[..packet.len().saturating_sub(ICRC_LEN)];
    if body.len() > BTH_FECN_BECN {
        hasher.update(&body[..BTH_FECN_BECN]);
        hasher.update(&[0xff]);
        hasher.update(&body[BTH_FECN_BECN + 1..]);
    } else {
        hasher.update(body);
    }
    hasher.finalize()
}

/// The masked LRH: rxe starts its CRC from the state these leave (0xdebb20e3).
const LRH_ONES: [u8; 8] = [0xff; 8];
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
