//! Congestion experiments on a [`Fabric`]: hosts on one switch, long or sized RC WRITE flows
//! between them, and a time series of what happened — per-flow goodput and DCQCN rate, the
//! bottleneck queue, drops, pauses, CE marks and CNPs — sampled at a fixed interval.
//!
//! A [`Scenario`] describes the run; [`run`] plays it in virtual time and returns a [`Series`].
//! Everything is a function of the scenario (its seed included): the same scenario gives the
//! same series, bit for bit. Runs end at [`Scenario::duration`]: DCQCN timers re-arm forever, so
//! "until idle" is no stopping rule.
//!
//! A flow posts RC WRITEs of [`Scenario::message_bytes`] back to back, keeping
//! [`Scenario::outstanding`] of them posted, until its bytes are sent (or forever for a long
//! flow). Its goodput in an interval is the WRITE payload its receiver accepted in sequence in
//! that interval (how far the receiving QP's expected PSN moved, in bytes), so it follows the
//! packets as they land rather than jumping by a whole message when one completes; duplicates
//! and out-of-sequence packets do not count. The bytes of the WRITEs that *completed* (were
//! acknowledged) are counted too, over the whole run ([`FlowSeries::bytes`]).
//!
//! Limits: at most [`MAX_HOSTS`] hosts (their addresses are 198.18.0.1 to 198.18.0.254), at
//! most [`MAX_DURATION`] of simulated time, a million samples, and a memory estimate
//! ([`Scenario::memory_estimate`]) under [`MAX_MEMORY`].

use roce_core::{
    Congestion, DcqcnConfig, Duration, Instant, Mtu, NicConfig, Psn, Qpn, Remote, SendOp, SendWr,
    Sge, WcStatus,
};

use crate::switch::SwitchConfig;
use crate::{Fabric, PairConfig};

/// The NICs' congestion control in a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NicCongestion {
    /// None: requests leave as fast as the window allows, Not-ECT.
    #[default]
    None,
    /// DCQCN with NVIDIA's ConnectX-4+ defaults ([`DcqcnConfig::default`]).
    Dcqcn,
    /// DCQCN with the paper's values ([`DcqcnConfig::paper`]).
    DcqcnPaper,
}

impl NicCongestion {
    /// The engine's setting.
    pub fn config(self) -> Congestion {
        match self {
            Self::None => Congestion::None,
            Self::Dcqcn => Congestion::Dcqcn(DcqcnConfig::default()),
            Self::DcqcnPaper => Congestion::Dcqcn(DcqcnConfig::paper()),
        }
    }
}

/// One flow: RC WRITEs from one host to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// The sending host (its port on the switch).
    pub from: usize,
    /// The receiving host.
    pub to: usize,
    /// Bytes to write; `None` is a long flow that writes until the run ends.
    pub bytes: Option<u64>,
    /// When it starts.
    pub start: Duration,
    /// DSCP of its packets (the switch maps it to a priority; 26 is RoCE's usual, priority 3).
    pub dscp: u8,
}

/// An experiment: a fabric, its flows, how long to run and how often to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// A name, for reports and file names.
    pub name: String,
    /// Hosts on the switch (host i on port i).
    pub hosts: usize,
    /// The switch; its `bandwidth_bps` is also every NIC's line rate.
    pub switch: SwitchConfig,
    /// The NICs' congestion control.
    pub congestion: NicCongestion,
    /// Path MTU of the flows' QPs.
    pub mtu: Mtu,
    /// Bytes per WRITE.
    pub message_bytes: u32,
    /// WRITEs each flow keeps posted.
    pub outstanding: usize,
    /// The flows.
    pub flows: Vec<Flow>,
    /// Simulated time the run lasts.
    pub duration: Duration,
    /// Sampling interval.
    pub interval: Duration,
    /// The switch port whose queue is recorded (the bottleneck).
    pub bottleneck: usize,
    /// Seed of the switch's marking decisions.
    pub seed: u64,
}

