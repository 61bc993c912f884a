//! The requester: turns send WRs into request packets — segmentation by path MTU into
//! FIRST/MIDDLE/LAST/ONLY, PSN assignment, AckReq, the window of unacknowledged PSNs and the limit
//! on outstanding READs and atomics — and rewinds for go-back-N (rxe_req.c).

use roce_wire::opcode::Transport;
use roce_wire::{
    AtomicEthRepr, BthRepr, DethRepr, IethRepr, ImmDtRepr, Opcode, Psn, RethRepr, RoceRepr,
};

use super::inline_data::InlineData;

use super::{Ctx, EmitError, Qp, QpType, SendWqe, gather, lend, lend_payload};
use crate::Transmit;
use crate::cq::{Cqe, WcStatus};
use crate::timer::Timer;
use crate::wr::SendOp;

/// The requester's state.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Requester {
    /// The PSN of the next request packet.
    pub(crate) psn: Psn,
    /// The first PSN never sent: packets below it are retransmissions.
    pub(crate) next_new: Psn,
    /// Bytes of that WR already sent.
    pub(crate) offset: u32,
    /// Packets sent since the last one with AckReq.
    pub(crate) noack_pkts: u32,
    /// Waiting for the RNR timer: send nothing.
    pub(crate) rnr_wait: bool,
}

impl Requester {
    /// Starts at `psn`, as RTR → RTS sets it (`IBV_QP_SQ_PSN`).
    pub(crate) fn start(psn: Psn) -> Self {
        Self {
            psn,
            next_new: psn,
            ..Self::default()
        }
    }

    /// Whether a message is partly sent (SQD lets it finish).
    pub(crate) fn draining(&self) -> bool {
        self.offset > 0
    }
}

impl Qp {
    /// Whether packets are unacknowledged.
    pub(crate) fn outstanding(&self) -> bool {
        self.comp.una != self.req.psn
    }

    /// How many packets are unacknowledged.
    pub(crate) fn unacked(&self) -> u32 {
        u32::try_from(self.req.psn.distance(self.comp.una)).unwrap_or(0)
    }

    /// Whether a message is partly sent (SQD lets it finish): a SEND or WRITE some of whose
    /// packets went, a READ some of whose pieces were asked for.
    pub(crate) fn message_in_progress(&self) -> bool {
        self.req.draining()
            || self
                .sq
                .get(self.sq.cursor())
                .is_some_and(|w| w.first_psn.is_some() && !w.sent)
    }

    /// READ requests and atomics in flight (IBTA's initiator depth): an atomic, or a piece of a
    /// READ, whose responses have not all come; a piece counts once however many of its
    /// responses have. The WQEs before the cursor and the one at it, whose pieces may be partly
    /// asked for.
    fn reads_in_flight(&self, config: &crate::NicConfig) -> usize {
        let piece = read_piece_psns(config);
        let una = self.comp.una;
        let mut in_flight = 0;
        for (i, wqe) in self.sq.iter().enumerate().take(self.sq.cursor() + 1) {
            let Some(first) = wqe.first_psn else { continue };
            match wqe.wr.op {
                op if op.is_atomic() => in_flight += usize::from(una.distance(first) <= 0),
                SendOp::RdmaRead(_) => {
                    // The PSNs asked for and not yet answered, as offsets in the READ.
                    let asked = if i == self.sq.cursor() {
                        self.req.psn.distance(first).max(0) as u32
                    } else {
                        wqe.npsn
                    };
                    let answered = una.distance(first).max(0) as u32;
                    if answered < asked {
                        in_flight += ((asked - 1) / piece - answered / piece + 1) as usize;
                    }
                }
                _ => {}
            }
        }
        in_flight
    }

    /// Whether the requester has a WQE to send from (its window and pacing aside).
    pub(crate) fn has_requests(&self) -> bool {
        self.can_send() && !self.req.rnr_wait && (self.sq.has_unsent() || self.sack.pending())
    }

