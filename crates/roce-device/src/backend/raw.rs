//! The raw backend: whole Ethernet frames on a named interface, through an AF_PACKET socket
//! with a receive ring ([`super::packet_socket`]). It needs CAP_NET_RAW.
//!
//! Because it builds every header itself, it can do what a UDP socket cannot: a UDP source port
//! per QP (the NIC runs with `SrcPortPolicy::PerQp`, as rxe does), the DSCP and ECN bits of every
//! packet, and, on receive, the whole IP header, so every ICRC is checked in full (the IPv4 ID
//! included). It answers ARP (IPv4) or neighbour solicitations (IPv6, `backend/ndp.rs`) for its
//! own address and learns its peers' MACs from them, and the MAC of a peer it does not know
//! yet from the first frame that peer sends (never a new one for a known peer: a forged frame
//! must not redirect its packets), so it can play an address that no kernel owns.
//!
//! The ring is read in place by whichever thread holds it: the device's task after each
//! wake-up (the socket is registered with tokio), or, once the device took the
//! [`RawReceiver`], a program spinning on an empty CQ, for which an empty poll is a load from
//! the ring rather than a system call. Each read takes every frame that has arrived, copying
//! only the RoCEv2 payloads into the caller's buffer. Frames are sent from any thread too
//! ([`RawSender`]); the two share the link (`raw/link.rs`: the sending socket, the neighbours)
//! under a lock. A UDP segmentation-offload batch that a peer's UDP socket sent over a veth arrives
//! as one frame; it is cut into its datagrams here, datagram `i` with the batch's IPv4 ID plus
//! `i`, which is the ID the sender's kernel gives that segment on a wire and so the one its
//! ICRC was sealed for. Sends of a batch of equal-size packets go the same way: one frame for
//! the whole batch with a `virtio_net_hdr` asking the kernel to cut it (UDP GSO), its header
//! carrying ID 0 so that packet `i` leaves with ID `i`, as the engine sealed it.
//!
//! The interface should carry no IP address of the host for the NIC's address: otherwise the
//! kernel also receives the datagrams to port 4791 and answers them with ICMP port unreachable.
//! Over IPv6 every datagram leaves in a frame of its own (no offload batch), and GID 0, the
//! link-local address, carries no traffic here.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use roce_core::{Loan, Transmit};

use super::packet_socket::{self, PacketSocket, Receiver};
use super::registration::Registration;
use super::sys::{PacketFd, Piece};
use super::{Backend, BackendCounters, Counter, Received};

mod etherparse_arp;
mod filter;
mod link;
#[cfg(test)]
mod tests;

use link::Link;

/// An AF_PACKET socket on one interface, playing one IP address.
#[derive(Debug)]
pub struct RawBackend {
    /// The socket's descriptor, registered with tokio while datagrams are to wake the device's
    /// task: what the task waits on.
    ready: Registration<Arc<PacketFd>>,
    /// The receive ring, until the device takes it as a [`RawReceiver`].
    ring: Option<Receiver>,
    /// The sending half, on the link the ring's reader shares.
    tx: RawSender,
}

impl RawBackend {
    /// Opens `interface` to play `ip`. Fails with a message that says what to do when the
    /// process lacks CAP_NET_RAW or the interface does not exist. Must be called inside a
    /// tokio runtime.
    pub fn open(interface: &str, ip: IpAddr) -> io::Result<Self> {
        let socket = packet_socket::open(interface, false).map_err(|err| {
            if err.kind() == io::ErrorKind::PermissionDenied {
                io::Error::new(
                    err.kind(),
                    format!("the raw backend: {err}, or use --backend udp"),
                )
            } else {
                err
            }
        })?;
        Self::with_socket(socket, ip)
    }

    /// The backend on a packet socket already open, playing `ip`.
    fn with_socket(socket: PacketSocket, ip: IpAddr) -> io::Result<Self> {
        let PacketSocket { tx, rx, mac, .. } = socket;
        Ok(Self {
            ready: Registration::new(rx.fd())?,
            ring: Some(rx),
            tx: RawSender::on(Link {
                tx,
                mac,
                ip,
                neighbours: BTreeMap::new(),
                waiting: BTreeMap::new(),
                gso: true,
                headers: [0; 64],
                counters: BackendCounters::shared(),
            }),
        })
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        lock(&self.tx.link).mac
    }
}

/// The link, whichever thread held it last (a panic while holding it leaves nothing half
/// done that a later frame could trip on: each frame is handled whole or not at all).
fn lock(link: &Mutex<Link>) -> MutexGuard<'_, Link> {
    link.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes every frame that has arrived in `ring`, up to [`MAX_FRAMES`], into `buf` and `out`
/// (`Link::take`), and counts the frames the kernel dropped for a full ring; returns whether
/// the ring is drained.
fn read_ring(
    ring: &mut Receiver,
    link: &Mutex<Link>,
    buf: &mut [u8],
    out: &mut Vec<Received>,
) -> bool {
    let mut at = 0;
    let mut link = lock(link);
    ring.poll_frames(MAX_FRAMES, |frame| link.take(frame, buf, &mut at, out));
    let lost = ring.take_ring_drops(false);
    if lost > 0 {
        link.counters.add(Counter::RingFull, lost);
        tracing::debug!(lost, "raw backend: frames dropped by the kernel, ring full");
    }
    !ring.has_frame()
}

