//! The responder: checks each request's PSN against the one it expects, executes new requests
//! (SEND into receive WRs, WRITE and READ against registered memory, atomics), answers with
//! ACKs, NAKs, READ responses and atomic ACKs, and replays duplicates without executing them
//! again (rxe_resp.c; IBTA vol. 1 §9.7.5.1 and §9.7.5.2).
//!
//! This file holds the responder's state and the PSN check that sorts each request into new,
//! duplicate or out of sequence; `execute.rs` runs new requests, `duplicate.rs` answers
//! duplicates, `reorder.rs` keeps what arrives out of sequence under selective repeat,
//! `unreliable.rs` is UC and UD, `respond.rs` sends what was queued.

use std::collections::VecDeque;

use roce_wire::aeth::{CreditCode, RnrTimer};
use roce_wire::opcode::Operation;
use roce_wire::{NakCode, Psn, RocePacket, Syndrome};

use echo::EcnEcho;
pub(crate) use grh::Arrival;

use super::{Ctx, Qp, QpType};
use crate::cq::{Cqe, WcOpcode, WcStatus};
use crate::mr::{Access, PdHandle};

/// The responder's state.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    /// The PSN expected next (ePSN).
    pub(crate) epsn: Psn,
    /// Message sequence number: requests completed (IBTA vol. 1 §9.7.5.1.2).
    pub(crate) msn: Msn,
    /// A PSN-sequence NAK (or RNR NAK) was sent: drop out-of-sequence requests silently until
    /// the expected PSN arrives (rxe `sent_psn_nak`).
    pub(crate) nak_sent: bool,
    /// UC: the rest of a message that was cut short or whose start was lost is being dropped,
    /// until a FIRST or ONLY starts the next one (rxe `drop_msg`).
    pub(crate) discarding: bool,
    /// The multi-packet message in progress.
    pub(crate) message: Option<Message>,
    /// Selective repeat: requests that arrived past ePSN, kept until it reaches them.
    pub(crate) reorder: reorder::Reorder,
    /// READs and atomics executed, kept to answer duplicates (`max_dest_rd_atomic` of them).
    pub(crate) resources: VecDeque<Resource>,
    /// Responses waiting to be sent, oldest first.
    pub(crate) out: VecDeque<Response>,
    /// The positive ACK at the head of `out` let a request packet of this QP go first
    /// ([`Responder::ack_may_wait`]); it goes next.
    pub(crate) ack_waited: bool,
    /// DCTCP's ECN-Echo (`echo.rs`), used only when congestion control asks for it.
    pub(crate) echo: EcnEcho,
    /// HPCC: the INT header of the newest request received, which its ACKs echo.
    pub(crate) int: Option<roce_wire::int::Repr>,
}

impl Responder {
    pub(crate) fn start(epsn: Psn) -> Self {
        Self {
            epsn,
            ..Self::default()
        }
    }

    /// Whether the response due is a positive ACK that may let one request packet of the QP
    /// go first: an ACK owes nothing to the order of the requester's packets (the two
    /// directions of a QP are independent streams), and a program that answers what it
    /// received sends the answer and the ACK in one offload batch, the answer first.
    pub(crate) fn ack_may_wait(&self) -> bool {
        !self.ack_waited
            && matches!(
                self.out.front(),
                Some(Response::Ack {
                    syndrome: Syndrome::Ack { .. },
                    ..
                })
            )
    }

    /// Forgets a message in progress (error, or a UC gap).
    pub(crate) fn abort_message(&mut self) {
        self.message = None;
    }

    /// Queues an ACK, replacing a plain ACK still waiting: ACKs are cumulative, so only the
    /// newest matters (coalescing).
    fn queue_ack(&mut self, psn: Psn, syndrome: Syndrome) {
        self.queue_ack_echo(psn, syndrome, false);
    }

    /// [`Responder::queue_ack`] with BECN set or not (`echo.rs`): a plain ACK still waiting
    /// is replaced only by one with the same BECN, as each ACK reports the CE state of the
    /// requests it newly acknowledges.
    fn queue_ack_echo(&mut self, psn: Psn, syndrome: Syndrome, becn: bool) {
        let msn = self.msn;
        if let (
            Syndrome::Ack { .. },
            Some(Response::Ack {
                syndrome: Syndrome::Ack { .. },
                becn: waiting,
                ..
            }),
        ) = (syndrome, self.out.back())
            && *waiting == becn
        {
            self.out.pop_back();
        }
        self.out.push_back(Response::Ack {
            psn,
            syndrome,
            msn,
            becn,
        });
    }
}

/// A positive ACK, its credit field "unlimited" (0x1f), as rxe sends it (`AETH_ACK_UNLIMITED`).
const ACK: Syndrome = Syndrome::Ack {
    credits: CreditCode::UNLIMITED,
};

/// A message sequence number: 24 bits that count the requests a responder completed, carried in
/// every AETH (IBTA vol. 1 §9.7.5.1.2), wrapping as PSNs do.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Msn(u32);

