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

use std::collections::VecDeque;

use roce_wire::Qpn;

/// Unacknowledged request packets in all (each QP's share is kept on the QP, in
/// `Qp::indexed`), and the QPs waiting for room.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    total: u32,
    /// Each QP once (the NIC keeps `Qp::indexed.waiting`).
    waiting: VecDeque<Qpn>,
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

    /// `qpn` has a request to send but no room: it waits for room (the caller makes sure it
    /// is not waiting already).
    pub(crate) fn wait(&mut self, qpn: Qpn) {
        self.waiting.push_back(qpn);
    }

    /// Hands `release` as many of the QPs that waited as there are packets of room below
    /// `limit`, in order: each may send at least one (releasing all at every ACK would have them
    /// all polled, and all but a few wait again).
    pub(crate) fn release(&mut self, limit: u32, mut release: impl FnMut(Qpn)) {
        let room = limit.saturating_sub(self.total) as usize;
        for _ in 0..room.min(self.waiting.len()) {
            if let Some(qpn) = self.waiting.pop_front() {
                release(qpn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_follows_each_qp_and_waiting_qps_come_back_in_order_when_there_is_room() {
        fn released(f: &mut InFlight, limit: u32) -> Vec<Qpn> {
            let mut out = Vec::new();
            f.release(limit, |qpn| out.push(qpn));
            out
        }
        let (a, b, c) = (Qpn::new(0x11), Qpn::new(0x12), Qpn::new(0x13));
        let mut f = InFlight::default();
        f.update(0, 100);
        f.update(0, 28);
        assert_eq!(f.total(), 128);
        f.wait(c);
        f.wait(a);
        assert_eq!(released(&mut f, 128).len(), 0, "no room yet");
        f.update(100, 99);
        assert_eq!(released(&mut f, 128), [c], "room for one");
        f.update(99, 60);
        assert_eq!(f.total(), 88);
        assert_eq!(released(&mut f, 128), [a]);
        assert_eq!(released(&mut f, 128).len(), 0);
        f.update(60, 0);
        f.update(28, 0);
        assert_eq!(f.total(), 0);
        f.wait(b);
        assert_eq!(released(&mut f, 128), [b]);
    }
}
