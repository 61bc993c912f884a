//! A shared-buffer switch in virtual time: the congestion point of DCQCN and the PFC and ETS
//! machinery of a lossless Ethernet fabric.
//!
//! Every port has eight egress classes (802.1p priorities). A packet that arrives on a port is
//! routed by its destination address, classified by its DSCP ("trust dscp", default priority =
//! DSCP / 8), and queued on its egress port's class: dropped when the port's buffer is full,
//! ECN-marked (RED, [`EcnMarking`]) when it is ECN-capable and the class's queue is long — at
//! enqueue, or at dequeue ("Fast ECN", the mark reflects the queue when the packet leaves).
//! Each port sends one packet at a time at its line rate, choosing the class by ETS: strict
//! priority classes first (highest priority first), then the others by deficit round robin on
//! their weights. With PFC (802.1Qbb) on, the switch counts, per ingress port and priority, the
//! bytes it holds; above `xoff_bytes` it sends that port's host a PAUSE for the priority
//! (`pause_quanta` of 512 bit times), refreshed while the count stays above `xon_bytes`, and an
//! XON (quanta 0) once it falls below (IEEE 802.1Qbb; the CP as the DCQCN paper and HPCC's
//! switch-mmu.cc mark).
//!
//! Each port has its own line rate ([`SwitchOf::set_port_rate`]; by default the config's
//! `bandwidth_bps`), which serialises what it sends and sizes the pause quanta it sends.
//!
//! [`Fabric`](crate::Fabric) puts NICs on its ports and drives it with [`SwitchOf::advance`];
//! the multi-switch [`network`](crate::network) drives each port by its own events
//! ([`SwitchOf::service_end`], [`SwitchOf::finish`], [`SwitchOf::kick`],
//! [`SwitchOf::take_pause_frames`]) and queues compact references to pooled packets in it: the
//! switch is generic over what it queues ([`Frame`]), and [`Switch`] queues [`SimPacket`]s.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use roce_core::{Duration, Instant};
use roce_wire::frame::Ecn;

use crate::{EcnMarking, SimPacket};

/// Priorities (traffic classes) per port.
pub const CLASSES: usize = 8;

/// When the congestion point decides to mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MarkAt {
    /// When a packet joins the queue, by the queue it finds.
    #[default]
    Enqueue,
    /// When a packet leaves the queue, by the queue it leaves behind ("Fast ECN"): the
    /// notification reaches the sender a queueing delay earlier.
    Dequeue,
}

/// PFC thresholds, per ingress port and priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pfc {
    /// Bytes held above which the port's host is paused.
    pub xoff_bytes: usize,
    /// Bytes held below which it is resumed.
    pub xon_bytes: usize,
    /// Pause time per PAUSE frame, in quanta of 512 bit times.
    pub pause_quanta: u16,
    /// Which priorities PFC applies to (bit i = priority i); RoCE usually uses one (3).
    pub priorities: u8,
}

/// ETS: which classes are strict priority, and the weights of the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ets {
    /// Strict priority classes, served before any weighted one, higher priority first.
    pub strict: [bool; CLASSES],
    /// Weights of the other classes (deficit round robin); 0 counts as 1.
    pub weights: [u32; CLASSES],
}

impl Default for Ets {
    /// Every class weighted equally.
    fn default() -> Self {
        Self {
            strict: [false; CLASSES],
            weights: [1; CLASSES],
        }
    }
}

/// How a [`Switch`] behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchConfig {
    /// Line rate of every port, bits per second.
    pub bandwidth_bps: u64,
    /// Propagation delay of each cable, each way.
    pub latency: Duration,
    /// Bytes of buffer per egress port, all classes together (drop-tail).
    pub buffer_bytes: usize,
    /// RED ECN marking per egress class; `None` never marks.
    pub ecn: Option<EcnMarking>,
    /// When marking is decided.
    pub mark_at: MarkAt,
    /// PFC; `None` (the default) is a lossy fabric, as on real switches until configured.
    pub pfc: Option<Pfc>,
    /// Egress scheduling.
    pub ets: Ets,
    /// DSCP → priority ("trust dscp"); the default is DSCP / 8 (so DSCP 26, RoCE's usual, is 3
    /// and CNPs' DSCP 48 is 6).
    pub dscp_to_priority: [u8; 64],
}

