//! Whole frames: Ethernet (with an optional 802.1Q tag), IPv4 or IPv6, UDP, and the RoCEv2 packet
//! inside. etherparse reads and writes the Ethernet, VLAN, IP and UDP headers; this module only
//! ties them to the RoCE part. Used by the raw backend, the simulator's captures and `roce dump`.
//! [`gso`] cuts a segmentation-offload batch captured whole into the datagrams it stands for;
//! [`rewrite`] edits the frames a switch forwards in place (ECN marking, checksums left to an
//! offload).

use std::net::IpAddr;

use etherparse::{
    EtherType, Ethernet2Header, Ipv4Header, Ipv6Header, LinkExtSlice, LinkSlice, NetSlice,
    SlicedPacket, TransportSlice, UdpHeader,
};

use crate::icrc::{self, IpFields, PseudoHeader};
use crate::{Layer, ParseError, ROCE_V2_UDP_PORT, RocePacket};

pub mod gso;
pub mod rewrite;

mod repr;

pub use gso::Segments;
pub use repr::{FrameRepr, local_mac};

/// Bytes an untagged Ethernet frame carrying an IPv4/UDP datagram adds to its UDP payload: the
/// Ethernet, IPv4 (no options) and UDP headers, 14 + 20 + 8. What link and switch models count
/// on the wire besides the payload.
pub const IPV4_FRAME_OVERHEAD: usize = Ethernet2Header::LEN + Ipv4Header::MIN_LEN + UdpHeader::LEN;
/// The same for IPv6 (no extension headers): 14 + 40 + 8.
pub const IPV6_FRAME_OVERHEAD: usize = Ethernet2Header::LEN + Ipv6Header::LEN + UdpHeader::LEN;

/// What the bytes of a captured frame start with (pcap's link type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// Ethernet II (LINKTYPE_ETHERNET).
    Ethernet,
    /// Linux cooked capture v1, as `tcpdump -i any` writes (LINKTYPE_LINUX_SLL, 113): a 16-byte
    /// header whose last two bytes are the protocol (an EtherType for IP).
    LinuxSll,
    /// Linux cooked capture v2, `tcpdump -i any -y LINUX_SLL2` (LINKTYPE_LINUX_SLL2, 276): a
    /// 20-byte header whose first two bytes are the protocol.
    LinuxSll2,
    /// A bare IPv4 or IPv6 packet (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6).
    RawIp,
}

/// The two ECN bits of the IP TOS / traffic class (RFC 3168).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// 00: not ECN-capable.
    #[default]
    NotEct,
    /// 01: ECN-capable transport (1).
    Ect1,
    /// 10: ECN-capable transport (0), what RoCE congestion control sends.
    Ect0,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    /// From the low two bits of a TOS byte.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0b00 => Self::NotEct,
            0b01 => Self::Ect1,
            0b10 => Self::Ect0,
            _ => Self::Ce,
        }
    }

    /// The two bits.
    pub const fn bits(self) -> u8 {
        match self {
            Self::NotEct => 0b00,
            Self::Ect1 => 0b01,
            Self::Ect0 => 0b10,
            Self::Ce => 0b11,
        }
    }
}

/// An 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vlan {
    /// Priority code point, 0..=7 (what PFC pauses per class).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095.
    pub vid: u16,
}

/// The Ethernet part of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ethernet {
    /// Source MAC.
    pub src: [u8; 6],
    /// Destination MAC.
    pub dst: [u8; 6],
    /// The outermost 802.1Q tag, if any.
    pub vlan: Option<Vlan>,
    /// The EtherType of what follows the Ethernet header and its tags (0x0800 IPv4, 0x86dd
    /// IPv6, 0x0806 ARP, 0x8808 MAC control such as PFC).
    pub ether_type: u16,
}

/// The IP header fields of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ip {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// DSCP, 0..=63.
    pub dscp: u8,
    /// ECN.
    pub ecn: Ecn,
    /// TTL or hop limit.
    pub ttl: u8,
    /// IPv4 identification (`None` for IPv6).
    pub identification: Option<u16>,
    /// IPv4 DF flag (false for IPv6).
    pub dont_fragment: bool,
    /// IPv6 flow label (`None` for IPv4).
    pub flow_label: Option<u32>,
}

