//! The NIC's budget of unacknowledged request packets, all RC QPs together.
//!
//! Each RC QP keeps at most `max_unacked_psns` packets unacknowledged (rxe's window), but a NIC
//! with many busy QPs would then have QPs × window packets in flight at once: 1000 QPs × 128 ×
//! 4 KiB is 512 MiB. A hardware NIC is held back by its line rate and its transmit resources;
//! over sockets nothing holds it, and the peer's receive buffer overflows instead (measured: 100
//! QPs writing over a veth lost thousands of datagrams to `UdpRcvbufErrors`, each loss costing a
//! go-back-N of its QP, and Jain's index fell to 0.33). So the NIC counts the packets every RC
//! QP has unacknowledged, and a QP whose next request would pass `max_unacked_total` waits in
//! line until ACKs bring the total down. Room is then granted in the order the QPs waited, a
//! burst of `tx_burst_packets` per grant (sent in a row, the last asking for an ACK: see
//! `nic/schedule.rs`), and while anyone waits nobody without a grant sends a request: otherwise
//! the QPs whose ACKs make the room (and so are polled first) would take it again and again, and
//! the others starve (Jain's index 0.49 over 1000 QPs in the simulator before grants).
//!
//! A requester asks for an ACK (AckReq) at the end of each message and every
//! `max_pkts_per_ack` packets (rxe's cadence). Within a budget that is a hazard: if every packet
//! in flight came after its QP's last AckReq, no ACK would come back and no room would open.
//! So the NIC also counts the packets in flight sent since their QP's last AckReq
//! (*uncovered*), and a request that would take them past half the budget asks for an ACK:
//! however the budget fills, at least half of it then lies at or before an AckReq, whose ACK
//! makes room. (Before, every request asked for an ACK once half the budget was spent: with 100
//! QPs writing over a veth that was 312 k ACKs for 320 k packets, against 9.4 k with one QP.)

use std::collections::VecDeque;

use roce_wire::Qpn;

