//! Playing a [`Scenario`] in virtual time: its hosts on one switch, its flows' WRITEs, and a sample
//! of every counter each interval.

use std::ops::ControlFlow;

use roce_core::{Duration, Instant, NicConfig, Psn, Qpn, Remote, SendOp, SendWr, Sge, WcStatus};

use super::{FlowSeries, REGION_LEN, Scenario, ScenarioError, Series};
use crate::capture::Capture;
use crate::{Fabric, PairConfig};

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
pub(super) fn payload_of(packets: u64, len: u32, last_len: u32, messages: u64, mtu: u32) -> u64 {
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
    run_observed(scenario, |_| ControlFlow::Continue(()))
}

/// [`run`], calling `progress` with the simulated time reached at each sample (for a progress
/// line). `ControlFlow::Break` stops the run at that sample (a Ctrl-C): the series then ends
/// there, and [`Series::stopped_at`] says when.
pub fn run_observed(
    scenario: &Scenario,
    progress: impl FnMut(Duration) -> ControlFlow<()>,
) -> Result<Series, ScenarioError> {
    run_captured(scenario, None, progress)
}

/// [`run_observed`], writing every packet the hosts send into `capture` (see
/// [`Fabric::capture`]).
pub fn run_captured(
    scenario: &Scenario,
    capture: Option<Capture>,
    mut progress: impl FnMut(Duration) -> ControlFlow<()>,
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
            ..scenario.nic.clone()
        },
        ..PairConfig::default()
    };
    let mut fabric = Fabric::new(scenario.hosts, &config, scenario.switch.clone());
    if let Some(capture) = capture {
        fabric.capture(capture);
    }
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
    let mut end = Instant::ZERO + scenario.duration;
    let mut sampler = Sampler {
        next: Instant::ZERO + scenario.interval,
        queue_max: 0,
    };
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
                let wr = SendWr::new(wr_id, SendOp::RdmaWrite(flow.remote), sge);
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
        sampler.see_queue(&fabric, scenario.bottleneck);
        // Samples due; the observer may stop the run here.
        let went_on = sampler.take_until(
            now,
            scenario,
            &fabric,
            &mut flows,
            &mut series,
            &mut progress,
        );
        if went_on.is_break() {
            // Stopped at the sample the observer broke on: the series ends there.
            series.stopped_at = series.times.last().copied();
            end = series.stopped_at.map_or(now, |at| Instant::ZERO + at);
            break;
        }
        // Step, but stop at the next sample or flow start so they are taken on time.
        let wake = starts
            .iter()
            .copied()
            .filter(|&s| s > now)
            .chain([sampler.next, end])
            .min()
            .unwrap_or(end);
        let mut stepped = false;
        let port = scenario.bottleneck;
        fabric.drive_while(wake, |f| {
            sampler.see_queue(f, port);
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
    // The last samples; a stop asked for now changes nothing more.
    let _ = sampler.take_until(
        end,
        scenario,
        &fabric,
        &mut flows,
        &mut series,
        &mut progress,
    );
    series.retransmitted_packets = fabric
        .nodes
        .iter()
        .map(|n| n.nic.stats().retransmitted_packets)
        .sum();
    series.packet_hops = fabric.packet_hops();
    series.switched_packets = (0..fabric.nodes.len())
        .map(|port| fabric.switch.stats(port).sent)
        .sum();
    for (i, flow) in flows.iter().enumerate() {
        let node = &fabric.nodes[scenario.flows[i].from];
        if let Ok(state) = node.nic.qp_congestion(flow.qpn, end) {
            series.flows[i].cnps = state.cnps_received;
        }
    }
    Ok(series)
}

/// When the next sample is due, and the bottleneck's peak queue in the interval it closes.
struct Sampler {
    next: Instant,
    queue_max: usize,
}

impl Sampler {
    /// Keeps the peak of the queue on `port`.
    fn see_queue(&mut self, fabric: &Fabric, port: usize) {
        self.queue_max = self.queue_max.max(fabric.switch.queue_bytes(port));
    }

    /// Takes every sample due by `until` and tells `progress` of each; the next interval's peak
    /// starts from the queue as it is. Stops at the first sample after which `progress` breaks.
    fn take_until(
        &mut self,
        until: Instant,
        scenario: &Scenario,
        fabric: &Fabric,
        flows: &mut [Running],
        series: &mut Series,
        progress: &mut impl FnMut(Duration) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        while self.next <= until {
            sample(scenario, fabric, flows, series, self.next, self.queue_max);
            let went_on = progress(self.next - Instant::ZERO);
            self.queue_max = fabric.switch.queue_bytes(scenario.bottleneck);
            self.next += scenario.interval;
            went_on?;
        }
        ControlFlow::Continue(())
    }
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
        let state = node.nic.qp_congestion(flow.qpn, at).unwrap_or_default();
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