impl Default for SwitchConfig {
    fn default() -> Self {
        let mut map = [0; 64];
        for (dscp, prio) in map.iter_mut().enumerate() {
            *prio = (dscp / 8) as u8;
        }
        Self {
            bandwidth_bps: 10_000_000_000,
            latency: Duration::from_micros(1),
            buffer_bytes: 1 << 20,
            ecn: None,
            mark_at: MarkAt::Enqueue,
            pfc: None,
            ets: Ets::default(),
            dscp_to_priority: map,
        }
    }
}

/// What a switch needs to know of a packet it queues: its length on the wire, its DSCP
/// (classification) and its ECN bits (marking).
pub trait Frame {
    /// Bytes on the wire.
    fn wire_len(&self) -> usize;
    /// DSCP, 0..=63.
    fn dscp(&self) -> u8;
    /// The ECN bits.
    fn ecn(&self) -> Ecn;
    /// Sets the ECN bits (a CE mark).
    fn set_ecn(&mut self, ecn: Ecn);
}

impl Frame for SimPacket {
    fn wire_len(&self) -> usize {
        Self::wire_len(self)
    }
    fn dscp(&self) -> u8 {
        self.dscp
    }
    fn ecn(&self) -> Ecn {
        self.ecn
    }
    fn set_ecn(&mut self, ecn: Ecn) {
        self.ecn = ecn;
    }
}

/// Counters of one port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets queued for this egress port.
    pub enqueued: u64,
    /// Packets sent out of it.
    pub sent: u64,
    /// Bytes (on the wire) sent out of it.
    pub sent_bytes: u64,
    /// Packets dropped: its buffer was full.
    pub drops: u64,
    /// Packets marked CE on it.
    pub ce_marked: u64,
    /// PAUSE frames (XOFF) sent to its host.
    pub pauses_sent: u64,
    /// Resume frames (XON) sent to its host.
    pub resumes_sent: u64,
    /// The largest occupancy its buffer reached, bytes.
    pub max_queue_bytes: usize,
    /// PAUSE frames (XOFF) its host sent, which stop this port's egress for a priority.
    pub pauses_received: u64,
}

/// A PFC frame on its way to a host, as its effect: the host may not send `priority` until
/// `until` (`until == at` for XON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseFrame {
    /// When it reaches the host.
    pub at: Instant,
    /// The priority it pauses.
    pub priority: u8,
    /// Until when (`at` itself for a resume).
    pub until: Instant,
}

#[derive(Debug)]
struct Queued<P> {
    packet: P,
    ingress: usize,
    priority: usize,
    bytes: usize,
}

#[derive(Debug)]
struct Port<P> {
    /// Line rate, bits per second.
    rate_bps: u64,
    queues: [VecDeque<Queued<P>>; CLASSES],
    /// Bit `c` set when `queues[c]` holds a packet: the scheduler reads this, not the queues.
    queued_classes: u16,
    class_bytes: [usize; CLASSES],
    bytes: usize,
    deficit: [i64; CLASSES],
    next_class: usize,
    /// Whether the class whose turn it is got its quantum this round.
    granted: bool,
    in_service: Option<(Instant, Queued<P>)>,
    /// Packets on the cable towards the host: (arrival, sequence).
    cable: BinaryHeap<Reverse<(Instant, u64)>>,
    cable_packets: Vec<(u64, P)>,
    /// Ingress accounting: bytes held that came in on this port, per priority (PFC).
    held: [usize; CLASSES],
    paused_host: [bool; CLASSES],
    /// When the last PAUSE sent to the host runs out, per priority.
    pause_until: [Instant; CLASSES],
    /// Until when the host has paused this port's egress, per priority (PAUSE it sent).
    egress_paused_until: [Instant; CLASSES],
    pauses: VecDeque<PauseFrame>,
    stats: PortStats,
}

