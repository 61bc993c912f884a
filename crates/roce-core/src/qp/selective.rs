//! Selective repeat, IRN-style: the requester's side. A QP option
//! ([`crate::LossRecovery::SelectiveRepeat`], per NIC); go-back-N, what rxe does and what
//! IBTA vol. 1 §9.7.5.2.1 describes, stays the default, and nothing on the wire or in the
//! engine changes unless both ends of a connection turn it on.
//!
//! The design follows Mittal et al., "Revisiting Network Support for RDMA" (SIGCOMM 2018,
//! "IRN"), §3: a responder keeps what arrives out of order and says what is missing; the
//! requester sends again only what is missing; a cap of one bandwidth-delay product on the
//! packets in flight (IRN's BDP-FC) bounds both sides' state. What follows is what this engine
//! does, and where it departs from the paper.
//!
//! **The responder** (`responder/reorder.rs`). A request whose PSN lies past ePSN (IBTA vol. 1
//! §9.7.5.1.1's "out of sequence") is not dropped: it is kept, whole, in PSN order, at most
//! `2 × bdp_packets` PSNs past ePSN (farther is a peer that ignores BDP-FC: dropped, counted
//! under `rx_beyond_reorder_window`). When the request at ePSN arrives it executes as before,
//! then every kept request that now sits at ePSN executes in turn, by the same code. IRN places
//! such packets in memory at once, and for that adds a RETH to every WRITE packet (so a MIDDLE
//! or LAST can be placed without its FIRST) and the receive WQE's sequence number and offset to
//! every SEND packet; READ responses it places by their PSN. This engine keeps the packets
//! instead: the request packets stay what IBTA and rxe send (no new header on them), every
//! rule of execution (opcode sequence, lengths, receive WQEs, the MSN, the order of receive
//! completions, a READ's and an atomic's resources) keeps its one path, and a software NIC has
//! the memory for a BDP of packets at hand. Execution in PSN order also means a READ request
//! kept past a hole is answered once the hole fills, its responses in order.
//!
//! **What it sends back.** For every request kept (and every one already kept, arriving
//! again), a NACK as IRN defines it (§3.1: "the cumulative acknowledgement … and the sequence
//! number of the packet that triggered the NACK"): an ACKNOWLEDGE (opcode 0x11) whose AETH
//! syndrome is NAK / PSN sequence error (0x60), whose BTH PSN is ePSN (the cumulative part,
//! where IBTA's NAK has it: every PSN before it arrived) and whose AETH MSN field, 24 bits,
//! carries the PSN that arrived (the selective part) instead of the MSN. The packet is a
//! well-formed IBTA NAK, so no parser changes; its MSN field means something else, which is
//! why such NACKs are sent only when both ends run selective repeat. (A go-back-N requester
//! that received one would go back to ePSN, as for any sequence NAK: slower, never wrong.)
//! After a hole fills, the responder acknowledges the last SEND or WRITE it executed from its
//! store, whether or not that packet asked for an ACK, so that the requester's window opens.
//!
//! **The requester** ([`Scoreboard`]). A bitmap over its window, from `una`, of the PSNs the
//! responder holds. On a NACK it acknowledges every PSN before ePSN (IBTA vol. 1 §9.7.5.2.1,
//! as for any NAK), marks the PSN that arrived, and takes as lost every PSN from where it last
//! looked up to that one that is not marked (IRN §3.1: a packet is lost once a packet sent
//! after it is acknowledged selectively); each lost PSN is queued to be sent again, once.
//! Queued PSNs go before any new packet, each alone, with AckReq set, and count as
//! `retransmitted_packets`. A PSN sent again and lost again is left to the timeout. Inside a
//! READ only the places where a READ request starts (each piece of a long READ) are request
//! packets; its other PSNs are its responses' and are never "lost" from the requester's side.
//!
//! **Timeouts.** The local ACK timeout goes back as before (go-back-N from `una`, the
//! scoreboard cleared). With few packets in flight (at most IRN's N = 3) a shorter timeout
//! arms instead, IRN's RTO_low (`rto_low`, IRN's 100 µs), so that a loss with nothing after it
//! to reveal it (the last packets of a message) waits little; past N packets the timer is
//! armed again with the ACK timeout (IRN's RTO_high). RTO_low doubles with each timeout until
//! an ACK moves `una` (at most up to the ACK timeout), as TCP backs its RTO off; IRN has a
//! fixed one. IRN sizes RTO_low for shallow lossy buffers; behind a deep one (a shared buffer
//! without PFC holds milliseconds of a port's traffic) each expiry of a fixed one would be
//! spurious, would resend and spend a retry, and retry_cnt of them would fail the WR before
//! the first ACK came back. Doubled, retry_cnt 7 waits 12.7 ms in all before it fails, and a
//! lost last packet still goes again after RTO_low.
//!
//! **BDP-FC.** `bdp_packets` replaces `max_unacked_psns` as the requester's window (IRN §3.2):
//! at most that many PSNs unacknowledged, a long READ asked for in pieces of half of it, and
//! AckReq at least four times per window (rxe's every 64 packets would leave a window of 16
//! waiting for the ACK timeout).
//!
//! **Completions** stay in order: WRs retire only by the cumulative part (ACKs, the NACK's
//! ePSN, READ responses and atomic ACKs), oldest first, as under go-back-N; a SACKed PSN
//! retires nothing.
//!
//! **READ and atomics.** READ and atomic requests are request packets like the others: kept
//! by the responder, sent again alone. READ responses the requester places by their PSN, as
//! IRN does (§3): one that comes after a lost one lands at once (checked as an in-order one
//! is; `Scoreboard::land`), when it answers a READ and only READs lie between it and `una`.
//! The first such response is an implied NAK (IBTA vol. 1 §9.7.5.2.4): that READ alone is
//! asked for again from the missing response, up to the first one that landed
//! (`Scoreboard::read_stop`; the responder answers a duplicate READ request for the range it
//! names, its last response a LAST there). When the hole fills, `una` moves past what landed,
//! through the READs it completes; a response still missing then, with landed ones after it,
//! is asked for at once (the trains that carried the later ones went past it). One range is
//! asked for at a time: the responder abandons a READ's train when a duplicate of it comes.
//! Under go-back-N every later WR would go again too. An ACK past a READ whose responses are
//! missing is an implied NAK as before.
//!
//! Scope: RC. UC and UD have no retransmission and are untouched.

