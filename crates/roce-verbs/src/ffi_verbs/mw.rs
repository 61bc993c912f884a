//! Memory windows: the context's `ops.alloc_mw`, `ops.dealloc_mw` and `ops.bind_mw`.

use std::ffi::c_int;

use crate::abi::{IbvMw, IbvMwBind, IbvPd, IbvQp};
use crate::ffi::{errno_ret, guard, read_in, set_errno};
use crate::state::Errno;
use crate::verbs;

/// `ops.alloc_mw`, what the header's `ibv_alloc_mw` calls: NULL with errno (`EINVAL`) for a
/// PD not ours or a type other than 1 and 2.
pub(crate) extern "C" fn alloc_mw(pd: *mut IbvPd, mw_type: c_int) -> *mut IbvMw {
    guard(std::ptr::null_mut(), || {
        match verbs::alloc_mw(pd as usize, mw_type) {
            Ok(mw) => mw,
            Err(Errno(e)) => {
                set_errno(e);
                std::ptr::null_mut()
            }
        }
    })
}

/// `ops.dealloc_mw`, what the header's `ibv_dealloc_mw` calls: an errno value.
pub(crate) extern "C" fn dealloc_mw(mw: *mut IbvMw) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::dealloc_mw(mw as usize)))
}

/// `ops.bind_mw`, what the header's `ibv_bind_mw` calls for a type 1 window: an errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `mw_bind` is NULL or valid for reading a `struct ibv_mw_bind`.
pub(crate) unsafe extern "C" fn bind_mw(
    qp: *mut IbvQp,
    mw: *mut IbvMw,
    mw_bind: *mut IbvMwBind,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the caller's struct ibv_mw_bind, as ibv_bind_mw passes it.
        let bind = match unsafe { read_in(mw_bind) } {
            Ok(b) => b,
            Err(e) => return errno_ret(Err(e)),
        };
        errno_ret(verbs::bind_mw(qp as usize, mw as usize, &bind))
    })
}