/// Unacknowledged request packets in all (each QP's share is kept on the QP, in
/// `Qp::indexed`), the QPs waiting for room and the grants handed out.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    total: u32,
    /// Of `total`, the packets sent after their QP's last AckReq (each QP's share is on the QP).
    uncovered: u32,
    /// Each QP once (the NIC keeps `Qp::indexed.waiting`).
    waiting: VecDeque<Qpn>,
    /// Grants handed out and not yet used: room promised to a QP.
    granted: u32,
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

    /// A QP that had `old` uncovered packets in flight now has `new`.
    pub(crate) fn update_uncovered(&mut self, old: u32, new: u32) {
        self.uncovered = self.uncovered - old + new;
    }

    /// Packets in flight sent after their QP's last AckReq, all QPs together.
    pub(crate) fn uncovered(&self) -> u32 {
        self.uncovered
    }

    /// Whether the next request packet must ask for an ACK so that the uncovered packets stay
    /// within half of a budget of `limit`.
    pub(crate) fn must_cover(&self, limit: u32) -> bool {
        (self.uncovered + 1).saturating_mul(2) > limit
    }

    /// Whether a QP may send a request now: there is room, and it has a grant or nobody waits.
    pub(crate) fn may_send(&self, limit: u32, granted: bool) -> bool {
        self.total < limit && (granted || self.waiting.is_empty())
    }

    /// `qpn` has a request to send and may not: it waits for room, behind the others, or first
    /// in line if it had a grant that others' packets used up (the caller makes sure it is not
    /// waiting already).
    pub(crate) fn wait(&mut self, qpn: Qpn, first: bool) {
        if first {
            self.waiting.push_front(qpn);
        } else {
            self.waiting.push_back(qpn);
        }
    }

    /// `packets` of a grant were used, or given back (its QP had nothing more to send).
    pub(crate) fn grant_used(&mut self, packets: u32) {
        self.granted = self.granted.saturating_sub(packets);
    }

    /// Grants the room below `limit` not already promised to the waiting QPs, in order, a
    /// burst of `burst` packets each (at most `limit`), handing each QP and its packets to
    /// `release`. Less room than a burst waits for more: were it handed out as it comes —
    /// a packet or two as each ACK returns — the QPs would take turns a packet each, every one
    /// of them asking for an ACK that frees a packet or two again.
    #[inline]
    pub(crate) fn release(&mut self, limit: u32, burst: u32, mut release: impl FnMut(Qpn, u32)) {
        if self.waiting.is_empty() {
            return; // after nearly every packet: nobody waits
        }
        let grant = burst.clamp(1, limit.max(1));
        let mut room = limit.saturating_sub(self.total + self.granted);
        while room >= grant
            && let Some(qpn) = self.waiting.pop_front()
        {
            room -= grant;
            self.granted += grant;
            release(qpn, grant);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn released(f: &mut InFlight, limit: u32, burst: u32) -> Vec<(Qpn, u32)> {
        let mut out = Vec::new();
        f.release(limit, burst, |qpn, packets| out.push((qpn, packets)));
        out
    }

    #[test]
    fn room_is_granted_in_the_order_qps_waited_and_nobody_else_sends_meanwhile() {
        let (a, b, c) = (Qpn::new(0x11), Qpn::new(0x12), Qpn::new(0x13));
        let mut f = InFlight::default();
        f.update(0, 100);
        f.update(0, 28);
        assert_eq!(f.total(), 128);
        assert!(!f.may_send(128, false), "no room");
        f.wait(c, false);
        f.wait(a, false);
        assert!(released(&mut f, 128, 1).is_empty(), "no room yet");
        f.update(100, 99);
        assert_eq!(
            released(&mut f, 128, 1),
            [(c, 1)],
            "room for one packet: one grant"
        );
        assert!(released(&mut f, 128, 1).is_empty(), "that room is promised");
        assert!(!f.may_send(128, false), "a waits: nobody else sends");
        assert!(f.may_send(128, true), "c has the grant");
        f.grant_used(1);
        f.update(99, 60);
        assert_eq!(f.total(), 88);
        assert_eq!(released(&mut f, 128, 1), [(a, 1)]);
        f.grant_used(1);
        assert!(
            f.may_send(128, false),
            "nobody waits: anyone with room sends"
        );
        // A QP whose grant was used up by others goes back first in line.
        f.wait(b, false);
        f.wait(c, true);
        f.update(60, 0);
        f.update(28, 0);
        assert_eq!(released(&mut f, 128, 1), [(c, 1), (b, 1)]);
    }

    #[test]
    fn a_grant_is_a_burst_of_room_and_what_is_left_of_it_comes_back() {
        let (a, b, c) = (Qpn::new(0x11), Qpn::new(0x12), Qpn::new(0x13));
        let mut f = InFlight::default();
        f.update(0, 128);
        for qpn in [a, b, c] {
            f.wait(qpn, false);
        }
        // An ACK of a packet or two makes too little room for a burst: it waits for more.
        f.update(128, 127);
        assert!(released(&mut f, 128, 16).is_empty(), "1 packet of room");
        // An ACK covering a burst of 16 makes room for 20: a whole burst for the first in
        // line, and the 4 left wait.
        f.update(127, 108);
        assert_eq!(released(&mut f, 128, 16), [(a, 16)]);
        assert!(released(&mut f, 128, 16).is_empty(), "4 packets of room");
        // a sends 3 packets of its grant and runs out of requests: the 13 it did not use come
        // back, and with the 4 b has a burst.
        f.grant_used(3);
        f.update(108, 111);
        f.grant_used(13);
        assert_eq!(released(&mut f, 128, 16), [(b, 16)]);
        assert_eq!(f.total() + 16, 127, "one packet of room left, c waits");
        // A burst larger than the budget is the budget.
        let mut g = InFlight::default();
        g.update(0, 8);
        g.wait(c, false);
        g.update(8, 0);
        assert_eq!(released(&mut g, 8, 16), [(c, 8)]);
    }
}
