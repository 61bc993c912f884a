//! One direction of a simulated wire: a switch egress queue feeding a cable.
//!
//! A [`Link`] is smoltcp's `Wire` plus s2n-quic's network `Model`. Each packet offered with
//! [`Link::send`] goes through, in this order:
//!
//! 1. the armed targeted [`Fault`]s, which are exact (a dropped packet never reaches the queue);
//! 2. the filter, if one is set ([`Verdict`]);
//! 3. the egress queue: drop-tail when the frame does not fit under
//!    [`LinkConfig::queue_limit_bytes`], then RED ECN marking ([`EcnMarking`]) by the occupancy
//!    the frame finds;
//! 4. serialisation at [`LinkConfig::bandwidth_bps`], one frame after the other;
//! 5. the cable: random loss, then random corruption (one bit), then
//!    `arrival = end of serialisation + latency + jitter`, and possibly a duplicate with its own
//!    jitter.
//!
//! The link is deterministic given its seed: every offered packet draws the same fixed sequence
//! of numbers from the link's `ChaCha8Rng`, whatever the configuration and whatever happens to the
//! packet, so the numbers that decide the n-th packet's fate depend only on the seed and n.
//! Arming a fault or changing a probability therefore does not reshuffle the luck of the packets
//! around it.

mod draws;
mod faults;
mod packet;
mod queue;
mod stats;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
#[cfg(test)]
use std::net::SocketAddr;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use roce_core::{Duration, Instant};
#[cfg(test)]
use roce_wire::Qpn;
use roce_wire::{Opcode, Psn, bth};
use tracing::trace;

use crate::capture::Capture;
use crate::fault::{Fault, PacketMeta, Verdict};
use crate::scheduled::Scheduled;

use draws::{Draws, flip_one_bit, scale};
use faults::Filter;
pub use packet::{Fate, Sent, SimPacket};
pub use queue::EcnMarking;
pub use stats::LinkStats;

#[cfg(test)]
use draws::BTH_FECN_BECN;
#[cfg(test)]
use roce_wire::frame::Ecn;

/// How a [`Link`] behaves. The default is a perfect wire: [`DEFAULT_LATENCY`], infinite bandwidth,
/// an unbounded queue, nothing lost, corrupted, duplicated, reordered or marked.
///
/// Probabilities are per packet; a value at or below 0 never happens and a value at or above 1
/// always does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay, added after serialisation.
    pub latency: Duration,
    /// Serialisation rate in bits per second, counted over [`SimPacket::wire_len`]; `None` is
    /// infinitely fast (no queue ever builds, so neither drop-tail nor ECN marking happens).
    pub bandwidth_bps: Option<u64>,
    /// Drop-tail limit on the queue, in wire bytes: a frame that would take the queue above it is
    /// dropped. `None` is unbounded.
    pub queue_limit_bytes: Option<usize>,
    /// Probability that a packet is lost on the cable (after it was serialised).
    pub loss: f64,
    /// Probability that one bit of a packet's UDP payload is flipped.
    pub corrupt: f64,
    /// Probability that a packet arrives twice.
    pub duplicate: f64,
    /// Each copy's arrival is delayed by a uniform random time in `[0, reorder_jitter]`, which
    /// reorders packets closer together than that.
    pub reorder_jitter: Duration,
    /// RED ECN marking at the queue, as a DCQCN congestion point; `None` never marks.
    pub ecn: Option<EcnMarking>,
    /// The sender is a NIC's own port: the NIC is asked for its next packet only once the link
    /// has serialised the last one ([`Link::port_free_at`]), as a NIC's scheduler picks the
    /// next packet when its wire is free (the network simulator's hosts do the same). `false`
    /// (the default): everything the NIC has goes into the link's queue at once, as into a
    /// switch's egress queue, and waits there as built frames. Only a link with a
    /// [`LinkConfig::bandwidth_bps`] ever makes the sender wait, and only where the link is
    /// its NIC's one way out: a [`crate::Pair`]'s two links (a [`crate::Net`]'s node has a
    /// link per peer, and a [`crate::Fabric`]'s hosts have egress queues of their own).
    pub nic_port: bool,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            latency: DEFAULT_LATENCY,
            bandwidth_bps: None,
            queue_limit_bytes: None,
            loss: 0.0,
            corrupt: 0.0,
            duplicate: 0.0,
            reorder_jitter: Duration::ZERO,
            ecn: None,
            nic_port: false,
        }
    }
}

