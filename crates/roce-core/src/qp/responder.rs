//! The responder: checks each request's PSN against the one it expects, executes new requests
//! (SEND into receive WRs, WRITE and READ against registered memory, atomics), answers with
//! ACKs, NAKs, READ responses and atomic ACKs, and replays duplicates without executing them
//! again (rxe_resp.c; IBTA vol. 1 §9.7.5.1 and §9.7.5.2).

use std::collections::VecDeque;

use roce_wire::aeth::{CreditCode, RnrTimer};
use roce_wire::opcode::{Operation, Position};
use roce_wire::{
    AethRepr, AtomicAckEthRepr, BthRepr, NakCode, Opcode, Psn, RocePacket, RoceRepr, Syndrome,
};

use super::{Ctx, Mrs, Qp, QpType, scatter, sgl_len};
use crate::Transmit;
use crate::cq::{Cqe, WcOpcode, WcStatus};
use crate::mr::{Access, PdHandle};

/// The responder's state.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    /// The PSN expected next (ePSN).
    pub(crate) epsn: Psn,
    /// Message sequence number: requests completed (IBTA vol. 1 §9.7.5.1.2).
    pub(crate) msn: u32,
    /// A PSN-sequence NAK (or RNR NAK) was sent: drop out-of-sequence requests silently until
    /// the expected PSN arrives (rxe `sent_psn_nak`).
    pub(crate) nak_sent: bool,
    /// UC: the rest of a message that was cut short or whose start was lost is being dropped,
    /// until a FIRST or ONLY starts the next one (rxe `drop_msg`).
    pub(crate) discarding: bool,
    /// The multi-packet message in progress.
    pub(crate) message: Option<Message>,
    /// READs and atomics executed, kept to answer duplicates (`max_dest_rd_atomic` of them).
    pub(crate) resources: VecDeque<Resource>,
    /// Responses waiting to be sent, oldest first.
    pub(crate) out: VecDeque<Response>,
}

impl Responder {
    pub(crate) fn start(epsn: Psn) -> Self {
        Self {
            epsn,
            ..Self::default()
        }
    }

    /// Forgets a message in progress (error, or a UC gap).
    pub(crate) fn abort_message(&mut self) {
        self.message = None;
    }