impl Default for Scenario {
    /// Two hosts on a default 10 Gb/s switch, no flows, 10 ms sampled every 100 µs, 64 KiB
    /// WRITEs four at a time, path MTU 1024, no congestion control.
    fn default() -> Self {
        Self {
            name: "scenario".into(),
            hosts: 2,
            switch: SwitchConfig::default(),
            congestion: NicCongestion::None,
            mtu: Mtu::Mtu1024,
            message_bytes: 64 * 1024,
            outstanding: 4,
            flows: Vec::new(),
            duration: Duration::from_millis(10),
            interval: Duration::from_micros(100),
            bottleneck: 1,
            seed: 0,
        }
    }
}

/// What is wrong with a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError(pub String);

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

/// The most hosts a scenario has: host i is at 198.18.0.(i + 1), so 254 fit in the last byte.
pub const MAX_HOSTS: usize = 254;

/// The longest simulated time a scenario runs: a minute (a 10 Gb/s flow is about a million
/// packets a second, which a release build simulates in a few seconds of wall time).
pub const MAX_DURATION: Duration = Duration::from_secs(60);

/// The most memory [`Scenario::memory_estimate`] may come to: 2 GiB.
pub const MAX_MEMORY: u64 = 2 << 30;

/// Bytes a sample costs per flow, in the series and in what `roce sim` makes of it (the JSON
/// document, its text, the plot): an upper bound from measured peaks (about 1.5 KiB per flow
/// and sample in a debug build), with room.
const SAMPLE_BYTES_PER_FLOW: u64 = 2048;
/// Bytes a sample costs besides its flows, likewise (about 2 KiB measured).
const SAMPLE_BYTES: u64 = 4096;
/// What a host costs besides its memory region (the NIC, its QPs and queues).
const HOST_BYTES: u64 = 64 << 10;

impl Scenario {
    /// An upper bound of the memory a run takes, bytes: per host its memory region and NIC, the
    /// switch's buffers full on every port, and the samples (in the series and in the JSON a
    /// report makes of them).
    pub fn memory_estimate(&self) -> u64 {
        let hosts = self.hosts as u64;
        let samples = self.duration.as_nanos() / self.interval.as_nanos().max(1);
        let samples = u64::try_from(samples).unwrap_or(u64::MAX);
        let per_sample = SAMPLE_BYTES + SAMPLE_BYTES_PER_FLOW * self.flows.len() as u64;
        hosts
            .saturating_mul(REGION_LEN as u64 + HOST_BYTES)
            .saturating_add(hosts.saturating_mul(self.switch.buffer_bytes as u64))
            .saturating_add(samples.saturating_mul(per_sample))
    }

    /// Checks that hosts, flows and times fit together, and that the run stays within the
    /// limits ([`MAX_HOSTS`], [`MAX_DURATION`], [`MAX_MEMORY`]).
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let err = |s: String| Err(ScenarioError(s));
        if self.hosts < 2 || self.hosts > MAX_HOSTS {
            return err(format!(
                "hosts = {}: from 2 to {MAX_HOSTS} (addresses 198.18.0.1 to 198.18.0.254)",
                self.hosts
            ));
        }
        if self.duration > MAX_DURATION {
            return err(format!(
                "duration {} ms: at most {} ms of simulated time",
                self.duration.as_millis(),
                MAX_DURATION.as_millis()
            ));
        }
        if self.bottleneck >= self.hosts {
            return err(format!(
                "bottleneck = {}: a port from 0 to {}",
                self.bottleneck,
                self.hosts - 1
            ));
        }
        if self.interval.is_zero() || self.duration < self.interval {
            return err("interval must be > 0 and no longer than the duration".into());
        }
        if self.duration.as_nanos() / self.interval.as_nanos() > 1_000_000 {
            return err("more than a million samples: lengthen the interval".into());
        }
        if self.message_bytes == 0 || self.message_bytes as usize > REGION_LEN {
            return err(format!(
                "message_bytes = {}: from 1 to {REGION_LEN}",
                self.message_bytes
            ));
        }
        if self.outstanding == 0 || self.outstanding > 64 {
            return err(format!("outstanding = {}: from 1 to 64", self.outstanding));
        }
        if self.switch.bandwidth_bps == 0 {
            return err("switch bandwidth must be > 0".into());
        }
        let memory = self.memory_estimate();
        if memory > MAX_MEMORY {
            return err(format!(
                "the run would take about {} MiB of memory (hosts x (1 MiB region + buffer) + \
                 samples x flows), over the {} MiB limit: fewer hosts, a smaller buffer, or a \
                 longer sampling interval",
                memory >> 20,
                MAX_MEMORY >> 20
            ));
        }
        for (i, flow) in self.flows.iter().enumerate() {
            if flow.from >= self.hosts || flow.to >= self.hosts || flow.from == flow.to {
                return err(format!(
                    "flow {i}: from {} to {}: two different hosts from 0 to {}",
                    flow.from,
                    flow.to,
                    self.hosts - 1
                ));
            }
            if flow.dscp > 63 {
                return err(format!("flow {i}: dscp {} is over 63", flow.dscp));
            }
        }
        Ok(())
    }
}

