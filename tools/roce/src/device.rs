//! The device options every networked verb shares: which backend, which interface, which
//! address, and an optional capture.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::{Context, bail};
use roce_core::{Congestion, DcqcnConfig};
use roce_device::backend::BindError;
use roce_device::backend::raw::RawBackend;
use roce_device::backend::udp::UdpBackend;
use roce_device::{Device, DeviceConfig, DeviceHandle, SnapLen, Tap};

/// How the NIC reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BackendKind {
    /// A UDP socket on `<ip>:4791`: no privileges; every packet leaves from port 4791; received
    /// ICRCs from peers with non-zero IPv4 IDs (rxe) cannot be checked in full.
    Udp,
    /// Whole Ethernet frames on --dev (needs CAP_NET_RAW): per-QP source ports, DSCP/ECN, every
    /// ICRC checked; answers ARP for --ip, which should not be a kernel address of the host.
    Raw,
}

/// Which congestion control every QP runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CcKind {
    /// None, as rxe: requests go out Not-ECT and as fast as the window allows.
    None,
    /// DCQCN with NVIDIA's ConnectX defaults: requests carry ECT(0), CE-marked requests are
    /// answered with CNPs, and CNPs cut the sender's rate.
    Dcqcn,
    /// DCQCN with the SIGCOMM 2015 paper's parameters.
    DcqcnPaper,
}

/// How much of each packet a `--pcap` capture keeps: one option for every command that writes
/// one.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct SnapLenOpt {
    /// Keep at most this many bytes of each packet in the --pcap capture, as tcpdump's -s. A cut
    /// record keeps the packet's length (`roce dump` decodes the headers and does not check the
    /// ICRC; Wireshark calls a cut RoCE packet malformed, as for any `tcpdump -s` capture).
    /// Default 0: whole packets.
    /// 128 keeps every header of a RoCE packet (Ethernet, VLAN tag, IPv6, UDP, BTH and its
    /// extension headers) but not the payload nor a CM MAD (UD to QP 1, which 384 keeps).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub(crate) snaplen: u32,
}

