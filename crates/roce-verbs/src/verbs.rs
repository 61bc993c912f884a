//! The verbs objects of the program and their translation to the engine (safe code: C
//! structures arrive here as Rust copies; addresses are integers).
//!
//! Every object the program gets (`ibv_pd`, `ibv_mr`, `ibv_cq`, `ibv_qp`) is a [`CBox`] kept in
//! [`Objects`] under its address, next to the engine's handle for it, so that an address this
//! library did not hand out is refused (`EINVAL`) rather than followed. The lock on the table
//! is never held while waiting for the engine.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::io::{PipeReader, PipeWriter, Read as _, Write as _};
use std::net::{IpAddr, Ipv6Addr};
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use roce_core::{
    Access, AddressVector, CqHandle, Cqe, MemoryRegion, Mtu, PdHandle, Psn, QpAttr, QpInit,
    QpState, QpType, Qpn, RecvWr, Remote, SendOp, SendWr, Sge, UdDest, VerbsError, WcOpcode,
    WcStatus,
};

use crate::abi::{
    IbvAh, IbvAhAttr, IbvCompChannel, IbvContext, IbvCq, IbvCqEx, IbvMr, IbvPd, IbvQp, IbvQpAttr,
    IbvQpCap, IbvQpEx, IbvQpInitAttr, IbvSendWr, IbvSge, IbvWc,
};
use crate::cbox::CBox;
use crate::device::{DeviceModel, GID_INDEX_IPV4};
use crate::memory::CallerMemory;
use crate::state::{self, Errno};

const EINVAL: Errno = Errno(libc::EINVAL);

/// Most work requests a queue takes (rxe `RXE_MAX_QP_WR`), as `ibv_query_device` says.
pub(crate) const MAX_WR: u32 = 0x4000;

#[derive(Debug)]
struct Pd {
    _c: CBox<IbvPd>,
    handle: PdHandle,
    ctx: usize,
}

#[derive(Debug)]
struct Mr {
    _c: CBox<IbvMr>,
    mr: MemoryRegion,
    pd: usize,
}

#[derive(Debug)]
struct Cq {
    _c: CBox<IbvCqEx>,
    handle: CqHandle,
    /// The completion `ibv_start_poll`/`ibv_next_poll` made current, for the `read_*` calls.
    current: Option<IbvWc>,
    ctx: usize,
    /// Its completion channel, if any.
    channel: Option<usize>,
    /// Armed by `ibv_req_notify_cq`, until the next completion is announced.
    armed: Arc<AtomicBool>,
    /// False once destroyed: a pending announcement is dropped.
    alive: Arc<AtomicBool>,
}

/// A completion channel: a pipe whose read end is `ibv_comp_channel.fd`. The NIC's thread
/// writes the 8-byte `struct ibv_cq *` of a CQ whose armed notification fired, and
/// `ibv_get_cq_event` reads it, as the kernel's uverbs event file works
/// (`struct ib_uverbs_comp_event_desc`).
#[derive(Debug)]
struct Channel {
    c: CBox<IbvCompChannel>,
    reader: PipeReader,
    writer: Arc<Mutex<PipeWriter>>,
}

#[derive(Debug)]
struct Qp {
    c: CBox<IbvQpEx>,
    qpn: Qpn,
    qp_type: QpType,
    /// The creation attributes (pointers of the program's: kept, never followed).
    init: CBox<IbvQpInitAttr>,
    /// Every attribute given to modify_qp so far, for query_qp.
    attr: IbvQpAttr,
    send_cq: usize,
    recv_cq: usize,
    pd: usize,
    ctx: usize,
    /// WRs built with the `ibv_wr_*` API since `wr_start`, and the first error while building.
    pending: Vec<SendWr>,
    pending_err: Option<Errno>,
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
    pub(crate) set_ud_addr: *const c_void,
    pub(crate) set_inline_data: *const c_void,
    pub(crate) set_sge: *const c_void,
    pub(crate) set_sge_list: *const c_void,
    pub(crate) start: *const c_void,
    pub(crate) complete: *const c_void,
    pub(crate) abort: *const c_void,
}

