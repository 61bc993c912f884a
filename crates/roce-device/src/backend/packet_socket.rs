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
//!   kernel a whole batch of equal-size UDP datagrams to cut ([`Sender::send_udp_gso`]).
//! - `PACKET_IGNORE_OUTGOING`: the socket does not see what the host itself sends on the
//!   interface (it never sees its own sends).

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use etherparse::{
    EtherType, Ethernet2Header, IpNumber, LaxNetSlice, LaxSlicedPacket, SingleVlanHeader,
};
use nix::libc;
use nix::sys::socket::MsgFlags;
use roce_wire::frame::{Frame, LinkType, Segments};

use super::sys::{PacketFd, RxRing};

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

/// The sending half: whole frames, each behind a `virtio_net_hdr`. Clones share the socket.
#[derive(Debug, Clone)]
pub struct Sender {
    fd: Arc<PacketFd>,
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

/// One received frame, read in place.
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// What the kernel says about it.
    pub vnet: VirtioNetHdr,
    /// The frame, from its Ethernet header on.
    pub data: &'a [u8],
}

/// The receiving half: the ring, read in place.
#[derive(Debug)]
pub struct Receiver {
    fd: Arc<PacketFd>,
    ring: RxRing,
    /// The slot to look at next.
    next: usize,
    /// A frame too long for its slot, read from the socket's queue: `virtio_net_hdr` + frame.
    copy: Vec<u8>,
    /// The length in `copy` when it holds the frame of slot `next` (read, not yet taken).
    copied: Option<usize>,
    truncated: u64,
    /// Frames the kernel dropped because the ring was full, read and not yet taken
    /// ([`Receiver::take_ring_drops`]).
    ring_drops: u64,
}

impl Receiver {
    /// The receiving half of the socket `fd`, whose receive ring is `ring`.
    pub(crate) fn new(fd: Arc<PacketFd>, ring: RxRing) -> Self {
        Self {
            fd,
            ring,
            next: 0,
            copy: vec![0; COPY_BUFFER],
            copied: None,
            truncated: 0,
            ring_drops: 0,
        }
    }

