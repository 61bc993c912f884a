//! A switch in virtual time: the congestion point of DCQCN and the PFC and ETS
//! machinery of a lossless Ethernet fabric.
//!
//! Every port has eight egress classes (802.1p priorities). A packet that arrives on a port is
//! routed by its destination address, classified by its DSCP ("trust dscp", default priority =
//! DSCP / 8), and queued on its egress port's class: dropped when the port's buffer is full,
//! ECN-marked (RED, [`EcnMarking`](crate::EcnMarking)) when it is ECN-capable and the class's queue is long — at
//! enqueue, or at dequeue ("Fast ECN", the mark reflects the queue when the packet leaves).
//! Each port sends one packet at a time at its line rate, choosing the class by ETS: strict
//! priority classes first (highest priority first), then the others by deficit round robin on
//! their weights. With PFC (802.1Qbb) on, the switch counts, per ingress port and priority, the
//! bytes it holds; above `xoff_bytes` it sends that port's host a PAUSE for the priority
//! (`pause_quanta` of 512 bit times), refreshed while the count stays above `xon_bytes`, and an
//! XON (quanta 0) once it falls below (IEEE 802.1Qbb; the CP as the DCQCN paper and HPCC's
//! switch-mmu.cc mark). With [`SwitchConfig::shared`] the buffer is one pool for all ports and
//! the thresholds are dynamic ([`SharedBuffer`], `shared.rs`). A packet that carries HPCC's INT
//! header takes the port's record as it leaves (`int.rs`).
//!
//! Each port has its own line rate ([`SwitchOf::set_port_rate`]; by default the config's
//! `bandwidth_bps`), which serialises what it sends and sizes the pause quanta it sends.
//!
//! [`Fabric`](crate::Fabric) puts NICs on its ports and drives it with [`SwitchOf::advance`]:
//! a packet stays in the switch (and in its buffer) until its serialisation ends. The
//! multi-switch [`network`](crate::network) drives each port by its own events
//! ([`SwitchOf::enqueue`], [`SwitchOf::depart`], [`SwitchOf::set_egress_pause`],
//! [`SwitchOf::take_pause_frames`]) as HPCC's switch does: a packet leaves its queue, gives
//! back its buffer and takes its dequeue mark as its serialisation starts, and the driver
//! carries it from there. It queues compact references to pooled packets: the switch is
//! generic over what it queues ([`Frame`]), and [`Switch`] queues [`SimPacket`]s.

mod config;
mod ets;
mod int;
mod pfc;
mod port;
mod shared;

use std::cmp::Reverse;

use roce_core::{Duration, Instant};

use crate::SimPacket;
pub use config::{
    CLASSES, Ets, Frame, MarkAt, PauseFrame, Pfc, PintMeter, PortStats, SharedBuffer, SwitchConfig,
};
use pfc::mark;
use port::{Port, Queued};

/// A packet an event driver's port started ([`SwitchOf::depart`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure<P> {
    /// The packet, marked as it left.
    pub packet: P,
    /// The port it came in on (whose PFC state its leaving may have changed).
    pub ingress: usize,
    /// When its serialisation ends: its last bit is on the cable, and the port is free.
    pub end: Instant,
}

