//! The verbs objects of the program and their translation to the engine (safe code: C
//! structures arrive here as Rust copies; addresses are integers).
//!
//! Every object the program gets (`ibv_pd`, `ibv_mr`, `ibv_cq`, `ibv_qp`, `ibv_ah`) is a
//! [`CBox`](roce_cabi::CBox) kept in [`Objects`] under its address, next to the engine's handle for it, so that
//! an address this library did not hand out is refused (`EINVAL`) rather than followed.
//!
//! The hot path is the device's ([`roce_device::DeviceHandle`]): a post takes the engine's
//! lock for the WRs of one call and rings the NIC thread's doorbell once; a poll reads the
//! CQ's shared queue and never touches the engine. Locks are taken in one order: the engine's
//! before the object table's, never the other way round (no engine call runs inside
//! [`with`]).
//!
//! One file per kind of object: `pd.rs` (protection domains, memory regions, address
//! handles), `cq.rs` (CQs, completion channels, polling), `qp.rs` (QPs and their attributes),
//! `srq.rs` (shared receive queues), `post.rs` (work requests, the `ibv_wr_*` API).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use roce_core::{AsyncEvent, Nic, VerbsError};
use roce_device::{DeviceError, Verb};

use crate::abi;
use crate::state::{self, Errno};

mod cq;
mod mw;
mod pd;
mod post;
mod qp;
mod srq;
#[cfg(test)]
mod tests;

pub(crate) use cq::{
    CQ_EX_WC_FLAGS, CqExFns, MAX_CQE, ack_cq_events, create_comp_channel, create_cq, current,
    destroy_comp_channel, destroy_cq, end_poll, get_cq_event, next_poll, poll_cq, req_notify_cq,
    resize_cq,
};
pub(crate) use mw::{alloc_mw, bind_mw, dealloc_mw, mw_bind};
pub(crate) use pd::{
    ah_attr_from_wc, alloc_pd, create_ah, dealloc_pd, dereg_mr, destroy_ah, reg_mr, ud_dest,
};
pub(crate) use post::{
    PostQp, max_inline, post, qp_for_post, recv_wr, send_wr, sge, wr_abort, wr_complete, wr_fail,
    wr_op, wr_set_inline, wr_set_sgl, wr_set_ud_addr, wr_start,
};
pub(crate) use qp::{
    WrFns, c_qp_attr, create_qp, destroy_qp, is_qp, modify_qp, qp_state, qpn_of, query_qp,
};
pub(crate) use srq::{PostSrq, create_srq, destroy_srq, modify_srq, query_srq, srq_for_post};

const EINVAL: Errno = Errno(libc::EINVAL);

/// The program's objects, by address (trees: one is looked up at every post and poll, where
/// SipHash cost more than a tree's few comparisons).
#[derive(Debug, Default)]
pub(crate) struct Objects {
    pds: BTreeMap<usize, pd::Pd>,
    mrs: BTreeMap<usize, pd::Mr>,
    cqs: BTreeMap<usize, cq::Cq>,
    qps: BTreeMap<usize, qp::Qp>,
    channels: BTreeMap<usize, cq::Channel>,
    ahs: BTreeMap<usize, pd::Ah>,
    srqs: BTreeMap<usize, srq::Srq>,
    mws: BTreeMap<usize, mw::Mw>,
    next_handle: u32,
}

static OBJECTS: Mutex<Option<Objects>> = Mutex::new(None);

