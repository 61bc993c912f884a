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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::net::SocketAddr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roce_core::{Duration, Instant};
use roce_wire::frame::Ecn;
use roce_wire::{Opcode, Psn, Qpn, bth};
use tracing::trace;

use crate::capture::Capture;
use crate::fault::{Effect, Fault, PacketMeta, Verdict};

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
        }
    }
}

/// RED-style ECN marking by queue occupancy, the DCQCN congestion point (CP).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EcnMarking {
    /// At or below this occupancy (wire bytes), nothing is marked.
    pub k_min_bytes: usize,
    /// Above this occupancy, every ECN-capable packet is marked.
    pub k_max_bytes: usize,
    /// Marking probability reached at `k_max_bytes`.
    pub p_max: f64,
}

impl EcnMarking {
    /// The probability of marking a packet that finds `queue_bytes` in the queue.
    pub fn probability(&self, queue_bytes: usize) -> f64 {
        // ../shared/roce-facts.md §B.6, CP: "p=0 if q≤Kmin; p = Pmax·(q−Kmin)/(Kmax−Kmin) if
        // Kmin<q≤Kmax; p=1 if q>Kmax" (HPCC switch-mmu.cc `ShouldSendCN`).
        if queue_bytes <= self.k_min_bytes {
            0.0
        } else if queue_bytes > self.k_max_bytes {
            1.0
        } else {
            // Here k_min < q <= k_max, so the range is not empty.
            let above = (queue_bytes - self.k_min_bytes) as f64;
            let range = (self.k_max_bytes - self.k_min_bytes) as f64;
            self.p_max * above / range
        }
    }
}

/// A RoCEv2 UDP payload and the IP/UDP fields that travel with it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SimPacket {
    /// Source address and UDP source port.
    pub src: SocketAddr,
    /// Destination address and UDP port (4791).
    pub dst: SocketAddr,
    /// The ECN bits of the IP header; the link may set them to CE.
    pub ecn: Ecn,
    /// DSCP, 0..=63.
    pub dscp: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// The UDP payload: BTH … ICRC for RoCEv2, but any bytes are carried.
    pub payload: Vec<u8>,
}

impl SimPacket {
    /// A packet with Not-ECT, DSCP 0 and TTL 64.
    pub fn new(src: SocketAddr, dst: SocketAddr, payload: Vec<u8>) -> Self {
        Self {
            src,
            dst,
            ecn: Ecn::NotEct,
            dscp: 0,
            ttl: 64,
            payload,
        }
    }

    /// The frame's length on the wire: the UDP payload plus the Ethernet, IP and UDP headers
    /// ([`IPV4_FRAME_OVERHEAD`] or [`IPV6_FRAME_OVERHEAD`], by the destination's family).
    pub fn wire_len(&self) -> usize {
        let overhead = if self.dst.is_ipv4() {
            IPV4_FRAME_OVERHEAD
        } else {
            IPV6_FRAME_OVERHEAD
        };
        self.payload.len() + overhead
    }

    /// Whether the packet is ECN-capable, ECT(0) or ECT(1): only those may be marked CE.
    pub fn is_ect(&self) -> bool {
        matches!(self.ecn, Ecn::Ect0 | Ecn::Ect1)
    }
}

/// What became of an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fate {
    /// Put on the cable; it arrives at [`Sent::arrival`].
    Delivered,
    /// Lost on the cable by random loss.
    Lost,
    /// Dropped at the tail of a full queue.
    QueueFull,
    /// Dropped by a targeted [`Fault`].
    Fault,
    /// Dropped by the filter.
    Filtered,
}

/// The record of one offered packet. Its BTH fields are read from the packet as offered,
/// before any corruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sent {
    /// When it was offered.
    pub time: Instant,
    /// BTH opcode, `None` if the payload is shorter than a BTH.
    pub opcode: Option<Opcode>,
    /// BTH destination QP.
    pub dest_qp: Option<Qpn>,
    /// BTH PSN.
    pub psn: Option<Psn>,
    /// Bytes of UDP payload.
    pub len: usize,
    /// What became of it.
    pub fate: Fate,
    /// When its first copy arrives, if it was delivered.
    pub arrival: Option<Instant>,
    /// One bit was flipped.
    pub corrupted: bool,
    /// A second copy was delivered too.
    pub duplicated: bool,
    /// The link set ECN to CE.
    pub ce_marked: bool,
}

