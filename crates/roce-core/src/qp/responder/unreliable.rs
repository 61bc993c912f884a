//! The unreliable services: UC executes in order and drops what a gap cuts short, UD delivers
//! one packet per message into the next receive WR (IBTA vol. 1 §9.8.3, §9.8.4).

use roce_wire::RocePacket;
use roce_wire::opcode::Position;

use crate::cq::{Cqe, WcOpcode, WcStatus};
use crate::qp::{Ctx, Qp, scatter, writable};

impl Qp {
    /// UC: no ACKs, no retransmission. A gap in PSNs drops the message in progress; the next
    /// FIRST or ONLY starts afresh (IBTA vol. 1 §9.8.3).
    //= ibta:vol1/9.8.3
    //# UC: a gap in PSNs drops the message in progress; the next FIRST or ONLY starts afresh
    pub(super) fn handle_uc_request(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) {
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
    /// lays it out: the IPv6 header, or for IPv4 the IPv4 header in its last 20 bytes, as rxe
    /// writes it (`ibv_init_ah_from_wc` reads the sender's address there).
    pub(super) fn handle_ud_request(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) {
        if !self.has_recv_wqe(ctx) {
            ctx.stats.rx_no_recv_wr += 1;
            return;
        }
        let Some(wr) = self.rq.pop_front() else {
            ctx.stats.rx_no_recv_wr += 1;
            return;
        };
        let payload = packet.payload();
        let grh = ctx
            .arrival
            .as_ref()
            .map_or([0u8; super::grh::GRH_LEN], super::grh::Arrival::grh);
        let mut cqe = Cqe::success(wr.wr_id, WcOpcode::Recv, self.qpn);
        let total = grh.len() + payload.len();
        // The whole is checked before either part lands (a receive too short fails here too).
        if !writable(ctx.mrs, &wr.sgl, 0, total)
            || !scatter(ctx.mrs, &wr.sgl, 0, &grh)
            || !scatter(ctx.mrs, &wr.sgl, grh.len() as u64, payload)
        {
            cqe.status = WcStatus::LocLenErr;
        }
        cqe.byte_len = total as u32;
        cqe.imm_data = packet.immdt().map(|imm| imm.imm_data());
        cqe.src_qp = packet.deth().map(|deth| deth.src_qp());
        cqe.solicited = packet.bth().solicited_event();
        //= ibta:annex17/A17.4.5.1
        //# a UD completion says whether the received frame was IPv4 or IPv6
        cqe.network_hdr = ctx.arrival.as_ref().map(|a| {
            if a.src.is_ipv4() {
                crate::cq::NetworkHdr::Ipv4
            } else {
                crate::cq::NetworkHdr::Ipv6
            }
        });
        ctx.completions.push((self.recv_cq, cqe));
    }
}
