//! The one event queue of a [`Network`](super::Network): a binary heap of
//! `(time, sequence, event)`. The sequence number, taken when an event is pushed, breaks ties
//! between events due at the same instant in the order they were scheduled, so a run is the same
//! whatever the heap's internal order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use roce_core::Instant;

/// Something that happens to one node at one instant. Nodes are topology ids, ports are a
/// node's links in [`Topology::neighbors`](crate::topology::Topology::neighbors) order, packets
/// are indexes into the packet pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Event {
    /// A packet's last bit reaches `node` on `port`.
    Arrival { node: u32, port: u16, packet: u32 },
    /// A PFC frame reaches `node` on `port`: it may not send `priority` out of that port until
    /// `until` (a resume when `until` is the arrival time).
    Pause {
        node: u32,
        port: u16,
        priority: u8,
        until: Instant,
    },
    /// A switch port finishes serialising its packet.
    PortFree { node: u32, port: u16 },
    /// A switch port's pause runs out: it may start again.
    PortKick { node: u32, port: u16 },
    /// A host's egress is free, or one of its pauses ran out.
    HostTx { host: u32 },
    /// A host's NIC has a timer due.
    NicTimer { host: u32 },
    /// A flow starts.
    FlowStart { flow: u32 },
}

/// Events in time order, ties in the order pushed.
#[derive(Debug, Default)]
pub(super) struct EventQueue {
    heap: BinaryHeap<Reverse<(Instant, u64, Event)>>,
    seq: u64,
    peak: usize,
}

impl EventQueue {
    /// Schedules `event` at `at`.
    pub(super) fn push(&mut self, at: Instant, event: Event) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, event)));
        self.peak = self.peak.max(self.heap.len());
    }

    /// The earliest event, if it is due by `until`.
    pub(super) fn pop_until(&mut self, until: Instant) -> Option<(Instant, Event)> {
        let Reverse((at, _, _)) = self.heap.peek()?;
        if *at > until {
            return None;
        }
        self.heap.pop().map(|Reverse((at, _, event))| (at, event))
    }

    /// Events waiting.
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }

    /// The most events that were ever waiting at once.
    pub(super) fn peak(&self) -> usize {
        self.peak
    }

    /// Events pushed so far.
    pub(super) fn pushed(&self) -> u64 {
        self.seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_keep_the_order_pushed() {
        let mut q = EventQueue::default();
        let t = Instant::from_nanos(5);
        q.push(t, Event::HostTx { host: 9 });
        q.push(Instant::from_nanos(3), Event::FlowStart { flow: 1 });
        q.push(t, Event::HostTx { host: 1 });
        q.push(Instant::from_nanos(7), Event::FlowStart { flow: 0 });
        let mut got = Vec::new();
        while let Some(e) = q.pop_until(Instant::from_nanos(6)) {
            got.push(e);
        }
        assert_eq!(
            got,
            [
                (Instant::from_nanos(3), Event::FlowStart { flow: 1 }),
                (t, Event::HostTx { host: 9 }),
                (t, Event::HostTx { host: 1 }),
            ]
        );
        assert_eq!(q.len(), 1);
    }
}
