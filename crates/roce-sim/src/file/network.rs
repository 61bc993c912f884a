//! The network scenario file: a research-scale run on a multi-switch topology. A scenario file
//! is one of these when it has a `[topology]`, `[workload]` or `[network]` table (or when
//! `--topology`/`--flows` is given); otherwise it is the one-switch kind of [`super::scenario`].
//!
//! ```toml
//! name = "leafspine-websearch"          # optional; default: the file's stem
//! description = "..."                   # optional
//! [topology]                            # required unless --topology FILE
//! kind = "leaf-spine"                   # or "fat-tree" (k), "hpcc-fat"; or file = "topo.txt"
//! leaves = 2
//! spines = 2
//! hosts_per_leaf = 4
//! host_rate_gbps = 100.0
//! fabric_rate_gbps = 100.0
//! delay_us = 1.0
//! [workload]                            # required unless --flows FILE or flows = "FILE"
//! cdf = "websearch"                     # or "fb_hadoop", or the path of an HPCC CDF file
//! load = 0.3
//! duration_us = 200
//! seed = 1
//! [workload.incast]                     # optional
//! senders = 60
//! size_bytes = 500000
//! fraction = 0.02
//! [network]                             # optional; defaults below
//! congestion = "dcqcn"                  # "none", "dcqcn" (NVIDIA defaults), "dcqcn-paper",
//!                                       # "dctcp", "timely", "hpcc", "hpcc-pint",
//!                                       # "dcqcn-vwin", "timely-vwin" (with a window,
//!                                       # as ns-3's)
//! loss_recovery = "go-back-n"           # or "selective-repeat" (IRN-style)
//! window_packets = 512                  # PSNs in flight per QP: go-back-N's window, or IRN's BDP cap
//! ack_timeout = 14                      # the hosts' local ACK timeout, 4.096 us x 2^n (14: 67 ms;
//!                                       # selective repeat's RTO_high, IRN's 320 us is about 6)
//! buffer_bytes = 1048576                # per egress port; with shared_buffer, per switch
//! shared_buffer = false                 # true: one buffer per switch, dynamic PFC thresholds
//! mtu = 1024
//! payload = "bytes"                     # or "lengths": headers only, regions count bytes (speed)
//! mark_at = "enqueue"                   # or "dequeue": when switches decide ECN marks
//! ecn_rate_gbps = 100                   # optional: the rate the marking's thresholds are for;
//!                                       # other ports' scale with their rate (ns-3's KMAX_MAP)
//! ecmp_ports = "packet"                 # or "hpcc": switches hash the ports HPCC's ns-3 gives
//!                                       # each flow of the flow file (flow-by-flow comparison)
//! verb = "write"                        # or "read": each flow's receiver READs its bytes from
//!                                       # the sender (the flow ends at the last response)
//! [network.dcqcn]                       # optional: DcqcnConfig knobs (mlx5 names) to override
//! [network.dctcp]                       # optional: DctcpConfig fields
//! [network.timely]                      # optional: TimelyConfig fields
//! [network.hpcc]                        # optional: HpccConfig fields; of these four tables
//!                                       # only the one of `congestion` applies
//! [network.dctcp.ecn]                   # optional, in any of the four: the marking when that
//!                                       # algorithm runs, in place of [network.ecn]
//! [network.ecn]                         # kmin_bytes, kmax_bytes, pmax (as [switch.ecn])
//! [network.pfc]                         # xoff_bytes, xon_bytes (as [switch.pfc]); with a
//!                                       # shared buffer alpha_shift instead (default 3: 1/8);
//!                                       # enabled = false: no PFC (a sweep's axis)
//! [sweep]                               # optional: the axes of `roce sim sweep` (ignored here)
//! "workload.load" = [0.3, 0.5]
//! [run]
//! until_us = 300                        # no flow starts at or after it; default: the workload's end
//! drain_us = 1000                       # then this long for the flows started to finish
//! qlen_every_us = 10                    # switch queue-length samples (qlen.txt); 0: none
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use roce_core::{Duration, Mtu};
use serde::Deserialize;

