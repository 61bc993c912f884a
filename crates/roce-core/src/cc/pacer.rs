//! Pacing: the requester of a rate-limited QP sends each packet no earlier than the previous
//! one's bytes on the wire take at the QP's rate. Next-send-time based, kept in fractional
//! nanoseconds so the rounding of one gap does not add up over many.

use crate::Instant;

/// Ethernet, IPv4 and UDP headers around a UDP payload, as `roce-sim`'s `IPV4_FRAME_OVERHEAD`
/// counts a frame on the wire (14 + 20 + 8; no FCS, preamble or gap).
pub(crate) const IPV4_FRAME_OVERHEAD: usize = 14 + 20 + 8;
/// The same over IPv6 (14 + 40 + 8).
pub(crate) const IPV6_FRAME_OVERHEAD: usize = 14 + 40 + 8;

/// The bytes `transmit` takes on the wire as the pacer counts them: its UDP payload and the
/// headers around it for its destination's IP version.
#[inline]
pub(crate) fn wire_len(transmit: &crate::Transmit) -> usize {
    transmit.len
        + if transmit.dst.is_ipv4() {
            IPV4_FRAME_OVERHEAD
        } else {
            IPV6_FRAME_OVERHEAD
        }
}

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
    /// The QP has a packet waiting for its slot, due at this time (fractional nanoseconds):
    /// if the send comes later, the lateness is the timer's, not idleness, and the schedule is
    /// kept.
    waiting: Option<f64>,
}

/// How far behind its schedule a waiting QP may catch up in a burst: a real clock wakes a
/// paced QP late (tokio's timers have millisecond granularity), and without catching up the
/// QP would send one packet per wake-up, whatever its rate. In virtual time timers are
/// punctual and this never applies.
const MAX_CATCH_UP_NS: f64 = 2_000_000.0;

impl Pacer {
    /// The end of the last packet's slot at `rate_bps`, fractional nanoseconds.
    fn next_ns(&self, rate_bps: f64) -> f64 {
        self.start_ns + self.wire_bytes as f64 * 8.0 * 1e9 / rate_bps.max(1.0)
    }

    /// The earliest time the next packet may be sent at `rate_bps`.
    pub(crate) fn ready_at(&self, rate_bps: f64) -> Instant {
        Instant::from_nanos(ceil_nanos(self.next_ns(rate_bps)))
    }

    /// A packet of `wire_bytes` left at `now` at `rate_bps`.
    pub(crate) fn on_sent(&mut self, now: Instant, wire_bytes: usize, rate_bps: f64) {
        let now_ns = now.as_nanos() as f64;
        let next_ns = self.next_ns(rate_bps);
        // A packet sent as soon as allowed starts where the last one's slot ended (the wait
        // was rounded up to a whole nanosecond); one sent later starts now: no credit builds up
        // while the QP is idle.
        let (start_ns, catching_up) = if now_ns <= next_ns + 1.0 {
            (next_ns, false)
        } else if let Some(due_ns) = self.waiting {
            let late_ns = (now_ns - due_ns).clamp(0.0, MAX_CATCH_UP_NS);
            (next_ns.max(now_ns - late_ns), true)
        } else {
            (now_ns, false)
        };
        self.start_ns = start_ns;
        self.wire_bytes = wire_bytes;
        // While the schedule is still behind the present, the packets after this one continue
        // it too: a late wake-up releases a burst that makes up the lost time.
        if !catching_up || self.next_ns(rate_bps) >= now_ns {
            self.waiting = None;
        }
    }

    /// A packet is held back until `due` ([`Pacer::ready_at`] at the rate of the moment).
    pub(crate) fn hold(&mut self, due: Instant) {
        self.waiting = Some(due.as_nanos() as f64);
    }
}

