//! The time series a run records: per-flow goodput and rate, and the switch's queue, drops,
//! pauses and marks.

use roce_core::Duration;

#[cfg(doc)]
use super::Scenario;

/// One flow's time series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowSeries {
    /// Goodput in each interval, bits per second: the WRITE payload the receiver accepted in
    /// sequence in it.
    pub goodput_bps: Vec<f64>,
    /// The congestion control's current rate at each sample (DCQCN's RC, DCTCP's or TIMELY's
    /// rate), bits per second; `None` without congestion control.
    pub rate_bps: Vec<Option<u64>>,
    /// Bytes of the WRITEs completed (acknowledged to the sender) over the run.
    pub bytes: u64,
    /// WRITE payload the receiver accepted in sequence over the run (what `goodput_bps` sums).
    pub delivered_bytes: u64,
    /// When a sized flow's last WRITE completed.
    pub finished: Option<Duration>,
    /// CNPs its sending QP received.
    pub cnps: u64,
}

/// What [`run`](super::run()) recorded. Sample `k` is taken at `times[k]`, the end of interval `k`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    /// The scenario's name.
    pub name: String,
    /// The sampling instants.
    pub times: Vec<Duration>,
    /// Per flow, in the scenario's order.
    pub flows: Vec<FlowSeries>,
    /// Bytes queued on the bottleneck port at each sample.
    pub queue_bytes: Vec<usize>,
    /// The most bytes queued on the bottleneck port in each interval.
    pub queue_max_bytes: Vec<usize>,
    /// Packets dropped by the switch (all ports), cumulative at each sample.
    pub drops: Vec<u64>,
    /// PAUSE frames the switch sent (all ports), cumulative at each sample.
    pub pauses: Vec<u64>,
    /// Packets the switch marked CE (all ports), cumulative at each sample.
    pub ce_marks: Vec<u64>,
    /// CNPs the NICs sent, cumulative at each sample.
    pub cnps: Vec<u64>,
    /// Packets the NICs sent again (go-back-N), over the run.
    pub retransmitted_packets: u64,
    /// Packets the switch forwarded (all ports), over the run.
    pub switched_packets: u64,
    /// Packets that crossed a link (a host's to the switch, the switch's to a host), over the
    /// run: the simulation's work, in the unit of the network runs.
    pub packet_hops: u64,
    /// Where the run was stopped before its end (its observer broke: a Ctrl-C), if it was.
    pub stopped_at: Option<Duration>,
}

impl Series {
    /// Mean goodput of flow `flow` over samples whose interval ends in `(from, to]`, bits per
    /// second.
    pub fn mean_goodput(&self, flow: usize, from: Duration, to: Duration) -> f64 {
        let values: Vec<f64> = self
            .times
            .iter()
            .zip(&self.flows[flow].goodput_bps)
            .filter(|(t, _)| **t > from && **t <= to)
            .map(|(_, g)| *g)
            .collect();
        if values.is_empty() {
            0.0
        } else {
            values.iter().sum::<f64>() / values.len() as f64
        }
    }

    /// The largest bottleneck queue seen in intervals ending in `(from, to]`, bytes.
    pub fn queue_max(&self, from: Duration, to: Duration) -> usize {
        self.times
            .iter()
            .zip(&self.queue_max_bytes)
            .filter(|(t, _)| **t > from && **t <= to)
            .map(|(_, q)| *q)
            .max()
            .unwrap_or(0)
    }

    /// The last value of a cumulative counter (0 when nothing was sampled).
    pub fn total(counter: &[u64]) -> u64 {
        counter.last().copied().unwrap_or(0)
    }
}

/// Jain's fairness index of `rates`: (Σx)² / (n·Σx²), 1 when all are equal, 1/n when one takes
/// everything (1 for an empty or all-zero set).
pub fn jain_index(rates: &[f64]) -> f64 {
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|x| x * x).sum();
    if squares == 0.0 {
        1.0
    } else {
        sum * sum / (rates.len() as f64 * squares)
    }
}