/// Counters of a [`Link`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LinkStats {
    /// Packets offered with [`Link::send`].
    pub offered: u64,
    /// Copies handed out by [`Link::deliver`], duplicates included.
    pub delivered: u64,
    /// Packets lost at random.
    pub lost: u64,
    /// Packets dropped at the tail of a full queue.
    pub queue_drops: u64,
    /// Packets dropped by targeted faults.
    pub fault_drops: u64,
    /// Packets dropped by the filter.
    pub filtered: u64,
    /// Packets with a bit flipped.
    pub corrupted: u64,
    /// Packets sent twice.
    pub duplicated: u64,
    /// Packets the link marked CE.
    pub ce_marked: u64,
    /// The largest queue occupancy reached, in wire bytes.
    pub max_queue_bytes: usize,
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
        let psn = bth::Packet::new_checked(&copy.packet.payload[..])
            .ok()
            .map(|bth| bth.psn().value());
        trace!(psn, arrival = copy.arrival.as_nanos(), "arrived");
        Some(copy.packet)
    }

    /// Arms a targeted fault. Faults are tried in the order they were armed; at most one drop
    /// fault fires per packet, and a packet a fault dropped does not use up `MarkCe` or `Corrupt`
    /// faults.
    pub fn fail(&mut self, fault: Fault) {
        self.faults.push(fault);
    }

    /// Sets the filter that sees every packet no fault dropped (s2n-quic's interceptor),
    /// replacing any earlier one.
    pub fn set_filter(&mut self, filter: impl FnMut(&SimPacket) -> Verdict + 'static) {
        self.filter = Some(Box::new(filter));
    }

    /// Removes the filter.
    pub fn clear_filter(&mut self) {
        self.filter = None;
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
        self.in_flight.peek().map(|Reverse(copy)| copy.arrival)
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

    /// Queue occupancy at `now`: the wire bytes of the frames offered but not yet fully
    /// serialised. A frame counts in full until its last bit has left.
    pub fn queue_bytes(&self, now: Instant) -> usize {
        // Frames serialise back to back, so their end times increase along the backlog: those
        // already on the wire are at its front.
        let gone: usize = self
            .backlog
            .iter()
            .take_while(|(end, _)| *end <= now)
            .map(|(_, bytes)| bytes)
            .sum();
        self.backlog_bytes - gone
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

        // The egress queue.
        while let Some(&(end, bytes)) = self.backlog.front()
            && end <= now
        {
            self.backlog.pop_front();
            self.backlog_bytes -= bytes;
        }
        let queued = self.queue_bytes(now);
        let wire_len = packet.wire_len();
        if self
            .config
            .queue_limit_bytes
            .is_some_and(|limit| queued + wire_len > limit)
        {
            record.fate = Fate::QueueFull;
            self.stats.queue_drops += 1;
            return None;
        }
        if let Some(red) = &self.config.ecn {
            mark_ce |= draws.red < red.probability(queued);
        }
        // Only ECN-capable packets are marked (RFC 3168 §5); CE stays CE.
        if mark_ce && packet.is_ect() {
            packet.ecn = Ecn::Ce;
            record.ce_marked = true;
            self.stats.ce_marked += 1;
        }
        let start = now.max(self.busy_until);
        let end = start + self.serialisation(wire_len);
        self.busy_until = end;
        if end > now {
            self.backlog.push_back((end, wire_len));
            self.backlog_bytes += wire_len;
        }
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(queued + wire_len);

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

    /// Fires the faults that match: returns whether one dropped the packet, and whether one
    /// marks or corrupts it.
    fn apply_faults(&mut self, meta: &PacketMeta, ect: bool) -> (bool, bool, bool) {
        if let Some(i) = self
            .faults
            .iter()
            .position(|fault| fault.effect_on(meta, ect) == Some(Effect::Drop))
        {
            self.fire(i);
            return (true, false, false);
        }
        let mut fire_first = |effect| {
            let found = self
                .faults
                .iter()
                .position(|fault| fault.effect_on(meta, ect) == Some(effect));
            found.map(|i| self.fire(i)).is_some()
        };
        let mark_ce = fire_first(Effect::MarkCe);
        let corrupt = fire_first(Effect::Corrupt);
        (false, mark_ce, corrupt)
    }

    /// Records that fault `i` fired, disarming it once used up.
    fn fire(&mut self, i: usize) {
        if !self.faults[i].fire() {
            let fault = self.faults.remove(i);
            trace!(fault = ?fault, "fault used up");
        }
    }

    fn schedule(&mut self, arrival: Instant, packet: SimPacket) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.in_flight.push(Reverse(InFlight {
            arrival,
            seq,
            packet,
        }));
    }

    /// Time to put `wire_len` bytes on the wire, rounded up to the nanosecond.
    fn serialisation(&self, wire_len: usize) -> Duration {
        let Some(bps) = self.config.bandwidth_bps else {
            return Duration::ZERO;
        };
        if bps == 0 {
            return Duration::MAX;
        }
        let bits = wire_len as u128 * 8;
        let nanos = (bits * NANOS_PER_SEC).div_ceil(u128::from(bps));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
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

/// The interceptor of [`Link::set_filter`].
type Filter = Box<dyn FnMut(&SimPacket) -> Verdict>;

/// One copy on the cable, ordered by arrival, then by when it was scheduled.
#[derive(Debug)]
struct InFlight {
    arrival: Instant,
    seq: u64,
    packet: SimPacket,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.arrival, self.seq) == (other.arrival, other.seq)
    }
}

impl Eq for InFlight {}

impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InFlight {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.arrival, self.seq).cmp(&(other.arrival, other.seq))
    }
}

/// The random numbers one offered packet uses, drawn in this order whether they are needed or
/// not.
#[derive(Debug, Clone, Copy)]
struct Draws {
    loss: f64,
    corrupt: f64,
    bit: u64,
    duplicate: f64,
    jitter: u64,
    duplicate_jitter: u64,
    red: f64,
}

impl Draws {
    fn new(rng: &mut ChaCha8Rng) -> Self {
        // Struct fields are evaluated in the order written: that is the draw order.
        Self {
            loss: rng.random(),
            corrupt: rng.random(),
            bit: rng.random(),
            duplicate: rng.random(),
            jitter: rng.random(),
            duplicate_jitter: rng.random(),
            red: rng.random(),
        }
    }
}