use super::FileError;
use super::cc_tables::{self, CcFile};
use super::overrides::{self, Set};
use super::scenario::{CongestionName, LossRecoveryName, MarkAtName};
use super::switch_keys::{EcnFile, PfcFile};
use crate::network::{EcmpPorts, FlowVerb, NetworkConfig, Payload};
use crate::switch::SharedBuffer;
use crate::topology::{LeafSpine, fat_tree, hpcc_fat};
use crate::{Cdf, Topology};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkFile {
    name: Option<String>,
    description: Option<String>,
    topology: Option<TopologyFile>,
    workload: Option<WorkloadFile>,
    /// An HPCC flow file (relative to the scenario) instead of a `[workload]`.
    flows: Option<PathBuf>,
    #[serde(default)]
    network: NetFile,
    #[serde(default)]
    run: RunFile,
    /// The axes of `roce sim sweep` (`super::grid`); a plain run ignores them and runs the
    /// scenario as its other keys give it.
    #[serde(default, rename = "sweep")]
    _sweep: Option<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    kind: Option<String>,
    file: Option<PathBuf>,
    k: Option<u32>,
    leaves: Option<u32>,
    spines: Option<u32>,
    hosts_per_leaf: Option<u32>,
    #[serde(default = "default_rate")]
    host_rate_gbps: f64,
    #[serde(default = "default_rate")]
    fabric_rate_gbps: f64,
    #[serde(default = "default_delay")]
    delay_us: f64,
}

fn default_rate() -> f64 {
    100.0
}

fn default_delay() -> f64 {
    1.0
}

/// The `[workload]` table: Poisson arrivals of flows whose sizes follow a CDF, and incasts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// `"fb_hadoop"`, `"websearch"`, or an HPCC CDF file relative to the scenario.
    pub cdf: String,
    /// The hosts' offered load, a fraction of their line rate (more than 0, at most 1).
    pub load: f64,
    /// How long flows arrive for, microseconds (at least 1).
    pub duration_us: u64,
    /// When the first flows may arrive, microseconds.
    #[serde(default)]
    pub start_us: u64,
    /// Seed of the arrivals and sizes (the incasts' is one more).
    #[serde(default)]
    pub seed: u64,
    /// `[workload.incast]`: incasts on top of the Poisson flows.
    pub incast: Option<IncastFile>,
}

/// The `[workload.incast]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncastFile {
    /// Hosts sending to one receiver in each incast.
    pub senders: usize,
    /// Bytes each sender sends.
    pub size_bytes: u64,
    /// The incasts' bytes, a fraction of the hosts' total capacity (more than 0, at most 1).
    pub fraction: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetFile {
    #[serde(default)]
    congestion: CongestionName,
    #[serde(default)]
    loss_recovery: LossRecoveryName,
    window_packets: Option<u32>,
    /// The hosts' local ACK timeout, IBTA's exponent: 4.096 µs × 2^n.
    ack_timeout: Option<u8>,
    dcqcn: Option<CcFile>,
    dctcp: Option<CcFile>,
    timely: Option<CcFile>,
    hpcc: Option<CcFile>,
    ecn: Option<EcnFile>,
    pfc: Option<PfcFile>,
    buffer_bytes: Option<usize>,
    /// One buffer per switch, shared by its ports, with dynamic PFC thresholds.
    #[serde(default)]
    shared_buffer: bool,
    mtu: Option<u32>,
    #[serde(default)]
    seed: u64,
    #[serde(default)]
    payload: PayloadName,
    /// When the switches decide ECN marks (HPCC's switch: at dequeue).
    #[serde(default)]
    mark_at: MarkAtName,
    /// The line rate, Gb/s, the marking's thresholds are for; a port of another rate marks
    /// at them scaled by its rate (HPCC's ns-3). Absent: one threshold for every port.
    ecn_rate_gbps: Option<f64>,
    /// Which UDP ports the switches' ECMP hash reads.
    #[serde(default)]
    ecmp_ports: EcmpPortsName,
    /// How each flow moves its bytes.
    #[serde(default)]
    verb: VerbName,
}