use std::collections::VecDeque;

use roce_wire::Psn;

use super::{Ctx, Qp};
use crate::Transmit;
use crate::timer::Timer;
use crate::wr::SendOp;

/// IRN's N: with at most this many packets in flight the retransmit timer arms with RTO_low.
pub(crate) const RTO_LOW_PACKETS: u32 = 3;

/// PSNs a requester may have unacknowledged: `max_unacked_psns` (rxe's window), or under
/// selective repeat IRN's BDP cap (BDP-FC).
pub(crate) fn window(config: &crate::NicConfig) -> u32 {
    match config.loss_recovery {
        crate::LossRecovery::GoBackN => config.max_unacked_psns,
        crate::LossRecovery::SelectiveRepeat { bdp_packets, .. } => bdp_packets.max(1),
    }
}

/// A requester sets AckReq at least every this many packets: `max_pkts_per_ack` (rxe's 64),
/// and at least twice per go-back-N window (rxe's 64 is half its 128) or four times per
/// selective repeat window, so that a window smaller than rxe's cadence is acknowledged as it
/// goes rather than when the retransmit timer fires with the window full and nothing lost.
pub(crate) fn ack_cadence(config: &crate::NicConfig) -> u32 {
    let per_window = match config.loss_recovery {
        crate::LossRecovery::GoBackN => 2,
        crate::LossRecovery::SelectiveRepeat { .. } => 4,
    };
    config
        .max_pkts_per_ack
        .min((window(config) / per_window).max(1))
}

