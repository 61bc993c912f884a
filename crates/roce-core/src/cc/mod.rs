//! Congestion control of a QP, behind one trait (quinn's `Controller`): the algorithm that
//! sets the QP's sending rate and window ([`CongestionControl`] in `control.rs`: [`Unlimited`],
//! [`dcqcn::Dcqcn`], [`dctcp::Dctcp`], [`timely::Timely`], [`hpcc::Hpcc`]), the pacer that holds the requester
//! to that rate, the record of the packets in flight that ACKs are matched against
//! ([`flight::Flight`]), and the notification point that answers CE-marked requests with CNPs.
//! The algorithms know only `control.rs`; this file puts them together for a QP.

use roce_wire::Psn;

pub(crate) use control::{Ack, CongestionControl, Unlimited};

use crate::config::{Congestion, NicConfig};
use crate::stats::Stats;
use crate::timer::TimerTable;
use crate::{Ecn, Instant};

pub(crate) mod control;
pub(crate) mod dcqcn;
pub(crate) mod dctcp;
#[cfg(test)]
mod dctcp_tests;
pub(crate) mod flight;
pub(crate) mod hpcc;
#[cfg(test)]
mod hpcc_tests;
pub(crate) mod np;
pub(crate) mod pacer;
#[cfg(test)]
mod tests;
pub(crate) mod timely;
#[cfg(test)]
mod timely_tests;

/// A QP's congestion-control state: its algorithm (for DCQCN, the reaction point), pacer,
/// record of packets in flight and notification point.
#[derive(Debug)]
pub(crate) struct QpCongestion {
    pub(crate) rp: Box<dyn CongestionControl>,
    pub(crate) pacer: pacer::Pacer,
    /// The packets in flight, kept only for an algorithm that hears ACKs.
    pub(crate) flight: Option<flight::Flight>,
    pub(crate) np: np::Notifier,
    /// CNPs received for this QP.
    pub(crate) cnps_received: u64,
}

impl QpCongestion {
    /// The state a new (or reset) QP `qpn` starts with under `config`.
    pub(crate) fn new(config: &NicConfig, qpn: u32) -> Self {
        let line = config.line_rate_bps as f64;
        let rp: Box<dyn CongestionControl> = match config.congestion {
            Congestion::None => Box::new(Unlimited),
            Congestion::Dcqcn(dcqcn) => Box::new(dcqcn::Dcqcn::new(dcqcn, line)),
            Congestion::Dctcp(dctcp) => Box::new(dctcp::Dctcp::new(dctcp, line)),
            Congestion::Timely(timely) => Box::new(timely::Timely::new(timely, line)),
            Congestion::Hpcc(hpcc) => {
                // PINT's sampling draws from the NIC's seed, a stream per QP.
                let seed = config.seed ^ u64::from(qpn);
                Box::new(hpcc::Hpcc::new(hpcc, line).with_draws(seed))
            }
        };
        Self {
            rp,
            pacer: pacer::Pacer::default(),
            flight: config.congestion.hears_acks().then(|| {
                flight::Flight::counting_payload(config.congestion.window_counts_payload())
            }),
            np: np::Notifier::default(),
            cnps_received: 0,
        }
    }

    /// Whether the window lets one more request packet go: fewer bytes in flight than the
    /// algorithm's window (and at least one packet, whatever the window).
    pub(crate) fn window_open(&self) -> bool {
        // Only an algorithm that hears ACKs has a window (and the record to check it against):
        // without one, no call to the algorithm on every request.
        let Some(flight) = &self.flight else {
            return true;
        };
        self.rp
            .window_bytes()
            .is_none_or(|window| flight.windowed() < window.max(1))
    }

    /// Every request asks for an ACK (AckReq), for an algorithm that hears ACKs: only ACKs
    /// reopen its window and sample its RTT, and a packet in the middle of a message would
    /// otherwise ask for none (HPCC's ns-3 acknowledges every packet, `L2_ACK_INTERVAL 1`).
    pub(crate) fn acks_every_packet(&self) -> bool {
        self.flight.is_some()
    }

    /// A request packet with PSNs `psn..psn + npsn`, `wire` bytes on the wire and `payload`
    /// bytes of payload, left at `now` (`again`: sent before; `npsn` 0: a UC or UD packet,
    /// which no ACK covers).
    pub(crate) fn on_request_sent(
        &mut self,
        now: Instant,
        (psn, npsn, again): (Psn, u32, bool),
        (wire, payload): (usize, u32),
        timers: &mut TimerTable,
        stats: &mut Stats,
    ) {
        self.on_rate_limited_sent(now, wire, timers, stats);
        if let Some(flight) = &mut self.flight
            && npsn > 0
        {
            flight.sent(
                now,
                (psn, npsn),
                (u32::try_from(wire).unwrap_or(u32::MAX), payload),
                again,
            );
        }
    }