impl SnapLenOpt {
    /// The snap length for the capture writer.
    pub(crate) fn get(self) -> SnapLen {
        SnapLen::new(self.snaplen)
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct DeviceOpts {
    /// Backend: udp (no privileges) or raw (CAP_NET_RAW, whole frames on --dev).
    #[arg(long, value_enum, default_value_t = BackendKind::Udp)]
    pub(crate) backend: BackendKind,
    /// Interface of the raw backend (e.g. a veth).
    #[arg(long, value_name = "IFACE")]
    pub(crate) dev: Option<String>,
    /// Our RoCE address (our GID is its ::ffff: form). Default: the address of the TCP
    /// connection. With the raw backend, give an address that the interface's kernel does not own.
    #[arg(long, value_name = "ADDR")]
    pub(crate) ip: Option<IpAddr>,
    /// DSCP of our RoCE packets (0 to 63; RoCE fabrics commonly use 26, which "trust dscp"
    /// switches map to priority 3).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub(crate) dscp: u8,
    /// Congestion control (see docs/congestion.md); the JSON result then shows each QP's rate,
    /// target rate, α and CNPs.
    #[arg(long, value_enum, default_value_t = CcKind::None)]
    pub(crate) cc: CcKind,
    /// The port's line rate, Gb/s: where DCQCN's rate starts and the most it climbs back to.
    #[arg(long, value_name = "GBPS", default_value_t = 100.0, value_parser = parse_gbps)]
    pub(crate) line_rate: f64,
    /// Busy polling, as perftest polls its CQ unless given -e: the NIC never sleeps and
    /// completions are polled for. Lower latency and more small messages per second, one busy
    /// core per process. Without it the NIC and a waiter sleep until a packet, a timer or a
    /// completion wakes them.
    #[arg(long)]
    pub(crate) busy_poll: bool,
    /// UDP backend: send each packet with a system call of its own instead of batches of up to
    /// 64 KiB that the kernel cuts into datagrams (UDP GSO). A capture (tcpdump, Wireshark) on
    /// a veth sees a batch as one frame before the kernel cuts it; `roce switch` and the raw
    /// backend cut batches themselves. Or turn the offload off where the packets leave:
    /// `ethtool -K IFACE tx-udp-segmentation off`.
    #[arg(long)]
    pub(crate) no_gso: bool,
    /// Write every packet the NIC sends and receives to this pcap.
    #[arg(long, value_name = "FILE")]
    pub(crate) pcap: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) snaplen: SnapLenOpt,
}

impl DeviceOpts {
    /// Starts the device on `--ip` or `default_ip`; returns it and the address it plays.
    pub(crate) fn spawn(&self, default_ip: IpAddr) -> anyhow::Result<(DeviceHandle, IpAddr)> {
        let ip = self.ip.unwrap_or(default_ip);
        let mut config = DeviceConfig::new(ip);
        config.busy_poll = self.busy_poll;
        config.nic.line_rate_bps = (self.line_rate * 1e9) as u64;
        config.nic.congestion = match self.cc {
            CcKind::None => Congestion::None,
            CcKind::Dcqcn => Congestion::Dcqcn(DcqcnConfig::default()),
            CcKind::DcqcnPaper => Congestion::Dcqcn(DcqcnConfig::paper()),
        };
        if let Some(path) = &self.pcap {
            config.tap = Some(
                Tap::create(path, true, self.snaplen.get())
                    .with_context(|| format!("cannot create {}", path.display()))?,
            );
        }
        let device = match self.backend {
            BackendKind::Udp => {
                let mut backend = UdpBackend::bind(ip, roce_wire::ROCE_V2_UDP_PORT)
                    .map_err(|err| bind_error(ip, err, "--ip"))?;
                if self.no_gso {
                    backend = backend.without_gso();
                }
                Device::spawn(config, backend)
            }
            BackendKind::Raw => {
                let Some(dev) = &self.dev else {
                    bail!("--backend raw needs --dev IFACE")
                };
                let backend =
                    RawBackend::open(dev, ip).with_context(|| format!("raw backend on {dev}"))?;
                Device::spawn(config, backend)
            }
        };
        Ok((device, ip))
    }
}

/// Why the UDP backend could not bind `ip:4791`, by its real cause, with what to do about it
/// through `option` (the flag that chose the address).
pub(crate) fn bind_error(ip: IpAddr, err: std::io::Error, option: &str) -> anyhow::Error {
    let err = BindError::new(SocketAddr::new(ip, roce_wire::ROCE_V2_UDP_PORT), err);
    match err.advice(option) {
        Some(advice) => anyhow::anyhow!("{err}; {advice}"),
        None => anyhow::Error::new(err),
    }
}

/// The single-threaded runtime a tool and its device run on. With --busy-poll it looks at the
/// sockets at every tick (tokio's default is every 61 ticks, or when nothing else is to do —
/// which, busy polling, never comes).
pub(crate) fn runtime(opts: &DeviceOpts) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    if opts.busy_poll {
        builder.event_interval(1);
    }
    builder.build()
}

/// A line rate in Gb/s: positive and at most 10 Tb/s.
pub(crate) fn parse_gbps(text: &str) -> Result<f64, GbpsError> {
    let gbps: f64 = text
        .parse()
        .map_err(|_| GbpsError::NotANumber(text.to_owned()))?;
    if gbps > 0.0 && gbps <= 10_000.0 {
        Ok(gbps)
    } else {
        Err(GbpsError::OutOfRange(gbps))
    }
}

/// Why a line rate is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GbpsError {
    /// Not a number.
    #[error("{0:?} is not a number of Gb/s")]
    NotANumber(String),
    /// 0 or less, or above 10 Tb/s.
    #[error("{0} Gb/s: a line rate is above 0 and at most 10000")]
    OutOfRange(f64),
}
