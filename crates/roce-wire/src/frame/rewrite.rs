//! In-place edits of an Ethernet frame that a switch forwards: reading its IP marking, setting
//! ECN to CE (RFC 3168; the ICRC masks those bits, IBA Annex A17.4.2), and writing a TCP or UDP
//! checksum that was left to an offload. etherparse finds and rewrites the headers (VLAN tags
//! included); a frame these cannot make sense of is left as it is.

use etherparse::{
    IpNumber, Ipv4Header, Ipv6Header, LaxNetSlice, LaxSlicedPacket, TcpHeader, UdpHeader,
};

use super::{Ecn, offset_in};

/// The ECN field and DSCP of an Ethernet frame's IPv4 or IPv6 header, or `None` if it has none.
pub fn ip_marking(frame: &[u8]) -> Option<(Ecn, u8)> {
    match LaxSlicedPacket::from_ethernet(frame).ok()?.net? {
        LaxNetSlice::Ipv4(v4) => {
            let h = v4.header();
            Some((Ecn::from_bits(h.ecn().value()), h.dcp().value()))
        }
        LaxNetSlice::Ipv6(v6) => {
            let h = v6.header();
            Some((Ecn::from_bits(h.ecn().value()), h.dscp().value()))
        }
        LaxNetSlice::Arp(_) => None,
    }
}

/// The priority code point (PCP, IEEE 802.1Q) of an Ethernet frame's outer VLAN tag (802.1Q,
/// or 802.1ad's service tag), or `None` for an untagged frame.
pub fn vlan_pcp(frame: &[u8]) -> Option<u8> {
    match *frame.get(12..15)? {
        [0x81, 0x00, tci] | [0x88, 0xa8, tci] => Some(tci >> 5),
        _ => None,
    }
}

/// Sets the ECN field of an Ethernet frame's IP header to CE (and, for IPv4, recomputes the
/// header checksum). Returns whether it did: false for a frame without a well-formed IP header.
pub fn mark_ce(frame: &mut [u8]) -> bool {
    let Some((at, version)) = ip_header_at(frame) else {
        return false;
    };
    let Some(header) = frame.get_mut(at..) else {
        return false;
    };
    match version {
        IpVersion::V4 => {
            let Ok((mut h, _)) = Ipv4Header::from_slice(header) else {
                return false;
            };
            h.ecn = etherparse::IpEcn::CongestionExperienced;
            h.header_checksum = h.calc_header_checksum();
            let bytes = h.to_bytes();
            put(header, &bytes)
        }
        IpVersion::V6 => {
            let Ok((mut h, _)) = Ipv6Header::from_slice(header) else {
                return false;
            };
            h.traffic_class |= Ecn::Ce.bits();
            put(header, &h.to_bytes())
        }
    }
}

/// Writes the TCP or UDP checksum of an Ethernet frame's IPv4 or IPv6 datagram. A veth hands a
/// packet socket its frames with the checksum left to an offload that never comes (only the
/// pseudo-header sum is in the field; the socket's `virtio_net_hdr` says
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`); a switch that forwards them as they are would have the
/// receiver drop them. A UDP/IPv4 checksum of 0 ("none") stays 0; a fragment, a datagram cut
/// short, or anything but TCP and UDP is left alone. Returns whether it wrote one.
pub fn fill_l4_checksum(frame: &mut [u8]) -> bool {
    let Some((field, checksum)) = l4_checksum(frame) else {
        return false;
    };
    frame
        .get_mut(field..)
        .is_some_and(|at| put(at, &checksum.to_be_bytes()))
}

/// Where the checksum field of `frame`'s TCP or UDP header is, and what it should hold.
fn l4_checksum(frame: &[u8]) -> Option<(usize, u16)> {
    enum Addresses {
        V4([u8; 4], [u8; 4]),
        V6([u8; 16], [u8; 16]),
    }
    let sliced = LaxSlicedPacket::from_ethernet(frame).ok()?;
    let (addresses, payload) = match sliced.net.as_ref()? {
        LaxNetSlice::Ipv4(v4) => {
            let h = v4.header();
            (Addresses::V4(h.source(), h.destination()), v4.payload())
        }
        LaxNetSlice::Ipv6(v6) => {
            let h = v6.header();
            (Addresses::V6(h.source(), h.destination()), v6.payload())
        }
        LaxNetSlice::Arp(_) => return None,
    };
    if payload.incomplete || payload.fragmented {
        return None;
    }
    let segment = payload.payload;
    let at = offset_in(frame, segment)?;
    match payload.ip_number {
        IpNumber::UDP => {
            let (udp, data) = UdpHeader::from_slice(segment).ok()?;
            if matches!(addresses, Addresses::V4(..)) && udp.checksum == 0 {
                return None;
            }
            let checksum = match addresses {
                Addresses::V4(src, dst) => udp.calc_checksum_ipv4_raw(src, dst, data),
                Addresses::V6(src, dst) => udp.calc_checksum_ipv6_raw(src, dst, data),
            }
            .ok()?;
            Some((at + 6, checksum))
        }
        IpNumber::TCP => {
            let (tcp, data) = TcpHeader::from_slice(segment).ok()?;
            let checksum = match addresses {
                Addresses::V4(src, dst) => tcp.calc_checksum_ipv4_raw(src, dst, data),
                Addresses::V6(src, dst) => tcp.calc_checksum_ipv6_raw(src, dst, data),
            }
            .ok()?;
            Some((at + 16, checksum))
        }
        _ => None,
    }
}

/// Where the UDP payload of a RoCEv2 datagram (UDP destination port 4791) starts in an
/// Ethernet frame, VLAN tags and IPv4 options included, and whether its IP header is IPv6;
/// `None` for any other frame, a fragment, or one cut short.
pub fn roce_payload_at(frame: &[u8]) -> Option<(usize, bool)> {
    let sliced = LaxSlicedPacket::from_ethernet(frame).ok()?;
    let (payload, v6) = match sliced.net.as_ref()? {
        LaxNetSlice::Ipv4(v4) => (v4.payload(), false),
        LaxNetSlice::Ipv6(v6) => (v6.payload(), true),
        LaxNetSlice::Arp(_) => return None,
    };
    if payload.incomplete || payload.fragmented || payload.ip_number != IpNumber::UDP {
        return None;
    }
    let (udp, data) = UdpHeader::from_slice(payload.payload).ok()?;
    if udp.destination_port != crate::ROCE_V2_UDP_PORT {
        return None;
    }
    Some((offset_in(frame, data)?, v6))
}

#[derive(Debug, Clone, Copy)]
enum IpVersion {
    V4,
    V6,
}

/// Where `frame`'s IP header starts, and its version.
fn ip_header_at(frame: &[u8]) -> Option<(usize, IpVersion)> {
    let sliced = LaxSlicedPacket::from_ethernet(frame).ok()?;
    let (header, version) = match sliced.net.as_ref()? {
        LaxNetSlice::Ipv4(v4) => (v4.header().slice(), IpVersion::V4),
        LaxNetSlice::Ipv6(v6) => (v6.header().slice(), IpVersion::V6),
        LaxNetSlice::Arp(_) => return None,
    };
    Some((offset_in(frame, header)?, version))
}

/// Overwrites the front of `header` with `bytes`; false if it is too short.
fn put(header: &mut [u8], bytes: &[u8]) -> bool {
    match header.get_mut(..bytes.len()) {
        Some(front) => {
            front.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests;
