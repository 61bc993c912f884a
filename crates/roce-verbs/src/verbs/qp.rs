//! Queue pairs: creation with the capabilities they get, their attributes (`ibv_modify_qp`
//! with the errno values rxe returns, `ibv_query_qp`), destruction.

use std::ffi::{c_int, c_void};

use roce_core::{AddressVector, Mtu, Psn, QpAttr, QpInit, QpState, QpType, Qpn, SendWr};

use super::cq::engine_cq;
use super::pd::{access, destination};
use super::srq::engine_srq;
use super::{EINVAL, engine_err, handle, step, with};
use crate::abi::{IbvContext, IbvPd, IbvQp, IbvQpAttr, IbvQpCap, IbvQpEx, IbvQpInitAttr};
use crate::device::DeviceModel;
use crate::state::{self, Errno};
use roce_cabi::CBox;

/// Most work requests a queue takes (rxe `RXE_MAX_QP_WR`), as `ibv_query_device` says.
pub(crate) const MAX_WR: u32 = 0x4000;

#[derive(Debug)]
pub(super) struct Qp {
    pub(super) c: CBox<IbvQpEx>,
    pub(super) qpn: Qpn,
    pub(super) qp_type: QpType,
    /// The creation attributes (pointers of the program's: kept, never followed).
    pub(super) init: CBox<IbvQpInitAttr>,
    /// Every attribute given to modify_qp so far, for query_qp.
    pub(super) attr: IbvQpAttr,
    pub(super) send_cq: usize,
    pub(super) recv_cq: usize,
    /// The SRQ its receives come from, if any.
    pub(super) srq: Option<usize>,
    pub(super) pd: usize,
    pub(super) ctx: usize,
    /// WRs built with the `ibv_wr_*` API since `wr_start`, and the first error while building.
    pub(super) pending: Vec<SendWr>,
    pub(super) pending_err: Option<Errno>,
}

/// The `ibv_qp_ex` `wr_*` functions a QP is given.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub(crate) struct WrFns {
    pub(crate) atomic_cmp_swp: *const c_void,
    pub(crate) atomic_fetch_add: *const c_void,
    pub(crate) rdma_read: *const c_void,
    pub(crate) rdma_write: *const c_void,
    pub(crate) rdma_write_imm: *const c_void,
    pub(crate) send: *const c_void,
    pub(crate) send_imm: *const c_void,
    pub(crate) send_inv: *const c_void,
    pub(crate) bind_mw: *const c_void,
    pub(crate) local_inv: *const c_void,
    pub(crate) set_ud_addr: *const c_void,
    pub(crate) set_inline_data: *const c_void,
    pub(crate) set_sge: *const c_void,
    pub(crate) set_sge_list: *const c_void,
    pub(crate) start: *const c_void,
    pub(crate) complete: *const c_void,
    pub(crate) abort: *const c_void,
}

/// The capabilities a QP gets for what it asked: `EINVAL` past the device's limits.
fn cap(asked: IbvQpCap, model: &DeviceModel) -> Result<IbvQpCap, Errno> {
    let max_sge = model.nic.max_sge as u32;
    let max_inline = model.nic.max_inline as u32;
    if asked.max_send_wr > MAX_WR
        || asked.max_recv_wr > MAX_WR
        || asked.max_send_sge > max_sge
        || asked.max_recv_sge > max_sge
        || asked.max_inline_data > max_inline
    {
        return Err(EINVAL);
    }
    Ok(IbvQpCap {
        max_send_wr: asked.max_send_wr.max(1),
        max_recv_wr: asked.max_recv_wr.max(1),
        max_send_sge: asked.max_send_sge.max(1),
        max_recv_sge: asked.max_recv_sge.max(1),
        // What the engine copies at post time for any QP.
        max_inline_data: max_inline,
    })
}

