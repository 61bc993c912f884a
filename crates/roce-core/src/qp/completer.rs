//! The completer: reads ACKs, NAKs, READ responses and atomic ACKs, retires send WRs in order,
//! counts retries, and turns exhausted retries and remote errors into error completions and the
//! error state (rxe_comp.c; IBTA vol. 1 §9.7.5.2 and §9.9).

use roce_wire::aeth::RnrTimer;
use roce_wire::opcode::{Operation, Position};
use roce_wire::{NakCode, Psn, RocePacket, Syndrome};

use super::{Ctx, Qp, scatter};
use crate::Duration;
use crate::cq::{Cqe, WcStatus};
use crate::timer::Timer;
use crate::wr::SendOp;

/// The completer's state (rxe's `qp->comp`): where acknowledgement has got to and what is left
/// of the retry budgets. The requester reads `una` for its window; only the completer moves it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Completer {
    /// The oldest PSN not yet acknowledged (rxe's `comp.psn`).
    pub(crate) una: Psn,
    /// Transport retries left for the oldest outstanding WR.
    pub(crate) retry_left: u8,
    /// RNR retries left.
    pub(crate) rnr_left: u8,
    /// A retry was started by a NAK or an implied NAK and has made no progress yet: further
    /// responses that show the same gap start no other retry (rxe `comp.started_retry`).
    pub(crate) retrying: bool,
    /// Selective repeat: the PSN after the last one the responder acknowledged (ACKs and
    /// NACKs), to retire what it covers once a READ before it has its responses.
    pub(crate) acked: Psn,
    /// Retransmit timeouts since an ACK last moved `una`: under selective repeat RTO_low
    /// doubles with each ([`Qp::retransmit_timeout`]).
    pub(crate) timeouts_in_a_row: u8,
}

impl Completer {
    /// Expects `psn` first, with full retry budgets, as RTR → RTS sets it (`IBV_QP_SQ_PSN`).
    pub(crate) fn start(psn: Psn, retry_cnt: u8, rnr_retry: u8) -> Self {
        Self {
            una: psn,
            retry_left: retry_cnt,
            rnr_left: rnr_retry,
            retrying: false,
            acked: psn,
            timeouts_in_a_row: 0,
        }
    }
}

impl Qp {
    /// Handles a response packet (ACKNOWLEDGE, ATOMIC ACKNOWLEDGE, READ response).
    pub(crate) fn handle_response(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) {
        let bth = packet.bth();
        let psn = bth.psn();
        let syndrome = packet.aeth().map_or(
            Syndrome::Ack {
                credits: roce_wire::aeth::CreditCode::UNLIMITED,
            },
            |a| a.syndrome(),
        );
        // A response for a PSN not in flight (older than `una`, or never sent) is a late
        // duplicate or a ghost: ignore it (rxe check_psn).
        let in_flight = psn.distance(self.comp.una) >= 0 && psn.distance(self.req.next_new) < 0;
        if !in_flight {
            ctx.stats.rx_ghost_responses += 1;
            tracing::trace!(qpn = %self.qpn, psn = %psn, "ghost response");
            return;
        }
        self.dispatch_response(ctx, psn, packet, syndrome);
        // What it acknowledged, its arrival, its ECN-Echo and its INT echo go to congestion control
        // (for the algorithms that hear ACKs; the BECN bit is read by DCTCP alone, INT by HPCC).
        let (una, next) = (self.comp.una, self.req.next_new);
        self.cc.on_response(
            ctx.now,
            (una, next),
            (bth.becn(), ctx.int),
            &mut self.timers,
            ctx.stats,
        );
    }

