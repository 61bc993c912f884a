//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//! `ibv_destroy_srq`.

use std::ffi::c_int;

use super::null_on_err;
use crate::abi::{IbvPd, IbvSrq, IbvSrqAttr, IbvSrqInitAttr};
use crate::ffi::{errno_ret, guard, read_in, write_out};
use crate::verbs;

/// `struct ibv_srq *ibv_create_srq(struct ibv_pd *, struct ibv_srq_init_attr *)`: NULL with
/// errno on failure; the attributes the SRQ got are written back.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `init` is NULL or valid for reading and writing a `struct ibv_srq_init_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_srq(
    pd: *mut IbvPd,
    init: *mut IbvSrqInitAttr,
) -> *mut IbvSrq {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller passes a struct ibv_srq_init_attr.
        null_on_err(unsafe { read_in(init) }.and_then(|i| {
            verbs::create_srq(pd as usize, i.srq_context, i.attr).map(|(srq, got)| {
                // SAFETY: as above; only the attr member is written.
                unsafe { std::ptr::addr_of_mut!((*init).attr).write_unaligned(got) };
                srq
            })
        }))
    })
}

/// `int ibv_modify_srq(struct ibv_srq *, struct ibv_srq_attr *, int mask)`: an errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for reading a `struct ibv_srq_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_modify_srq(
    srq: *mut IbvSrq,
    attr: *mut IbvSrqAttr,
    mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        if attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller passes a struct ibv_srq_attr.
        let a = unsafe { attr.read_unaligned() };
        errno_ret(verbs::modify_srq(srq as usize, a, mask))
    })
}

/// `int ibv_query_srq(struct ibv_srq *, struct ibv_srq_attr *)`: an errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for writing a `struct ibv_srq_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_srq(srq: *mut IbvSrq, attr: *mut IbvSrqAttr) -> c_int {
    guard(libc::EIO, || {
        errno_ret(verbs::query_srq(srq as usize).and_then(|a| {
            // SAFETY: the caller passes a struct ibv_srq_attr.
            unsafe { write_out(attr, a) }
        }))
    })
}

/// `int ibv_destroy_srq(struct ibv_srq *)`: an errno value (`EBUSY` while a QP uses it).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_srq(srq: *mut IbvSrq) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_srq(srq as usize)))
}
