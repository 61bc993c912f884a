//! The sending half of a packet socket: whole frames behind a `virtio_net_hdr`, one frame
//! or a UDP super-frame for the kernel to cut.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

use super::virtio_net_hdr::{VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_UDP_L4, VirtioNetHdr};
use crate::backend::sys::{PacketFd, Piece, write_pieces};

/// The sending half: whole frames, each behind a `virtio_net_hdr`. Clones share the socket.
#[derive(Debug, Clone)]
pub struct Sender {
    pub(super) fd: Arc<PacketFd>,
}

impl Sender {
    /// Sends one frame, given as the concatenation of `parts` (headers and payload apart, so
    /// nothing is copied into a frame buffer first).
    pub fn send(&self, parts: &[&[u8]]) -> io::Result<()> {
        let mut pieces = [Piece::EMPTY; 4];
        let pieces = pieces
            .get_mut(..parts.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "too many parts"))?;
        for (piece, part) in pieces.iter_mut().zip(parts) {
            *piece = Piece::of(part);
        }
        self.send_pieces(pieces)
    }

    /// Sends one frame, given as the concatenation of `pieces` (its headers, then its payload
    /// from wherever it lies: a lent region's bytes are gathered by the kernel's copy).
    pub(crate) fn send_pieces(&self, pieces: &[Piece]) -> io::Result<()> {
        self.write(&VirtioNetHdr::default().to_bytes(), pieces)
    }

    /// Sends one UDP super-frame, given as the concatenation of `pieces` — Ethernet, IP and
    /// UDP headers for the whole payload (IPv4 total length and UDP length of the whole, UDP
    /// checksum holding the pseudo-header sum, as `FrameRepr::emit_offload_headers` writes
    /// them), then the payloads of datagrams of `segment` bytes each, the last maybe shorter —
    /// for the kernel to cut (`VIRTIO_NET_HDR_GSO_UDP_L4`). Segment `i` leaves with the IPv4
    /// ID of the header plus `i` (`inet_gso_segment`). A veth that offloads UDP segmentation
    /// carries the super-frame whole, and a packet socket on its peer sees it whole.
    /// `udp_offset` is where the UDP header starts.
    pub(crate) fn send_udp_gso(
        &self,
        pieces: &[Piece],
        udp_offset: usize,
        segment: u16,
    ) -> io::Result<()> {
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
        self.write(&header.to_bytes(), pieces)
    }

    /// One `writev`: the `virtio_net_hdr`, then the frame's pieces.
    fn write(&self, header: &[u8], pieces: &[Piece]) -> io::Result<()> {
        write_pieces(self.fd.as_fd(), header, pieces)?;
        Ok(())
    }
}
