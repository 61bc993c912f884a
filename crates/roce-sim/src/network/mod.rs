//! A multi-switch network on a [`Topology`], driven by one event queue: the research-scale
//! counterpart of [`Fabric`](crate::Fabric).
//!
//! Every host is a real `roce_core::Nic` at HPCC's address for it ([`NodeId::hpcc_ipv4`], so
//! `fct.txt` lines match HPCC's), every switch a [`SwitchOf`] whose ports are its links, each
//! with the link's own rate, and every link has its own rate and delay. A switch forwards a
//! packet by its destination host and its 5-tuple (the UDP source port is RoCEv2's entropy, per
//! QP: `SrcPortPolicy::PerQp`) with HPCC's ECMP ([`Routes::ecmp_next_hop`]), from a table
//! precomputed per switch (`wiring.rs`). PFC works hop by hop: a switch's PAUSE for an ingress
//! port reaches whatever is at the other end of that link (a host's egress, or another switch's
//! egress port) one link delay later. A switch port sends as HPCC's does
//! ([`SwitchOf::depart`]): a packet leaves its queue, gives back its buffer and is ECN-marked
//! as its serialisation starts, and is put on the link at once; a hop through a free port with
//! nothing queued is one event, its arrival at the next node.
//!
//! Scheduling is one event queue (`events.rs`, a timing wheel) over packets kept in a pool
//! (`pool.rs`): the cost of a packet-hop does not grow with the network, and a NIC is asked for
//! packets only when something touched it (a datagram delivered, a timer due, a flow posted,
//! its link free).
//! A run is a function of the topology, the configuration and the flows: ties between events at
//! one instant are broken by the order they were scheduled in.
//!
//! [`Network::run_flows`] plays a list of [`FlowSpec`](crate::FlowSpec)s: one RC QP pair per
//! flow, RDMA WRITEs, one [`FctRecord`](crate::FctRecord) per flow finished (`flows.rs`).
//!
//! PFC deadlocks (a cycle of paused queues, each waiting on the next) are looked for every
//! [`CHECK_EVERY`] of a run; a confirmed one stops the run and is reported with the switches
//! and ports in it ([`Network::deadlock`], `deadlock.rs`).
//!
//! A switch's buffer is `buffer_bytes` per egress port, as in [`Switch`](crate::Switch), or with
//! [`SwitchConfig::shared`] one buffer shared by its ports with dynamic PFC thresholds (HPCC's
//! model): each port's headroom is [`pfc_headroom`] of its link, its α [`alpha_shift`] of its
//! rate.
//!
//! Not modelled: links' `error_rate` (no random loss), multi-homed hosts (refused).

mod base_rtt;
mod deadlock;
mod engine;
mod events;
mod flows;
mod host;
mod pool;
mod qlen;
mod wiring;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use roce_core::{IcrcPolicy, Instant, MAX_DATAGRAM, Nic, NicConfig};

use crate::capture::Capture;
use crate::pair::{PairConfig, Side, side};
use crate::switch::{PortStats, SwitchConfig, SwitchOf, pfc_headroom};
use crate::topology::{NodeId, NodeKind, Routes, Topology, TopologyError};
pub use base_rtt::rtt_note;
pub use deadlock::{CHECK_EVERY, Deadlock, PausedQueue};
use events::EventQueue;
pub use flows::read_note;
pub use flows::{FlowOutcome, MAX_POSTED, REGION_LEN, RETH_BYTES, RunProgress, ideal_model};
pub use host::HostStats;
use host::{Egress, SinkMemory};
use pool::PacketPool;
pub use pool::{FCS_BYTES, HEADER_BYTES, PacketRef};
pub use qlen::QueueLengths;
use wiring::Wiring;

/// How a [`Network`] carries payloads.
///
/// In `Lengths` mode the hosts' regions store nothing (writes are counted:
/// [`Network::bytes_written`]), a sent payload is whatever the NIC's send buffer held, a packet
/// in flight keeps only its first 64 UDP payload bytes (every RoCE header) and its length, and
/// the NICs neither compute nor check ICRCs ([`IcrcPolicy::Off`]). What is
/// still checked: everything the engine checks in the headers (opcodes, PSN order, lengths
/// against the RETH and the path MTU, keys and bounds of every access to the region), and the
/// bytes each receiving region took, which [`Network::bytes_written`] gives per host; not
/// checked: the payload's bytes and the ICRC. Timing is the same in both modes: a packet's
/// length on the wire is its whole length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Payload {
    /// Every byte stored, copied and checked (ICRC as the NICs are configured).
    #[default]
    Bytes,
    /// Lengths only, for speed.
    Lengths,
}