/// An address handle: where a UD send goes.
#[derive(Debug)]
struct Ah {
    _c: CBox<IbvAh>,
    dst: IpAddr,
    pd: usize,
}

/// The program's objects, by address.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    pds: HashMap<usize, Pd>,
    mrs: HashMap<usize, Mr>,
    cqs: HashMap<usize, Cq>,
    qps: HashMap<usize, Qp>,
    channels: HashMap<usize, Channel>,
    ahs: HashMap<usize, Ah>,
    next_handle: u32,
}

static OBJECTS: Mutex<Option<Objects>> = Mutex::new(None);

fn objects() -> MutexGuard<'static, Option<Objects>> {
    OBJECTS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn with<R>(f: impl FnOnce(&mut Objects) -> R) -> R {
    f(objects().get_or_insert_with(Objects::default))
}

fn engine_err(e: VerbsError) -> Errno {
    match e {
        VerbsError::Exhausted(_) => Errno(libc::ENOMEM),
        _ => EINVAL,
    }
}

fn handle() -> u32 {
    with(|o| {
        o.next_handle += 1;
        o.next_handle
    })
}

/// `ibv_alloc_pd`.
pub(crate) fn alloc_pd(ctx: usize) -> Result<*mut IbvPd, Errno> {
    let engine = state::engine(ctx)?;
    let pd = engine
        .wait(engine.device.alloc_pd())
        .map_err(|_| Errno(libc::EIO))?;
    let c = CBox::new(IbvPd {
        context: ctx as *mut IbvContext,
        handle: handle(),
    });
    let ptr = c.ptr();
    with(|o| {
        o.pds.insert(
            c.addr(),
            Pd {
                _c: c,
                handle: pd,
                ctx,
            },
        )
    });
    Ok(ptr)
}

/// `ibv_dealloc_pd`: `EBUSY` while a region or QP uses it.
pub(crate) fn dealloc_pd(pd: usize) -> Result<(), Errno> {
    with(|o| {
        if !o.pds.contains_key(&pd) {
            return Err(EINVAL);
        }
        if o.mrs.values().any(|m| m.pd == pd)
            || o.qps.values().any(|q| q.pd == pd)
            || o.ahs.values().any(|a| a.pd == pd)
        {
            return Err(Errno(libc::EBUSY));
        }
        o.pds.remove(&pd);
        Ok(())
    })
}

/// The engine's rights for `ibv_access_flags`; `EINVAL` for flags it does not have.
fn access(flags: c_int) -> Result<Access, Errno> {
    // IBV_ACCESS_RELAXED_ORDERING and the other optional bits may be ignored (verbs.h).
    const OPTIONAL: c_int = 0x3ff0_0000;
    let flags = flags & !OPTIONAL;
    if flags & !0xf != 0 {
        return Err(EINVAL);
    }
    let mut a = Access::NONE;
    for (bit, right) in [
        (1, Access::LOCAL_WRITE),
        (2, Access::REMOTE_WRITE),
        (4, Access::REMOTE_READ),
        (8, Access::REMOTE_ATOMIC),
    ] {
        if flags & bit != 0 {
            a = a | right;
        }
    }
    Ok(a)
}

/// `ibv_reg_mr_iova2`: `len` bytes at `addr`, named `iova` by SGEs and peers.
pub(crate) fn reg_mr(
    pd: usize,
    addr: usize,
    len: usize,
    iova: u64,
    flags: c_int,
) -> Result<*mut IbvMr, Errno> {
    let access = access(flags)?;
    let (pd_handle, ctx) = with(|o| o.pds.get(&pd).map(|p| (p.handle, p.ctx))).ok_or(EINVAL)?;
    let memory = CallerMemory::new(addr, len).ok_or(EINVAL)?;
    let engine = state::engine(ctx)?;
    let mr =
        engine
            .wait(engine.device.call(move |nic, _| {
                nic.reg_memory(pd_handle, Arc::new(memory), Some(iova), access)
            }))
            .map_err(|_| Errno(libc::EIO))?
            .map_err(engine_err)?;
    let c = CBox::new(IbvMr {
        context: ctx as *mut IbvContext,
        pd: pd as *mut IbvPd,
        addr: addr as *mut c_void,
        length: len,
        handle: handle(),
        lkey: mr.lkey(),
        rkey: mr.rkey(),
    });
    let ptr = c.ptr();
    with(|o| o.mrs.insert(c.addr(), Mr { _c: c, mr, pd }));
    Ok(ptr)
}

