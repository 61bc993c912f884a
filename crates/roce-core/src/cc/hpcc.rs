//! HPCC (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019, §3.3 and
//! Algorithm 1) on an RDMA requester, as HPCC's ns-3 simulator runs it
//! (`simulation/src/point-to-point/model/rdma-hw.cc` `HandleAckHp`, `UpdateRateHp`,
//! `FastReactHp`, CC_MODE 3; alibaba-edu/High-Precision-Congestion-Control): a window W and a
//! rate W/T, set from the in-band telemetry each ACK echoes (`roce_wire::int`: per hop, the
//! queue length, the bytes the port has sent, a timestamp and the line rate).
//!
//! The rules, per ACK that echoes INT, in the order ns-3 applies them:
//! 1. the first ACK only records its hops and starts the first RTT (ends when an ACK covers
//!    the first PSN not yet sent);
//! 2. per hop i, against the record of the previous ACK: txRate = Δbytes/Δtime, and
//!    u_i = min(qlen, qlen_prev)/(B·T) + txRate/B (the paper's `MeasureInflight`, ns-3's
//!    qlen term qlen·maxRate/(B·win) with win the line-rate window B_nic·T); U = max u_i, τ
//!    its Δtime;
//! 3. U's EWMA over one T: U ← U·(T − τ)/T + u·τ/T, τ at most T;
//! 4. W = W_c/(U/η) + W_AI when U ≥ η or incStage ≥ maxStage (incStage ← 0), else
//!    W = W_c + W_AI (incStage + 1); W between `min_rate`·T and the line-rate window
//!    (the paper's `ComputeWind`);
//! 5. rate = W/T, and the window W, applied through the seam at once (ns-3's fast react);
//! 6. once per RTT — the ACK covers the PSN that was next when W_c was last set — W_c ← W and
//!    incStage is kept; otherwise W_c and incStage stay.
//!
//! Quantities are kept as rates (W/T), as ns-3 keeps them: W_c is `rate_c`·T.
//!
//! HPCC-PINT (`HpccConfig::pint`; ns-3 `HandleAckHpPint`, `UpdateRateHpPint`, CC_MODE 10) takes
//! the place of rules 2 and 3: U is the echoed PINT value decoded (the path's largest
//! utilisation, each switch's own EWMA: `roce_wire::pint`), with no EWMA at the sender; rules
//! 1 and 4–6 are the same. With `pint_prob` below 1000 an echo is used with that probability,
//! before rule 1 (ns-3's `PINT_PROB`).

use roce_wire::Psn;
use roce_wire::int::{Hop, LINE_RATES, MAX_HOPS, Repr};
use tracing::debug;

use super::control::{Ack, CongestionControl};
use crate::Instant;
use crate::config::HpccConfig;
use crate::splitmix::SplitMix64;
use crate::stats::Stats;
use crate::timer::TimerTable;

/// Bits per second in one Mb/s.
const MBPS: f64 = 1e6;

/// [`LINE_RATES`] as `f64` (each exact).
const LINE_RATES_F64: [f64; 8] = {
    let mut rates = [0.0; 8];
    let mut i = 0;
    while i < LINE_RATES.len() {
        rates[i] = LINE_RATES[i] as f64;
        i += 1;
    }
    rates
};

/// `x` as `f64` for an `x` below 2^63 (a record's deltas and queue are below 2^32): one
/// conversion on x86-64, where a `u64` takes several; the same value, rounded the same way.
#[inline]
fn exact(x: u64) -> f64 {
    debug_assert!(x < 1 << 63);
    x as i64 as f64
}

/// One QP's HPCC sender.
#[derive(Debug, Clone)]
pub(crate) struct Hpcc {
    config: HpccConfig,
    /// The line rate, bits per second: where the rate starts and the most it reaches.
    line: f64,
    /// W/T, bits per second: the current rate (ns-3 `m_rate`).
    rate: f64,
    /// W, bytes: `rate`·T, kept with it (the requester asks for it before each packet).
    window: u64,
    /// W_c/T, bits per second: the reference window of the last full update (ns-3
    /// `hp.m_curRate`).
    rate_c: f64,
    /// U, the EWMA of the normalised in-flight bytes (ns-3 `hp.u`).
    u: f64,
    /// Multiplicative-increase stages so far (ns-3 `hp.m_incStage`).
    inc_stage: u32,
    /// W_c was last set when this PSN was next (ns-3 `m_lastUpdateSeq`); `None` before the
    /// first ACK.
    last_update: Option<Psn>,
    /// The hop records of the previous ACK (ns-3 `hp.hop`).
    hops: [Hop; MAX_HOPS],
    nhop: usize,
    /// PINT's sampling draws (`HpccConfig::pint_prob`).
    draws: SplitMix64,
}

impl Hpcc {
    /// A sender at line rate `line_bps`.
    pub(crate) fn new(config: HpccConfig, line_bps: f64) -> Self {
        Self {
            window: window_bytes(&config, line_bps),
            config,
            line: line_bps,
            rate: line_bps,
            rate_c: line_bps,
            u: 1.0,
            inc_stage: 0,
            last_update: None,
            hops: [Hop::default(); MAX_HOPS],
            nhop: 0,
            draws: SplitMix64::new(0),
        }
    }

    /// The same sender, its PINT sampling drawn from `seed`.
    pub(crate) fn with_draws(mut self, seed: u64) -> Self {
        self.draws = SplitMix64::new(seed);
        self
    }

