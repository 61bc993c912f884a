//! Cheap byte checks on a received frame, before any parse: IPv4 fragments of UDP datagrams
//! to us, ICMPv6, and what is worth a full parse.

use std::net::IpAddr;

/// Whether `frame` is an IPv4 fragment (More Fragments set or a non-zero offset) of a UDP
/// datagram to `ip`: the first fragment carries the UDP header, the others do not, so none of
/// them can be told apart as RoCEv2 by its port; all are dropped and counted.
pub(super) fn is_udp_fragment_to(frame: &[u8], ip: IpAddr) -> bool {
    let IpAddr::V4(ip) = ip else {
        return false;
    };
    frame.get(12..14) == Some(&[0x08, 0x00])
        && frame.get(23) == Some(&17)
        && frame
            .get(20..22)
            .is_some_and(|f| f[0] & 0x3f != 0 || f[1] != 0)
        && frame.get(30..34) == Some(&ip.octets()[..])
}

/// Whether `frame` is ICMPv6 over Ethernet (no extension header between: neighbour discovery
/// has none).
pub(super) fn is_icmpv6(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&[0x86, 0xdd]) && frame.get(20) == Some(&58)
}

/// Frames that are worth a full parse (cheap byte checks): ARP, ICMPv6 (neighbour discovery),
/// and UDP to port 4791 over IPv4 or IPv6 (whose UDP header follows the fixed header: RoCEv2
/// has no extension headers).
pub(super) fn wanted(frame: &[u8]) -> bool {
    let port = &roce_wire::ROCE_V2_UDP_PORT.to_be_bytes()[..];
    match frame.get(12..14) {
        Some([0x08, 0x06]) => true,
        Some([0x08, 0x00]) => {
            let ihl = usize::from(frame.get(14).map_or(0, |b| b & 0x0f)) * 4;
            frame.get(23) == Some(&17) && frame.get(14 + ihl + 2..14 + ihl + 4) == Some(port)
        }
        Some([0x86, 0xdd]) => match frame.get(20) {
            Some(58) => true,
            Some(17) => frame.get(14 + 40 + 2..14 + 40 + 4) == Some(port),
            _ => false,
        },
        _ => false,
    }
}