fn objects() -> MutexGuard<'static, Option<Objects>> {
    OBJECTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `f` on the object table. `f` must not call the engine (see the module's lock order).
fn with<R>(f: impl FnOnce(&mut Objects) -> R) -> R {
    f(objects().get_or_insert_with(Objects::default))
}

/// The errno for what the engine refused: `ENOMEM` for a full table or queue, else `EINVAL`.
pub(crate) fn engine_err(e: VerbsError) -> Errno {
    match e {
        VerbsError::Exhausted(_) | VerbsError::QueueFull { .. } | VerbsError::SrqFull { .. } => {
            Errno(libc::ENOMEM)
        }
        VerbsError::SrqBusy { .. } => Errno(libc::EBUSY),
        _ => EINVAL,
    }
}

/// The errno for a device call that failed.
fn device_err(e: DeviceError) -> Errno {
    match e {
        DeviceError::Verbs(v) => engine_err(v),
        _ => Errno(libc::EIO),
    }
}

/// A new `handle` for a C object.
fn handle() -> u32 {
    with(|o| {
        o.next_handle += 1;
        o.next_handle
    })
}

/// Runs `f` on the engine of the context at `ctx`, on this thread, and rings the NIC's
/// doorbell once.
fn step<R>(ctx: usize, f: impl FnOnce(&mut Nic) -> R) -> Result<R, Errno> {
    step_as(ctx, Verb::Other, f)
}

/// [`step`] as the verb `kind`.
fn step_as<R>(ctx: usize, kind: Verb, f: impl FnOnce(&mut Nic) -> R) -> Result<R, Errno> {
    let engine = state::engine(ctx)?;
    engine
        .device
        .verb(kind, |nic, _| f(nic))
        .map_err(device_err)
}

/// Where an asynchronous event of the engine goes: the context of the QP or SRQ it names, as
/// `ibv_async_event` (element, type). Runs on the NIC's thread (see
/// [`roce_device::DeviceHandle::on_async_event`]); an event of an object already destroyed is
/// dropped.
pub(crate) fn raise(event: AsyncEvent) {
    let found = with(|o| match event {
        AsyncEvent::QpFatal(qpn) | AsyncEvent::QpLastWqeReached(qpn) => {
            let kind = if matches!(event, AsyncEvent::QpFatal(_)) {
                abi::EVENT_QP_FATAL
            } else {
                abi::EVENT_QP_LAST_WQE_REACHED
            };
            o.qps
                .iter()
                .find(|(_, q)| q.qpn == qpn)
                .map(|(addr, q)| (*addr, q.ctx, kind, q.qpn.value()))
        }
        AsyncEvent::SrqLimitReached(srq) => o
            .srqs
            .iter()
            .find(|(_, s)| s.handle == srq)
            .map(|(addr, s)| (*addr, s.ctx, abi::EVENT_SRQ_LIMIT_REACHED, 0)),
        _ => None,
    });
    if let Some((element, ctx, kind, tag)) = found {
        state::raise_async_event(ctx, element, kind, tag);
    }
}

/// `ibv_get_async_event`: the context's next event whose object still exists. An event raised
/// for a QP or SRQ that the program destroyed before reading it is dropped, as the kernel
/// drops the queued events of an object it destroys (`ib_uverbs_release_uevent`): a program
/// (UCX's async thread) never reads an event for an object it has freed.
pub(crate) fn next_async_event(ctx: usize) -> Result<abi::IbvAsyncEvent, Errno> {
    loop {
        let (event, tag) = state::wait_async_event(ctx)?;
        let element = event.element as usize;
        let live = with(|o| match event.event_type {
            abi::EVENT_QP_FATAL | abi::EVENT_QP_LAST_WQE_REACHED => {
                o.qps.get(&element).is_some_and(|q| q.qpn.value() == tag)
            }
            abi::EVENT_SRQ_LIMIT_REACHED => o.srqs.contains_key(&element),
            _ => true,
        });
        if live {
            return Ok(event);
        }
        tracing::debug!(
            element,
            event = event.event_type,
            "async event of a destroyed object dropped"
        );
    }
}

/// `ibv_ack_async_event`: counted in the QP's or SRQ's `events_completed`.
pub(crate) fn ack_async_event(element: usize, event_type: std::ffi::c_int) {
    with(|o| match event_type {
        abi::EVENT_SRQ_LIMIT_REACHED => {
            if let Some(s) = o.srqs.get(&element) {
                s.ack_event();
            }
        }
        abi::EVENT_QP_FATAL | abi::EVENT_QP_LAST_WQE_REACHED => {
            if let Some(q) = o.qps.get(&element) {
                q.c.update(|c| c.qp.events_completed = c.qp.events_completed.wrapping_add(1));
            }
        }
        _ => {}
    });
}
