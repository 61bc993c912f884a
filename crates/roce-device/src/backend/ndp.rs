//! IPv6 neighbour discovery (RFC 4861) for the raw backend, as ARP is for IPv4: the
//! solicitation that asks for a neighbour's link-layer address, the advertisement that
//! answers one for our address, and reading either (through etherparse's ICMPv6). Only what a
//! host needs to reach its on-link peers: no router discovery, no duplicate address detection
//! (the NIC plays an address that no kernel owns), no redirects.

use std::net::Ipv6Addr;

use etherparse::icmpv6::NeighborAdvertisementHeader;
use etherparse::{
    EtherType, Ethernet2Header, Icmpv6Header, Icmpv6Type, IpNumber, Ipv6FlowLabel, Ipv6Header,
    NetSlice, SlicedPacket, TransportSlice,
};

/// Neighbour discovery messages carry this hop limit, and a message with another is not
/// believed (RFC 4861 §7.1.1, §7.1.2: it came from off the link).
const HOP_LIMIT: u8 = 255;
/// The NDP option types of a link-layer address (RFC 4861 §4.6.1).
const SOURCE_LINK_LAYER: u8 = 1;
const TARGET_LINK_LAYER: u8 = 2;

/// A neighbour solicitation or advertisement, read from a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ndp {
    /// A solicitation (else an advertisement).
    pub(super) is_solicitation: bool,
    /// The address asked about, or announced.
    pub(super) target: Ipv6Addr,
    /// The sender's IPv6 address.
    pub(super) sender_ip: Ipv6Addr,
    /// The link-layer address the message gives: a solicitation's source (the sender's), an
    /// advertisement's target (the target's, whose IP is `target`).
    pub(super) mac: Option<[u8; 6]>,
}

/// The neighbour solicitation or advertisement in `frame`, if it is one whose ICMPv6 checksum
/// holds and whose hop limit is 255; `None` for anything else.
pub(super) fn parse(frame: &[u8]) -> Option<Ndp> {
    let sliced = SlicedPacket::from_ethernet(frame).ok()?;
    let Some(NetSlice::Ipv6(ip)) = &sliced.net else {
        return None;
    };
    let header = ip.header();
    if header.hop_limit() != HOP_LIMIT {
        return None;
    }
    let (src, dst) = (header.source(), header.destination());
    let Some(TransportSlice::Icmpv6(icmp)) = &sliced.transport else {
        return None;
    };
    if !icmp.is_checksum_valid(src, dst) || icmp.code_u8() != 0 {
        return None;
    }
    let is_solicitation = match icmp.icmp_type() {
        Icmpv6Type::NeighborSolicitation => true,
        Icmpv6Type::NeighborAdvertisement(_) => false,
        _ => return None,
    };
    // The target address, then options of 8-byte units: type, length, data.
    let payload = icmp.payload();
    let target: [u8; 16] = payload.get(..16)?.try_into().ok()?;
    let wanted = if is_solicitation {
        SOURCE_LINK_LAYER
    } else {
        TARGET_LINK_LAYER
    };
    let mut options = &payload[16..];
    let mut mac = None;
    while let [kind, len, ..] = *options {
        let bytes = usize::from(len) * 8;
        if bytes == 0 || bytes > options.len() {
            // RFC 4861 §4.6: a zero length is invalid and the message is dropped.
            return None;
        }
        if kind == wanted && bytes == 8 {
            mac = options[2..8].try_into().ok();
        }
        options = &options[bytes..];
    }
    Some(Ndp {
        is_solicitation,
        target: Ipv6Addr::from(target),
        sender_ip: Ipv6Addr::from(src),
        mac,
    })
}

/// The solicitation from `mac`/`ip` for `target`'s link-layer address, to its solicited-node
/// multicast address (`ff02::1:ffXX:XXXX`, MAC `33:33:ff:XX:XX:XX`), with our link-layer
/// address as its option.
pub(super) fn solicitation(mac: [u8; 6], ip: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let t = target.octets();
    let group = Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(t[13]),
        u16::from_be_bytes([t[14], t[15]]),
    );
    let to = [0x33, 0x33, 0xff, t[13], t[14], t[15]];
    frame(
        (mac, to),
        (ip, group),
        Icmpv6Type::NeighborSolicitation,
        target,
        (SOURCE_LINK_LAYER, mac),
    )
}

