//! One description of a device — its address, backend, MTU, congestion control, capture — from
//! which it is opened: the `roce` tools build it from their flags (the enums are clap value
//! enums with the `clap` feature), roce-verbs from the environment `roce exec` sets
//! ([`DeviceSpec::from_env`]), and `roce exec` writes that environment ([`DeviceSpec::env`]).
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `ROCE_VERBS_IP` | the NIC's IPv4 or IPv6 address: its GID 1 (`::ffff:a.b.c.d` for IPv4, the address itself for IPv6), its UDP socket | none: no device |
//! | `ROCE_VERBS_BACKEND` | `udp` (unprivileged socket on port 4791) or `raw` (frames on `ROCE_VERBS_DEV`) | `udp` |
//! | `ROCE_VERBS_DEV` | interface of the raw backend | none |
//! | `ROCE_VERBS_MTU` | the port's active (path) MTU: 256, 512, 1024, 2048 or 4096 | 1024, rxe's on a 1500-byte netdev |
//! | `ROCE_VERBS_PCAP` | write the NIC's packets to this pcap | none |
//! | `ROCE_VERBS_SNAPLEN` | keep at most this many bytes of each packet in the pcap (tcpdump's `-s`; 0: whole packets) | 0 |
//! | `ROCE_VERBS_CC` | congestion control: `none`, `dcqcn` (NVIDIA's defaults), `dcqcn-paper`, `dctcp`, `timely`, `hpcc` or `hpcc-pint` | `none` |
//! | `ROCE_VERBS_CC_PARAMS` | the algorithm's parameters over its defaults, `KEY=VALUE` pairs separated by commas, named as the fields of its configuration and a network scenario's `[network.ALGO]` table (`base_rtt_ns=400000,min_rate=10` for `hpcc`) | none |
//! | `ROCE_VERBS_LOSS_RECOVERY` | how RC QPs recover lost packets: `go-back-n` (rxe's) or `selective-repeat` (IRN-style; both ends must use it) | `go-back-n` |
//! | `ROCE_VERBS_LINE_RATE` | the port's line rate in Gb/s (where DCQCN starts) | 100 |
//! | `ROCE_VERBS_LOSS` | drop this fraction (0 to 1) of received datagrams | 0 |
//! | `ROCE_VERBS_BUSY_POLL` | `1`: the NIC's thread never sleeps (one busy core, lower latency) | `0` |
//! | `ROCE_VERBS_NO_GSO` | `1`: the UDP backend sends one datagram per system call | `0` |
//! | `ROCE_VERBS_AGENT` | the UDP backend shares the address with every process on it, through the address's agent, this program's `agent` command (`roce`) | none: the process's NIC is its own |

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use roce_core::{
    Congestion, DcqcnConfig, DctcpConfig, HpccConfig, LossRecovery, Mtu, NicConfig, ParamError,
    TimelyConfig,
};
use roce_wire::ROCE_V2_UDP_PORT as PORT;

use crate::backend::BindError;
use crate::backend::raw::RawBackend;
use crate::backend::udp::{Interface, UdpBackend};
use crate::{Device, DeviceConfig, DeviceHandle, SnapLen, Tap};

/// Packets a QP of a device's NIC sends in a row when its turn comes
/// (`NicConfig::tx_burst_packets`): 64 KiB at MTU 4096. One ACK request covers the burst, and
/// room in the NIC's budget of unacknowledged packets is granted a burst at a time: with 1000
/// QPs writing over a veth, turns of one packet were acknowledged 222–266 k times for 320 k
/// packets, bursts 20 k (docs/benchmarks.md).
pub const TX_BURST_PACKETS: u32 = 16;
const _: () = assert!(
    TX_BURST_PACKETS > 1,
    "a burst is more than the engine's default"
);

