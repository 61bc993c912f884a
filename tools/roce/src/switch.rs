//! `roce switch`: a userspace Ethernet switch between interfaces (veth ends, usually), with
//! the congestion point of roce-sim's [`Switch`] in real time, so that real NIC processes run
//! through the same queues, RED/ECN marking, ETS and PFC as the simulated ones.
//!
//! It is a learning bridge: it learns which port each source MAC lives behind, floods
//! broadcasts, multicasts and unknown destinations at once, and sends known unicast IP frames
//! through the egress port's queues, which drain at `--rate`. There the packet is classified
//! by its DSCP ("trust dscp", priority = DSCP / 8; or, with `--trust pcp`, by its 802.1Q tag's
//! PCP), may be ECN-marked (RED on the class's queue:
//! the IP header's ECN field becomes CE and the IPv4 header checksum is recomputed; the ICRC
//! masks those bits, IBA Annex A17.4.3), dropped when the port's buffer is full, and paused-for
//! by PFC. PFC PAUSE frames (`roce_wire::mac_control`: DA 01:80:C2:00:00:01, EtherType
//! 0x8808, opcode 0x0101, IEEE 802.1Qbb) are sent to the host of an ingress port whose bytes
//! held pass XOFF; PFC and 802.3x PAUSE frames that a host (or another switch) sends stop this
//! switch's egress towards it for the priorities and quanta they name, so pauses propagate
//! through chained switches. A RoCEv2 request (IPv4 or IPv6, 802.1Q-tagged or not) that
//! carries HPCC's INT header (`roce_wire::int`, flagged in the BTH) takes the egress port's
//! record as it leaves (queue, bytes sent, time, rate); the UDP checksum is written again, the ICRC needs nothing (it
//! hashes the INT header as ones). With `--pint`, every egress meters its utilisation
//! (`roce_wire::pint`) and raises the value of a request that carries HPCC-PINT's header.
//!
//! The interfaces should have no IP addresses of their own (the kernel would answer for them)
//! and need CAP_NET_RAW.

mod args;

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant as WallInstant};

use anyhow::bail;
use roce_core::{Ecn, Instant};
use roce_device::backend::packet_socket::{self, PacketSocket, Sender};
use roce_sim::switch::{Ets, MarkAt, Pfc, PintMeter};
use roce_sim::{EcnMarking, SimPacket, Switch, SwitchConfig};
use roce_wire::frame::rewrite;
use roce_wire::mac_control;
use serde_json::json;

use args::{parse_ecn, parse_pfc, parse_rate};

/// Bytes of a frame that the queue model counts as headers: roce-sim counts a packet on the
/// wire as its UDP payload plus Ethernet, IPv4 and UDP headers.
const MODEL_HEADER: usize = roce_wire::frame::IPV4_FRAME_OVERHEAD;

