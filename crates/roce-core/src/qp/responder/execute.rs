//! Executing a new request: its opcode sequence and length are checked, then it lands — a SEND
//! in the receive WR at the head of the queue, a WRITE or an atomic in a registered region, a
//! READ queued as a train of responses (rxe_resp.c `execute`, `send_data_in`, `write_data_in`,
//! `read_reply`, `atomic_reply`). Everything is validated before a byte lands.

use roce_wire::RocePacket;
use roce_wire::opcode::{Operation, Position};

use super::{Message, Refusal, Resource, Response, readable, remote_region};
use crate::cq::{Cqe, WcOpcode};
use crate::mr::Access;
use crate::qp::{Ctx, Qp, scatter, sgl_len, writable};

impl Qp {
    /// Executes a new request. Returns how many PSNs it took.
    pub(super) fn execute(
        &mut self,
        ctx: &mut Ctx<'_>,
        packet: &RocePacket<&[u8]>,
    ) -> Result<u32, Refusal> {
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
    //= ibta:vol1/9.7.5.1.3
    //# a FIRST or MIDDLE is followed by a MIDDLE or LAST of the same operation
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
    //= rxe:rxe_resp.c/check_length
    //# FIRST and MIDDLE carry exactly the path MTU, LAST 1 to MTU, ONLY up to MTU
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
        //= rxe:rxe_resp.c/check_resource
        //# a SEND needs a receive WQE: the QP's own, or one taken from its SRQ
        if !self.has_recv_wqe(ctx) {
            return Err(Refusal::Rnr);
        }
        let Some(wr) = self.rq.front() else {
            return Err(Refusal::Rnr);
        };
        let payload = packet.payload();
        let refuse = |qp: &mut Self| {
            qp.resp.message = Some(Message::Send { written });
            Err(Refusal::Invalid)
        };
        if u64::from(written) + payload.len() as u64 > sgl_len(&wr.sgl) {
            return refuse(self);
        }
        // A SEND with invalidate naming a window unbinds it before its last bytes land, once
        // they are known to fit; one that cannot (a type 1 window, one unbound, of another PD)
        // fails the message: rxe's responder moves the QP to the error state there
        // (rxe_resp.c `do_complete`), here the requester learns it by an invalid-request NAK.
        // Only that packet checks its memory before it writes: every other lands in one walk.
        if let Some(rkey) = packet
            .ieth()
            .map(|ieth| ieth.rkey())
            .filter(|&rkey| crate::mw::window_of(ctx.mws, rkey).is_some())
        {
            if !writable(ctx.mrs, &wr.sgl, u64::from(written), payload.len()) {
                return refuse(self);
            }
            if let Err(why) = crate::mw::invalidate(ctx.mws, self.pd, rkey) {
                ctx.stats.rx_mw_access_refused += 1;
                tracing::trace!(qpn = %self.qpn, rkey, why, "remote invalidation refused");
                return refuse(self);
            }
        }
        if !scatter(ctx.mrs, &wr.sgl, u64::from(written), payload) {
            return refuse(self);
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
        cqe.solicited = packet.bth().solicited_event();
        cqe.imm_data = packet.immdt().map(|imm| imm.imm_data());
        if let Some(ieth) = packet.ieth() {
            let rkey = ieth.rkey();
            //= ibta:vol1/10.6.6.2
            //# SEND with Invalidate invalidates a region of the responder's PD
            if let Some(entry) = ctx.mrs.get_mut(&rkey).filter(|e| e.mr.pd() == self.pd) {
                entry.rkey_valid = false;
                cqe.invalidated_rkey = Some(rkey);
            } else if crate::mw::window_of(ctx.mws, rkey).is_some() {
                // Unbound above.
                cqe.invalidated_rkey = Some(rkey);
            }
        }
        ctx.completions.push((self.recv_cq, cqe));
        self.resp.msn = self.resp.msn.next();
        Ok(())
    }

    fn execute_write(
        &mut self,
        ctx: &mut Ctx<'_>,
        packet: &RocePacket<&[u8]>,
    ) -> Result<(), Refusal> {
        let layout = packet.layout();
        let with_imm = packet.immdt().is_some();
        if with_imm && !self.has_recv_wqe(ctx) {
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
                        ctx,
                        self.pd,
                        self.qpn,
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
        //= rxe:rxe_resp.c/check_rkey
        //# while more than an MTU remains a packet is a full MTU; the last carries exactly the rest
        // Checked before a byte lands, so a WRITE that lies about its length changes nothing.
        let remaining = total.saturating_sub(written);
        let fits = match layout.position {
            Position::First | Position::Middle => remaining > self.mtu.bytes(),
            Position::Last | Position::Only => payload.len() as u64 == u64::from(remaining),
        };
        if !fits {
            return Err(Refusal::Invalid);
        }
        if !payload.is_empty() {
            let (region, offset) = remote_region(
                ctx,
                self.pd,
                self.qpn,
                key,
                va,
                payload.len() as u64,
                Access::REMOTE_WRITE,
            )?;
            // In bounds: remote_region checked [offset, offset + len).
            ctx.mrs[&region].mr.write(offset, payload);
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
            cqe.solicited = packet.bth().solicited_event();
            ctx.completions.push((self.recv_cq, cqe));
        }
        self.resp.msn = self.resp.msn.next();
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
        let key = readable(ctx, self.pd, self.qpn, &reth)?;
        let len = reth.dma_len();
        let psn = packet.bth().psn();
        let npsn = len.div_ceil(self.mtu.bytes()).max(1);
        let last = psn.wrapping_add(npsn - 1);
        self.remember(Resource::Read { first: psn, last });
        //= ibta:vol1/C9-148
        //# the MSN counts a READ when it is accepted
        self.resp.msn = self.resp.msn.next();
        self.resp.out.push_back(Response::Read {
            psn,
            last,
            key,
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
        //= ibta:vol1/9.4.5
        //# an atomic's target is 8 bytes, 8-byte aligned
        if atomic.va() % 8 != 0 {
            return Err(Refusal::Invalid);
        }
        let (region, offset) = remote_region(
            ctx,
            self.pd,
            self.qpn,
            atomic.rkey(),
            atomic.va(),
            8,
            Access::REMOTE_ATOMIC,
        )?;
        let compare_swap = packet.layout().operation == Operation::CompareSwap;
        // Memory holds the value in host order, as on the x86 hosts rxe runs on.
        let orig = ctx.mrs[&region]
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
        self.resp.msn = self.resp.msn.next();
        self.resp.out.push_back(Response::AtomicAck {
            psn,
            orig,
            msn: self.resp.msn,
        });
        Ok(())
    }
}
