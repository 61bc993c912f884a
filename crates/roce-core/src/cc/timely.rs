//! TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter", SIGCOMM
//! 2015), as HPCC's ns-3 simulator runs it (`simulation/src/point-to-point/model/rdma-hw.cc`
//! `UpdateRateTimely`, CC_MODE 7; alibaba-edu/High-Precision-Congestion-Control): a rate set
//! once per window of ACKs from the RTT and its gradient. The RTT is measured by the requester,
//! from a request's departure to the arrival of the ACK that covers it (`cc/flight.rs`); the
//! paper's NIC timestamps completions the same way.
//!
//! The rules, at the first ACK that covers a packet sent after the last update (the paper
//! updates once per completion event, ns-3 once per window, as here):
//! - new_rtt_diff = RTT − previous RTT; rtt_diff ← (1 − α)·rtt_diff + α·new_rtt_diff;
//!   gradient = rtt_diff / minRTT;
//! - RTT < T_low: rate ← rate + δ (additive increase);
//! - RTT > T_high: rate ← rate·(1 − β·(1 − T_high/RTT));
//! - gradient ≤ 0: rate ← rate + N·δ after N increases in a row (hyper-active increase), else
//!   + δ;
//! - gradient > 0: rate ← rate·(1 − β·gradient) (at least 0, then at least `min_rate`).
//!
//! The hyper-active step applies to every increase after `hai_thresh` in a row, T_low's
//! included, as ns-3 counts them (`m_incStage`); the paper counts negative gradients.

use roce_wire::Psn;
use tracing::debug;

use super::control::{Ack, CongestionControl};
use crate::config::TimelyConfig;
use crate::stats::Stats;
use crate::timer::TimerTable;
use crate::{Duration, Instant};

/// Bits per second in one Mb/s.
const MBPS: f64 = 1e6;

/// One QP's TIMELY sender.
#[derive(Debug, Clone)]
pub(crate) struct Timely {
    config: TimelyConfig,
    /// The line rate, bits per second: where the rate starts and the most it reaches.
    line: f64,
    /// The current rate, bits per second.
    rate: f64,
    /// The next update is due when an ACK covers this PSN (ns-3 `m_lastUpdateSeq`); `None`
    /// before the first RTT sample.
    update_at: Option<Psn>,
    /// The RTT of the last update, ns.
    prev_rtt: f64,
    /// The EWMA of the RTT differences, ns.
    rtt_diff: f64,
    /// Increases in a row.
    increases: u32,
}

/// Which way an update went.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// Additive (or hyper-active) increase.
    Increase,
    /// Multiply the rate by this.
    Decrease(f64),
}

impl Timely {
    /// A sender at line rate `line_bps`.
    pub(crate) fn new(config: TimelyConfig, line_bps: f64) -> Self {
        Self {
            config,
            line: line_bps,
            rate: line_bps,
            update_at: None,
            prev_rtt: 0.0,
            rtt_diff: 0.0,
            increases: 0,
        }
    }

    fn min_rate(&self) -> f64 {
        (f64::from(self.config.min_rate) * MBPS).min(self.line)
    }

    /// The rules of one update with the RTT `rtt`, ns.
    fn step(&mut self, rtt: f64) -> Step {
        let c = &self.config;
        let alpha = f64::from(c.alpha.min(1000)) / 1000.0;
        let beta = f64::from(c.beta) / 1000.0;
        let new_rtt_diff = rtt - self.prev_rtt;
        self.rtt_diff = (1.0 - alpha) * self.rtt_diff + alpha * new_rtt_diff;
        let gradient = self.rtt_diff / f64::from(c.min_rtt_ns.max(1));
        let t_high = f64::from(c.t_high_ns);
        if rtt < f64::from(c.t_low_ns) {
            Step::Increase
        } else if rtt > t_high {
            Step::Decrease(1.0 - beta * (1.0 - t_high / rtt))
        } else if gradient <= 0.0 {
            Step::Increase
        } else {
            Step::Decrease((1.0 - beta * gradient).max(0.0))
        }
    }

    /// One update with the RTT `rtt`.
    fn update(&mut self, rtt: Duration, now: Instant, stats: &mut Stats) {
        let rtt = rtt.as_nanos() as f64;
        let step = self.step(rtt);
        let old = self.rate;
        match step {
            Step::Increase => {
                let delta = if self.increases < self.config.hai_thresh {
                    self.config.rate_ai
                } else {
                    self.config.rate_hai
                };
                self.rate = (self.rate + f64::from(delta) * MBPS).min(self.line);
                self.increases += 1;
                if self.rate > old {
                    stats.rate_increases += 1;
                }
            }
            Step::Decrease(c) => {
                self.rate = (self.rate * c).max(self.min_rate());
                self.increases = 0;
                stats.rate_decreases += 1;
            }
        }
        debug!(rtt, rtt_diff = self.rtt_diff, from = old, rate = self.rate, time = %now, "timely update");
    }
}

impl CongestionControl for Timely {
    fn rate_bps(&self) -> Option<f64> {
        Some(self.rate)
    }

    /// ns-3's `VAR_WIN`, with `window_rtt_ns` as T: the rate × T, if T is set.
    fn window_bytes(&self) -> Option<u64> {
        super::rate_window(self.rate, self.config.window_rtt_ns)
    }

    fn on_ack(&mut self, ack: &Ack, _: &mut TimerTable, stats: &mut Stats) {
        let Some(rtt) = ack.rtt else { return };
        let due = self.update_at.is_none_or(|at| ack.una.distance(at) > 0);
        if !due {
            return;
        }
        // The first sample only starts the measurement: a difference needs two.
        if self.update_at.is_some() {
            self.update(rtt, ack.now, stats);
        }
        self.update_at = Some(ack.next);
        self.prev_rtt = rtt.as_nanos() as f64;
    }
}