    /// The next request packet, written into `buf`, if the requester has one to send now:
    /// the gate (state, window, initiator depth, pacing), the next segment of the WQE at the
    /// cursor, its bytes, then the bookkeeping of what was sent.
    pub(crate) fn poll_request(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        self.run_local_ops(ctx);
        if self.sack.pending()
            && let Some(transmit) = self.poll_resend(ctx, buf)
        {
            return Some(transmit);
        }
        let cursor = self.request_gate(ctx)?;
        let psn = self.req.psn;
        // PSNs are assigned once: a WQE sent again by go-back-N keeps them, so a PSN never names
        // two different packets.
        let wqe = &mut self.sq[cursor];
        if wqe.first_psn.is_none() {
            wqe.first_psn = Some(psn);
        }
        let wqe = &self.sq[cursor];
        let segment = self.segment(ctx, wqe, psn, self.req.offset);
        let mut transmit = match self.emit_segment(ctx, wqe, &segment, buf) {
            Ok(transmit) => transmit,
            Err(err) => {
                // The SGL no longer names readable memory (deregistered region): a local
                // protection error (IBTA vol. 1 §10.8.3). No source address for the
                // destination: the QP cannot carry the WR out. Either way the QP goes to the
                // error state.
                let status = match err {
                    EmitError::Unreadable => WcStatus::LocProtErr,
                    EmitError::NoSource | EmitError::BufferTooSmall => WcStatus::LocQpOpErr,
                };
                tracing::debug!(qpn = %self.qpn, psn = %psn, error = ?err, "request not sent");
                let wqe = self.sq.remove_current().expect("the cursor names a WQE");
                let cqe = Cqe::new(status, wqe.wr.wr_id, wqe.wc_opcode(), self.qpn);
                ctx.completions.push((self.send_cq, cqe));
                self.fail(ctx);
                return None;
            }
        };
        // Requests are ECN-capable where congestion control reads the marks.
        transmit.ecn = crate::cc::request_ecn(ctx.config);
        self.account(ctx, cursor, &segment, &transmit);
        Some(transmit)
    }

    /// The cursor, if a request may go now: the QP sends, the window has room, the initiator
    /// depth allows a READ or atomic, and the pacer lets it (else its timer is set).
    #[inline]
    fn request_gate(&mut self, ctx: &Ctx<'_>) -> Option<usize> {
        if !self.can_send() || self.req.rnr_wait {
            return None;
        }
        let cursor = self.sq.cursor();
        let wqe = self.sq.get(cursor)?;
        // A bind or an invalidation waits for the WRs before it (`local_ops.rs`).
        if wqe.wr.op.is_local() {
            return None;
        }
        if self.state == super::QpState::Sqd && !self.message_in_progress() {
            return None;
        }
        if self.qp_type == QpType::Rc {
            // rxe_param.h RXE_MAX_UNACKED_PSNS: stop at the window's edge (under selective
            // repeat, IRN's BDP-FC).
            if self.req.psn.distance(self.comp.una) >= super::selective::window(ctx.config) as i32 {
                return None;
            }
            // The congestion window (DCTCP's): bytes in flight; an ACK reopens it.
            if !self.cc.window_open() {
                return None;
            }
            //= ibta:vol1/9.5.2
            //# at most max_rd_atomic READs and atomics outstanding (initiator depth)
            // Every WQE before the cursor has been sent and not yet retired.
            if wqe.wr.op.is_read_or_atomic()
                && self.reads_in_flight(ctx.config) >= usize::from(self.max_rd_atomic)
            {
                return None;
            }
        }
        if self.paced(ctx) {
            return None;
        }
        Some(cursor)
    }

    /// Pacing: a rate-limited QP sends no request before its next send time, and wakes up by
    /// the Pacing timer rather than by being polled. Whether it must wait now.
    #[inline]
    pub(super) fn paced(&mut self, ctx: &Ctx<'_>) -> bool {
        if let Some(rate) = self.cc.rp.rate_bps() {
            let at = self.cc.pacer.ready_at(rate);
            if ctx.now < at {
                self.timers.set(Timer::Pacing, at);
                self.cc.pacer.hold(at);
                return true;
            }
        }
        false
    }

