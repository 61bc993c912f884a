//! The clock and the way out: which QP sends next (QPs take turns, one packet each), the
//! QPs' deadlines, and the NIC-wide budget of unacknowledged packets (`in_flight.rs`). The
//! indexes are updated with the QP in hand, after anything that may have changed it.

use std::collections::VecDeque;

use roce_wire::Qpn;

use super::qp_table::QpTable;
use super::{MAX_DATAGRAM, Nic, Shared};
use crate::in_flight::InFlight;
use crate::qp::{Qp, QpState, QpType};
use crate::timer::{Deadlines, Timer};
use crate::{Instant, Loan, NicConfig, Transmit};

/// The NIC's indexes over its QPs.
#[derive(Debug, Default)]
pub(super) struct Schedule {
    /// QPs that may have something to send, in turn (each once: `Qp::indexed.ready`).
    ready: VecDeque<Qpn>,
    /// Each QP's earliest deadline, in order.
    deadlines: Deadlines,
    /// Scratch list of the QPs `handle_timeout` fires (kept to reuse its allocation).
    due: Vec<Qpn>,
    /// Unacknowledged request packets of all RC QPs, and the QPs waiting for room.
    in_flight: InFlight,
    /// Whether `tidy` found the top of `deadlines` current and nothing has pushed, popped or
    /// left the table since (so the next `tidy` has no stale entry to look for).
    deadlines_tidy: bool,
    /// The QP whose burst is under way (`NicConfig::tx_burst_packets`) and the packets it has
    /// sent in it so far.
    burst: Option<(Qpn, u32)>,
}

impl Nic {
    // B. inputs from the clock

