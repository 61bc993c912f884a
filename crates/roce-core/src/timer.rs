//! Per-QP deadlines, as data (quinn's `timer.rs`). `Nic::poll_timeout` is the earliest over all
//! QPs; `handle_timeout` fires the expired ones. A spurious or early call fires nothing, so
//! re-arming is always a plain `set`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use roce_wire::Qpn;

use crate::Instant;

/// A QP's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Timer {
    /// Local ACK timeout (4.096 µs × 2^timeout): go back to the oldest unacknowledged PSN.
    Retransmit,
    /// The RNR NAK delay has passed: send again the request that found no receive WR.
    RnrRetry,
    /// DCQCN reaction point: the rate-increase timer (`rpg_time_reset`) ticks.
    RateIncrease,
    /// Pacing: the requester may send its next packet at the QP's rate.
    Pacing,
}

impl Timer {
    pub(crate) const ALL: [Self; 4] = [
        Self::Retransmit,
        Self::RnrRetry,
        Self::RateIncrease,
        Self::Pacing,
    ];
}

/// When each timer expires, if armed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TimerTable([Option<Instant>; 4]);

impl TimerTable {
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.0[timer as usize] = Some(at);
    }

    pub(crate) fn stop(&mut self, timer: Timer) {
        self.0[timer as usize] = None;
    }

    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.0[timer as usize]
    }

    /// The earliest armed deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.0.iter().flatten().min().copied()
    }

    /// Stops and returns the timer if it expired at `now`.
    pub(crate) fn expire(&mut self, timer: Timer, now: Instant) -> bool {
        match self.0[timer as usize] {
            Some(at) if at <= now => {
                self.0[timer as usize] = None;
                true
            }
            _ => false,
        }
    }
}

/// Every QP's earliest deadline, in a min-heap: `Nic::poll_timeout` reads the top and
/// `Nic::handle_timeout` pops the due ones, without looking at every QP (with 10 000 QPs a scan
/// at every turn of a driver was most of its work). A QP's deadline moves at nearly every packet
/// (the retransmit timer restarts), so entries are not moved: a new one is pushed, and the old
/// one goes stale. The QP's `indexed.deadline` tells the current entry from stale ones; the NIC
/// drops stale entries when they reach the top, and compacts the heap when they pile up.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, Qpn)>>,
}

impl Deadlines {
    /// Adds `qpn`'s new deadline.
    pub(crate) fn push(&mut self, qpn: Qpn, at: Instant) {
        self.heap.push(Reverse((at, qpn)));
    }

    /// The earliest entry (perhaps stale).
    pub(crate) fn peek(&self) -> Option<(Instant, Qpn)> {
        self.heap.peek().map(|&Reverse(entry)| entry)
    }

    /// Removes the earliest entry.
    pub(crate) fn pop(&mut self) -> Option<(Instant, Qpn)> {
        self.heap.pop().map(|Reverse(entry)| entry)
    }

    /// Entries, stale ones included.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Keeps the entries `current` says are not stale.
    pub(crate) fn retain(&mut self, mut current: impl FnMut(Instant, Qpn) -> bool) {
        self.heap.retain(|&Reverse((at, qpn))| current(at, qpn));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expire_only_when_due() {
        let mut table = TimerTable::default();
        assert_eq!(table.next(), None);
        table.set(Timer::Retransmit, Instant::from_micros(10));
        table.set(Timer::RnrRetry, Instant::from_micros(5));
        assert_eq!(table.next(), Some(Instant::from_micros(5)));
        assert!(!table.expire(Timer::Retransmit, Instant::from_micros(9)));
        assert!(table.expire(Timer::RnrRetry, Instant::from_micros(5)));
        assert!(
            !table.expire(Timer::RnrRetry, Instant::from_micros(6)),
            "fires once"
        );
        assert_eq!(table.next(), Some(Instant::from_micros(10)));
        table.stop(Timer::Retransmit);
        assert_eq!(table.get(Timer::Retransmit), None);
    }

    #[test]
    fn the_deadline_heap_gives_the_earliest_entry_first() {
        let at = Instant::from_micros;
        let mut d = Deadlines::default();
        d.push(Qpn::new(0x12), at(30));
        d.push(Qpn::new(0x11), at(10));
        d.push(Qpn::new(0x11), at(40));
        assert_eq!(d.peek(), Some((at(10), Qpn::new(0x11))));
        // 0x11's entry at 10 is stale (its deadline moved to 40): the NIC drops it.
        d.retain(|t, qpn| !(qpn == Qpn::new(0x11) && t == at(10)));
        assert_eq!(d.len(), 2);
        assert_eq!(d.pop(), Some((at(30), Qpn::new(0x12))));
        assert_eq!(d.pop(), Some((at(40), Qpn::new(0x11))));
        assert_eq!(d.pop(), None);
    }
}
