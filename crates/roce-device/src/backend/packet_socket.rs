//! An AF_PACKET socket on one interface, with a memory-mapped receive ring and virtio-net
//! headers: what the raw backend and `roce switch` both stand on. It needs CAP_NET_RAW.
//!
//! - Receive: a `PACKET_RX_RING` of `TPACKET_V2` slots (Documentation/networking/packet_mmap.rst)
//!   sized for the interface's MTU. One wake-up reads every frame that has arrived, in place,
//!   without a system call or an allocation per frame. `TPACKET_V2` rather than `TPACKET_V3`:
//!   V3 hands frames over a block at a time, when the block is full or its retire timer (1 ms
//!   at least) expires, which would put a millisecond under every round trip of a lightly
//!   loaded NIC; V2 hands over each frame as it lands and still lets one wake-up take many.
//!   A frame longer than a slot (a segmentation-offload batch seen before segmentation, up to
//!   64 KiB) is kept whole by the kernel on the socket's queue (`PACKET_COPY_THRESH`; its slot
//!   says `TP_STATUS_COPY`) and read from there.
//! - `PACKET_VNET_HDR`: every frame comes with a `virtio_net_hdr` that tells what the kernel
//!   left undone: a UDP GSO batch (`VIRTIO_NET_HDR_GSO_UDP_L4`, with its segment size), which
//!   [`cut_batch`] cuts into the datagrams the wire would carry, and checksums left to an
//!   offload (`VIRTIO_NET_HDR_F_NEEDS_CSUM`). Sends carry one too, so one send can hand the
//!   kernel a whole batch of equal-size UDP datagrams to cut (`Sender::send_udp_gso`).
//! - `PACKET_IGNORE_OUTGOING`: the socket does not see what the host itself sends on the
//!   interface (it never sees its own sends).

use std::io;
use std::sync::Arc;

use etherparse::{Ethernet2Header, SingleVlanHeader};
use nix::libc;

use super::sys::{PacketFd, RxRing};

mod batch;
mod receive_thread;
mod receiver;
mod sender;
#[cfg(test)]
mod tests;
mod virtio_net_hdr;

pub use batch::{CutError, cut_batch};
pub use receive_thread::{ReceiverStats, spawn_receiver};
pub use receiver::{Receiver, RxFrame};
pub use sender::Sender;
pub use virtio_net_hdr::{
    VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_NONE, VIRTIO_NET_HDR_GSO_UDP_L4, VirtioNetHdr,
};

/// An open interface: its sending and receiving halves and its MAC address.
#[derive(Debug)]
pub struct PacketSocket {
    /// Sends whole frames.
    pub tx: Sender,
    /// Receives whole frames; see [`Receiver::poll_frames`] and [`spawn_receiver`].
    pub rx: Receiver,
    /// The interface's MAC address.
    pub mac: [u8; 6],
    /// The longest frame the interface carries: its MTU plus an Ethernet header and a VLAN
    /// tag.
    pub max_frame: usize,
}

/// Opens `interface`, in promiscuous mode if asked (a switch sees frames for other MACs).
/// The errors say what to do: a missing interface, one that is not Ethernet, or a process
/// without CAP_NET_RAW (`ErrorKind::PermissionDenied`).
pub fn open(interface: &str, promiscuous: bool) -> io::Result<PacketSocket> {
    let not_found = || {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {interface} (see `ip link`)"),
        )
    };
    if interface.is_empty() || interface.contains('/') {
        return Err(not_found());
    }
    let ifindex = nix::net::if_::if_nametoindex(interface).map_err(|_| not_found())?;
    let sysfs = |file: &str| std::fs::read_to_string(format!("/sys/class/net/{interface}/{file}"));
    // ARPHRD_ETHER (1): Ethernet, or something that frames like it (veth, tap, bridge).
    let ethernet = sysfs("type").is_ok_and(|t| t.trim() == "1");
    let mac = sysfs("address")
        .ok()
        .and_then(|text| parse_mac(text.trim()))
        .filter(|_| ethernet)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{interface} has no MAC address: not Ethernet"),
            )
        })?;
    let mtu = sysfs("mtu")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(1500);
    let max_frame = mtu + Ethernet2Header::LEN + SingleVlanHeader::LEN;
    let fd = PacketFd::new().map_err(|err| {
        if err.kind() == io::ErrorKind::PermissionDenied {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "opening {interface} needs CAP_NET_RAW: run as root, or \
                     `sudo setcap cap_net_raw+ep $(which roce)`"
                ),
            )
        } else {
            err
        }
    })?;
    let ring = configure(&fd, ifindex, promiscuous, max_frame)
        .map_err(|err| io::Error::new(err.kind(), format!("{interface}: {err}")))?;
    let fd = Arc::new(fd);
    Ok(PacketSocket {
        tx: Sender { fd: fd.clone() },
        rx: Receiver::new(fd, ring),
        mac,
        max_frame,
    })
}

