//! What each event does: packets cross links, switches forward and PFC-pause, hosts' links
//! serialise, NICs receive, fire timers and are asked for packets.

use std::net::SocketAddr;

use roce_core::{Duration, Instant};

use super::events::Event;
use super::flows::FlowRun;
use super::{Network, PacketRef};
use crate::switch::{Departure, Forwarded, Frame};
use crate::{SimPacket, set_sim_time};

impl Network {
    /// Runs every event due by `until`, in order; `run` hears of flow starts and completions.
    pub(super) fn run_events(&mut self, until: Instant, run: &mut FlowRun<'_>) {
        while let Some((at, event)) = self.events.pop_until(until) {
            if at != self.now {
                self.now = at;
                set_sim_time(at);
            }
            self.prefetch_upcoming();
            match event {
                Event::Arrival { node, port, packet } => self.arrival(node, port, packet, run),
                Event::Pause {
                    node,
                    port,
                    priority,
                    until,
                } => self.pause(node, port, priority, until.into(), run),
                Event::PortFree { node, port } => self.port_free(node, port),
                Event::PortKick { node, port } => self.serve(node, port),
                Event::HostTx { host } => {
                    let e = &mut self.egress[host as usize];
                    if e.tx_at == Some(at) {
                        e.tx_at = None;
                    }
                    self.touch(host as usize, run);
                }
                Event::NicTimer { host } => {
                    let e = &mut self.egress[host as usize];
                    if e.timer_at == Some(at) {
                        e.timer_at = None;
                    }
                    self.touch(host as usize, run);
                }
                Event::FlowStart { flow } => run.start(self, flow as usize),
                Event::QueueSample => self.sample_queues(at),
                Event::PauseRefresh {
                    node,
                    port,
                    priority,
                } => {
                    if let Some(s) = self.switches[node as usize].as_mut() {
                        s.check_pause(at, usize::from(port), priority);
                    }
                    self.send_pauses(node, port);
                }
            }
        }
        if self.now < until {
            self.now = until;
            set_sim_time(until);
        }
    }

    /// Cache hints for the next event: what it will read first.
    #[inline]
    fn prefetch_upcoming(&self) {
        let (pool, wiring, switches) = (&self.pool, &self.wiring, &self.switches);
        self.events.prefetch_upcoming(|event| match *event {
            Event::Arrival { node, port, packet } => {
                if wiring.host_index(node).is_some() {
                    pool.prefetch(&packet);
                } else if let Some(Some(s)) = switches.get(node as usize) {
                    s.prefetch_ingress(usize::from(port), &packet);
                    // Most arrivals leave at once: an INT record or a PINT value goes into the
                    // slot.
                    if packet.int_flag() || packet.pint_flag() {
                        pool.prefetch(&packet);
                    }
                }
            }
            Event::PortFree { node, port } | Event::PortKick { node, port } => {
                if let Some(Some(s)) = switches.get(node as usize) {
                    s.prefetch_departure(usize::from(port));
                }
            }
            _ => {}
        });
    }

    /// A packet reaches `node`: a host's NIC takes it, a switch forwards it.
    fn arrival(&mut self, node: u32, port: u16, packet: PacketRef, run: &mut FlowRun<'_>) {
        self.packet_hops += 1;
        let now = self.now;
        if let Some(h) = self.wiring.host_index(node) {
            let side = &mut self.sides[h];
            self.pool
                .datagram(packet, &mut self.rx)
                .deliver(now, &mut side.nic);
            self.pool.free(packet.index);
            self.egress[h].stats.received += 1;
            self.touch(h, run);
            return;
        }
        let egress = packet
            .tuple()
            .and_then(|tuple| self.wiring.forward_tuple(node, tuple));
        let Some(egress) = egress else {
            self.unroutable += 1;
            self.pool.free(packet.index);
            return;
        };
        let switch = self.switches[node as usize]
            .as_mut()
            .expect("a node that is no host is a switch");
        match switch.forward(now, usize::from(port), usize::from(egress), packet) {
            // Through a free port with nothing queued: on the cable at once, as `serve` puts
            // it (the arrival had no PFC frame to send first, or it would have been queued).
            Forwarded::Departed(departure) => return self.launch(node, egress, departure),
            Forwarded::Dropped(packet) => self.pool.free(packet.index),
            Forwarded::Queued => {}
        }
        self.send_pauses(node, port);
        self.serve(node, egress);
    }

