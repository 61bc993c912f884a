//! Shared receive queues (`ibv_create_srq`, `ibv_post_srq_recv`, `ibv_modify_srq`,
//! `ibv_query_srq`, `ibv_destroy_srq`): the engine's, with rxe's checks (`rxe_srq.c`).

use std::ffi::{c_int, c_void};

use roce_core::{Nic, RecvWr, SrqHandle, SrqInit, SrqModify};

use super::{EINVAL, engine_err, handle, step, with};
use crate::abi::{IbvContext, IbvPd, IbvSrq, IbvSrqAttr};
use crate::state::Errno;
use roce_cabi::CBox;

#[derive(Debug)]
pub(super) struct Srq {
    c: CBox<IbvSrq>,
    pub(super) handle: SrqHandle,
    pub(super) pd: usize,
    pub(super) ctx: usize,
}

/// `IBV_SRQ_MAX_WR`.
const SRQ_MAX_WR: c_int = 1;
/// `IBV_SRQ_LIMIT`.
const SRQ_LIMIT: c_int = 2;

/// `ibv_create_srq`: the SRQ and the attributes it got (written back to the caller's
/// `srq_init_attr.attr`, as providers do).
pub(crate) fn create_srq(
    pd: usize,
    srq_context: *mut c_void,
    attr: IbvSrqAttr,
) -> Result<(*mut IbvSrq, IbvSrqAttr), Errno> {
    let (pd_handle, ctx) = with(|o| o.pds.get(&pd).map(|p| (p.handle, p.ctx))).ok_or(EINVAL)?;
    // rxe_srq_chk_init: at least one WR; the limit below the depth.
    if attr.max_wr == 0 || attr.srq_limit > attr.max_wr {
        return Err(EINVAL);
    }
    let init = SrqInit {
        max_wr: attr.max_wr as usize,
        max_sge: (attr.max_sge as usize).max(1),
        limit: attr.srq_limit as usize,
    };
    let srq = step(ctx, |nic| nic.create_srq(pd_handle, init))?.map_err(engine_err)?;
    let c = CBox::new(IbvSrq {
        context: ctx as *mut IbvContext,
        srq_context,
        pd: pd as *mut IbvPd,
        handle: handle(),
        mutex: libc::PTHREAD_MUTEX_INITIALIZER,
        cond: libc::PTHREAD_COND_INITIALIZER,
        events_completed: 0,
    });
    let ptr = c.ptr();
    let got = IbvSrqAttr {
        max_wr: attr.max_wr,
        max_sge: init.max_sge as u32,
        srq_limit: attr.srq_limit,
    };
    let entry = Srq {
        c,
        handle: srq,
        pd,
        ctx,
    };
    with(|o| o.srqs.insert(ptr as usize, entry));
    Ok((ptr, got))
}

/// The engine's handle of an SRQ and its context.
pub(super) fn engine_srq(srq: usize) -> Option<(SrqHandle, usize)> {
    with(|o| o.srqs.get(&srq).map(|s| (s.handle, s.ctx)))
}

/// `ibv_modify_srq`: `IBV_SRQ_LIMIT` arms the limit event, `IBV_SRQ_MAX_WR` resizes; `EINVAL`
/// for other bits or values the engine refuses.
pub(crate) fn modify_srq(srq: usize, attr: IbvSrqAttr, mask: c_int) -> Result<(), Errno> {
    if mask & !(SRQ_MAX_WR | SRQ_LIMIT) != 0 {
        return Err(EINVAL);
    }
    let (handle, ctx) = engine_srq(srq).ok_or(EINVAL)?;
    let change = SrqModify {
        max_wr: (mask & SRQ_MAX_WR != 0).then_some(attr.max_wr as usize),
        limit: (mask & SRQ_LIMIT != 0).then_some(attr.srq_limit as usize),
    };
    step(ctx, |nic| nic.modify_srq(handle, &change))?.map_err(engine_err)
}

/// `ibv_query_srq`.
pub(crate) fn query_srq(srq: usize) -> Result<IbvSrqAttr, Errno> {
    let (handle, ctx) = engine_srq(srq).ok_or(EINVAL)?;
    let attr = step(ctx, |nic| nic.srq_attr(handle))?.map_err(engine_err)?;
    let clamp = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    Ok(IbvSrqAttr {
        max_wr: clamp(attr.max_wr),
        max_sge: clamp(attr.max_sge),
        srq_limit: clamp(attr.limit),
    })
}

/// `ibv_destroy_srq`: `EBUSY` while a QP uses it.
pub(crate) fn destroy_srq(srq: usize) -> Result<(), Errno> {
    let (handle, ctx) = engine_srq(srq).ok_or(EINVAL)?;
    if with(|o| o.qps.values().any(|q| q.srq == Some(srq))) {
        return Err(Errno(libc::EBUSY));
    }
    step(ctx, |nic| nic.destroy_srq(handle))?.map_err(engine_err)?;
    with(|o| o.srqs.remove(&srq));
    Ok(())
}

/// What posting to an SRQ needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PostSrq {
    handle: SrqHandle,
    /// Its context.
    pub(crate) ctx: usize,
}

/// The SRQ at `srq`, for a post.
pub(crate) fn srq_for_post(srq: usize) -> Result<PostSrq, Errno> {
    let (handle, ctx) = engine_srq(srq).ok_or(EINVAL)?;
    Ok(PostSrq { handle, ctx })
}

impl PostSrq {
    /// Posts one receive WR (inside [`super::post()`]).
    pub(crate) fn post_recv(&self, nic: &mut Nic, wr: RecvWr) -> Result<(), Errno> {
        nic.post_srq_recv(self.handle, wr).map_err(engine_err)
    }
}

impl Srq {
    /// `ibv_ack_async_event` of one of its events.
    pub(super) fn ack_event(&self) {
        self.c
            .update(|c| c.events_completed = c.events_completed.wrapping_add(1));
    }
}
