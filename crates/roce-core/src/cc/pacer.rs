//! Pacing: the requester of a rate-limited QP sends each packet no earlier than the previous
//! one's bytes on the wire take at the QP's rate. Next-send-time based, kept in fractional
//! nanoseconds so the rounding of one gap does not add up over many.

use crate::Instant;

/// Ethernet, IPv4 and UDP headers around a UDP payload, as `roce-sim`'s `IPV4_FRAME_OVERHEAD`
/// counts a frame on the wire (14 + 20 + 8; no FCS, preamble or gap).
pub(crate) const IPV4_FRAME_OVERHEAD: usize = 14 + 20 + 8;
/// The same over IPv6 (14 + 40 + 8).
pub(crate) const IPV6_FRAME_OVERHEAD: usize = 14 + 40 + 8;

/// When the next request packet may leave.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Pacer {
    /// Nanoseconds since the epoch, fractional.
    next_ns: f64,
}

impl Pacer {
    /// The earliest time the next packet may be sent.
    pub(crate) fn ready_at(&self) -> Instant {
        Instant::from_nanos(self.next_ns.ceil() as u64)
    }

    /// A packet of `wire_bytes` left at `now` at `rate_bps`.
    pub(crate) fn on_sent(&mut self, now: Instant, wire_bytes: usize, rate_bps: f64) {
        let now_ns = now.as_nanos() as f64;
        // A packet sent as soon as allowed starts where the last one's slot ended (the wait
        // was rounded up to a whole nanosecond); one sent later starts now: no credit builds up
        // while the QP is idle.
        let start = if now_ns <= self.next_ns + 1.0 {
            self.next_ns
        } else {
            now_ns
        };
        self.next_ns = start + wire_bytes as f64 * 8.0 * 1e9 / rate_bps.max(1.0);
    }
}
