//! The 40-byte GRH area in front of a UD receive: the IP header of the datagram that carried
//! the message, as rxe writes it (`rxe_resp.c` `send_data_in` of the `ip_hdr` or `ipv6_hdr`):
//! the IPv6 header whole, or the IPv4 header in the area's last 20 bytes after 20 zero bytes.
//! `ibv_init_ah_from_wc` reads the sender's address from it to answer (udaddy's server does).

use std::net::{IpAddr, SocketAddr};

use roce_wire::ROCE_V2_UDP_PORT;
use roce_wire::frame::Ecn;
use roce_wire::frame::FrameRepr;

/// Bytes of the GRH area.
pub(crate) const GRH_LEN: usize = 40;

/// What the engine knows of the IP header of the datagram being handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrival {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) ecn: Ecn,
    pub(crate) ip_id: u16,
    /// The UDP payload's length (the RoCE packet).
    pub(crate) len: usize,
}

impl Arrival {
    /// The GRH area of the datagram. DSCP and TTL are not handed to the engine: 0 and 64 are
    /// written (what our peers send).
    //= rxe:rxe_resp.c/send_data_in
    //# a UD receive starts with the packet's IPv6 header, or 20 zero bytes and its IPv4 header
    pub(crate) fn grh(&self) -> [u8; GRH_LEN] {
        let mut out = [0u8; GRH_LEN];
        let mut repr = FrameRepr::for_datagram(
            SocketAddr::new(self.src, ROCE_V2_UDP_PORT),
            SocketAddr::new(self.dst, ROCE_V2_UDP_PORT),
            self.ecn,
            0,
            64,
        );
        let v4 = self.src.is_ipv4();
        if v4 {
            repr.ip.identification = Some(self.ip_id);
        }
        let mut headers = [0u8; 14 + GRH_LEN + 8];
        if repr.emit_headers(&mut headers, self.len).is_err() {
            // Mixed families or an oversized packet: the engine never hands either on.
            out[20] = 0x45;
            return out;
        }
        if v4 {
            out[20..].copy_from_slice(&headers[14..34]);
        } else {
            out.copy_from_slice(&headers[14..54]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_datagram_leaves_its_header_in_the_last_20_bytes() {
        let a = Arrival {
            src: "198.18.0.1".parse().unwrap(),
            dst: "198.18.0.2".parse().unwrap(),
            ecn: Ecn::Ect0,
            ip_id: 0x1234,
            len: 100,
        };
        let grh = a.grh();
        assert_eq!(grh[..20], [0; 20]);
        let ip = &grh[20..];
        assert_eq!(ip[0], 0x45);
        assert_eq!(ip[1] & 3, 2, "ECT(0)");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 20 + 8 + 100);
        assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 0x1234);
        assert_eq!((ip[8], ip[9]), (64, 17));
        assert_eq!(ip[12..16], [198, 18, 0, 1]);
        assert_eq!(ip[16..20], [198, 18, 0, 2]);
        // The header checksum is right: the sum of the words is 0xffff.
        let sum: u32 = ip
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
    }

    #[test]
    fn an_ipv6_datagram_fills_the_area() {
        let a = Arrival {
            src: "2001:db8::1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
            ecn: Ecn::NotEct,
            ip_id: 0,
            len: 64,
        };
        let grh = a.grh();
        assert_eq!(grh[0] >> 4, 6);
        assert_eq!(u16::from_be_bytes([grh[4], grh[5]]), 8 + 64);
        assert_eq!(grh[6], 17);
        assert_eq!(
            grh[8..24],
            "2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        );
    }
}