/// `ibv_create_qp`: the QP and the capabilities it got (written back to the caller's
/// `init_attr.cap`, as providers do).
pub(crate) fn create_qp(
    pd: usize,
    init: IbvQpInitAttr,
    fns: WrFns,
) -> Result<(*mut IbvQp, IbvQpCap), Errno> {
    let qp_type = match init.qp_type {
        2 => QpType::Rc,
        3 => QpType::Uc,
        4 => QpType::Ud,
        _ => return Err(Errno(libc::EOPNOTSUPP)),
    };
    let srq = (!init.srq.is_null()).then_some(init.srq as usize);
    let srq_handle = match srq {
        Some(srq) => Some(engine_srq(srq).ok_or(EINVAL)?.0),
        None => None,
    };
    let (send_cq, recv_cq) = (init.send_cq as usize, init.recv_cq as usize);
    let (pd_handle, ctx) = with(|o| {
        let p = o.pds.get(&pd)?;
        Some((p.handle, p.ctx))
    })
    .ok_or(EINVAL)?;
    let (send, _) = engine_cq(send_cq).ok_or(EINVAL)?;
    let (recv, _) = engine_cq(recv_cq).ok_or(EINVAL)?;
    let model = &state::device()?.ok_or(EINVAL)?.model;
    let cap = cap(init.cap, model)?;
    let qp_init = QpInit {
        pd: pd_handle,
        qp_type,
        send_cq: send,
        recv_cq: recv,
        max_send_wr: cap.max_send_wr as usize,
        max_recv_wr: cap.max_recv_wr as usize,
    };
    let qpn = step(ctx, |nic| match srq_handle {
        Some(srq) => nic.create_qp_with_srq(&qp_init, srq),
        None => nic.create_qp(&qp_init),
    })?
    .map_err(engine_err)?;
    let c = CBox::new(IbvQpEx {
        qp: IbvQp {
            context: ctx as *mut IbvContext,
            qp_context: init.qp_context,
            pd: pd as *mut IbvPd,
            send_cq: init.send_cq.cast(),
            recv_cq: init.recv_cq.cast(),
            srq: init.srq,
            handle: handle(),
            qp_num: qpn.value(),
            state: 0,
            qp_type: init.qp_type,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            events_completed: 0,
        },
        comp_mask: 0,
        wr_id: 0,
        wr_flags: 0,
        wr_atomic_cmp_swp: fns.atomic_cmp_swp,
        wr_atomic_fetch_add: fns.atomic_fetch_add,
        wr_bind_mw: fns.bind_mw,
        wr_local_inv: fns.local_inv,
        wr_rdma_read: fns.rdma_read,
        wr_rdma_write: fns.rdma_write,
        wr_rdma_write_imm: fns.rdma_write_imm,
        wr_send: fns.send,
        wr_send_imm: fns.send_imm,
        wr_send_inv: fns.send_inv,
        wr_send_tso: std::ptr::null(),
        wr_set_ud_addr: fns.set_ud_addr,
        wr_set_xrc_srqn: std::ptr::null(),
        wr_set_inline_data: fns.set_inline_data,
        wr_set_inline_data_list: std::ptr::null(),
        wr_set_sge: fns.set_sge,
        wr_set_sge_list: fns.set_sge_list,
        wr_start: fns.start,
        wr_complete: fns.complete,
        wr_abort: fns.abort,
        wr_atomic_write: std::ptr::null(),
    });
    let ptr = c.ptr().cast::<IbvQp>();
    let mut init = init;
    init.cap = cap;
    with(|o| {
        o.qps.insert(
            c.addr(),
            Qp {
                c,
                qpn,
                qp_type,
                init: CBox::new(init),
                attr: IbvQpAttr {
                    cap,
                    ..IbvQpAttr::default()
                },
                send_cq,
                recv_cq,
                srq,
                pd,
                ctx,
                pending: Vec::new(),
                pending_err: None,
            },
        )
    });
    Ok((ptr, cap))
}

/// `ibv_destroy_qp`.
pub(crate) fn destroy_qp(qp: usize) -> Result<(), Errno> {
    let (qpn, ctx) = with(|o| o.qps.get(&qp).map(|q| (q.qpn, q.ctx))).ok_or(EINVAL)?;
    step(ctx, |nic| nic.destroy_qp(qpn))?.map_err(engine_err)?;
    with(|o| o.qps.remove(&qp));
    Ok(())
}

pub(crate) fn qp_state(v: c_int) -> Result<QpState, Errno> {
    Ok(match v {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        4 => QpState::Sqd,
        5 => QpState::Sqe,
        6 => QpState::Err,
        _ => return Err(EINVAL),
    })
}

fn state_value(s: QpState) -> c_int {
    match s {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        QpState::Rts => 3,
        QpState::Sqd => 4,
        QpState::Sqe => 5,
        QpState::Err => 6,
    }
}