/// One direction of a simulated wire, deterministic given its seed. See the module
/// documentation for what happens to an offered packet.
pub struct Link {
    config: LinkConfig,
    rng: ChaCha8Rng,
    /// Copies on the cable, earliest arrival first, ties in the order they were sent.
    in_flight: BinaryHeap<Reverse<InFlight>>,
    next_seq: u64,
    /// Frames not yet fully serialised: (end of serialisation, wire bytes), in order.
    backlog: VecDeque<(Instant, usize)>,
    /// The bytes of every frame in `backlog` (kept so the queue's depth is not a walk along it).
    backlog_bytes: usize,
    /// When the last frame queued finishes serialising.
    busy_until: Instant,
    /// Armed faults, in the order they were armed.
    faults: Vec<Fault>,
    filter: Option<Filter>,
    sent: Vec<Sent>,
    stats: LinkStats,
    capture: Option<Capture>,
}

impl Link {
    /// A link with its own `ChaCha8Rng` seeded from `seed`.
    pub fn new(config: LinkConfig, seed: u64) -> Self {
        Self {
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            in_flight: BinaryHeap::new(),
            next_seq: 0,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            busy_until: Instant::ZERO,
            faults: Vec::new(),
            filter: None,
            sent: Vec::new(),
            stats: LinkStats::default(),
            capture: None,
        }
    }

    /// Offers a packet at `now`. Whatever happens to it is recorded in [`Link::sent`].
    pub fn send(&mut self, now: Instant, mut packet: SimPacket) {
        // Always the same draws, in the same order, so the n-th packet's luck depends only on
        // the seed and n.
        let draws = Draws::new(&mut self.rng);
        self.stats.offered += 1;
        let meta = PacketMeta::read(self.stats.offered, &packet.payload);
        let mut record = Sent {
            time: now,
            opcode: meta.opcode,
            dest_qp: meta.dest_qp,
            psn: meta.psn,
            ack_req: meta.ack_req,
            len: packet.payload.len(),
            fate: Fate::Delivered,
            arrival: None,
            corrupted: false,
            duplicated: false,
            ce_marked: false,
        };

        let serialised = self.transit(now, &meta, &mut packet, &draws, &mut record);
        if let Some(capture) = &self.capture {
            capture.record(now, &packet);
        }
        if let Some(end) = serialised {
            let arrival = end + self.config.latency + self.jitter(draws.jitter);
            record.arrival = Some(arrival);
            if draws.duplicate < self.config.duplicate {
                record.duplicated = true;
                self.stats.duplicated += 1;
                let copy_arrival = end + self.config.latency + self.jitter(draws.duplicate_jitter);
                self.schedule(copy_arrival, packet.clone());
            }
            self.schedule(arrival, packet);
        }
        trace!(
            index = meta.index,
            psn = meta.psn.map(Psn::value),
            opcode = meta.opcode.map(Opcode::name),
            fate = ?record.fate,
            arrival = record.arrival.map(|t| t.as_nanos()),
            corrupted = record.corrupted,
            duplicated = record.duplicated,
            ce = record.ce_marked,
            "offered"
        );
        self.sent.push(record);
    }

    /// Pops the earliest packet that has arrived by `now` (ties in the order they were sent), or
    /// `None` if none has.
    pub fn deliver(&mut self, now: Instant) -> Option<SimPacket> {
        if self.next_arrival()? > now {
            return None;
        }
        let Reverse(copy) = self
            .in_flight
            .pop()
            .expect("next_arrival found a packet in flight");
        self.stats.delivered += 1;
        let psn = bth::Packet::new_checked(&copy.item.payload[..])
            .ok()
            .map(|bth| bth.psn().value());
        trace!(psn, arrival = copy.at.as_nanos(), "arrived");
        Some(copy.item)
    }

    /// Writes every offered packet into `capture` from now on (see [`Capture`] for what is
    /// written).
    pub fn capture(&mut self, capture: Capture) {
        self.capture = Some(capture);
    }

    /// The configuration, to change it mid-run (a link that heals, a rate that drops). Changes
    /// apply to packets offered afterwards.
    pub fn config_mut(&mut self) -> &mut LinkConfig {
        &mut self.config
    }