    /// Fires every timer due at `now`. Early or spurious calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.cm.next.is_some_and(|at| at <= now) {
            self.cm_timeout(now);
        }
        let sched = &mut self.sched;
        sched.deadlines_tidy = false;
        let mut due = std::mem::take(&mut sched.due);
        due.clear();
        while let Some((at, qpn)) = sched.deadlines.peek()
            && at <= now
        {
            sched.deadlines.pop();
            if let Some(qp) = self.qps.get_mut(&qpn)
                && qp.indexed.deadline == Some(at)
            {
                // Popped: `index` pushes its next deadline.
                qp.indexed.deadline = None;
                due.push(qpn);
            }
        }
        due.sort_unstable();
        for &qpn in &due {
            let Some(qp) = self.qps.get_mut(&qpn) else {
                continue;
            };
            let mut ctx = self.shared.ctx(now);
            for timer in Timer::ALL {
                if qp.timers.expire(timer, now) {
                    tracing::trace!(qpn = %qpn, timer = ?timer, "expired");
                    match timer {
                        Timer::Retransmit => qp.on_retransmit_timer(&mut ctx),
                        Timer::RnrRetry => qp.on_rnr_timer(&mut ctx),
                        Timer::RateIncrease => {
                            qp.cc.rp.on_timer(timer, now, &mut qp.timers, ctx.stats);
                        }
                        // The QP is put back in line below: its next packet may go.
                        Timer::Pacing => {}
                    }
                }
            }
            self.sched.push_ready(qp);
            self.sched.index(qp);
            self.sched.tidy(&mut self.qps, &self.shared.config);
        }
        self.sched.due = due;
        self.shared.deliver_completions();
    }

    // D. outputs

    /// The next datagram to send, written into `buf` (at least [`MAX_DATAGRAM`] bytes long), or
    /// `None` when nothing is due. QPs take turns, one packet each; a QP's responses go before
    /// its requests, except that a positive ACK lets one request packet go first (see
    /// `Responder::ack_may_wait`). Its ICRC covers an IPv4 identification of 0.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.poll_transmit_segment(now, buf, 0)
    }

    /// [`Nic::poll_transmit_segment`], but the payload of an RC request, or of a READ response
    /// whose memory allows it ([`RegionMemory::lend_read_responses`](crate::RegionMemory::lend_read_responses)),
    /// that lies in memory with an address ([`RegionMemory::address`](crate::RegionMemory::address))
    /// is lent, not copied: its bytes in `buf` are left as they were, the ICRC is sealed over
    /// the region's, and one [`Loan`] per piece of it is appended to `loans`, its place counted
    /// from the start of `buf` (see `loan.rs`). Whoever sends the packet gathers it from `buf`
    /// and the loans. Payloads under 1 KiB, inline data, UC and UD requests (their WR completes
    /// before the send) and packets that carry HPCC's INT header are copied as always.
    pub fn poll_transmit_lending(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        ip_id: u16,
        loans: &mut Vec<Loan>,
    ) -> Option<Transmit> {
        self.shared.lending = true;
        let transmit = self.poll_transmit_segment(now, buf, ip_id);
        self.shared.lending = false;
        if !self.shared.loans.is_empty() {
            loans.append(&mut self.shared.loans);
        }
        transmit
    }

    /// [`Nic::poll_transmit`] for a datagram that will leave with the IPv4 identification
    /// `ip_id`, which its ICRC covers (IPv6 has none: the value is then ignored). With UDP
    /// segmentation offload, Linux numbers the segments of one `sendmsg` 0, 1, 2, … (from 0 on
    /// an unconnected socket with DF set; `inet_gso_segment` counts the ID up per segment), so
    /// a device that batches packets into one send asks for packet `i` of the batch with `i`.
    pub fn poll_transmit_segment(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        ip_id: u16,
    ) -> Option<Transmit> {
        let budget = self.shared.config.max_unacked_total;
        // Every QP's path MTU is at most the port's (checked by modify_qp), so this bounds every
        // packet without a look at each QP (and HPCC's INT header after the BTH).
        let config = &self.shared.config;
        let int = if config.congestion.carries_int() {
            roce_wire::int::HEADER_LEN
        } else {
            0
        };
        if buf.len() < MAX_DATAGRAM.min(config.max_mtu.bytes() as usize + 64 + int) {
            self.shared.stats.tx_buffer_too_small += 1;
            return None;
        }
        // Management datagrams first: a connection's set-up waits on them, and they are few.
        let shared = &mut self.shared;
        if shared.gsi.waiting() > 0
            && let Some(transmit) = shared.gsi.poll_transmit(&shared.config, ip_id, buf)
        {
            shared.stats.tx_packets += 1;
            shared.stats.tx_bytes += transmit.len as u64;
            shared.stats.tx_gsi_mads += 1;
            return Some(transmit);
        }
        while let Some(qpn) = self.sched.ready.pop_front() {
            let Some(qp) = self.qps.get_mut(&qpn) else {
                continue;
            };
            qp.indexed.ready = false;
            let burst = self.shared.config.tx_burst_packets;
            let sent = match self.sched.burst {
                Some((burst_qpn, sent)) if burst_qpn == qpn => sent,
                _ => 0,
            };
            let mid_message = qp.req.draining();
            // In line with nothing to send (a packet of its peer's that needed no answer put
            // it there): the turn would make nothing and change nothing, so only the
            // bookkeeping that ends every turn runs.
            let transmit = if idle_in_line(qp) {
                None
            } else {
                turn(
                    &mut self.sched,
                    &mut self.shared,
                    qp,
                    (now, ip_id, budget),
                    burst > 1 && sent + 1 >= burst,
                    buf,
                )
            };
            let sent = sent + 1;
            // A packet that starts or ends a message of several packets ends the burst.
            let bound = transmit.is_some() && message_bound(qp, mid_message);
            if transmit.is_some() && sent < burst && !bound {
                // Its burst goes on: first in line again.
                self.sched.burst = Some((qpn, sent));
                self.sched.push_ready_front(qp);
            } else {
                // Its burst ended, or it ran out first. Room it was granted and did not use
                // goes back: a grant usually starts a burst and is one at most, but a gated
                // turn may send a response or a CNP, join the wait, and be granted a burst
                // while its own goes on.
                self.sched.burst = None;
                self.sched.end_grant(qp);
                if transmit.is_some() {
                    // It may have more: behind the others.
                    self.sched.push_ready(qp);
                }
            }
            self.sched.index(qp);
            self.sched.tidy(&mut self.qps, &self.shared.config);
            self.shared.deliver_completions();
            if transmit.is_some() {
                return transmit;
            }
        }
        None
    }

    /// Whether [`Nic::poll_transmit`] may have a packet to send: a QP is in line to send or a
    /// management datagram waits. A device whose verbs run on other threads than the loop that
    /// sends wakes that loop after a verb only then, or when [`Nic::poll_timeout`] moved
    /// earlier: a posted receive, a poll or a query makes nothing to send (as rxe's
    /// `rxe_post_recv` schedules no task unless the QP is in error).
    pub fn may_transmit(&self) -> bool {
        !self.sched.ready.is_empty() || self.shared.gsi.waiting() > 0
    }

    /// Request packets of RC QPs sent and not yet acknowledged, over the whole NIC. Zero when
    /// no RC stream is under way.
    pub fn unacked_packets(&self) -> u32 {
        self.sched.in_flight.total()
    }

    /// Of [`Nic::unacked_packets`], those sent after their QP's last ACK request: the NIC keeps
    /// them within half of `max_unacked_total`, so that a full budget always holds packets
    /// whose ACKs will make room.
    pub fn unacked_packets_without_ack_request(&self) -> u32 {
        self.sched.in_flight.uncovered()
    }

    /// The earliest time `handle_timeout` has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // `index` keeps a current entry at the top.
        let first = self.sched.deadlines.peek().map(|(at, _)| at);
        debug_assert_eq!(
            first,
            self.qps.values().filter_map(|qp| qp.timers.next()).min(),
            "the deadline index missed a timer change"
        );
        match (first, self.cm.next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Updates the indexes after `qpn` changed, if it still exists, and tidies them.
    pub(super) fn reindex(&mut self, qpn: Qpn) {
        if let Some(qp) = self.qps.get_mut(&qpn) {
            self.sched.push_ready(qp);
            self.sched.index(qp);
        }
        self.sched.tidy(&mut self.qps, &self.shared.config);
    }

    /// A QP left the table: its packets and its grant leave the budget.
    pub(super) fn unindex(&mut self, qp: &Qp) {
        // Its deadline entries are stale now.
        self.sched.deadlines_tidy = false;
        self.sched.in_flight.update(qp.indexed.unacked, 0);
        self.sched
            .in_flight
            .update_uncovered(qp.indexed.uncovered, 0);
        self.sched.in_flight.grant_used(qp.indexed.granted);
        self.sched.tidy(&mut self.qps, &self.shared.config);
    }
}