/// `ibv_dereg_mr`.
pub(crate) fn dereg_mr(mr: usize) -> Result<(), Errno> {
    let entry = with(|o| o.mrs.remove(&mr)).ok_or(EINVAL)?;
    let ctx = with(|o| o.pds.get(&entry.pd).map(|p| p.ctx)).ok_or(EINVAL)?;
    let engine = state::engine(ctx)?;
    let lkey = entry.mr.lkey();
    engine
        .wait(engine.device.call(move |nic, _| nic.dereg_mr(lkey)))
        .map_err(|_| Errno(libc::EIO))?
        .map_err(engine_err)
}

/// `ibv_create_cq`.
pub(crate) fn create_cq(
    ctx: usize,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: usize,
    fns: CqExFns,
) -> Result<*mut IbvCq, Errno> {
    if cqe < 1 || cqe as u32 > MAX_WR * 2 {
        return Err(EINVAL);
    }
    if channel != 0 && !with(|o| o.channels.contains_key(&channel)) {
        return Err(EINVAL);
    }
    let engine = state::engine(ctx)?;
    let depth = cqe as usize;
    let cq = engine
        .wait(engine.device.call(move |nic, _| nic.create_cq(depth)))
        .map_err(|_| Errno(libc::EIO))?;
    let c = CBox::new(IbvCqEx {
        cq: IbvCq {
            context: ctx as *mut IbvContext,
            channel: channel as *mut IbvCompChannel,
            cq_context,
            handle: handle(),
            cqe,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            comp_events_completed: 0,
            async_events_completed: 0,
        },
        comp_mask: 0,
        status: 0,
        wr_id: 0,
        start_poll: fns.start_poll,
        next_poll: fns.next_poll,
        end_poll: fns.end_poll,
        read_opcode: fns.read_opcode,
        read_vendor_err: fns.read_vendor_err,
        read_byte_len: fns.read_byte_len,
        read_imm_data: fns.read_imm_data,
        read_qp_num: fns.read_qp_num,
        read_src_qp: fns.read_src_qp,
        read_wc_flags: fns.read_wc_flags,
        read_slid: fns.read_slid,
        read_sl: fns.read_sl,
        read_dlid_path_bits: fns.read_dlid_path_bits,
        read_completion_ts: std::ptr::null(),
        read_cvlan: std::ptr::null(),
        read_flow_tag: std::ptr::null(),
        read_tm_info: std::ptr::null(),
        read_completion_wallclock_ns: std::ptr::null(),
    });
    let ptr = c.ptr().cast::<IbvCq>();
    with(|o| {
        if let Some(ch) = o.channels.get(&channel) {
            ch.c.update(|c| c.refcnt += 1);
        }
        o.cqs.insert(
            c.addr(),
            Cq {
                _c: c,
                handle: cq,
                current: None,
                ctx,
                channel: (channel != 0).then_some(channel),
                armed: Arc::new(AtomicBool::new(false)),
                alive: Arc::new(AtomicBool::new(true)),
            },
        )
    });
    Ok(ptr)
}

/// `ibv_destroy_cq`: `EBUSY` while a QP uses it. The engine keeps its (empty) queue.
pub(crate) fn destroy_cq(cq: usize) -> Result<(), Errno> {
    with(|o| {
        if !o.cqs.contains_key(&cq) {
            return Err(EINVAL);
        }
        if o.qps.values().any(|q| q.send_cq == cq || q.recv_cq == cq) {
            return Err(Errno(libc::EBUSY));
        }
        if let Some(c) = o.cqs.remove(&cq) {
            c.alive.store(false, Ordering::SeqCst);
            if let Some(ch) = c.channel.and_then(|ch| o.channels.get(&ch)) {
                ch.c.update(|c| c.refcnt -= 1);
            }
        }
        Ok(())
    })
}