    /// The packet that carries `wqe` on from `psn`, `offset` bytes into a SEND or WRITE.
    #[inline]
    pub(super) fn segment(&self, ctx: &Ctx<'_>, wqe: &SendWqe, psn: Psn, offset: u32) -> Segment {
        let mtu = self.mtu.bytes();
        let whole = |repr, npsn| Segment {
            repr,
            offset: 0,
            len: 0,
            npsn,
            last: true,
        };
        match wqe.wr.op {
            SendOp::RdmaRead(remote) => {
                // A READ resumed by go-back-N asks only for what is missing (rxe req_retry).
                let first = wqe.first_psn.expect("set by poll_request");
                let asked = psn.distance(first).max(0) as u32;
                let done = asked.saturating_mul(mtu).min(wqe.length);
                let remaining = wqe.length - done;
                // A long READ is asked for a piece at a time, each piece a READ request of its
                // own whose PSNs count against the window like a WRITE's packets: its
                // responses never run ahead of what the window lets be in flight. Pieces lie
                // at fixed places in the READ, so one asked for again from its middle asks
                // for no more than the responder saw asked for at first (rxe's
                // duplicate_request drops a READ that reaches beyond its resource).
                let end = read_piece_end(asked, read_piece_psns(ctx.config), wqe.npsn);
                let last = end == wqe.npsn;
                let dma_len = if last {
                    remaining
                } else {
                    (end - asked).saturating_mul(mtu)
                };
                let mut bth = BthRepr::new(Opcode::RcRdmaReadRequest, self.dest_qpn, psn);
                bth.ack_req = true;
                let repr = RoceRepr {
                    reth: Some(RethRepr {
                        va: remote.addr + u64::from(done),
                        rkey: remote.rkey,
                        dma_len,
                    }),
                    ..RoceRepr::new(bth)
                };
                Segment {
                    repr,
                    offset: done,
                    len: 0,
                    npsn: end - asked,
                    last,
                }
            }
            SendOp::CompareSwap {
                remote,
                compare,
                swap,
            } => {
                let atomic = AtomicEthRepr {
                    va: remote.addr,
                    rkey: remote.rkey,
                    swap_add: swap,
                    compare,
                };
                whole(
                    atomic_request(Opcode::RcCompareSwap, self.dest_qpn, psn, atomic),
                    1,
                )
            }
            SendOp::FetchAdd { remote, add } => {
                let atomic = AtomicEthRepr {
                    va: remote.addr,
                    rkey: remote.rkey,
                    swap_add: add,
                    compare: 0,
                };
                whole(
                    atomic_request(Opcode::RcFetchAdd, self.dest_qpn, psn, atomic),
                    1,
                )
            }
            op => self.data_segment(ctx, wqe, op, psn, offset),
        }
    }