impl<P> Port<P> {
    fn new(rate_bps: u64) -> Self {
        Self {
            rate_bps,
            queues: Default::default(),
            queued_classes: 0,
            class_bytes: [0; CLASSES],
            bytes: 0,
            deficit: [0; CLASSES],
            next_class: 0,
            granted: false,
            in_service: None,
            cable: BinaryHeap::new(),
            cable_packets: Vec::new(),
            held: [0; CLASSES],
            paused_host: [false; CLASSES],
            pause_until: [Instant::ZERO; CLASSES],
            egress_paused_until: [Instant::ZERO; CLASSES],
            pauses: VecDeque::new(),
            stats: PortStats::default(),
        }
    }
}

/// An N-port switch queueing [`SimPacket`]s.
pub type Switch = SwitchOf<SimPacket>;

/// An N-port switch queueing packets of type `P`.
#[derive(Debug)]
pub struct SwitchOf<P> {
    config: SwitchConfig,
    ports: Vec<Port<P>>,
    /// Destination address → port.
    routes: Vec<(std::net::IpAddr, usize)>,
    seq: u64,
    /// Deterministic marking decisions: a xorshift generator seeded per switch.
    rng: u64,
    /// The ETS strict classes, as a bit set.
    strict_classes: u16,
}

impl Switch {
    /// A packet arrives on `ingress` (its last bit, at `now`), routed by its destination.
    pub fn receive(&mut self, now: Instant, ingress: usize, packet: SimPacket) {
        let Some(egress) = self
            .routes
            .iter()
            .find(|(ip, _)| *ip == packet.dst.ip())
            .map(|(_, p)| *p)
        else {
            return; // no route: dropped, as a switch does
        };
        self.receive_to(now, ingress, egress, packet);
    }
}

