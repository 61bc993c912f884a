//! [`FrameRepr`]: the Ethernet, IP and UDP headers of a frame to build, emitted through etherparse.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use etherparse::checksum::Sum16BitWords;
use etherparse::{
    EtherType, Ethernet2Header, IpDscp, IpEcn, IpNumber, Ipv4Header, Ipv6FlowLabel, Ipv6Header,
    SingleVlanHeader, UdpHeader, VlanId, VlanPcp,
};

use super::{Ecn, Ethernet, Ip, UDP_HEADER_LEN, malformed};
use crate::icrc::PseudoHeader;
use crate::{Layer, ParseError};

/// The Ethernet, IP and UDP headers of a RoCEv2 frame to build. DSCP, ECN, TTL and the IPv4 ID
/// are the sender's to choose; lengths and the IPv4 header checksum are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr {
    /// Ethernet header.
    pub ethernet: Ethernet,
    /// IP header fields. `identification` and `flow_label` are used when present.
    pub ip: Ip,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port (4791 for RoCEv2).
    pub dst_port: u16,
}

impl FrameRepr {
    /// The headers roce-emu puts around a UDP datagram it knows only by its endpoints and
    /// marking (the UDP backend, the simulator, capture taps): IPv4 ID 0 with DF (what the engine
    /// computes its ICRCs for), flow label 0 for IPv6, and locally administered MACs made from
    /// the addresses (`02:00:` then the address's last four bytes), so that one host's frames
    /// look alike in Wireshark.
    pub fn for_datagram(src: SocketAddr, dst: SocketAddr, ecn: Ecn, dscp: u8, ttl: u8) -> Self {
        let v4 = src.is_ipv4();
        Self {
            ethernet: Ethernet {
                src: local_mac(src.ip()),
                dst: local_mac(dst.ip()),
                vlan: None,
                ether_type: if v4 { 0x0800 } else { 0x86dd },
            },
            ip: Ip {
                src: src.ip(),
                dst: dst.ip(),
                dscp,
                ecn,
                ttl,
                identification: v4.then_some(0),
                dont_fragment: v4,
                flow_label: (!v4).then_some(0),
            },
            src_port: src.port(),
            dst_port: dst.port(),
        }
    }

    /// Length of the Ethernet, VLAN, IP and UDP headers.
    pub fn header_len(&self) -> usize {
        let vlan = if self.ethernet.vlan.is_some() {
            SingleVlanHeader::LEN
        } else {
            0
        };
        let ip = match self.ip.src {
            IpAddr::V4(_) => Ipv4Header::MIN_LEN,
            IpAddr::V6(_) => Ipv6Header::LEN,
        };
        Ethernet2Header::LEN + vlan + ip + UDP_HEADER_LEN
    }

