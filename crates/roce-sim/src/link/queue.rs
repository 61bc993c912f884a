//! The egress queue: drop-tail under [`LinkConfig::queue_limit_bytes`], RED ECN marking by the
//! occupancy a frame finds ([`EcnMarking`]), and serialisation at
//! [`LinkConfig::bandwidth_bps`], one frame after the other.

use roce_core::{Duration, Instant};

use roce_wire::frame::Ecn;

#[cfg(doc)]
use super::LinkConfig;
use super::{Fate, Link, Sent, SimPacket};

/// RED-style ECN marking by queue occupancy, the DCQCN congestion point (CP).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EcnMarking {
    /// At or below this occupancy (wire bytes), nothing is marked.
    pub k_min_bytes: usize,
    /// Above this occupancy, every ECN-capable packet is marked.
    pub k_max_bytes: usize,
    /// Marking probability reached at `k_max_bytes`.
    pub p_max: f64,
}

impl EcnMarking {
    /// The probability of marking a packet that finds `queue_bytes` in the queue.
    pub fn probability(&self, queue_bytes: usize) -> f64 {
        // The DCQCN CP: "p=0 if q≤Kmin; p = Pmax·(q−Kmin)/(Kmax−Kmin) if Kmin<q≤Kmax; p=1 if
        // q>Kmax" (HPCC switch-mmu.cc `ShouldSendCN`).
        if queue_bytes <= self.k_min_bytes {
            0.0
        } else if queue_bytes > self.k_max_bytes {
            1.0
        } else {
            // Here k_min < q <= k_max, so the range is not empty.
            let above = (queue_bytes - self.k_min_bytes) as f64;
            let range = (self.k_max_bytes - self.k_min_bytes) as f64;
            self.p_max * above / range
        }
    }
}

impl Link {
    /// Queue occupancy at `now`: the wire bytes of the frames offered but not yet fully
    /// serialised. A frame counts in full until its last bit has left.
    pub fn queue_bytes(&self, now: Instant) -> usize {
        // Frames serialise back to back, so their end times increase along the backlog: those
        // already on the wire are at its front.
        let gone: usize = self
            .backlog
            .iter()
            .take_while(|(end, _)| *end <= now)
            .map(|(_, bytes)| bytes)
            .sum();
        self.backlog_bytes - gone
    }

    /// The egress queue at `now`: drops the frame at the tail if it does not fit, marks it CE
    /// if `mark_ce` (a fault or the filter) or RED says so (`red_draw`), and queues it for
    /// serialisation. Returns when its last bit leaves, `None` if it was dropped.
    pub(super) fn enqueue(
        &mut self,
        now: Instant,
        packet: &mut SimPacket,
        red_draw: f64,
        mut mark_ce: bool,
        record: &mut Sent,
    ) -> Option<Instant> {
        while let Some(&(end, bytes)) = self.backlog.front()
            && end <= now
        {
            self.backlog.pop_front();
            self.backlog_bytes -= bytes;
        }
        let queued = self.queue_bytes(now);
        let wire_len = packet.wire_len();
        if self
            .config
            .queue_limit_bytes
            .is_some_and(|limit| queued + wire_len > limit)
        {
            record.fate = Fate::QueueFull;
            self.stats.queue_drops += 1;
            return None;
        }
        if let Some(red) = &self.config.ecn {
            mark_ce |= red_draw < red.probability(queued);
        }
        // Only ECN-capable packets are marked (RFC 3168 §5); CE stays CE.
        if mark_ce && packet.is_ect() {
            packet.ecn = Ecn::Ce;
            record.ce_marked = true;
            self.stats.ce_marked += 1;
        }
        let start = now.max(self.busy_until);
        let end = start + self.serialisation(wire_len);
        self.busy_until = end;
        if end > now {
            self.backlog.push_back((end, wire_len));
            self.backlog_bytes += wire_len;
        }
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(queued + wire_len);
        Some(end)
    }

    /// Time to put `wire_len` bytes on the wire, rounded up to the nanosecond.
    fn serialisation(&self, wire_len: usize) -> Duration {
        let Some(bps) = self.config.bandwidth_bps else {
            return Duration::ZERO;
        };
        if bps == 0 {
            return Duration::MAX;
        }
        let bits = wire_len as u128 * 8;
        let nanos = (bits * NANOS_PER_SEC).div_ceil(u128::from(bps));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// Nanoseconds in a second.
const NANOS_PER_SEC: u128 = 1_000_000_000;
