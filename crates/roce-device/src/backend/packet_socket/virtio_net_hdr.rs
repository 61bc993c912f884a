//! `struct virtio_net_hdr` and its flags and GSO types: what the kernel says about each frame
//! of a packet socket with `PACKET_VNET_HDR`, and what a send asks of it.

/// `struct virtio_net_hdr` (include/uapi/linux/virtio_net.h), in the host's byte order as a
/// packet socket uses it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VirtioNetHdr {
    /// `VIRTIO_NET_HDR_F_*`.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`.
    pub gso_type: u8,
    /// Length of the headers to copy into each segment.
    pub hdr_len: u16,
    /// Bytes of payload per segment.
    pub gso_size: u16,
    /// Where the checksummed part starts.
    pub csum_start: u16,
    /// Where, from `csum_start`, the checksum field is.
    pub csum_offset: u16,
}

/// The checksum from `csum_start` on is left to be filled in (only the pseudo-header sum is
/// in the field).
pub const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// Not a segmentation-offload batch.
pub const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
/// A batch of UDP datagrams of `gso_size` payload bytes each (UDP_SEGMENT).
pub const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;

impl VirtioNetHdr {
    /// Its size on the wire of the socket.
    pub const LEN: usize = 10;

    /// Reads one from the front of `bytes`.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..Self::LEN)?;
        let word = |at: usize| u16::from_ne_bytes([bytes[at], bytes[at + 1]]);
        Some(Self {
            flags: bytes[0],
            gso_type: bytes[1],
            hdr_len: word(2),
            gso_size: word(4),
            csum_start: word(6),
            csum_offset: word(8),
        })
    }

    /// Its bytes.
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut bytes = [0u8; Self::LEN];
        bytes[0] = self.flags;
        bytes[1] = self.gso_type;
        for (at, word) in [
            (2, self.hdr_len),
            (4, self.gso_size),
            (6, self.csum_start),
            (8, self.csum_offset),
        ] {
            bytes[at..at + 2].copy_from_slice(&word.to_ne_bytes());
        }
        bytes
    }

    /// Whether the frame is a segmentation-offload batch (of any kind; the ECN bit aside).
    pub fn is_gso(&self) -> bool {
        self.gso_type & 0x7f != VIRTIO_NET_HDR_GSO_NONE
    }

    /// Whether a checksum was left to an offload.
    pub fn needs_csum(&self) -> bool {
        self.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0
    }
}