pub(super) fn mtu(v: c_int) -> Result<Mtu, Errno> {
    u32::try_from(v)
        .ok()
        .filter(|v| (1..=5).contains(v))
        .and_then(|v| Mtu::from_bytes(128 << v))
        .ok_or(EINVAL)
}

/// The engine's attributes for an `ibv_qp_attr` and its mask (`enum ibv_qp_attr_mask`).
pub(super) fn qp_attr(a: &IbvQpAttr, mask: c_int, model: &DeviceModel) -> Result<QpAttr, Errno> {
    let has = |bit: u32| mask & (1 << bit) != 0;
    let mut q = QpAttr::default();
    if has(0) {
        q.qp_state = Some(qp_state(a.qp_state)?);
    }
    if has(3) {
        q.access_flags = Some(access(a.qp_access_flags as c_int)?);
    }
    if has(4) {
        q.pkey_index = Some(a.pkey_index);
    }
    if has(5) {
        q.port_num = Some(a.port_num);
    }
    if has(6) {
        q.qkey = Some(a.qkey);
    }
    if has(7) {
        let ah = &a.ah_attr;
        let (src, dst) = destination(ah, model)?;
        let mut av = AddressVector::new(src, dst);
        av.dscp = ah.grh.traffic_class >> 2;
        av.hop_limit = ah.grh.hop_limit;
        q.av = Some(av);
    }
    if has(8) {
        q.path_mtu = Some(mtu(a.path_mtu)?);
    }
    if has(9) {
        q.timeout = Some(a.timeout);
    }
    if has(10) {
        q.retry_cnt = Some(a.retry_cnt);
    }
    if has(11) {
        q.rnr_retry = Some(a.rnr_retry);
    }
    if has(12) {
        q.rq_psn = Some(Psn::new(a.rq_psn & 0x00ff_ffff));
    }
    if has(13) {
        q.max_rd_atomic = Some(a.max_rd_atomic);
    }
    if has(15) {
        q.min_rnr_timer = Some(a.min_rnr_timer);
    }
    if has(16) {
        q.sq_psn = Some(Psn::new(a.sq_psn & 0x00ff_ffff));
    }
    if has(17) {
        q.max_dest_rd_atomic = Some(a.max_dest_rd_atomic);
    }
    if has(20) {
        q.dest_qpn = Some(Qpn::new(a.dest_qp_num & 0x00ff_ffff));
    }
    // Alternate paths, path migration, SQD notification, CAP resizing, rate limits: not here.
    if mask & ((1 << 14) | (1 << 18) | (1 << 19) | (1 << 2) | (1 << 25)) != 0 {
        return Err(EINVAL);
    }
    Ok(q)
}

/// The `ibv_qp_attr` and mask (`enum ibv_qp_attr_mask`) of the engine's attributes: the
/// inverse of [`qp_attr`], for `rdma_init_qp_attr`. The address vector's source is named by
/// its GID index on this device (0 for the link-local address, else 1).
pub(crate) fn c_qp_attr(q: &QpAttr, model: &DeviceModel) -> (IbvQpAttr, c_int) {
    let mut a = IbvQpAttr::default();
    let mut mask = 0;
    let mut set = |bit: u32| mask |= 1 << bit;
    if let Some(s) = q.qp_state {
        a.qp_state = state_value(s);
        set(0);
    }
    if let Some(r) = q.access_flags {
        a.qp_access_flags = super::pd::access_flags(r) as u32;
        set(3);
    }
    if let Some(i) = q.pkey_index {
        a.pkey_index = i;
        set(4);
    }
    if let Some(p) = q.port_num {
        a.port_num = p;
        set(5);
    }
    if let Some(k) = q.qkey {
        a.qkey = k;
        set(6);
    }
    if let Some(av) = &q.av {
        let ah = &mut a.ah_attr;
        ah.is_global = 1;
        ah.port_num = crate::device::PORT;
        ah.grh.dgid = crate::abi::IbvGid::from_ip(av.dst);
        ah.grh.sgid_index = if model.source(0) == Some(av.src) {
            0
        } else {
            crate::device::GID_INDEX_IP as u8
        };
        ah.grh.hop_limit = av.hop_limit;
        ah.grh.traffic_class = av.dscp << 2;
        set(7);
    }
    if let Some(m) = q.path_mtu {
        a.path_mtu = c_int::from(m.enum_value());
        set(8);
    }
    for (bit, field, value) in [
        (9, &mut a.timeout, q.timeout),
        (10, &mut a.retry_cnt, q.retry_cnt),
        (11, &mut a.rnr_retry, q.rnr_retry),
        (13, &mut a.max_rd_atomic, q.max_rd_atomic),
        (15, &mut a.min_rnr_timer, q.min_rnr_timer),
        (17, &mut a.max_dest_rd_atomic, q.max_dest_rd_atomic),
    ] {
        if let Some(v) = value {
            *field = v;
            set(bit);
        }
    }
    if let Some(p) = q.rq_psn {
        a.rq_psn = p.value();
        set(12);
    }
    if let Some(p) = q.sq_psn {
        a.sq_psn = p.value();
        set(16);
    }
    if let Some(n) = q.dest_qpn {
        a.dest_qp_num = n.value();
        set(20);
    }
    (a, mask)
}