    /// The response's effect on the send queue, by its operation and syndrome.
    fn dispatch_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        psn: Psn,
        packet: &RocePacket<&[u8]>,
        syndrome: Syndrome,
    ) {
        let operation = packet.layout().operation;
        match (operation, syndrome) {
            (Operation::RdmaReadResponse, _) => self.on_read_response(ctx, psn, packet),
            (Operation::AtomicAcknowledge, _) => {
                let orig = packet.atomic_ack_eth().map_or(0, |a| a.orig_data());
                self.on_atomic_ack(ctx, psn, orig);
            }
            (_, Syndrome::Ack { .. }) => {
                ctx.stats.rx_acks += 1;
                self.on_ack(ctx, psn);
            }
            (_, Syndrome::RnrNak { timer }) => {
                ctx.stats.rx_rnr_naks += 1;
                self.on_rnr_nak(ctx, psn, timer);
            }
            (_, Syndrome::Nak(NakCode::PsnSeqErr)) if ctx.config.loss_recovery.is_selective() => {
                // IRN's NACK: ePSN in the BTH, the PSN that arrived in the MSN field.
                let sacked = Psn::new(packet.aeth().map_or(0, |a| a.msn()));
                self.note_acked(psn);
                self.on_sack(ctx, psn, sacked);
            }
            (_, Syndrome::Nak(NakCode::PsnSeqErr)) => {
                ctx.stats.rx_nak_seq_err += 1;
                //= ibta:vol1/9.7.5.2.1
                //# a PSN sequence NAK acknowledges every PSN before it
                // Progress, if it names a PSN after `una`, renews the retry budget (rxe
                // `reset_retry_counters`).
                let progress = psn.distance(self.comp.una) > 0;
                if !self.ack_before(ctx, psn) {
                    return;
                }
                if progress {
                    self.after_progress(ctx);
                }
                self.retry(ctx, psn);
            }
            (_, Syndrome::Nak(code)) => {
                ctx.stats.rx_naks_other += 1;
                if !self.ack_before(ctx, psn) {
                    return;
                }
                let status = match code {
                    NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                    NakCode::RemoteOperationalError => WcStatus::RemOpErr,
                    _ => WcStatus::RemInvReqErr,
                };
                self.fail_oldest(ctx, status);
            }
            (_, Syndrome::Reserved(_)) => ctx.stats.rx_ghost_responses += 1,
        }
    }

    /// An ACK of every PSN up to and including `psn`.
    fn on_ack(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        if ctx.config.loss_recovery.is_selective() {
            self.note_acked(psn.wrapping_add(1));
        }
        if self.ack_before(ctx, psn.wrapping_add(1)) {
            self.after_progress(ctx);
        }
    }

    /// Selective repeat: the responder has every PSN before `psn`.
    fn note_acked(&mut self, psn: Psn) {
        if psn.distance(self.comp.acked) > 0 {
            self.comp.acked = psn;
        }
    }

    /// Selective repeat, once a READ or atomic retired: what the responder acknowledged past
    /// it while its responses were missing retires now (under go-back-N it is sent again and
    /// acknowledged again).
    fn catch_up(&mut self, ctx: &mut Ctx<'_>) {
        let acked = self.comp.acked;
        if ctx.config.loss_recovery.is_selective()
            && acked.distance(self.comp.una) > 0
            && acked.distance(self.req.next_new) <= 0
        {
            self.ack_before(ctx, acked);
        }
    }

    /// Retires every WR whose PSNs all lie before `psn` and moves `una` to `psn`. A READ or
    /// atomic that is passed over without its response means responses were lost: an implied
    /// NAK, retried from there (IBTA vol. 1 §9.7.5.2.4, rxe `check_ack`). Returns false when
    /// that happened, or the QP failed.
    //= ibta:vol1/9.7.5.2.4
    //# a READ or atomic passed over without its response is an implied NAK
    pub(super) fn ack_before(&mut self, ctx: &mut Ctx<'_>, psn: Psn) -> bool {
        // Every WQE whose PSNs all lie before `psn` was sent whole at least once (`psn` is
        // below `next_new`), even if go-back-N is sending it again right now.
        while let Some(wqe) = self.sq.front() {
            let Some(last) = wqe.last_psn() else { break };
            let passed = last.distance(psn) < 0;
            // Or some of its PSNs not yet answered are: a responder acknowledges up to where
            // a piece of a long READ ended (its ePSN − 1, for a duplicate WRITE). rxe
            // check_psn: a PSN past the one expected while a READ or atomic waits is a retry.
            let last_acked = psn.wrapping_sub(1);
            let reached = wqe.contains(last_acked) && last_acked.distance(self.comp.una) >= 0;
            if !(passed || (reached && wqe.wr.op.is_read_or_atomic())) {
                break;
            }
            if wqe.wr.op.is_read_or_atomic() {
                // Resume where its responses stopped: inside it if some arrived. A retry already
                // under way covers it (ACKs for later PSNs keep coming meanwhile).
                let first = wqe.first_psn.expect("a WQE with a last PSN has a first");
                let resume = if wqe.contains(self.comp.una) {
                    self.comp.una
                } else {
                    first
                };
                if resume.distance(self.comp.una) > 0 {
                    self.comp.una = resume;
                }
                if !self.comp.retrying {
                    ctx.stats.implied_naks += 1;
                    self.retry_implied(ctx, resume);
                    self.comp.retrying = true;
                }
                return false;
            }
            self.retire_front(ctx);
        }
        if psn.distance(self.comp.una) > 0 {
            self.comp.una = psn;
        }
        if self.req.psn.distance(self.comp.una) < 0 {
            // What go-back-N was sending again is acknowledged already: go on from `una`.
            self.resync_cursor();
        }
        true
    }

    /// Pops the oldest WR as successfully completed.
    fn retire_front(&mut self, ctx: &mut Ctx<'_>) {
        let wqe = self.sq.retire_front().expect("caller checked");
        if let Some(last) = wqe.last_psn() {
            let next = last.wrapping_add(1);
            if next.distance(self.comp.una) > 0 {
                self.comp.una = next;
            }
        }
        if wqe.wr.signaled {
            let mut cqe = Cqe::success(wqe.wr.wr_id, wqe.wc_opcode(), self.qpn);
            if matches!(wqe.wr.op, SendOp::RdmaRead(_)) {
                cqe.byte_len = wqe.length;
            }
            ctx.completions.push((self.send_cq, cqe));
        }
        self.run_local_ops(ctx);
    }

    /// Forward progress: the retry counters start again (IBTA vol. 1 §9.7.6.1.3), the
    /// retransmit timer restarts or stops.
    //= ibta:vol1/9.7.6.1.3
    //# forward progress starts the retry counters again
    pub(super) fn after_progress(&mut self, ctx: &mut Ctx<'_>) {
        self.comp.retrying = false;
        self.comp.retry_left = self.retry_cnt;
        self.comp.rnr_left = self.rnr_retry;
        self.comp.timeouts_in_a_row = 0;
        let outstanding = self.outstanding() || self.sq.any_sent();
        match (outstanding, self.retransmit_timeout(ctx.config)) {
            (true, Some(timeout)) => self.timers.set(Timer::Retransmit, ctx.now + timeout),
            _ => self.timers.stop(Timer::Retransmit),
        }
    }

    /// Whether a READ response or atomic ACK for `psn` is the one expected next: it names
    /// `una` (else it is out of order), and the SENDs and WRITEs before it, which it
    /// acknowledges, retire.
    fn expected_response(&mut self, ctx: &mut Ctx<'_>, psn: Psn) -> bool {
        if psn != self.comp.una {
            self.out_of_order_response(ctx, psn);
            return false;
        }
        self.ack_before(ctx, psn)
    }

    fn on_read_response(&mut self, ctx: &mut Ctx<'_>, psn: Psn, packet: &RocePacket<&[u8]>) {
        if psn != self.comp.una && self.land_out_of_order(ctx, psn, packet) {
            return;
        }
        if !self.expected_response(ctx, psn) {
            return;
        }
        let Some(wqe) = self.sq.front() else { return };
        let (SendOp::RdmaRead(_), Some(first)) = (wqe.wr.op, wqe.first_psn) else {
            ctx.stats.rx_ghost_responses += 1;
            return;
        };
        if !wqe.contains(psn) {
            ctx.stats.rx_ghost_responses += 1;
            return;
        }
        if !self.land_read_response(ctx, 0, first, psn, packet) {
            return;
        }
        self.comp.una = psn.wrapping_add(1);
        self.retire_answered_reads(ctx);
        self.after_progress(ctx);
        self.ask_for_next_hole(ctx);
    }

    /// Checks the response for `psn` of the READ at `index` in the send queue (its first PSN
    /// `first`) and lands its bytes at its PSN's offset. False when it was dropped (counted) or
    /// its bytes could not land (the QP failed).
    fn land_read_response(
        &mut self,
        ctx: &mut Ctx<'_>,
        index: usize,
        first: Psn,
        psn: Psn,
        packet: &RocePacket<&[u8]>,
    ) -> bool {
        let wqe = &self.sq[index];
        let mtu = u64::from(self.mtu.bytes());
        let at = psn.distance(first) as u32;
        let offset = u64::from(at) * mtu;
        let payload = packet.payload();
        // rxe_comp.c check_psn/check_op: a response that does not end the READ is a full MTU,
        // the one that ends it carries exactly the rest. Anything else is dropped before it
        // lands; the READ is asked for again when the ACK timer fires.
        let remaining = u64::from(wqe.length).saturating_sub(offset);
        let ends = wqe.last_psn() == Some(psn);
        let piece = super::requester::read_piece_psns(ctx.config);
        let ends_piece = super::requester::read_piece_end(at, piece, wqe.npsn) == at + 1;
        let fits = if ends {
            payload.len() as u64 == remaining
        } else {
            payload.len() as u64 == mtu && remaining > mtu
        };
        // A train of responses starts (FIRST, ONLY) wherever a READ request started one: at
        // the WQE's first PSN, at each piece of a long READ, or where go-back-N asked for the
        // rest again (the responder answers that request as any other, FIRST at its PSN; rxe
        // answers it with MIDDLE). It ends (LAST, ONLY) at the WQE's last PSN, at the end of a
        // piece, or where selective repeat asked for a hole alone (`Scoreboard::read_stop`).
        // rxe follows the train by the opcode before (rxe_comp.c check_op); the bytes land by
        // their PSN's offset, checked above.
        let ends_hole = self.sack.read_stop == Some(psn.wrapping_add(1));
        let position_ok = match packet.layout().position {
            Position::Only | Position::Last => ends || ends_piece || ends_hole,
            Position::First | Position::Middle => !ends,
        };
        if !fits || !position_ok {
            ctx.stats.rx_bad_responses += 1;
            tracing::trace!(qpn = %self.qpn, psn = %psn, len = payload.len(), "rx read response of the wrong length or position dropped");
            return false;
        }
        if !scatter(ctx.mrs, &wqe.wr.sgl, offset, payload) {
            self.fail_oldest(ctx, WcStatus::LocProtErr);
            return false;
        }
        true
    }

    /// The READs at the front whose responses are all in retire, oldest first: `una` moves
    /// past the responses that landed out of order (selective repeat), through the READs
    /// that follow too.
    fn retire_answered_reads(&mut self, ctx: &mut Ctx<'_>) {
        while let Some(wqe) = self.sq.front() {
            let (SendOp::RdmaRead(_), Some(last)) = (wqe.wr.op, wqe.last_psn()) else {
                break;
            };
            if !wqe.contains(self.comp.una) && last.distance(self.comp.una) >= 0 {
                break;
            }
            while last.distance(self.comp.una) >= 0 && self.sack.is_landed(self.comp.una) {
                self.comp.una = self.comp.una.wrapping_add(1);
            }
            if last.distance(self.comp.una) >= 0 {
                break;
            }
            self.retire_front(ctx);
            self.catch_up(ctx);
        }
    }

    /// Selective repeat places a READ response that comes after a lost one (IRN §3: READ
    /// responses are placed by their PSN), when it belongs to the READ being answered: it is
    /// checked as an in-order one is, lands, and the hole before it is asked for alone (an
    /// implied NAK, once until progress). Returns false for what it leaves to the in-order path
    /// (go-back-N, a response of another WR, a late duplicate).
    fn land_out_of_order(
        &mut self,
        ctx: &mut Ctx<'_>,
        psn: Psn,
        packet: &RocePacket<&[u8]>,
    ) -> bool {
        let una = self.comp.una;
        if !ctx.config.loss_recovery.is_selective() || psn.distance(una) <= 0 {
            return false;
        }
        // The READ it answers, and only READs before it from `una` on: their responses come
        // in PSN order, so it shows the responses before it lost, and nothing else is owed.
        if !self.sq.front().is_some_and(|w| w.contains(una)) || psn.distance(self.req.next_new) >= 0
        {
            return false;
        }
        let Some(index) = self
            .sq
            .iter()
            .take_while(|w| matches!(w.wr.op, SendOp::RdmaRead(_)) && w.first_psn.is_some())
            .position(|w| w.contains(psn))
        else {
            return false;
        };
        let Some(first) = self.sq[index].first_psn else {
            return false;
        };
        if self.sack.is_landed(psn) {
            ctx.stats.rx_ghost_responses += 1;
            return true;
        }
        if !self.land_read_response(ctx, index, first, psn, packet) {
            return true;
        }
        self.sack.land(una, psn);
        if !self.comp.retrying {
            ctx.stats.implied_naks += 1;
            self.retry_implied(ctx, una);
            self.comp.retrying = true;
        }
        true
    }

    /// Selective repeat, after progress inside a READ: responses landed past `una` while the
    /// one at `una` is missing means the trains that carried them went past it, lost: it is
    /// asked for alone at once (nothing later would show the gap).
    fn ask_for_next_hole(&mut self, ctx: &mut Ctx<'_>) {
        let una = self.comp.una;
        if !ctx.config.loss_recovery.is_selective()
            || self.comp.retrying
            || self.sack.first_landed(una).is_none()
            || !self.sq.front().is_some_and(|w| w.contains(una))
        {
            return;
        }
        ctx.stats.implied_naks += 1;
        self.retry_implied(ctx, una);
        self.comp.retrying = true;
    }

    fn on_atomic_ack(&mut self, ctx: &mut Ctx<'_>, psn: Psn, orig: u64) {
        if !self.expected_response(ctx, psn) {
            return;
        }
        let Some(wqe) = self.sq.front() else { return };
        if !wqe.wr.op.is_atomic() || wqe.first_psn != Some(psn) {
            ctx.stats.rx_ghost_responses += 1;
            return;
        }
        // The original value lands in host order, as on the x86 hosts rxe runs on.
        if !scatter(ctx.mrs, &wqe.wr.sgl, 0, &orig.to_le_bytes()) {
            self.fail_oldest(ctx, WcStatus::LocProtErr);
            return;
        }
        self.comp.una = psn.wrapping_add(1);
        self.retire_front(ctx);
        self.catch_up(ctx);
        self.after_progress(ctx);
    }

    /// A READ response or atomic ACK that is not the one expected. Past it: those between were
    /// lost, an implied NAK (IBTA vol. 1 §9.7.5.2.4), retried once until progress is made.
    /// Before it: a late duplicate.
    fn out_of_order_response(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        if psn.distance(self.comp.una) < 0 || self.comp.retrying {
            ctx.stats.rx_ghost_responses += 1;
            return;
        }
        ctx.stats.implied_naks += 1;
        let una = self.comp.una;
        self.retry_implied(ctx, una);
        self.comp.retrying = true;
    }

    fn on_rnr_nak(&mut self, ctx: &mut Ctx<'_>, psn: Psn, timer: RnrTimer) {
        if !self.ack_before(ctx, psn) {
            return;
        }
        //= ibta:vol1/9.7.5.2.8
        //# rnr_retry 7 means retry forever
        if self.rnr_retry != 7 {
            if self.comp.rnr_left == 0 {
                self.fail_oldest(ctx, WcStatus::RnrRetryExcErr);
                return;
            }
            self.comp.rnr_left -= 1;
        }
        tracing::trace!(qpn = %self.qpn, psn = %psn, micros = timer.micros(), "rnr nak");
        self.go_back(psn);
        self.req.rnr_wait = true;
        self.timers.stop(Timer::Retransmit);
        self.timers.set(
            Timer::RnrRetry,
            ctx.now + Duration::from_micros(timer.micros().into()),
        );
    }

    /// The RNR delay is over: send again.
    pub(crate) fn on_rnr_timer(&mut self, ctx: &mut Ctx<'_>) {
        self.req.rnr_wait = false;
        if let Some(timeout) = self.retransmit_timeout(ctx.config) {
            self.timers.set(Timer::Retransmit, ctx.now + timeout);
        }
    }

    /// The local ACK timeout expired: go back to the oldest unacknowledged PSN.
    pub(crate) fn on_retransmit_timer(&mut self, ctx: &mut Ctx<'_>) {
        if !self.outstanding() && !self.sq.any_sent() {
            return;
        }
        self.comp.retrying = false;
        self.comp.timeouts_in_a_row = self.comp.timeouts_in_a_row.saturating_add(1);
        ctx.stats.retransmit_timeouts += 1;
        let una = self.comp.una;
        self.retry(ctx, una);
    }

    /// A transport retry from `psn` (timeout, PSN-sequence NAK, implied NAK), counted against
    /// retry_cnt; when none is left the oldest WR fails with RETRY_EXC_ERR (IBTA vol. 1
    /// §9.7.6.1.3). rxe treats retry_cnt 7 as infinite; the spec does not, and neither do we.
    //= ibta:vol1/9.7.6.1.3
    //# each transport retry counts against retry_cnt; when none is left the WR fails with RETRY_EXC_ERR
    fn retry(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        self.count_retry(ctx, |qp| qp.go_back(psn));
    }

    /// One transport retry counted: `resend` arranges what goes again and the retransmit timer
    /// is armed anew; with none left, the oldest WR fails with RETRY_EXC_ERR instead.
    fn count_retry(&mut self, ctx: &mut Ctx<'_>, resend: impl FnOnce(&mut Self)) {
        if self.comp.retry_left == 0 {
            self.fail_oldest(ctx, WcStatus::RetryExcErr);
            return;
        }
        self.comp.retry_left -= 1;
        resend(self);
        if let Some(timeout) = self.retransmit_timeout(ctx.config) {
            self.timers.set(Timer::Retransmit, ctx.now + timeout);
        }
    }

    /// An implied NAK (IBTA vol. 1 §9.7.5.2.4): a retry from `psn`, inside a READ or at an
    /// atomic. Under selective repeat only that READ or atomic is asked for again
    /// (`qp/selective.rs`); under go-back-N everything from there goes again.
    fn retry_implied(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        if ctx.config.loss_recovery.is_selective() {
            self.count_retry(ctx, |qp| qp.read_again(psn));
        } else {
            self.retry(ctx, psn);
        }
    }

    /// The oldest WR completes with `status` and the QP goes to the error state, flushing the
    /// rest (IBTA vol. 1 §10.7.3.1).
    //= ibta:vol1/10.7.3.1
    //# an error completion moves the QP to the error state and flushes the rest
    fn fail_oldest(&mut self, ctx: &mut Ctx<'_>, status: WcStatus) {
        if let Some(wqe) = self.sq.retire_front() {
            let cqe = Cqe::new(status, wqe.wr.wr_id, wqe.wc_opcode(), self.qpn);
            ctx.completions.push((self.send_cq, cqe));
        }
        tracing::debug!(qpn = %self.qpn, status = ?status, "send wr failed");
        self.fail(ctx);
    }
}