impl Ip {
    /// The fields the ICRC covers of a UDP datagram behind this header (IPv4 ID 0 if none is
    /// given); `None` if the addresses mix IPv4 and IPv6.
    fn pseudo_header(&self, src_port: u16, dst_port: u16) -> Option<PseudoHeader> {
        let ip = match (self.src, self.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => IpFields::V4 {
                src,
                dst,
                identification: self.identification.unwrap_or(0),
                dont_fragment: self.dont_fragment,
            },
            (IpAddr::V6(src), IpAddr::V6(dst)) => IpFields::V6 { src, dst },
            _ => return None,
        };
        Some(PseudoHeader {
            ip,
            src_port,
            dst_port,
        })
    }
}

/// The UDP header fields of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Udp {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Checksum as sent (rxe sends 0).
    pub checksum: u16,
}

/// What the frame carries above IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport<'a> {
    /// UDP, with its payload (a RoCEv2 packet when the destination port is 4791).
    Udp(Udp, &'a [u8]),
    /// TCP (the out-of-band exchanges of ibv_rc_pingpong and perftest).
    Tcp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
        /// Bytes of TCP payload.
        payload_len: usize,
    },
    /// Anything else, by IP protocol number.
    Other(u8),
}

/// A parsed frame. The IP and UDP headers are kept as bytes, so that the ICRC can be checked
/// against exactly what was on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The Ethernet header, for Ethernet captures.
    pub ethernet: Option<Ethernet>,
    /// The IP header, if the frame is IP.
    pub ip: Option<Ip>,
    /// What is above IP.
    pub transport: Option<Transport<'a>>,
    /// The bytes before the IP header (Ethernet header and tags, or a cooked-capture header), as
    /// captured; [`gso`] writes them in front of each datagram.
    link_header: &'a [u8],
    ip_header: IpHeaderCopy,
    /// The UDP header as captured (empty if the frame is not UDP); [`gso`] rewrites its length.
    udp_header: UdpHeaderCopy,
}

/// The UDP header as captured, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UdpHeaderCopy(Option<[u8; UDP_HEADER_LEN]>);

impl UdpHeaderCopy {
    fn as_slice(&self) -> &[u8] {
        self.0.as_ref().map_or(&[], |bytes| &bytes[..])
    }
}

/// The IP header as captured (etherparse does not lend IPv4 header bytes for the frame's
/// lifetime, and 60 bytes are cheap to copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IpHeaderCopy {
    bytes: [u8; 60],
    len: usize,
}

impl IpHeaderCopy {
    const EMPTY: Self = Self {
        bytes: [0; 60],
        len: 0,
    };