    /// The next packet of a SEND or WRITE: FIRST/MIDDLE/LAST/ONLY by the bytes already sent.
    #[inline]
    fn data_segment(
        &self,
        ctx: &Ctx<'_>,
        wqe: &SendWqe,
        op: SendOp,
        psn: Psn,
        offset: u32,
    ) -> Segment {
        let mtu = self.mtu.bytes();
        let remaining = wqe.length - offset;
        let chunk = remaining.min(mtu);
        let first = offset == 0;
        let last = remaining <= mtu;
        let opcode = data_opcode(self.qp_type, op, first, last);
        let mut bth = BthRepr::new(opcode, self.dest_qpn, psn);
        bth.pad_count = RoceRepr::pad_for(chunk as usize);
        bth.solicited_event = last && wqe.wr.solicited;
        // rxe_req.c: AckReq on the last packet of a message, and every RXE_MAX_PKT_PER_ACK
        // packets so a long message is acknowledged as it goes. And whenever one more packet
        // without would leave more than half of the NIC's budget of unacknowledged packets
        // after their QPs' last AckReqs: packets in the middle of messages would otherwise hold
        // the budget until their QPs reach an AckReq, which they cannot send while it is spent
        // (`in_flight.rs`). And on every packet for an algorithm that hears ACKs (DCTCP,
        // TIMELY): its window reopens, and its RTT is sampled, only by ACKs, and HPCC's ns-3
        // acknowledges every packet.
        bth.ack_req = self.qp_type == QpType::Rc
            && (last
                || self.req.noack_pkts + 1 >= super::selective::ack_cadence(ctx.config)
                || ctx.must_cover
                || self.cc.acks_every_packet());
        let mut repr = RoceRepr {
            payload_len: chunk as usize,
            ..RoceRepr::new(bth)
        };
        match op {
            SendOp::RdmaWrite(remote) | SendOp::RdmaWriteWithImm(remote, _) if first => {
                repr.reth = Some(RethRepr {
                    va: remote.addr,
                    rkey: remote.rkey,
                    dma_len: wqe.length,
                });
            }
            _ => {}
        }
        match op {
            SendOp::SendWithImm(imm) | SendOp::RdmaWriteWithImm(_, imm) if last => {
                repr.immdt = Some(ImmDtRepr { imm_data: imm });
            }
            SendOp::SendWithInv(rkey) if last => repr.ieth = Some(IethRepr { rkey }),
            _ => {}
        }
        if self.qp_type == QpType::Ud {
            let ud = wqe
                .wr
                .ud
                .expect("post_send checks UD WRs have a destination");
            //= ibta:vol1/10.2.5
            //# a Q_Key with the high bit set means "use the QP's"
            let qkey = if ud.qkey & 0x8000_0000 != 0 {
                self.qkey
            } else {
                ud.qkey
            };
            repr.bth.dest_qp = ud.qpn;
            repr.deth = Some(DethRepr {
                qkey,
                src_qp: self.qpn,
            });
        }
        Segment {
            repr,
            offset,
            len: chunk,
            npsn: 1,
            last,
        }
    }

    /// Writes `segment`'s packet, its payload from the WQE's inline copy or its SGL.
    #[inline]
    pub(super) fn emit_segment(
        &self,
        ctx: &mut Ctx<'_>,
        wqe: &SendWqe,
        segment: &Segment,
        buf: &mut [u8],
    ) -> Result<Transmit, EmitError> {
        let dst = match (self.qp_type, wqe.wr.ud) {
            (QpType::Ud, Some(ud)) => ud.ip,
            _ => self.av.map(|av| av.dst).ok_or(EmitError::NoSource)?,
        };
        let inline = wqe.wr.inline_data.as_ref().map(InlineData::as_slice);
        let sgl = &wqe.wr.sgl;
        let mrs = &*ctx.mrs;
        let (start, len) = (segment.offset as usize, segment.len as usize);
        // Lent where the poll asks for loans and the memory has an address, RC only
        // (`lend_payload`, `loan.rs`); inline data was taken at the post, and is sent from there.
        let lent = match inline {
            Some(_) => None,
            None => lend_payload(
                ctx.loans.as_deref_mut(),
                ctx.config,
                (&segment.repr, len),
                |loans, hole| lend(mrs, sgl, start as u64, len, hole, loans),
            ),
        };
        self.emit(
            ctx.config,
            (ctx.ip_id, lent),
            &segment.repr,
            dst,
            buf,
            |payload| match inline {
                Some(data) => {
                    payload.copy_from_slice(&data[start..start + len]);
                    true
                }
                None => gather(mrs, sgl, start as u64, payload),
            },
        )
    }

