//! GIDs as RoCEv2 uses them, and the UDP source port a connection uses.
//!
//! A RoCEv2 GID is an IPv6 address: an IPv4 interface has the IPv4-mapped GID `::ffff:a.b.c.d`,
//! an IPv6 one its own address (IBA Annex A17.2; rxe's GID table holds one per address).

use core::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// A 128-bit global identifier, in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The GID of an IP address: IPv4-mapped for IPv4.
    pub fn from_ip(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(v4.to_ipv6_mapped().octets()),
            IpAddr::V6(v6) => Self(v6.octets()),
        }
    }

    /// The IP address a GID stands for: IPv4 for an IPv4-mapped GID, IPv6 otherwise.
    pub fn to_ip(self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.0);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }

    /// Whether every byte is zero (ibv_rc_pingpong sends this when run without `-g`).
    pub fn is_zero(self) -> bool {
        self.0 == [0; 16]
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Ipv6Addr::from(self.0), f)
    }
}

/// The lowest UDP source port RoCEv2 uses (`IB_ROCE_UDP_ENCAP_VALID_PORT_MIN`).
pub const UDP_SPORT_MIN: u16 = 0xc000;

/// The flow label of a connection without one: the two QPNs folded into 20 bits
/// (`rdma_calc_flow_label`, include/rdma/ib_verbs.h). Symmetric, so both ends agree.
pub const fn flow_label(local_qpn: u32, remote_qpn: u32) -> u32 {
    let mut v = (local_qpn as u64) * (remote_qpn as u64);
    v ^= v >> 20;
    v ^= v >> 40;
    (v & FLOW_LABEL_MASK) as u32
}

/// The UDP source port for a flow label: its 20 bits folded into 14, in 0xc000..=0xffff
/// (`rdma_flow_label_to_udp_sport`, include/rdma/ib_verbs.h).
pub const fn udp_sport(flow_label: u32) -> u16 {
    let low = flow_label & 0x3fff;
    let high = (flow_label & 0xf_c000) >> 14;
    ((low ^ high) as u16) | UDP_SPORT_MIN
}

/// The UDP source port rxe uses for a connection between two QPs with no flow label
/// (`rdma_get_udp_sport`): the same on both ends.
pub const fn udp_sport_for_qps(local_qpn: u32, remote_qpn: u32) -> u16 {
    udp_sport(flow_label(local_qpn, remote_qpn))
}

const FLOW_LABEL_MASK: u64 = 0xf_ffff;

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn ipv4_mapped_gid() {
        let gid = Gid::from_ip(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 12)));
        let mut expected = [0; 16];
        expected[10..].copy_from_slice(&[0xff, 0xff, 198, 18, 0, 12]);
        assert_eq!(gid.0, expected);
        assert_eq!(gid.to_string(), "::ffff:198.18.0.12");
        assert_eq!(gid.to_ip(), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 12)));
    }

    #[test]
    fn ipv6_gid_is_the_address() {
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(Gid::from_ip(ip).to_ip(), ip);
        assert!(Gid::default().is_zero());
    }

    #[test]
    fn udp_sport_of_the_rxe_captures() {
        // QPN 0x11 on both ends: rxe sent from port 49441 in both directions.
        assert_eq!(udp_sport_for_qps(0x11, 0x11), 49441);
    }

    #[test]
    fn udp_sport_is_symmetric_and_in_range() {
        for (a, b) in [
            (0x11, 0x12),
            (0xab_cdef, 0x12_3456),
            (0xff_ffff, 0xff_ffff),
            (0, 7),
        ] {
            let port = udp_sport_for_qps(a, b);
            assert_eq!(port, udp_sport_for_qps(b, a));
            assert!(port >= UDP_SPORT_MIN);
        }
        // The high 6 bits of the flow label fold onto the low ones.
        assert_eq!(udp_sport(0xf_c000), 0xc000 | 0x3f);
    }
}