impl<P: Frame> SwitchOf<P> {
    /// A switch with `ports` ports; `routes` maps each host address to its port.
    pub fn new(
        config: SwitchConfig,
        ports: usize,
        routes: Vec<(std::net::IpAddr, usize)>,
        seed: u64,
    ) -> Self {
        Self {
            ports: (0..ports)
                .map(|_| Port::new(config.bandwidth_bps))
                .collect(),
            strict_classes: (0..CLASSES)
                .filter(|&c| config.ets.strict[c])
                .fold(0, |set, c| set | 1 << c),
            config,
            routes,
            seq: 0,
            rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SwitchConfig {
        &self.config
    }

    /// Sets the line rate of `port`, bits per second (0 counts as 1).
    pub fn set_port_rate(&mut self, port: usize, rate_bps: u64) {
        self.ports[port].rate_bps = rate_bps;
    }

    /// The line rate of `port`, bits per second.
    pub fn port_rate(&self, port: usize) -> u64 {
        self.ports[port].rate_bps
    }

    /// How many ports.
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// A port's counters.
    pub fn stats(&self, port: usize) -> &PortStats {
        &self.ports[port].stats
    }

    /// Bytes queued on a port now.
    pub fn queue_bytes(&self, port: usize) -> usize {
        self.ports[port].bytes
    }

    /// A packet arrives on `ingress` for the port `egress`, chosen by the caller (a bridge that
    /// learns MAC addresses, say). Returns whether it was queued: `false` is a drop, the buffer
    /// being full.
    pub fn receive_to(
        &mut self,
        now: Instant,
        ingress: usize,
        egress: usize,
        mut packet: P,
    ) -> bool {
        let priority =
            usize::from(self.config.dscp_to_priority[usize::from(packet.dscp() & 63)]) % CLASSES;
        let bytes = packet.wire_len();
        let port = &mut self.ports[egress];
        if port.bytes + bytes > self.config.buffer_bytes {
            port.stats.drops += 1;
            return false;
        }
        if self.config.mark_at == MarkAt::Enqueue {
            let queue = port.class_bytes[priority];
            mark(
                &self.config,
                &mut self.rng,
                &mut packet,
                queue,
                &mut port.stats,
            );
        }
        port.bytes += bytes;
        port.class_bytes[priority] += bytes;
        port.stats.enqueued += 1;
        port.stats.max_queue_bytes = port.stats.max_queue_bytes.max(port.bytes);
        port.queues[priority].push_back(Queued {
            packet,
            ingress,
            priority,
            bytes,
        });
        port.queued_classes |= 1 << priority;
        self.ports[ingress].held[priority] += bytes;
        self.pfc_check(now, ingress, priority);
        self.start(now, egress);
        true
    }

    /// The host on `port` paused the switch's egress towards it for `priority` until `until`
    /// (a PFC frame it sent; `until <= now` resumes at once, as a zero-quanta frame does). A
    /// packet already being sent finishes (802.1Qbb); the class waits after it.
    pub fn pause_egress(&mut self, now: Instant, port: usize, priority: u8, until: Instant) {
        let class = usize::from(priority) % CLASSES;
        let state = &mut self.ports[port];
        state.egress_paused_until[class] = until;
        if until > now {
            state.stats.pauses_received += 1;
        } else {
            self.start(now, port);
        }
    }

    /// Moves time to `now`: packets finish serialising and go on their cables, the next ones
    /// start. Call before `deliver` and `next_event`.
    pub fn advance(&mut self, now: Instant) {
        for egress in 0..self.ports.len() {
            // A class whose pause ran out may go again.
            if self.ports[egress].in_service.is_none() && self.ports[egress].bytes > 0 {
                self.start(now, egress);
            }
            while let Some((end, _)) = &self.ports[egress].in_service {
                if *end > now {
                    break;
                }
                let end = *end;
                let (_, done) = self.ports[egress].in_service.take().expect("checked above");
                self.ports[done.ingress].held[done.priority] -= done.bytes;
                self.pfc_check(end, done.ingress, done.priority);
                let arrival = end + self.config.latency;
                self.seq += 1;
                let port = &mut self.ports[egress];
                port.stats.sent += 1;
                port.stats.sent_bytes += done.bytes as u64;
                port.cable.push(Reverse((arrival, self.seq)));
                port.cable_packets.push((self.seq, done.packet));
                self.start(end, egress);
            }
        }
    }

    /// The next packet that has reached the host on `port` by `now`.
    pub fn deliver(&mut self, now: Instant, port: usize) -> Option<P> {
        let port = &mut self.ports[port];
        let Reverse((at, seq)) = *port.cable.peek()?;
        if at > now {
            return None;
        }
        port.cable.pop();
        let index = port.cable_packets.iter().position(|(s, _)| *s == seq)?;
        Some(port.cable_packets.swap_remove(index).1)
    }

    /// The next PFC frame that has reached the host on `port` by `now`.
    pub fn pause_frame(&mut self, now: Instant, port: usize) -> Option<PauseFrame> {
        let pauses = &mut self.ports[port].pauses;
        if pauses.front().is_some_and(|p| p.at <= now) {
            pauses.pop_front()
        } else {
            None
        }
    }

    /// When the packet `port` is sending now finishes serialising, if it is sending one.
    pub fn service_end(&self, port: usize) -> Option<Instant> {
        self.ports[port].in_service.as_ref().map(|(end, _)| *end)
    }

    /// The packet `port` finished serialising by `now` and the port it came in on, handed to
    /// the caller instead of the port's cable (whoever drives the switch by events carries it);
    /// the next one starts at the end of this one. The ingress port's PFC state may have changed
    /// (see [`SwitchOf::take_pause_frames`]). `None` while it is still being sent or when the
    /// port is idle.
    pub fn finish(&mut self, now: Instant, port: usize) -> Option<(P, usize)> {
        let end = self.service_end(port).filter(|end| *end <= now)?;
        let (_, done) = self.ports[port].in_service.take()?;
        self.ports[done.ingress].held[done.priority] -= done.bytes;
        self.pfc_check(end, done.ingress, done.priority);
        let stats = &mut self.ports[port].stats;
        stats.sent += 1;
        stats.sent_bytes += done.bytes as u64;
        self.start(end, port);
        Some((done.packet, done.ingress))
    }

    /// Starts the next packet on `port` if it is idle and a class may send (a pause ran out).
    pub fn kick(&mut self, now: Instant, port: usize) {
        self.start(now, port);
    }

    /// Whether `port`'s egress holds packets of `priority` that the node at its other end has
    /// paused at `now`: a queue that waits on its peer (PFC deadlock detection).
    pub fn egress_blocked(&self, now: Instant, port: usize, priority: u8) -> bool {
        let class = usize::from(priority) % CLASSES;
        let p = &self.ports[port];
        !p.queues[class].is_empty() && p.egress_paused_until[class] > now
    }

    /// The egress ports whose queues of `priority` hold packets that came in on `ingress`: the
    /// queues the bytes `ingress` is charged with (and paused for) wait in.
    pub fn egress_holding(&self, ingress: usize, priority: u8) -> impl Iterator<Item = usize> + '_ {
        let class = usize::from(priority) % CLASSES;
        self.ports
            .iter()
            .enumerate()
            .filter_map(move |(egress, p)| {
                p.queues[class]
                    .iter()
                    .any(|q| q.ingress == ingress)
                    .then_some(egress)
            })
    }

    /// Every PFC frame the switch has sent out of `port` so far, oldest first, taken. Their
    /// `at` is when they left plus the config's `latency` (set it to zero to add each cable's
    /// own delay).
    pub fn take_pause_frames(&mut self, port: usize) -> impl Iterator<Item = PauseFrame> + '_ {
        self.ports[port].pauses.drain(..)
    }

