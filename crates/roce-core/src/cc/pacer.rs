//! Pacing: the requester of a rate-limited QP sends each packet no earlier than the previous
//! one's bytes on the wire take at the QP's rate. Next-send-time based, kept in fractional
//! nanoseconds so the rounding of one gap does not add up over many.

use crate::Instant;

/// Ethernet, IPv4 and UDP headers around a UDP payload, as `roce-sim`'s `IPV4_FRAME_OVERHEAD`
/// counts a frame on the wire (14 + 20 + 8; no FCS, preamble or gap).
pub(crate) const IPV4_FRAME_OVERHEAD: usize = 14 + 20 + 8;
/// The same over IPv6 (14 + 40 + 8).
pub(crate) const IPV6_FRAME_OVERHEAD: usize = 14 + 40 + 8;

/// When the next request packet may leave: the last packet's start and size, so the gap after
/// it is taken at the rate of the moment, as a hardware rate limiter does. A QP cut to a low
/// rate that recovers does not sit out a gap computed at the low rate (at `rpg_min_rate`,
/// 1 Mb/s, one 1 KiB packet's gap is 8 ms).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Pacer {
    /// When the last packet's slot started, nanoseconds since the epoch, fractional.
    start_ns: f64,
    /// Its bytes on the wire (0 before the first packet).
    wire_bytes: usize,
}

impl Pacer {
    /// The end of the last packet's slot at `rate_bps`, fractional nanoseconds.
    fn next_ns(&self, rate_bps: f64) -> f64 {
        self.start_ns + self.wire_bytes as f64 * 8.0 * 1e9 / rate_bps.max(1.0)
    }

    /// The earliest time the next packet may be sent at `rate_bps`.
    pub(crate) fn ready_at(&self, rate_bps: f64) -> Instant {
        Instant::from_nanos(self.next_ns(rate_bps).ceil() as u64)
    }

    /// A packet of `wire_bytes` left at `now` at `rate_bps`.
    pub(crate) fn on_sent(&mut self, now: Instant, wire_bytes: usize, rate_bps: f64) {
        let now_ns = now.as_nanos() as f64;
        let next_ns = self.next_ns(rate_bps);
        // A packet sent as soon as allowed starts where the last one's slot ended (the wait
        // was rounded up to a whole nanosecond); one sent later starts now: no credit builds up
        // while the QP is idle.
        self.start_ns = if now_ns <= next_ns + 1.0 {
            next_ns
        } else {
            now_ns
        };
        self.wire_bytes = wire_bytes;
    }
}
