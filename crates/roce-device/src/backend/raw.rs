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
//! The device's task reads the ring itself (the socket is registered with tokio): each wake-up
//! takes every frame that has arrived, copying only the RoCEv2 payloads into the driver's
//! buffer. A UDP segmentation-offload batch that a peer's UDP socket sent over a veth arrives
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
use std::sync::Arc;

use roce_core::Transmit;
use tokio::io::unix::AsyncFd;

use super::packet_socket::{self, PacketSocket, Receiver};
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
    rx: AsyncFd<Receiver>,
    link: Link,
}

impl RawBackend {
    /// Opens `interface` to play `ip`. Fails with a message that says what to do when the
    /// process lacks CAP_NET_RAW or the interface does not exist. Must be called inside a
    /// tokio runtime.
    pub fn open(interface: &str, ip: IpAddr) -> io::Result<Self> {
        let PacketSocket { tx, rx, mac, .. } =
            packet_socket::open(interface, false).map_err(|err| {
                if err.kind() == io::ErrorKind::PermissionDenied {
                    io::Error::new(
                        err.kind(),
                        format!("the raw backend: {err}, or use --backend udp"),
                    )
                } else {
                    err
                }
            })?;
        Ok(Self {
            rx: super::sys::register(rx)?,
            link: Link {
                tx,
                mac,
                ip,
                neighbours: BTreeMap::new(),
                waiting: BTreeMap::new(),
                gso: true,
                headers: [0; 64],
                counters: BackendCounters::shared(),
            },
        })
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.link.mac
    }
}

impl Drop for RawBackend {
    fn drop(&mut self) {
        let rx = self.rx.get_mut();
        self.link
            .counters
            .add(Counter::RingFull, rx.take_ring_drops(true));
        let counters = self.link.counters.snapshot();
        tracing::debug!(
            batches_cut = counters.rx_batches_cut,
            batches_dropped = counters.rx_batches_dropped,
            fragments = counters.rx_ipv4_fragments,
            malformed = counters.rx_malformed_frames,
            truncated = rx.truncated(),
            ring_full = counters.rx_ring_full,
            "raw backend closed"
        );
    }
}

impl Backend for RawBackend {
    async fn recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<()> {
        loop {
            let mut guard = self.rx.readable_mut().await?;
            let mut at = 0;
            let link = &mut self.link;
            let receiver = guard.get_inner_mut();
            receiver.poll_frames(MAX_FRAMES, |frame| link.take(frame, buf, &mut at, out));
            let lost = receiver.take_ring_drops(false);
            if lost > 0 {
                link.counters.add(Counter::RingFull, lost);
                tracing::debug!(lost, "raw backend: frames dropped by the kernel, ring full");
            }
            if !receiver.has_frame() {
                guard.clear_ready();
            }
            if !out.is_empty() {
                return Ok(());
            }
        }
    }

    async fn send(&mut self, transmit: &Transmit, payload: &[u8]) -> io::Result<()> {
        let (repr, dst) = self.link.repr(transmit, 0)?;
        if self.link.neighbours.contains_key(&dst) {
            self.link.emit(&repr, payload)
        } else {
            self.link
                .wait_for_neighbour(transmit, payload, payload.len())
        }
    }

    async fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        let segment = segment.max(1);
        let (repr, dst) = self.link.repr(transmit, 0)?;
        if !self.link.neighbours.contains_key(&dst) {
            return self.link.wait_for_neighbour(transmit, payload, segment);
        }
        if payload.len() <= segment {
            return self.link.emit(&repr, payload);
        }
        if self.link.gso && repr.ip.src.is_ipv4() {
            match self.link.emit_batch(&repr, payload, segment) {
                Ok(()) => return Ok(()),
                Err(err) if err.raw_os_error() == Some(nix::libc::EINVAL) => {
                    tracing::info!(error = %err, "the kernel refused a UDP batch to cut; sending datagrams one by one");
                    self.link.gso = false;
                }
                Err(err) => return Err(err),
            }
        }
        // One frame per datagram, each with the ID its ICRC was sealed for.
        for (index, datagram) in payload.chunks(segment).enumerate() {
            let (repr, _) = self.link.repr(transmit, index as u16)?;
            self.link.emit(&repr, datagram)?;
        }
        Ok(())
    }

    fn max_segments(&self) -> usize {
        super::udp::MAX_GSO_SEGMENTS
    }

    fn fixed_src_port(&self) -> Option<u16> {
        None
    }

    fn recv_buffer_len(&self) -> usize {
        // Room for several 64 KiB batches per wake-up.
        64 * roce_core::MAX_DATAGRAM + (1 << 16)
    }

    fn counters(&self) -> Option<Arc<BackendCounters>> {
        Some(self.link.counters.clone())
    }
}

/// Frames taken from the ring per wake-up at most (the driver then runs the engine).
const MAX_FRAMES: usize = 256;