/// Says what the ring and the link dropped, once the ring is closed.
fn report_closed(ring: &mut Receiver, link: &Mutex<Link>) {
    let link = lock(link);
    link.counters
        .add(Counter::RingFull, ring.take_ring_drops(true));
    let counters = link.counters.snapshot();
    tracing::debug!(
        batches_cut = counters.rx_batches_cut,
        batches_dropped = counters.rx_batches_dropped,
        fragments = counters.rx_ipv4_fragments,
        malformed = counters.rx_malformed_frames,
        truncated = ring.truncated(),
        ring_full = counters.rx_ring_full,
        "raw backend closed"
    );
}

impl Drop for RawBackend {
    fn drop(&mut self) {
        if let Some(ring) = &mut self.ring {
            report_closed(ring, &self.tx.link);
        }
    }
}

impl Backend for RawBackend {
    async fn recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<()> {
        loop {
            let mut guard = self.ready.readable().await?;
            let Some(ring) = &mut self.ring else {
                // The device took the ring and receives through it; it does not call this.
                return std::future::pending().await;
            };
            if read_ring(ring, &self.tx.link, buf, out) {
                guard.clear_ready();
            }
            if !out.is_empty() {
                return Ok(());
            }
        }
    }

    async fn when_readable<F>(&mut self, receive: F) -> io::Result<()>
    where
        F: FnOnce() -> io::Result<bool> + Send,
    {
        // As `recv`, with the ring read by `receive` through the device's `RawReceiver`. The
        // guard is taken before the read, so a frame that arrives after it raises a new edge.
        let mut guard = self.ready.readable().await?;
        if receive()? {
            guard.clear_ready();
        }
        Ok(())
    }

    fn wake_on_datagrams(&mut self, wake: bool) -> io::Result<()> {
        self.ready.set(wake)
    }

    fn receiver(&mut self) -> Option<Box<dyn super::Receiver>> {
        let ring = self.ring.take()?;
        Some(Box::new(RawReceiver {
            ring,
            link: self.tx.link.clone(),
        }))
    }

    fn sender(&mut self) -> Option<Box<dyn super::Sender>> {
        Some(Box::new(self.tx.clone()))
    }

    async fn send(&mut self, transmit: &Transmit, payload: &[u8]) -> io::Result<()> {
        lock(&self.tx.link).send_segments(transmit, payload, payload.len())
    }

    async fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        // The task sends as any other thread does, through the link.
        super::Sender::send_segments(&mut self.tx, transmit, payload, segment)
    }

    fn max_segments(&self) -> usize {
        super::Sender::max_segments(&self.tx)
    }

    fn fixed_src_port(&self) -> Option<u16> {
        None
    }

    fn recv_buffer_len(&self) -> usize {
        RECV_BUFFER
    }

    fn counters(&self) -> Option<Arc<BackendCounters>> {
        Some(lock(&self.tx.link).counters.clone())
    }
}

/// The raw backend's ring, read by whichever thread holds the device's receive lock.
#[derive(Debug)]
pub struct RawReceiver {
    ring: Receiver,
    link: Arc<Mutex<Link>>,
}

impl super::Receiver for RawReceiver {
    fn try_recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<bool> {
        // An empty ring is found empty by one load of its next slot's status.
        if !self.ring.has_frame() {
            return Ok(true);
        }
        Ok(read_ring(&mut self.ring, &self.link, buf, out))
    }

    fn buffer_len(&self) -> usize {
        RECV_BUFFER
    }
}

impl Drop for RawReceiver {
    fn drop(&mut self) {
        report_closed(&mut self.ring, &self.link);
    }
}

/// The raw backend's sending half, used by whichever thread holds the device's transmit lock.
#[derive(Debug, Clone)]
pub struct RawSender {
    link: Arc<Mutex<Link>>,
    /// Room for the pieces of a gathered frame, kept from one to the next.
    pieces: Vec<Piece>,
}

impl RawSender {
    fn on(link: Link) -> Self {
        Self {
            link: Arc::new(Mutex::new(link)),
            pieces: Vec::new(),
        }
    }
}

impl super::Sender for RawSender {
    fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        lock(&self.link).send_segments(transmit, payload, segment)
    }

    fn max_segments(&self) -> usize {
        super::udp::MAX_GSO_SEGMENTS
    }

    fn gathers(&self) -> bool {
        true
    }

    fn send_gathered(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
        loans: &[Loan],
    ) -> io::Result<()> {
        // The first piece is the frame's headers, which the link writes. Too many pieces, a
        // neighbour not yet known, or datagrams one by one: from one buffer.
        let len = payload.len();
        super::send_gathered_or_copied(
            self,
            |s| &mut s.pieces,
            1,
            (transmit, payload, segment, loans),
            |s, pieces| lock(&s.link).send_gathered(transmit, len, segment, pieces),
        )
    }
}

/// Room for several 64 KiB batches per read.
const RECV_BUFFER: usize = 64 * roce_core::MAX_DATAGRAM + (1 << 16);

/// Frames taken from the ring per read at most (the driver then runs the engine).
const MAX_FRAMES: usize = 256;
