//! Congestion experiments on a [`Fabric`](crate::Fabric): hosts on one switch, long or sized RC WRITE flows
//! between them, and a time series of what happened — per-flow goodput and congestion-control
//! rate, the bottleneck queue, drops, pauses, CE marks and CNPs — sampled at a fixed interval.
//!
//! A [`Scenario`] describes the run; [`run()`] plays it in virtual time and returns a [`Series`].
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

mod run;
mod series;

use roce_core::{Congestion, DcqcnConfig, DctcpConfig, Duration, HpccConfig, Mtu, TimelyConfig};

use crate::switch::SwitchConfig;

pub use run::{run, run_captured, run_observed};
pub use series::{FlowSeries, Series, jain_index};

#[cfg(test)]
use run::payload_of;

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
    /// DCTCP as HPCC's ns-3 runs it ([`DctcpConfig::default`]).
    Dctcp,
    /// TIMELY with ns-3's parameters ([`TimelyConfig::default`]).
    Timely,
    /// HPCC with ns-3's parameters ([`HpccConfig::default`]).
    Hpcc,
    /// HPCC-PINT: HPCC with ns-3's parameters and PINT's telemetry ([`HpccConfig::pint`]), as
    /// `run.py --cc hpccPint` (log base 1.01, every echo used).
    HpccPint,
    /// DCQCN with NVIDIA's defaults and a window that follows the rate, as `run.py --cc
    /// dcqcn_vwin` (the HPCC paper's "DCQCN+win"): [`VWIN_RTT_NS`] at the rate.
    DcqcnVwin,
    /// TIMELY with ns-3's parameters and a window that follows the rate, as `run.py --cc
    /// timely_vwin` ("TIMELY+win"): [`VWIN_RTT_NS`] at the rate.
    TimelyVwin,
}

/// T of the windowed profiles ([`NicCongestion::DcqcnVwin`], [`NicCongestion::TimelyVwin`]):
/// HPCC's default T ([`roce_core::NS3_BASE_RTT_NS`]), about the largest base RTT of HPCC's fat
/// tree, which ns-3 uses for every window (`GLOBAL_T 1`, `maxRtt` in `third.cc`).
pub const VWIN_RTT_NS: u32 = roce_core::NS3_BASE_RTT_NS;

impl NicCongestion {
    /// The engine's setting.
    pub fn config(self) -> Congestion {
        match self {
            Self::None => Congestion::None,
            Self::Dcqcn => Congestion::Dcqcn(DcqcnConfig::default()),
            Self::DcqcnPaper => Congestion::Dcqcn(DcqcnConfig::paper()),
            Self::Dctcp => Congestion::Dctcp(DctcpConfig::default()),
            Self::Timely => Congestion::Timely(TimelyConfig::default()),
            Self::Hpcc => Congestion::Hpcc(HpccConfig::default()),
            Self::HpccPint => Congestion::Hpcc(HpccConfig {
                pint: true,
                ..HpccConfig::default()
            }),
            Self::DcqcnVwin => Congestion::Dcqcn(DcqcnConfig {
                window_rtt_ns: VWIN_RTT_NS,
                ..DcqcnConfig::default()
            }),
            Self::TimelyVwin => Congestion::Timely(TimelyConfig {
                window_rtt_ns: VWIN_RTT_NS,
                ..TimelyConfig::default()
            }),
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
    /// The NICs' transport settings that a scenario may change: loss recovery
    /// (`loss_recovery`) and the window (`max_unacked_psns`). Line rate and congestion
    /// control come from `switch` and `congestion`.
    pub nic: roce_core::NicConfig,
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
            nic: roce_core::NicConfig::default(),
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

#[cfg(test)]
mod tests;
