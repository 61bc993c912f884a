//! The NIC's budget of unacknowledged request packets, all RC QPs together.
//!
//! Each RC QP keeps at most `max_unacked_psns` packets unacknowledged (rxe's window), but a NIC
//! with many busy QPs would then have QPs × window packets in flight at once: 1000 QPs × 128 ×
//! 4 KiB is 512 MiB. A hardware NIC is held back by its line rate and its transmit resources;
//! over sockets nothing holds it, and the peer's receive buffer overflows instead (measured: 100
//! QPs writing over a veth lost thousands of datagrams to `UdpRcvbufErrors`, each loss costing a
//! go-back-N of its QP, and Jain's index fell to 0.33). So the NIC counts the packets every RC
//! QP has unacknowledged, and a QP whose next request would pass `max_unacked_total` waits in
//! line (in the order the QPs were stopped) until ACKs bring the total down.

use std::collections::{BTreeSet, VecDeque};

use roce_wire::Qpn;

/// Unacknowledged request packets in all (each QP's share is kept on the QP, in
/// `Qp::indexed`), and the QPs waiting for room.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    total: u32,
    waiting: VecDeque<Qpn>,
    queued: BTreeSet<Qpn>,
}

impl InFlight {
    /// A QP that had `old` packets unacknowledged now has `new`.
    pub(crate) fn update(&mut self, old: u32, new: u32) {
        self.total = self.total - old + new;
    }

    /// Packets unacknowledged, all QPs together.
    pub(crate) fn total(&self) -> u32 {
        self.total
    }

    /// `qpn` has a request to send but no room: it waits for room.
    pub(crate) fn wait(&mut self, qpn: Qpn) {
        if self.queued.insert(qpn) {
            self.waiting.push_back(qpn);
        }
    }

    /// The QPs that waited, in order, once there is room below `limit` (none otherwise).
    pub(crate) fn take_waiting(&mut self, limit: u32) -> impl Iterator<Item = Qpn> + '_ {
        let room = self.total < limit;
        if room {
            self.queued.clear();
        }
        self.waiting
            .drain(..if room { self.waiting.len() } else { 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_follows_each_qp_and_waiting_qps_come_back_in_order_when_there_is_room() {
        let (a, b, c) = (Qpn::new(0x11), Qpn::new(0x12), Qpn::new(0x13));
        let mut f = InFlight::default();
        f.update(0, 100);
        f.update(0, 28);
        assert_eq!(f.total(), 128);
        f.wait(c);
        f.wait(a);
        f.wait(c);
        assert_eq!(f.take_waiting(128).count(), 0, "no room yet");
        f.update(100, 60);
        assert_eq!(f.total(), 88);
        assert_eq!(f.take_waiting(128).collect::<Vec<_>>(), [c, a]);
        assert_eq!(f.take_waiting(128).count(), 0);
        f.update(60, 0);
        f.update(28, 0);
        assert_eq!(f.total(), 0);
        f.wait(b);
        assert_eq!(f.take_waiting(128).collect::<Vec<_>>(), [b]);
    }
}