    fn new(header: &[u8]) -> Self {
        let mut copy = Self::EMPTY;
        let len = header.len().min(copy.bytes.len());
        copy.bytes[..len].copy_from_slice(&header[..len]);
        copy.len = len;
        copy
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl<'a> Frame<'a> {
    /// Parses a frame. A frame that is not IP (ARP, LLDP, ...) parses with `ip: None`; a frame whose
    /// headers are cut short or inconsistent is `ParseError::Malformed`.
    pub fn parse(link: LinkType, bytes: &'a [u8]) -> Result<Self, ParseError> {
        let sliced = match link {
            LinkType::Ethernet => SlicedPacket::from_ethernet(bytes),
            // etherparse's own cooked-capture reader refuses the loopback device's frames
            // (ARPHRD_LOOPBACK), which are what `tcpdump -i any` sees of local traffic; the
            // protocol field is all the IP layer needs.
            LinkType::LinuxSll => cooked(bytes, SLL_LEN, SLL_PROTOCOL_AT)?,
            LinkType::LinuxSll2 => cooked(bytes, SLL2_LEN, SLL2_PROTOCOL_AT)?,
            LinkType::RawIp => SlicedPacket::from_ip(bytes),
        }
        .map_err(|err| ParseError::Malformed {
            layer: layer_of(&err),
        })?;

        let ethernet = match &sliced.link {
            Some(LinkSlice::Ethernet2(eth)) => Some(Ethernet {
                src: eth.source(),
                dst: eth.destination(),
                ether_type: sliced
                    .link_exts
                    .iter()
                    .rev()
                    .find_map(|ext| match ext {
                        LinkExtSlice::Vlan(tag) => Some(tag.ether_type().0),
                        LinkExtSlice::Macsec(_) => None,
                    })
                    .unwrap_or(eth.ether_type().0),
                vlan: sliced.link_exts.iter().find_map(|ext| match ext {
                    LinkExtSlice::Vlan(tag) => Some(Vlan {
                        pcp: tag.priority_code_point().value(),
                        dei: tag.drop_eligible_indicator(),
                        vid: tag.vlan_identifier().value(),
                    }),
                    LinkExtSlice::Macsec(_) => None,
                }),
            }),
            _ => None,
        };

        let ip_slice = match &sliced.net {
            Some(NetSlice::Ipv4(v4)) => v4.header().slice(),
            Some(NetSlice::Ipv6(v6)) => v6.header().slice(),
            Some(NetSlice::Arp(_)) | None => &[],
        };
        let link_header = offset_in(bytes, ip_slice)
            .and_then(|at| bytes.get(..at))
            .unwrap_or_default();

        let (ip, ip_header) = match &sliced.net {
            Some(NetSlice::Ipv4(v4)) => {
                let h = v4.header();
                let ip = Ip {
                    src: IpAddr::V4(h.source_addr()),
                    dst: IpAddr::V4(h.destination_addr()),
                    dscp: h.dcp().value(),
                    ecn: Ecn::from_bits(h.ecn().value()),
                    ttl: h.ttl(),
                    identification: Some(h.identification()),
                    dont_fragment: h.dont_fragment(),
                    flow_label: None,
                };
                (Some(ip), IpHeaderCopy::new(h.slice()))
            }
            Some(NetSlice::Ipv6(v6)) => {
                let h = v6.header();
                let ip = Ip {
                    src: IpAddr::V6(h.source_addr()),
                    dst: IpAddr::V6(h.destination_addr()),
                    dscp: h.dscp().value(),
                    ecn: Ecn::from_bits(h.ecn().value()),
                    ttl: h.hop_limit(),
                    identification: None,
                    dont_fragment: false,
                    flow_label: Some(h.flow_label().value()),
                };
                (Some(ip), IpHeaderCopy::new(h.slice()))
            }
            Some(NetSlice::Arp(_)) | None => (None, IpHeaderCopy::EMPTY),
        };

        let (transport, udp_header) = match &sliced.transport {
            Some(TransportSlice::Udp(udp)) => {
                let fields = Udp {
                    src_port: udp.source_port(),
                    dst_port: udp.destination_port(),
                    checksum: udp.checksum(),
                };
                let mut header = [0; UDP_HEADER_LEN];
                header.copy_from_slice(&udp.slice()[..UDP_HEADER_LEN]);
                (
                    Some(Transport::Udp(fields, udp.payload())),
                    UdpHeaderCopy(Some(header)),
                )
            }
            Some(TransportSlice::Tcp(tcp)) => {
                let transport = Transport::Tcp {
                    src_port: tcp.source_port(),
                    dst_port: tcp.destination_port(),
                    payload_len: tcp.payload().len(),
                };
                (Some(transport), UdpHeaderCopy(None))
            }
            Some(_) | None => (
                other_protocol(&sliced.net).map(Transport::Other),
                UdpHeaderCopy(None),
            ),
        };

        Ok(Self {
            ethernet,
            ip,
            transport,
            link_header,
            ip_header,
            udp_header,
        })
    }

    /// The RoCEv2 UDP payload, if this is a UDP datagram to port 4791.
    pub fn roce_payload(&self) -> Option<&'a [u8]> {
        match self.transport {
            Some(Transport::Udp(udp, payload)) if udp.dst_port == ROCE_V2_UDP_PORT => Some(payload),
            _ => None,
        }
    }

    /// The RoCEv2 packet, checked (everything but the ICRC), if this frame carries one.
    pub fn roce(&self) -> Option<Result<RocePacket<&'a [u8]>, ParseError>> {
        self.roce_payload().map(RocePacket::new_checked)
    }