/// Flips one bit of `payload`, chosen by `draw` among the bits the ICRC covers, so that the
/// receiver must notice. Returns false for an empty payload.
fn flip_one_bit(payload: &mut [u8], draw: u64) -> bool {
    // The ICRC replaces BTH byte 4 (FECN, BECN, reserved) with ones before hashing (IBA vol. 1
    // Annex A17.4.3; rxe_icrc.c), so a flip there would go unnoticed: skip it when the payload
    // is long enough to hold a BTH.
    let skip = payload.len() >= bth::HEADER_LEN;
    let bytes = payload.len() - usize::from(skip);
    if bytes == 0 {
        return false;
    }
    let bit = scale(draw, bytes as u128 * 8);
    let Ok(mut byte) = usize::try_from(bit / 8) else {
        return false;
    };
    if skip && byte >= BTH_FECN_BECN {
        byte += 1;
    }
    payload[byte] ^= 1 << (bit % 8);
    true
}

/// Maps a uniform 64-bit draw onto `0..n` (Lemire's multiply-shift; `n` up to 2^64).
fn scale(draw: u64, n: u128) -> u64 {
    u64::try_from((u128::from(draw) * n) >> 64).expect("a draw below 2^64 scaled by n <= 2^64")
}

/// One-way delay of [`LinkConfig::default`].
pub const DEFAULT_LATENCY: Duration = Duration::from_micros(10);
// What a frame adds to its UDP payload on the wire, roce-wire's codec says: the Ethernet, IP and
// UDP headers. The preamble, FCS and inter-frame gap are not modelled: the frame is what a pcap
// shows.
pub use roce_wire::frame::{IPV4_FRAME_OVERHEAD, IPV6_FRAME_OVERHEAD};

/// Offset of the BTH's FECN/BECN byte, which the ICRC does not cover.
const BTH_FECN_BECN: usize = 4;
const NANOS_PER_SEC: u128 = 1_000_000_000;

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
mod tests {
    use std::net::SocketAddr;

    use proptest::prelude::*;
    use roce_wire::icrc::{self, PseudoHeader};
    use roce_wire::{AethRepr, AtomicAckEthRepr, BthRepr, RoceRepr};

    use super::*;

    const A: &str = "10.0.0.1:49152";
    const B: &str = "10.0.0.2:4791";

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn us(micros: u64) -> Instant {
        Instant::from_micros(micros)
    }

    fn ns(nanos: u64) -> Instant {
        Instant::from_nanos(nanos)
    }

    /// A packet of `wire_len` bytes on the wire whose payload starts with a BTH.
    fn packet(opcode: Opcode, psn: u32, wire_len: usize) -> SimPacket {
        let mut payload = vec![0; wire_len - IPV4_FRAME_OVERHEAD];
        BthRepr::new(opcode, Qpn::new(0x11), Psn::new(psn))
            .emit(&mut bth::Packet::new_unchecked(&mut payload[..]));
        SimPacket::new(addr(A), addr(B), payload)
    }

    fn send_psn(psn: u32) -> SimPacket {
        packet(Opcode::RcSendOnly, psn, 100)
    }

    fn with_ecn(packet: SimPacket, ecn: Ecn) -> SimPacket {
        SimPacket { ecn, ..packet }
    }

    /// An RC SEND_ONLY with 64 bytes of payload and a valid ICRC for A → B, IPv4 ID 0, DF.
    fn sealed(psn: u32) -> SimPacket {
        sealed_send_only(addr(A), addr(B), psn, 0x5a)
    }

    fn pseudo_header() -> PseudoHeader {
        PseudoHeader::for_datagram(addr(A), addr(B), 0).expect("one family")
    }

    /// Everything that arrives by `until`, with its arrival time, in delivery order.
    fn drain(link: &mut Link, until: Instant) -> Vec<(Instant, SimPacket)> {
        let mut out = Vec::new();
        while let Some(at) = link.next_arrival().filter(|&at| at <= until) {
            let packet = link.deliver(at).expect("due at its arrival time");
            out.push((at, packet));
        }
        out
    }

    fn psn_of(packet: &SimPacket) -> u32 {
        bth::Packet::new_checked(&packet.payload[..])
            .unwrap()
            .psn()
            .value()
    }

    fn fates(link: &Link) -> Vec<Fate> {
        link.sent().iter().map(|sent| sent.fate).collect()
    }

    fn bits_differing(a: &[u8], b: &[u8]) -> u32 {
        a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
    }

    // Timing.

