//! The seam between a QP and its congestion-control algorithm: the trait every algorithm
//! implements ([`CongestionControl`]: a rate and/or a window; CNPs, bytes sent, timers and
//! ACKs in), what an ACK tells it ([`Ack`]), and the algorithm of no congestion control
//! ([`Unlimited`]).

use std::fmt;

use roce_wire::Psn;

use crate::stats::Stats;
use crate::timer::{Timer, TimerTable};
use crate::{Duration, Instant};

/// What one response packet told the requester (an ACK or NAK covering PSNs, a READ response,
/// an atomic ACK), for the algorithms driven by ACKs ([`crate::Congestion::hears_acks`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ack {
    /// When it arrived.
    pub(crate) now: Instant,
    /// Bytes on the wire of the request packets it newly acknowledged (0 for a duplicate).
    pub(crate) newly_acked: u64,
    /// The oldest PSN still unacknowledged after it (TCP's `snd_una`).
    pub(crate) una: Psn,
    /// The first PSN never sent (TCP's `snd_nxt`): "once per window" is until `una` passes
    /// the `next` of the last update.
    pub(crate) next: Psn,
    /// Its arrival minus the departure of the newest packet it covers, unless that packet was
    /// sent more than once.
    pub(crate) rtt: Option<Duration>,
    /// The BTH's BECN bit: the responder saw CE on the requests this ACK covers (DCTCP's
    /// ECN-Echo).
    pub(crate) ecn_echo: bool,
    /// The INT header it echoed (HPCC's telemetry, `roce_wire::int`), if any.
    pub(crate) int: Option<roce_wire::int::Repr>,
}

/// A QP's congestion-control algorithm: decides its sending rate (pacing) and its window (bytes
/// in flight) from the CNPs it receives, the bytes it sends, its timers and the ACKs. Timers are
/// armed in the QP's [`TimerTable`]; the NIC calls [`CongestionControl::on_timer`] when
/// `RateIncrease` expires.
pub(crate) trait CongestionControl: fmt::Debug + Send {
    /// The rate the requester may send at, bits per second; `None` is no limit.
    fn rate_bps(&self) -> Option<f64>;
    /// The bytes on the wire (or of payload, [`crate::Congestion::window_counts_payload`]) the
    /// requester may have unacknowledged; `None` is no limit (the QP's PSN window still
    /// applies).
    fn window_bytes(&self) -> Option<u64> {
        None
    }
    /// The rate it is climbing back to, bits per second; `None` is no limit (or none kept).
    fn target_bps(&self) -> Option<f64> {
        None
    }
    /// The algorithm's α at `now`, its estimate of how congested the path is (DCQCN's and
    /// DCTCP's α; 0 when not applicable).
    fn alpha(&self, now: Instant) -> f64 {
        let _ = now;
        0.0
    }
    /// A CNP for this QP arrived.
    fn on_cnp(&mut self, now: Instant, timers: &mut TimerTable, stats: &mut Stats) {
        let _ = (now, timers, stats);
    }
    /// The requester put `bytes` on the wire.
    fn on_sent(&mut self, now: Instant, bytes: u64, timers: &mut TimerTable, stats: &mut Stats) {
        let _ = (now, bytes, timers, stats);
    }
    /// A response arrived (only with [`crate::Congestion::hears_acks`]).
    fn on_ack(&mut self, ack: &Ack, timers: &mut TimerTable, stats: &mut Stats) {
        let _ = (ack, timers, stats);
    }
    /// `timer` expired.
    fn on_timer(&mut self, timer: Timer, now: Instant, timers: &mut TimerTable, stats: &mut Stats) {
        let _ = (timer, now, timers, stats);
    }
}

/// No congestion control: no limit, no timers, CNPs change nothing.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Unlimited;

impl CongestionControl for Unlimited {
    fn rate_bps(&self) -> Option<f64> {
        None
    }
}