/// How a [`Network`] is built.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfig {
    /// The hosts' NICs and QPs: path MTU, region size (the largest WRITE; bigger flows post
    /// several), QP attributes, and the NIC configuration (congestion control, windows). Each
    /// NIC's `line_rate_bps` is set to its link's rate and its `seed` to `nic.seed + host
    /// index`; `link` and `seed` are unused.
    pub host: PairConfig,
    /// Every switch: buffer per egress port, ECN, PFC, ETS, DSCP map. `bandwidth_bps` and
    /// `latency` are unused: each port has its link's rate and delay.
    pub switch: SwitchConfig,
    /// Seed of the switches' marking decisions (switch `n` uses `seed + n`).
    pub seed: u64,
    /// Payload bytes, or only lengths. Default bytes.
    pub payload: Payload,
    /// Sample every switch port's queue length at this interval of simulated time
    /// ([`Network::queue_lengths`]); `None` (the default): no samples.
    pub queue_sample_every: Option<roce_core::Duration>,
    /// Which UDP ports the switches' ECMP hash reads. Default the packets' own.
    pub ecmp_ports: EcmpPorts,
    /// How each flow moves its bytes. Default RDMA WRITEs from its sender.
    pub verb: FlowVerb,
}

/// How a flow of [`Network::run_flows`] moves its bytes from its sender to its receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FlowVerb {
    /// The sender posts RDMA WRITEs into the receiver's region; the flow ends at the last
    /// WRITE's completion at the sender (its ACK).
    #[default]
    Write,
    /// The receiver posts RDMA READs of the sender's region; the flow ends at the last READ's
    /// completion at the receiver (its last response). The data flows as a WRITE's does, from
    /// the sender's QP; the requests go the other way.
    Read,
}

/// The UDP ports the switches' ECMP hash reads (the addresses are always the packet's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EcmpPorts {
    /// The packet's: its QP's source port (the flow's entropy, `SrcPortPolicy::PerQp`) and 4791.
    #[default]
    Packet,
    /// Those HPCC's ns-3 gives a flow of a flow file (`third.cc`): source port 10 000 + the
    /// flow's number among those between its two hosts in file order, destination port the
    /// file's `dport`, swapped for the packets coming back. With the same hash and seeds, a
    /// flow then takes the path its ns-3 twin takes wherever the two order a switch's next
    /// hops alike, so the two simulators can be compared flow by flow (`bench/ns3-reference.sh`).
    /// Flows of a flow file only; packets of anything else hash their own ports.
    Hpcc,
}

impl Default for NetworkConfig {
    /// Path MTU 1024, [`REGION_LEN`] regions, windows of 512 packets per QP and 8192 per NIC
    /// (enough for a 100 Gb/s flow over a few µs of RTT), no congestion control, lossy
    /// switches with the default buffer. The ACK timeout is 4.096 µs × 2^14 ≈ 67 ms, as
    /// ibv_rc_pingpong and perftest set it: under PFC a fabric's queues hold milliseconds of
    /// traffic, and the pair's 1 ms timeout fired there with nothing lost (8 486 times in 10
    /// ms of the fat-tree incast scenario, 567 k packets sent again, each costing its flow a
    /// millisecond).
    fn default() -> Self {
        Self {
            host: PairConfig {
                region_len: REGION_LEN,
                queue_depth: 64,
                timeout: 14,
                nic: NicConfig {
                    max_unacked_psns: 512,
                    max_unacked_total: 8192,
                    ..NicConfig::default()
                },
                ..PairConfig::default()
            },
            switch: SwitchConfig::default(),
            seed: 0,
            payload: Payload::Bytes,
            queue_sample_every: None,
            ecmp_ports: EcmpPorts::Packet,
            verb: FlowVerb::Write,
        }
    }
}

/// A shared buffer's α for a port of `rate_bps` when hosts send at `host_rate_bps`: `base`,
/// one less per doubling of the port's rate over the hosts' (down to 0), as HPCC's `third.cc`
/// sets `pfc_a_shift`: a 400 Gb/s port beside 100 Gb/s hosts may take 1/2 of the free space
/// where a host's port takes 1/8.
pub fn alpha_shift(base: u8, rate_bps: u64, host_rate_bps: u64) -> u8 {
    let (mut shift, mut rate) = (base, rate_bps);
    while rate > host_rate_bps && shift > 0 {
        shift -= 1;
        rate /= 2;
    }
    shift
}

/// Why a topology cannot be built into a network.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum NetworkError {
    /// Routing refused it (a host cut off).
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A host with other than one link.
    #[error("host {host} has {links} links: only single-homed hosts are supported")]
    MultiHomed {
        /// The host.
        host: NodeId,
        /// Its links.
        links: usize,
    },
}