/// The requester's scoreboard: which PSNs from `una` on the responder holds, what is known
/// lost and waits to be sent again.
#[derive(Debug, Default)]
pub(crate) struct Scoreboard {
    /// The PSN `sacked[0]` is about (`una`, as last seen).
    base: Psn,
    /// Whether the responder holds `base + i`.
    sacked: VecDeque<bool>,
    /// Every PSN before it was looked at for loss.
    scanned: Psn,
    /// PSNs found lost, to send again, oldest first.
    resend: VecDeque<Psn>,
    /// A READ to ask for again from this PSN (an implied NAK): its request may have been
    /// SACKed while its responses were lost, so it goes whatever the bitmap says.
    read_again: Option<Psn>,
    /// Whether the READ response of `base + i` has landed, out of order (IRN places READ
    /// responses by their PSN).
    landed: VecDeque<bool>,
    /// Where the READ asked for again stops: the first response already landed after the
    /// hole it fills (`None`: the end of its piece).
    pub(crate) read_stop: Option<Psn>,
}

impl Scoreboard {
    /// Forgets what lies before `una`.
    fn advance(&mut self, una: Psn) {
        let gap = una.distance(self.base);
        if gap <= 0 {
            return;
        }
        let gap = gap as usize;
        for bits in [&mut self.sacked, &mut self.landed] {
            if gap >= bits.len() {
                bits.clear();
            } else {
                bits.drain(..gap);
            }
        }
        self.base = una;
        if self.read_stop.is_some_and(|stop| stop.distance(una) <= 0) {
            self.read_stop = None;
        }
        if self.scanned.distance(una) < 0 {
            self.scanned = una;
        }
    }

    /// Whether `bits` (one of the bitmaps from `base`) has `psn`.
    fn has(&self, bits: &VecDeque<bool>, psn: Psn) -> bool {
        let d = psn.distance(self.base);
        d >= 0 && bits.get(d as usize) == Some(&true)
    }

    /// Sets `psn` in the bitmap `pick` chooses, once what lies before `una` is forgotten.
    fn set(&mut self, una: Psn, psn: Psn, pick: fn(&mut Self) -> &mut VecDeque<bool>) {
        self.advance(una);
        let Ok(at) = usize::try_from(psn.distance(self.base)) else {
            return;
        };
        let bits = pick(self);
        if bits.len() <= at {
            bits.resize(at + 1, false);
        }
        bits[at] = true;
    }

    /// Whether the responder holds `psn`.
    pub(crate) fn is_sacked(&self, psn: Psn) -> bool {
        self.has(&self.sacked, psn)
    }

    /// The responder holds `psn` (which the caller checked is in flight).
    fn mark(&mut self, una: Psn, psn: Psn) {
        self.set(una, psn, |s| &mut s.sacked);
    }

    /// Everything back to nothing known, from `una` (a go-back-N resend covers it all).
    pub(crate) fn reset(&mut self, una: Psn) {
        self.base = una;
        self.scanned = una;
        self.sacked.clear();
        self.resend.clear();
        self.read_again = None;
        self.landed.clear();
        self.read_stop = None;
    }

    /// The READ response of `psn` (past `una`) has landed.
    pub(crate) fn land(&mut self, una: Psn, psn: Psn) {
        self.set(una, psn, |s| &mut s.landed);
    }

    /// Whether the READ response of `psn` has landed out of order.
    pub(crate) fn is_landed(&self, psn: Psn) -> bool {
        self.has(&self.landed, psn)
    }

    /// The first response landed at or after `from`, if any.
    pub(crate) fn first_landed(&self, from: Psn) -> Option<Psn> {
        let skip = usize::try_from(from.distance(self.base)).unwrap_or(0);
        let at = self.landed.iter().skip(skip).position(|&l| l)?;
        Some(self.base.wrapping_add((skip + at) as u32))
    }

    /// Whether something waits to be sent again.
    pub(crate) fn pending(&self) -> bool {
        !self.resend.is_empty() || self.read_again.is_some()
    }