/// `network.verb` (`roce_sim::network::FlowVerb`).
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum VerbName {
    /// RDMA WRITEs posted by the flow's sender.
    #[default]
    Write,
    /// RDMA READs posted by the flow's receiver.
    Read,
}

/// `network.ecmp_ports` (`roce_sim::network::EcmpPorts`).
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum EcmpPortsName {
    /// The packets' own.
    #[default]
    Packet,
    /// HPCC's ns-3's for each flow of the flow file.
    Hpcc,
}

/// `network.payload`: what packets carry (`roce_sim::network::Payload`).
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum PayloadName {
    /// Every byte, copied and ICRC-checked.
    #[default]
    Bytes,
    /// Lengths only (headers kept, regions count what they receive): for speed.
    Lengths,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunFile {
    until_us: Option<u64>,
    #[serde(default)]
    drain_us: u64,
    /// Queue-length samples of every switch port, microseconds apart (0: none).
    #[serde(default = "default_qlen_every")]
    qlen_every_us: f64,
}

impl Default for RunFile {
    fn default() -> Self {
        Self {
            until_us: None,
            drain_us: 0,
            qlen_every_us: default_qlen_every(),
        }
    }
}

fn default_qlen_every() -> f64 {
    10.0
}

/// Whether a parsed TOML document is a network scenario: it has a `[topology]`, `[workload]` or
/// `[network]` table.
pub fn is_network(doc: &toml::Table) -> bool {
    ["topology", "workload", "network"]
        .iter()
        .any(|k| doc.contains_key(*k))
}

/// A network scenario, checked, before its flows are made.
#[derive(Debug)]
pub struct NetScenario {
    /// The file's `name`, or else its stem.
    pub name: String,
    /// The file's `description`.
    pub description: Option<String>,
    /// The topology.
    pub topology: Topology,
    /// Where the topology came from, for the summary: its `kind`, or its file.
    pub topology_source: String,
    /// The workload and its flow-size CDF; `None` when `--flows` or the file's `flows` gives
    /// the flows.
    pub workload: Option<(WorkloadFile, Cdf)>,
    /// The file's `flows`, resolved against its directory.
    pub flows_file: Option<PathBuf>,
    /// The network: hosts' NICs, switches, payload, queue samples, seed.
    pub config: NetworkConfig,
    /// `network.congestion`, by name.
    pub congestion: CongestionName,
    /// No flow starts at or after it (None: the workload's end, or the last flow's start).
    pub until: Option<Duration>,
    /// After `until`, how long the flows started have to finish.
    pub drain: Duration,
}

/// Reads and checks a network scenario from `text`, the contents of the file at `path` (files it
/// names are relative to its directory), with `sets` applied; `topology_override` is
/// `--topology`, `have_flows` whether `--flows` is given.
pub fn load(
    path: &Path,
    text: &str,
    topology_override: Option<&Path>,
    have_flows: bool,
    sets: &[Set],
) -> Result<NetScenario, FileError> {
    overrides::parse(path, text, sets)
        .and_then(|file| checked(path, file, topology_override, have_flows))
        .map_err(FileError)
}

/// [`load`] of a document already parsed (a sweep's base, `sets` applied), for its checks.
pub fn load_doc(path: &Path, doc: toml::Table, sets: &[Set]) -> Result<NetScenario, FileError> {
    overrides::from_doc(path, doc, sets)
        .and_then(|file| checked(path, file, None, false))
        .map_err(FileError)
}

fn checked(
    path: &Path,
    file: NetworkFile,
    topology_override: Option<&Path>,
    have_flows: bool,
) -> anyhow::Result<NetScenario> {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("network");
    let base = path.parent().unwrap_or(Path::new("."));
    file.check(stem, base, topology_override, have_flows)
        .with_context(|| format!("{}: not a valid network scenario", path.display()))
}

impl NetworkFile {
    fn check(
        self,
        stem: &str,
        base: &Path,
        topology_override: Option<&Path>,
        have_flows: bool,
    ) -> anyhow::Result<NetScenario> {
        let (topology, topology_source) = match (topology_override, &self.topology) {
            (Some(file), _) => (read_hpcc_topology(file)?, file.display().to_string()),
            (None, Some(t)) => t.build(base)?,
            (None, None) => bail!("missing table `topology` (or give --topology FILE)"),
        };
        if self.flows.is_some() && self.workload.is_some() {
            bail!("`flows` and `[workload]` both give the flows: keep one");
        }
        let flows_file = self.flows.as_ref().map(|f| base.join(f));
        let workload = match (have_flows || flows_file.is_some(), self.workload) {
            (true, _) => None,
            (false, None) => {
                bail!("missing table `workload` (or `flows = \"FILE\"`, or --flows FILE)")
            }
            (false, Some(w)) => {
                let cdf = read_cdf(&w.cdf, base)?;
                if !(w.load > 0.0 && w.load <= 1.0) {
                    bail!("workload.load = {}: more than 0, at most 1", w.load);
                }
                if w.duration_us == 0 {
                    bail!("workload.duration_us = 0: at least 1");
                }
                if let Some(i) = &w.incast
                    && !(i.fraction > 0.0 && i.fraction <= 1.0)
                {
                    bail!(
                        "workload.incast.fraction = {}: more than 0, at most 1",
                        i.fraction
                    );
                }
                Some((w, cdf))
            }
        };
        let n = &self.network;
        let mut config = NetworkConfig {
            payload: match n.payload {
                PayloadName::Bytes => Payload::Bytes,
                PayloadName::Lengths => Payload::Lengths,
            },
            ecmp_ports: match n.ecmp_ports {
                EcmpPortsName::Packet => EcmpPorts::Packet,
                EcmpPortsName::Hpcc => EcmpPorts::Hpcc,
            },
            verb: match n.verb {
                VerbName::Write => FlowVerb::Write,
                VerbName::Read => FlowVerb::Read,
            },
            ..NetworkConfig::default()
        };
        if let Some(mtu) = n.mtu {
            config.host.mtu = Mtu::from_bytes(mtu)
                .ok_or_else(|| anyhow!("network.mtu = {mtu}: one of 256, 512, 1024, 2048, 4096"))?;
        }
        let chosen = cc_tables::congestion(
            n.congestion,
            cc_tables::Tables {
                dcqcn: &n.dcqcn,
                dctcp: &n.dctcp,
                timely: &n.timely,
                hpcc: &n.hpcc,
            },
        )?;
        config.host.nic.congestion = chosen.congestion;
        if n.loss_recovery != LossRecoveryName::GoBackN || n.window_packets.is_some() {
            n.loss_recovery
                .apply(n.window_packets, &mut config.host.nic, "network.")?;
        }
        match n.ack_timeout {
            None => {}
            Some(t @ 1..=31) => config.host.timeout = t,
            Some(t) => bail!(
                "network.ack_timeout = {t}: from 1 to 31, the exponent of 4.096 us x 2^n (0, \
                 which IBTA reads as no timeout, would leave a lost last packet lost)"
            ),
        }
        if let Some(b) = n.buffer_bytes {
            if b < 4096 {
                bail!("network.buffer_bytes = {b}: at least 4096");
            }
            config.switch.buffer_bytes = b;
        }
        if n.shared_buffer {
            let mut shared = SharedBuffer::hpcc(config.switch.buffer_bytes);
            if let Some(a) = n.pfc.as_ref().and_then(|p| p.alpha_shift) {
                shared.alpha_shift = a;
            }
            config.switch.shared = Some(shared);
        }
        let marking = n
            .ecn
            .as_ref()
            .map(|e| e.marking("network.ecn"))
            .transpose()?;
        // The chosen algorithm's own marking, if its table gives one, replaces `[network.ecn]`.
        config.switch.ecn = chosen.ecn.or(marking);
        config.switch.pfc = n
            .pfc
            .as_ref()
            .map(|p| p.pfc("network.pfc", n.shared_buffer))
            .transpose()?
            .flatten();
        config.switch.mark_at = n.mark_at.mark_at();
        config.switch.ecn_rate_bps = match n.ecn_rate_gbps {
            None => None,
            Some(g) if g.is_finite() && g > 0.0 && g <= 1e6 => Some((g * 1e9) as u64),
            Some(g) => bail!("network.ecn_rate_gbps = {g}: a line rate, more than 0"),
        };
        config.seed = n.seed;
        let every = self.run.qlen_every_us;
        if !(every.is_finite() && (every == 0.0 || (0.1..=1e6).contains(&every))) {
            bail!("run.qlen_every_us = {every}: 0 (no samples), or from 0.1 to 1000000");
        }
        config.queue_sample_every =
            (every > 0.0).then(|| Duration::from_nanos((every * 1000.0).round() as u64));
        const MAX_RUN_US: u64 = 60_000_000;
        const MAX_WORKLOAD_US: u64 = 86_400_000_000;
        if let Some(u) = self.run.until_us
            && (u == 0 || u > MAX_RUN_US)
        {
            bail!("run.until_us = {u}: from 1 to {MAX_RUN_US} (a minute)");
        }
        // Without `until_us` the run lasts as long as the workload: held to the same minute.
        if let (None, Some((w, _))) = (self.run.until_us, &workload) {
            let ends = w.start_us.saturating_add(w.duration_us);
            if ends > MAX_RUN_US {
                bail!(
                    "workload.start_us + workload.duration_us = {ends}: the workload would run \
                     past {MAX_RUN_US} us (a minute, the longest run); shorten \
                     workload.duration_us, or set run.until_us to cut it"
                );
            }
        }
        if let Some((w, _)) = &workload
            && (w.start_us > MAX_WORKLOAD_US || w.duration_us > MAX_WORKLOAD_US)
        {
            bail!("workload.start_us and workload.duration_us: at most {MAX_WORKLOAD_US} (a day)");
        }
        if self.run.drain_us > MAX_RUN_US {
            bail!(
                "run.drain_us = {}: at most {MAX_RUN_US} (a minute)",
                self.run.drain_us
            );
        }
        Ok(NetScenario {
            name: self.name.unwrap_or_else(|| stem.to_owned()),
            description: self.description,
            topology,
            topology_source,
            workload,
            flows_file,
            config,
            congestion: n.congestion,
            until: self.run.until_us.map(Duration::from_micros),
            drain: Duration::from_micros(self.run.drain_us),
        })
    }
}

fn gbps(key: &str, v: f64) -> anyhow::Result<u64> {
    if !(v.is_finite() && v > 0.0 && v <= 100_000.0) {
        bail!("topology.{key} = {v}: more than 0, at most 100000 (Gb/s)");
    }
    Ok((v * 1e9).round() as u64)
}

impl TopologyFile {
    fn build(&self, base: &Path) -> anyhow::Result<(Topology, String)> {
        if let Some(file) = &self.file {
            if self.kind.is_some() {
                bail!("topology: give `kind` or `file`, not both");
            }
            let path = base.join(file);
            return Ok((read_hpcc_topology(&path)?, path.display().to_string()));
        }
        let Some(kind) = &self.kind else {
            bail!(
                "topology: missing key `kind` (\"fat-tree\", \"leaf-spine\", \"hpcc-fat\") or `file`"
            );
        };
        let host = gbps("host_rate_gbps", self.host_rate_gbps)?;
        let fabric = gbps("fabric_rate_gbps", self.fabric_rate_gbps)?;
        if !(self.delay_us.is_finite() && self.delay_us >= 0.0 && self.delay_us <= 1e6) {
            bail!("topology.delay_us = {}: from 0 to 1000000", self.delay_us);
        }
        let delay = Duration::from_nanos((self.delay_us * 1e3).round() as u64);
        let need = |key: &str, v: Option<u32>| {
            v.ok_or_else(|| anyhow!("topology: missing key `{key}` (kind = \"{kind}\")"))
        };
        let topology = match kind.as_str() {
            "hpcc-fat" => hpcc_fat(),
            "fat-tree" => {
                let k = need("k", self.k)?;
                if k > 64 {
                    bail!("topology.k = {k}: at most 64");
                }
                fat_tree(k, host, fabric, delay).map_err(|e| anyhow!("topology: {e}"))?
            }
            "leaf-spine" => LeafSpine {
                leaves: need("leaves", self.leaves)?,
                spines: need("spines", self.spines)?,
                hosts_per_leaf: need("hosts_per_leaf", self.hosts_per_leaf)?,
                host_rate_bps: host,
                fabric_rate_bps: fabric,
                delay,
            }
            .build()
            .map_err(|e| anyhow!("topology: {e}"))?,
            other => bail!(
                "topology.kind = \"{other}\": one of \"fat-tree\", \"leaf-spine\", \"hpcc-fat\""
            ),
        };
        Ok((topology, kind.clone()))
    }
}

/// Reads a topology in HPCC's format; errors name the file and line.
fn read_hpcc_topology(path: &Path) -> anyhow::Result<Topology> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the topology {}", path.display()))?;
    Topology::from_hpcc(&path.display().to_string(), &text).map_err(|e| anyhow!("{e}"))
}