    #[test]
    fn a_perfect_wire_delivers_after_exactly_the_latency() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.send(us(3), send_psn(0));
        assert_eq!(link.next_arrival(), Some(us(13)));
        assert_eq!(link.deliver(ns(12_999)), None, "not before its time");
        assert_eq!(link.deliver(us(13)), Some(send_psn(0)));
        assert_eq!(link.deliver(us(100)), None);
        assert_eq!(link.next_arrival(), None);
        assert_eq!(link.sent()[0].arrival, Some(us(13)));
        assert_eq!(link.stats().delivered, 1);
    }

    #[test]
    fn frames_serialise_back_to_back_at_the_bandwidth() {
        // 8 Gb/s is one byte per nanosecond: a 1000-byte frame takes 1 µs.
        let config = LinkConfig {
            bandwidth_bps: Some(8_000_000_000),
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 0);
        link.send(us(0), packet(Opcode::RcSendOnly, 0, 1000));
        link.send(us(0), packet(Opcode::RcSendOnly, 1, 1000));
        link.send(ns(500), packet(Opcode::RcSendOnly, 2, 500));
        // The wire is idle again by then: starts at once.
        link.send(us(5), packet(Opcode::RcSendOnly, 3, 1000));

        let arrivals: Vec<_> = link.sent().iter().map(|s| s.arrival.unwrap()).collect();
        assert_eq!(arrivals, [ns(11_000), ns(12_000), ns(12_500), ns(16_000)]);
        let delivered: Vec<_> = drain(&mut link, Instant::MAX)
            .iter()
            .map(|(at, p)| (*at, psn_of(p)))
            .collect();
        assert_eq!(
            delivered,
            [
                (ns(11_000), 0),
                (ns(12_000), 1),
                (ns(12_500), 2),
                (ns(16_000), 3)
            ]
        );
    }

    #[test]
    fn serialisation_counts_the_frame_headers_and_rounds_up() {
        // 1 Gb/s: a 100-byte payload is a 142-byte frame, 1136 ns.
        let config = LinkConfig {
            bandwidth_bps: Some(1_000_000_000),
            latency: Duration::ZERO,
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 0);
        link.send(
            Instant::ZERO,
            SimPacket::new(addr(A), addr(B), vec![0; 100]),
        );
        assert_eq!(link.next_arrival(), Some(ns(1_136)));
        // 3 Gb/s: 8 bits of a 1-byte payload plus headers, 43 × 8 / 3 = 114.67 ns → 115.
        link.config_mut().bandwidth_bps = Some(3_000_000_000);
        link.send(us(10), SimPacket::new(addr(A), addr(B), vec![0; 1]));
        assert_eq!(link.sent()[1].arrival, Some(ns(10_115)));
        // IPv6 frames carry 20 more header bytes.
        let v6 = SimPacket::new(addr("[fd00::1]:1"), addr("[fd00::2]:4791"), vec![0; 100]);
        assert_eq!(v6.wire_len(), 162);
    }

    // The queue.

    #[test]
    fn queue_holds_each_frame_until_its_last_bit_has_left() {
        let config = LinkConfig {
            bandwidth_bps: Some(8_000_000_000),
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 0);
        for psn in 0..3 {
            link.send(us(0), packet(Opcode::RcSendOnly, psn, 1000));
        }
        assert_eq!(link.queue_bytes(us(0)), 3000);
        assert_eq!(link.queue_bytes(ns(999)), 3000);
        assert_eq!(link.queue_bytes(ns(1_000)), 2000);
        assert_eq!(link.queue_bytes(ns(2_500)), 1000);
        assert_eq!(link.queue_bytes(ns(3_000)), 0);
        assert_eq!(link.stats().max_queue_bytes, 3000);
    }

    #[test]
    fn an_infinitely_fast_link_never_queues() {
        let mut link = Link::new(LinkConfig::default(), 0);
        for psn in 0..10 {
            link.send(us(0), send_psn(psn));
        }
        assert_eq!(link.queue_bytes(us(0)), 0);
        assert_eq!(link.stats().max_queue_bytes, 100);
    }

    #[test]
    fn drop_tail_drops_the_frame_that_does_not_fit() {
        let config = LinkConfig {
            bandwidth_bps: Some(8_000_000_000),
            queue_limit_bytes: Some(3000),
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 0);
        for psn in 0..4 {
            link.send(us(0), packet(Opcode::RcSendOnly, psn, 1000));
        }
        // Exactly at the limit fits; one byte more does not.
        assert_eq!(
            fates(&link),
            [
                Fate::Delivered,
                Fate::Delivered,
                Fate::Delivered,
                Fate::QueueFull
            ]
        );
        link.send(ns(999), SimPacket::new(addr(A), addr(B), vec![0; 1]));
        assert_eq!(link.sent()[4].fate, Fate::QueueFull);
        // Once the first frame has left there is room for one more.
        link.send(ns(1_000), packet(Opcode::RcSendOnly, 5, 1000));
        link.send(ns(1_000), packet(Opcode::RcSendOnly, 6, 1000));
        assert_eq!(link.sent()[5].fate, Fate::Delivered);
        assert_eq!(link.sent()[6].fate, Fate::QueueFull);
        assert_eq!(link.stats().queue_drops, 3);
        assert_eq!(link.stats().max_queue_bytes, 3000);
        let delivered: Vec<_> = drain(&mut link, Instant::MAX)
            .iter()
            .map(|(_, p)| psn_of(p))
            .collect();
        assert_eq!(delivered, [0, 1, 2, 5]);
    }

    // RED ECN marking.

    #[test]
    fn red_probability_follows_the_dcqcn_congestion_point() {
        let red = EcnMarking {
            k_min_bytes: 1000,
            k_max_bytes: 3000,
            p_max: 0.5,
        };
        assert_eq!(red.probability(0), 0.0);
        assert_eq!(red.probability(1000), 0.0);
        assert_eq!(red.probability(2000), 0.25);
        assert_eq!(red.probability(3000), 0.5);
        assert_eq!(red.probability(3001), 1.0);
        let step = EcnMarking {
            k_min_bytes: 1000,
            k_max_bytes: 1000,
            p_max: 0.5,
        };
        assert_eq!((step.probability(1000), step.probability(1001)), (0.0, 1.0));
    }

    /// Offers `trials` packets with `ecn`, each finding `fillers` 1000-byte frames ahead of it in
    /// the queue; returns how many the link marked.
    fn marks_behind(fillers: usize, ecn: Ecn, trials: u64) -> u64 {
        let config = LinkConfig {
            bandwidth_bps: Some(8_000_000_000),
            ecn: Some(EcnMarking {
                k_min_bytes: 1000,
                k_max_bytes: 3000,
                p_max: 0.5,
            }),
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 7);
        let mut marked = 0;
        for trial in 0..trials {
            // 1 ms apart: the queue has drained between trials.
            let now = Instant::from_millis(trial);
            for _ in 0..fillers {
                link.send(now, packet(Opcode::RcSendMiddle, 0, 1000));
            }
            link.send(now, with_ecn(packet(Opcode::RcSendLast, 1, 1000), ecn));
            let probe = link.sent().last().unwrap();
            marked += u64::from(probe.ce_marked);
        }
        // Not-ECT fillers are never marked, whatever the queue.
        assert_eq!(link.stats().ce_marked, marked);
        for (at, delivered) in drain(&mut link, Instant::MAX) {
            let probe = bth::Packet::new_checked(&delivered.payload[..])
                .unwrap()
                .opcode()
                == Opcode::RcSendLast;
            let ce = delivered.ecn == Ecn::Ce;
            assert!(probe || !ce, "filler marked at {at}");
        }
        marked
    }

    #[test]
    fn nothing_is_marked_at_or_below_k_min() {
        assert_eq!(marks_behind(0, Ecn::Ect0, 1000), 0);
        assert_eq!(marks_behind(1, Ecn::Ect0, 1000), 0);
    }

    #[test]
    fn everything_ecn_capable_is_marked_above_k_max() {
        assert_eq!(marks_behind(4, Ecn::Ect0, 1000), 1000);
        assert_eq!(marks_behind(4, Ecn::Ect1, 1000), 1000);
    }

    #[test]
    fn half_p_max_is_marked_halfway_between_k_min_and_k_max() {
        // 2000 bytes ahead: p = 0.5 × (2000 − 1000) / (3000 − 1000) = 0.25; σ ≈ 27 in 4000.
        let marked = marks_behind(2, Ecn::Ect0, 4000);
        assert!((900..=1100).contains(&marked), "{marked} of 4000 marked");
    }

    #[test]
    fn not_ect_is_never_marked_and_ce_is_not_marked_again() {
        assert_eq!(marks_behind(4, Ecn::NotEct, 1000), 0);
        assert_eq!(marks_behind(4, Ecn::Ce, 1000), 0);
    }

    // Random loss, duplication, reordering, corruption.

    #[test]
    fn loss_rate_is_the_configured_one() {
        let config = LinkConfig {
            loss: 0.1,
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 42);
        for i in 0..10_000 {
            link.send(ns(i), send_psn(i as u32));
        }
        let lost = link.stats().lost;
        // σ = 30 in 10 000.
        assert!((900..=1100).contains(&lost), "{lost} of 10000 lost");
        assert_eq!(drain(&mut link, Instant::MAX).len() as u64, 10_000 - lost);
        assert_eq!(link.stats().delivered, 10_000 - lost);
        let lost_records = link.sent().iter().filter(|s| s.fate == Fate::Lost).count();
        assert_eq!(lost_records as u64, lost);
        assert!(
            link.sent()
                .iter()
                .all(|s| (s.fate == Fate::Lost) == s.arrival.is_none())
        );
    }

    /// A run over a link that does everything at random: what it recorded and the PSNs in the
    /// order they arrived.
    fn noisy_run(seed: u64) -> (Vec<Sent>, Vec<(Instant, u32)>) {
        let config = LinkConfig {
            bandwidth_bps: Some(10_000_000_000),
            queue_limit_bytes: Some(20_000),
            loss: 0.1,
            corrupt: 0.1,
            duplicate: 0.1,
            reorder_jitter: Duration::from_micros(2),
            ecn: Some(EcnMarking {
                k_min_bytes: 2000,
                k_max_bytes: 10_000,
                p_max: 0.2,
            }),
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, seed);
        for i in 0..500 {
            let packet = with_ecn(packet(Opcode::RcSendMiddle, i, 1042), Ecn::Ect0);
            link.send(ns(u64::from(i) * 500), packet);
        }
        let order = drain(&mut link, Instant::MAX)
            .iter()
            .map(|(at, p)| (*at, p.payload.len() as u32 ^ psn_of(p)))
            .collect();
        (link.sent().to_vec(), order)
    }

    #[test]
    fn the_same_seed_gives_the_same_run_and_another_seed_another() {
        let (sent, order) = noisy_run(5);
        assert_eq!(noisy_run(5), (sent.clone(), order.clone()));
        let (other_sent, other_order) = noisy_run(6);
        assert_ne!(sent, other_sent);
        assert_ne!(order, other_order);
        // The run exercised every mechanism.
        for fate in [Fate::Delivered, Fate::Lost, Fate::QueueFull] {
            assert!(sent.iter().any(|s| s.fate == fate), "{fate:?}");
        }
        assert!(sent.iter().any(|s| s.corrupted));
        assert!(sent.iter().any(|s| s.duplicated));
        assert!(sent.iter().any(|s| s.ce_marked));
    }

    #[test]
    fn a_targeted_fault_does_not_reshuffle_the_luck_of_the_others() {
        let config = LinkConfig {
            loss: 0.3,
            reorder_jitter: Duration::from_micros(1),
            ..LinkConfig::default()
        };
        let run = |fault: Option<Fault>| {
            let mut link = Link::new(config, 3);
            if let Some(fault) = fault {
                link.fail(fault);
            }
            for i in 0..100 {
                link.send(us(u64::from(i)), send_psn(i));
            }
            link.sent().to_vec()
        };
        let plain = run(None);
        let faulted = run(Some(Fault::DropNth { n: 5 }));
        assert_eq!(faulted[4].fate, Fate::Fault);
        for (i, (a, b)) in plain.iter().zip(&faulted).enumerate() {
            if i != 4 {
                assert_eq!(a, b, "packet {i}");
            }
        }
    }

    #[test]
    fn jitter_reorders_packets_sent_closer_than_it() {
        let config = LinkConfig {
            reorder_jitter: Duration::from_micros(5),
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 0);
        for i in 0..100 {
            link.send(ns(u64::from(i) * 100), send_psn(i));
        }
        for sent in link.sent() {
            let delay = sent.arrival.unwrap() - sent.time;
            assert!(
                delay >= DEFAULT_LATENCY && delay <= DEFAULT_LATENCY + Duration::from_micros(5)
            );
        }
        let order: Vec<_> = drain(&mut link, Instant::MAX)
            .iter()
            .map(|(_, p)| psn_of(p))
            .collect();
        assert_eq!(order.len(), 100);
        assert!(order.windows(2).any(|w| w[0] > w[1]), "{order:?}");
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn without_jitter_simultaneous_arrivals_keep_send_order() {
        let mut link = Link::new(LinkConfig::default(), 0);
        for psn in 0..50 {
            link.send(us(0), send_psn(psn));
        }
        assert_eq!(link.in_flight(), 50);
        let order: Vec<_> = drain(&mut link, us(10))
            .iter()
            .map(|(_, p)| psn_of(p))
            .collect();
        assert_eq!(order, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn duplication_delivers_two_identical_copies() {
        let config = LinkConfig {
            duplicate: 1.0,
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 0);
        link.send(us(0), send_psn(0));
        link.send(us(1), send_psn(1));
        let delivered: Vec<_> = drain(&mut link, Instant::MAX)
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        assert_eq!(
            delivered,
            [send_psn(0), send_psn(0), send_psn(1), send_psn(1)]
        );
        assert!(link.sent().iter().all(|s| s.duplicated));
        assert_eq!(link.stats().duplicated, 2);
        assert_eq!(link.stats().delivered, 4);
    }

    #[test]
    fn corruption_flips_exactly_one_bit_that_the_icrc_catches() {
        let config = LinkConfig {
            corrupt: 1.0,
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 9);
        for psn in 0..2000 {
            link.send(ns(u64::from(psn)), sealed(psn));
        }
        let delivered = drain(&mut link, Instant::MAX);
        assert_eq!(delivered.len(), 2000);
        let mut flipped_bytes = std::collections::HashSet::new();
        for (i, (_, packet)) in delivered.iter().enumerate() {
            let original = sealed(i as u32);
            assert_eq!(bits_differing(&packet.payload, &original.payload), 1);
            let byte = packet
                .payload
                .iter()
                .zip(&original.payload)
                .position(|(x, y)| x != y)
                .unwrap();
            assert_ne!(byte, BTH_FECN_BECN, "a bit the ICRC does not cover");
            flipped_bytes.insert(byte);
            assert!(icrc::verify(&pseudo_header(), &packet.payload).is_err());
        }
        // Anywhere in the packet: headers, payload and ICRC alike.
        assert_eq!(flipped_bytes.len(), original_len() - 1);
        assert_eq!(link.stats().corrupted, 2000);
        assert!(icrc::verify(&pseudo_header(), &sealed(0).payload).is_ok());
    }

    fn original_len() -> usize {
        sealed(0).payload.len()
    }

    #[test]
    fn corruption_of_short_and_empty_payloads() {
        let config = LinkConfig {
            corrupt: 1.0,
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, 0);
        link.send(us(0), SimPacket::new(addr(A), addr(B), vec![0; 3]));
        link.send(us(0), SimPacket::new(addr(A), addr(B), vec![]));
        let delivered = drain(&mut link, Instant::MAX);
        assert_eq!(bits_differing(&delivered[0].1.payload, &[0; 3]), 1);
        assert!(delivered[1].1.payload.is_empty());
        assert!(link.sent()[0].corrupted);
        assert!(!link.sent()[1].corrupted, "nothing to flip");
    }

    #[test]
    fn a_payload_that_is_not_roce_is_carried_without_a_psn() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.send(us(0), send_psn(4));
        link.send(us(0), SimPacket::new(addr(A), addr(B), b"hello".to_vec()));
        link.send(us(0), send_psn(5));
        let second = link.sent()[1];
        assert_eq!(
            (second.opcode, second.dest_qp, second.psn),
            (None, None, None)
        );
        assert_eq!(second.len, 5);
        assert_eq!(link.sent_psns(), [4, 5]);
        assert_eq!(drain(&mut link, Instant::MAX)[1].1.payload, b"hello");
    }

    // Targeted faults.

    #[test]
    fn drop_psn_once_drops_only_the_first_packet_with_that_psn() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.fail(Fault::DropPsn {
            psn: Psn::new(2),
            times: 1,
        });
        // Go-back-N from PSN 2.
        for psn in [0, 1, 2, 3, 2, 3] {
            link.send(us(0), send_psn(psn));
        }
        assert_eq!(link.sent_psns(), [0, 1, 2, 3, 2, 3], "the dropped one too");
        assert_eq!(
            fates(&link),
            [
                Fate::Delivered,
                Fate::Delivered,
                Fate::Fault,
                Fate::Delivered,
                Fate::Delivered,
                Fate::Delivered
            ]
        );
        let delivered: Vec<_> = drain(&mut link, Instant::MAX)
            .iter()
            .map(|(_, p)| psn_of(p))
            .collect();
        assert_eq!(delivered, [0, 1, 3, 2, 3]);
        assert_eq!(link.stats().fault_drops, 1);
        assert!(link.faults().is_empty());
    }

    #[test]
    fn drop_psn_twice_drops_the_retransmission_too() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.fail(Fault::DropPsn {
            psn: Psn::new(2),
            times: 2,
        });
        for psn in [2, 3, 2, 2] {
            link.send(us(0), send_psn(psn));
        }
        assert_eq!(
            fates(&link),
            [Fate::Fault, Fate::Delivered, Fate::Fault, Fate::Delivered]
        );
    }

    #[test]
    fn drop_nth_drops_the_nth_offered_packet_counting_from_one() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.fail(Fault::DropNth { n: 3 });
        link.fail(Fault::DropNth { n: 1 });
        for psn in 0..5 {
            link.send(us(0), send_psn(psn));
        }
        link.fail(Fault::DropNth { n: 2 }); // already gone by: never fires
        link.send(us(0), send_psn(5));
        assert_eq!(
            fates(&link),
            [
                Fate::Fault,
                Fate::Delivered,
                Fate::Fault,
                Fate::Delivered,
                Fate::Delivered,
                Fate::Delivered
            ]
        );
        assert_eq!(link.faults(), [Fault::DropNth { n: 2 }]);
    }

    #[test]
    fn drop_next_ack_drops_one_acknowledgement_and_no_request() {
        let opcodes = [
            Opcode::RcSendOnly,
            Opcode::RcRdmaReadRequest,
            Opcode::RcAcknowledge,
            Opcode::RcAcknowledge,
        ];
        let mut link = Link::new(LinkConfig::default(), 0);
        link.fail(Fault::DropNextAck);
        for (psn, opcode) in opcodes.into_iter().enumerate() {
            link.send(us(0), packet(opcode, psn as u32, 100));
        }
        assert_eq!(
            fates(&link),
            [
                Fate::Delivered,
                Fate::Delivered,
                Fate::Fault,
                Fate::Delivered
            ]
        );

        // A READ response and an ATOMIC ACKNOWLEDGE acknowledge too.
        for ack in [Opcode::RcRdmaReadResponseFirst, Opcode::RcAtomicAcknowledge] {
            let mut link = Link::new(LinkConfig::default(), 0);
            link.fail(Fault::DropNextAck);
            link.send(us(0), packet(Opcode::RcSendOnly, 0, 100));
            link.send(us(0), real_ack(ack));
            assert_eq!(fates(&link), [Fate::Delivered, Fate::Fault], "{ack}");
        }
    }

    /// A well-formed acknowledgement packet with `opcode`.
    fn real_ack(opcode: Opcode) -> SimPacket {
        let mut repr = RoceRepr::new(BthRepr::new(opcode, Qpn::new(0x11), Psn::new(9)));
        repr.aeth = Some(AethRepr::ack(1));
        if opcode == Opcode::RcAtomicAcknowledge {
            repr.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: 7 });
        } else {
            repr.payload_len = 256;
        }
        let mut payload = vec![0; repr.buffer_len()];
        repr.emit(&mut payload, |_| {}).unwrap();
        icrc::seal(&pseudo_header(), &mut payload);
        SimPacket::new(addr(A), addr(B), payload)
    }

    #[test]
    fn drop_opcode_drops_that_opcode_times_times() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.fail(Fault::DropOpcode {
            opcode: Opcode::RcAcknowledge,
            times: 2,
        });
        let opcodes = [
            Opcode::RcAcknowledge,
            Opcode::RcSendOnly,
            Opcode::RcAcknowledge,
            Opcode::RcAcknowledge,
        ];
        for opcode in opcodes {
            link.send(us(0), packet(opcode, 0, 100));
        }
        assert_eq!(
            fates(&link),
            [Fate::Fault, Fate::Delivered, Fate::Fault, Fate::Delivered]
        );
    }

    #[test]
    fn mark_ce_marks_the_next_ecn_capable_packet_with_that_psn_once() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.fail(Fault::MarkCe { psn: Psn::new(1) });
        link.send(us(0), with_ecn(send_psn(0), Ecn::Ect0));
        link.send(us(0), send_psn(1)); // Not-ECT: left alone
        link.send(us(0), with_ecn(send_psn(1), Ecn::Ect0));
        link.send(us(0), with_ecn(send_psn(1), Ecn::Ect0));
        let ecn: Vec<_> = drain(&mut link, Instant::MAX)
            .iter()
            .map(|(_, p)| p.ecn)
            .collect();
        assert_eq!(ecn, [Ecn::Ect0, Ecn::NotEct, Ecn::Ce, Ecn::Ect0]);
        let marked: Vec<_> = link.sent().iter().map(|s| s.ce_marked).collect();
        assert_eq!(marked, [false, false, true, false]);
        assert_eq!(link.stats().ce_marked, 1);
    }

    #[test]
    fn corrupt_flips_one_bit_of_the_next_packet_with_that_psn() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.fail(Fault::Corrupt { psn: Psn::new(1) });
        for psn in [0, 1, 1] {
            link.send(us(0), sealed(psn));
        }
        let delivered = drain(&mut link, Instant::MAX);
        let broken: Vec<_> = delivered
            .iter()
            .map(|(_, p)| icrc::verify(&pseudo_header(), &p.payload).is_err())
            .collect();
        assert_eq!(broken, [false, true, false]);
        assert_eq!(
            bits_differing(&delivered[1].1.payload, &sealed(1).payload),
            1
        );
        assert!(link.sent()[1].corrupted);
    }

    #[test]
    fn a_packet_dropped_by_a_fault_keeps_the_mark_for_its_retransmission() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.fail(Fault::DropPsn {
            psn: Psn::new(1),
            times: 1,
        });
        link.fail(Fault::MarkCe { psn: Psn::new(1) });
        link.send(us(0), with_ecn(send_psn(1), Ecn::Ect0));
        link.send(us(0), with_ecn(send_psn(1), Ecn::Ect0));
        assert_eq!(fates(&link), [Fate::Fault, Fate::Delivered]);
        assert!(link.sent()[1].ce_marked);
    }

    // The filter.

    #[test]
    fn the_filter_sees_what_faults_left_and_decides() {
        let mut link = Link::new(LinkConfig::default(), 0);
        link.fail(Fault::DropNth { n: 1 });
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let log = seen.clone();
        link.set_filter(move |packet| {
            let psn = psn_of(packet);
            log.borrow_mut().push(psn);
            match psn {
                2 => Verdict::Drop,
                3 => Verdict::MarkCe,
                _ => Verdict::Pass,
            }
        });
        for psn in 0..5 {
            link.send(us(0), with_ecn(send_psn(psn), Ecn::Ect1));
        }
        assert_eq!(*seen.borrow(), [1, 2, 3, 4]);
        assert_eq!(
            fates(&link),
            [
                Fate::Fault,
                Fate::Delivered,
                Fate::Filtered,
                Fate::Delivered,
                Fate::Delivered
            ]
        );
        assert!(link.sent()[3].ce_marked);
        assert_eq!(link.stats().filtered, 1);

        link.clear_filter();
        link.send(us(0), send_psn(2));
        assert_eq!(link.sent()[5].fate, Fate::Delivered);
    }

    // Any bytes.

    proptest! {
        #[test]
        fn any_payloads_under_any_faults_are_carried_and_accounted_for(
            payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 1..40),
            loss in 0.0..1.0f64,
            corrupt in 0.0..1.0f64,
            duplicate in 0.0..1.0f64,
            ecn in 0u8..4,
            seed in any::<u64>(),
        ) {
            let config = LinkConfig {
                bandwidth_bps: Some(1_000_000_000),
                queue_limit_bytes: Some(1000),
                loss,
                corrupt,
                duplicate,
                reorder_jitter: Duration::from_micros(1),
                ecn: Some(EcnMarking { k_min_bytes: 100, k_max_bytes: 500, p_max: 0.5 }),
                ..LinkConfig::default()
            };
            let mut link = Link::new(config, seed);
            link.fail(Fault::DropPsn { psn: Psn::new(0), times: 1 });
            link.fail(Fault::DropNextAck);
            link.fail(Fault::Corrupt { psn: Psn::new(1) });
            link.fail(Fault::MarkCe { psn: Psn::new(2) });
            for (i, payload) in payloads.iter().enumerate() {
                let packet = SimPacket {
                    ecn: Ecn::from_bits(ecn),
                    ..SimPacket::new(addr(A), addr(B), payload.clone())
                };
                link.send(ns(i as u64 * 100), packet);
            }
            let delivered = drain(&mut link, Instant::MAX);
            let stats = *link.stats();
            prop_assert_eq!(stats.offered, payloads.len() as u64);
            let on_time = link.sent().iter().filter(|s| s.fate == Fate::Delivered).count() as u64;
            prop_assert_eq!(
                on_time + stats.lost + stats.queue_drops + stats.fault_drops + stats.filtered,
                stats.offered
            );
            prop_assert_eq!(delivered.len() as u64, on_time + stats.duplicated);
            prop_assert_eq!(stats.delivered, delivered.len() as u64);
            prop_assert!(delivered.windows(2).all(|w| w[0].0 <= w[1].0));
            for (sent, payload) in link.sent().iter().zip(&payloads) {
                prop_assert_eq!(sent.len, payload.len());
                prop_assert_eq!(sent.psn.is_some(), payload.len() >= bth::HEADER_LEN);
            }
        }
    }
}
