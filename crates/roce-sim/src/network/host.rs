//! A host's egress: one queue per priority between its NIC and its one link, the PFC pauses the
//! switch above it sent, and when its next events are scheduled. The NIC is asked for a packet
//! only when the link is free, as a NIC's scheduler picks the next packet when the wire is free,
//! so these queues hold at most the packets of priorities that are paused.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use roce_core::RegionMemory;

use roce_core::Instant;

use super::PacketRef;
use crate::serialisation::LastSerialised;
use crate::switch::CLASSES;

/// Counters of one host's link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Packets its NIC sent.
    pub sent: u64,
    /// Their bytes on the wire.
    pub sent_bytes: u64,
    /// Packets delivered to its NIC.
    pub received: u64,
    /// PAUSE frames (XOFF) it received, which stopped a priority of its egress.
    pub pauses_received: u64,
}

/// The egress of one host.
#[derive(Debug, Default)]
pub(super) struct Egress {
    /// Packets, per priority.
    queues: [VecDeque<PacketRef>; CLASSES],
    queued: usize,
    /// Until when the link is serialising.
    pub(super) busy_until: Instant,
    /// Until when each priority is paused.
    pub(super) paused_until: [Instant; CLASSES],
    /// When a `HostTx` event is pending, if one is.
    pub(super) tx_at: Option<Instant>,
    /// When a `NicTimer` event is pending, if one is.
    pub(super) timer_at: Option<Instant>,
    /// What the link serialised last, remembered.
    pub(super) last_serialised: LastSerialised,
    pub(super) stats: HostStats,
}

impl Egress {
    /// Queues `packet` on priority `class`.
    pub(super) fn push(&mut self, class: usize, packet: PacketRef) {
        self.queues[class % CLASSES].push_back(packet);
        self.queued += 1;
    }

    /// The next packet that may go at `now`: the highest priority not paused.
    pub(super) fn pop_sendable(&mut self, now: Instant) -> Option<PacketRef> {
        if self.queued == 0 {
            return None; // nearly always: a packet is asked of the NIC when the link is free
        }
        let class = (0..CLASSES)
            .rev()
            .find(|&c| !self.queues[c].is_empty() && self.paused_until[c] <= now)?;
        self.queued -= 1;
        self.queues[class].pop_front()
    }

    /// Whether a packet of priority `class` asked of the NIC now may go at once: nothing is
    /// queued before it (every queued packet waits on a pause) and its priority is not paused.
    pub(super) fn may_bypass(&self, class: usize, now: Instant) -> bool {
        self.queued == 0 && self.paused_until[class % CLASSES] <= now
    }

    /// Packets queued.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }
}

/// A host's memory region in [`Payload::Lengths`](super::Payload::Lengths) mode: it stores
/// nothing. Reads leave the NIC's buffer as it is (so a sent payload is whatever that buffer
/// held), writes only add their length to a counter, atomics see 0 and count their 8 bytes.
#[derive(Debug)]
pub(super) struct SinkMemory {
    len: usize,
    written: AtomicU64,
}

impl SinkMemory {
    /// A region of `len` bytes that has had nothing written.
    pub(super) fn new(len: usize) -> Self {
        Self {
            len,
            written: AtomicU64::new(0),
        }
    }

    /// Bytes written into the region so far.
    pub(super) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

impl RegionMemory for SinkMemory {
    fn len(&self) -> usize {
        self.len
    }

    fn read_at(&self, _offset: usize, _out: &mut [u8]) {}

    fn write_at(&self, _offset: usize, data: &[u8]) {
        self.written.fetch_add(data.len() as u64, Ordering::Relaxed);
    }

    fn update_u64(&self, _offset: usize, f: &mut dyn FnMut(u64) -> u64) -> u64 {
        f(0);
        self.written.fetch_add(8, Ordering::Relaxed);
        0
    }
}