impl Msn {
    /// The MSN after one more completed request.
    pub(crate) const fn next(self) -> Self {
        Self(self.0.wrapping_add(1) & 0x00ff_ffff)
    }

    /// Its 24 bits, as the AETH carries them.
    pub(crate) const fn value(self) -> u32 {
        self.0
    }
}

/// A SEND or WRITE whose FIRST packet arrived and whose LAST has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Message {
    /// Into the receive WR at the head of the receive queue.
    Send {
        /// Bytes written so far.
        written: u32,
    },
    /// Into a memory region.
    Write {
        /// The region's key.
        key: u32,
        /// Where the next byte goes.
        va: u64,
        /// Bytes the RETH announced.
        total: u32,
        /// Bytes written so far.
        written: u32,
    },
}

/// A READ or atomic already executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resource {
    /// A READ and the PSNs of its responses.
    Read {
        /// First response PSN.
        first: Psn,
        /// Last response PSN.
        last: Psn,
    },
    /// An atomic and the value it found: a duplicate gets this, and is never executed again
    /// (IBTA vol. 1 §9.7.5.1.4, rxe `res->atomic.orig_val`).
    Atomic {
        /// Its PSN.
        psn: Psn,
        /// The original value.
        orig: u64,
    },
}

/// A response to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Response {
    /// ACK, NAK or RNR NAK.
    Ack {
        /// PSN it names.
        psn: Psn,
        /// What it says.
        syndrome: Syndrome,
        /// MSN at the time.
        msn: Msn,
        /// The BTH's BECN: the requests it newly acknowledges arrived CE-marked (`echo.rs`).
        becn: bool,
    },
    /// ATOMIC ACKNOWLEDGE.
    AtomicAck {
        /// PSN of the atomic.
        psn: Psn,
        /// The value found.
        orig: u64,
        /// MSN.
        msn: Msn,
    },
    /// Selective repeat's NACK (IRN): ePSN, and the PSN of the request that arrived past it
    /// (`qp/selective.rs` says where each goes on the wire).
    Sack {
        /// The PSN expected next: every PSN before it arrived.
        epsn: Psn,
        /// The PSN that arrived.
        sacked: Psn,
    },
    /// READ responses still to send.
    Read {
        /// PSN of the next response packet.
        psn: Psn,
        /// PSN of the last response packet.
        last: Psn,
        /// Region key.
        key: u32,
        /// Address of the next byte.
        va: u64,
        /// Bytes left.
        remaining: u32,
        /// Whether the first packet of this run is a FIRST/ONLY (a new READ) rather than a
        /// MIDDLE/LAST (a duplicate answered from the middle, as rxe's replay state).
        from_start: bool,
        /// MSN for the AETH.
        msn: Msn,
    },
}

/// Why a request is refused, and the NAK it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// No receive WR: RNR NAK, try later.
    Rnr,
    /// Invalid request (opcode sequence, length, an operation the QP does not allow).
    Invalid,
    /// R_Key, bounds or rights (IBTA vol. 1 §9.7.5.2.6, "Class C").
    Access,
}

impl Qp {
    /// Handles a request packet addressed to this QP.
    pub(crate) fn handle_request(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) {
        match self.qp_type {
            QpType::Rc => self.handle_rc_request(ctx, packet),
            QpType::Uc => self.handle_uc_request(ctx, packet),
            QpType::Ud => self.handle_ud_request(ctx, packet),
        }
    }

    fn handle_rc_request(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) {
        let psn = packet.bth().psn();
        //= ibta:vol1/9.7.5.1.1
        //# PSNs after ePSN (within half the space) are out of sequence,
        //# PSNs before it are duplicates
        let d = psn.distance(self.resp.epsn);
        if d > 0
            && let crate::LossRecovery::SelectiveRepeat { bdp_packets, .. } =
                ctx.config.loss_recovery
        {
            self.hold_out_of_order(ctx, packet, d, bdp_packets);
            return;
        }
        if d > 0 {
            ctx.stats.rx_out_of_sequence += 1;
            if !self.resp.nak_sent {
                //= ibta:vol1/C9-110
                //# one NAK, then silence until the expected PSN arrives
                ctx.stats.tx_nak_seq_err += 1;
                self.resp.nak_sent = true;
                let epsn = self.resp.epsn;
                self.resp.queue_ack(epsn, Syndrome::Nak(NakCode::PsnSeqErr));
            }
            return;
        }
        if d < 0 {
            ctx.stats.rx_duplicate_requests += 1;
            self.handle_duplicate(ctx, packet);
            return;
        }
        self.resp.nak_sent = false;
        if self.accept_in_sequence(ctx, packet) && self.resp.reorder.len() > 0 {
            self.run_held(ctx);
        }
    }