    /// What sending `segment` changes: pacing and the reaction point, counters, the next PSN,
    /// the cursor, the retransmit timer, and for UC and UD the WR's completion.
    #[inline]
    fn account(
        &mut self,
        ctx: &mut Ctx<'_>,
        cursor: usize,
        segment: &Segment,
        transmit: &Transmit,
    ) {
        let psn = segment.repr.bth.psn;
        let again = psn.distance(self.req.next_new) < 0;
        let unacked_before = self.unacked();
        // Only RC packets are acknowledged, so only they are recorded in flight (0: not).
        let npsn = if self.qp_type == QpType::Rc {
            segment.npsn
        } else {
            0
        };
        self.account_wire(ctx, (transmit, segment.len), (psn, npsn, again));
        if again {
            ctx.stats.retransmitted_packets += 1;
        }
        let next = psn.wrapping_add(segment.npsn);
        if next.distance(self.req.next_new) > 0 {
            self.req.next_new = next;
        }
        self.req.psn = next;
        self.req.noack_pkts = if segment.repr.bth.ack_req {
            0
        } else {
            self.req.noack_pkts + 1
        };
        tracing::trace!(qpn = %self.qpn, psn = %psn, opcode = %segment.repr.bth.opcode, "tx request");
        let wqe = &mut self.sq[cursor];
        if segment.last {
            wqe.npsn = wqe
                .first_psn
                .map_or(segment.npsn, |first| next.distance(first) as u32);
            wqe.sent = true;
            self.req.offset = 0;
            self.sq.advance();
        } else {
            self.req.offset += segment.len;
        }
        match self.qp_type {
            QpType::Rc => {
                if self.timers.get(Timer::Retransmit).is_none()
                    && let Some(timeout) = self.retransmit_timeout(ctx.config)
                {
                    self.timers.set(Timer::Retransmit, ctx.now + timeout);
                } else {
                    self.leave_rto_low(ctx, unacked_before);
                }
            }
            //= ibta:vol1/9.8.3
            //# UC and UD: a WR is done once its last packet is out (also §9.8.4)
            QpType::Uc | QpType::Ud => {
                if segment.last {
                    let wqe = self.sq.retire_front().expect("the WQE just sent");
                    if wqe.wr.signaled {
                        let cqe = Cqe::success(wqe.wr.wr_id, wqe.wc_opcode(), self.qpn);
                        ctx.completions.push((self.send_cq, cqe));
                    }
                }
            }
        }
    }

    /// What any request packet sent changes: pacing, the congestion control (`sent`: its PSN,
    /// the PSNs it takes, whether it went before; `payload`: its bytes of payload), the
    /// counters of packets and bytes.
    #[inline]
    pub(super) fn account_wire(
        &mut self,
        ctx: &mut Ctx<'_>,
        (transmit, payload): (&Transmit, u32),
        sent: (Psn, u32, bool),
    ) {
        self.cc.on_request_sent(
            ctx.now,
            sent,
            (crate::cc::pacer::wire_len(transmit), payload),
            &mut self.timers,
            ctx.stats,
        );
        ctx.stats.tx_packets += 1;
        ctx.stats.tx_bytes += transmit.len as u64;
    }

    /// Go-back-N (IBTA vol. 1 §9.7.5.2.1, rxe `req_retry`): send again from `psn`, which lies in
    /// the oldest unretired WQEs. Later WQEs are sent again as they were, with the same PSNs.
    //= ibta:vol1/9.7.5.2.1
    //# go-back-N: send again from the PSN named, later WQEs as they were, with the same PSNs
    pub(crate) fn go_back(&mut self, psn: Psn) {
        let from = self.req.psn;
        let Some(wqe) = self.sq.rewind_to(psn) else {
            // No unretired WQE holds it: nothing was outstanding there.
            tracing::debug!(qpn = %self.qpn, psn = %psn, "go back n: nothing outstanding");
            return;
        };
        let first = wqe.first_psn.expect("contains() means it was sent");
        let packets_done = psn.distance(first) as u32;
        tracing::debug!(qpn = %self.qpn, from = %from, to = %psn, "go back n");
        self.req.psn = psn;
        self.cc.on_go_back(psn);
        // Under selective repeat, what was known missing goes again with the rest.
        self.sack.reset(psn);
        self.req.offset = match wqe.wr.op {
            // A READ or atomic is asked again by one request; its progress is in the PSN.
            op if op.is_read_or_atomic() => 0,
            _ => packets_done
                .saturating_mul(self.mtu.bytes())
                .min(wqe.length),
        };
        self.req.noack_pkts = 0;
    }