    /// The next PSN to send again: at or after `una`, before `limit` (from there on the
    /// requester sends anyway), not held by the responder.
    fn next(&mut self, una: Psn, limit: Psn) -> Option<(Psn, bool)> {
        self.advance(una);
        let usable = |p: Psn| p.distance(una) >= 0 && p.distance(limit) < 0;
        if let Some(psn) = self.read_again.take()
            && usable(psn)
        {
            return Some((psn, true));
        }
        while let Some(psn) = self.resend.pop_front() {
            if usable(psn) && !self.is_sacked(psn) {
                return Some((psn, false));
            }
        }
        None
    }

    /// A READ request covering PSNs before `end` went: those queued before it need not go.
    fn covered_until(&mut self, end: Psn) {
        while self.resend.front().is_some_and(|p| p.distance(end) < 0) {
            self.resend.pop_front();
        }
    }
}

impl Qp {
    /// A NACK under selective repeat: every PSN before `epsn` arrived (and is acknowledged),
    /// and so did `sacked`; what was sent between the last look and `sacked` and is not held
    /// is lost, and queued to be sent again (IRN §3.1). A NACK that names a PSN not in flight
    /// is dropped and counted (`rx_bad_sacks`).
    pub(crate) fn on_sack(&mut self, ctx: &mut Ctx<'_>, epsn: Psn, sacked: Psn) {
        if sacked.distance(epsn) < 0 || sacked.distance(self.req.next_new) >= 0 {
            ctx.stats.rx_bad_sacks += 1;
            tracing::trace!(qpn = %self.qpn, epsn = %epsn, sacked = %sacked, "nack naming a psn not in flight dropped");
            return;
        }
        ctx.stats.rx_sacks += 1;
        let progress = epsn.distance(self.comp.una) > 0;
        self.sack.mark(self.comp.una, sacked);
        if !self.ack_before(ctx, epsn) {
            return;
        }
        if progress {
            self.after_progress(ctx);
        }
        let piece = super::requester::read_piece_psns(ctx.config);
        self.detect_losses(sacked, piece);
    }

    /// Queues every request packet from where the scoreboard last looked up to `upto` that
    /// the responder does not hold.
    fn detect_losses(&mut self, upto: Psn, piece: u32) {
        let una = self.comp.una;
        self.sack.advance(una);
        let from = self.sack.scanned;
        if upto.distance(from) <= 0 {
            return;
        }
        let mut psn = from;
        while psn.distance(upto) < 0 {
            if !self.sack.is_sacked(psn) && self.is_request_packet(psn, piece) {
                self.sack.resend.push_back(psn);
            }
            psn = psn.wrapping_add(1);
        }
        self.sack.scanned = upto;
    }

    /// Whether a request packet starts at `psn`: any PSN of a SEND, WRITE or atomic; the
    /// first PSN of each piece of a READ (its other PSNs are its responses').
    fn is_request_packet(&self, psn: Psn, piece: u32) -> bool {
        let Some(wqe) = self.sq.iter().find(|w| w.contains(psn)) else {
            return false;
        };
        match (wqe.wr.op, wqe.first_psn) {
            (SendOp::RdmaRead(_), Some(first)) => {
                (psn.distance(first) as u32).is_multiple_of(piece)
            }
            _ => true,
        }
    }

    /// An implied NAK under selective repeat: the READ alone is asked for again from `resume`,
    /// up to the first of its responses that already landed (the hole, not what follows it).
    pub(crate) fn read_again(&mut self, resume: Psn) {
        self.sack.read_again = Some(resume);
        self.sack.read_stop = self.sack.first_landed(resume.wrapping_add(1));
    }

    /// A READ asked for again from `psn` stops where its responses already landed
    /// (`Scoreboard::read_stop`): every response before it is a whole MTU (the READ's last is
    /// past it), so the request asks for that many MTUs.
    fn cap_read_at_landed(&self, segment: &mut super::requester::Segment, psn: Psn) {
        let Some(stop) = self.sack.read_stop else {
            return;
        };
        let npsn = stop.distance(psn);
        let Some(reth) = segment.repr.reth.as_mut() else {
            return;
        };
        if npsn > 0 && (npsn as u32) < segment.npsn {
            segment.npsn = npsn as u32;
            segment.last = false;
            reth.dma_len = (npsn as u32).saturating_mul(self.mtu.bytes());
        }
    }