    /// The ICRC computed over the IP and UDP headers as they are in the frame. `None` if the frame
    /// is not RoCEv2, or its IP header is one the ICRC is not defined over (IPv6 with extension
    /// headers).
    pub fn compute_icrc(&self) -> Option<u32> {
        let payload = self.roce_payload()?;
        icrc::compute_raw(
            self.ip_header.as_slice(),
            self.udp_header.as_slice(),
            payload,
        )
    }

    /// Checks the ICRC of a RoCEv2 frame. A frame whose ICRC cannot be computed is `Malformed`.
    pub fn verify_icrc(&self) -> Result<(), ParseError> {
        let layer = if matches!(self.ip.map(|ip| ip.src), Some(IpAddr::V6(_))) {
            Layer::Ipv6
        } else {
            Layer::Ipv4
        };
        let (Some(expected), Some(payload)) = (self.compute_icrc(), self.roce_payload()) else {
            return Err(ParseError::Malformed { layer });
        };
        icrc::check(expected, payload)
    }

    /// The IP/UDP fields the ICRC covers, as the core sees them.
    pub fn pseudo_header(&self) -> Option<PseudoHeader> {
        let Some(Transport::Udp(udp, _)) = self.transport else {
            return None;
        };
        self.ip?.pseudo_header(udp.src_port, udp.dst_port)
    }
}

/// Slices a Linux cooked capture: a header of `header_len` bytes with the protocol (an
/// EtherType for IPv4, IPv6 and ARP) at `protocol_at`, then the network layer. See
/// <https://www.tcpdump.org/linktypes/LINKTYPE_LINUX_SLL.html> and `LINKTYPE_LINUX_SLL2.html`.
fn cooked(
    bytes: &[u8],
    header_len: usize,
    protocol_at: usize,
) -> Result<Result<SlicedPacket<'_>, etherparse::err::packet::SliceError>, ParseError> {
    let (Some(protocol), Some(rest)) = (
        bytes.get(protocol_at..protocol_at + 2),
        bytes.get(header_len..),
    ) else {
        return Err(malformed(Layer::Ethernet));
    };
    let protocol = EtherType(u16::from_be_bytes([protocol[0], protocol[1]]));
    Ok(SlicedPacket::from_ether_type(protocol, rest))
}

/// Where `inner`, a slice of `outer`, starts in it (`None` if it is not one, or empty).
fn offset_in(outer: &[u8], inner: &[u8]) -> Option<usize> {
    let at = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    (!inner.is_empty() && at + inner.len() <= outer.len()).then_some(at)
}

fn other_protocol(net: &Option<NetSlice<'_>>) -> Option<u8> {
    match net {
        Some(NetSlice::Ipv4(v4)) => Some(v4.payload().ip_number.0),
        Some(NetSlice::Ipv6(v6)) => Some(v6.payload().ip_number.0),
        _ => None,
    }
}

fn layer_of(err: &etherparse::err::packet::SliceError) -> Layer {
    use etherparse::err::packet::SliceError;
    match err {
        SliceError::Len(len) => match len.layer {
            etherparse::err::Layer::Ipv4Header | etherparse::err::Layer::Ipv4Packet => Layer::Ipv4,
            etherparse::err::Layer::Ipv6Header | etherparse::err::Layer::Ipv6Packet => Layer::Ipv6,
            etherparse::err::Layer::UdpHeader | etherparse::err::Layer::UdpPayload => Layer::Udp,
            _ => Layer::Ethernet,
        },
        SliceError::Ipv4(_) | SliceError::Ipv4Exts(_) | SliceError::Ip(_) => Layer::Ipv4,
        SliceError::Ipv6(_) | SliceError::Ipv6Exts(_) => Layer::Ipv6,
        _ => Layer::Ethernet,
    }
}

fn malformed(layer: Layer) -> ParseError {
    ParseError::Malformed { layer }
}

const UDP_HEADER_LEN: usize = UdpHeader::LEN;

/// Linux cooked capture v1: header length, and where its protocol field is.
const SLL_LEN: usize = 16;
const SLL_PROTOCOL_AT: usize = 14;
/// Linux cooked capture v2.
const SLL2_LEN: usize = 20;
const SLL2_PROTOCOL_AT: usize = 0;

#[cfg(test)]
mod tests;