    /// When something next happens: a packet finishes serialising, reaches a host, or a PFC
    /// frame does.
    pub fn next_event(&self) -> Option<Instant> {
        self.ports
            .iter()
            .flat_map(|p| {
                let service = p.in_service.as_ref().map(|(end, _)| *end);
                let cable = p.cable.peek().map(|Reverse((at, _))| *at);
                let pause = p.pauses.front().map(|f| f.at);
                // An idle port with packets waits for its host's pause to run out.
                let resume = (p.in_service.is_none() && p.bytes > 0)
                    .then(|| {
                        (0..CLASSES)
                            .filter(|&c| !p.queues[c].is_empty())
                            .map(|c| p.egress_paused_until[c])
                            .min()
                    })
                    .flatten();
                [service, cable, pause, resume]
            })
            .flatten()
            .min()
    }

    /// Starts serialising the next packet on an idle port, chosen by ETS.
    fn start(&mut self, now: Instant, egress: usize) {
        if self.ports[egress].in_service.is_some() {
            return;
        }
        let Some(class) = self.pick(egress, now) else {
            return;
        };
        let port = &mut self.ports[egress];
        let mut queued = port.queues[class]
            .pop_front()
            .expect("pick chose a non-empty class");
        if port.queues[class].is_empty() {
            port.queued_classes &= !(1 << class);
        }
        port.bytes -= queued.bytes;
        port.class_bytes[class] -= queued.bytes;
        if self.config.mark_at == MarkAt::Dequeue {
            let queue = port.class_bytes[class];
            mark(
                &self.config,
                &mut self.rng,
                &mut queued.packet,
                queue,
                &mut port.stats,
            );
        }
        let nanos = (queued.bytes as u64 * 8 * 1_000_000_000).div_ceil(port.rate_bps.max(1));
        port.in_service = Some((now + Duration::from_nanos(nanos), queued));
    }

    /// ETS: the highest strict class with packets, else deficit round robin over the others;
    /// classes the host has paused wait.
    fn pick(&mut self, egress: usize, now: Instant) -> Option<usize> {
        #[cfg(test)]
        let reference = {
            let port = &self.ports[egress];
            let (mut deficit, mut next, mut granted) =
                (port.deficit, port.next_class, port.granted);
            let ready: [bool; CLASSES] = std::array::from_fn(|c| {
                !port.queues[c].is_empty() && port.egress_paused_until[c] <= now
            });
            let heads = std::array::from_fn(|c| port.queues[c].front().map_or(0, |q| q.bytes));
            let class = tests::pick_reference(
                &self.config.ets,
                ready,
                heads,
                (&mut deficit, &mut next, &mut granted),
            );
            (class, deficit, next, granted)
        };
        let class = self.pick_fast(egress, now);
        #[cfg(test)]
        {
            let port = &self.ports[egress];
            assert_eq!(
                (class, port.deficit, port.next_class, port.granted),
                reference,
                "ETS pick differs from the one-step reference"
            );
        }
        class
    }

