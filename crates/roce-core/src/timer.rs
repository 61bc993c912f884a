//! Per-QP deadlines, as data (quinn's `timer.rs`). `Nic::poll_timeout` is the earliest over all
//! QPs; `handle_timeout` fires the expired ones. A spurious or early call fires nothing, so
//! re-arming is always a plain `set`.

use std::collections::{BTreeMap, BTreeSet};

use roce_wire::Qpn;

use crate::Instant;

/// A QP's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Timer {
    /// Local ACK timeout (4.096 µs × 2^timeout): go back to the oldest unacknowledged PSN.
    Retransmit,
    /// The RNR NAK delay has passed: send again the request that found no receive WR.
    RnrRetry,
    /// DCQCN reaction point: α decays, as no CNP arrived for `dce_tcp_rtt`.
    AlphaUpdate,
    /// DCQCN reaction point: the rate-increase timer (`rpg_time_reset`) ticks.
    RateIncrease,
    /// Pacing: the requester may send its next packet at the QP's rate.
    Pacing,
}

impl Timer {
    pub(crate) const ALL: [Self; 5] = [
        Self::Retransmit,
        Self::RnrRetry,
        Self::AlphaUpdate,
        Self::RateIncrease,
        Self::Pacing,
    ];
}

/// When each timer expires, if armed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TimerTable([Option<Instant>; 5]);

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

/// Every QP's earliest deadline, in order: `Nic::poll_timeout` reads the first and
/// `Nic::handle_timeout` takes the due ones without looking at every QP (with 10 000 QPs a scan
/// at every turn of a driver was most of its work). The NIC updates a QP's entry after
/// anything that may arm or stop one of its timers.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    by_time: BTreeSet<(Instant, Qpn)>,
    by_qp: BTreeMap<Qpn, Instant>,
}

impl Deadlines {
    /// Records `qpn`'s earliest deadline now (`None`: no timer armed, or the QP is gone).
    pub(crate) fn update(&mut self, qpn: Qpn, next: Option<Instant>) {
        let old = self.by_qp.get(&qpn).copied();
        if old == next {
            return;
        }
        if let Some(at) = old {
            self.by_time.remove(&(at, qpn));
            self.by_qp.remove(&qpn);
        }
        if let Some(at) = next {
            self.by_time.insert((at, qpn));
            self.by_qp.insert(qpn, at);
        }
    }

    /// The earliest deadline of all.
    pub(crate) fn first(&self) -> Option<Instant> {
        self.by_time.first().map(|&(at, _)| at)
    }

    /// Appends the QPs with a deadline at or before `now`, in QPN order.
    pub(crate) fn due(&self, now: Instant, out: &mut Vec<Qpn>) {
        let start = out.len();
        out.extend(
            self.by_time
                .iter()
                .take_while(|&&(at, _)| at <= now)
                .map(|&(_, qpn)| qpn),
        );
        out[start..].sort_unstable();
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
    fn deadlines_give_the_earliest_and_the_due_qps_in_qpn_order() {
        let at = Instant::from_micros;
        let mut d = Deadlines::default();
        d.update(Qpn::new(0x12), Some(at(30)));
        d.update(Qpn::new(0x11), Some(at(10)));
        d.update(Qpn::new(0x13), Some(at(20)));
        assert_eq!(d.first(), Some(at(10)));
        // Moved later, then one gone.
        d.update(Qpn::new(0x11), Some(at(40)));
        d.update(Qpn::new(0x13), None);
        assert_eq!(d.first(), Some(at(30)));
        let mut due = Vec::new();
        d.due(at(40), &mut due);
        assert_eq!(due, [Qpn::new(0x11), Qpn::new(0x12)]);
        due.clear();
        d.due(at(35), &mut due);
        assert_eq!(due, [Qpn::new(0x12)]);
        d.update(Qpn::new(0x11), None);
        d.update(Qpn::new(0x12), None);
        assert_eq!(d.first(), None);
    }
}
