//! Congestion control of a QP, behind one trait (quinn's `Controller`): the reaction point that
//! sets the QP's sending rate ([`RateControl`]: [`Unlimited`] or [`dcqcn::Dcqcn`]), the pacer
//! that holds the requester to that rate, and the notification point that answers CE-marked
//! requests with CNPs.

use std::fmt;

use crate::config::{Congestion, NicConfig};
use crate::stats::Stats;
use crate::timer::{Timer, TimerTable};
use crate::{Ecn, Instant};

pub(crate) mod dcqcn;
pub(crate) mod np;
pub(crate) mod pacer;
#[cfg(test)]
mod tests;

/// A reaction point: decides a QP's sending rate from the CNPs it receives, the bytes it sends
/// and its timers. Timers are armed in the QP's [`TimerTable`]; the NIC calls
/// [`RateControl::on_timer`] when `RateIncrease` expires.
pub(crate) trait RateControl: fmt::Debug + Send {
    /// The rate the requester may send at, bits per second; `None` is no limit.
    fn rate_bps(&self) -> Option<f64>;
    /// The rate it is climbing back to, bits per second; `None` is no limit.
    fn target_bps(&self) -> Option<f64>;
    /// DCQCN's α at `now`, the estimate of how congested the path is (0 when not applicable).
    fn alpha(&self, now: Instant) -> f64;
    /// A CNP for this QP arrived.
    fn on_cnp(&mut self, now: Instant, timers: &mut TimerTable, stats: &mut Stats);
    /// The requester put `bytes` on the wire.
    fn on_sent(&mut self, now: Instant, bytes: u64, timers: &mut TimerTable, stats: &mut Stats);
    /// `timer` expired.
    fn on_timer(&mut self, timer: Timer, now: Instant, timers: &mut TimerTable, stats: &mut Stats);
}

/// No congestion control: no limit, no timers, CNPs change nothing.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Unlimited;

impl RateControl for Unlimited {
    fn rate_bps(&self) -> Option<f64> {
        None
    }
    fn target_bps(&self) -> Option<f64> {
        None
    }
    fn alpha(&self, _: Instant) -> f64 {
        0.0
    }
    fn on_cnp(&mut self, _: Instant, _: &mut TimerTable, _: &mut Stats) {}
    fn on_sent(&mut self, _: Instant, _: u64, _: &mut TimerTable, _: &mut Stats) {}
    fn on_timer(&mut self, _: Timer, _: Instant, _: &mut TimerTable, _: &mut Stats) {}
}

/// A QP's congestion-control state: its reaction point, pacer and notification point.
#[derive(Debug)]
pub(crate) struct QpCongestion {
    pub(crate) rp: Box<dyn RateControl>,
    pub(crate) pacer: pacer::Pacer,
    pub(crate) np: np::Notifier,
    /// CNPs received for this QP.
    pub(crate) cnps_received: u64,
}

impl QpCongestion {
    /// The state a new (or reset) QP starts with under `config`.
    pub(crate) fn new(config: &NicConfig) -> Self {
        let rp: Box<dyn RateControl> = match config.congestion {
            Congestion::None => Box::new(Unlimited),
            Congestion::Dcqcn(dcqcn) => {
                Box::new(dcqcn::Dcqcn::new(dcqcn, config.line_rate_bps as f64))
            }
        };
        Self {
            rp,
            pacer: pacer::Pacer::default(),
            np: np::Notifier::default(),
            cnps_received: 0,
        }
    }
}

impl Default for QpCongestion {
    fn default() -> Self {
        Self {
            rp: Box::new(Unlimited),
            pacer: pacer::Pacer::default(),
            np: np::Notifier::default(),
            cnps_received: 0,
        }
    }
}

/// The ECN codepoint of request packets: ECT(0) when congestion control is on, so a congestion
/// point may mark them CE (RFC 3168 §5; RoCE fabrics' "data DSCP 26 + ECT(0)").
pub(crate) fn request_ecn(config: &NicConfig) -> Ecn {
    match config.congestion {
        Congestion::None => Ecn::NotEct,
        Congestion::Dcqcn(_) => Ecn::Ect0,
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
    /// DCQCN's α (0 without congestion control).
    pub alpha: f64,
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
            cnps_sent: self.np.cnps_sent,
            cnps_received: self.cnps_received,
        }
    }
}
