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
mod tests;
