//! Memory windows (`ibv_alloc_mw`, `ibv_bind_mw`, `ibv_dealloc_mw`, and the `bind_mw` of a send
//! WR), as rxe's provider and kernel driver take them (rdma-core providers/rxe/rxe.c
//! `rxe_alloc_mw`, `rxe_bind_mw`, `rxe_dealloc_mw`; Linux rxe_mw.c). The engine holds the
//! windows (`roce_core::Nic::alloc_mw`); binds and invalidations are send WRs it carries out in
//! order, and a bind it refuses completes with `IBV_WC_MW_BIND_ERR`.

use std::ffi::c_int;

use roce_core::{Access, MwBind, MwType, SendOp, SendWr};

use super::post::{post, qp_for_post};
use super::{EINVAL, engine_err, handle, step, with};
use crate::abi::{IbvContext, IbvMw, IbvMwBind, IbvMwBindInfo, IbvPd};
use crate::state::Errno;
use roce_cabi::CBox;

#[derive(Debug)]
pub(super) struct Mw {
    c: CBox<IbvMw>,
    pub(super) pd: usize,
    ctx: usize,
}

/// `ops.alloc_mw`: `EINVAL` for a PD not ours or a type other than 1 and 2 (uverbs
/// `ib_uverbs_alloc_mw`).
pub(crate) fn alloc_mw(pd: usize, mw_type: c_int) -> Result<*mut IbvMw, Errno> {
    let ty = match mw_type {
        1 => MwType::Type1,
        2 => MwType::Type2,
        _ => return Err(EINVAL),
    };
    let (pd_handle, ctx) = with(|o| o.pds.get(&pd).map(|p| (p.handle, p.ctx))).ok_or(EINVAL)?;
    let rkey = step(ctx, |nic| nic.alloc_mw(pd_handle, ty))?.map_err(engine_err)?;
    let c = CBox::new(IbvMw {
        context: ctx as *mut IbvContext,
        pd: pd as *mut IbvPd,
        rkey,
        handle: handle(),
        mw_type,
    });
    let ptr = c.ptr();
    with(|o| o.mws.insert(ptr as usize, Mw { c, pd, ctx }));
    Ok(ptr)
}

/// `ops.dealloc_mw`: `EINVAL` for a window not ours. A bound window goes too (rxe).
pub(crate) fn dealloc_mw(mw: usize) -> Result<(), Errno> {
    let (rkey, ctx) = with(|o| o.mws.get(&mw).map(|m| (m.c.get().rkey, m.ctx))).ok_or(EINVAL)?;
    step(ctx, |nic| nic.dealloc_mw(rkey))?.map_err(engine_err)?;
    with(|o| o.mws.remove(&mw));
    Ok(())
}

/// The engine's bind for the window at `mw` taking the R_Key `rkey`, from a `bind_info`: the
/// window and a non-NULL region must be ours (`EINVAL`). The rights are passed on as given;
/// the engine refuses all but remote read, write and atomic with a bind error, as rxe refuses
/// what `RXE_ACCESS_SUPPORTED_MW` lacks (zero-based windows, which rxe takes for type 2, are
/// among them here).
pub(crate) fn mw_bind(mw: usize, rkey: u32, info: &IbvMwBindInfo) -> Result<MwBind, Errno> {
    with(|o| {
        let w = o.mws.get(&mw).ok_or(EINVAL)?;
        let mr_lkey = if info.mr.is_null() {
            0
        } else {
            o.mrs.get(&(info.mr as usize)).ok_or(EINVAL)?.mr.lkey()
        };
        let access = super::pd::access(info.mw_access_flags as c_int).unwrap_or(Access::MW_BIND);
        Ok(MwBind {
            mw_rkey: w.c.get().rkey,
            rkey,
            mr_lkey,
            addr: info.addr,
            length: info.length,
            access,
        })
    })
}

/// The R_Key the engine has for the window at `mw` now (after the binds it carried out).
fn mw_rkey_now(mw: usize) -> Option<u32> {
    with(|o| o.mws.get(&mw).map(|m| m.c.get().rkey))
}

/// `ops.bind_mw`, what `ibv_bind_mw` calls for a type 1 window once libibverbs checked the
/// window's type and the region's PD: as rxe's provider, `EINVAL` for a zero-based window;
/// otherwise a bind WR is posted with the next R_Key (the key byte plus one, rxe `next_rkey`)
/// and `mw->rkey` takes it at once ("user has to undo this if he gets an error wc"). An errno
/// value.
pub(crate) fn bind_mw(qp: usize, mw: usize, bind: &IbvMwBind) -> Result<(), Errno> {
    const ZERO_BASED: u32 = 1 << 5;
    if bind.bind_info.mw_access_flags & ZERO_BASED != 0 {
        return Err(EINVAL);
    }
    let target = qp_for_post(qp)?;
    let old = mw_rkey_now(mw).ok_or(EINVAL)?;
    let rkey = (old & 0xffff_ff00) | (old.wrapping_add(1) & 0xff);
    let info = mw_bind(mw, rkey, &bind.bind_info)?;
    let mut wr = SendWr::new(bind.wr_id, SendOp::BindMw(info), Vec::new());
    wr.signaled = target.sig_all || bind.send_flags & 2 != 0;
    post(target.ctx, true, |nic| target.send(nic, wr))??;
    with(|o| {
        if let Some(m) = o.mws.get(&mw) {
            m.c.update(|c| c.rkey = rkey);
        }
    });
    Ok(())
}
