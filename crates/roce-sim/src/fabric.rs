//! NICs on the ports of one [`Switch`]: the topology of the congestion experiments (incast,
//! fairness, PFC's victim flows). Host i is at 198.18.0.(i + 1) on port i. Each host's egress
//! serialises at the port's line rate and honours the PFC frames the switch sends it, per
//! priority, as a NIC does.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use roce_core::{Duration, Instant, MAX_DATAGRAM, Qpn};

use crate::capture::Capture;
use crate::event_loop::{self, Network};
use crate::pair::{PairConfig, Side, connect_nodes, side};
use crate::serialisation::serialisation_nanos;
use crate::switch::{CLASSES, Switch, SwitchConfig};
use crate::{Net, SimPacket, set_sim_time};

/// A host's egress: a queue per priority, PFC pause state, and the cable to the switch.
#[derive(Debug, Default)]
struct Host {
    queues: [VecDeque<SimPacket>; CLASSES],
    busy_until: Instant,
    paused_until: [Instant; CLASSES],
    cable: BinaryHeap<Reverse<(Instant, u64)>>,
    cable_packets: Vec<(u64, SimPacket)>,
    pauses_received: u64,
}

/// N hosts on one switch.
#[derive(Debug)]
pub struct Fabric {
    /// The hosts' NICs and objects; host i is on port i.
    pub nodes: Vec<Side>,
    /// The switch.
    pub switch: Switch,
    hosts: Vec<Host>,
    /// Simulated time.
    pub now: Instant,
    config: PairConfig,
    seq: u64,
    /// Packets that crossed a link: a host's cable to the switch, or the switch's to a host.
    packet_hops: u64,
    buf: Vec<u8>,
    /// Where the packets the hosts send are written, if anywhere.
    capture: Option<Capture>,
}

impl Fabric {
    /// `n` hosts (NICs as `config` describes) on an `n`-port switch. With HPCC-PINT on the
    /// NICs the switch meters its ports for it ([`crate::switch::PintMeter`]).
    pub fn new(n: usize, config: &PairConfig, mut switch: SwitchConfig) -> Self {
        if switch.pint.is_none() {
            switch.pint = crate::switch::PintMeter::for_congestion(&config.nic.congestion);
        }
        let nodes: Vec<Side> = (0..n).map(|i| side(config, Net::addr(i))).collect();
        let routes = (0..n).map(|i| (Net::addr(i), i)).collect();
        Self {
            nodes,
            switch: Switch::new(switch, n, routes, config.seed),
            hosts: (0..n).map(|_| Host::default()).collect(),
            now: Instant::ZERO,
            config: config.clone(),
            seq: 0,
            packet_hops: 0,
            buf: vec![0; MAX_DATAGRAM],
            capture: None,
        }
    }

    /// Writes every packet a host puts on its cable to the switch into `capture` from now on,
    /// stamped with the simulated time its serialisation starts: each packet once, as the host
    /// sends it (what the switch then drops included, its CE marks not).
    pub fn capture(&mut self, capture: Capture) {
        self.capture = Some(capture);
    }

    /// Connects a new QP on host `i` to a new QP on host `j`; returns their numbers.
    pub fn connect(&mut self, i: usize, j: usize) -> (Qpn, Qpn) {
        self.connect_dscp(i, j, 0)
    }

    /// [`Fabric::connect`] with both QPs' packets sent with `dscp` (the address vector's traffic
    /// class), which the switch maps to a priority.
    pub fn connect_dscp(&mut self, i: usize, j: usize, dscp: u8) -> (Qpn, Qpn) {
        connect_nodes(&self.config, &mut self.nodes, i, j, dscp)
    }

    /// Packets that crossed one link so far (host to switch, or switch to host; PFC frames are
    /// not counted): the unit of a simulation's work, as in [`crate::network`]'s runs.
    pub fn packet_hops(&self) -> u64 {
        self.packet_hops
    }

    /// PAUSE frames host `i` has received.
    pub fn pauses_received(&self, i: usize) -> u64 {
        self.hosts[i].pauses_received
    }

    /// Steps until `done(self)` holds or `deadline` passes; returns whether it held.
    pub fn drive_while(&mut self, deadline: Instant, done: impl FnMut(&mut Self) -> bool) -> bool {
        event_loop::drive_while(self, deadline, done)
    }

