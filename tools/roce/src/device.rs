//! The device options every networked verb shares: which backend, which interface, which
//! address, and an optional capture.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::Context;
use roce_device::backend::BindError;
use roce_device::{
    BackendKind, Cc, CcParam, DeviceHandle, DeviceSpec, OpenError, Recovery, SnapLen,
};

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
    /// target rate, α, window and CNPs.
    #[arg(long, value_enum, default_value_t = Cc::None)]
    pub(crate) cc: Cc,
    /// One of the congestion control's parameters over its defaults, KEY=VALUE; repeat it for
    /// more. KEY is a field of the algorithm's configuration, as a network scenario's
    /// [network.ALGO] table names it (docs/congestion.md); a key the algorithm does not take is
    /// refused with the keys it takes. HPCC's T and floor on a veth whose round trip is
    /// hundreds of µs, say: --cc hpcc --cc-param base_rtt_ns=400000 --cc-param min_rate=10.
    #[arg(long = "cc-param", value_name = "KEY=VALUE")]
    pub(crate) cc_params: Vec<CcParam>,
    /// How RC QPs recover lost packets: go-back-n (as rxe and hardware RNICs) or
    /// selective-repeat (IRN-style: only what is missing is sent again, so a lossy path without
    /// PFC costs little). Both ends must use the same; with a peer that is not roce-emu, keep
    /// go-back-n. With --loss on both sides, the retransmit counters show the difference.
    #[arg(long, value_enum, value_name = "HOW", default_value_t = Recovery::GoBackN)]
    pub(crate) loss_recovery: Recovery,
    /// The port's line rate, Gb/s: where the congestion control's rate (DCQCN, DCTCP, TIMELY)
    /// starts and the most it climbs back to.
    #[arg(long, value_name = "GBPS", default_value_t = 100.0, value_parser = parse_gbps)]
    pub(crate) line_rate: f64,
    /// Drop this fraction (0 to 1) of the datagrams the NIC receives, at random, to watch
    /// recovery work (the counters show what was sent again; see --loss-recovery).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = parse_fraction)]
    pub(crate) loss: f64,
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
    /// A NIC of this process's own. Without it (UDP backend) the NIC is the address's, shared
    /// with every other process on the address (`roce exec` programs included), as processes
    /// share a host's RNIC.
    #[arg(long)]
    pub(crate) private_nic: bool,
    #[command(flatten)]
    pub(crate) snaplen: SnapLenOpt,
}

impl DeviceOpts {
    /// The device these options describe, on `--ip` or `default_ip`.
    pub(crate) fn spec(&self, default_ip: IpAddr) -> DeviceSpec {
        let mut spec = DeviceSpec::new(self.ip.unwrap_or(default_ip));
        spec.backend = self.backend;
        spec.dev = self.dev.clone();
        spec.cc = self.cc;
        spec.cc_params = self.cc_params.clone();
        spec.recovery = self.loss_recovery;
        spec.loss = self.loss;
        spec.line_rate_bps = (self.line_rate * 1e9) as u64;
        spec.busy_poll = self.busy_poll;
        spec.no_gso = self.no_gso;
        spec.pcap = self.pcap.clone();
        spec.snaplen = self.snaplen.snaplen;
        share_unless(&mut spec, self.private_nic);
        spec
    }

    /// The congestion control with its `--cc-param`s, or why one is refused.
    pub(crate) fn congestion(&self) -> Result<roce_core::Congestion, roce_core::ParamError> {
        self.spec(IpAddr::from([127, 0, 0, 1])).congestion()
    }

    /// Starts the device on `--ip` or `default_ip`; returns it and the address it plays.
    pub(crate) fn spawn(&self, default_ip: IpAddr) -> anyhow::Result<(DeviceHandle, IpAddr)> {
        let spec = self.spec(default_ip);
        empty_shared_capture(&spec)?;
        let opened = spec.open().map_err(|err| match err {
            OpenError::NoInterface => anyhow::anyhow!("--backend raw needs --dev IFACE"),
            OpenError::CcParam(err) => anyhow::anyhow!("--cc-param: {err}"),
            err => anyhow::anyhow!(err.with_advice("--ip")),
        })?;
        Ok((opened.device, spec.ip))
    }
}

/// Makes `spec` share its address's NIC with the address's other processes, through this
/// program's `agent` command, unless `private` (`--private-nic`) or on the raw backend.
pub(crate) fn share_unless(spec: &mut DeviceSpec, private: bool) {
    if !private && spec.backend == BackendKind::Udp {
        spec.agent = std::env::current_exe().ok();
    }
}

/// A shared NIC's capture is appended to by every process of the NIC ([`roce_device::Tap::append`]):
/// the run that starts it empties it first.
pub(crate) fn empty_shared_capture(spec: &DeviceSpec) -> anyhow::Result<()> {
    if let (true, Some(pcap)) = (spec.shares(), &spec.pcap) {
        std::fs::write(pcap, b"").with_context(|| format!("cannot create {}", pcap.display()))?;
    }
    Ok(())
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

/// The single-threaded runtime a tool and its device run on ([`DeviceSpec::runtime`]).
pub(crate) fn runtime(opts: &DeviceOpts) -> std::io::Result<tokio::runtime::Runtime> {
    roce_device::spec::runtime(opts.busy_poll)
}

/// A line rate in Gb/s: positive and at most 10 Tb/s.
/// A fraction from 0 to 1, for --loss.
pub(crate) fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!("{text:?}: a fraction from 0 to 1")),
    }
}

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