/// Hosts with NICs and switches on a topology, and the events between them.
#[derive(Debug)]
pub struct Network {
    routes: Routes,
    config: NetworkConfig,
    wiring: Wiring,
    /// Per host index: the NIC and its objects, and its egress.
    sides: Vec<Side>,
    egress: Vec<Egress>,
    /// Host index → node id.
    host_nodes: Vec<NodeId>,
    /// Per node id: its switch, if it is one.
    switches: Vec<Option<SwitchOf<PacketRef>>>,
    /// Per global port: when its `PortFree` event is due, if one is pending.
    port_free_at: Vec<Option<Instant>>,
    pool: PacketPool,
    events: EventQueue,
    now: Instant,
    packet_hops: u64,
    /// Packets switches dropped for want of a route.
    unroutable: u64,
    outcome: FlowOutcome,
    /// The deadlock the last run stopped at.
    deadlock: Option<Deadlock>,
    buf: Vec<u8>,
    /// Where datagrams are rebuilt for delivery in [`Payload::Lengths`] mode.
    rx: Vec<u8>,
    /// Per host index, in [`Payload::Lengths`] mode: its region.
    sinks: Vec<Arc<SinkMemory>>,
    /// Queue-length samples, and whether their event is scheduled.
    qlen: QueueLengths,
    sampling: bool,
    /// Where the packets the hosts' NICs send are written, if anywhere.
    capture: Option<Capture>,
}

/// Every host of `topology` has exactly one link (a NIC has one port).
fn single_homed(topology: &Topology) -> Result<(), NetworkError> {
    for h in topology.hosts() {
        let links = topology.neighbors(h).len();
        if links != 1 {
            return Err(NetworkError::MultiHomed { host: h, links });
        }
    }
    Ok(())
}

impl Network {
    /// What [`Network::new`] would refuse of `topology` (a host cut off, a host with other than
    /// one link), found without building anything of the network: no NIC, region or switch.
    pub fn check(topology: &Topology) -> Result<(), NetworkError> {
        // In `new`'s order: routes first, so a host with no link is one cut off.
        Routes::new(topology.clone())?;
        single_homed(topology)
    }

    /// Builds the network: routes, one NIC per host, one switch per switch node.
    pub fn new(topology: Topology, config: NetworkConfig) -> Result<Self, NetworkError> {
        let routes = Routes::new(topology)?;
        single_homed(routes.topology())?;
        let mut wiring = Wiring::new(&routes);
        if config.ecmp_ports == EcmpPorts::Hpcc {
            wiring.hash_hpcc_ports();
        }
        let topology = routes.topology();
        let host_nodes: Vec<NodeId> = topology.hosts().collect();
        let mut sides = Vec::with_capacity(host_nodes.len());
        let mut sinks = Vec::new();
        for (i, &h) in host_nodes.iter().enumerate() {
            // One link each: `single_homed` above.
            let (_, link) = topology.neighbors(h)[0];
            let host_config = PairConfig {
                nic: NicConfig {
                    line_rate_bps: topology.links()[link].rate_bps,
                    seed: config.host.nic.seed.wrapping_add(i as u64),
                    icrc: match config.payload {
                        Payload::Bytes => config.host.nic.icrc,
                        Payload::Lengths => IcrcPolicy::Off,
                    },
                    ..config.host.nic.clone()
                },
                ..config.host.clone()
            };
            let addr = IpAddr::V4(Ipv4Addr::from(h.hpcc_ipv4()));
            let mut s = match config.payload {
                Payload::Bytes => side(&host_config, addr),
                // The region is swapped for a sink below: register a small one first, not
                // `region_len` zeroed bytes per host.
                Payload::Lengths => side(
                    &PairConfig {
                        region_len: 4096,
                        ..host_config
                    },
                    addr,
                ),
            };
            if config.payload == Payload::Lengths {
                let sink = Arc::new(SinkMemory::new(config.host.region_len));
                // The region `side` registered is swapped for one that stores nothing.
                let access = s.mr.access();
                let _ = s.nic.dereg_mr(s.mr.lkey());
                s.mr = s
                    .nic
                    .reg_memory(s.pd, sink.clone(), None, access)
                    .expect("the region's PD and rights were just accepted");
                sinks.push(sink);
            }
            sides.push(s);
        }
        // The hosts' rate, which a shared buffer's α is relative to (HPCC's `nic_rate`).
        let host_rate = host_nodes
            .iter()
            .filter_map(|&h| topology.neighbors(h).first())
            .map(|&(_, link)| topology.links()[link].rate_bps)
            .min()
            .unwrap_or(0);
        let pint = crate::switch::PintMeter::for_congestion(&config.host.nic.congestion);
        let pinted = pint.is_some();
        let switch_config = SwitchConfig {
            latency: roce_core::Duration::ZERO,
            pint,
            ..config.switch.clone()
        };
        let switches = (0..topology.node_count() as u32)
            .map(|n| {
                (topology.kind(NodeId(n)) == Some(NodeKind::Switch)).then(|| {
                    let ports = wiring.port_count(n);
                    let seed = config.seed.wrapping_add(u64::from(n));
                    let mut s = SwitchOf::new(switch_config.clone(), ports, Vec::new(), seed);
                    for p in 0..ports as u16 {
                        let peer = wiring.peer(n, p);
                        s.set_port_rate(usize::from(p), peer.rate_bps);
                        if let Some(shared) = config.switch.shared {
                            let headroom = pfc_headroom(peer.rate_bps, peer.delay);
                            let shift = alpha_shift(shared.alpha_shift, peer.rate_bps, host_rate);
                            s.set_port_headroom(usize::from(p), headroom, shift);
                        }
                    }
                    s
                })
            })
            .collect();
        let payload = config.payload;
        // PINT's header fits a slot's one line; INT's takes a second.
        let int = config.host.nic.congestion.carries_int() && !pinted;
        Ok(Self {
            port_free_at: vec![None; wiring.total_ports()],
            egress: (0..host_nodes.len()).map(|_| Egress::default()).collect(),
            routes,
            config,
            wiring,
            sides,
            host_nodes,
            switches,
            pool: PacketPool::new(payload, int, pinted),
            events: EventQueue::default(),
            now: Instant::ZERO,
            packet_hops: 0,
            unroutable: 0,
            outcome: FlowOutcome::default(),
            deadlock: None,
            buf: vec![0; MAX_DATAGRAM],
            rx: vec![0; MAX_DATAGRAM],
            sinks,
            qlen: QueueLengths::default(),
            sampling: false,
            capture: None,
        })
    }