    /// A packet of `wire` bytes on the wire left at `now`, under the QP's rate: the pacer and
    /// the rate's own count of bytes sent (DCQCN's byte counter) take it. A request, or a READ
    /// response under DCQCN (`qp/responder/respond.rs`).
    #[inline]
    pub(crate) fn on_rate_limited_sent(
        &mut self,
        now: Instant,
        wire: usize,
        timers: &mut TimerTable,
        stats: &mut Stats,
    ) {
        if let Some(rate) = self.rp.rate_bps() {
            self.pacer.on_sent(now, wire, rate);
            self.rp.on_sent(now, wire as u64, timers, stats);
        }
    }

    /// A response arrived at `now`: the requester's `una` and `next` after it, its BECN and
    /// the INT header it echoed.
    pub(crate) fn on_response(
        &mut self,
        now: Instant,
        (una, next): (Psn, Psn),
        (ecn_echo, int): (bool, Option<roce_wire::int::Repr>),
        timers: &mut TimerTable,
        stats: &mut Stats,
    ) {
        let Some(flight) = &mut self.flight else {
            return;
        };
        let covered = flight.acknowledged(una, now);
        let ack = Ack {
            now,
            newly_acked: covered.bytes,
            una,
            next,
            rtt: covered.rtt,
            ecn_echo,
            int,
        };
        self.rp.on_ack(&ack, timers, stats);
    }

    /// Go-back-N from `psn`: what follows it leaves the record until it is sent again.
    pub(crate) fn on_go_back(&mut self, psn: Psn) {
        if let Some(flight) = &mut self.flight {
            flight.go_back(psn);
        }
    }
}

impl Default for QpCongestion {
    fn default() -> Self {
        Self {
            rp: Box::new(Unlimited),
            pacer: pacer::Pacer::default(),
            flight: None,
            np: np::Notifier::default(),
            cnps_received: 0,
        }
    }
}

/// The ECN codepoint of request packets: ECT(0) when the algorithm reads CE marks, so a
/// congestion point may mark them (RFC 3168 §5; RoCE fabrics' "data DSCP 26 + ECT(0)");
/// Not-ECT without congestion control and for TIMELY, which reads RTTs.
pub(crate) fn request_ecn(config: &NicConfig) -> Ecn {
    if config.congestion.reacts_to_marks() {
        Ecn::Ect0
    } else {
        Ecn::NotEct
    }
}

/// A QP's congestion control as [`crate::Nic::qp_congestion`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CongestionState {
    /// The current sending rate (DCQCN's RC), bits per second; `None` without congestion
    /// control.
    pub rate_bps: Option<u64>,
    /// The target rate (DCQCN's RT), bits per second; `None` without congestion control.
    pub target_bps: Option<u64>,
    /// DCQCN's or DCTCP's α, HPCC's U (0 without congestion control and for TIMELY).
    pub alpha: f64,
    /// The window, bytes on the wire in flight (DCTCP's, HPCC's); `None` without one.
    pub window_bytes: Option<u64>,
    /// CNPs this QP sent as a notification point.
    pub cnps_sent: u64,
    /// CNPs that arrived for this QP.
    pub cnps_received: u64,
}

impl QpCongestion {
    /// What [`CongestionState`] shows of it at `now`.
    pub(crate) fn state(&self, now: Instant) -> CongestionState {
        CongestionState {
            rate_bps: self.rp.rate_bps().map(|r| r.round() as u64),
            target_bps: self.rp.target_bps().map(|r| r.round() as u64),
            alpha: self.rp.alpha(now),
            window_bytes: self.rp.window_bytes(),
            cnps_sent: self.np.cnps_sent,
            cnps_received: self.cnps_received,
        }
    }
}

/// ns-3's `VAR_WIN` window: the line-rate window (T at line rate) × rate / line rate, that is
/// `rtt_ns` of bytes at `rate_bps`; `None` (no window) when `rtt_ns` is 0.
fn rate_window(rate_bps: f64, rtt_ns: u32) -> Option<u64> {
    (rtt_ns > 0).then(|| (rate_bps * f64::from(rtt_ns) * 1e-9 / 8.0) as u64)
}