    /// PINT's sampling: whether this echo is used (ns-3 `HandleAckHpPint`: `rand() % 65536 <
    /// 65536 × PINT_PROB`). Every echo at 1000 and above, with no draw.
    fn sampled(&mut self) -> bool {
        let prob = self.config.pint_prob;
        if prob >= 1000 {
            return true;
        }
        let draw = (self.draws.next() >> 48) as u32;
        draw < prob * 65536 / 1000
    }

    /// T, seconds.
    fn t(&self) -> f64 {
        t(&self.config)
    }

    fn eta(&self) -> f64 {
        f64::from(self.config.eta.max(1)) / 1000.0
    }

    /// Rule 2: U and τ of the hop records of `int` against the previous ACK's, which they
    /// replace; `None` when no hop gave a sample.
    fn measure(&mut self, int: &Repr) -> Option<(f64, u64)> {
        let t = self.t();
        let hops = int.hops();
        let mut sample: Option<(f64, u64)> = None;
        if hops.len() == self.nhop {
            for (hop, prev) in hops.iter().zip(&self.hops) {
                let tau = hop.time_delta(prev);
                if tau == 0 {
                    continue;
                }
                let b = LINE_RATES_F64[usize::from(hop.rate())];
                let tx_rate = exact(hop.bytes_delta(prev)) * 8.0 / (exact(tau) * 1e-9);
                let qlen = exact(hop.qlen_bytes().min(prev.qlen_bytes()));
                let u = qlen * 8.0 / (b * t) + tx_rate / b;
                if sample.is_none_or(|(max, _)| u > max) {
                    sample = Some((u, tau));
                }
            }
        }
        self.nhop = hops.len();
        // The whole array, a fixed copy: the records past `nhop` are never read.
        self.hops = int.hops;
        sample
    }

    /// Rule 4: the window (as a rate) and incStage a full update would set.
    fn compute_wind(&self) -> (f64, u32) {
        let w_ai = f64::from(self.config.rate_ai) * MBPS;
        let c = self.u / self.eta();
        let (rate, stage) = if c >= 1.0 || self.inc_stage >= self.config.max_stage {
            (self.rate_c / c.max(f64::MIN_POSITIVE) + w_ai, 0)
        } else {
            (self.rate_c + w_ai, self.inc_stage + 1)
        };
        let min = (f64::from(self.config.min_rate) * MBPS).min(self.line);
        (rate.clamp(min, self.line), stage)
    }

    /// The utilisation U the sender estimates now.
    #[cfg(test)]
    pub(crate) fn utilisation(&self) -> f64 {
        self.u
    }

    /// W_c/T, bits per second.
    #[cfg(test)]
    pub(crate) fn reference_rate(&self) -> f64 {
        self.rate_c
    }
}

/// T, seconds.
fn t(config: &HpccConfig) -> f64 {
    f64::from(config.base_rtt_ns.max(1)) * 1e-9
}

/// W = rate·T, bytes (ns-3's `VAR_WIN`: the line-rate window × rate / line rate).
fn window_bytes(config: &HpccConfig, rate: f64) -> u64 {
    (rate * t(config) / 8.0) as u64
}

/// `una` has passed `psn`: the ACK covers the packet at `psn`.
fn covers(una: Psn, psn: Psn) -> bool {
    una.distance(psn) > 0
}

impl CongestionControl for Hpcc {
    fn rate_bps(&self) -> Option<f64> {
        Some(self.rate)
    }

    /// W = rate·T (ns-3's `VAR_WIN`: the line-rate window × rate / line rate).
    fn window_bytes(&self) -> Option<u64> {
        Some(self.window)
    }

    fn target_bps(&self) -> Option<f64> {
        Some(self.rate_c)
    }

    /// HPCC's U (its estimate of how loaded the bottleneck is; 1 before the first sample).
    fn alpha(&self, _: Instant) -> f64 {
        self.u
    }

    fn on_ack(&mut self, ack: &Ack, _: &mut TimerTable, stats: &mut Stats) {
        let Some(int) = &ack.int else {
            return;
        };
        if int.pint.is_some() && !self.sampled() {
            return;
        }
        // Rule 1.
        let Some(last) = self.last_update else {
            self.last_update = Some(ack.next);
            if int.pint.is_none() {
                self.measure(int);
            }
            return;
        };
        // Rule 6's test: a full update, or a fast reaction (none without fast react).
        let full = covers(ack.una, last);
        if !full && !self.config.fast_react {
            return;
        }
        // Rules 2 and 3, or PINT's U.
        let sampled = match int.pint {
            Some(value) => {
                self.u = roce_wire::pint::decode(value, self.config.pint_base());
                true
            }
            None => match self.measure(int) {
                Some((u, tau)) => {
                    let t = f64::from(self.config.base_rtt_ns.max(1));
                    let tau = (tau as f64).min(t);
                    self.u = (self.u * (t - tau) + u * tau) / t;
                    true
                }
                None => false,
            },
        };
        if sampled {
            // Rules 4 and 5.
            let (rate, stage) = self.compute_wind();
            if rate < self.rate {
                stats.rate_decreases += 1;
            } else if rate > self.rate {
                stats.rate_increases += 1;
            }
            self.rate = rate;
            self.window = window_bytes(&self.config, rate);
            // Rule 6.
            if full {
                self.rate_c = rate;
                self.inc_stage = stage;
                debug!(rate, u = self.u, time = %ack.now, "hpcc window update");
            }
        }
        if full {
            self.last_update = Some(ack.next);
        }
    }
}
