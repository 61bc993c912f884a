//! Completion queues, completion channels, and polling.
//!
//! A CQ is the device's shared [`CompletionQueue`]: `ibv_poll_cq` takes completions out of it
//! without a call to the NIC's thread. A completion channel is a pipe whose read end is
//! `ibv_comp_channel.fd`: an armed CQ's next completion writes the 8-byte `struct ibv_cq *` on
//! the NIC's thread, at the step that delivered it, and `ibv_get_cq_event` reads it, as the
//! kernel's uverbs event file works (`struct ib_uverbs_comp_event_desc`).

use std::ffi::{c_int, c_void};
use std::io::{PipeReader, PipeWriter, Read as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::sync::{Arc, Mutex, PoisonError};

use roce_core::{Cqe, NetworkHdr, Qpn, WcOpcode, WcStatus};
use roce_device::CompletionQueue;

use super::{EINVAL, device_err, handle, with};
use crate::abi::{IbvCompChannel, IbvContext, IbvCq, IbvCqEx, IbvWc};
use crate::state::{self, Errno};
use roce_cabi::CBox;

#[derive(Debug)]
pub(super) struct Cq {
    c: CBox<IbvCqEx>,
    queue: Arc<CompletionQueue>,
    pub(super) ctx: usize,
    /// The completion `ibv_start_poll`/`ibv_next_poll` made current, for the `read_*` calls.
    current: Option<IbvWc>,
    /// Its completion channel, if any.
    channel: Option<usize>,
}

/// A completion channel.
#[derive(Debug)]
pub(super) struct Channel {
    c: CBox<IbvCompChannel>,
    /// Shared with the `ibv_get_cq_event` reading it, which may outlive the channel's entry
    /// (a destroy while a read blocks): the descriptor stays open until that read returns.
    reader: Arc<PipeReader>,
    writer: Arc<Mutex<PipeWriter>>,
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

/// The most entries a CQ takes: rxe's `max_cqe` ((1 << RXE_MAX_LOG_CQE) - 1), as
/// `ibv_query_device` says.
pub(crate) const MAX_CQE: c_int = (1 << 15) - 1;

/// The `wc_flags` of `ibv_create_cq_ex` offered: byte length, immediate, QP number, source QP,
/// SLID, SL, DLID path bits (what `ibv_poll_cq` gives). Timestamps, VLANs, flow tags and tag
/// matching are not.
pub(crate) const CQ_EX_WC_FLAGS: u64 = 0x7f;

/// `ibv_create_cq`.
pub(crate) fn create_cq(
    ctx: usize,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: usize,
    fns: CqExFns,
) -> Result<*mut IbvCq, Errno> {
    // rxe_cq_chk_attr: at least one entry, at most max_cqe.
    if !(1..=MAX_CQE).contains(&cqe) {
        return Err(EINVAL);
    }
    if channel != 0 && !with(|o| o.channels.contains_key(&channel)) {
        return Err(EINVAL);
    }
    let engine = state::engine(ctx)?;
    let queue = engine
        .device
        .create_completion_queue(cqe as usize)
        .map_err(device_err)?;
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
    let entry = Cq {
        c,
        queue,
        ctx,
        current: None,
        channel: (channel != 0).then_some(channel),
    };
    with(|o| {
        if let Some(ch) = o.channels.get(&channel) {
            ch.c.update(|c| c.refcnt += 1);
        }
        o.cqs.insert(ptr as usize, entry);
    });
    Ok(ptr)
}

/// The engine's handle of a CQ, and its context.
pub(super) fn engine_cq(cq: usize) -> Option<(roce_core::CqHandle, usize)> {
    with(|o| o.cqs.get(&cq).map(|c| (c.queue.handle(), c.ctx)))
}

/// `ibv_resize_cq`, as rxe (rxe_verbs.c `rxe_resize_cq` → rxe_cq.c `rxe_cq_chk_attr`, then
/// `rxe_cq_resize_queue`): `EINVAL` for fewer than 1 or more than `max_cqe` entries, or fewer
/// than the completions waiting, and nothing changes; otherwise the completions waiting stay,
/// in order, and `cq->cqe` is the new size. rxe rounds the size up to 2^n - 1 (its ring); this
/// library keeps the size asked for, as its `ibv_create_cq` does.
pub(crate) fn resize_cq(cq: usize, cqe: c_int) -> Result<(), Errno> {
    if !(1..=MAX_CQE).contains(&cqe) {
        return Err(EINVAL);
    }
    let (handle, ctx) = engine_cq(cq).ok_or(EINVAL)?;
    let engine = state::engine(ctx)?;
    engine
        .device
        .resize_completion_queue(handle, cqe as usize)
        .map_err(device_err)?;
    with(|o| {
        if let Some(c) = o.cqs.get(&cq) {
            c.c.update(|c| c.cq.cqe = cqe);
        }
    });
    Ok(())
}

/// `ibv_destroy_cq`: `EBUSY` while a QP uses it. The engine keeps its (empty) queue; its
/// shared queue and any armed notification go.
pub(crate) fn destroy_cq(cq: usize) -> Result<(), Errno> {
    let removed = with(|o| {
        if !o.cqs.contains_key(&cq) {
            return Err(EINVAL);
        }
        if o.qps.values().any(|q| q.send_cq == cq || q.recv_cq == cq) {
            return Err(Errno(libc::EBUSY));
        }
        let c = o.cqs.remove(&cq).ok_or(EINVAL)?;
        if let Some(ch) = c.channel.and_then(|ch| o.channels.get(&ch)) {
            ch.c.update(|c| c.refcnt -= 1);
        }
        Ok(c)
    })?;
    // Outside the table's lock: the device takes the engine's.
    if let Ok(engine) = state::engine(removed.ctx) {
        engine
            .device
            .destroy_completion_queue(removed.queue.handle());
    }
    Ok(())
}

/// `ibv_create_comp_channel`.
pub(crate) fn create_comp_channel(ctx: usize) -> Result<*mut IbvCompChannel, Errno> {
    state::engine(ctx)?;
    let (reader, writer) =
        std::io::pipe().map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EMFILE)))?;
    // The NIC's thread writes the events: a full pipe must lose one, not stop the NIC.
    crate::ffi::set_nonblocking(&writer)
        .map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let c = CBox::new(IbvCompChannel {
        context: ctx as *mut IbvContext,
        fd: reader.as_raw_fd(),
        refcnt: 0,
    });
    let ptr = c.ptr();
    let channel = Channel {
        c,
        reader: Arc::new(reader),
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

/// `ibv_req_notify_cq`: the next completion of `cq` writes one event to its channel; with
/// `solicited_only`, the next receive of a solicited message or unsuccessful completion
/// ([`CompletionQueue::arm_solicited`]).
pub(crate) fn req_notify_cq(cq: usize, solicited_only: bool) -> Result<(), Errno> {
    let (queue, writer, ctx) = with(|o| {
        let c = o.cqs.get(&cq)?;
        let ch = o.channels.get(&c.channel?)?;
        Some((c.queue.clone(), ch.writer.clone(), c.ctx))
    })
    .ok_or(EINVAL)?;
    // A program that arms its CQ is about to wait: what its spinning left owed goes now.
    if let Ok(engine) = state::engine(ctx) {
        engine.device.send_owed();
    }
    let notify = move || {
        let event = (cq as u64).to_ne_bytes();
        let mut w = writer.lock().unwrap_or_else(PoisonError::into_inner);
        // A full pipe (a program that arms without ever reading) loses the event: the write
        // end does not block, and 8 bytes go whole or not at all.
        let _ = w.write(&event);
    };
    if solicited_only {
        queue.arm_solicited(notify);
    } else {
        queue.arm(notify);
    }
    Ok(())
}

/// `ibv_get_cq_event`: waits (or not, if the program made the fd non-blocking) for the next
/// event on `channel`; returns the CQ's address and its `cq_context`.
pub(crate) fn get_cq_event(channel: usize) -> Result<(usize, *mut c_void), Errno> {
    // The reader itself, not a duplicate of its descriptor: a `dup` and a `close` around each
    // read were two system calls per event (UCX's ud_verbs reads one for each arming).
    let reader = with(|o| o.channels.get(&channel).map(|c| c.reader.clone())).ok_or(EINVAL)?;
    let mut reader = &*reader;
    let mut event = [0u8; 8];
    let os = |e: std::io::Error| Errno(e.raw_os_error().unwrap_or(libc::EIO));
    // Read without the table's lock: this may block until the event comes. One read(2), as
    // libibverbs's: a signal whose handler was installed without SA_RESTART interrupts it
    // and the call fails with EINTR (qperf's timer ends its tests so); the 8 bytes of an
    // event are written at once, so they come whole.
    match reader.read(&mut event).map_err(os)? {
        8 => {}
        0 => return Err(Errno(libc::EIO)),
        n => reader.read_exact(&mut event[n..]).map_err(os)?,
    }
    let cq = u64::from_ne_bytes(event) as usize;
    let cq_context = with(|o| o.cqs.get(&cq).map(|c| c.c.get().cq.cq_context)).ok_or(EINVAL)?;
    Ok((cq, cq_context))
}

/// `ibv_ack_cq_events`: counted in `cq->comp_events_completed`, as libibverbs does.
pub(crate) fn ack_cq_events(cq: usize, n: u32) {
    with(|o| {
        if let Some(c) = o.cqs.get(&cq) {
            c.c.update(|c| c.cq.comp_events_completed = c.cq.comp_events_completed.wrapping_add(n));
        }
    });
}

/// `ibv_poll_cq`: up to `max` completions, without waiting, each handed to `out` with its
/// index; returns how many.
pub(crate) fn poll_cq(
    cq: usize,
    max: usize,
    mut out: impl FnMut(usize, IbvWc),
) -> Result<usize, Errno> {
    let (queue, ctx) = with(|o| o.cqs.get(&cq).map(|c| (c.queue.clone(), c.ctx))).ok_or(EINVAL)?;
    let mut n = 0;
    let mut take = |queue: &CompletionQueue| {
        queue.poll_with(max, |cqe| {
            out(n, wc(&cqe));
            n += 1;
        });
        n
    };
    if take(&queue) == 0 && !(look_at_network(ctx) && take(&queue) > 0) {
        idle();
    }
    Ok(n)
}

/// A poll that found its CQ empty looks at the network on the program's thread
/// ([`roce_device::DeviceHandle::poll_network`]): a program that spins on `ibv_poll_cq`
/// (perftest's latency tests, `ibv_rc_pingpong` without `-e`) then receives what it waits for
/// itself, as a kernel-bypass NIC's poll does, without waiting for the NIC's thread to wake.
/// Returns whether a datagram came.
fn look_at_network(ctx: usize) -> bool {
    state::engine(ctx).is_ok_and(|engine| engine.device.poll_network())
}

/// A poll that found nothing, on the network either, gives the processor away for a moment.
/// A program that spins on `ibv_poll_cq` would otherwise keep the core the NIC's thread may
/// need (a timer to fire, a backend the program's thread cannot receive from): a hardware NIC
/// has cores of its own, an emulated one shares the program's. `sched_yield` lets a runnable
/// NIC thread in and returns at once when there is none.
fn idle() {
    std::thread::yield_now();
}

/// `ibv_start_poll` (`start`) / `ibv_next_poll`: makes the CQ's next completion current and
/// returns it; `ENOENT` when there is none. Only a `start` that finds nothing yields the
/// processor ([`idle`]): the `ENOENT` that ends a batch is not an idle poll.
pub(crate) fn next_poll(cq: usize, start: bool) -> Result<IbvWc, Errno> {
    let polled = with(|o| {
        let c = o.cqs.get_mut(&cq).ok_or(EINVAL)?;
        let wc = c.queue.poll().map(|cqe| wc(&cqe));
        c.current = wc;
        if let Some(w) = wc {
            c.c.update(|x| {
                x.status = w.status;
                x.wr_id = w.wr_id;
            });
        }
        wc.ok_or(Errno(libc::ENOENT))
    });
    if start && matches!(polled, Err(Errno(libc::ENOENT))) {
        let ctx = with(|o| o.cqs.get(&cq).map(|c| c.ctx)).ok_or(EINVAL)?;
        if look_at_network(ctx) {
            return next_poll(cq, false);
        }
        idle();
    }
    polled
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
pub(super) fn wc(c: &Cqe) -> IbvWc {
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
        WcStatus::MwBindErr => 6,
        #[allow(unreachable_patterns)]
        _ => 21, // IBV_WC_GENERAL_ERR
    };
    let opcode = match c.opcode {
        WcOpcode::Send => 0,
        WcOpcode::RdmaWrite => 1,
        WcOpcode::RdmaRead => 2,
        WcOpcode::CompareSwap => 3,
        WcOpcode::FetchAdd => 4,
        WcOpcode::BindMw => 5,
        WcOpcode::LocalInv => 6,
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
    if c.src_qp.is_some() || c.network_hdr.is_some() {
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
        sl: roce_packet_type(c.network_hdr),
        dlid_path_bits: 0,
    }
}

/// `ibv_wc.sl` of a completion: on RoCE, the network header type of a UD receive, as mlx5
/// reports it (its CQE's `flags_rqpn` bits 27:24, copied to `sl` by rdma-core's mlx5
/// `handle_responder`; bits 2:0 are the L3 header type, 0 GRH, 1 IPv6, 2 IPv4) and hns since
/// rdma-core 47 (`parse_for_ud_qp`). UCX's ud_verbs reads it (`uct_ud_iface_check_grh`,
/// `wc.sl & 7 == 2` for IPv4) to find the destination address in the GRH area, and drops the
/// datagram when the address it finds is not one of the device's GIDs. rxe leaves `sl` 0 (its
/// `do_complete` fills `network_hdr_type` only for kernel consumers), which makes UCX read an
/// IPv4 datagram's area as IPv6 and drop it.
pub(super) fn roce_packet_type(network_hdr: Option<NetworkHdr>) -> u8 {
    match network_hdr {
        None => 0,
        Some(NetworkHdr::Ipv6) => 1,
        Some(NetworkHdr::Ipv4) => 2,
    }
}