/// What became of a packet [`SwitchOf::forward`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarded<P> {
    /// Dropped: the buffer was full.
    Dropped(P),
    /// Queued on its egress port, for [`SwitchOf::depart`] to start.
    Queued,
    /// Started at once, as [`SwitchOf::depart`] would have started it.
    Departed(Departure<P>),
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
    /// With a shared buffer: the bytes of it in use beyond the ports' reserves and headrooms.
    shared_used: usize,
    /// With a shared buffer: what the reserves and headrooms set aside, bytes.
    set_aside: usize,
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
        assert!(ports <= 1 << 16, "a switch has at most 65 536 ports");
        let reserves = config
            .shared
            .map_or(0, |shared| shared.reserve_bytes * ports);
        let mut switch = Self {
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
            shared_used: 0,
            // Every port's reserve; `set_port_headroom` adds the headrooms.
            set_aside: reserves,
        };
        if let Some(shared) = switch.config.shared {
            // Until told otherwise, each port's headroom covers what arrives in the time a
            // PAUSE takes to act over the config's cable (see `set_port_headroom`).
            let rate = switch.config.bandwidth_bps;
            let headroom = pfc_headroom(rate, switch.config.latency);
            for port in 0..ports {
                switch.set_port_headroom(port, headroom, shared.alpha_shift);
            }
        }
        switch
    }

    /// With a shared buffer: sets `port`'s headroom (bytes per PFC priority, for what arrives
    /// after its PAUSE leaves; [`pfc_headroom`] is HPCC's) and its α (`alpha_shift`: the
    /// threshold is the free space `>> alpha_shift`). Without one this does nothing.
    pub fn set_port_headroom(&mut self, port: usize, headroom_bytes: usize, alpha_shift: u8) {
        if self.config.shared.is_none() {
            return;
        }
        let p = &mut self.ports[port];
        self.set_aside = self.set_aside - p.headroom + headroom_bytes;
        p.headroom = headroom_bytes;
        p.alpha_shift = alpha_shift.min(63);
    }

    /// Whether `priority` is one PFC keeps lossless.
    fn lossless(&self, priority: usize) -> bool {
        self.config
            .pfc
            .is_some_and(|pfc| pfc.priorities & (1 << priority) != 0)
    }

    /// Gives back what a packet that came in on `ingress` took, as it leaves.
    #[inline]
    fn release(&mut self, ingress: usize, priority: usize, bytes: usize) {
        match self.config.shared {
            Some(shared) => self.shared_release(&shared, ingress, priority, bytes),
            None => self.ports[ingress].class[priority].held -= bytes,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SwitchConfig {
        &self.config
    }

    /// Sets the line rate of `port`, bits per second (0 counts as 1).
    pub fn set_port_rate(&mut self, port: usize, rate_bps: u64) {
        self.ports[port].rate_bps = rate_bps;
        self.ports[port].int_rate = roce_wire::int::rate_code(rate_bps);
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
    pub fn receive_to(&mut self, now: Instant, ingress: usize, egress: usize, packet: P) -> bool {
        let queued = self.enqueue(now, ingress, egress, packet);
        if queued {
            self.start(now, egress);
        }
        queued
    }

    /// A packet arrives on `ingress` for the port `egress`: it is admitted and queued, as in
    /// [`SwitchOf::receive_to`], but not started; an event driver starts it with
    /// [`SwitchOf::depart`]. Returns whether it was queued (`false`: dropped, the buffer full).
    pub fn enqueue(&mut self, now: Instant, ingress: usize, egress: usize, mut packet: P) -> bool {
        let Some((priority, _)) = self.admit(now, ingress, egress, &mut packet) else {
            return false;
        };
        self.place(ingress, egress, priority, packet);
        true
    }

    /// [`SwitchOf::enqueue`], then [`SwitchOf::depart`] of the same port at once, as an event
    /// driver does for an arriving packet — without the queue when the packet is the one that
    /// would leave: its port free, nothing queued there and its class not paused (the hop of
    /// most packets through a fabric that is not congested). It takes the same decisions in
    /// the same order (ETS's deficit, both marks' draws, both PFC checks). When the arrival's
    /// PFC check has a frame to send, the packet is queued and the driver sends that frame
    /// before it departs, as after an `enqueue`.
    pub fn forward(
        &mut self,
        now: Instant,
        ingress: usize,
        egress: usize,
        mut packet: P,
    ) -> Forwarded<P> {
        // As indexing would panic; said once, so that the indexing below needs no checks.
        assert!(
            ingress < self.ports.len() && egress < self.ports.len(),
            "no such port"
        );
        let Some((priority, quiet)) = self.admit(now, ingress, egress, &mut packet) else {
            return Forwarded::Dropped(packet);
        };
        let port = &self.ports[egress];
        let alone = port.queued_classes == 0
            && port.busy_until <= now
            && port.class[priority].paused_until <= now
            && self.ports[ingress].pauses.is_empty();
        if !alone {
            self.place(ingress, egress, priority, packet);
            return Forwarded::Queued;
        }
        // What `place` then `depart` would do with the packet alone in its queue.
        let bytes = packet.wire_len();
        let strict = self.strict_classes & (1 << priority) != 0;
        let weight = self.config.ets.weights[priority];
        let port = &mut self.ports[egress];
        port.stats.enqueued += 1;
        port.stats.max_queue_bytes = port.stats.max_queue_bytes.max(port.bytes + bytes);
        if !strict {
            port.drr_alone(priority, weight, bytes);
        }
        self.mark_leaving(egress, priority, &mut packet);
        self.stamp_leaving(now, egress, &mut packet);
        let end = self.start_serialising(now, egress, ingress, priority, bytes);
        if !quiet {
            // (When the arrival's check was quiet, this one would be too: see `pfc_check`.)
            self.pfc_check(now, ingress, priority);
        }
        Forwarded::Departed(Departure {
            packet,
            ingress,
            end,
        })
    }

    /// Admits a packet that arrived on `ingress` for `egress` into the buffer: charged to its
    /// ingress, marked if marking is at enqueue, and the ingress's PFC state checked. Returns
    /// its priority and whether that check was quiet ([`SwitchOf::pfc_check`]), or `None` when
    /// it is dropped (the buffer full).
    #[inline]
    fn admit(
        &mut self,
        now: Instant,
        ingress: usize,
        egress: usize,
        packet: &mut P,
    ) -> Option<(usize, bool)> {
        let priority =
            usize::from(self.config.dscp_to_priority[usize::from(packet.dscp() & 63)]) % CLASSES;
        let bytes = packet.wire_len();
        if let Some(shared) = self.config.shared {
            if !self.shared_admits(&shared, ingress, priority, bytes) {
                self.ports[ingress].stats.drops += 1;
                return None;
            }
            self.shared_charge(&shared, ingress, priority, bytes);
        } else if self.ports[egress].bytes + bytes > self.config.buffer_bytes {
            self.ports[egress].stats.drops += 1;
            return None;
        } else {
            self.ports[ingress].class[priority].held += bytes;
        }
        if self.config.mark_at == MarkAt::Enqueue {
            let port = &mut self.ports[egress];
            let queue = (port.class[priority].bytes, port.rate_bps);
            mark(&self.config, &mut self.rng, packet, queue, &mut port.stats);
        }
        let quiet = self.pfc_check(now, ingress, priority);
        Some((priority, quiet))
    }

    /// Puts an admitted packet on its egress port's queue of `priority`.
    #[inline]
    fn place(&mut self, ingress: usize, egress: usize, priority: usize, packet: P) {
        let bytes = packet.wire_len();
        let port = &mut self.ports[egress];
        port.bytes += bytes;
        port.class[priority].bytes += bytes;
        port.stats.enqueued += 1;
        port.stats.max_queue_bytes = port.stats.max_queue_bytes.max(port.bytes);
        port.class[priority].queue.push_back(Queued {
            packet,
            ingress: ingress as u16, // a switch has fewer ports (`new`)
            priority: priority as u8,
        });
        port.queued_classes |= 1 << priority;
    }

    /// Moves time to `now`: packets finish serialising and go on their cables, the next ones
    /// start. Call before `deliver` and `next_event`.
    pub fn advance(&mut self, now: Instant) {
        // PAUSEs half gone: sent again while their ingress still holds too much.
        let at = now + self.config.latency;
        for ingress in 0..self.ports.len() {
            let mut due = self.ports[ingress].refresh_due;
            while due != 0 {
                let class = due.trailing_zeros() as usize;
                due &= due - 1;
                if self.ports[ingress].refresh_at[class] <= at {
                    self.check_pause(now, ingress, class as u8);
                }
            }
        }
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
                self.release(done.ingress(), done.priority(), done.bytes());
                self.pfc_check(end, done.ingress(), done.priority());
                let arrival = end + self.config.latency;
                self.seq += 1;
                let port = &mut self.ports[egress];
                port.stats.sent += 1;
                port.stats.sent_bytes += done.bytes() as u64;
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

    /// An event driver's port `port` starts its next packet at `now`, if it is free (the last
    /// one it started has ended: [`SwitchOf::busy_until`]) and a queued class may send (ETS,
    /// pauses): the packet leaves the switch at once, with when its serialisation ends.
    ///
    /// Its buffer is given back now, at the start of its serialisation, and its ECN mark
    /// ([`MarkAt::Dequeue`]) reflects the queue it leaves behind, as HPCC's switch does
    /// (`SwitchNotifyDequeue`, called as `DequeueAndTransmit` starts a packet). The ingress
    /// port's PFC state may have changed (see [`SwitchOf::take_pause_frames`]).
    pub fn depart(&mut self, now: Instant, port: usize) -> Option<Departure<P>> {
        if self.ports[port].busy_until > now {
            return None;
        }
        let queued = self.dequeue(now, port)?;
        let (ingress, priority, bytes) = (queued.ingress(), queued.priority(), queued.bytes());
        let end = self.start_serialising(now, port, ingress, priority, bytes);
        self.pfc_check(now, ingress, priority);
        Some(Departure {
            packet: queued.packet,
            ingress,
            end,
        })
    }

    /// For an event driver: when the packet `port` started last ends its serialisation (the
    /// port is free from then on).
    pub fn busy_until(&self, port: usize) -> Instant {
        self.ports[port].busy_until
    }

    /// Whether `port` has packets queued (waiting for the port, or for a pause to end).
    pub fn has_queued(&self, port: usize) -> bool {
        self.ports[port].queued_classes != 0
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
                            .filter(|&c| !p.class[c].queue.is_empty())
                            .map(|c| p.class[c].paused_until)
                            .min()
                    })
                    .flatten();
                // The first PAUSE refresh check due (`advance`), a cable earlier.
                let refresh = (0..CLASSES)
                    .filter(|&c| p.refresh_due & (1 << c) != 0)
                    .map(|c| {
                        Instant::from_nanos(
                            p.refresh_at[c]
                                .as_nanos()
                                .saturating_sub(self.config.latency.as_nanos() as u64),
                        )
                    })
                    .min();
                [service, cable, pause, resume, refresh]
            })
            .flatten()
            .min()
    }

    /// Cache hints for a port's next departure: the head of each of its queues that holds a
    /// packet.
    #[inline]
    pub(crate) fn prefetch_departure(&self, port: usize) {
        let Some(p) = self.ports.get(port) else {
            return;
        };
        let mut classes = p.queued_classes;
        while classes != 0 {
            let c = classes.trailing_zeros() as usize;
            classes &= classes - 1;
            if let Some(head) = p.class[c].queue.front() {
                crate::prefetch::prefetch(head);
            }
        }
    }

    /// Cache hints for `packet`'s arrival on `port`: the port's ingress state and its class's
    /// counters.
    #[inline]
    pub(crate) fn prefetch_ingress(&self, port: usize, packet: &P) {
        if let Some(p) = self.ports.get(port) {
            let priority = self.config.dscp_to_priority[usize::from(packet.dscp() & 63)];
            crate::prefetch::prefetch(&p.headroom);
            crate::prefetch::prefetch(&p.class[usize::from(priority) % CLASSES]);
        }
    }

    /// Starts serialising the next packet on an idle port, chosen by ETS.
    fn start(&mut self, now: Instant, egress: usize) {
        if self.ports[egress].in_service.is_some() {
            return;
        }
        if let Some(queued) = self.dequeue(now, egress) {
            let port = &mut self.ports[egress];
            let end = now + Duration::from_nanos(port.serialisation_nanos(queued.bytes()));
            port.in_service = Some((end, queued));
        }
    }

    /// Takes the next packet ETS chooses off `egress`'s queues, marked if marking is at
    /// dequeue.
    fn dequeue(&mut self, now: Instant, egress: usize) -> Option<Queued<P>> {
        let class = self.pick(egress, now)?;
        let port = &mut self.ports[egress];
        let mut queued = port.class[class]
            .queue
            .pop_front()
            .expect("pick chose a non-empty class");
        if port.class[class].queue.is_empty() {
            port.queued_classes &= !(1 << class);
        }
        port.bytes -= queued.bytes();
        port.class[class].bytes -= queued.bytes();
        self.mark_leaving(egress, class, &mut queued.packet);
        self.stamp_leaving(now, egress, &mut queued.packet);
        Some(queued)
    }

    /// With marking at dequeue, marks a packet leaving `egress`'s `class` by the queue it
    /// leaves behind.
    #[inline(always)] // twice per hop; a call costs more than its body
    fn mark_leaving(&mut self, egress: usize, class: usize, packet: &mut P) {
        if self.config.mark_at == MarkAt::Dequeue {
            let port = &mut self.ports[egress];
            let queue = (port.class[class].bytes, port.rate_bps);
            mark(&self.config, &mut self.rng, packet, queue, &mut port.stats);
        }
    }

    /// For an event driver: a packet of `bytes` that came in on `ingress` starts on `egress`
    /// at `now`, which is busy until its serialisation ends (returned); it counts as sent, and
    /// its buffer is given back.
    #[inline(always)] // twice per hop; a call costs more than its body
    fn start_serialising(
        &mut self,
        now: Instant,
        egress: usize,
        ingress: usize,
        priority: usize,
        bytes: usize,
    ) -> Instant {
        let port = &mut self.ports[egress];
        let end = now + Duration::from_nanos(port.serialisation_nanos(bytes));
        port.busy_until = end;
        port.stats.sent += 1;
        port.stats.sent_bytes += bytes as u64;
        self.release(ingress, priority, bytes);
        end
    }
}

/// HPCC's headroom for a port (`third.cc`): three times what the link carries in one cable
/// delay — the PAUSE's way there, the bytes on the cable back and the packet the sender is in
/// the middle of, with room to spare.
pub fn pfc_headroom(rate_bps: u64, delay: Duration) -> usize {
    let bytes = u128::from(rate_bps) * delay.as_nanos() / 8 / 1_000_000_000 * 3;
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_forward;
#[cfg(test)]
mod tests_int;
#[cfg(test)]
mod tests_shared;