/// See the module's table.
pub const ENV_IP: &str = "ROCE_VERBS_IP";
/// See the module's table.
pub const ENV_BACKEND: &str = "ROCE_VERBS_BACKEND";
/// See the module's table.
pub const ENV_DEV: &str = "ROCE_VERBS_DEV";
/// See the module's table.
pub const ENV_MTU: &str = "ROCE_VERBS_MTU";
/// See the module's table.
pub const ENV_PCAP: &str = "ROCE_VERBS_PCAP";
/// See the module's table.
pub const ENV_SNAPLEN: &str = "ROCE_VERBS_SNAPLEN";
/// See the module's table.
pub const ENV_CC: &str = "ROCE_VERBS_CC";
/// See the module's table.
pub const ENV_CC_PARAMS: &str = "ROCE_VERBS_CC_PARAMS";
/// See the module's table.
pub const ENV_LOSS_RECOVERY: &str = "ROCE_VERBS_LOSS_RECOVERY";
/// See the module's table.
pub const ENV_LINE_RATE: &str = "ROCE_VERBS_LINE_RATE";
/// See the module's table.
pub const ENV_LOSS: &str = "ROCE_VERBS_LOSS";
/// See the module's table.
pub const ENV_BUSY_POLL: &str = "ROCE_VERBS_BUSY_POLL";
/// See the module's table.
pub const ENV_NO_GSO: &str = "ROCE_VERBS_NO_GSO";
/// See the module's table.
pub const ENV_AGENT: &str = "ROCE_VERBS_AGENT";

/// How the NIC reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum BackendKind {
    /// A UDP socket on `<ip>:4791`: no privileges; every packet leaves from port 4791; received
    /// ICRCs from peers with non-zero IPv4 IDs (rxe) cannot be checked in full.
    Udp,
    /// Whole Ethernet frames on --dev (needs CAP_NET_RAW): per-QP source ports, DSCP/ECN, every
    /// ICRC checked; answers ARP for --ip, which should not be a kernel address of the host.
    Raw,
}

impl BackendKind {
    /// Its name in flags and in `ROCE_VERBS_BACKEND`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Raw => "raw",
        }
    }
}

/// Which congestion control every QP runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Cc {
    /// None, as rxe: requests go out Not-ECT and as fast as the window allows.
    None,
    /// DCQCN with NVIDIA's ConnectX defaults: requests carry ECT(0), CE-marked requests are
    /// answered with CNPs, and CNPs cut the sender's rate.
    Dcqcn,
    /// DCQCN with the SIGCOMM 2015 paper's parameters.
    DcqcnPaper,
    /// DCTCP as HPCC's ns-3 runs it: requests carry ECT(0), ACKs of CE-marked requests carry
    /// BECN, and those cut the sender's rate and window by α/2 once per window.
    Dctcp,
    /// TIMELY with ns-3's parameters: the sender's rate follows the RTT of its ACKs;
    /// requests go out Not-ECT.
    Timely,
    /// HPCC with ns-3's parameters: requests carry an INT header after the BTH that switches
    /// stamp and ACKs echo; the sender's window and rate follow the path's utilisation. Both
    /// ends must run it (rxe does not parse the header).
    Hpcc,
    /// HPCC-PINT: HPCC whose requests carry PINT's 4-byte header, which switches raise to
    /// their utilisation (`roce switch --pint`) and ACKs echo. Both ends must run it.
    HpccPint,
}

impl Cc {
    /// Its name in flags and in `ROCE_VERBS_CC`.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Dcqcn => "dcqcn",
            Self::DcqcnPaper => "dcqcn-paper",
            Self::Dctcp => "dctcp",
            Self::Timely => "timely",
            Self::Hpcc => "hpcc",
            Self::HpccPint => "hpcc-pint",
        }
    }

    /// The engine's configuration of it.
    pub fn congestion(self) -> Congestion {
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
        }
    }
}