/// Bytes of each host's memory region: the WRITEs' source and target.
const REGION_LEN: usize = 1 << 20;

/// One flow's time series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowSeries {
    /// Goodput in each interval, bits per second: the WRITE payload the receiver accepted in
    /// sequence in it.
    pub goodput_bps: Vec<f64>,
    /// DCQCN's current rate at each sample, bits per second; `None` without congestion control.
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

/// What [`run`] recorded. Sample `k` is taken at `times[k]`, the end of interval `k`.
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
    /// Packets the switch forwarded (all ports), over the run: the simulation's work.
    pub switched_packets: u64,
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

/// A flow while it runs.
struct Running {
    qpn: Qpn,
    /// The receiving host's QP.
    peer: Qpn,
    remote: Remote,
    posted: u64,
    completed: u64,
    /// WRITEs it will post in all (`u64::MAX` for a long flow).
    messages: u64,
    /// Bytes of the last message (a sized flow's remainder).
    last_len: u32,
    /// The receiving QP's expected PSN when last looked at.
    epsn: Psn,
    /// Packets the receiving QP accepted in sequence so far.
    delivered_packets: u64,
    /// Their payload at the last sample.
    delivered_at_sample: u64,
}

impl Running {
    /// Catches up with the receiving QP's expected PSN. Between two looks it moves by at most
    /// the packets of the WRITEs outstanding, far less than half the PSN space.
    fn observe(&mut self, fabric: &Fabric, to: usize) {
        if let Ok((_, epsn)) = fabric.nodes[to].nic.qp_psns(self.peer) {
            let moved = epsn.distance(self.epsn);
            if moved > 0 {
                self.delivered_packets += moved.unsigned_abs() as u64;
                self.epsn = epsn;
            }
        }
    }
}

/// WRITE payload in the first `packets` packets of a flow's PSN sequence: its WRITEs are `len`
/// bytes (the last of `messages` is `last_len`), each cut in packets of `mtu` bytes (a 0-byte
/// WRITE is one packet).
fn payload_of(packets: u64, len: u32, last_len: u32, messages: u64, mtu: u32) -> u64 {
    let full = u64::from(len.div_ceil(mtu).max(1));
    let (len, last_len, mtu) = (u64::from(len), u64::from(last_len), u64::from(mtu));
    let before_last = messages.saturating_sub(1);
    let whole = packets / full;
    if whole < before_last {
        return whole * len + ((packets % full) * mtu).min(len);
    }
    let rest = packets - before_last * full;
    before_last * len + (rest * mtu).min(last_len)
}

/// Plays `scenario` in virtual time and records its series.
pub fn run(scenario: &Scenario) -> Result<Series, ScenarioError> {
    run_observed(scenario, |_| {})
}

