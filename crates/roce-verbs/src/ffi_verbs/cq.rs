//! Completion queues and completion channels: creation, resizing, the channel's events, and
//! the context's `ops.poll_cq` and `ops.req_notify_cq`.

use std::ffi::{c_int, c_uint, c_void};

use super::null_on_err;
use crate::abi::{IbvCompChannel, IbvContext, IbvCq, IbvWc};
use crate::ffi::{errno_ret, guard, set_errno};
use crate::ffi_ex::cq_ex_fns;
use crate::state::Errno;
use crate::verbs;

/// `struct ibv_cq *ibv_create_cq(ctx, int cqe, void *cq_context, channel, int comp_vector)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_create_cq(
    context: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    _comp_vector: c_int,
) -> *mut IbvCq {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::create_cq(
            context as usize,
            cqe,
            cq_context,
            channel as usize,
            cq_ex_fns(),
        ))
    })
}

/// `int ibv_destroy_cq(struct ibv_cq *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_cq(cq: *mut IbvCq) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_cq(cq as usize)))
}

/// `int ibv_resize_cq(struct ibv_cq *, int cqe)`: an errno value (`EINVAL` for a size out of
/// 1..=max_cqe or below the completions waiting, or a CQ not ours; nothing changes then).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_resize_cq(cq: *mut IbvCq, cqe: c_int) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::resize_cq(cq as usize, cqe)))
}

/// `void ibv_ack_cq_events(struct ibv_cq *, unsigned nevents)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_ack_cq_events(cq: *mut IbvCq, nevents: c_uint) {
    guard((), || verbs::ack_cq_events(cq as usize, nevents));
}

/// `struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *)`: its `fd` can be
/// polled, and made non-blocking with fcntl.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_create_comp_channel(context: *mut IbvContext) -> *mut IbvCompChannel {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::create_comp_channel(context as usize))
    })
}

/// `int ibv_destroy_comp_channel(struct ibv_comp_channel *)`: an errno value (`EBUSY` while a
/// CQ uses it).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_comp_channel(channel: *mut IbvCompChannel) -> c_int {
    guard(libc::EIO, || {
        errno_ret(verbs::destroy_comp_channel(channel as usize))
    })
}

/// `int ibv_get_cq_event(channel, struct ibv_cq **cq, void **cq_context)`: 0, or -1 with
/// errno (`EAGAIN` on a non-blocking fd with no event).
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `cq` and `cq_context` are NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut IbvCompChannel,
    cq: *mut *mut IbvCq,
    cq_context: *mut *mut c_void,
) -> c_int {
    guard(-1, || {
        if cq.is_null() || cq_context.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        match verbs::get_cq_event(channel as usize) {
            Ok((c, ctx)) => {
                // SAFETY: the caller passes places for both pointers (checked non-NULL).
                unsafe {
                    *cq = c as *mut IbvCq;
                    *cq_context = ctx;
                }
                0
            }
            Err(Errno(e)) => {
                set_errno(e);
                -1
            }
        }
    })
}

/// `ops.poll_cq`: the number of completions written to `wc`, or -1 (errno set).
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `wc` is NULL or valid for writing `num_entries` `struct ibv_wc`.
pub(crate) unsafe extern "C" fn poll_cq(
    cq: *mut IbvCq,
    num_entries: c_int,
    wc: *mut IbvWc,
) -> c_int {
    guard(-1, || {
        let Ok(max) = usize::try_from(num_entries) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if max > 0 && wc.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        let polled = verbs::poll_cq(cq as usize, max, |i, w| {
            // SAFETY: the caller's array holds num_entries > i entries.
            unsafe { wc.add(i).write_unaligned(w) };
        });
        match polled {
            Ok(n) => n as c_int,
            Err(Errno(e)) => {
                set_errno(e);
                -1
            }
        }
    })
}

/// `ops.req_notify_cq`: an errno value (`EINVAL` for a CQ without a channel).
pub(crate) extern "C" fn req_notify_cq(cq: *mut IbvCq, solicited_only: c_int) -> c_int {
    guard(libc::EIO, || {
        errno_ret(verbs::req_notify_cq(cq as usize, solicited_only != 0))
    })
}
