//! DCTCP (Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010) on an RDMA requester, as
//! HPCC's ns-3 simulator runs it (`simulation/src/point-to-point/model/rdma-hw.cc`
//! `HandleAckDctcp`, CC_MODE 8; alibaba-edu/High-Precision-Congestion-Control): a rate that
//! starts at line rate (no slow start) and a window of `base_rtt_ns` at that rate, driven by
//! the ACKs' ECN-Echo (the BTH's BECN bit, which the responder sets for CE-marked requests).
//!
//! The rules, per ACK, in the order ns-3 applies them:
//! 1. the bytes it newly acknowledges count towards the window's total, and, if it echoes CE,
//!    towards the marked bytes;
//! 2. once per window (the ACK covers a packet sent after the last update): α ← (1 − g)·α +
//!    g·F, F the fraction of the window's bytes that were marked (the paper's fraction of
//!    marked packets, counted in bytes as Linux `tcp_dctcp` counts it; ns-3 counts ACKs, one
//!    per packet);
//! 3. the congestion-window-reduced state (TCP's CWR) ends once the ACK covers a packet sent
//!    after the last cut;
//! 4. an ACK that echoes CE outside CWR cuts the rate by α/2 (the paper's `cwnd ← cwnd ×
//!    (1 − α/2)`), at least to `min_rate`, and enters CWR: at most one cut per window;
//! 5. outside CWR, the first ACK of a window adds `rate_ai` (TCP's one segment per RTT).

use roce_wire::Psn;
use tracing::debug;

use super::control::{Ack, CongestionControl};
use crate::Instant;
use crate::config::DctcpConfig;
use crate::stats::Stats;
use crate::timer::TimerTable;

/// Bits per second in one Mb/s.
const MBPS: f64 = 1e6;

/// One QP's DCTCP sender.
#[derive(Debug, Clone)]
pub(crate) struct Dctcp {
    config: DctcpConfig,
    /// The line rate, bits per second: where the rate starts and the most it reaches.
    line: f64,
    /// The current rate, bits per second.
    rate: f64,
    /// The estimate of the fraction of marked bytes.
    alpha: f64,
    /// The window being measured ends when an ACK covers this PSN (ns-3 `m_lastUpdateSeq`);
    /// `None` before the first ACK.
    window_end: Option<Psn>,
    /// Bytes acknowledged in the window so far.
    acked: u64,
    /// Of them, acknowledged by ACKs that echoed CE.
    marked: u64,
    /// In CWR until an ACK covers this PSN (ns-3 `m_caState`, `m_highSeq`).
    cwr_until: Option<Psn>,
}

impl Dctcp {
    /// A sender at line rate `line_bps`, α at `initial_alpha`.
    pub(crate) fn new(config: DctcpConfig, line_bps: f64) -> Self {
        Self {
            config,
            line: line_bps,
            rate: line_bps,
            alpha: f64::from(config.initial_alpha.min(1024)) / 1024.0,
            window_end: None,
            acked: 0,
            marked: 0,
            cwr_until: None,
        }
    }

    /// g = 1/2^shift_g.
    fn g(&self) -> f64 {
        (-f64::from(self.config.shift_g.min(63))).exp2()
    }

    fn min_rate(&self) -> f64 {
        (f64::from(self.config.min_rate) * MBPS).min(self.line)
    }

    /// Rule 2: the window ends, α takes its fraction of marked bytes.
    fn end_window(&mut self, now: Instant) {
        if self.acked > 0 {
            let f = (self.marked as f64 / self.acked as f64).min(1.0);
            let g = self.g();
            self.alpha = (1.0 - g) * self.alpha + g * f;
            debug!(alpha = self.alpha, f, time = %now, "dctcp alpha update");
        }
        self.acked = 0;
        self.marked = 0;
    }
}

/// `una` has passed `psn`: the ACK covers the packet at `psn`.
fn covers(una: Psn, psn: Psn) -> bool {
    una.distance(psn) > 0
}

impl CongestionControl for Dctcp {
    fn rate_bps(&self) -> Option<f64> {
        Some(self.rate)
    }

    /// ns-3's `VAR_WIN`: the line-rate window (`base_rtt_ns` at line rate) × rate / line rate,
    /// that is `base_rtt_ns` at the current rate.
    fn window_bytes(&self) -> Option<u64> {
        super::rate_window(self.rate, self.config.base_rtt_ns)
    }

    fn alpha(&self, _: Instant) -> f64 {
        self.alpha
    }

    fn on_ack(&mut self, ack: &Ack, _: &mut TimerTable, stats: &mut Stats) {
        // Rule 1.
        self.acked += ack.newly_acked;
        if ack.ecn_echo {
            self.marked += ack.newly_acked;
        }
        // Rule 2; the first ACK starts the first window.
        let new_window = match self.window_end {
            None => true,
            Some(end) if covers(ack.una, end) => {
                self.end_window(ack.now);
                true
            }
            Some(_) => false,
        };
        if new_window {
            self.window_end = Some(ack.next);
        }
        // Rule 3.
        if self.cwr_until.is_some_and(|high| covers(ack.una, high)) {
            self.cwr_until = None;
        }
        // Rule 4.
        if ack.ecn_echo && self.cwr_until.is_none() {
            let old = self.rate;
            self.rate = (self.rate * (1.0 - self.alpha / 2.0)).max(self.min_rate());
            self.cwr_until = Some(ack.next);
            stats.rate_decreases += 1;
            debug!(from = old, rate = self.rate, alpha = self.alpha, time = %ack.now, "dctcp cut");
        }
        // Rule 5.
        if self.cwr_until.is_none() && new_window && self.rate < self.line {
            self.rate = (self.rate + f64::from(self.config.rate_ai) * MBPS).min(self.line);
            stats.rate_increases += 1;
        }
    }
}
