//! The scenario file of hosts on one switch: its TOML schema, its defaults, and the checks that
//! turn it into a [`Scenario`]. Unknown keys are an error, so a misspelt key never silently takes a default;
//! every error names the key it is about (and [`load`] adds the file).
//!
//! Required keys: `hosts`, `duration_ms`, `sample_us` and at least one `[[flows]]` table with
//! `src` and `dst`; inside `[switch.ecn]` all three keys, inside `[switch.pfc]` `xoff_bytes`
//! and `xon_bytes`. Everything else has a default (docs/congestion.md lists them).

use std::ffi::OsStr;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use roce_core::{Duration, LossRecovery, Mtu, NicConfig};
use serde::Deserialize;

use super::FileError;
use super::overrides::{self, Set};
use super::switch_keys::{EcnFile, PfcFile};
use crate::scenario::{Flow, MAX_DURATION, MAX_HOSTS, NicCongestion};
use crate::switch::MarkAt;
use crate::{Scenario, SwitchConfig};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    /// Name for reports and the output directory; default: the file's stem.
    name: Option<String>,
    /// One line on what it shows (for `--list`).
    description: Option<String>,
    /// Required. Hosts on the switch (2 to 254); host i is on port i.
    hosts: usize,
    /// The switch.
    #[serde(default)]
    switch: SwitchFile,
    /// The NICs' congestion control.
    #[serde(default)]
    congestion: CongestionName,
    /// How the NICs' RC QPs recover lost packets.
    #[serde(default)]
    loss_recovery: LossRecoveryName,
    /// PSNs a QP may have unacknowledged: go-back-N's window (`max_unacked_psns`), or
    /// selective repeat's cap (IRN's BDP-FC). Default 128.
    window_packets: Option<u32>,
    /// Path MTU of the flows' QPs, bytes.
    #[serde(default = "default_mtu")]
    mtu: u32,
    /// Bytes per RC WRITE.
    #[serde(default = "default_message_bytes")]
    message_bytes: u32,
    /// WRITEs each flow keeps posted.
    #[serde(default = "default_outstanding")]
    outstanding: usize,
    /// Required. Simulated time of the run (at most 60000).
    duration_ms: u64,
    /// Required. Sampling interval.
    sample_us: u64,
    /// The port whose queue is recorded; default: the destination most flows share.
    bottleneck: Option<usize>,
    /// The summary's means and queue maximum over (summary_from_ms, duration]; default 0.
    #[serde(default)]
    summary_from_ms: u64,
    /// Seed of the switch's marking decisions.
    #[serde(default)]
    seed: u64,
    /// Required, at least one. The flows.
    flows: Vec<FlowFile>,
}

fn default_mtu() -> u32 {
    1024
}

fn default_message_bytes() -> u32 {
    64 * 1024
}

fn default_outstanding() -> usize {
    4
}

/// The `congestion` key (`network.congestion` of a network scenario): the NICs' congestion
/// control, by the name the file gives it.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CongestionName {
    /// `"none"`, the default.
    #[default]
    None,
    /// `"dcqcn"`: DCQCN with NVIDIA's defaults.
    Dcqcn,
    /// `"dcqcn-paper"`: DCQCN with the paper's parameters.
    DcqcnPaper,
    /// `"dctcp"`: DCTCP as HPCC's ns-3 runs it ([`roce_core::DctcpConfig::default`]).
    Dctcp,
    /// `"timely"`: TIMELY with ns-3's parameters ([`roce_core::TimelyConfig::default`]).
    Timely,
    /// `"hpcc"`: HPCC with ns-3's parameters ([`roce_core::HpccConfig::default`]).
    Hpcc,
    /// `"hpcc-pint"`: HPCC-PINT, HPCC with PINT's one value for INT's records
    /// ([`roce_core::HpccConfig::pint`]).
    HpccPint,
    /// `"dcqcn-vwin"`: DCQCN with a window that follows the rate (`run.py --cc dcqcn_vwin`).
    DcqcnVwin,
    /// `"timely-vwin"`: TIMELY with a window that follows the rate (`run.py --cc timely_vwin`).
    TimelyVwin,
}

impl CongestionName {
    /// The congestion control it names.
    pub(crate) fn nic(self) -> NicCongestion {
        match self {
            Self::None => NicCongestion::None,
            Self::Dcqcn => NicCongestion::Dcqcn,
            Self::DcqcnPaper => NicCongestion::DcqcnPaper,
            Self::Dctcp => NicCongestion::Dctcp,
            Self::Timely => NicCongestion::Timely,
            Self::Hpcc => NicCongestion::Hpcc,
            Self::HpccPint => NicCongestion::HpccPint,
            Self::DcqcnVwin => NicCongestion::DcqcnVwin,
            Self::TimelyVwin => NicCongestion::TimelyVwin,
        }
    }