    /// Writes every packet a host's NIC sends into `capture` from now on, stamped with the
    /// simulated time the NIC hands it over: each packet once, as its sender made it (what a
    /// switch then drops included; CE marks and per-hop copies not).
    pub fn capture(&mut self, capture: Capture) {
        self.capture = Some(capture);
    }

    /// The simulated time reached.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The routes (and through them the topology).
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// The configuration.
    pub fn config(&self) -> &NetworkConfig {
        &self.config
    }

    /// Packets that crossed a link so far (one packet over one link is one packet-hop).
    pub fn packet_hops(&self) -> u64 {
        self.packet_hops
    }

    /// Packets stored in the pool now: on a link, in a queue, or being sent.
    pub fn packets_in_flight(&self) -> usize {
        self.pool.live()
    }

    /// Events scheduled now.
    pub fn events_pending(&self) -> usize {
        self.events.len()
    }

    /// The most events that were ever scheduled at once, and the events scheduled in all.
    pub fn event_counts(&self) -> (usize, u64) {
        (self.events.peak(), self.events.pushed())
    }

    /// Bytes written into `host`'s region so far, in [`Payload::Lengths`] mode (`None` in bytes
    /// mode, or if it is no host).
    pub fn bytes_written(&self, host: NodeId) -> Option<u64> {
        let i = self.wiring.host_index(host.0)?;
        Some(self.sinks.get(i)?.written())
    }

    /// The NIC of `host`, if it is a host.
    pub fn nic(&self, host: NodeId) -> Option<&Nic> {
        let i = self.wiring.host_index(host.0)?;
        Some(&self.sides[i].nic)
    }

    /// The counters of `host`'s link, if it is a host.
    pub fn host_stats(&self, host: NodeId) -> Option<&HostStats> {
        let i = self.wiring.host_index(host.0)?;
        Some(&self.egress[i].stats)
    }

    /// The counters of `switch`'s port towards `neighbor`, if that link exists.
    pub fn port_stats(&self, switch: NodeId, neighbor: NodeId) -> Option<&PortStats> {
        let s = self.switches.get(switch.index())?.as_ref()?;
        let port = self.port_towards(switch, neighbor)?;
        Some(s.stats(port))
    }

    /// Packets the switches dropped: buffers full, or no route.
    pub fn drops(&self) -> u64 {
        let full: u64 = self
            .switches
            .iter()
            .flatten()
            .map(|s| (0..s.port_count()).map(|p| s.stats(p).drops).sum::<u64>())
            .sum();
        full + self.unroutable
    }

    fn port_towards(&self, node: NodeId, neighbor: NodeId) -> Option<usize> {
        let topology = self.routes.topology();
        topology
            .neighbors(node)
            .iter()
            .position(|&(m, _)| m == neighbor)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_deadlock;
#[cfg(test)]
mod tests_hpcc;
#[cfg(test)]
mod tests_shared;
