//! Work requests: a C WR as the engine takes it, posting in one step of the engine, and the
//! `ibv_qp_ex` `wr_*` API, which builds a batch of WRs and posts it at `wr_complete`.

use roce_core::{Nic, QpType, Qpn, RecvWr, Remote, SendOp, SendWr, Sge, UdDest};
use roce_device::Verb;

use super::pd::ud_dest;
use super::{EINVAL, device_err, engine_err, with};
use crate::abi::{IbvSendWr, IbvSge};
use crate::state;
use crate::state::Errno;

/// A send work request as the engine takes it.
pub(crate) fn send_wr(
    wr: &IbvSendWr,
    sgl: roce_core::Sgl,
    sq_sig_all: bool,
    ud: Option<UdDest>,
) -> Result<SendWr, Errno> {
    let rdma = Remote {
        addr: wr.wr_remote_addr,
        rkey: wr.wr_word1 as u32,
    };
    let atomic = Remote {
        addr: wr.wr_remote_addr,
        rkey: wr.wr_atomic_rkey,
    };
    let imm = u32::from_be(wr.imm_data);
    let op = match wr.opcode {
        0 => SendOp::RdmaWrite(rdma),
        1 => SendOp::RdmaWriteWithImm(rdma, imm),
        2 => SendOp::Send,
        3 => SendOp::SendWithImm(imm),
        4 => SendOp::RdmaRead(rdma),
        5 => SendOp::CompareSwap {
            remote: atomic,
            compare: wr.wr_word1,
            swap: wr.wr_swap,
        },
        6 => SendOp::FetchAdd {
            remote: atomic,
            add: wr.wr_word1,
        },
        // invalidate_rkey shares imm_data's place, in host order.
        7 => SendOp::LocalInv(wr.imm_data),
        8 => SendOp::BindMw(super::mw::mw_bind(
            wr.bind_mw_mw as usize,
            wr.bind_mw_rkey,
            &wr.bind_info,
        )?),
        9 => SendOp::SendWithInv(wr.imm_data),
        _ => return Err(EINVAL),
    };
    let mut w = SendWr::new(wr.wr_id, op, sgl);
    w.signaled = sq_sig_all || wr.send_flags & 2 != 0;
    w.solicited = wr.send_flags & 4 != 0;
    w.inline = wr.send_flags & 8 != 0;
    w.ud = ud;
    Ok(w)
}

/// `wr_start`: a new batch.
pub(crate) fn wr_start(qp: usize) {
    with(|o| {
        if let Some(q) = o.qps.get_mut(&qp) {
            q.pending.clear();
            q.pending_err = None;
        }
    });
}

/// `wr_send`, `wr_rdma_write`, ...: a new WR of the batch, with the `wr_id` and `wr_flags` the
/// application set in the `ibv_qp_ex`.
pub(crate) fn wr_op(qp: usize, wr_id: u64, flags: u32, op: SendOp) {
    with(|o| {
        if let Some(q) = o.qps.get_mut(&qp) {
            let mut w = SendWr::new(wr_id, op, Vec::new());
            w.signaled = q.init.get().sq_sig_all != 0 || flags & 2 != 0;
            w.solicited = flags & 4 != 0;
            w.inline = flags & 8 != 0;
            q.pending.push(w);
        }
    });
}

/// Applies `f` to the batch's last WR; an error if there is none.
fn wr_last(qp: usize, f: impl FnOnce(&mut SendWr) -> Result<(), Errno>) {
    with(|o| {
        if let Some(q) = o.qps.get_mut(&qp) {
            let r = q.pending.last_mut().ok_or(EINVAL).and_then(f);
            if let Err(e) = r {
                q.pending_err.get_or_insert(e);
            }
        }
    });
}

/// `wr_set_sge` / `wr_set_sge_list`.
pub(crate) fn wr_set_sgl(qp: usize, sgl: roce_core::Sgl) {
    wr_last(qp, |w| {
        w.sgl = sgl;
        Ok(())
    });
}

/// `wr_set_ud_addr`.
pub(crate) fn wr_set_ud_addr(qp: usize, ah: usize, remote_qpn: u32, remote_qkey: u32) {
    let ud = ud_dest(qp, ah, remote_qpn, remote_qkey);
    wr_last(qp, |w| {
        w.ud = Some(ud?);
        Ok(())
    });
}