    /// When the next packet arrives, if any is in flight.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.peek().map(|Reverse(copy)| copy.at)
    }

    /// When the sending NIC may be asked for its next packet, if it must wait: with
    /// [`LinkConfig::nic_port`], the end of the last frame's serialisation while it is after
    /// `now`; `None` when the NIC may send at `now` (and always without `nic_port`).
    pub fn port_free_at(&self, now: Instant) -> Option<Instant> {
        (self.config.nic_port && self.busy_until > now).then_some(self.busy_until)
    }

    /// Copies on the cable, not yet delivered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Every packet offered, in order.
    pub fn sent(&self) -> &[Sent] {
        &self.sent
    }

    /// The PSN of every offered packet that has a BTH, in order, dropped ones included: after a
    /// go-back-N from PSN 2 of four packets, `[0, 1, 2, 3, 2, 3]`.
    pub fn sent_psns(&self) -> Vec<u32> {
        self.sent
            .iter()
            .filter_map(|sent| sent.psn.map(Psn::value))
            .collect()
    }

    /// The counters.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// The faults still armed.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Faults, filter, queue and cable, up to the arrival time: sets `record`'s fate and marks,
    /// and returns when the frame finishes serialising if it is to be delivered.
    fn transit(
        &mut self,
        now: Instant,
        meta: &PacketMeta,
        packet: &mut SimPacket,
        draws: &Draws,
        record: &mut Sent,
    ) -> Option<Instant> {
        let (dropped, mut mark_ce, mut corrupt) = self.apply_faults(meta, packet.is_ect());
        if dropped {
            record.fate = Fate::Fault;
            self.stats.fault_drops += 1;
            return None;
        }
        if let Some(filter) = &mut self.filter {
            match filter(packet) {
                Verdict::Pass => {}
                Verdict::Drop => {
                    record.fate = Fate::Filtered;
                    self.stats.filtered += 1;
                    return None;
                }
                Verdict::MarkCe => mark_ce = true,
            }
        }

        let end = self.enqueue(now, packet, draws.red, mark_ce, record)?;

        // The cable.
        if draws.loss < self.config.loss {
            record.fate = Fate::Lost;
            self.stats.lost += 1;
            return None;
        }
        corrupt |= draws.corrupt < self.config.corrupt;
        if corrupt && flip_one_bit(&mut packet.payload, draws.bit) {
            record.corrupted = true;
            self.stats.corrupted += 1;
        }
        Some(end)
    }

    fn schedule(&mut self, arrival: Instant, packet: SimPacket) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.in_flight.push(Reverse(InFlight {
            at: arrival,
            seq,
            item: packet,
        }));
    }

    /// A uniform delay in `[0, reorder_jitter]` from one 64-bit draw.
    fn jitter(&self, draw: u64) -> Duration {
        let max = u64::try_from(self.config.reorder_jitter.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(scale(draw, u128::from(max) + 1))
    }
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("config", &self.config)
            .field("in_flight", &self.in_flight.len())
            .field("busy_until", &self.busy_until)
            .field("faults", &self.faults)
            .field("filter", &self.filter.is_some())
            .field("stats", &self.stats)
            .field("capture", &self.capture)
            .finish_non_exhaustive()
    }
}

/// One copy on the cable, ordered by arrival, then by when it was scheduled.
type InFlight = Scheduled<Instant, SimPacket>;

/// One-way delay of [`LinkConfig::default`].
pub const DEFAULT_LATENCY: Duration = Duration::from_micros(10);
// What a frame adds to its UDP payload on the wire, roce-wire's codec says: the Ethernet, IP and
// UDP headers. The preamble, FCS and inter-frame gap are not modelled: the frame is what a pcap
// shows.
pub use roce_wire::frame::{IPV4_FRAME_OVERHEAD, IPV6_FRAME_OVERHEAD};

/// An RC SEND_ONLY of 64 bytes of `fill` with a valid ICRC for `src` → `dst`, IPv4 ID 0 and DF:
/// what the link and capture tests send.
#[cfg(test)]
pub(crate) fn sealed_send_only(src: SocketAddr, dst: SocketAddr, psn: u32, fill: u8) -> SimPacket {
    use roce_wire::{BthRepr, PseudoHeader, RoceRepr, icrc};
    let mut repr = RoceRepr::new(BthRepr::new(
        Opcode::RcSendOnly,
        Qpn::new(0x11),
        Psn::new(psn),
    ));
    repr.payload_len = 64;
    let mut payload = vec![0; repr.buffer_len()];
    repr.emit(&mut payload, |data| data.fill(fill))
        .expect("a buffer of its length");
    let header = PseudoHeader::for_datagram(src, dst, 0).expect("one family");
    icrc::seal(&header, &mut payload);
    SimPacket::new(src, dst, payload)
}

#[cfg(test)]
mod tests;