/// One of the congestion control's parameters, `KEY=VALUE` (`--cc-param`, and one of the
/// comma-separated pairs of `ROCE_VERBS_CC_PARAMS`): the name of a field of the algorithm's
/// configuration ([`Congestion::set_param`]) and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CcParam {
    /// The parameter's name.
    pub key: String,
    /// Its value, as text.
    pub value: String,
}

impl std::str::FromStr for CcParam {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() && !value.trim().is_empty() => Ok(Self {
                key: key.trim().to_owned(),
                value: value.trim().to_owned(),
            }),
            _ => Err(format!(
                "{text:?}: a parameter is KEY=VALUE, such as base_rtt_ns=400000"
            )),
        }
    }
}

impl fmt::Display for CcParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// How every RC QP of the NIC recovers lost packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Recovery {
    /// Go-back-N, as rxe and the IBTA specification: the responder drops what arrives out of
    /// sequence after one NAK, the requester sends everything again from there.
    #[default]
    GoBackN,
    /// Selective repeat as IRN does it: the responder keeps what arrives out of sequence and
    /// NACKs what is missing, the requester sends again only that, and a QP has at most the
    /// engine's window of packets unacknowledged (its BDP cap). Both ends must run it: rxe
    /// and hardware RNICs read its NACKs as go-back-N's.
    SelectiveRepeat,
}

impl Recovery {
    /// Its name in flags and in `ROCE_VERBS_LOSS_RECOVERY`.
    pub fn name(self) -> &'static str {
        match self {
            Self::GoBackN => "go-back-n",
            Self::SelectiveRepeat => "selective-repeat",
        }
    }

    /// The engine's configuration of it: selective repeat's cap in flight is the engine's
    /// window (`NicConfig::max_unacked_psns`), IRN's RTO_low 100 µs.
    pub fn loss_recovery(self) -> LossRecovery {
        match self {
            Self::GoBackN => LossRecovery::GoBackN,
            Self::SelectiveRepeat => {
                LossRecovery::selective_repeat(NicConfig::default().max_unacked_psns)
            }
        }
    }
}

/// A device to open.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSpec {
    /// The NIC's address, IPv4 or IPv6.
    pub ip: IpAddr,
    /// How it reaches the network.
    pub backend: BackendKind,
    /// The raw backend's interface.
    pub dev: Option<String>,
    /// The largest path MTU its QPs may use; `None`: the engine's (4096).
    pub mtu: Option<Mtu>,
    /// Congestion control on every QP.
    pub cc: Cc,
    /// Its parameters over the algorithm's defaults, in order ([`DeviceSpec::congestion`]).
    pub cc_params: Vec<CcParam>,
    /// How every RC QP recovers lost packets.
    pub recovery: Recovery,
    /// The port's line rate, bits per second: where the congestion control's rate starts.
    pub line_rate_bps: u64,
    /// Fraction of received datagrams dropped at random (0 to 1), to show recovery at work.
    pub loss: f64,
    /// The device never sleeps ([`DeviceConfig::busy_poll`]).
    pub busy_poll: bool,
    /// The UDP backend sends one datagram per system call (no segmentation offload).
    pub no_gso: bool,
    /// Write every packet sent and received to this pcap.
    pub pcap: Option<PathBuf>,
    /// Bytes of each packet the capture keeps (0: whole packets).
    pub snaplen: u32,
    /// The UDP backend: the interface that holds `ip`, whose IPv6 link-local address (GID 0,
    /// as rxe's) carries traffic too ([`crate::backend::udp::interface_of`]). `None`: the NIC
    /// sends and receives on `ip` alone.
    pub link_local: Option<Interface>,
    /// The UDP backend: share the address with every other process on it ([`crate::share`]),
    /// through the address's agent, `AGENT agent --ip IP` (the `roce` program). `None`: the NIC
    /// is this process's alone, and a second one on the address fails to bind.
    pub agent: Option<PathBuf>,
}