/// `fb_hadoop`, `websearch`, or an HPCC CDF file (relative to the scenario's directory).
fn read_cdf(name: &str, base: &Path) -> anyhow::Result<Cdf> {
    match name {
        "fb_hadoop" => Ok(Cdf::fb_hadoop()),
        "websearch" => Ok(Cdf::websearch()),
        file => {
            let path = base.join(file);
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "workload.cdf = \"{file}\": not \"fb_hadoop\" or \"websearch\", and cannot \
                     read {}",
                    path.display()
                )
            })?;
            Cdf::parse(&path.display().to_string(), &text).map_err(|e| anyhow!("{e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::MarkAt;

    const SMALL: &str = "[topology]\nkind = \"leaf-spine\"\nleaves = 2\nspines = 1\n\
                         hosts_per_leaf = 2\n[workload]\ncdf = \"websearch\"\nload = 0.3\n\
                         duration_us = 100\n";

    fn load_text(text: &str, sets: &[&str]) -> Result<NetScenario, FileError> {
        let sets: Vec<Set> = sets.iter().map(|s| s.parse().unwrap()).collect();
        load(Path::new("t.toml"), text, None, false, &sets)
    }

    #[test]
    fn flows_write_unless_told_to_read() {
        let s = load_text(SMALL, &[]).unwrap();
        assert_eq!(s.config.verb, FlowVerb::Write);
        let s = load_text(SMALL, &["network.verb=read"]).unwrap();
        assert_eq!(s.config.verb, FlowVerb::Read);
        let err = load_text(SMALL, &["network.verb=send"]).unwrap_err();
        assert!(format!("{err:#}").contains("verb"), "{err:#}");
    }

    #[test]
    fn ecmp_ports_hash_the_packets_own_unless_told_hpccs() {
        let s = load_text(SMALL, &[]).unwrap();
        assert_eq!(s.config.ecmp_ports, EcmpPorts::Packet);
        let s = load_text(SMALL, &["network.ecmp_ports=hpcc"]).unwrap();
        assert_eq!(s.config.ecmp_ports, EcmpPorts::Hpcc);
        let err = load_text(SMALL, &["network.ecmp_ports=random"]).unwrap_err();
        assert!(format!("{err:#}").contains("ecmp_ports"), "{err:#}");
    }

    #[test]
    fn ecn_rate_gbps_scales_the_marking_by_the_port_rate_or_is_refused() {
        let s = load_text(SMALL, &[]).unwrap();
        assert_eq!(
            s.config.switch.ecn_rate_bps, None,
            "one threshold by default"
        );
        let s = load_text(SMALL, &["network.ecn_rate_gbps=100"]).unwrap();
        assert_eq!(s.config.switch.ecn_rate_bps, Some(100_000_000_000));
        for bad in ["0", "-1", "nan"] {
            let err = load_text(SMALL, &[&format!("network.ecn_rate_gbps={bad}")]).unwrap_err();
            assert!(
                format!("{err:#}").contains("network.ecn_rate_gbps"),
                "{err:#}"
            );
        }
    }

    #[test]
    fn mark_at_chooses_when_the_switches_mark() {
        let s = load_text(SMALL, &[]).unwrap();
        assert_eq!(s.config.switch.mark_at, MarkAt::Enqueue);
        let text = format!("{SMALL}[network]\nmark_at = \"dequeue\"\n");
        let s = load_text(&text, &[]).unwrap();
        assert_eq!(s.config.switch.mark_at, MarkAt::Dequeue);
        let s = load_text(SMALL, &["network.mark_at=dequeue"]).unwrap();
        assert_eq!(s.config.switch.mark_at, MarkAt::Dequeue);
        let err = load_text(SMALL, &["network.mark_at=sideways"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("sideways") && err.contains("dequeue"), "{err}");
    }

    #[test]
    fn pfc_enabled_false_takes_pfc_off_and_keeps_the_shared_buffers_alpha() {
        let with = format!(
            "{SMALL}[network]\nshared_buffer = true\n[network.pfc]\nenabled = true\nalpha_shift = 2\n"
        );
        let on = load_text(&with, &[]).unwrap();
        assert!(on.config.switch.pfc.is_some(), "enabled = true: PFC");
        let off = load_text(&with, &["network.pfc.enabled=false"]).unwrap();
        assert_eq!(
            off.config.switch.pfc, None,
            "enabled = false: a lossy fabric"
        );
        let shared = off
            .config
            .switch
            .shared
            .as_ref()
            .expect("the shared buffer");
        assert_eq!(shared.alpha_shift, 2, "still bounds a port's share");
        // Without the key the table is PFC, as before the key existed.
        let plain = format!("{SMALL}[network.pfc]\nxoff_bytes = 65536\nxon_bytes = 32768\n");
        assert!(load_text(&plain, &[]).unwrap().config.switch.pfc.is_some());
        // Off, the other keys are still checked.
        let bad = format!("{SMALL}[network.pfc]\nenabled = false\nxoff_bytes = 1\nxon_bytes = 2\n");
        let err = format!("{:#}", load_text(&bad, &[]).unwrap_err());
        assert!(err.contains("xon_bytes 2 is above xoff_bytes 1"), "{err}");
    }

    #[test]
    fn ack_timeout_sets_the_hosts_timer_or_is_refused() {
        assert_eq!(
            load_text(SMALL, &[]).unwrap().config.host.timeout,
            14,
            "67 ms"
        );
        let s = load_text(SMALL, &["network.ack_timeout=8"]).unwrap();
        assert_eq!(s.config.host.timeout, 8);
        for bad in ["0", "32"] {
            let err = load_text(SMALL, &[&format!("network.ack_timeout={bad}")]).unwrap_err();
            assert!(
                format!("{err:#}").contains("network.ack_timeout"),
                "{err:#}"
            );
        }
    }
}