/// Opens `interface` of the calling thread's network namespace as [`open`] does, without
/// reading sysfs (which shows another namespace's interfaces): MAC 02:00:00:00:00:00.
#[cfg(test)]
pub(crate) fn open_in_namespace(interface: &str) -> io::Result<PacketSocket> {
    let ifindex = nix::net::if_::if_nametoindex(interface)?;
    let max_frame = 1500 + Ethernet2Header::LEN + SingleVlanHeader::LEN;
    let fd = PacketFd::new()?;
    let ring = configure(&fd, ifindex, false, max_frame)?;
    let fd = Arc::new(fd);
    Ok(PacketSocket {
        tx: Sender { fd: fd.clone() },
        rx: Receiver::new(fd, ring),
        mac: [2, 0, 0, 0, 0, 0],
        max_frame,
    })
}

/// The socket options, the ring, then the binding (so no frame lands before all is set).
fn configure(
    fd: &PacketFd,
    ifindex: u32,
    promiscuous: bool,
    max_frame: usize,
) -> io::Result<RxRing> {
    let ring = set_up(fd, max_frame)?;
    if promiscuous {
        fd.add_promiscuous(ifindex)?;
    }
    fd.bind(ifindex)?;
    Ok(ring)
}

/// The socket options and the ring of a socket not yet bound. Setting up the ring empties the
/// socket's queue (`packet_set_ring`), and a socket made with protocol 0 ([`PacketFd::new`])
/// takes no frame, from any interface, until its bind: nothing that crossed any interface
/// before then, a peer's or an earlier NIC's, reaches the NIC.
fn set_up(fd: &PacketFd, max_frame: usize) -> io::Result<RxRing> {
    // Must come before the ring: the kernel refuses to change it once a ring exists.
    fd.set_packet_int(libc::PACKET_VNET_HDR, 1)?;
    fd.set_packet_int(
        libc::PACKET_VERSION,
        libc::tpacket_versions::TPACKET_V2 as i32,
    )?;
    // Frames too long for a slot are queued whole on the socket (their skb, not a copy).
    fd.set_packet_int(libc::PACKET_COPY_THRESH, 1)?;
    // Since Linux 4.20; without it the host's own sends are seen too, and filtered later.
    if let Err(err) = fd.set_packet_int(libc::PACKET_IGNORE_OUTGOING, 1) {
        tracing::debug!(error = %err, "PACKET_IGNORE_OUTGOING not set");
    }
    // The queue holds the frames too long for a slot: room for a few hundred 64 KiB batches.
    // SO_RCVBUFFORCE passes net.core.rmem_max with CAP_NET_ADMIN; SO_RCVBUF is capped by it.
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if fd.set_socket_int(force, SOCKET_BUFFER).is_err()
            && let Err(err) = fd.set_socket_int(plain, SOCKET_BUFFER)
        {
            tracing::debug!(error = %err, "socket buffer size not set");
        }
    }
    fd.rx_ring(&ring_request(max_frame))
}

/// A ring of about [`RING_BYTES`], in slots large enough for a frame of `max_frame` bytes
/// behind the slot's header (`tpacket2_hdr` and `sockaddr_ll`, aligned, then the
/// `virtio_net_hdr`): a power of two, so that they fill blocks of 64 KiB (or one slot, if
/// larger) exactly.
fn ring_request(max_frame: usize) -> libc::tpacket_req {
    let frame_size = (max_frame + SLOT_HEADROOM).next_power_of_two().max(2048);
    let block_size = frame_size.max(64 << 10);
    let block_nr = (RING_BYTES / block_size).max(1);
    let to_uint = |n: usize| libc::c_uint::try_from(n).unwrap_or(libc::c_uint::MAX);
    libc::tpacket_req {
        tp_block_size: to_uint(block_size),
        tp_block_nr: to_uint(block_nr),
        tp_frame_size: to_uint(frame_size),
        tp_frame_nr: to_uint(block_nr * (block_size / frame_size)),
    }
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut mac {
        *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Bytes of the receive ring.
const RING_BYTES: usize = 16 << 20;
/// Room in a slot before the frame: `tpacket2_hdr` and `sockaddr_ll` aligned to 16, the
/// alignment of the network header, and the `virtio_net_hdr`.
const SLOT_HEADROOM: usize = 128;

/// Bytes of socket buffer asked for in each direction.
const SOCKET_BUFFER: i32 = 32 << 20;
