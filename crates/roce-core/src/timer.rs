//! Per-QP deadlines, as data (quinn's `timer.rs`). `Nic::poll_timeout` is the earliest over all
//! QPs; `handle_timeout` fires the expired ones. A spurious or early call fires nothing, so
//! re-arming is always a plain `set`.

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
}