/// `ibv_create_comp_channel`.
pub(crate) fn create_comp_channel(ctx: usize) -> Result<*mut IbvCompChannel, Errno> {
    state::engine(ctx)?;
    let (reader, writer) =
        std::io::pipe().map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EMFILE)))?;
    let c = CBox::new(IbvCompChannel {
        context: ctx as *mut IbvContext,
        fd: reader.as_raw_fd(),
        refcnt: 0,
    });
    let ptr = c.ptr();
    let channel = Channel {
        c,
        reader,
        writer: Arc::new(Mutex::new(writer)),
    };
    with(|o| o.channels.insert(ptr as usize, channel));
    Ok(ptr)
}

/// `ibv_destroy_comp_channel`: `EBUSY` while a CQ uses it; closes the pipe.
pub(crate) fn destroy_comp_channel(channel: usize) -> Result<(), Errno> {
    with(|o| {
        if !o.channels.contains_key(&channel) {
            return Err(EINVAL);
        }
        if o.cqs.values().any(|c| c.channel == Some(channel)) {
            return Err(Errno(libc::EBUSY));
        }
        o.channels.remove(&channel);
        Ok(())
    })
}

/// How often an armed CQ is looked at for a new completion. The NIC's queue has no
/// notification of its own yet; the wait for an event is at most this much longer.
const NOTIFY_POLL: std::time::Duration = std::time::Duration::from_micros(200);

/// `ibv_req_notify_cq`: the next completion of `cq` writes one event to its channel. Solicited-
/// only arming fires on any completion (an extra event is allowed, ibv_req_notify_cq(3)).
pub(crate) fn req_notify_cq(cq: usize) -> Result<(), Errno> {
    let (handle, ctx, armed, alive, writer) = with(|o| {
        let c = o.cqs.get(&cq)?;
        let ch = o.channels.get(&c.channel?)?;
        Some((
            c.handle,
            c.ctx,
            c.armed.clone(),
            c.alive.clone(),
            ch.writer.clone(),
        ))
    })
    .ok_or(EINVAL)?;
    if armed.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let engine = state::engine(ctx)?;
    engine.spawn(async move {
        loop {
            if !alive.load(Ordering::SeqCst) {
                return;
            }
            match engine
                .device
                .call(move |nic, _| nic.completions_waiting(handle))
                .await
            {
                Ok(0) => tokio::time::sleep(NOTIFY_POLL).await,
                Ok(_) => break,
                Err(_) => return,
            }
        }
        armed.store(false, Ordering::SeqCst);
        let event = (cq as u64).to_ne_bytes();
        let mut w = writer.lock().unwrap_or_else(PoisonError::into_inner);
        // A full pipe (a program that arms without ever reading) loses the event.
        let _ = w.write_all(&event);
    });
    Ok(())
}

/// `ibv_get_cq_event`: waits (or not, if the program made the fd non-blocking) for the next
/// event on `channel`; returns the CQ's address and its `cq_context`.
pub(crate) fn get_cq_event(channel: usize) -> Result<(usize, *mut c_void), Errno> {
    let mut reader = with(|o| o.channels.get(&channel).map(|c| c.reader.try_clone()))
        .ok_or(EINVAL)?
        .map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let mut event = [0u8; 8];
    // Read without the table's lock: this may block until the event comes.
    reader
        .read_exact(&mut event)
        .map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let cq = u64::from_ne_bytes(event) as usize;
    let cq_context = with(|o| o.cqs.get(&cq).map(|c| c._c.get().cq.cq_context)).ok_or(EINVAL)?;
    Ok((cq, cq_context))
}