    /// A PFC frame reaches `node`: it stops (or resumes) `priority` on its port towards the
    /// sender.
    fn pause(&mut self, node: u32, port: u16, priority: u8, until: Instant, run: &mut FlowRun) {
        let now = self.now;
        if let Some(h) = self.wiring.host_index(node) {
            let e = &mut self.egress[h];
            e.paused_until[usize::from(priority) % e.paused_until.len()] = until;
            if until > now {
                e.stats.pauses_received += 1;
                self.events.push(until, Event::HostTx { host: h as u32 });
            } else {
                self.touch(h, run);
            }
            return;
        }
        if let Some(s) = self.switches[node as usize].as_mut()
            && s.set_egress_pause(now, usize::from(port), priority, until)
        {
            self.events.push(until, Event::PortKick { node, port });
        }
        self.serve(node, port);
    }

    /// A switch port finished serialising a packet and has more queued: the next one starts.
    fn port_free(&mut self, node: u32, port: u16) {
        let g = self.wiring.global(node, port);
        if self.port_free_at[g] == Some(self.now) {
            self.port_free_at[g] = None;
        }
        self.serve(node, port);
    }

    /// `node`'s `port` starts its next packet if it is free and one may go: the packet is put
    /// on the cable at once, to arrive when its serialisation ends plus the link's delay. A
    /// packet that finds its port free and its queue empty so costs one event for the hop
    /// (its arrival); only a port with packets still queued is woken again at the end of the
    /// one it sends (`PortFree`).
    fn serve(&mut self, node: u32, port: u16) {
        let now = self.now;
        let Some(switch) = self.switches[node as usize].as_mut() else {
            return;
        };
        let p = usize::from(port);
        let departure = switch.depart(now, p);
        // Still sending, with more queued: woken at the end (a paused class is woken by its
        // `PortKick` instead, when its pause ends).
        let wake = Some(switch.busy_until(p)).filter(|&end| end > now && switch.has_queued(p));
        if let Some(departure) = departure {
            self.launch(node, port, departure);
        }
        if let Some(end) = wake {
            let g = self.wiring.global(node, port);
            if self.port_free_at[g] != Some(end) {
                self.port_free_at[g] = Some(end);
                self.events.push(end, Event::PortFree { node, port });
            }
        }
    }

    /// A packet `node` started on `port`: it arrives at the far end when its serialisation
    /// ends plus the link's delay, and its leaving may have changed its ingress's PFC state.
    #[inline(always)]
    fn launch(&mut self, node: u32, port: u16, departure: Departure<PacketRef>) {
        if departure.packet.int_flag() {
            self.stamp_int(node, port, departure.packet);
        }
        if departure.packet.pint_flag() {
            self.raise_pint(node, port, departure.packet);
        }
        let peer = self.wiring.peer(node, port);
        self.events.push(
            departure.end + peer.delay,
            Event::Arrival {
                node: peer.node,
                port: peer.port,
                packet: departure.packet,
            },
        );
        self.send_pauses(node, departure.ingress as u16);
    }

    /// `node`'s `port` started `packet`, which carries an INT header: the port's record goes
    /// into it (HPCC; `switch/int.rs`).
    #[inline(never)]
    fn stamp_int(&mut self, node: u32, port: u16, packet: PacketRef) {
        if let Some(Some(s)) = self.switches.get(node as usize) {
            let hop = s.int_record(self.now, usize::from(port), packet.wire_len());
            self.pool.stamp_int(packet, hop);
        }
    }

    /// `node`'s `port` started `packet`, which carries a PINT header: the value the port gave
    /// it goes into it (HPCC-PINT; `switch/int.rs`).
    #[inline(never)]
    fn raise_pint(&mut self, node: u32, port: u16, packet: PacketRef) {
        if let Some(Some(s)) = self.switches.get(node as usize) {
            self.pool
                .raise_pint(packet, s.pint_value(usize::from(port)));
        }
    }

    /// Puts the PFC frames `node` sent out of `port` on that link.
    #[inline]
    fn send_pauses(&mut self, node: u32, port: u16) {
        let Some(s) = self.switches[node as usize].as_ref() else {
            return;
        };
        if s.has_pause_frames(usize::from(port)) {
            self.put_pauses(node, port); // rarely
        }
    }