    /// Runs everything due at `now`, then jumps to the next event; false when none is left.
    pub fn step(&mut self) -> bool {
        self.exchange();
        let now = self.now;
        let timers = self.nodes.iter().filter_map(|n| n.nic.poll_timeout());
        let hosts = self.hosts.iter().flat_map(|h| {
            let cable = h.cable.peek().map(|Reverse((at, _))| *at);
            // A host with packets waits for its port to be free and its priority unpaused.
            let send = (0..CLASSES)
                .filter(|&c| !h.queues[c].is_empty())
                .map(|c| h.busy_until.max(h.paused_until[c]))
                .min();
            [cable, send.map(|at| at.max(now))]
        });
        let next = timers
            .chain(hosts.flatten())
            .chain(self.switch.next_event())
            .min();
        match next {
            Some(at) if at > now => {
                self.now = at;
                set_sim_time(at);
                true
            }
            // Something is due now (a wake-up that moved nothing): nudge time by a nanosecond
            // rather than spin.
            Some(_) => {
                self.now = now + Duration::from_nanos(1);
                true
            }
            None => false,
        }
    }

    fn exchange(&mut self) {
        let mut network = Ports {
            switch: &mut self.switch,
            hosts: &mut self.hosts,
            seq: &mut self.seq,
            hops: &mut self.packet_hops,
            capture: self.capture.as_ref(),
        };
        event_loop::exchange(self.now, &mut self.nodes, &mut network, &mut self.buf);
    }
}

/// The hosts' egress and the switch: host i on port i.
struct Ports<'a> {
    switch: &'a mut Switch,
    hosts: &'a mut [Host],
    seq: &'a mut u64,
    hops: &'a mut u64,
    capture: Option<&'a Capture>,
}

impl Network for Ports<'_> {
    /// The switch moves on, and hands the hosts the PFC frames that reached them.
    fn advance(&mut self, now: Instant) -> bool {
        let mut progress = false;
        self.switch.advance(now);
        for (i, host) in self.hosts.iter_mut().enumerate() {
            while let Some(frame) = self.switch.pause_frame(now, i) {
                host.paused_until[usize::from(frame.priority)] = frame.until;
                host.pauses_received += u64::from(frame.until > frame.at);
                progress = true;
            }
        }
        progress
    }

    fn deliver(&mut self, now: Instant, to: usize) -> Option<SimPacket> {
        let packet = self.switch.deliver(now, to);
        *self.hops += u64::from(packet.is_some());
        packet
    }

    /// Into the host's egress queue of the packet's priority.
    fn send(&mut self, _now: Instant, from: usize, p: SimPacket) {
        let priority_of = self.switch.config().dscp_to_priority;
        let class = usize::from(priority_of[usize::from(p.dscp & 63)]) % CLASSES;
        self.hosts[from].queues[class].push_back(p);
    }

    /// Each host's egress: one packet at a time at line rate, paused priorities wait; what has
    /// crossed the cable reaches the switch.
    fn forward(&mut self, now: Instant) -> bool {
        let bandwidth = self.switch.config().bandwidth_bps.max(1);
        let latency = self.switch.config().latency;
        let mut progress = false;
        for (i, host) in self.hosts.iter_mut().enumerate() {
            while host.busy_until <= now {
                let Some(class) = (0..CLASSES)
                    .rev()
                    .find(|&c| !host.queues[c].is_empty() && host.paused_until[c] <= now)
                else {
                    break;
                };
                let p = host.queues[class].pop_front().expect("chosen non-empty");
                let nanos = serialisation_nanos(p.wire_len() as u64, bandwidth);
                let begins = now.max(host.busy_until);
                if let Some(capture) = self.capture {
                    capture.record(begins, &p);
                }
                let end = begins + Duration::from_nanos(nanos);
                host.busy_until = end;
                *self.seq += 1;
                host.cable.push(Reverse((end + latency, *self.seq)));
                host.cable_packets.push((*self.seq, p));
                progress = true;
            }
            while let Some(Reverse((at, seq))) = host.cable.peek().copied() {
                if at > now {
                    break;
                }
                host.cable.pop();
                let index = host
                    .cable_packets
                    .iter()
                    .position(|(s, _)| *s == seq)
                    .expect("queued with its packet");
                let p = host.cable_packets.swap_remove(index).1;
                self.switch.receive(at, i, p);
                *self.hops += 1;
                progress = true;
            }
        }
        progress
    }
}

event_loop::impl_event_loop!(Fabric);