    /// The name, as the file gives it: "none", "dcqcn", "dcqcn-paper", "dctcp", "timely",
    /// "hpcc", "hpcc-pint", "dcqcn-vwin", "timely-vwin".
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Dcqcn => "dcqcn",
            Self::DcqcnPaper => "dcqcn-paper",
            Self::Dctcp => "dctcp",
            Self::Timely => "timely",
            Self::Hpcc => "hpcc",
            Self::HpccPint => "hpcc-pint",
            Self::DcqcnVwin => "dcqcn-vwin",
            Self::TimelyVwin => "timely-vwin",
        }
    }
}

/// The `loss_recovery` key (`network.loss_recovery` of a network scenario): how the NICs'
/// RC QPs recover lost packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossRecoveryName {
    /// `"go-back-n"`, the default: rxe's and the IBTA's.
    #[default]
    GoBackN,
    /// `"selective-repeat"`: IRN-style (`roce_core::LossRecovery::SelectiveRepeat`).
    SelectiveRepeat,
}

impl LossRecoveryName {
    /// Sets `nic`'s loss recovery and, if `window_packets` is given, its window (go-back-N's
    /// `max_unacked_psns`, selective repeat's BDP cap; default the NIC's window); `key` names
    /// the table the keys are in, for errors.
    pub(crate) fn apply(
        self,
        window_packets: Option<u32>,
        nic: &mut NicConfig,
        key: &str,
    ) -> anyhow::Result<()> {
        let window = match window_packets {
            Some(w @ 1..=65_536) => w,
            Some(w) => bail!("{key}window_packets = {w}: from 1 to 65536"),
            None => nic.max_unacked_psns,
        };
        match self {
            Self::GoBackN => nic.max_unacked_psns = window,
            Self::SelectiveRepeat => nic.loss_recovery = LossRecovery::selective_repeat(window),
        }
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchFile {
    /// Line rate of every port (and every NIC), Gb/s.
    #[serde(default = "default_rate")]
    rate_gbps: f64,
    /// Propagation delay of each cable.
    #[serde(default = "default_latency")]
    latency_us: u64,
    /// Buffer per egress port, drop-tail.
    #[serde(default = "default_buffer")]
    buffer_bytes: usize,
    /// RED ECN marking; absent: no marking.
    ecn: Option<EcnFile>,
    /// When marking is decided.
    #[serde(default)]
    mark_at: MarkAtName,
    /// PFC; absent: a lossy fabric.
    pfc: Option<PfcFile>,
}

impl Default for SwitchFile {
    fn default() -> Self {
        Self {
            rate_gbps: default_rate(),
            latency_us: default_latency(),
            buffer_bytes: default_buffer(),
            ecn: None,
            mark_at: MarkAtName::default(),
            pfc: None,
        }
    }
}

fn default_rate() -> f64 {
    10.0
}

fn default_latency() -> u64 {
    1
}

fn default_buffer() -> usize {
    1 << 20
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum MarkAtName {
    #[default]
    Enqueue,
    Dequeue,
}

impl MarkAtName {
    /// The switch's setting of this name.
    pub(super) const fn mark_at(self) -> MarkAt {
        match self {
            Self::Enqueue => MarkAt::Enqueue,
            Self::Dequeue => MarkAt::Dequeue,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowFile {
    /// Required. The sending host.
    src: usize,
    /// Required. The receiving host.
    dst: usize,
    #[serde(default)]
    start_us: u64,
    #[serde(default = "default_dscp")]
    dscp: u8,
    /// Bytes to write; absent: a long flow.
    bytes: Option<u64>,
}

fn default_dscp() -> u8 {
    26
}

/// A scenario as loaded, with what the summary needs beyond [`Scenario`].
#[derive(Debug)]
pub struct Loaded {
    /// The scenario, checked ([`Scenario::validate`] passes).
    pub scenario: Scenario,
    /// The file's `description`: one line on what it shows.
    pub description: Option<String>,
    /// The file's `congestion`, by name.
    pub congestion: CongestionName,
    /// `summary_from_ms`: the summary is of (summary_from, duration].
    pub summary_from: Duration,
}

impl ScenarioFile {
    fn into_loaded(self, stem: &str) -> anyhow::Result<Loaded> {
        let sw = &self.switch;
        if !(sw.rate_gbps.is_finite() && sw.rate_gbps > 0.0 && sw.rate_gbps <= 10_000.0) {
            bail!("switch.rate_gbps = {}: from >0 to 10000", sw.rate_gbps);
        }
        let ecn = sw
            .ecn
            .as_ref()
            .map(|e| e.marking("switch.ecn"))
            .transpose()?;
        let pfc = sw
            .pfc
            .as_ref()
            .map(|p| p.pfc("switch.pfc", false))
            .transpose()?
            .flatten();
        let mtu = Mtu::from_bytes(self.mtu)
            .ok_or_else(|| anyhow!("mtu = {}: one of 256, 512, 1024, 2048, 4096", self.mtu))?;
        self.check_keys()?;
        if self.summary_from_ms >= self.duration_ms {
            bail!(
                "summary_from_ms = {} is not before duration_ms = {}",
                self.summary_from_ms,
                self.duration_ms
            );
        }
        let bottleneck = self
            .bottleneck
            .unwrap_or_else(|| busiest_destination(&self.flows));
        let scenario = Scenario {
            name: self.name.unwrap_or_else(|| stem.to_owned()),
            hosts: self.hosts,
            switch: SwitchConfig {
                bandwidth_bps: (sw.rate_gbps * 1e9).round() as u64,
                latency: Duration::from_micros(sw.latency_us),
                buffer_bytes: sw.buffer_bytes,
                ecn,
                mark_at: sw.mark_at.mark_at(),
                pfc,
                ..SwitchConfig::default()
            },
            congestion: self.congestion.nic(),
            nic: {
                let mut nic = NicConfig::default();
                self.loss_recovery
                    .apply(self.window_packets, &mut nic, "")?;
                nic
            },
            mtu,
            message_bytes: self.message_bytes,
            outstanding: self.outstanding,
            flows: self
                .flows
                .iter()
                .map(|f| Flow {
                    from: f.src,
                    to: f.dst,
                    bytes: f.bytes,
                    start: Duration::from_micros(f.start_us),
                    dscp: f.dscp,
                })
                .collect(),
            duration: Duration::from_millis(self.duration_ms),
            interval: Duration::from_micros(self.sample_us),
            bottleneck,
            seed: self.seed,
        };
        scenario.validate().map_err(|e| anyhow!("{e}"))?;
        Ok(Loaded {
            scenario,
            description: self.description,
            congestion: self.congestion,
            summary_from: Duration::from_millis(self.summary_from_ms),
        })
    }
}

impl ScenarioFile {
    /// The checks of [`Scenario::validate`], said in the file's keys.
    fn check_keys(&self) -> anyhow::Result<()> {
        if !(2..=MAX_HOSTS).contains(&self.hosts) {
            bail!(
                "hosts = {}: from 2 to {MAX_HOSTS} (host i is 198.18.0.(i + 1))",
                self.hosts
            );
        }
        let max_ms = MAX_DURATION.as_millis();
        if self.duration_ms == 0 || u128::from(self.duration_ms) > max_ms {
            bail!(
                "duration_ms = {}: from 1 to {max_ms} (a minute of simulated time)",
                self.duration_ms
            );
        }
        let duration_us = self.duration_ms.saturating_mul(1000);
        if self.sample_us == 0 || self.sample_us > duration_us {
            bail!(
                "sample_us = {}: from 1 to duration_ms x 1000 = {duration_us}",
                self.sample_us
            );
        }
        if duration_us / self.sample_us > 1_000_000 {
            bail!(
                "sample_us = {}: {} samples, over a million (lengthen sample_us)",
                self.sample_us,
                duration_us / self.sample_us
            );
        }
        if let Some(b) = self.bottleneck
            && b >= self.hosts
        {
            bail!("bottleneck = {b}: a port from 0 to {}", self.hosts - 1);
        }
        if self.message_bytes == 0 || self.message_bytes > 1 << 20 {
            bail!("message_bytes = {}: from 1 to 1048576", self.message_bytes);
        }
        if !(1..=64).contains(&self.outstanding) {
            bail!("outstanding = {}: from 1 to 64", self.outstanding);
        }
        if self.flows.is_empty() {
            bail!("flows: none; add at least one [[flows]] table (src, dst)");
        }
        for (i, f) in self.flows.iter().enumerate() {
            for (key, host) in [("src", f.src), ("dst", f.dst)] {
                if host >= self.hosts {
                    bail!(
                        "flows[{i}].{key} = {host}: a host from 0 to {}",
                        self.hosts - 1
                    );
                }
            }
            if f.src == f.dst {
                bail!("flows[{i}]: src and dst are both {}", f.src);
            }
            if f.dscp > 63 {
                bail!("flows[{i}].dscp = {}: from 0 to 63", f.dscp);
            }
        }
        Ok(())
    }
}

/// The destination most flows share (the lowest on a tie).
fn busiest_destination(flows: &[FlowFile]) -> usize {
    let mut best = (0usize, 0usize);
    for f in flows {
        let count = flows.iter().filter(|g| g.dst == f.dst).count();
        if count > best.1 || (count == best.1 && f.dst < best.0) {
            best = (f.dst, count);
        }
    }
    best.0
}

/// Reads and checks the scenario file at `path`, with `sets` applied (`--set`). Errors name the
/// file and the key.
pub fn load(path: &Path, sets: &[Set]) -> Result<Loaded, FileError> {
    read(path, sets).map_err(FileError)
}

fn read(path: &Path, sets: &[Set]) -> anyhow::Result<Loaded> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file: ScenarioFile = overrides::parse(path, &text, sets)?;
    let stem = path
        .file_stem()
        .and_then(OsStr::to_str)
        .unwrap_or("scenario");
    file.into_loaded(stem)
        .with_context(|| format!("{}: not a valid scenario", path.display()))
}