/// `wr_set_inline_data`: the batch's last WR carries `data`.
pub(crate) fn wr_set_inline(qp: usize, data: roce_core::InlineData) {
    wr_last(qp, |w| {
        w.inline = true;
        w.sgl = roce_core::Sgl::default();
        w.inline_data = Some(data);
        Ok(())
    });
}

/// The most bytes an inline WR carries.
pub(crate) fn max_inline() -> usize {
    state::device()
        .ok()
        .flatten()
        .map_or(0, |d| d.model.nic.max_inline)
}

/// A step of the batch that cannot be done (`wr_set_inline_data` from unregistered memory):
/// `wr_complete` then fails with `e` and posts nothing.
pub(crate) fn wr_fail(qp: usize, e: Errno) {
    wr_last(qp, |_| Err(e));
}

/// `wr_complete`: posts the batch; an errno value (nothing is posted on a building error).
pub(crate) fn wr_complete(qp: usize) -> Result<(), Errno> {
    let (qpn, ctx, wrs, err) = with(|o| {
        o.qps.get_mut(&qp).map(|q| {
            (
                q.qpn,
                q.ctx,
                std::mem::take(&mut q.pending),
                q.pending_err.take(),
            )
        })
    })
    .ok_or(EINVAL)?;
    if let Some(e) = err {
        return Err(e);
    }
    post(ctx, true, |nic| {
        wrs.into_iter()
            .try_for_each(|wr| nic.post_send(qpn, wr).map_err(engine_err))
    })?
}

/// `wr_abort`: drops the batch.
pub(crate) fn wr_abort(qp: usize) {
    wr_start(qp);
}

/// What posting needs of a QP.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PostQp {
    /// Its address (the `ibv_qp *`).
    pub(crate) qp: usize,
    pub(crate) qpn: Qpn,
    pub(crate) qp_type: QpType,
    /// `sq_sig_all`: every send WR is signaled.
    pub(crate) sig_all: bool,
    /// Its context.
    pub(crate) ctx: usize,
}

/// The QP at `qp`, for a post.
pub(crate) fn qp_for_post(qp: usize) -> Result<PostQp, Errno> {
    with(|o| {
        o.qps.get(&qp).map(|q| PostQp {
            qp,
            qpn: q.qpn,
            qp_type: q.qp_type,
            sig_all: q.init.get().sq_sig_all != 0,
            ctx: q.ctx,
        })
    })
    .ok_or(EINVAL)
}

/// Runs `f`, which posts WRs, in one step of the engine of `ctx`. Send WRs (`sends`): what
/// they make is sent once (or the NIC's doorbell rung once), what an `ibv_post_send` of a list
/// costs whatever its length, and ACKs owed for what the program received go with their
/// packets ([`roce_device::Verb::PostSend`]). Receive WRs: nothing to send, no
/// doorbell ([`roce_device::Verb::PostRecv`]).
pub(crate) fn post<R>(ctx: usize, sends: bool, f: impl FnOnce(&mut Nic) -> R) -> Result<R, Errno> {
    let device = &state::engine(ctx)?.device;
    let verb = |nic: &mut Nic, _| f(nic);
    let result = if sends {
        device.verb(Verb::PostSend, verb)
    } else {
        device.verb(Verb::PostRecv, verb)
    };
    result.map_err(device_err)
}

impl PostQp {
    /// Posts one send WR (inside [`post()`]).
    pub(crate) fn send(&self, nic: &mut Nic, wr: SendWr) -> Result<(), Errno> {
        nic.post_send(self.qpn, wr).map_err(engine_err)
    }

    /// Posts one receive WR (inside [`post()`]).
    pub(crate) fn post_recv(&self, nic: &mut Nic, wr: RecvWr) -> Result<(), Errno> {
        nic.post_recv(self.qpn, wr).map_err(engine_err)
    }
}

/// A receive request as the engine takes it.
pub(crate) fn recv_wr(wr_id: u64, sgl: roce_core::Sgl) -> RecvWr {
    RecvWr { wr_id, sgl }
}

/// An SGE as the engine takes it.
pub(crate) fn sge(s: &IbvSge) -> Sge {
    Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }
}