    /// Queues an ACK, replacing a plain ACK still waiting: ACKs are cumulative, so only the
    /// newest matters (coalescing).
    fn queue_ack(&mut self, psn: Psn, syndrome: Syndrome) {
        let msn = self.msn;
        if let (
            Syndrome::Ack { .. },
            Some(Response::Ack {
                syndrome: Syndrome::Ack { .. },
                ..
            }),
        ) = (syndrome, self.out.back())
        {
            self.out.pop_back();
        }
        self.out.push_back(Response::Ack { psn, syndrome, msn });
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
        msn: u32,
    },
    /// ATOMIC ACKNOWLEDGE.
    AtomicAck {
        /// PSN of the atomic.
        psn: Psn,
        /// The value found.
        orig: u64,
        /// MSN.
        msn: u32,
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
        msn: u32,
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
        // IBTA vol. 1 §9.7.5.1.1: PSNs after ePSN (within half the space) are out of sequence,
        // PSNs before it are duplicates.
        let d = psn.distance(self.resp.epsn);
        if d > 0 {
            ctx.stats.rx_out_of_sequence += 1;
            if !self.resp.nak_sent {
                // C9-110: one NAK, then silence until the expected PSN arrives.
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
        match self.execute(ctx, packet) {
            Ok(npsn) => {
                self.resp.epsn = psn.wrapping_add(npsn);
                let op = packet.layout().operation;
                if packet.bth().ack_req() && matches!(op, Operation::Send | Operation::RdmaWrite) {
                    self.resp.queue_ack(
                        psn,
                        Syndrome::Ack {
                            credits: CreditCode::UNLIMITED,
                        },
                    );
                }
            }
            Err(Refusal::Rnr) => {
                // IBTA vol. 1 §9.7.5.2.8: RNR NAK naming this PSN; ePSN does not move.
                ctx.stats.tx_rnr_naks += 1;
                self.resp.nak_sent = true;
                let timer = RnrTimer::new(self.min_rnr_timer);
                self.resp.queue_ack(psn, Syndrome::RnrNak { timer });
            }
            Err(refusal) => {
                ctx.stats.tx_naks_other += 1;
                let code = match refusal {
                    Refusal::Access => NakCode::RemoteAccessError,
                    _ => NakCode::InvalidRequest,
                };
                self.resp.queue_ack(psn, Syndrome::Nak(code));
                // Class C/D responder errors end the QP (IBTA vol. 1 §9.9.3, rxe do_class_ac_error).
                if let Some(Message::Send { .. }) = self.resp.message
                    && let Some(wr) = self.rq.pop_front()
                {
                    let mut cqe = Cqe::success(wr.wr_id, WcOpcode::Recv, self.qpn);
                    cqe.status = WcStatus::LocLenErr;
                    ctx.completions.push((self.recv_cq, cqe));
                }
                self.enter_error(ctx);
            }
        }
    }

    /// Executes a new request. Returns how many PSNs it took.
    fn execute(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) -> Result<u32, Refusal> {
        let layout = packet.layout();
        self.check_sequence(layout.operation, layout.position)?;
        self.check_length(layout.position, layout.payload, packet.payload().len())?;
        match layout.operation {
            Operation::Send => self.execute_send(ctx, packet).map(|()| 1),
            Operation::RdmaWrite => self.execute_write(ctx, packet).map(|()| 1),
            Operation::RdmaReadRequest => self.execute_read(ctx, packet),
            Operation::CompareSwap | Operation::FetchAdd => {
                self.execute_atomic(ctx, packet).map(|()| 1)
            }
            // FLUSH and ATOMIC WRITE (IBA 1.5) are not supported.
            _ => Err(Refusal::Invalid),
        }
    }

    /// The opcode sequence of IBTA vol. 1 §9.7.5.1.3: a FIRST or MIDDLE is followed by a MIDDLE
    /// or LAST of the same operation; anything else starts a message.
    fn check_sequence(&self, operation: Operation, position: Position) -> Result<(), Refusal> {
        let continues = matches!(position, Position::Middle | Position::Last);
        let ok = match self.resp.message {
            Some(Message::Send { .. }) => continues && operation == Operation::Send,
            Some(Message::Write { .. }) => continues && operation == Operation::RdmaWrite,
            None => !continues,
        };
        if ok { Ok(()) } else { Err(Refusal::Invalid) }
    }

    /// Payload lengths by position (rxe_resp.c `check_length`): FIRST and MIDDLE exactly the
    /// path MTU, LAST 1 to MTU, ONLY up to MTU.
    fn check_length(
        &self,
        position: Position,
        rule: roce_wire::opcode::PayloadRule,
        len: usize,
    ) -> Result<(), Refusal> {
        use roce_wire::opcode::PayloadRule;
        if !matches!(
            rule,
            PayloadRule::Mtu | PayloadRule::OneToMtu | PayloadRule::UpToMtu
        ) {
            return Ok(());
        }
        let mtu = self.mtu.bytes() as usize;
        let ok = match position {
            Position::First | Position::Middle => len == mtu,
            Position::Last => (1..=mtu).contains(&len),
            Position::Only => len <= mtu,
        };
        if ok { Ok(()) } else { Err(Refusal::Invalid) }
    }

    fn execute_send(
        &mut self,
        ctx: &mut Ctx<'_>,
        packet: &RocePacket<&[u8]>,
    ) -> Result<(), Refusal> {
        let layout = packet.layout();
        let written = match (self.resp.message, layout.position) {
            (Some(Message::Send { written }), _) => written,
            _ => 0,
        };
        let Some(wr) = self.rq.front() else {
            return Err(Refusal::Rnr);
        };
        let payload = packet.payload();
        if u64::from(written) + payload.len() as u64 > sgl_len(&wr.sgl)
            || !scatter(ctx.mrs, &wr.sgl, u64::from(written), payload)
        {
            self.resp.message = Some(Message::Send { written });
            return Err(Refusal::Invalid);
        }
        let written = written + payload.len() as u32;
        if matches!(layout.position, Position::First | Position::Middle) {
            self.resp.message = Some(Message::Send { written });
            return Ok(());
        }
        self.resp.message = None;
        let wr = self.rq.pop_front().expect("checked above");
        let mut cqe = Cqe::success(wr.wr_id, WcOpcode::Recv, self.qpn);
        cqe.byte_len = written;
        cqe.imm_data = packet.immdt().map(|imm| imm.imm_data());
        if let Some(ieth) = packet.ieth() {
            let rkey = ieth.rkey();
            // IBTA vol. 1 §10.6.6.2: SEND with Invalidate invalidates a region of our PD.
            if let Some(entry) = ctx.mrs.get_mut(&rkey).filter(|e| e.mr.pd() == self.pd) {
                entry.rkey_valid = false;
                cqe.invalidated_rkey = Some(rkey);
            }
        }
        ctx.completions.push((self.recv_cq, cqe));
        self.resp.msn = self.resp.msn.wrapping_add(1) & 0x00ff_ffff;
        Ok(())
    }

    fn execute_write(
        &mut self,
        ctx: &mut Ctx<'_>,
        packet: &RocePacket<&[u8]>,
    ) -> Result<(), Refusal> {
        let layout = packet.layout();
        let with_imm = packet.immdt().is_some();
        if with_imm && self.rq.is_empty() {
            return Err(Refusal::Rnr);
        }
        let (key, va, total, written) = match (self.resp.message, packet.reth()) {
            (
                Some(Message::Write {
                    key,
                    va,
                    total,
                    written,
                }),
                None,
            ) => (key, va, total, written),
            (None, Some(reth)) => {
                if !self.access.contains(Access::REMOTE_WRITE) {
                    return Err(Refusal::Invalid);
                }
                let total = reth.dma_len();
                // A zero-length WRITE names no memory: its R_Key is not checked (IBTA vol. 1
                // §9.7.5.1.5 C9-88.2).
                if total > 0 {
                    remote_region(
                        ctx.mrs,
                        self.pd,
                        reth.rkey(),
                        reth.va(),
                        total.into(),
                        Access::REMOTE_WRITE,
                    )?;
                }
                (reth.rkey(), reth.va(), total, 0)
            }
            _ => return Err(Refusal::Invalid),
        };
        let payload = packet.payload();
        // rxe_resp.c check_rkey: while more than an MTU remains, a packet is a full MTU that
        // does not end the message; the packet that ends it carries exactly what remains. Checked
        // before a byte lands, so a WRITE that lies about its length changes nothing.
        let remaining = total.saturating_sub(written);
        let fits = match layout.position {
            Position::First | Position::Middle => remaining > self.mtu.bytes(),
            Position::Last | Position::Only => payload.len() as u64 == u64::from(remaining),
        };
        if !fits {
            return Err(Refusal::Invalid);
        }
        if !payload.is_empty() {
            let offset = remote_region(
                ctx.mrs,
                self.pd,
                key,
                va,
                payload.len() as u64,
                Access::REMOTE_WRITE,
            )?;
            // In bounds: remote_region checked [offset, offset + len).
            ctx.mrs[&key].mr.write(offset, payload);
        }
        let written = written + payload.len() as u32;
        if matches!(layout.position, Position::First | Position::Middle) {
            self.resp.message = Some(Message::Write {
                key,
                va: va + payload.len() as u64,
                total,
                written,
            });
            return Ok(());
        }
        self.resp.message = None;
        if let Some(imm) = packet.immdt() {
            let wr = self.rq.pop_front().expect("checked above");
            let mut cqe = Cqe::success(wr.wr_id, WcOpcode::RecvRdmaWithImm, self.qpn);
            cqe.byte_len = total;
            cqe.imm_data = Some(imm.imm_data());
            ctx.completions.push((self.recv_cq, cqe));
        }
        self.resp.msn = self.resp.msn.wrapping_add(1) & 0x00ff_ffff;
        Ok(())
    }

    fn execute_read(
        &mut self,
        ctx: &mut Ctx<'_>,
        packet: &RocePacket<&[u8]>,
    ) -> Result<u32, Refusal> {
        if !self.access.contains(Access::REMOTE_READ) {
            return Err(Refusal::Invalid);
        }
        let reth = packet.reth().ok_or(Refusal::Invalid)?;
        let len = reth.dma_len();
        if len > 0 {
            remote_region(
                ctx.mrs,
                self.pd,
                reth.rkey(),
                reth.va(),
                len.into(),
                Access::REMOTE_READ,
            )?;
        }
        let psn = packet.bth().psn();
        let npsn = len.div_ceil(self.mtu.bytes()).max(1);
        let last = psn.wrapping_add(npsn - 1);
        self.remember(Resource::Read { first: psn, last });
        // C9-148: the MSN counts a READ when it is accepted.
        self.resp.msn = self.resp.msn.wrapping_add(1) & 0x00ff_ffff;
        self.resp.out.push_back(Response::Read {
            psn,
            last,
            key: reth.rkey(),
            va: reth.va(),
            remaining: len,
            from_start: true,
            msn: self.resp.msn,
        });
        Ok(npsn)
    }

    fn execute_atomic(
        &mut self,
        ctx: &mut Ctx<'_>,
        packet: &RocePacket<&[u8]>,
    ) -> Result<(), Refusal> {
        if !self.access.contains(Access::REMOTE_ATOMIC) {
            return Err(Refusal::Invalid);
        }
        let atomic = packet.atomic_eth().ok_or(Refusal::Invalid)?;
        // IBTA vol. 1 §9.4.5: the target is 8 bytes, 8-byte aligned.
        if atomic.va() % 8 != 0 {
            return Err(Refusal::Invalid);
        }
        let offset = remote_region(
            ctx.mrs,
            self.pd,
            atomic.rkey(),
            atomic.va(),
            8,
            Access::REMOTE_ATOMIC,
        )?;
        let compare_swap = packet.layout().operation == Operation::CompareSwap;
        // Memory holds the value in host order, as on the x86 hosts rxe runs on.
        let orig = ctx.mrs[&atomic.rkey()]
            .mr
            .update_u64(offset, |orig| {
                if !compare_swap {
                    orig.wrapping_add(atomic.swap_add())
                } else if orig == atomic.compare() {
                    atomic.swap_add()
                } else {
                    orig
                }
            })
            .expect("remote_region checked the 8 bytes");
        let psn = packet.bth().psn();
        self.remember(Resource::Atomic { psn, orig });
        self.resp.msn = self.resp.msn.wrapping_add(1) & 0x00ff_ffff;
        self.resp.out.push_back(Response::AtomicAck {
            psn,
            orig,
            msn: self.resp.msn,
        });
        Ok(())
    }

    fn remember(&mut self, resource: Resource) {
        let capacity = usize::from(self.max_dest_rd_atomic.max(1));
        while self.resp.resources.len() >= capacity {
            self.resp.resources.pop_front();
        }
        self.resp.resources.push_back(resource);
    }

    /// A request before ePSN: answered again, never executed again (IBTA vol. 1 §9.7.5.1.2,
    /// rxe `duplicate_request`).
    fn handle_duplicate(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) {
        let psn = packet.bth().psn();
        match packet.layout().operation {
            Operation::Send | Operation::RdmaWrite => {
                // C9-105: ACK with the PSN just before ePSN.
                let prev = self.resp.epsn.wrapping_sub(1);
                self.resp.queue_ack(
                    prev,
                    Syndrome::Ack {
                        credits: CreditCode::UNLIMITED,
                    },
                );
            }
            Operation::RdmaReadRequest => {
                let found = self.resp.resources.iter().find_map(|res| match *res {
                    Resource::Read { first, last }
                        if psn.distance(first) >= 0 && last.distance(psn) >= 0 =>
                    {
                        Some((first, last))
                    }
                    _ => None,
                });
                let (Some((first, last)), Some(reth)) = (found, packet.reth()) else {
                    // No resource: a very old duplicate. Dropped (rxe: class D, silently).
                    return;
                };
                // The READ is read again from memory, from the PSN asked, with the RETH of the
                // duplicate (rxe re-validates it). Its responses still waiting to be sent are
                // abandoned: the train starts again from the PSN asked rather than running to
                // its end first (rxe keeps one position per READ resource and moves it back).
                // Without this every retry of a long READ queued another whole train behind
                // the first, and a READ of a GiB never caught up with its own retries.
                let len = reth.dma_len();
                if len > 0
                    && remote_region(
                        ctx.mrs,
                        self.pd,
                        reth.rkey(),
                        reth.va(),
                        len.into(),
                        Access::REMOTE_READ,
                    )
                    .is_err()
                {
                    return;
                }
                self.resp
                    .out
                    .retain(|r| !matches!(*r, Response::Read { last: l, .. } if l == last));
                self.resp.out.push_back(Response::Read {
                    psn,
                    last,
                    key: reth.rkey(),
                    va: reth.va(),
                    remaining: len,
                    from_start: psn == first,
                    msn: self.resp.msn,
                });
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let orig = self.resp.resources.iter().find_map(|res| match *res {
                    Resource::Atomic { psn: p, orig } if p == psn => Some(orig),
                    _ => None,
                });
                if let Some(orig) = orig {
                    self.resp.out.push_back(Response::AtomicAck {
                        psn,
                        orig,
                        msn: self.resp.msn,
                    });
                }
            }
            _ => {}
        }
    }

    /// UC: no ACKs, no retransmission. A gap in PSNs drops the message in progress; the next
    /// FIRST or ONLY starts afresh (IBTA vol. 1 §9.8.3).
    fn handle_uc_request(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) {
        let psn = packet.bth().psn();
        let starts = matches!(packet.layout().position, Position::First | Position::Only);
        if psn != self.resp.epsn && self.resp.message.take().is_some() {
            // A gap cuts the message in progress short.
            ctx.stats.rx_uc_dropped_messages += 1;
            self.resp.discarding = true;
        }
        self.resp.epsn = psn.wrapping_add(1);
        if starts {
            self.resp.discarding = false;
        } else if self.resp.message.is_none() {
            // The rest of a message whose start was lost: dropped, and counted once.
            if !self.resp.discarding {
                ctx.stats.rx_uc_dropped_messages += 1;
                self.resp.discarding = true;
            }
            return;
        }
        if self.execute(ctx, packet).is_err() {
            self.resp.message = None;
            self.resp.discarding = true;
            ctx.stats.rx_uc_dropped_messages += 1;
        }
    }

    /// UD: one packet per message, into the next receive WR, after a 40-byte GRH area as verbs
    /// lays it out (for IPv4 the IPv4 header sits in its last 20 bytes, as rxe writes it).
    fn handle_ud_request(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) {
        let Some(wr) = self.rq.pop_front() else {
            ctx.stats.rx_no_recv_wr += 1;
            return;
        };
        let payload = packet.payload();
        let mut grh = [0u8; 40];
        grh[20] = 0x45;
        let mut cqe = Cqe::success(wr.wr_id, WcOpcode::Recv, self.qpn);
        let total = grh.len() + payload.len();
        // One scatter of the whole, so that nothing lands unless all of it fits.
        let mut message = Vec::with_capacity(total);
        message.extend_from_slice(&grh);
        message.extend_from_slice(payload);
        if (total as u64) > sgl_len(&wr.sgl) || !scatter(ctx.mrs, &wr.sgl, 0, &message) {
            cqe.status = WcStatus::LocLenErr;
        }
        cqe.byte_len = total as u32;
        cqe.imm_data = packet.immdt().map(|imm| imm.imm_data());
        cqe.src_qp = packet.deth().map(|deth| deth.src_qp());
        ctx.completions.push((self.recv_cq, cqe));
    }

    /// The next response, written into `buf`.
    pub(crate) fn poll_response(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        let dst = self.av?.dst;
        let response = *self.resp.out.front()?;
        let (repr, read) = match response {
            Response::Ack { psn, syndrome, msn } => {
                let bth = BthRepr::new(Opcode::RcAcknowledge, self.dest_qpn, psn);
                let repr = RoceRepr {
                    aeth: Some(AethRepr { syndrome, msn }),
                    ..RoceRepr::new(bth)
                };
                (repr, None)
            }
            Response::AtomicAck { psn, orig, msn } => {
                let bth = BthRepr::new(Opcode::RcAtomicAcknowledge, self.dest_qpn, psn);
                let repr = RoceRepr {
                    aeth: Some(AethRepr::ack(msn)),
                    atomic_ack_eth: Some(AtomicAckEthRepr { orig_data: orig }),
                    ..RoceRepr::new(bth)
                };
                (repr, None)
            }
            Response::Read {
                psn,
                key,
                va,
                remaining,
                from_start,
                msn,
                ..
            } => {
                let mtu = self.mtu.bytes();
                let chunk = remaining.min(mtu);
                let last = remaining <= mtu;
                let opcode = match (from_start, last) {
                    (true, true) => Opcode::RcRdmaReadResponseOnly,
                    (true, false) => Opcode::RcRdmaReadResponseFirst,
                    (false, true) => Opcode::RcRdmaReadResponseLast,
                    (false, false) => Opcode::RcRdmaReadResponseMiddle,
                };
                let mut bth = BthRepr::new(opcode, self.dest_qpn, psn);
                bth.pad_count = RoceRepr::pad_for(chunk as usize);
                let aeth =
                    (opcode != Opcode::RcRdmaReadResponseMiddle).then_some(AethRepr::ack(msn));
                let repr = RoceRepr {
                    aeth,
                    payload_len: chunk as usize,
                    ..RoceRepr::new(bth)
                };
                (repr, Some((key, va, chunk)))
            }
        };
        let mrs = &*ctx.mrs;
        let transmit = self.emit(
            ctx.config,
            ctx.ip_id,
            &repr,
            dst,
            buf,
            |payload| match read {
                None => true,
                Some((_, _, 0)) => true,
                Some((key, va, chunk)) => mrs.get(&key).is_some_and(|entry| {
                    entry
                        .mr
                        .offset_of(va, chunk.into())
                        .is_some_and(|at| entry.mr.read_into(at, payload))
                }),
            },
        );
        let Some(transmit) = transmit else {
            // The region went away under a READ in progress: stop answering it.
            self.resp.out.pop_front();
            return None;
        };
        ctx.stats.tx_packets += 1;
        ctx.stats.tx_bytes += transmit.len as u64;
        tracing::trace!(qpn = %self.qpn, psn = %repr.bth.psn, opcode = %repr.bth.opcode, "tx response");
        match (response, self.resp.out.front_mut()) {
            (
                Response::Read { remaining, .. },
                Some(Response::Read {
                    psn,
                    va,
                    remaining: left,
                    from_start,
                    ..
                }),
            ) if remaining > self.mtu.bytes() => {
                let chunk = self.mtu.bytes();
                *psn = psn.wrapping_add(1);
                *va += u64::from(chunk);
                *left -= chunk;
                *from_start = false;
            }
            (Response::Ack { syndrome, .. }, _) => {
                if let Syndrome::Ack { .. } = syndrome {
                    ctx.stats.tx_acks += 1;
                }
                self.resp.out.pop_front();
            }
            (Response::AtomicAck { .. }, _) => {
                ctx.stats.tx_acks += 1;
                self.resp.out.pop_front();
            }
            _ => {
                self.resp.out.pop_front();
            }
        }
        Some(transmit)
    }
}

/// The offset in its region of `[va, va + len)` for a remote access with `rights`, if the R_Key
/// is valid, the region is in our PD, allows it, and holds the range (IBTA vol. 1 §10.6.3.2,
/// rxe `check_rkey`).
fn remote_region(
    mrs: &Mrs,
    pd: PdHandle,
    rkey: u32,
    va: u64,
    len: u64,
    rights: Access,
) -> Result<usize, Refusal> {
    let entry = mrs
        .get(&rkey)
        .filter(|e| e.rkey_valid && e.mr.pd() == pd)
        .ok_or(Refusal::Access)?;
    if !entry.mr.access().contains(rights) {
        return Err(Refusal::Access);
    }
    entry.mr.offset_of(va, len).ok_or(Refusal::Access)
}