    /// Executes the request at ePSN and queues its answer: an ACK if it asked for one, an
    /// RNR NAK, or a NAK that ends the QP. Whether it executed (ePSN moved on).
    fn accept_in_sequence(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) -> bool {
        let psn = packet.bth().psn();
        let op = packet.layout().operation;
        let acked_op = matches!(op, Operation::Send | Operation::RdmaWrite);
        let echo = ctx.config.congestion.echoes_ecn();
        if echo
            && acked_op
            && let Some(becn) = self.resp.echo.state_change()
        {
            // DCTCP's ACK machine: the packets before this one, of the other CE state, are
            // acknowledged now with their own.
            self.resp.queue_ack_echo(psn.wrapping_sub(1), ACK, becn);
        }
        match self.execute(ctx, packet) {
            Ok(npsn) => {
                self.resp.epsn = psn.wrapping_add(npsn);
                let ack_req = packet.bth().ack_req();
                if echo {
                    if acked_op {
                        let becn = self.resp.echo.accepted(ack_req);
                        if ack_req {
                            self.resp.queue_ack_echo(psn, ACK, becn);
                        }
                    } else {
                        self.resp.echo.reset();
                    }
                } else if ack_req && acked_op {
                    self.resp.queue_ack(psn, ACK);
                }
                true
            }
            Err(Refusal::Rnr) => {
                self.resp.echo.reset();
                //= ibta:vol1/9.7.5.2.8
                //# an RNR NAK names this PSN; ePSN does not move
                ctx.stats.tx_rnr_naks += 1;
                self.resp.nak_sent = true;
                let timer = RnrTimer::new(self.min_rnr_timer);
                self.resp.queue_ack(psn, Syndrome::RnrNak { timer });
                false
            }
            Err(refusal) => {
                self.resp.echo.reset();
                ctx.stats.tx_naks_other += 1;
                let code = match refusal {
                    Refusal::Access => NakCode::RemoteAccessError,
                    _ => NakCode::InvalidRequest,
                };
                self.resp.queue_ack(psn, Syndrome::Nak(code));
                //= ibta:vol1/9.9.3
                //# class C/D responder errors end the QP (rxe do_class_ac_error)
                if let Some(Message::Send { .. }) = self.resp.message
                    && let Some(wr) = self.rq.pop_front()
                {
                    let cqe = Cqe::new(WcStatus::LocLenErr, wr.wr_id, WcOpcode::Recv, self.qpn);
                    ctx.completions.push((self.recv_cq, cqe));
                }
                self.fail(ctx);
                self.resp.reorder.clear();
                false
            }
        }
    }

    fn remember(&mut self, resource: Resource) {
        let capacity = usize::from(self.max_dest_rd_atomic.max(1));
        while self.resp.resources.len() >= capacity {
            self.resp.resources.pop_front();
        }
        self.resp.resources.push_back(resource);
    }
}

/// A READ's RETH names readable memory of the QP's PD (a zero-length READ names none): the key
/// of the region its responses are read from.
fn readable(
    ctx: &mut Ctx<'_>,
    pd: PdHandle,
    qpn: roce_wire::Qpn,
    reth: &roce_wire::reth::Packet<&[u8]>,
) -> Result<u32, Refusal> {
    let len = reth.dma_len();
    if len == 0 {
        return Ok(reth.rkey());
    }
    let (region, _) = remote_region(
        ctx,
        pd,
        qpn,
        reth.rkey(),
        reth.va(),
        len.into(),
        Access::REMOTE_READ,
    )?;
    Ok(region)
}

/// The region (its key) and the offset in it of `[va, va + len)` for a remote access with
/// `rights` by QP `qpn`, if the R_Key is valid: a region's of the QP's PD that allows it and
/// holds the range (IBTA vol. 1 §10.6.3.2, rxe `check_rkey`), or a bound window's that does
/// (`mw::resolve`). A refusal through a window is counted (`rx_mw_access_refused`).
//= ibta:vol1/10.6.3.2
//# a remote access needs a valid R_Key of the QP's PD, the rights, and the range inside the region
fn remote_region(
    ctx: &mut Ctx<'_>,
    pd: PdHandle,
    qpn: roce_wire::Qpn,
    rkey: u32,
    va: u64,
    len: u64,
    rights: Access,
) -> Result<(u32, usize), Refusal> {
    if let Some(window) = crate::mw::window_of(ctx.mws, rkey) {
        return crate::mw::resolve(window, ctx.mrs, (pd, qpn), rkey, va, len, rights).ok_or_else(
            || {
                ctx.stats.rx_mw_access_refused += 1;
                tracing::trace!(qpn = %qpn, rkey, va, len, "access through a window refused");
                Refusal::Access
            },
        );
    }
    let entry = ctx
        .mrs
        .get(&rkey)
        .filter(|e| e.rkey_valid && e.mr.pd() == pd)
        .ok_or(Refusal::Access)?;
    if !entry.mr.access().contains(rights) {
        return Err(Refusal::Access);
    }
    let offset = entry.mr.offset_of(va, len).ok_or(Refusal::Access)?;
    Ok((rkey, offset))
}

mod duplicate;
mod echo;
mod execute;
mod grh;
pub(crate) mod reorder;
mod respond;
#[cfg(test)]
mod tests;
mod unreliable;