impl Schedule {
    /// Puts `qp` in line to send, unless it is already.
    #[inline]
    pub(super) fn push_ready(&mut self, qp: &mut Qp) {
        if !qp.indexed.ready {
            qp.indexed.ready = true;
            self.ready.push_back(qp.qpn);
        }
    }

    /// Gives back the room `qp` was granted and did not use: its burst ended.
    #[inline]
    fn end_grant(&mut self, qp: &mut Qp) {
        if qp.indexed.granted > 0 {
            self.in_flight
                .grant_used(std::mem::take(&mut qp.indexed.granted));
        }
    }

    /// Puts `qp` first in line to send (it continues its burst), unless it is in line already.
    #[inline]
    fn push_ready_front(&mut self, qp: &mut Qp) {
        if !qp.indexed.ready {
            qp.indexed.ready = true;
            self.ready.push_front(qp.qpn);
        }
    }

    /// Records `qp`'s earliest deadline and its unacknowledged packets, after anything that
    /// may have changed them.
    #[inline]
    pub(super) fn index(&mut self, qp: &mut Qp) {
        let next = qp.timers.next();
        if next != qp.indexed.deadline {
            // The entry of the deadline it had, if any, is stale (and may be the top).
            self.deadlines_tidy = false;
            qp.indexed.deadline = next;
            if let Some(at) = next {
                self.deadlines.push(qp.qpn, at);
            }
        }
        // A QP out of RTS/SQD (an error flushed it, or it was reset) holds none.
        let unacked = if qp.qp_type == QpType::Rc && matches!(qp.state, QpState::Rts | QpState::Sqd)
        {
            qp.unacked()
        } else {
            0
        };
        if unacked != qp.indexed.unacked {
            self.in_flight.update(qp.indexed.unacked, unacked);
            qp.indexed.unacked = unacked;
        }
        let uncovered = qp.req.noack_pkts.min(unacked);
        if uncovered != qp.indexed.uncovered {
            self.in_flight
                .update_uncovered(qp.indexed.uncovered, uncovered);
            qp.indexed.uncovered = uncovered;
        }
    }

    /// Drops stale deadline entries at the top of the heap (and compacts it when they pile
    /// up), and grants room in the budget of `limit` packets to QPs that wait for it, if there
    /// is some.
    #[inline]
    pub(super) fn tidy(&mut self, qps: &mut QpTable, config: &NicConfig) {
        // Most calls follow a packet that moved no deadline: the top checked last is current.
        if !self.deadlines_tidy {
            self.tidy_deadlines(qps);
        }
        let ready = &mut self.ready;
        let (limit, burst) = (config.max_unacked_total, config.tx_burst_packets);
        self.in_flight.release(limit, burst, |qpn, packets| {
            if let Some(qp) = qps.get_mut(&qpn) {
                qp.indexed.waiting = false;
                qp.indexed.granted = packets;
                if !qp.indexed.ready {
                    qp.indexed.ready = true;
                    ready.push_back(qpn);
                }
            }
        });
    }

