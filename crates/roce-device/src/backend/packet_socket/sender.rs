//! The sending half of a packet socket: whole frames behind a `virtio_net_hdr`, one frame
//! or a UDP super-frame for the kernel to cut.

use std::io::{self, IoSlice};
use std::sync::Arc;

use super::virtio_net_hdr::{VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_UDP_L4, VirtioNetHdr};
use crate::backend::sys::PacketFd;

/// The sending half: whole frames, each behind a `virtio_net_hdr`. Clones share the socket.
#[derive(Debug, Clone)]
pub struct Sender {
    pub(super) fd: Arc<PacketFd>,
}

impl Sender {
    /// Sends one frame, given as the concatenation of `parts` (headers and payload apart, so
    /// nothing is copied into a frame buffer first).
    pub fn send(&self, parts: &[&[u8]]) -> io::Result<()> {
        self.write(&VirtioNetHdr::default().to_bytes(), parts)
    }

    /// Sends one UDP super-frame — Ethernet, IP and UDP headers for the whole payload (IPv4
    /// total length and UDP length of the whole, UDP checksum holding the pseudo-header sum,
    /// as `FrameRepr::emit_offload_headers` writes them), then the payloads of datagrams of `segment` bytes
    /// each, the last maybe shorter — for the kernel to cut (`VIRTIO_NET_HDR_GSO_UDP_L4`).
    /// Segment `i` leaves with the IPv4 ID of the header plus `i` (`inet_gso_segment`). A
    /// veth that offloads UDP segmentation carries the super-frame whole, and a packet socket
    /// on its peer sees it whole. `udp_offset` is where the UDP header starts.
    pub fn send_udp_gso(&self, parts: &[&[u8]], udp_offset: usize, segment: u16) -> io::Result<()> {
        let offset = u16::try_from(udp_offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "headers too long"))?;
        let header = VirtioNetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_UDP_L4,
            hdr_len: offset + 8,
            gso_size: segment,
            csum_start: offset,
            csum_offset: 6,
        };
        self.write(&header.to_bytes(), parts)
    }

    fn write(&self, header: &[u8], parts: &[&[u8]]) -> io::Result<()> {
        let mut slices = [IoSlice::new(&[]); 4];
        if parts.len() >= slices.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "too many parts",
            ));
        }
        slices[0] = IoSlice::new(header);
        for (slot, part) in slices[1..].iter_mut().zip(parts) {
            *slot = IoSlice::new(part);
        }
        nix::sys::uio::writev(&*self.fd, &slices[..=parts.len()])?;
        Ok(())
    }
}