impl DeviceSpec {
    /// A UDP device at `ip` with the defaults: no congestion control, 100 Gb/s, no capture.
    pub fn new(ip: IpAddr) -> Self {
        Self {
            ip,
            backend: BackendKind::Udp,
            dev: None,
            mtu: None,
            cc: Cc::None,
            cc_params: Vec::new(),
            recovery: Recovery::GoBackN,
            line_rate_bps: 100_000_000_000,
            loss: 0.0,
            busy_poll: false,
            no_gso: false,
            pcap: None,
            snaplen: 0,
            link_local: None,
            agent: None,
        }
    }

    /// Reads a device from the variables of the module's table, through `get` (the process
    /// environment, or a map in tests). `Ok(None)`: no address given, so no device. The MTU
    /// defaults to 1024, rxe's on a 1500-byte netdev.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, EnvError> {
        let Some(ip) = get(ENV_IP) else {
            return Ok(None);
        };
        let ip: IpAddr = ip.trim().parse().map_err(|_| {
            EnvError::new(
                ENV_IP,
                ip.clone(),
                "an IPv4 or IPv6 address such as 127.0.0.1 or ::1",
            )
        })?;
        let mut spec = Self::new(ip);
        spec.backend = match get(ENV_BACKEND).as_deref() {
            None | Some("udp") => BackendKind::Udp,
            Some("raw") => BackendKind::Raw,
            Some(other) => return Err(EnvError::new(ENV_BACKEND, other, "udp or raw")),
        };
        spec.dev = get(ENV_DEV).filter(|d| !d.is_empty());
        if spec.backend == BackendKind::Raw && spec.dev.is_none() {
            let expected = "an interface name (the raw backend needs one)";
            return Err(EnvError::new(ENV_DEV, "", expected));
        }
        spec.mtu = Some(match get(ENV_MTU) {
            None => Mtu::Mtu1024,
            Some(m) => m
                .trim()
                .parse::<u32>()
                .ok()
                .and_then(Mtu::from_bytes)
                .ok_or_else(|| EnvError::new(ENV_MTU, &m, "256, 512, 1024, 2048 or 4096"))?,
        });
        spec.cc = match get(ENV_CC).as_deref() {
            None | Some("none") => Cc::None,
            Some("dcqcn") => Cc::Dcqcn,
            Some("dcqcn-paper") => Cc::DcqcnPaper,
            Some("dctcp") => Cc::Dctcp,
            Some("timely") => Cc::Timely,
            Some("hpcc") => Cc::Hpcc,
            Some("hpcc-pint") => Cc::HpccPint,
            Some(other) => {
                return Err(EnvError::new(
                    ENV_CC,
                    other,
                    "none, dcqcn, dcqcn-paper, dctcp, timely, hpcc or hpcc-pint",
                ));
            }
        };
        if let Some(params) = get(ENV_CC_PARAMS) {
            let expected = "KEY=VALUE pairs separated by commas, such as base_rtt_ns=400000";
            spec.cc_params = params
                .split(',')
                .filter(|p| !p.trim().is_empty())
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|_| EnvError::new(ENV_CC_PARAMS, &params, expected))?;
            if let Err(err) = spec.congestion() {
                return Err(EnvError::new(ENV_CC_PARAMS, params, err.to_string()));
            }
        }
        spec.recovery = match get(ENV_LOSS_RECOVERY).as_deref() {
            None | Some("go-back-n") => Recovery::GoBackN,
            Some("selective-repeat") => Recovery::SelectiveRepeat,
            Some(other) => {
                let expected = "go-back-n or selective-repeat";
                return Err(EnvError::new(ENV_LOSS_RECOVERY, other, expected));
            }
        };
        if let Some(r) = get(ENV_LINE_RATE) {
            spec.line_rate_bps = match r.trim().parse::<f64>() {
                Ok(g) if g > 0.0 && g <= 10_000.0 => (g * 1e9) as u64,
                _ => {
                    let expected = "Gb/s, above 0 and at most 10000";
                    return Err(EnvError::new(ENV_LINE_RATE, r, expected));
                }
            };
        }
        if let Some(l) = get(ENV_LOSS) {
            spec.loss = match l.trim().parse::<f64>() {
                Ok(f) if (0.0..=1.0).contains(&f) => f,
                _ => return Err(EnvError::new(ENV_LOSS, l, "a fraction from 0 to 1")),
            };
        }
        if let Some(s) = get(ENV_SNAPLEN) {
            spec.snaplen = s
                .trim()
                .parse::<u32>()
                .map_err(|_| EnvError::new(ENV_SNAPLEN, &s, "bytes, or 0 for whole packets"))?;
        }
        let flag = |var: &'static str| match get(var).as_deref() {
            None | Some("0") | Some("") => Ok(false),
            Some("1") => Ok(true),
            Some(other) => Err(EnvError::new(var, other, "0 or 1")),
        };
        spec.busy_poll = flag(ENV_BUSY_POLL)?;
        spec.no_gso = flag(ENV_NO_GSO)?;
        spec.pcap = get(ENV_PCAP).filter(|p| !p.is_empty()).map(PathBuf::from);
        spec.agent = get(ENV_AGENT).filter(|p| !p.is_empty()).map(PathBuf::from);
        Ok(Some(spec))
    }

    /// The variables [`DeviceSpec::from_env`] reads this device back from (the interface of
    /// `link_local` is not among them: the reader finds it from the address).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let flag = |on: bool| if on { "1" } else { "0" }.to_owned();
        let mut vars = vec![
            (ENV_IP, self.ip.to_string()),
            (ENV_BACKEND, self.backend.name().to_owned()),
            (ENV_CC, self.cc.name().to_owned()),
            (ENV_LOSS_RECOVERY, self.recovery.name().to_owned()),
            (ENV_LINE_RATE, (self.line_rate_bps as f64 / 1e9).to_string()),
            (ENV_LOSS, self.loss.to_string()),
            (ENV_BUSY_POLL, flag(self.busy_poll)),
            (ENV_NO_GSO, flag(self.no_gso)),
        ];
        if let Some(mtu) = self.mtu {
            vars.push((ENV_MTU, mtu.bytes().to_string()));
        }
        if !self.cc_params.is_empty() {
            let params: Vec<String> = self.cc_params.iter().map(CcParam::to_string).collect();
            vars.push((ENV_CC_PARAMS, params.join(",")));
        }
        if let Some(dev) = &self.dev {
            vars.push((ENV_DEV, dev.clone()));
        }
        if let Some(pcap) = &self.pcap {
            vars.push((ENV_PCAP, pcap.display().to_string()));
            vars.push((ENV_SNAPLEN, self.snaplen.to_string()));
        }
        if let Some(agent) = &self.agent {
            vars.push((ENV_AGENT, agent.display().to_string()));
        }
        vars
    }

    /// The runtime a device of this spec runs on when it has a thread of its own: a
    /// current-thread runtime that, busy polling, looks at the sockets at every tick (tokio's
    /// default is every 61 ticks, or when nothing else is to do — which, busy polling, never
    /// comes).
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        runtime(self.busy_poll)
    }

    /// The congestion control, its parameters set over the algorithm's defaults; the first
    /// parameter the algorithm does not take, or whose value does not parse, is refused.
    pub fn congestion(&self) -> Result<Congestion, ParamError> {
        let mut congestion = self.cc.congestion();
        for p in &self.cc_params {
            congestion.set_param(&p.key, &p.value)?;
        }
        Ok(congestion)
    }

    /// The engine's settings for this device (with the engine's default seed): its QPs send
    /// in bursts of [`TX_BURST_PACKETS`]. A parameter [`DeviceSpec::congestion`] refuses leaves
    /// the algorithm's defaults here; opening such a device ([`DeviceSpec::config`]) and
    /// reading one from the environment refuse it.
    pub fn nic_config(&self) -> NicConfig {
        NicConfig {
            addrs: vec![self.ip],
            max_mtu: self.mtu.unwrap_or(NicConfig::default().max_mtu),
            line_rate_bps: self.line_rate_bps,
            congestion: self.congestion().unwrap_or_else(|_| self.cc.congestion()),
            loss_recovery: self.recovery.loss_recovery(),
            tx_burst_packets: TX_BURST_PACKETS,
            ..NicConfig::default()
        }
    }

    /// The device's configuration: the engine's settings, a seed from the operating system
    /// ([`DeviceConfig::new`]), and the capture file created.
    /// A NIC that shares its address appends to the capture the other processes write too
    /// ([`Tap::append`]).
    pub fn config(&self) -> Result<DeviceConfig, OpenError> {
        self.congestion().map_err(OpenError::CcParam)?;
        let mut config = DeviceConfig::new(self.ip);
        config.nic = NicConfig {
            seed: config.nic.seed,
            ..self.nic_config()
        };
        config.rx_loss = self.loss;
        config.busy_poll = self.busy_poll;
        if let Some(path) = &self.pcap {
            let snaplen = SnapLen::new(self.snaplen);
            let tap = if self.shares() {
                Tap::append(path, true, snaplen)
            } else {
                Tap::create(path, true, snaplen)
            };
            config.tap = Some(tap.map_err(|source| OpenError::Capture {
                path: path.clone(),
                source,
            })?);
        }
        Ok(config)
    }

    /// Whether the NIC shares its address with other processes (a UDP NIC with an agent).
    pub fn shares(&self) -> bool {
        self.backend == BackendKind::Udp && self.agent.is_some()
    }

    /// Opens the device on the current tokio runtime. An IPv4 NIC whose GID 0's link-local
    /// address cannot be bound starts without it: [`Opened::link_local_unbound`] says why.
    pub fn open(&self) -> Result<Opened, OpenError> {
        let mut config = self.config()?;
        let ip = self.ip;
        match self.backend {
            BackendKind::Udp if self.shares() => match self.open_shared(config) {
                // No agent to be had (its program cannot run here, no Unix sockets): the NIC is
                // this process's own, as with `--private-nic`, and says so.
                Err(OpenError::Agent(err)) => {
                    let why = format!(
                        "cannot share {} with other processes ({err}): this process's NIC is its own",
                        self.ip
                    );
                    tracing::warn!("{why}");
                    let mut opened = Self {
                        agent: None,
                        ..self.clone()
                    }
                    .open()?;
                    opened.not_shared = Some(why);
                    Ok(opened)
                }
                other => other,
            },
            BackendKind::Udp => {
                let (backend, link_local_unbound) = self.udp_backend(&mut config.nic.addrs)?;
                let backend = if self.no_gso {
                    backend.without_gso()
                } else {
                    backend
                };
                Ok(Opened {
                    device: Device::spawn(config, backend),
                    link_local_unbound,
                    not_shared: None,
                })
            }
            BackendKind::Raw => {
                let dev = self.dev.clone().ok_or(OpenError::NoInterface)?;
                let backend =
                    RawBackend::open(&dev, ip).map_err(|source| OpenError::Raw { dev, source })?;
                Ok(Opened {
                    device: Device::spawn(config, backend),
                    link_local_unbound: None,
                    not_shared: None,
                })
            }
        }
    }

    /// [`DeviceSpec::open`] of a UDP NIC that shares its address: a member of the address's
    /// agent, whose slot its engine names its objects in, over the sockets the agent bound.
    fn open_shared(&self, mut config: DeviceConfig) -> Result<Opened, OpenError> {
        use crate::share::{Layout, member};
        let agent = self
            .agent
            .as_deref()
            .expect("open_shared is for a spec with an agent");
        let layout = Layout::of(self.ip, self.link_local.as_ref());
        let joined = member::join(self.ip, agent).map_err(|err| self.join_error(&layout, err))?;
        config.nic.slot = Some(joined.member.slot());
        let mut link_local_unbound = None;
        match (&layout, &joined.link_local) {
            (Layout::Interface(..), _) | (Layout::WithLinkLocal(..), Some(_)) => {
                let ll = self.link_local.as_ref().and_then(|i| i.link_local);
                config.nic.addrs.extend(ll.map(IpAddr::V6));
            }
            (Layout::WithLinkLocal(_, ll, _), None) => {
                let ifname = self.link_local.as_ref().map_or("", |i| i.name.as_str());
                let err = joined
                    .link_local_error
                    .unwrap_or_else(|| std::io::Error::other("not bound"));
                let why = link_local_refusal(*ll, ifname, &err);
                tracing::info!("GID 0 carries no traffic: {why}");
                link_local_unbound = Some(why);
            }
            (Layout::Address(_), _) => {}
        }
        let ll = joined
            .link_local
            .map(|socket| (socket, layout.link_local_scope().unwrap_or(0)));
        let backend = UdpBackend::from_sockets(joined.first, layout.first_ifindex(), ll)
            .map_err(OpenError::Agent)?;
        let backend = if self.no_gso {
            backend.without_gso()
        } else {
            backend
        };
        let device = Device::spawn(config, backend);
        device.join(joined.member);
        Ok(Opened {
            device,
            link_local_unbound,
            not_shared: None,
        })
    }

    /// A failed join as the error of the bind the agent tried.
    fn join_error(&self, layout: &crate::share::Layout, err: std::io::Error) -> OpenError {
        use std::io::ErrorKind::{AddrInUse, AddrNotAvailable};
        match (layout, err.kind()) {
            (crate::share::Layout::Interface(ifname, _), AddrInUse) => OpenError::Interface {
                ip: self.ip,
                ifname: ifname.clone(),
                source: err,
            },
            (_, AddrInUse | AddrNotAvailable) => {
                OpenError::Bind(BindError::new(SocketAddr::new(self.ip, PORT), err))
            }
            _ => OpenError::Agent(err),
        }
    }

    /// The UDP backend, and, where GID 0 is an interface's link-local address, that address
    /// added to `addrs`. An IPv6 NIC takes `[::]:4791` on the interface (for both its GIDs)
    /// and does not start without it. An IPv4 NIC takes `ip:4791` and, for GID 0,
    /// `[link-local%interface]:4791`; without the latter it starts all the same, with, as the
    /// second value, why GID 0 carries no traffic.
    fn udp_backend(
        &self,
        addrs: &mut Vec<IpAddr>,
    ) -> Result<(UdpBackend, Option<String>), OpenError> {
        let ip = self.ip;
        let bind = |err| OpenError::Bind(BindError::new(SocketAddr::new(ip, PORT), err));
        let link_local = self.link_local.as_ref();
        let Some((iface, ll)) = link_local.and_then(|i| Some((i, i.link_local?))) else {
            return Ok((UdpBackend::bind(ip, PORT).map_err(bind)?, None));
        };
        let backend = if ip.is_ipv6() {
            UdpBackend::bind_interface(&iface.name, iface.index, PORT).map_err(|source| {
                OpenError::Interface {
                    ip,
                    ifname: iface.name.clone(),
                    source,
                }
            })?
        } else {
            let mut backend = UdpBackend::bind(ip, PORT).map_err(bind)?;
            if let Err(err) = backend.bind_link_local(ll, iface.index) {
                let why = link_local_refusal(ll, &iface.name, &err);
                tracing::info!("GID 0 carries no traffic: {why}");
                return Ok((backend, Some(why)));
            }
            backend
        };
        addrs.push(IpAddr::V6(ll));
        Ok((backend, None))
    }
}

