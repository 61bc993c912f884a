//! A UDP segmentation-offload batch seen before segmentation, cut into the datagrams the wire
//! would carry ([`cut_batch`]).

use etherparse::{EtherType, IpNumber, LaxNetSlice, LaxSlicedPacket};
use roce_wire::frame::{Frame, LinkType, Segments};

use super::virtio_net_hdr::{VIRTIO_NET_HDR_GSO_UDP_L4, VirtioNetHdr};

/// Why a super-frame cannot be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CutError {
    /// Not a UDP batch (TCP segmentation offload, say), or not over IPv4.
    #[error("not a UDP/IPv4 segmentation-offload batch")]
    Unsupported,
    /// Headers cut short or inconsistent, or no segment size.
    #[error("malformed segmentation-offload batch")]
    Malformed,
}

/// The datagrams of a UDP/IPv4 segmentation-offload batch seen before segmentation: headers
/// for the whole, then the payloads of datagrams of `gso_size` bytes each (the last maybe
/// shorter), which [`Frame::split`] cuts as the kernel would (`__udp_gso_segment`,
/// `inet_gso_segment`): datagram `i` has the same headers with its own lengths and the IPv4 ID
/// of the batch's header plus `i`. Fails for anything but UDP over IPv4 with a segment size.
pub fn cut_batch<'a>(bytes: &'a [u8], vnet: &VirtioNetHdr) -> Result<Segments<'a>, CutError> {
    if vnet.gso_type & 0x7f != VIRTIO_NET_HDR_GSO_UDP_L4 {
        return Err(CutError::Unsupported);
    }
    let size = usize::from(vnet.gso_size);
    if size == 0 {
        return Err(CutError::Malformed);
    }
    // What the batch is, before whether it is well formed: only UDP over IPv4 or IPv6 is cut.
    let lax = LaxSlicedPacket::from_ethernet(bytes).map_err(|_| CutError::Malformed)?;
    match lax.ether_payload().map(|payload| payload.ether_type) {
        Some(EtherType::IPV4 | EtherType::IPV6) => {}
        Some(_) => return Err(CutError::Unsupported),
        None => return Err(CutError::Malformed),
    }
    let ip_number = match &lax.net {
        Some(LaxNetSlice::Ipv4(v4)) => Some(v4.payload().ip_number),
        Some(LaxNetSlice::Ipv6(v6)) => Some(v6.payload().ip_number),
        _ => None,
    };
    if ip_number.is_some_and(|n| n != IpNumber::UDP) {
        return Err(CutError::Unsupported);
    }
    Frame::parse(LinkType::Ethernet, bytes)
        .ok()
        .and_then(|frame| frame.split(size))
        .ok_or(CutError::Malformed)
}