#[derive(Debug, clap::Args)]
#[command(
    allow_negative_numbers = true,
    about = "A userspace switch between interfaces, with ECN marking, PFC and ETS",
    long_about = "A userspace learning switch between two or more interfaces (e.g. veth ends \
                  in a namespace), whose egress ports drain at --rate through roce-sim's queues: \
                  RED ECN marking (--ecn), PFC (--pfc) and ETS (--strict). Run NICs with \
                  `--cc dcqcn` on either side to see CNPs and DCQCN rate cuts; with `--cc \
                  hpcc` the requests' INT headers take each egress's record; with `--cc hpcc \
                  --cc-param pint=true` and --pint here, their PINT values the path's \
                  utilisation. Needs CAP_NET_RAW.",
    after_help = "Example (in a namespace that holds sw0 and sw1):\n  \
                  roce switch --port sw0 --port sw1 --rate 200m --ecn 5000,50000,0.1 --duration 30"
)]
pub(crate) struct Args {
    /// An interface to switch between (give two or more).
    #[arg(long = "port", value_name = "IFACE", required = true)]
    ports: Vec<String>,
    /// Line rate of every egress port, bits per second, with an optional k, m or g suffix.
    #[arg(long, default_value = "1g", value_parser = parse_rate)]
    rate: u64,
    /// Buffer of each egress port, bytes (drop-tail above it).
    #[arg(long, default_value_t = 1 << 20)]
    buffer: usize,
    /// RED ECN marking on every egress class: KMIN,KMAX,PMAX (bytes, bytes, probability).
    #[arg(long, value_name = "KMIN,KMAX,PMAX", value_parser = parse_ecn)]
    ecn: Option<EcnMarking>,
    /// Mark when a packet leaves the queue ("Fast ECN") rather than when it joins it.
    #[arg(long)]
    mark_at_dequeue: bool,
    /// PFC on priority 3: XOFF,XON bytes held per ingress port (e.g. 60000,40000). Off by
    /// default, as on real switches.
    #[arg(long, value_name = "XOFF,XON", value_parser = parse_pfc)]
    pfc: Option<Pfc>,
    /// Strict-priority classes (0..7), served before the weighted ones, e.g. --strict 6.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u8).range(0..8))]
    strict: Vec<u8>,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Print the port counters every this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    interval: f64,
    /// Counters as JSON lines on standard output (one per interval, and a last one with
    /// "final": true).
    #[arg(long)]
    json: bool,
    /// HPCC-PINT: meter every egress's utilisation over T = this many ns and raise the PINT
    /// value of the requests that carry one (NICs run `--cc hpcc --cc-param pint=true`). Give
    /// the senders' T (`--cc-param base_rtt_ns`). Off by default: PINT headers pass as they
    /// came.
    #[arg(long, value_name = "RTT_NS", value_parser = clap::value_parser!(u64).range(1..))]
    pint: Option<u64>,
    /// What sorts a frame into its egress class: its DSCP (class = DSCP / 8, "trust dscp"), or
    /// the PCP of its 802.1Q tag ("trust pcp", as a switch set up for PFC at layer 2 does;
    /// an untagged frame is class 0).
    #[arg(long, value_enum, default_value_t = Trust::Dscp)]
    trust: Trust,
    /// PINT's log base in 1/1000, as the senders' `pint_log_base` (1010 is 1.01).
    #[arg(long, value_name = "MILLI", default_value_t = 1010, requires = "pint",
          value_parser = clap::value_parser!(u32).range(1001..))]
    pint_log_base: u32,
}

/// What sorts a frame into its egress class (`--trust`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Trust {
    /// The IP header's DSCP: class = DSCP / 8.
    Dscp,
    /// The 802.1Q tag's PCP; class 0 without a tag.
    Pcp,
}

/// The key the model classifies `frame` by (its `dscp`, through the switch's table): the DSCP
/// given, or under `--trust pcp` the frame's PCP, which [`switch_config`]'s table maps to
/// itself.
fn class_key(trust: Trust, frame: &[u8], dscp: u8) -> u8 {
    match trust {
        Trust::Dscp => dscp,
        Trust::Pcp => rewrite::vlan_pcp(frame).unwrap_or(0),
    }
}

/// The model's switch for `args`.
fn switch_config(args: &Args) -> SwitchConfig {
    let mut ets = Ets::default();
    for &class in &args.strict {
        ets.strict[usize::from(class)] = true;
    }
    let mut config = SwitchConfig {
        bandwidth_bps: args.rate,
        // The cables are real: the model adds no delay of its own.
        latency: Duration::ZERO,
        buffer_bytes: args.buffer,
        ecn: args.ecn,
        mark_at: if args.mark_at_dequeue {
            MarkAt::Dequeue
        } else {
            MarkAt::Enqueue
        },
        pfc: args.pfc,
        ets,
        pint: args
            .pint
            .map(|rtt_ns| PintMeter::new(rtt_ns, f64::from(args.pint_log_base) / 1000.0)),
        ..SwitchConfig::default()
    };
    if args.trust == Trust::Pcp {
        for (key, class) in config.dscp_to_priority.iter_mut().enumerate().take(8) {
            *class = key as u8;
        }
    }
    config
}

