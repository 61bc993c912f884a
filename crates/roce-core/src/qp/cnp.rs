//! The QP's side of the DCQCN notification point: a CE-marked request is told to the policy
//! (`cc/np.rs`), and the CNP it makes due is written here and sent to the peer's QP.

use roce_wire::{RoceRepr, cnp};
use tracing::debug;

use super::{Ctx, Qp, QpType};
use crate::config::Congestion;
use crate::{Duration, Ecn, Transmit};

impl Qp {
    /// A request arrived with `ecn`: with DCQCN on and a CE mark, a CNP may be due; with an
    /// algorithm that reads the ACKs' ECN-Echo (DCTCP), the responder notes the mark.
    pub(crate) fn notify_ecn(&mut self, ctx: &Ctx<'_>, ecn: Ecn) {
        if ctx.config.congestion.echoes_ecn() {
            self.resp.echo.arrived(ecn == Ecn::Ce);
            return;
        }
        let Congestion::Dcqcn(dcqcn) = ctx.config.congestion else {
            return;
        };
        // The CNP names the sending QP, which a connected QP knows as its peer; a UD request's
        // sender is not tracked per flow.
        if ecn != Ecn::Ce || self.qp_type == QpType::Ud {
            return;
        }
        let gap = Duration::from_micros(dcqcn.min_time_between_cnps.into());
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
    /// (the sender of the marked packets), PSN 0, 16 reserved zero bytes (Annex A17.9.3,
    /// `roce_wire::cnp`), with DSCP `cnp_dscp`.
    pub(crate) fn poll_cnp(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        if !self.cc.np.due() {
            return None;
        }
        let Congestion::Dcqcn(dcqcn) = ctx.config.congestion else {
            return None;
        };
        let dst = self.av?.dst;
        self.cc.np.clear_due();
        let repr = RoceRepr::new(cnp::bth(self.dest_qpn));
        let mut transmit = self
            .emit(ctx.config, (ctx.ip_id, None), &repr, dst, buf, |_| true)
            .ok()?;
        transmit.dscp = dcqcn.cnp_dscp;
        transmit.ecn = Ecn::NotEct;
        self.cc.np.sent(ctx.now);
        ctx.stats.tx_cnps += 1;
        ctx.stats.tx_packets += 1;
        ctx.stats.tx_bytes += transmit.len as u64;
        debug!(qpn = %self.qpn, dest_qp = %self.dest_qpn, time = %ctx.now, "tx cnp");
        Some(transmit)
    }
}