    /// Hands every frame that has arrived, up to `max`, to `take`, in order, and returns how
    /// many it took. When `take` returns false (no room for the frame, say) the frame stays
    /// and comes first next time. Never blocks; a frame the kernel could only keep in part is
    /// dropped and counted ([`Receiver::truncated`]).
    pub fn poll_frames(&mut self, max: usize, mut take: impl FnMut(RxFrame<'_>) -> bool) -> usize {
        let mut taken = 0;
        while taken < max {
            let index = self.next;
            let status = self.ring.status(index);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            // The kernel marks the frames it queues while it has dropped some for want of a
            // free slot: read (and reset) its count now, so that none goes uncounted.
            if status & libc::TP_STATUS_LOSING != 0 {
                self.read_ring_drops();
            }
            let took = if status & libc::TP_STATUS_COPY != 0 {
                self.take_copied(&mut take)
            } else {
                // Checked again inside: the slot is read only while it is ours.
                let Some(slot) = self.ring.slot(index) else {
                    break;
                };
                match slot_frame(slot) {
                    Ok(frame) => take(frame),
                    Err(SlotError::Truncated) => {
                        self.truncated += 1;
                        true
                    }
                    Err(SlotError::Malformed) => true,
                }
            };
            if !took {
                break;
            }
            self.copied = None;
            self.ring.release(index);
            self.next = (index + 1) % self.ring.frame_nr();
            taken += 1;
        }
        taken
    }

    /// The frame of a `TP_STATUS_COPY` slot, whole, from the socket's queue.
    fn take_copied(&mut self, take: &mut impl FnMut(RxFrame<'_>) -> bool) -> bool {
        let len = match self.copied {
            Some(len) => len,
            None => match nix::sys::socket::recv(
                self.fd.as_raw_fd(),
                &mut self.copy,
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC,
            ) {
                Ok(len) if len <= self.copy.len() => len,
                Ok(_) | Err(_) => {
                    // Longer than 64 KiB, or gone: nothing to take.
                    self.truncated += 1;
                    return true;
                }
            },
        };
        self.copied = Some(len);
        let Some(vnet) = VirtioNetHdr::parse(&self.copy[..len]) else {
            return true;
        };
        take(RxFrame {
            vnet,
            data: &self.copy[VirtioNetHdr::LEN..len],
        })
    }

    /// Whether a frame is waiting in the ring.
    pub fn has_frame(&self) -> bool {
        self.ring.status(self.next) & libc::TP_STATUS_USER != 0
    }

    /// Waits up to `timeout` for a frame (for a receiver on a thread of its own; an async
    /// one polls the descriptor).
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        self.fd.wait_readable(ms)
    }

    /// Frames dropped because the kernel kept only part of them.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }

    /// Frames the kernel dropped because the ring was full since the last call: those the
    /// frames taken since were marked for (`TP_STATUS_LOSING`), and with `now`, those its
    /// counter holds at this moment (`PACKET_STATISTICS`, a system call).
    pub fn take_ring_drops(&mut self, now: bool) -> u64 {
        if now {
            self.read_ring_drops();
        }
        std::mem::take(&mut self.ring_drops)
    }

    /// Adds the kernel's count of frames dropped for a full ring, which reading resets.
    fn read_ring_drops(&mut self) {
        match self.fd.statistics() {
            Ok(stats) => self.ring_drops += u64::from(stats.tp_drops),
            Err(err) => tracing::debug!(error = %err, "PACKET_STATISTICS not read"),
        }
    }
}

impl AsRawFd for Receiver {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotError {
    /// The kernel kept fewer bytes than the frame had.
    Truncated,
    /// The slot's header points outside the slot.
    Malformed,
}

/// The frame in a ring slot (`tpacket2_hdr`: status, len, snaplen, mac, …; the
/// `virtio_net_hdr` sits just before the frame).
fn slot_frame(slot: &[u8]) -> Result<RxFrame<'_>, SlotError> {
    let word = |at: usize| {
        slot.get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (Some(len), Some(snaplen), Some(mac)) = (
        word(4),
        word(8),
        slot.get(12..14).map(|b| u16::from_ne_bytes([b[0], b[1]])),
    ) else {
        return Err(SlotError::Malformed);
    };
    if snaplen < len {
        return Err(SlotError::Truncated);
    }
    let mac = usize::from(mac);
    let vnet = mac
        .checked_sub(VirtioNetHdr::LEN)
        .and_then(|at| VirtioNetHdr::parse(slot.get(at..)?))
        .ok_or(SlotError::Malformed)?;
    let data = slot
        .get(mac..mac + snaplen as usize)
        .ok_or(SlotError::Malformed)?;
    Ok(RxFrame { vnet, data })
}

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

/// Counters of a receive thread.
#[derive(Debug, Default)]
pub struct ReceiverStats {
    /// Segmentation-offload batches cut into their datagrams.
    pub batches_cut: AtomicU64,
    /// Frames dropped: batches that cannot be cut (TCP, malformed).
    pub dropped: AtomicU64,
    /// Frames the kernel dropped because the receive ring was full.
    pub ring_full: AtomicU64,
}

/// Reads `rx` on a thread of its own, handing each frame to `on_frame` with whether its L4
/// checksum was left to an offload (`VIRTIO_NET_HDR_F_NEEDS_CSUM`), until it returns false,
/// `stop` is set, or the socket fails (logged). A UDP/IPv4 segmentation-offload batch (on a
/// veth, what a UDP socket sent with UDP_SEGMENT) is first cut into its datagrams, each a
/// whole frame with its own headers and no UDP checksum; other batches are dropped and
/// counted.
pub fn spawn_receiver(
    thread_name: String,
    mut rx: Receiver,
    stop: Arc<AtomicBool>,
    mut on_frame: impl FnMut(&[u8], bool) -> bool + Send + 'static,
) -> io::Result<Arc<ReceiverStats>> {
    let stats = Arc::new(ReceiverStats::default());
    let counters = stats.clone();
    std::thread::Builder::new()
        .name(thread_name.clone())
        .spawn(move || {
            let mut segment = Vec::with_capacity(COPY_BUFFER);
            let mut going = true;
            while going && !stop.load(Ordering::Relaxed) {
                if let Err(err) = rx.wait(Duration::from_millis(50)) {
                    tracing::warn!(thread = %thread_name, error = %err, "receive failed");
                    return;
                }
                rx.poll_frames(usize::MAX, |frame| {
                    if !going {
                        return true;
                    }
                    if !frame.vnet.is_gso() {
                        going = on_frame(frame.data, frame.vnet.needs_csum());
                        return true;
                    }
                    match cut_batch(frame.data, &frame.vnet) {
                        Ok(batch) => {
                            counters.batches_cut.fetch_add(1, Ordering::Relaxed);
                            for index in 0..batch.count() {
                                if going && batch.write(index, &mut segment) {
                                    going = on_frame(&segment, false);
                                }
                            }
                        }
                        Err(err) => {
                            counters.dropped.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(thread = %thread_name, error = %err, len = frame.data.len(), "offload batch dropped");
                        }
                    }
                    true
                });
                let lost = rx.take_ring_drops(false);
                if lost > 0 {
                    counters.ring_full.fetch_add(lost, Ordering::Relaxed);
                    tracing::debug!(thread = %thread_name, lost, "frames dropped by the kernel, ring full");
                }
            }
        })?;
    Ok(stats)
}

/// Bytes of the receive ring.
const RING_BYTES: usize = 16 << 20;
/// Room in a slot before the frame: `tpacket2_hdr` and `sockaddr_ll` aligned to 16, the
/// alignment of the network header, and the `virtio_net_hdr`.
const SLOT_HEADROOM: usize = 128;
/// A whole frame of up to 64 KiB behind its `virtio_net_hdr`.
const COPY_BUFFER: usize = VirtioNetHdr::LEN + 14 + 8 + 65_536;
/// Bytes of socket buffer asked for in each direction.
const SOCKET_BUFFER: i32 = 32 << 20;

#[cfg(test)]
mod tests;