/// [`DeviceSpec::runtime`], for a device that does (`busy_poll`) or does not busy-poll.
pub fn runtime(busy_poll: bool) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    if busy_poll {
        builder.event_interval(1);
    }
    builder.build()
}

/// Why an IPv4 NIC's GID 0, `ll` on `ifname`, carries no traffic: the end of "GID 0 carries no
/// traffic here: ...".
fn link_local_refusal(ll: std::net::Ipv6Addr, ifname: &str, err: &std::io::Error) -> String {
    let what = format!("UDP [{ll}%{ifname}]:4791, {ifname}'s link-local address, cannot be bound");
    if err.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "{what}: in use, by another NIC on {ifname} (an IPv6 one, or an IPv4 one that \
             started first) or the kernel's rxe driver"
        )
    } else {
        format!("{what}: {err}")
    }
}

/// An opened device.
#[derive(Debug)]
pub struct Opened {
    /// Its verbs.
    pub device: DeviceHandle,
    /// Why GID 0's link-local address carries no traffic, when an IPv4 NIC could not bind it
    /// (the end of the sentence "GID 0 carries no traffic here: ...").
    pub link_local_unbound: Option<String>,
    /// Why a NIC meant to share its address is this process's own: its agent could not be
    /// had.
    pub not_shared: Option<String>,
}