    fn pick_fast(&mut self, egress: usize, now: Instant) -> Option<usize> {
        let ets = self.config.ets;
        let port = &mut self.ports[egress];
        let queued = port.queued_classes;
        if queued == 0 {
            return None;
        }
        // The classes with packets whose pause has run out, as a bit set (no allocation, and
        // only the queued classes' pause times are read).
        let mut ready: u16 = 0;
        let mut bits = queued;
        while bits != 0 {
            let c = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if port.egress_paused_until[c] <= now {
                ready |= 1 << c;
            }
        }
        let strict = ready & self.strict_classes;
        if strict != 0 {
            return Some(15 - strict.leading_zeros() as usize); // the highest strict class
        }
        let weighted = ready & !self.strict_classes;
        if weighted == 0 {
            return None;
        }
        // Deficit round robin: each visit in a round grants a class weight × quantum bytes; it
        // sends while its deficit covers its head packet, then the turn passes on. An empty
        // class keeps no deficit.
        const QUANTUM: i64 = 1500;
        loop {
            let class = port.next_class;
            if weighted & 1 << class != 0 {
                if !port.granted {
                    port.deficit[class] += i64::from(ets.weights[class].max(1)) * QUANTUM;
                    port.granted = true;
                }
                let head = port.queues[class].front().map_or(0, |q| q.bytes) as i64;
                if port.deficit[class] >= head {
                    port.deficit[class] -= head;
                    return Some(class);
                }
                port.next_class = (class + 1) % CLASSES;
            } else {
                // On to the next class that may send; those passed keep no deficit.
                let w = u32::from(weighted);
                let after = ((w >> class) | (w << (CLASSES - class))) & ((1 << CLASSES) - 1);
                let ahead = after.trailing_zeros() as usize; // weighted != 0: < CLASSES
                for k in 0..ahead {
                    port.deficit[(class + k) % CLASSES] = 0;
                }
                port.next_class = (class + ahead) % CLASSES;
            }
            port.granted = false;
        }
    }

    /// PFC at ingress: pause the host when its bytes held for `priority` pass XOFF, resume it
    /// below XON (802.1Qbb; IEEE 802.1Qbb).
    fn pfc_check(&mut self, now: Instant, ingress: usize, priority: usize) {
        let Some(pfc) = self.config.pfc else { return };
        if pfc.priorities & (1 << priority) == 0 {
            return;
        }
        let latency = self.config.latency;
        let quanta_nanos = (u64::from(pfc.pause_quanta) * 512 * 1_000_000_000)
            .div_ceil(self.ports[ingress].rate_bps.max(1));
        let port = &mut self.ports[ingress];
        let held = port.held[priority];
        let at = now + latency;
        // XOFF, or a refresh before the last one runs out (senders would resume otherwise).
        let refresh = port.paused_host[priority]
            && at + Duration::from_nanos(quanta_nanos / 2) >= port.pause_until[priority];
        if held > pfc.xoff_bytes && (!port.paused_host[priority] || refresh) {
            port.paused_host[priority] = true;
            port.stats.pauses_sent += 1;
            let until = at + Duration::from_nanos(quanta_nanos);
            port.pause_until[priority] = until;
            port.pauses.push_back(PauseFrame {
                at,
                priority: priority as u8,
                until,
            });
        } else if held <= pfc.xon_bytes && port.paused_host[priority] {
            port.paused_host[priority] = false;
            port.stats.resumes_sent += 1;
            port.pauses.push_back(PauseFrame {
                at,
                priority: priority as u8,
                until: at,
            });
        }
    }
}

