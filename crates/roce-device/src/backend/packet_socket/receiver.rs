//! The receiving half of a packet socket: its `PACKET_RX_RING` of `TPACKET_V2` slots read in
//! place, and the frames too long for a slot read from the socket's queue.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use nix::libc;
use nix::sys::socket::MsgFlags;

use super::virtio_net_hdr::VirtioNetHdr;
use crate::backend::sys::{PacketFd, RxRing};

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

    /// The socket's descriptor, to wait on while another thread reads the ring.
    pub(crate) fn fd(&self) -> Arc<PacketFd> {
        self.fd.clone()
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
pub(super) enum SlotError {
    /// The kernel kept fewer bytes than the frame had.
    Truncated,
    /// The slot's header points outside the slot.
    Malformed,
}

/// The frame in a ring slot (`tpacket2_hdr`: status, len, snaplen, mac, …; the
/// `virtio_net_hdr` sits just before the frame).
pub(super) fn slot_frame(slot: &[u8]) -> Result<RxFrame<'_>, SlotError> {
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

/// A whole frame of up to 64 KiB behind its `virtio_net_hdr`.
pub(super) const COPY_BUFFER: usize = VirtioNetHdr::LEN + 14 + 8 + 65_536;