/// Why a device could not open.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The capture file could not be created.
    #[error("cannot create {}: {source}", path.display())]
    Capture {
        /// The file.
        path: PathBuf,
        /// Why.
        source: roce_pcap::CaptureError,
    },
    /// The UDP backend could not bind the address.
    #[error(transparent)]
    Bind(BindError),
    /// An IPv6 UDP NIC could not bind `[::]:4791` on its interface.
    #[error(
        "cannot bind UDP [::]:4791 on {ifname}, the socket of GID 1 ({ip}) and GID 0 \
         ({ifname}'s link-local address): {}",
        interface_cause(source, ifname)
    )]
    Interface {
        /// The NIC's address.
        ip: IpAddr,
        /// The interface that holds it.
        ifname: String,
        /// Why.
        source: std::io::Error,
    },
    /// The address's agent could not be reached or started, or its sockets not used.
    #[error("sharing the address: {0}")]
    Agent(std::io::Error),
    /// A congestion-control parameter the algorithm does not take, or a value that does not
    /// parse.
    #[error("congestion control: {0}")]
    CcParam(ParamError),
    /// The raw backend was given no interface.
    #[error("the raw backend needs an interface (--dev IFACE)")]
    NoInterface,
    /// The raw backend could not open its interface.
    #[error("raw backend on {dev}: {source}")]
    Raw {
        /// The interface.
        dev: String,
        /// Why.
        source: std::io::Error,
    },
}

impl OpenError {
    /// The error and what to do about it, through `option`, the flag or variable that chose
    /// the address (`--ip`, `roce exec --ip`).
    pub fn with_advice(&self, option: &str) -> String {
        match self {
            Self::Bind(err) => match err.advice(option) {
                Some(advice) => format!("{err}; {advice}"),
                None => err.to_string(),
            },
            other => other.to_string(),
        }
    }
}

fn interface_cause(err: &std::io::Error, ifname: &str) -> String {
    if err.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "in use, by another IPv6 NIC on {ifname}, an IPv4 NIC on {ifname} (for its GID 0, \
             the link-local address) or the kernel's rxe driver: one IPv6 NIC per interface; \
             give this one an address on another interface"
        )
    } else {
        err.to_string()
    }
}

/// A variable that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What it should be.
    pub expected: Cow<'static, str>,
}

impl EnvError {
    /// `var` holds `value`, which is not `expected`.
    pub fn new(
        var: &'static str,
        value: impl Into<String>,
        expected: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            var,
            value: value.into(),
            expected: expected.into(),
        }
    }
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?}: expected {}",
            self.var, self.value, self.expected
        )
    }
}

impl std::error::Error for EnvError {}

#[cfg(test)]
mod tests;
