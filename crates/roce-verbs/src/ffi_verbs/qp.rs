//! Queue pairs: `ibv_create_qp` (the capabilities it got written back), `ibv_modify_qp`,
//! `ibv_query_qp`, `ibv_destroy_qp`.

use std::ffi::c_int;

use super::null_on_err;
use crate::abi::{IbvPd, IbvQp, IbvQpAttr, IbvQpInitAttr};
use crate::ffi::{errno_ret, guard, read_in, write_out};
use crate::ffi_ex::wr_fns;
use crate::state::Errno;
use crate::verbs;

/// `struct ibv_qp *ibv_create_qp(struct ibv_pd *, struct ibv_qp_init_attr *)`: writes the
/// capabilities the QP got into `init_attr->cap`.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `init_attr` is NULL or valid for reading and writing a `struct ibv_qp_init_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_qp(
    pd: *mut IbvPd,
    init_attr: *mut IbvQpInitAttr,
) -> *mut IbvQp {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller passes a struct ibv_qp_init_attr.
        null_on_err(unsafe { read_in(init_attr) }.and_then(|init| {
            verbs::create_qp(pd as usize, init, wr_fns()).map(|(qp, cap)| {
                // SAFETY: as above; only the cap field is written.
                unsafe { (&raw mut (*init_attr).cap).write_unaligned(cap) };
                qp
            })
        }))
    })
}

/// `int ibv_destroy_qp(struct ibv_qp *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_qp(qp: *mut IbvQp) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_qp(qp as usize)))
}

/// `int ibv_modify_qp(struct ibv_qp *, struct ibv_qp_attr *, int attr_mask)`: an errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for reading a `struct ibv_qp_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_modify_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        if attr.is_null() {
            return errno_ret(Err(Errno(libc::EINVAL)));
        }
        // SAFETY: the caller passes a struct ibv_qp_attr.
        let a = unsafe { attr.read_unaligned() };
        errno_ret(verbs::modify_qp(qp as usize, &a, mask))
    })
}

/// `int ibv_query_qp(qp, struct ibv_qp_attr *, int attr_mask, struct ibv_qp_init_attr *)`.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` and `init_attr` are NULL or valid for writing a `struct ibv_qp_attr` and a
/// `struct ibv_qp_init_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    _mask: c_int,
    init_attr: *mut IbvQpInitAttr,
) -> c_int {
    guard(libc::EIO, || {
        errno_ret(verbs::query_qp(qp as usize).and_then(|(a, init)| {
            // SAFETY: the caller passes both structs.
            unsafe {
                write_out(attr, a)?;
                write_out(init_attr, init)
            }
        }))
    })
}