/// `ibv_ack_cq_events`: counted in `cq->comp_events_completed`, as libibverbs does.
pub(crate) fn ack_cq_events(cq: usize, n: u32) {
    with(|o| {
        if let Some(c) = o.cqs.get(&cq) {
            c._c.update(|c| {
                c.cq.comp_events_completed = c.cq.comp_events_completed.wrapping_add(n)
            });
        }
    });
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
    if !init.srq.is_null() {
        return Err(Errno(libc::EOPNOTSUPP));
    }
    let (send_cq, recv_cq) = (init.send_cq as usize, init.recv_cq as usize);
    let (pd_handle, ctx, send, recv) = with(|o| {
        let p = o.pds.get(&pd)?;
        Some((
            p.handle,
            p.ctx,
            o.cqs.get(&send_cq)?.handle,
            o.cqs.get(&recv_cq)?.handle,
        ))
    })
    .ok_or(EINVAL)?;
    let engine = state::engine(ctx)?;
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
    let qpn = engine
        .wait(engine.device.create_qp(qp_init))
        .map_err(|e| match e {
            roce_device::DeviceError::Verbs(v) => engine_err(v),
            _ => Errno(libc::EIO),
        })?;
    let c = CBox::new(IbvQpEx {
        qp: IbvQp {
            context: ctx as *mut IbvContext,
            qp_context: init.qp_context,
            pd: pd as *mut IbvPd,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            srq: std::ptr::null_mut(),
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
        wr_bind_mw: std::ptr::null(),
        wr_local_inv: std::ptr::null(),
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
    let engine = state::engine(ctx)?;
    engine
        .wait(engine.device.call(move |nic, _| nic.destroy_qp(qpn)))
        .map_err(|_| Errno(libc::EIO))?
        .map_err(engine_err)?;
    with(|o| o.qps.remove(&qp));
    Ok(())
}

fn qp_state(v: c_int) -> Result<QpState, Errno> {
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

fn mtu(v: c_int) -> Result<Mtu, Errno> {
    u32::try_from(v)
        .ok()
        .filter(|v| (1..=5).contains(v))
        .and_then(|v| Mtu::from_bytes(128 << v))
        .ok_or(EINVAL)
}

/// Where an `ibv_ah_attr` points. RoCE needs the GRH; the source must be our IPv4 GID (index
/// 1): GID 0, the link-local IPv6 one, carries no traffic here (`EINVAL`).
fn destination(ah: &IbvAhAttr) -> Result<IpAddr, Errno> {
    if ah.is_global == 0 || u32::from(ah.grh.sgid_index) != GID_INDEX_IPV4 {
        return Err(EINVAL);
    }
    let dgid = Ipv6Addr::from(ah.grh.dgid.raw);
    Ok(dgid.to_ipv4_mapped().map_or(IpAddr::V6(dgid), IpAddr::V4))
}

/// `ibv_create_ah`.
pub(crate) fn create_ah(pd: usize, attr: &IbvAhAttr) -> Result<*mut IbvAh, Errno> {
    let dst = destination(attr)?;
    let ctx = with(|o| o.pds.get(&pd).map(|p| p.ctx)).ok_or(EINVAL)?;
    let c = CBox::new(IbvAh {
        context: ctx as *mut IbvContext,
        pd: pd as *mut IbvPd,
        handle: handle(),
    });
    let ptr = c.ptr();
    with(|o| o.ahs.insert(c.addr(), Ah { _c: c, dst, pd }));
    Ok(ptr)
}

/// `ibv_destroy_ah`.
pub(crate) fn destroy_ah(ah: usize) -> Result<(), Errno> {
    with(|o| o.ahs.remove(&ah)).map(drop).ok_or(EINVAL)
}

/// The destination of a UD send: the address handle's, the WR's QPN, and its Q_Key, or the
/// QP's when the WR's has the high bit set (IBTA vol. 1 §10.2.5).
pub(crate) fn ud_dest(
    qp: usize,
    ah: usize,
    remote_qpn: u32,
    remote_qkey: u32,
) -> Result<UdDest, Errno> {
    with(|o| {
        let dst = o.ahs.get(&ah)?.dst;
        let qkey = if remote_qkey & 0x8000_0000 != 0 {
            o.qps.get(&qp)?.attr.qkey
        } else {
            remote_qkey
        };
        Some(UdDest {
            ip: dst,
            qpn: Qpn::new(remote_qpn & 0x00ff_ffff),
            qkey,
        })
    })
    .ok_or(EINVAL)
}

/// The engine's attributes for an `ibv_qp_attr` and its mask (`enum ibv_qp_attr_mask`).
fn qp_attr(a: &IbvQpAttr, mask: c_int, model: &DeviceModel) -> Result<QpAttr, Errno> {
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
        let dst = destination(ah)?;
        let mut av = AddressVector::new(IpAddr::V4(model.ipv4()), dst);
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

/// `ibv_modify_qp`: an errno value (`EINVAL` for what the engine refuses, as rxe).
pub(crate) fn modify_qp(qp: usize, a: &IbvQpAttr, mask: c_int) -> Result<(), Errno> {
    let (qpn, ctx) = with(|o| o.qps.get(&qp).map(|q| (q.qpn, q.ctx))).ok_or(EINVAL)?;
    let model = &state::device()?.ok_or(EINVAL)?.model;
    let attr = qp_attr(a, mask, model)?;
    let engine = state::engine(ctx)?;
    engine
        .wait(engine.device.modify_qp(qpn, attr))
        .map_err(|e| match e {
            roce_device::DeviceError::Verbs(v) => engine_err(v),
            _ => Errno(libc::EIO),
        })?;
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
    let engine = state::engine(ctx)?;
    let s = engine
        .wait(engine.device.qp_state(qpn))
        .map_err(|_| Errno(libc::EIO))?;
    attr.qp_state = state_value(s);
    attr.cur_qp_state = attr.qp_state;
    with(|o| {
        if let Some(q) = o.qps.get(&qp) {
            q.c.update(|c| c.qp.state = attr.qp_state);
        }
    });
    Ok((attr, init))
}

/// A send work request as the engine takes it.
pub(crate) fn send_wr(
    wr: &IbvSendWr,
    sges: &[IbvSge],
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
        9 => SendOp::SendWithInv(wr.imm_data),
        _ => return Err(EINVAL),
    };
    let sgl = sges
        .iter()
        .map(|s| Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
        .collect();
    let mut w = SendWr::new(wr.wr_id, op, sgl);
    w.signaled = sq_sig_all || wr.send_flags & 2 != 0;
    w.solicited = wr.send_flags & 4 != 0;
    w.inline = wr.send_flags & 8 != 0;
    w.ud = ud;
    Ok(w)
}

/// `ibv_qp_to_qp_ex`: every QP of ours is an `ibv_qp_ex` (NULL for others).
pub(crate) fn is_qp(qp: usize) -> bool {
    with(|o| o.qps.contains_key(&qp))
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
pub(crate) fn wr_set_sgl(qp: usize, sges: &[IbvSge]) {
    let sgl = recv_wr(0, sges).sgl;
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
    post_send(ctx, qpn, wrs).map_err(|(_, e)| e)
}

/// `wr_abort`: drops the batch.
pub(crate) fn wr_abort(qp: usize) {
    wr_start(qp);
}

/// What `post_send`/`post_recv` need of a QP: its number, type, `sq_sig_all`, and context.
pub(crate) fn qp_for_post(qp: usize) -> Result<(Qpn, QpType, bool, usize), Errno> {
    with(|o| {
        o.qps
            .get(&qp)
            .map(|q| (q.qpn, q.qp_type, q.init.get().sq_sig_all != 0, q.ctx))
    })
    .ok_or(EINVAL)
}

/// Posts `wrs` in order; on failure, the index of the first one refused and why (those before
/// it were posted).
pub(crate) fn post_send(ctx: usize, qpn: Qpn, wrs: Vec<SendWr>) -> Result<(), (usize, Errno)> {
    let engine = state::engine(ctx).map_err(|e| (0, e))?;
    engine
        .wait(engine.device.call(move |nic, _| {
            for (i, wr) in wrs.into_iter().enumerate() {
                nic.post_send(qpn, wr).map_err(|e| (i, engine_err(e)))?;
            }
            Ok(())
        }))
        .map_err(|_| (0, Errno(libc::EIO)))?
}

/// Posts receive requests in order; as [`post_send`].
pub(crate) fn post_recv(ctx: usize, qpn: Qpn, wrs: Vec<RecvWr>) -> Result<(), (usize, Errno)> {
    let engine = state::engine(ctx).map_err(|e| (0, e))?;
    engine
        .wait(engine.device.call(move |nic, _| {
            for (i, wr) in wrs.into_iter().enumerate() {
                nic.post_recv(qpn, wr).map_err(|e| (i, engine_err(e)))?;
            }
            Ok(())
        }))
        .map_err(|_| (0, Errno(libc::EIO)))?
}

/// A receive request as the engine takes it.
pub(crate) fn recv_wr(wr_id: u64, sges: &[IbvSge]) -> RecvWr {
    RecvWr {
        wr_id,
        sgl: sges
            .iter()
            .map(|s| Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            })
            .collect(),
    }
}

/// `ibv_poll_cq`: up to `max` completions, without waiting.
pub(crate) fn poll_cq(cq: usize, max: usize) -> Result<Vec<IbvWc>, Errno> {
    let (handle, ctx) = with(|o| o.cqs.get(&cq).map(|c| (c.handle, c.ctx))).ok_or(EINVAL)?;
    let engine = state::engine(ctx)?;
    let cqes = engine
        .wait(engine.device.poll_completions(handle, max))
        .map_err(|_| Errno(libc::EIO))?;
    Ok(cqes.iter().map(wc).collect())
}

/// The `ibv_cq_ex` polling functions a CQ is given.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub(crate) struct CqExFns {
    pub(crate) start_poll: *const c_void,
    pub(crate) next_poll: *const c_void,
    pub(crate) end_poll: *const c_void,
    pub(crate) read_opcode: *const c_void,
    pub(crate) read_vendor_err: *const c_void,
    pub(crate) read_byte_len: *const c_void,
    pub(crate) read_imm_data: *const c_void,
    pub(crate) read_qp_num: *const c_void,
    pub(crate) read_src_qp: *const c_void,
    pub(crate) read_wc_flags: *const c_void,
    pub(crate) read_slid: *const c_void,
    pub(crate) read_sl: *const c_void,
    pub(crate) read_dlid_path_bits: *const c_void,
}

/// The `wc_flags` of `ibv_create_cq_ex` offered: byte length, immediate, QP number, source QP,
/// SLID, SL, DLID path bits (what `ibv_poll_cq` gives). Timestamps, VLANs, flow tags and tag
/// matching are not.
pub(crate) const CQ_EX_WC_FLAGS: u64 = 0x7f;

/// `ibv_start_poll` / `ibv_next_poll`: makes the CQ's next completion current and returns it;
/// `ENOENT` when there is none.
pub(crate) fn next_poll(cq: usize) -> Result<IbvWc, Errno> {
    let wc = poll_cq(cq, 1)?.into_iter().next();
    with(|o| {
        let c = o.cqs.get_mut(&cq).ok_or(EINVAL)?;
        c.current = wc;
        if let Some(w) = wc {
            c._c.update(|x| {
                x.status = w.status;
                x.wr_id = w.wr_id;
            });
        }
        wc.ok_or(Errno(libc::ENOENT))
    })
}

/// `ibv_end_poll`.
pub(crate) fn end_poll(cq: usize) {
    with(|o| {
        if let Some(c) = o.cqs.get_mut(&cq) {
            c.current = None;
        }
    });
}

/// The current completion of `cq` (zeroes if there is none: reading without a successful
/// `start_poll` is the program's error).
pub(crate) fn current(cq: usize) -> IbvWc {
    with(|o| o.cqs.get(&cq).and_then(|c| c.current)).unwrap_or_default()
}

/// `struct ibv_wc` for a completion.
fn wc(c: &Cqe) -> IbvWc {
    let status = match c.status {
        WcStatus::Success => 0,
        WcStatus::LocLenErr => 1,
        WcStatus::LocQpOpErr => 2,
        WcStatus::LocProtErr => 4,
        WcStatus::WrFlushErr => 5,
        WcStatus::RemInvReqErr => 9,
        WcStatus::RemAccessErr => 10,
        WcStatus::RemOpErr => 11,
        WcStatus::RetryExcErr => 12,
        WcStatus::RnrRetryExcErr => 13,
        #[allow(unreachable_patterns)]
        _ => 21, // IBV_WC_GENERAL_ERR
    };
    let opcode = match c.opcode {
        WcOpcode::Send => 0,
        WcOpcode::RdmaWrite => 1,
        WcOpcode::RdmaRead => 2,
        WcOpcode::CompareSwap => 3,
        WcOpcode::FetchAdd => 4,
        WcOpcode::Recv => 128,
        WcOpcode::RecvRdmaWithImm => 129,
    };
    let mut flags = 0;
    if c.imm_data.is_some() {
        flags |= 2; // IBV_WC_WITH_IMM
    }
    if c.invalidated_rkey.is_some() {
        flags |= 8; // IBV_WC_WITH_INV
    }
    if c.src_qp.is_some() {
        flags |= 1; // IBV_WC_GRH: UD receives carry the sender's GRH
    }
    IbvWc {
        wr_id: c.wr_id,
        status,
        opcode,
        vendor_err: 0,
        byte_len: c.byte_len,
        imm_data: c
            .imm_data
            .or(c.invalidated_rkey.map(u32::from_be))
            .unwrap_or(0)
            .to_be(),
        qp_num: c.qpn.value(),
        src_qp: c.src_qp.map_or(0, Qpn::value),
        wc_flags: flags,
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_flags_map_to_rights_and_unknown_ones_are_refused() {
        assert_eq!(
            access(1 | 2).unwrap(),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE
        );
        assert_eq!(
            access(1 | (1 << 20)).unwrap(),
            Access::LOCAL_WRITE,
            "relaxed ordering is optional"
        );
        assert_eq!(access(1 << 6), Err(EINVAL), "on-demand paging");
    }

    #[test]
    fn send_wrs_translate_opcodes_flags_and_immediates() {
        let mut wr = IbvSendWr {
            wr_id: 9,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
            opcode: 3,
            send_flags: 2 | 8,
            imm_data: 0x1234_5678u32.to_be(),
            wr_remote_addr: 0,
            wr_word1: 0,
            wr_swap: 0,
            wr_atomic_rkey: 0,
            _pad: 0,
            _rest: [0; 7],
        };
        let w = send_wr(&wr, &[], false, None).unwrap();
        assert_eq!(w.op, SendOp::SendWithImm(0x1234_5678));
        assert!(w.signaled && w.inline && !w.solicited);
        wr.opcode = 0;
        wr.send_flags = 0;
        wr.wr_remote_addr = 0x1000;
        wr.wr_word1 = 0x77;
        let w = send_wr(&wr, &[], true, None).unwrap();
        assert_eq!(
            w.op,
            SendOp::RdmaWrite(Remote {
                addr: 0x1000,
                rkey: 0x77
            })
        );
        assert!(w.signaled, "sq_sig_all");
        wr.opcode = 8;
        assert_eq!(
            send_wr(&wr, &[], false, None).unwrap_err(),
            EINVAL,
            "bind MW"
        );
    }

    #[test]
    fn mtu_enum_values() {
        assert_eq!(mtu(3), Ok(Mtu::Mtu1024));
        assert_eq!(mtu(5), Ok(Mtu::Mtu4096));
        assert_eq!(mtu(0), Err(EINVAL));
        assert_eq!(mtu(6), Err(EINVAL));
    }

    #[test]
    fn wc_of_a_receive_with_immediate() {
        let mut c = Cqe::success(5, WcOpcode::Recv, Qpn::new(0x11));
        c.byte_len = 64;
        c.imm_data = Some(0xaabb_ccdd);
        let w = wc(&c);
        assert_eq!(
            (w.wr_id, w.status, w.opcode, w.byte_len, w.qp_num),
            (5, 0, 128, 64, 0x11)
        );
        assert_eq!(w.wc_flags & 2, 2);
        assert_eq!(u32::from_be(w.imm_data), 0xaabb_ccdd);
    }
}
