//! Local operations of the send queue: memory window binds and local invalidations. They send
//! nothing and take no PSN; the requester stops at one until every WR before it has completed,
//! then it is carried out and completes at once (rxe_req.c `rxe_do_local_ops`, which runs them
//! when the requester reaches them and completes them without an ACK). Waiting for the earlier
//! WRs to complete keeps completions in order, and the bind happens before any later WR (a SEND
//! that hands the new R_Key to the peer) leaves.
//!
//! A failure completes the WR in error (`IBV_WC_MW_BIND_ERR` for a bind,
//! `IBV_WC_LOC_QP_OP_ERR` for an invalidation, as rxe) and moves the QP to the error state,
//! which flushes the rest.

use super::{Ctx, Qp};
use crate::cq::{Cqe, WcStatus};
use crate::mw;
use crate::wr::SendOp;

impl Qp {
    /// Carries out the local operations at the head of the send queue. Inlined, and the work
    /// apart: every request sent and every WR retired asks, and almost never finds one (the
    /// call alone, its registers saved and restored, was 70 instructions of a 64-byte WRITE's
    /// 3 500 on `roce perf`'s client).
    #[inline]
    pub(crate) fn run_local_ops(&mut self, ctx: &mut Ctx<'_>) {
        if self.sq.front().is_some_and(|w| w.wr.op.is_local()) {
            self.run_local_ops_at_head(ctx);
        }
    }

    #[inline(never)]
    fn run_local_ops_at_head(&mut self, ctx: &mut Ctx<'_>) {
        while self.can_send() && self.sq.front().is_some_and(|w| w.wr.op.is_local()) {
            // The cursor stopped at this WQE: what follows moves up by one.
            let wqe = self
                .sq
                .retire_front()
                .expect("checked: a WQE is at the head");
            let result = match &wqe.wr.op {
                SendOp::BindMw(bind) => mw::bind(ctx.mws, ctx.mrs, self.pd, self.qpn, bind)
                    .map_err(|why| (WcStatus::MwBindErr, why)),
                SendOp::LocalInv(rkey) => {
                    local_invalidate(ctx, self.pd, *rkey).map_err(|why| (WcStatus::LocQpOpErr, why))
                }
                _ => unreachable!("is_local() was checked"),
            };
            match result {
                Ok(()) => {
                    tracing::debug!(qpn = %self.qpn, op = ?wqe.wr.op, "local operation done");
                    if wqe.wr.signaled {
                        let cqe = Cqe::success(wqe.wr.wr_id, wqe.wc_opcode(), self.qpn);
                        ctx.completions.push((self.send_cq, cqe));
                    }
                }
                Err((status, why)) => {
                    tracing::debug!(qpn = %self.qpn, op = ?wqe.wr.op, why, "local operation failed");
                    let cqe = Cqe::new(status, wqe.wr.wr_id, wqe.wc_opcode(), self.qpn);
                    ctx.completions.push((self.send_cq, cqe));
                    self.fail(ctx);
                    return;
                }
            }
        }
    }
}

/// `IBV_WR_LOCAL_INV`: a type 2 window's R_Key, or a region's of the QP's PD (whose R_Key then
/// stops working, as a SEND with invalidate does to it).
fn local_invalidate(
    ctx: &mut Ctx<'_>,
    pd: crate::mr::PdHandle,
    rkey: u32,
) -> Result<(), &'static str> {
    if mw::window_of(ctx.mws, rkey).is_some() {
        return mw::invalidate(ctx.mws, pd, rkey);
    }
    let entry = ctx
        .mrs
        .get_mut(&rkey)
        .filter(|e| e.mr.pd() == pd)
        .ok_or("no window or region of the QP's PD with that key")?;
    entry.rkey_valid = false;
    Ok(())
}
