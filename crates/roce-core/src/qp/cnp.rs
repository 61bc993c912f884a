//! The QP's side of the DCQCN notification point: a CE-marked request is told to the policy
//! (`cc/np.rs`), and the CNP it makes due is written here and sent to the peer's QP, or for a
//! UD QP to the QP that sent the datagram (its address, and the source QPN of its DETH).

use roce_wire::{RocePacket, RoceRepr, cnp};
use tracing::debug;

use super::{Ctx, Qp, QpType};
use crate::config::Congestion;
use crate::{Duration, Ecn, Transmit};

impl Qp {
    /// The request `packet` arrived with `ecn`: with DCQCN on and a CE mark, a CNP may be due
    /// (to a UD datagram's sender, named by its DETH); with an algorithm that reads the ACKs'
    /// ECN-Echo (DCTCP), the responder notes the mark.
    pub(crate) fn notify_ecn(&mut self, ctx: &mut Ctx<'_>, ecn: Ecn, packet: &RocePacket<&[u8]>) {
        if ctx.config.congestion.echoes_ecn() {
            self.resp.echo.arrived(ecn == Ecn::Ce);
            return;
        }
        let Congestion::Dcqcn(dcqcn) = ctx.config.congestion else {
            return;
        };
        if ecn != Ecn::Ce {
            return;
        }
        let gap = Duration::from_micros(dcqcn.min_time_between_cnps.into());
        // The CNP names the sending QP: a connected QP's peer, or a UD datagram's sender.
        //= ibta:annex17/A17.9.3
        //# a CNP names the QP whose packets were marked
        if self.qp_type == QpType::Ud {
            let src_qp = packet.deth().map(|deth| deth.src_qp());
            let (Some(arrival), Some(src_qp)) = (ctx.arrival, src_qp) else {
                return;
            };
            let ud = self.cc.np.ud.get_or_insert_with(Default::default);
            if !ud.on_ce((arrival.src, src_qp), ctx.now, gap) {
                ctx.stats.rx_ce_ud_cnps_full += 1;
            }
            return;
        }
        self.cc.np.on_ce(ctx.now, gap);
    }

    /// A READ response arrived with `ecn`. Its data flowed from the peer, so with DCQCN on a CE
    /// mark makes this QP the notification point of that flow: a CNP to the peer's QP may be
    /// due, as for a marked request; the QP's one rate covers its READ responses as its
    /// requests (`qp/responder/respond.rs`). Other algorithms hear nothing of it
    /// (docs/congestion.md).
    pub(crate) fn notify_read_response_ecn(&mut self, ctx: &Ctx<'_>, ecn: Ecn) {
        if let Congestion::Dcqcn(dcqcn) = ctx.config.congestion
            && ecn == Ecn::Ce
        {
            let gap = Duration::from_micros(dcqcn.min_time_between_cnps.into());
            self.cc.np.on_ce(ctx.now, gap);
        }
    }

    /// The CNP due, if any, written into `buf`: opcode 0x81, BECN, DestQP = the peer's QP
    /// (the sender of the marked packets; for a UD QP, the sender of the marked datagram, at
    /// its address), PSN 0, 16 reserved zero bytes (Annex A17.9.3, `roce_wire::cnp`), with
    /// DSCP `cnp_dscp`.
    pub(crate) fn poll_cnp(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        if !self.cc.np.due() {
            return None;
        }
        let Congestion::Dcqcn(dcqcn) = ctx.config.congestion else {
            return None;
        };
        let sender = self.cc.np.ud.as_mut().and_then(|ud| ud.next());
        let (dst, dest_qpn) = match sender {
            Some(sender) => sender,
            None => {
                let dst = self.av?.dst;
                self.cc.np.clear_due();
                (dst, self.dest_qpn)
            }
        };
        let repr = RoceRepr::new(cnp::bth(dest_qpn));
        let mut transmit = self
            .emit(ctx.config, (ctx.ip_id, None), &repr, dst, buf, |_| true)
            .ok()?;
        transmit.dscp = dcqcn.cnp_dscp;
        transmit.ecn = Ecn::NotEct;
        self.cc.np.sent(ctx.now);
        if let (Some(sender), Some(ud)) = (sender, self.cc.np.ud.as_mut()) {
            ud.sent(sender, ctx.now);
        }
        ctx.stats.tx_cnps += 1;
        ctx.stats.tx_packets += 1;
        ctx.stats.tx_bytes += transmit.len as u64;
        debug!(qpn = %self.qpn, dest_qp = %dest_qpn, time = %ctx.now, "tx cnp");
        Some(transmit)
    }
}