    /// Drops stale entries at the top of the deadline heap, and compacts it when they pile up
    /// (a table that shrank, or deadlines that moved many times).
    fn tidy_deadlines(&mut self, qps: &QpTable) {
        while let Some((at, top)) = self.deadlines.peek() {
            if qps
                .get(&top)
                .is_some_and(|qp| qp.indexed.deadline == Some(at))
            {
                break;
            }
            self.deadlines.pop();
        }
        if self.deadlines.len() > 4 * qps.len() + 64 {
            self.deadlines.retain(|at, qpn| {
                qps.get(&qpn)
                    .is_some_and(|qp| qp.indexed.deadline == Some(at))
            });
        }
        self.deadlines_tidy = true;
    }
}

/// One QP's turn in the ready line: its CNP, else its response or its request (a positive ACK
/// may wait for one request packet), within the NIC's budget of unacknowledged packets
/// (`budget`); a QP its requests found without room joins the budget's wait.
///
/// The request that ends a full burst (`ends_burst`) asks for an ACK, so a QP that waits for
/// its next turn mid-message holds no packet in flight that no ACK will cover. Without it, QPs
/// that stopped mid-message kept half the budget uncovered, and every request of the others had
/// to ask for an ACK (`InFlight::must_cover`). A burst that ends at its message's end asks by
/// the message's own rule; one that ends at a message's FIRST packet (`message_bound`) does
/// not ask, and `must_cover` bounds what such packets leave uncovered (at 1000 QPs in step, 30 k
/// ACKs for 320 k packets where bursts alone had 20 k, with the goodput up: docs/benchmarks.md).
/// A grant needs no rule of its own: it starts a burst and is one at most (what is left at the
/// burst's end goes back), or the whole budget when that is smaller, where `must_cover` asks
/// within it.
#[inline]
fn turn(
    sched: &mut Schedule,
    shared: &mut Shared,
    qp: &mut Qp,
    (now, ip_id, budget): (Instant, u16, u32),
    ends_burst: bool,
    buf: &mut [u8],
) -> Option<Transmit> {
    // Without room in the budget (or while others wait for it and this QP has no grant) its
    // requests wait.
    let in_flight = &mut sched.in_flight;
    // One packet of its grant is used (or its QP had nothing to send).
    let granted = qp.indexed.granted > 0;
    if granted {
        qp.indexed.granted -= 1;
        in_flight.grant_used(1);
    }
    let gated = qp.qp_type == QpType::Rc && !in_flight.may_send(budget, granted);
    let mut ctx = shared.ctx(now);
    ctx.ip_id = ip_id;
    ctx.must_cover = ends_burst || in_flight.must_cover(budget);
    let transmit = match qp.poll_cnp(&mut ctx, buf) {
        Some(t) => Some(t),
        None if !gated && qp.resp.ack_may_wait() && qp.has_requests() => {
            match qp.poll_request(&mut ctx, buf) {
                Some(t) => {
                    qp.resp.ack_waited = true;
                    Some(t)
                }
                None => qp.poll_response(&mut ctx, buf),
            }
        }
        None => match qp.poll_response(&mut ctx, buf) {
            Some(t) => Some(t),
            None if gated => None,
            None => qp.poll_request(&mut ctx, buf),
        },
    };
    if gated && !qp.indexed.waiting && qp.has_requests() {
        qp.indexed.waiting = true;
        sched.in_flight.wait(qp.qpn, granted);
    }
    if transmit.is_none() {
        // A packet that lent its payload and then failed (a bug if seen) leaves no loan for
        // the next one to carry.
        shared.loans.clear();
    }
    transmit
}

/// Whether a burst ends at the packet `qp` just sent, with a message of its requester
/// `mid_message` (partly sent) before it: a packet that starts a message of several packets,
/// or ends one, ends the burst. The first packet of such a message thus goes alone, or last
/// behind single-packet messages, and a burst holds the rest of one message at most. Several
/// QPs whose messages go in step then send their FIRST packets one after the other, and those
/// share an offload batch: a FIRST is 16 bytes longer than the packets after it (its RETH),
/// and a batch's packets after its first may only be as long or shorter, so a burst that
/// began with a FIRST needed a batch of its own for it.
#[inline]
fn message_bound(qp: &Qp, mid_message: bool) -> bool {
    qp.req.draining() != mid_message
}

/// Whether `qp`'s turn in the ready line would find nothing to do: no CNP due, no response
/// waiting, no request the requester could send (each of those polls returns at its first
/// check, changing nothing) and no grant of the NIC's budget to use.
#[inline]
fn idle_in_line(qp: &Qp) -> bool {
    !qp.cc.np.due() && qp.resp.out.is_empty() && qp.indexed.granted == 0 && !qp.has_requests()
}