/// [`run`], calling `progress` with the simulated time reached at each sample (for a progress
/// line; it does not change the run).
pub fn run_observed(
    scenario: &Scenario,
    mut progress: impl FnMut(Duration),
) -> Result<Series, ScenarioError> {
    scenario.validate()?;
    let line_rate = scenario.switch.bandwidth_bps;
    let config = PairConfig {
        seed: scenario.seed,
        mtu: scenario.mtu,
        region_len: REGION_LEN,
        queue_depth: 256,
        nic: NicConfig {
            line_rate_bps: line_rate,
            congestion: scenario.congestion.config(),
            ..NicConfig::default()
        },
        ..PairConfig::default()
    };
    let mut fabric = Fabric::new(scenario.hosts, &config, scenario.switch.clone());
    let len = scenario.message_bytes;
    let mut flows: Vec<Running> = scenario
        .flows
        .iter()
        .map(|flow| {
            let (qpn, peer) = fabric.connect_dscp(flow.from, flow.to, flow.dscp);
            let epsn = fabric.nodes[flow.to]
                .nic
                .qp_psns(peer)
                .map(|(_, epsn)| epsn)
                .unwrap_or_default();
            let target = &fabric.nodes[flow.to].mr;
            let (messages, last_len) = match flow.bytes {
                None => (u64::MAX, len),
                Some(0) => (0, len),
                Some(bytes) => {
                    let rest = (bytes % u64::from(len)) as u32;
                    (
                        bytes.div_ceil(u64::from(len)),
                        if rest == 0 { len } else { rest },
                    )
                }
            };
            Running {
                qpn,
                peer,
                remote: Remote {
                    addr: target.addr(),
                    rkey: target.rkey(),
                },
                posted: 0,
                completed: 0,
                messages,
                last_len,
                epsn,
                delivered_packets: 0,
                delivered_at_sample: 0,
            }
        })
        .collect();
    let mut series = Series {
        name: scenario.name.clone(),
        flows: vec![FlowSeries::default(); flows.len()],
        ..Series::default()
    };
    let end = Instant::ZERO + scenario.duration;
    let mut next_sample = Instant::ZERO + scenario.interval;
    let mut queue_max = 0usize;
    let starts: Vec<Instant> = scenario
        .flows
        .iter()
        .map(|f| Instant::ZERO + f.start)
        .collect();
    let mut fault: Option<String> = None;
    while fabric.now < end {
        let now = fabric.now;
        // Keep each started flow's WRITEs posted.
        for (i, flow) in flows.iter_mut().enumerate() {
            if now < starts[i] {
                continue;
            }
            let from = scenario.flows[i].from;
            while flow.posted < flow.messages
                && flow.posted - flow.completed < scenario.outstanding as u64
            {
                let node = &mut fabric.nodes[from];
                let length = if flow.posted + 1 == flow.messages {
                    flow.last_len
                } else {
                    len
                };
                let sge = Sge {
                    addr: node.mr.addr(),
                    length,
                    lkey: node.mr.lkey(),
                };
                let wr_id = ((i as u64) << 40) | flow.posted;
                let wr = SendWr::new(wr_id, SendOp::RdmaWrite(flow.remote), vec![sge]);
                if let Err(e) = node.nic.post_send(flow.qpn, wr) {
                    return Err(ScenarioError(format!("flow {i}: post_send: {e}")));
                }
                flow.posted += 1;
            }
        }
        // Completions.
        for node in &mut fabric.nodes {
            while let Some(cqe) = node.completion() {
                let i = (cqe.wr_id >> 40) as usize;
                let Some(flow) = flows.get_mut(i) else {
                    continue;
                };
                if cqe.status != WcStatus::Success {
                    fault.get_or_insert(format!("flow {i}: a WRITE failed: {:?}", cqe.status));
                    continue;
                }
                flow.completed += 1;
                let bytes = if flow.completed == flow.messages {
                    u64::from(flow.last_len)
                } else {
                    u64::from(len)
                };
                series.flows[i].bytes += bytes;
                if flow.completed == flow.messages {
                    series.flows[i].finished = Some(now - Instant::ZERO);
                }
            }
        }
        if let Some(fault) = fault {
            return Err(ScenarioError(fault));
        }
        for (i, flow) in flows.iter_mut().enumerate() {
            flow.observe(&fabric, scenario.flows[i].to);
        }
        queue_max = queue_max.max(fabric.switch.queue_bytes(scenario.bottleneck));
        // Samples due.
        while now >= next_sample {
            sample(
                scenario,
                &fabric,
                &mut flows,
                &mut series,
                next_sample,
                queue_max,
            );
            progress(next_sample - Instant::ZERO);
            queue_max = fabric.switch.queue_bytes(scenario.bottleneck);
            next_sample += scenario.interval;
        }
        // Step, but stop at the next sample or flow start so they are taken on time.
        let wake = starts
            .iter()
            .copied()
            .filter(|&s| s > now)
            .chain([next_sample, end])
            .min()
            .unwrap_or(end);
        let mut stepped = false;
        let port = scenario.bottleneck;
        fabric.drive_while(wake, |f| {
            queue_max = queue_max.max(f.switch.queue_bytes(port));
            let moved = stepped;
            stepped = true;
            moved && (f.now >= wake || f.nodes.iter().any(|n| n.nic.completions_waiting(n.cq) > 0))
        });
        if fabric.now == now {
            // Nothing scheduled before `wake`: jump there.
            fabric.now = wake;
            crate::set_sim_time(wake);
        }
    }
    for (i, flow) in flows.iter_mut().enumerate() {
        flow.observe(&fabric, scenario.flows[i].to);
    }
    while next_sample <= end {
        progress(next_sample - Instant::ZERO);
        sample(
            scenario,
            &fabric,
            &mut flows,
            &mut series,
            next_sample,
            queue_max,
        );
        queue_max = fabric.switch.queue_bytes(scenario.bottleneck);
        next_sample += scenario.interval;
    }
    series.retransmitted_packets = fabric
        .nodes
        .iter()
        .map(|n| n.nic.stats().retransmitted_packets)
        .sum();
    series.switched_packets = (0..fabric.nodes.len())
        .map(|port| fabric.switch.stats(port).sent)
        .sum();
    for (i, flow) in flows.iter().enumerate() {
        let node = &fabric.nodes[scenario.flows[i].from];
        if let Ok(state) = node.nic.qp_congestion(flow.qpn) {
            series.flows[i].cnps = state.cnps_received;
        }
    }
    Ok(series)
}