    /// Points the requester at `una` after ACKs overtook a go-back-N resend: in the WQE that
    /// holds it, or at the first WQE never sent.
    pub(crate) fn resync_cursor(&mut self) {
        let una = self.comp.una;
        if self.sq.holds(una) {
            self.go_back(una);
        } else {
            self.req.psn = una;
            self.req.offset = 0;
            self.sq.rewind_to_unsent();
        }
    }
}

/// Response PSNs one READ request asks for at most: half the window, so that a READ of any
/// length keeps at most a window and a half of responses in flight, as WRITEs keep a window of
/// request packets. A single request for a GiB had its responses overrun the requester's
/// socket; every retry started another train of the same length, behind the first.
pub(crate) fn read_piece_psns(config: &crate::NicConfig) -> u32 {
    (super::selective::window(config) / 2).max(1)
}

/// Where the piece of a READ of `total` response PSNs that holds PSN offset `at` ends (the
/// offset after its last PSN): pieces of `piece` PSNs from the READ's first.
pub(crate) fn read_piece_end(at: u32, piece: u32, total: u32) -> u32 {
    (at / piece)
        .saturating_add(1)
        .saturating_mul(piece)
        .min(total)
}

/// One request packet of a WQE: its headers, which bytes of the message it carries, the PSNs
/// it takes (a READ request takes one per response) and whether it ends the WQE.
#[derive(Debug)]
pub(super) struct Segment {
    pub(super) repr: RoceRepr,
    /// Where its payload starts in the message.
    pub(super) offset: u32,
    /// Bytes of payload.
    pub(super) len: u32,
    pub(super) npsn: u32,
    pub(super) last: bool,
}

fn atomic_request(
    opcode: Opcode,
    dest_qp: roce_wire::Qpn,
    psn: Psn,
    atomic: AtomicEthRepr,
) -> RoceRepr {
    let mut bth = BthRepr::new(opcode, dest_qp, psn);
    bth.ack_req = true;
    RoceRepr {
        atomic_eth: Some(atomic),
        ..RoceRepr::new(bth)
    }
}

/// The opcode of a SEND or WRITE packet by its place in the message (IBTA vol. 1 Table 35).
//= ibta:vol1/Table-35
//# the opcode by transport and by the packet's place in the message; UC is RC plus 0x20
fn data_opcode(qp_type: QpType, op: SendOp, first: bool, last: bool) -> Opcode {
    use Opcode::*;
    let rc = match (op, first, last) {
        (SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_), true, false) => {
            RcSendFirst
        }
        (SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_), false, false) => {
            RcSendMiddle
        }
        (SendOp::Send, true, true) => RcSendOnly,
        (SendOp::Send, false, true) => RcSendLast,
        (SendOp::SendWithImm(_), true, true) => RcSendOnlyWithImmediate,
        (SendOp::SendWithImm(_), false, true) => RcSendLastWithImmediate,
        (SendOp::SendWithInv(_), true, true) => RcSendOnlyWithInvalidate,
        (SendOp::SendWithInv(_), false, true) => RcSendLastWithInvalidate,
        (_, true, false) => RcRdmaWriteFirst,
        (_, false, false) => RcRdmaWriteMiddle,
        (SendOp::RdmaWriteWithImm(..), true, true) => RcRdmaWriteOnlyWithImmediate,
        (SendOp::RdmaWriteWithImm(..), false, true) => RcRdmaWriteLastWithImmediate,
        (_, true, true) => RcRdmaWriteOnly,
        (_, false, true) => RcRdmaWriteLast,
    };
    match qp_type {
        QpType::Rc => rc,
        // UC opcodes are the RC ones plus 0x20 (IBTA vol. 1 Table 35).
        QpType::Uc => {
            let uc = Opcode::from(u8::from(rc) | 0x20);
            debug_assert_eq!(uc.layout().map(|l| l.transport), Some(Transport::Uc));
            uc
        }
        QpType::Ud => {
            if matches!(op, SendOp::SendWithImm(_)) {
                UdSendOnlyWithImmediate
            } else {
                UdSendOnly
            }
        }
    }
}
