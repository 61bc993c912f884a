//! Queue-length distributions: every switch egress port's queue, sampled at a fixed interval
//! of simulated time into 1 KB bins, as HPCC's `monitor_buffer` samples `egress_bytes` into its
//! `QlenDistribution` (`third.cc`; bin = bytes / 1000). The samples are time-weighted: a queue
//! long for a long time counts often.

use roce_core::{Duration, Instant};

use super::Network;
use super::events::Event;

/// Sampled queue lengths: per switch egress port, how many samples fell in each 1 KB bin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueLengths {
    /// The interval between samples.
    pub every: Duration,
    /// Samples taken (each of every port).
    pub samples: u64,
    /// `(switch, port, bins)`: the port in the switch's neighbour order (HPCC's device index is
    /// `port + 1`), `bins[k]` the samples of `k` to `k + 1` KB (1000 bytes).
    pub ports: Vec<(u32, u16, Vec<u64>)>,
}

impl QueueLengths {
    /// All ports' bins added up.
    pub fn pooled(&self) -> Vec<u64> {
        let mut all = Vec::new();
        for (_, _, bins) in &self.ports {
            if all.len() < bins.len() {
                all.resize(bins.len(), 0);
            }
            for (sum, n) in all.iter_mut().zip(bins) {
                *sum += n;
            }
        }
        all
    }

    /// The `q`-quantile (0 to 1) of the pooled samples, KB (the bin's lower edge); `None`
    /// without samples.
    pub fn quantile_kb(&self, q: f64) -> Option<u64> {
        self.quantiles_kb([q])[0]
    }

    /// [`QueueLengths::quantile_kb`] of each of `qs`, the ports pooled once.
    pub fn quantiles_kb<const N: usize>(&self, qs: [f64; N]) -> [Option<u64>; N] {
        let bins = self.pooled();
        let total: u64 = bins.iter().sum();
        qs.map(|q| {
            if total == 0 {
                return None;
            }
            let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
            let mut seen = 0;
            bins.iter()
                .position(|&n| {
                    seen += n;
                    seen >= rank
                })
                .map(|k| k as u64)
        })
    }
}

impl Network {
    /// The queue-length distributions sampled so far (every
    /// [`NetworkConfig::queue_sample_every`](super::NetworkConfig::queue_sample_every); empty
    /// when it is `None`).
    pub fn queue_lengths(&self) -> &QueueLengths {
        &self.qlen
    }

    /// Schedules the first sample, unless sampling is off or already running.
    pub(super) fn start_sampling(&mut self) {
        if let Some(every) = self.config.queue_sample_every
            && !self.sampling
            && every > Duration::ZERO
        {
            self.sampling = true;
            self.qlen.every = every;
            self.events.push(self.now + every, Event::QueueSample);
        }
    }

    /// Takes one sample of every switch port's queue, and schedules the next.
    pub(super) fn sample_queues(&mut self, now: Instant) {
        let mut i = 0;
        for (node, switch) in self.switches.iter().enumerate() {
            let Some(switch) = switch else { continue };
            for port in 0..switch.port_count() {
                if self.qlen.ports.len() == i {
                    self.qlen.ports.push((node as u32, port as u16, Vec::new()));
                }
                let bins = &mut self.qlen.ports[i].2;
                let kb = switch.queue_bytes(port) / 1000;
                if bins.len() <= kb {
                    bins.resize(kb + 1, 0);
                }
                bins[kb] += 1;
                i += 1;
            }
        }
        self.qlen.samples += 1;
        self.events.push(now + self.qlen.every, Event::QueueSample);
    }
}
