//! The DCQCN notification point (the paper's "NP"): a CE-marked request makes the receiving
//! QP send a CNP to the QP that sent it, at most one per `min_time_between_cnps`.

use roce_wire::{RoceRepr, cnp};
use tracing::debug;

use crate::config::Congestion;
use crate::qp::{Ctx, Qp, QpType};
use crate::{Duration, Ecn, Instant, Transmit};

/// A QP's notification point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Notifier {
    /// When the last CNP was sent.
    last: Option<Instant>,
    /// A CNP is to be sent.
    due: bool,
    /// CNPs sent.
    pub(crate) cnps_sent: u64,
}

impl Notifier {
    /// Whether a CNP is to be sent.
    pub(crate) fn due(&self) -> bool {
        self.due
    }

    /// A CE-marked request arrived at `now`: a CNP is due unless one was sent less than
    /// `min_gap` ago (mlx5 `min_time_between_cnps`; such CE marks send nothing, the firmware's
    /// rate limit, where htsim's NP sends one when the interval ends instead).
    pub(crate) fn on_ce(&mut self, now: Instant, min_gap: Duration) {
        if self.due || self.last.is_some_and(|last| now < last + min_gap) {
            return;
        }
        self.due = true;
    }
}

impl Qp {
    /// A request arrived with `ecn`: with DCQCN on and a CE mark, a CNP may be due.
    pub(crate) fn notify_ecn(&mut self, ctx: &Ctx<'_>, ecn: Ecn) {
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

    /// The CNP due, if any, written into `buf`: opcode 0x81, BECN, DestQP = the peer's QP
    /// (the sender of the marked packets), PSN 0, 16 reserved zero bytes (Annex A17.9.3,
    /// `roce_wire::cnp`), with DSCP `cnp_dscp`.
    pub(crate) fn poll_cnp(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        if !self.cc.np.due {
            return None;
        }
        let Congestion::Dcqcn(dcqcn) = ctx.config.congestion else {
            return None;
        };
        let dst = self.av?.dst;
        self.cc.np.due = false;
        let repr = RoceRepr::new(cnp::bth(self.dest_qpn));
        let mut transmit = self
            .emit(ctx.config, ctx.ip_id, &repr, dst, buf, |_| true)
            .ok()?;
        transmit.dscp = dcqcn.cnp_dscp;
        transmit.ecn = Ecn::NotEct;
        self.cc.np.last = Some(ctx.now);
        self.cc.np.cnps_sent += 1;
        ctx.stats.tx_cnps += 1;
        ctx.stats.tx_packets += 1;
        ctx.stats.tx_bytes += transmit.len as u64;
        debug!(qpn = %self.qpn, dest_qp = %self.dest_qpn, time = %ctx.now, "tx cnp");
        Some(transmit)
    }
}