/// `ns.ceil() as u64`, without the call to libm's `ceil` that x86-64's baseline instructions
/// need: truncated, then one more when something was cut off. The same for every `f64`
/// (negative and NaN give 0, beyond `u64::MAX` saturates, as the cast does); a paced QP asks
/// for it before each packet.
#[inline]
fn ceil_nanos(ns: f64) -> u64 {
    let whole = ns as u64;
    if (whole as f64) < ns {
        whole.saturating_add(1)
    } else {
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ceil_nanos` is the cast of `ceil` for every kind of `f64`: whole, fractional, tiny,
    /// negative, NaN, infinite, around 2^53, 2^63 and 2^64.
    #[test]
    fn ceil_nanos_is_the_cast_of_ceil() {
        let mut values = vec![
            0.0,
            -0.0,
            0.25,
            1.0,
            1.5,
            -0.5,
            -1.5,
            f64::MIN_POSITIVE,
            f64::EPSILON,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            9_007_199_254_740_993.0,
            18_446_744_073_709_551_615.0,
        ];
        for e in [52, 53, 62, 63, 64, 65] {
            let p = 2f64.powi(e);
            values.extend([p, p.next_down(), p.next_up(), p - 0.5, p + 1.0]);
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push((x >> (x % 40)) as f64 / 1024.0);
            values.push(f64::from_bits(x));
        }
        for ns in values {
            assert_eq!(ceil_nanos(ns), ns.ceil() as u64, "{ns:e}");
        }
    }

    const GBPS: f64 = 1e9;

    /// 1000 bytes at 1 Gb/s take 8 µs.
    #[test]
    fn a_waiting_qp_woken_late_catches_up_but_an_idle_one_does_not() {
        let mut waiting = Pacer::default();
        waiting.on_sent(Instant::from_nanos(0), 1000, GBPS);
        assert_eq!(waiting.ready_at(GBPS), Instant::from_nanos(8_000));
        // Held for its slot, it is woken 1 ms late: its slots go on from 8 µs, so the next
        // packets may leave at once until the schedule reaches the present.
        waiting.hold(waiting.ready_at(GBPS));
        let late = Instant::from_nanos(1_000_000);
        waiting.on_sent(late, 1000, GBPS);
        assert_eq!(waiting.ready_at(GBPS), Instant::from_nanos(16_000));
        // ... and the ones after it too, until the schedule reaches the present.
        let mut sent = 1;
        while waiting.ready_at(GBPS) <= late {
            waiting.on_sent(late, 1000, GBPS);
            sent += 1;
        }
        assert_eq!(sent, 125, "1 ms at 1 Gb/s is 125 packets of 1000 bytes");
        assert_eq!(waiting.ready_at(GBPS), Instant::from_nanos(1_008_000));

        // A QP that had nothing to send builds no credit while idle.
        let mut idle = Pacer::default();
        idle.on_sent(Instant::from_nanos(0), 1000, GBPS);
        idle.on_sent(late, 1000, GBPS);
        assert_eq!(idle.ready_at(GBPS), Instant::from_nanos(1_008_000));

        // Nor does a waiting QP woken on time whose slot moved earlier (its rate went up).
        let mut faster = Pacer::default();
        faster.on_sent(Instant::from_nanos(0), 1000, GBPS / 10.0);
        faster.hold(faster.ready_at(GBPS / 10.0));
        faster.on_sent(Instant::from_nanos(80_000), 1000, GBPS);
        assert_eq!(faster.ready_at(GBPS), Instant::from_nanos(88_000));
    }

    #[test]
    fn catching_up_is_bounded() {
        let mut pacer = Pacer::default();
        pacer.on_sent(Instant::from_nanos(0), 1000, GBPS);
        pacer.hold(pacer.ready_at(GBPS));
        // Woken 10 ms late: at most 2 ms of schedule is made up.
        pacer.on_sent(Instant::from_nanos(10_000_000), 1000, GBPS);
        assert_eq!(pacer.ready_at(GBPS), Instant::from_nanos(8_008_000));
    }
}