/// `ibv_modify_qp`: an errno value (`EINVAL` for what the engine refuses, as rxe).
pub(crate) fn modify_qp(qp: usize, a: &IbvQpAttr, mask: c_int) -> Result<(), Errno> {
    let (qpn, ctx) = with(|o| o.qps.get(&qp).map(|q| (q.qpn, q.ctx))).ok_or(EINVAL)?;
    let model = &state::device()?.ok_or(EINVAL)?.model;
    let attr = qp_attr(a, mask, model)?;
    step(ctx, |nic| nic.modify_qp(qpn, &attr))?.map_err(engine_err)?;
    with(|o| {
        if let Some(q) = o.qps.get_mut(&qp) {
            merge(&mut q.attr, a, mask);
            if mask & 1 != 0 {
                q.c.update(|c| c.qp.state = a.qp_state);
            }
        }
    });
    Ok(())
}

/// Copies the masked fields of `a` into `into`.
fn merge(into: &mut IbvQpAttr, a: &IbvQpAttr, mask: c_int) {
    let has = |bit: u32| mask & (1 << bit) != 0;
    if has(0) {
        into.qp_state = a.qp_state;
    }
    if has(3) {
        into.qp_access_flags = a.qp_access_flags;
    }
    if has(4) {
        into.pkey_index = a.pkey_index;
    }
    if has(5) {
        into.port_num = a.port_num;
    }
    if has(6) {
        into.qkey = a.qkey;
    }
    if has(7) {
        into.ah_attr = a.ah_attr;
    }
    if has(8) {
        into.path_mtu = a.path_mtu;
    }
    if has(9) {
        into.timeout = a.timeout;
    }
    if has(10) {
        into.retry_cnt = a.retry_cnt;
    }
    if has(11) {
        into.rnr_retry = a.rnr_retry;
    }
    if has(12) {
        into.rq_psn = a.rq_psn;
    }
    if has(13) {
        into.max_rd_atomic = a.max_rd_atomic;
    }
    if has(15) {
        into.min_rnr_timer = a.min_rnr_timer;
    }
    if has(16) {
        into.sq_psn = a.sq_psn;
    }
    if has(17) {
        into.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if has(20) {
        into.dest_qp_num = a.dest_qp_num;
    }
}

/// `ibv_query_qp`: every attribute (whatever the mask: libibverbs providers fill them all),
/// the state as the engine has it now, and the creation attributes.
pub(crate) fn query_qp(qp: usize) -> Result<(IbvQpAttr, IbvQpInitAttr), Errno> {
    let (qpn, ctx, mut attr, init) =
        with(|o| o.qps.get(&qp).map(|q| (q.qpn, q.ctx, q.attr, q.init.get()))).ok_or(EINVAL)?;
    let s = step(ctx, |nic| nic.qp_state(qpn))?.map_err(engine_err)?;
    attr.qp_state = state_value(s);
    attr.cur_qp_state = attr.qp_state;
    with(|o| {
        if let Some(q) = o.qps.get(&qp) {
            q.c.update(|c| c.qp.state = attr.qp_state);
        }
    });
    Ok((attr, init))
}

/// The engine's number of the QP at `qp`: `EINVAL` if it is not one of ours.
pub(crate) fn qpn_of(qp: usize) -> Result<Qpn, Errno> {
    with(|o| o.qps.get(&qp).map(|q| q.qpn)).ok_or(EINVAL)
}

/// `ibv_qp_to_qp_ex`: every QP of ours is an `ibv_qp_ex` (NULL for others).
pub(crate) fn is_qp(qp: usize) -> bool {
    with(|o| o.qps.contains_key(&qp))
}