    /// Writes the headers for a UDP payload of `payload_len` bytes into the front of `buf`, and
    /// returns how many bytes they took. The UDP checksum is 0, as rxe sends it (RoCEv2 allows 0
    /// over IPv6 too, IBA Annex A17.4.2). Fails with `Malformed` if the addresses mix IPv4 and
    /// IPv6, a field is out of range, or `buf` is too short.
    pub fn emit_headers(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, ParseError> {
        let len = self.header_len();
        if buf.len() < len {
            return Err(ParseError::Truncated {
                layer: Layer::Ethernet,
                need: len,
                got: buf.len(),
            });
        }
        let udp_len = u16::try_from(UDP_HEADER_LEN + payload_len)
            .map_err(|_| ParseError::Malformed { layer: Layer::Udp })?;
        let ip_type = match self.ip.src {
            IpAddr::V4(_) => EtherType::IPV4,
            IpAddr::V6(_) => EtherType::IPV6,
        };
        let ether_type = if self.ethernet.vlan.is_some() {
            EtherType::VLAN_TAGGED_FRAME
        } else {
            ip_type
        };
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            buf[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        // `ethernet.ether_type` is derived from the IP version here: the frame is RoCEv2.
        let eth = Ethernet2Header {
            source: self.ethernet.src,
            destination: self.ethernet.dst,
            ether_type,
        };
        put(&eth.to_bytes());
        if let Some(vlan) = self.ethernet.vlan {
            let tag = SingleVlanHeader {
                pcp: VlanPcp::try_new(vlan.pcp).map_err(|_| malformed(Layer::Ethernet))?,
                drop_eligible_indicator: vlan.dei,
                vlan_id: VlanId::try_new(vlan.vid).map_err(|_| malformed(Layer::Ethernet))?,
                ether_type: ip_type,
            };
            put(&tag.to_bytes());
        }
        match (self.ip.src, self.ip.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => put(&self.ipv4(src, dst, udp_len)?.to_bytes()),
            (IpAddr::V6(src), IpAddr::V6(dst)) => put(&self.ipv6(src, dst, udp_len)?.to_bytes()),
            _ => return Err(malformed(Layer::Ipv4)),
        }
        let udp = UdpHeader {
            source_port: self.src_port,
            destination_port: self.dst_port,
            length: udp_len,
            checksum: 0,
        };
        put(&udp.to_bytes());
        Ok(len)
    }

    /// Writes the headers for a segmentation-offload send of a UDP payload of `payload_len`
    /// bytes, which the kernel cuts into datagrams (`UDP_SEGMENT`, a `virtio_net_hdr` with
    /// `VIRTIO_NET_HDR_GSO_UDP_L4`): as [`FrameRepr::emit_headers`], but the UDP checksum field
    /// holds the sum (not inverted) of the pseudo-header of the whole (RFC 768, RFC 8200 §8.1),
    /// which the kernel completes for each datagram it cuts (`CHECKSUM_PARTIAL`).
    pub fn emit_offload_headers(
        &self,
        buf: &mut [u8],
        payload_len: usize,
    ) -> Result<usize, ParseError> {
        let len = self.emit_headers(buf, payload_len)?;
        let udp_len =
            u32::try_from(UDP_HEADER_LEN + payload_len).map_err(|_| malformed(Layer::Udp))?;
        let sum = match (self.ip.src, self.ip.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => Sum16BitWords::new()
                .add_4bytes(src.octets())
                .add_4bytes(dst.octets())
                .add_2bytes([0, IpNumber::UDP.0])
                .add_2bytes(
                    u16::try_from(udp_len)
                        .map_err(|_| malformed(Layer::Udp))?
                        .to_be_bytes(),
                ),
            (IpAddr::V6(src), IpAddr::V6(dst)) => Sum16BitWords::new()
                .add_16bytes(src.octets())
                .add_16bytes(dst.octets())
                .add_4bytes(udp_len.to_be_bytes())
                .add_4bytes([0, 0, 0, IpNumber::UDP.0]),
            _ => return Err(malformed(Layer::Ipv4)),
        };
        // etherparse sums in the host's byte order; `to_be` turns its result into the value.
        let partial = (!sum.ones_complement()).to_be();
        buf[len - 2..len].copy_from_slice(&partial.to_be_bytes());
        Ok(len)
    }

    /// The IP/UDP fields the ICRC covers.
    pub fn pseudo_header(&self) -> Option<PseudoHeader> {
        self.ip.pseudo_header(self.src_port, self.dst_port)
    }

    fn ipv4(&self, src: Ipv4Addr, dst: Ipv4Addr, udp_len: u16) -> Result<Ipv4Header, ParseError> {
        let mut h = Ipv4Header::new(
            udp_len,
            self.ip.ttl,
            IpNumber::UDP,
            src.octets(),
            dst.octets(),
        )
        .map_err(|_| malformed(Layer::Ipv4))?;
        h.dscp = IpDscp::try_new(self.ip.dscp).map_err(|_| malformed(Layer::Ipv4))?;
        h.ecn = IpEcn::try_new(self.ip.ecn.bits()).map_err(|_| malformed(Layer::Ipv4))?;
        h.identification = self.ip.identification.unwrap_or(0);
        h.dont_fragment = self.ip.dont_fragment;
        h.header_checksum = h.calc_header_checksum();
        Ok(h)
    }

    fn ipv6(&self, src: Ipv6Addr, dst: Ipv6Addr, udp_len: u16) -> Result<Ipv6Header, ParseError> {
        Ok(Ipv6Header {
            traffic_class: (self.ip.dscp << 2) | self.ip.ecn.bits(),
            flow_label: Ipv6FlowLabel::try_new(self.ip.flow_label.unwrap_or(0))
                .map_err(|_| malformed(Layer::Ipv6))?,
            payload_length: udp_len,
            next_header: IpNumber::UDP,
            hop_limit: self.ip.ttl,
            source: src.octets(),
            destination: dst.octets(),
        })
    }
}

/// A locally administered unicast MAC: `02:00:` and the address's last four bytes.
pub fn local_mac(ip: IpAddr) -> [u8; 6] {
    let tail = match ip {
        IpAddr::V4(v4) => v4.octets(),
        IpAddr::V6(v6) => {
            let o = v6.octets();
            [o[12], o[13], o[14], o[15]]
        }
    };
    [0x02, 0x00, tail[0], tail[1], tail[2], tail[3]]
}