    /// The next request packet to send again, if one is queued and the QP may send: the
    /// packet at that PSN, alone, asking for an ACK.
    pub(crate) fn poll_resend(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        if !self.sack.pending() || !self.can_send() || self.req.rnr_wait || self.paced(ctx) {
            return None;
        }
        let mtu = self.mtu.bytes();
        while let Some((psn, forced)) = self.sack.next(self.comp.una, self.req.psn) {
            let Some(index) = self.sq.iter().position(|w| w.contains(psn)) else {
                continue;
            };
            let wqe = &self.sq[index];
            let Some(first) = wqe.first_psn else { continue };
            let offset = (psn.distance(first) as u32)
                .saturating_mul(mtu)
                .min(wqe.length);
            let mut segment = self.segment(ctx, wqe, psn, offset);
            if forced {
                self.cap_read_at_landed(&mut segment, psn);
            }
            segment.repr.bth.ack_req = true;
            let transmit = match self.emit_segment(ctx, wqe, &segment, buf) {
                Ok(transmit) => transmit,
                Err(err) => {
                    // Left to the timeout, whose go-back-N meets the error where it is handled.
                    tracing::debug!(qpn = %self.qpn, psn = %psn, error = ?err, "resend not sent");
                    continue;
                }
            };
            tracing::trace!(qpn = %self.qpn, psn = %psn, forced, opcode = %segment.repr.bth.opcode, "tx request again (selective)");
            if segment.npsn > 1 {
                self.sack.covered_until(psn.wrapping_add(segment.npsn));
            }
            let mut transmit = transmit;
            transmit.ecn = crate::cc::request_ecn(ctx.config);
            self.account_wire(ctx, (&transmit, segment.len), (psn, segment.npsn, true));
            ctx.stats.retransmitted_packets += 1;
            if self.timers.get(Timer::Retransmit).is_none()
                && let Some(timeout) = self.retransmit_timeout(ctx.config)
            {
                self.timers.set(Timer::Retransmit, ctx.now + timeout);
            }
            return Some(transmit);
        }
        None
    }

    /// The retransmit timer's length now: IRN's RTO_low with few packets in flight under
    /// selective repeat, doubled for each timeout since an ACK last moved `una`, at most the
    /// local ACK timeout; that timeout otherwise (none if it is infinite).
    pub(crate) fn retransmit_timeout(&self, config: &crate::NicConfig) -> Option<crate::Duration> {
        let timeout = self.ack_timeout()?;
        match config.loss_recovery {
            crate::LossRecovery::SelectiveRepeat { rto_low, .. }
                if !rto_low.is_zero() && self.unacked() <= RTO_LOW_PACKETS =>
            {
                let doubling = 2u32.saturating_pow(u32::from(self.comp.timeouts_in_a_row));
                Some(timeout.min(rto_low.saturating_mul(doubling)))
            }
            _ => Some(timeout),
        }
    }

    /// Under selective repeat, when the packets in flight pass IRN's N (from `before`, with a
    /// packet just sent), a timer armed with RTO_low is armed again with the ACK timeout
    /// (IRN's RTO_high).
    pub(crate) fn leave_rto_low(&mut self, ctx: &Ctx<'_>, before: u32) {
        if let crate::LossRecovery::SelectiveRepeat { rto_low, .. } = ctx.config.loss_recovery
            && !rto_low.is_zero()
            && before <= RTO_LOW_PACKETS
            && self.unacked() > RTO_LOW_PACKETS
            && self.timers.get(Timer::Retransmit).is_some()
            && let Some(timeout) = self.ack_timeout()
        {
            self.timers.set(Timer::Retransmit, ctx.now + timeout);
        }
    }
}
