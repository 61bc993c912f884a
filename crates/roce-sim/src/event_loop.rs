//! What [`Pair`](crate::Pair), [`Net`](crate::Net) and [`Fabric`](crate::Fabric) share: a
//! clock that jumps from one event to the next, the way to run it until a condition holds, and
//! the exchange at one instant ([`exchange`]): deliver what is due, fire due timers, move
//! transmits into the network, until nothing more happens. The topologies differ only in their
//! [`Network`]: two links, a mesh of links, or hosts' egress queues and a switch.

use std::borrow::BorrowMut;

use roce_core::Instant;

use crate::pair::{Side, datagram, packet};
use crate::{SimPacket, set_sim_time};

/// A simulation driven one event at a time.
pub(crate) trait EventLoop {
    /// The simulated time.
    fn clock(&self) -> Instant;
    /// Runs everything due now and moves the clock to the next event; false when none is left.
    fn next_event(&mut self) -> bool;
    /// Runs everything that can happen at the current time, until nothing more does.
    fn settle(&mut self);
}

/// Implements [`EventLoop`] for a simulation with a `now` field, a `step` that runs what is due
/// and jumps to the next event, and an `exchange` that runs what can happen now.
macro_rules! impl_event_loop {
    ($sim:ty) => {
        impl $crate::event_loop::EventLoop for $sim {
            fn clock(&self) -> roce_core::Instant {
                self.now
            }
            fn next_event(&mut self) -> bool {
                self.step()
            }
            fn settle(&mut self) {
                self.exchange();
            }
        }
    };
}
pub(crate) use impl_event_loop;

/// What carries packets between the nodes of a simulation, seen from [`exchange`]. Node `i` is
/// the `i`-th of the nodes passed along with it.
pub(crate) trait Network {
    /// Moves the network's own time to `now` (a switch's queues, its PFC frames to the hosts),
    /// at the start of every round; whether anything happened.
    fn advance(&mut self, _now: Instant) -> bool {
        false
    }
    /// The next packet due at node `to` by `now`.
    fn deliver(&mut self, now: Instant, to: usize) -> Option<SimPacket>;
    /// Node `from` sends `packet` at `now`.
    fn send(&mut self, now: Instant, from: usize, packet: SimPacket);
    /// When node `from`'s port is free to take its next packet, if that is after `now`: its NIC
    /// is not asked for one before ([`crate::LinkConfig::nic_port`]). `None`: at once.
    fn port_free_at(&self, _now: Instant, _from: usize) -> Option<Instant> {
        None
    }
    /// Moves what the nodes sent this round on towards the network (hosts' egress queues onto
    /// their cables), at the end of every round; whether anything moved.
    fn forward(&mut self, _now: Instant) -> bool {
        false
    }
    /// The name of node `i` in traces, if it has one.
    fn node_name(&self, _i: usize) -> Option<&'static str> {
        None
    }
}

/// Everything that can happen at `now`, until nothing more does. Each round: the network
/// advances, every node takes what is due for it, every node's due timer fires, every node's
/// transmits go into the network, and the network forwards them. Each NIC and each link sees its
/// calls in the same order whatever the topology.
pub(crate) fn exchange<S: BorrowMut<Side>>(
    now: Instant,
    nodes: &mut [S],
    network: &mut impl Network,
    buf: &mut [u8],
) {
    set_sim_time(now);
    loop {
        let mut progress = network.advance(now);
        for (i, node) in nodes.iter_mut().enumerate() {
            let nic = &mut node.borrow_mut().nic;
            while let Some(p) = network.deliver(now, i) {
                let _span = network
                    .node_name(i)
                    .map(|name| tracing::info_span!("nic", name).entered());
                nic.handle_datagram(now, datagram(&p));
                progress = true;
            }
        }
        for (i, node) in nodes.iter_mut().enumerate() {
            let nic = &mut node.borrow_mut().nic;
            if nic.poll_timeout().is_some_and(|at| at <= now) {
                let _span = network
                    .node_name(i)
                    .map(|name| tracing::info_span!("nic", name).entered());
                nic.handle_timeout(now);
                progress = true;
            }
        }
        for (i, node) in nodes.iter_mut().enumerate() {
            let nic = &mut node.borrow_mut().nic;
            while network.port_free_at(now, i).is_none()
                && let Some(transmit) = nic.poll_transmit(now, buf)
            {
                network.send(now, i, packet(&transmit, buf));
                progress = true;
            }
        }
        progress |= network.forward(now);
        if !progress {
            return;
        }
    }
}

/// Steps `sim` until `done(sim)` holds or `deadline` passes; returns whether it held.
pub(crate) fn drive_while<T: EventLoop>(
    sim: &mut T,
    deadline: Instant,
    mut done: impl FnMut(&mut T) -> bool,
) -> bool {
    loop {
        if done(sim) {
            return true;
        }
        if sim.clock() >= deadline || !sim.next_event() {
            sim.settle();
            return done(sim);
        }
    }
}