/// `roce switch`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if args.ports.len() < 2 {
        bail!("a switch needs two or more --port interfaces");
    }
    let config = switch_config(args);
    let stop = Arc::new(AtomicBool::new(false));
    let (frames_tx, frames) = mpsc::sync_channel::<(usize, Vec<u8>, bool)>(4096);
    let mut ports = Vec::new();
    for (index, name) in args.ports.iter().enumerate() {
        ports.push(open_port(index, name, frames_tx.clone(), stop.clone())?);
    }
    drop(frames_tx);
    let mut bridge = Bridge {
        switch: Switch::new(config, ports.len(), Vec::new(), 1),
        ports,
        macs: HashMap::new(),
        held: HashMap::new(),
        next_id: 0,
        start: WallInstant::now(),
        trust: args.trust,
    };
    eprintln!(
        "roce switch: {} ports at {} b/s, classes by {}, ECN {}, PFC {}",
        bridge.ports.len(),
        args.rate,
        match args.trust {
            Trust::Dscp => "DSCP",
            Trust::Pcp => "PCP",
        },
        args.ecn.map_or_else(
            || "off".to_owned(),
            |e| format!("{}..{} B pmax {}", e.k_min_bytes, e.k_max_bytes, e.p_max)
        ),
        args.pfc.map_or_else(
            || "off".to_owned(),
            |p| format!("xoff {} xon {}", p.xoff_bytes, p.xon_bytes)
        ),
    );
    let end = args
        .duration
        .map(|s| bridge.start + Duration::from_secs_f64(s.max(0.0)));
    let interval = Duration::from_secs_f64(args.interval.max(0.05));
    let mut next_report = bridge.start + interval;
    let interrupted = crate::interrupt::Interrupt::catch()?;
    loop {
        let wall = WallInstant::now();
        if end.is_some_and(|end| wall >= end) || interrupted.asked() {
            break;
        }
        if wall >= next_report {
            bridge.report(args.json, false);
            next_report += interval;
        }
        let now = bridge.now();
        bridge.drain(now);
        // Sleep until the model's next event, a frame, or 10 ms.
        let wait = bridge
            .switch
            .next_event()
            .map_or(Duration::from_millis(10), |at| {
                (at - now).min(Duration::from_millis(10))
            });
        match frames.recv_timeout(wait) {
            Ok((port, frame, needs_csum)) => {
                bridge.receive(port, frame, needs_csum);
                // Take what else has arrived before the model moves on.
                for _ in 0..64 {
                    match frames.try_recv() {
                        Ok((port, frame, needs_csum)) => bridge.receive(port, frame, needs_csum),
                        Err(_) => break,
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                bail!("every port's receiver stopped (see the log above)")
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    bridge.report(args.json, true);
    if interrupted.asked() {
        eprintln!("roce switch: interrupted; the counters above are the final ones");
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// One interface.
struct Port {
    name: String,
    mac: [u8; 6],
    tx: Sender,
    /// Frames that skipped the queues: flooded or non-IP.
    flooded: u64,
    /// Frames that could not be sent.
    send_errors: u64,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Port {
    fn send(&mut self, frame: &[u8]) {
        if let Err(err) = self.tx.send(&[frame]) {
            self.send_errors += 1;
            tracing::debug!(port = %self.name, error = %err, "send failed");
        }
    }
}

/// Opens `name` and starts its receiving thread. A segmentation-offload batch that a host's
/// UDP socket sent (a veth hands it over whole) reaches the bridge cut into its datagrams, so
/// the queues see the packets the wire would carry.
fn open_port(
    index: usize,
    name: &str,
    frames: mpsc::SyncSender<(usize, Vec<u8>, bool)>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Port> {
    let PacketSocket { tx, rx, mac, .. } = packet_socket::open(name, true)?;
    packet_socket::spawn_receiver(
        format!("roce-switch-{name}"),
        rx,
        stop,
        move |frame, needs_csum| {
            // The socket sees neither its own sends nor the host's; a frame from this
            // interface's MAC all the same is skipped.
            frame.len() < 14
                || frame[6..12] == mac
                || frames.send((index, frame.to_vec(), needs_csum)).is_ok()
        },
    )?;
    Ok(Port {
        name: name.to_owned(),
        mac,
        tx,
        flooded: 0,
        send_errors: 0,
    })
}

/// The switch: the queue model, the ports and the MAC table.
struct Bridge {
    switch: Switch,
    ports: Vec<Port>,
    /// Source MAC → port it was last seen on.
    macs: HashMap<[u8; 6], usize>,
    /// Headers of queued frames, by the id their model packet carries.
    held: HashMap<u32, Vec<u8>>,
    next_id: u32,
    start: WallInstant,
    /// What sorts frames into classes.
    trust: Trust,
}

impl Bridge {
    /// Wall-clock time as the model's time.
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// A frame arrived on `ingress`; `needs_csum` when its TCP or UDP checksum was left to an
    /// offload.
    fn receive(&mut self, ingress: usize, mut frame: Vec<u8>, needs_csum: bool) {
        if frame.len() < 14 {
            return;
        }
        if needs_csum {
            rewrite::fill_l4_checksum(&mut frame);
        }
        let dst: [u8; 6] = frame[0..6].try_into().unwrap_or_default();
        let src: [u8; 6] = frame[6..12].try_into().unwrap_or_default();
        if mac_control::is_mac_control(&frame) {
            // Link-local: a host's PAUSE is for this switch, which stops sending it the paused
            // priorities; it is never forwarded.
            let now = self.now();
            let bps = self.switch.config().bandwidth_bps.max(1);
            for (priority, quanta) in mac_control::pauses(&frame) {
                let nanos = u64::from(quanta) * 512 * 1_000_000_000 / bps;
                let until = now + Duration::from_nanos(nanos);
                self.switch.pause_egress(now, ingress, priority, until);
            }
            return;
        }
        if src[0] & 1 == 0 {
            self.macs.insert(src, ingress);
        }
        let egress = if dst[0] & 1 == 0 {
            self.macs.get(&dst).copied()
        } else {
            None
        };
        match egress {
            Some(egress) if egress == ingress => {} // the host's own segment: filtered
            Some(egress) => match rewrite::ip_marking(&frame) {
                Some((ecn, dscp)) => {
                    let key = class_key(self.trust, &frame, dscp);
                    self.enqueue(ingress, egress, frame, ecn, key);
                }
                None => {
                    self.ports[egress].flooded += 1;
                    self.ports[egress].send(&frame);
                }
            },
            None => {
                for (index, port) in self.ports.iter_mut().enumerate() {
                    if index != ingress {
                        port.flooded += 1;
                        port.send(&frame);
                    }
                }
            }
        }
    }

    /// An IP frame joins `egress`'s queues. The model sees a packet whose length on the wire is
    /// the frame's; the frame's first bytes wait here under an id the packet carries.
    fn enqueue(&mut self, ingress: usize, egress: usize, mut frame: Vec<u8>, ecn: Ecn, dscp: u8) {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let mut packet = to_model(&mut frame, ecn, dscp);
        packet.tag = id;
        let now = self.now();
        if self.switch.receive_to(now, ingress, egress, packet) {
            self.held.insert(id, frame);
        }
    }

    /// Moves the model to `now` and sends what it lets out: frames and PAUSEs.
    fn drain(&mut self, now: Instant) {
        self.switch.advance(now);
        for index in 0..self.ports.len() {
            while let Some(packet) = self.switch.deliver(now, index) {
                let Some(frame) = self.held.remove(&packet.tag) else {
                    continue;
                };
                let frame = from_model(frame, &packet);
                self.ports[index].send(&frame);
            }
            while let Some(pause) = self.switch.pause_frame(now, index) {
                let nanos = (pause.until - pause.at).as_nanos();
                let quanta =
                    (nanos * u128::from(self.switch.config().bandwidth_bps) / 512 / 1_000_000_000)
                        .min(u128::from(u16::MAX)) as u16;
                let frame = mac_control::pfc_frame(self.ports[index].mac, pause.priority, quanta);
                self.ports[index].send(&frame);
            }
        }
    }

    /// Prints every port's counters.
    fn report(&self, json: bool, last: bool) {
        let elapsed = self.start.elapsed().as_secs_f64();
        let ports: Vec<_> = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, port)| {
                let stats = self.switch.stats(i);
                json!({
                    "port": port.name, "enqueued": stats.enqueued, "sent": stats.sent,
                    "drops": stats.drops, "ce_marked": stats.ce_marked,
                    "pauses_sent": stats.pauses_sent, "resumes_sent": stats.resumes_sent,
                    "pauses_received": stats.pauses_received,
                    "queue_bytes": self.switch.queue_bytes(i),
                    "max_queue_bytes": stats.max_queue_bytes,
                    "flooded": port.flooded, "send_errors": port.send_errors,
                })
            })
            .collect();
        if json {
            println!(
                "{}",
                json!({ "elapsed_s": elapsed, "final": last, "ports": ports })
            );
            return;
        }
        for (i, port) in self.ports.iter().enumerate() {
            let stats = self.switch.stats(i);
            println!(
                "{elapsed:7.1}s {:<10} out {:>9} drops {:>7} CE {:>7} queue {:>8} B (max {:>8}) pauses sent {:>5}",
                port.name,
                stats.sent,
                stats.drops,
                stats.ce_marked,
                self.switch.queue_bytes(i),
                stats.max_queue_bytes,
                stats.pauses_sent,
            );
        }
    }
}

/// The model's packet for an IP frame (its ECN bits and DSCP given): the frame past its
/// headers, split off `frame`, which keeps its head. The model needs no addresses (it forwards
/// to the egress it is told and keys nothing by them), but a RoCEv2 frame's packet goes to
/// port 4791 at an address of its IP version: the model reads its UDP payload as RoCE and
/// stamps HPCC's INT header if it carries one (`roce_wire::int`), and counts the packet's
/// headers as that version's (an 802.1Q tag's 4 bytes are not counted). Other frames are cut
/// at [`MODEL_HEADER`], so the model counts them whole.
fn to_model(frame: &mut Vec<u8>, ecn: Ecn, dscp: u8) -> SimPacket {
    let (split, nowhere) = match rewrite::roce_payload_at(frame) {
        Some((at, false)) => (
            at,
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, roce_wire::ROCE_V2_UDP_PORT)),
        ),
        Some((at, true)) => (
            at,
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, roce_wire::ROCE_V2_UDP_PORT)),
        ),
        None => (
            frame.len().min(MODEL_HEADER),
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        ),
    };
    let payload = frame.split_off(split);
    let mut packet = SimPacket::new(nowhere, nowhere, payload);
    packet.ecn = ecn;
    packet.dscp = dscp;
    packet
}

/// The frame the model let out: its head and the model's packet, CE set in the IP header if
/// the model marked it, and the UDP checksum written again if the packet carries INT (a
/// record was appended; the ICRC needs nothing, as it hashes the INT header as ones).
fn from_model(mut frame: Vec<u8>, packet: &SimPacket) -> Vec<u8> {
    frame.extend_from_slice(&packet.payload);
    if packet.ecn == Ecn::Ce {
        rewrite::mark_ce(&mut frame);
    }
    if packet.dst.port() == roce_wire::ROCE_V2_UDP_PORT && roce_wire::int::flagged(&packet.payload)
    {
        rewrite::fill_l4_checksum(&mut frame);
    }
    frame
}

#[cfg(test)]
mod tests;