    #[cold]
    fn put_pauses(&mut self, node: u32, port: u16) {
        let Some(s) = self.switches[node as usize].as_mut() else {
            return;
        };
        let peer = self.wiring.peer(node, port);
        for frame in s.take_pause_frames(usize::from(port)) {
            self.events.push(
                frame.at + peer.delay,
                Event::Pause {
                    node: peer.node,
                    port: peer.port,
                    priority: frame.priority,
                    until: (frame.until + peer.delay).into(),
                },
            );
            if frame.until > frame.at {
                let priority = frame.priority;
                let refresh = Event::PauseRefresh {
                    node,
                    port,
                    priority,
                };
                self.events.push(frame.refresh_at(), refresh);
            }
        }
    }

    /// Host `h` was touched: its due timers fire, its link takes what its NIC has to send while
    /// it is free, its completions go to the flows, and its next timer is scheduled.
    pub(super) fn touch(&mut self, h: usize, run: &mut FlowRun<'_>) {
        let now = self.now;
        loop {
            let nic = &mut self.sides[h].nic;
            if nic.poll_timeout().is_some_and(|at| at <= now) {
                nic.handle_timeout(now);
            }
            self.pump(h);
            if !run.completions(self, h) {
                break;
            }
        }
        let e = &mut self.egress[h];
        if let Some(at) = self.sides[h].nic.poll_timeout() {
            // A timer that did not move on when fired would spin: try again a nanosecond later.
            let at = at.max(now + Duration::from_nanos(1));
            if e.timer_at.is_none_or(|pending| at < pending) {
                e.timer_at = Some(at);
                self.events.push(at, Event::NicTimer { host: h as u32 });
            }
        }
    }

    /// Host `h`'s link: while it is free, the next packet of a priority not paused goes, asked
    /// of the NIC when none is queued.
    fn pump(&mut self, h: usize) {
        let now = self.now;
        let node = self.host_nodes[h].0;
        let peer = self.wiring.peer(node, 0);
        loop {
            let e = &mut self.egress[h];
            if e.busy_until > now {
                if e.tx_at != Some(e.busy_until) {
                    e.tx_at = Some(e.busy_until);
                    self.events
                        .push(e.busy_until, Event::HostTx { host: h as u32 });
                }
                return;
            }
            let packet = match e.pop_sendable(now) {
                Some(packet) => packet,
                None => {
                    // Only paused priorities are queued: a bounded number more may wait behind
                    // them.
                    if e.queued() >= HOST_QUEUE_LIMIT {
                        return;
                    }
                    let Some(transmit) = self.sides[h].nic.poll_transmit(now, &mut self.buf) else {
                        return;
                    };
                    if let Some(capture) = &self.capture {
                        let payload = self.buf[..transmit.len].to_vec();
                        let src = SocketAddr::new(self.sides[h].addr, transmit.src_port);
                        let mut sent = SimPacket::new(src, transmit.dst, payload);
                        sent.ecn = transmit.ecn;
                        sent.dscp = transmit.dscp;
                        capture.record(now, &sent);
                    }
                    let packet = self.pool.insert(&transmit, &self.buf);
                    let priority_of = &self.config.switch.dscp_to_priority;
                    let class = usize::from(priority_of[usize::from(transmit.dscp & 63)]);
                    let e = &mut self.egress[h];
                    if !e.may_bypass(class, now) {
                        e.push(class, packet);
                        continue;
                    }
                    // Nothing before it and its priority free: it goes now, as the queue would
                    // have sent it.
                    packet
                }
            };
            let e = &mut self.egress[h];
            let bytes = packet.wire_len() as u64;
            let nanos = e.last_serialised.nanos(bytes, peer.rate_bps);
            e.busy_until = now + Duration::from_nanos(nanos);
            e.stats.sent += 1;
            e.stats.sent_bytes += bytes;
            self.events.push(
                e.busy_until + peer.delay,
                Event::Arrival {
                    node: peer.node,
                    port: peer.port,
                    packet,
                },
            );
        }
    }
}

/// Packets a host's egress holds while their priorities are paused before it stops asking its
/// NIC for more.
const HOST_QUEUE_LIMIT: usize = 64;