/// The advertisement from `mac`/`ip` that answers `to_mac`/`to_ip`'s solicitation for our
/// address: solicited, overriding, with our link-layer address as its option.
pub(super) fn advertisement(
    mac: [u8; 6],
    ip: Ipv6Addr,
    to_mac: [u8; 6],
    to_ip: Ipv6Addr,
) -> Vec<u8> {
    let na = NeighborAdvertisementHeader {
        router: false,
        solicited: true,
        r#override: true,
    };
    frame(
        (mac, to_mac),
        (ip, to_ip),
        Icmpv6Type::NeighborAdvertisement(na),
        ip,
        (TARGET_LINK_LAYER, mac),
    )
}

/// An Ethernet frame of one ICMPv6 neighbour discovery message: `kind` about `target` with
/// one link-layer address option.
fn frame(
    (src_mac, dst_mac): ([u8; 6], [u8; 6]),
    (src, dst): (Ipv6Addr, Ipv6Addr),
    kind: Icmpv6Type,
    target: Ipv6Addr,
    (option, option_mac): (u8, [u8; 6]),
) -> Vec<u8> {
    let mut body = target.octets().to_vec();
    body.extend_from_slice(&[option, 1]);
    body.extend_from_slice(&option_mac);
    let icmp = Icmpv6Header::with_checksum(kind, src.octets(), dst.octets(), &body)
        .unwrap_or_else(|_| unreachable!("a 24-byte body is no jumbo payload"));
    let ip = Ipv6Header {
        traffic_class: 0,
        flow_label: Ipv6FlowLabel::ZERO,
        payload_length: (icmp.header_len() + body.len()) as u16,
        next_header: IpNumber::IPV6_ICMP,
        hop_limit: HOP_LIMIT,
        source: src.octets(),
        destination: dst.octets(),
    };
    let eth = Ethernet2Header {
        source: src_mac,
        destination: dst_mac,
        ether_type: EtherType::IPV6,
    };
    let mut out = eth.to_bytes().to_vec();
    out.extend_from_slice(&ip.to_bytes());
    out.extend_from_slice(&icmp.to_bytes());
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x18, 6, 0, 0, 0, 2);
    const PEER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x18, 6, 0, 0, 0x12, 0x3456);
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    #[test]
    fn a_solicitation_goes_to_the_targets_solicited_node_group_and_reads_back() {
        let f = solicitation(PEER_MAC, PEER, US);
        // 33:33:ff + the target's last three bytes; IPv6 to ff02::1:ff00:2.
        assert_eq!(f[..6], [0x33, 0x33, 0xff, 0, 0, 2]);
        assert_eq!(f[12..14], [0x86, 0xdd]);
        let group: Ipv6Addr = "ff02::1:ff00:2".parse().unwrap();
        assert_eq!(f[38..54], group.octets());
        assert_eq!(
            parse(&f),
            Some(Ndp {
                is_solicitation: true,
                target: US,
                sender_ip: PEER,
                mac: Some(PEER_MAC),
            })
        );
    }

    #[test]
    fn an_advertisement_answers_with_our_mac_as_the_target_option() {
        let f = advertisement(MAC, US, PEER_MAC, PEER);
        assert_eq!(f[..6], PEER_MAC);
        // Solicited and override set, router not.
        assert_eq!(f[14 + 40 + 4], 0x60);
        assert_eq!(
            parse(&f),
            Some(Ndp {
                is_solicitation: false,
                target: US,
                sender_ip: US,
                mac: Some(MAC),
            })
        );
    }

    #[test]
    fn messages_with_a_bad_checksum_hop_limit_or_option_length_are_not_believed() {
        let good = solicitation(PEER_MAC, PEER, US);
        assert!(parse(&good).is_some());
        // The checksum: one byte of the target changed.
        let mut f = good.clone();
        f[14 + 40 + 8] ^= 1;
        assert_eq!(parse(&f), None);
        // A hop limit below 255: from off the link (the checksum does not cover it).
        let mut f = good.clone();
        f[14 + 7] = 254;
        assert_eq!(parse(&f), None);
        // An option of length 0 (RFC 4861 §4.6): the checksum made right again.
        let mut body = US.octets().to_vec();
        body.extend_from_slice(&[SOURCE_LINK_LAYER, 0, 0, 0, 0, 0, 0, 0]);
        let group: Ipv6Addr = "ff02::1:ff00:2".parse().unwrap();
        let icmp = Icmpv6Header::with_checksum(
            Icmpv6Type::NeighborSolicitation,
            PEER.octets(),
            group.octets(),
            &body,
        )
        .unwrap();
        let mut f = good[..14 + 40].to_vec();
        f.extend_from_slice(&icmp.to_bytes());
        f.extend_from_slice(&body);
        assert_eq!(parse(&f), None);
        // Not ICMPv6 at all, and truncated frames.
        assert_eq!(parse(&good[..20]), None);
        assert_eq!(parse(&[]), None);
    }
}