fn sample(
    scenario: &Scenario,
    fabric: &Fabric,
    flows: &mut [Running],
    series: &mut Series,
    at: Instant,
    queue_max: usize,
) {
    let seconds = scenario.interval.as_secs_f64();
    let mtu = scenario.mtu.bytes();
    series.times.push(at - Instant::ZERO);
    for (i, flow) in flows.iter_mut().enumerate() {
        let node = &fabric.nodes[scenario.flows[i].from];
        let state = node.nic.qp_congestion(flow.qpn).unwrap_or_default();
        let delivered = payload_of(
            flow.delivered_packets,
            scenario.message_bytes,
            flow.last_len,
            flow.messages,
            mtu,
        );
        let out = &mut series.flows[i];
        out.goodput_bps
            .push((delivered - flow.delivered_at_sample) as f64 * 8.0 / seconds);
        out.rate_bps.push(state.rate_bps);
        out.delivered_bytes = delivered;
        flow.delivered_at_sample = delivered;
    }
    series
        .queue_bytes
        .push(fabric.switch.queue_bytes(scenario.bottleneck));
    series.queue_max_bytes.push(queue_max);
    let ports = 0..scenario.hosts;
    let sum = |f: fn(&crate::switch::PortStats) -> u64| -> u64 {
        ports.clone().map(|p| f(fabric.switch.stats(p))).sum()
    };
    series.drops.push(sum(|s| s.drops));
    series.pauses.push(sum(|s| s.pauses_sent));
    series.ce_marks.push(sum(|s| s.ce_marked));
    series
        .cnps
        .push(fabric.nodes.iter().map(|n| n.nic.stats().tx_cnps).sum());
}

#[cfg(test)]
mod tests;