/// RED marking of an ECN-capable packet by the queue `queue_bytes` of its class.
fn mark<P: Frame>(
    config: &SwitchConfig,
    rng: &mut u64,
    packet: &mut P,
    queue_bytes: usize,
    stats: &mut PortStats,
) {
    let Some(ecn) = config.ecn else { return };
    if !matches!(packet.ecn(), Ecn::Ect0 | Ecn::Ect1) {
        return;
    }
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let draw = (*rng >> 11) as f64 / (1u64 << 53) as f64;
    if draw < ecn.probability(queue_bytes) {
        packet.set_ecn(Ecn::Ce);
        stats.ce_marked += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    /// ETS as first written, one class per step: what `pick` must choose, and the state it must
    /// leave. `pick` checks itself against this in every test build.
    pub(super) fn pick_reference(
        ets: &Ets,
        ready: [bool; CLASSES],
        heads: [usize; CLASSES],
        (deficit, next_class, granted): (&mut [i64; CLASSES], &mut usize, &mut bool),
    ) -> Option<usize> {
        if let Some(class) = (0..CLASSES).rev().find(|&c| ets.strict[c] && ready[c]) {
            return Some(class);
        }
        if !(0..CLASSES).any(|c| !ets.strict[c] && ready[c]) {
            return None;
        }
        loop {
            let class = *next_class;
            if !ets.strict[class] && ready[class] {
                if !*granted {
                    deficit[class] += i64::from(ets.weights[class].max(1)) * 1500;
                    *granted = true;
                }
                if deficit[class] >= heads[class] as i64 {
                    deficit[class] -= heads[class] as i64;
                    return Some(class);
                }
            } else {
                deficit[class] = 0;
            }
            *next_class = (class + 1) % CLASSES;
            *granted = false;
        }
    }

    /// Random arrivals of random classes and sizes, random pauses, a mix of strict and
    /// weighted classes: every choice `pick` makes agrees with the reference (it asserts so),
    /// and every packet leaves.
    #[test]
    fn ets_picks_as_the_one_step_reference_does() {
        let addr: SocketAddr = "198.18.0.1:4791".parse().unwrap();
        let mut strict = [false; CLASSES];
        strict[6] = true;
        strict[2] = true;
        let config = SwitchConfig {
            ets: Ets {
                strict,
                weights: [1, 3, 1, 2, 1, 5, 1, 2],
            },
            buffer_bytes: usize::MAX / 2,
            ..SwitchConfig::default()
        };
        let mut switch = SwitchOf::<SimPacket>::new(config.clone(), 2, Vec::new(), 1);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut sent, mut left) = (0u64, 0u64);
        let mut now = Instant::ZERO;
        for _ in 0..20_000 {
            now += Duration::from_nanos(next() % 300);
            match next() % 8 {
                0..=3 => {
                    let class = (next() % CLASSES as u64) as u8;
                    let dscp = (0..64u8)
                        .find(|&d| config.dscp_to_priority[usize::from(d)] == class)
                        .unwrap_or(0);
                    let len = 64 + (next() % 4000) as usize;
                    let mut p = SimPacket::new(addr, addr, vec![0; len]);
                    p.dscp = dscp;
                    assert!(switch.receive_to(now, 0, 1, p));
                    sent += 1;
                }
                4 => {
                    let until = now + Duration::from_nanos(next() % 3000);
                    switch.pause_egress(now, 1, (next() % CLASSES as u64) as u8, until);
                }
                _ => {
                    switch.kick(now, 1);
                    while switch.finish(now, 1).is_some() {
                        left += 1;
                    }
                }
            }
        }
        // Drain: what finished leaves (a port restarts at its last packet's end), then every
        // class resumes.
        now += Duration::from_secs(1);
        while switch.finish(now, 1).is_some() {
            left += 1;
        }
        for c in 0..CLASSES as u8 {
            switch.pause_egress(now, 1, c, now);
        }
        while switch.service_end(1).is_some() {
            now += Duration::from_secs(1);
            while switch.finish(now, 1).is_some() {
                left += 1;
            }
        }
        assert!(sent > 5_000, "{sent}");
        assert_eq!(left, sent);
        assert_eq!(switch.queue_bytes(1), 0);
    }
}
