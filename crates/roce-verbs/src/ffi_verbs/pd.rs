//! Protection domains and what lives in one: `ibv_alloc_pd`, the memory regions
//! (`ibv_reg_mr` and its `_iova` forms), and the address handles (`ibv_create_ah`).

use std::ffi::{c_int, c_uint, c_void};

use super::null_on_err;
use crate::abi::{IbvAh, IbvAhAttr, IbvContext, IbvMr, IbvPd};
use crate::ffi::{errno_ret, guard, read_in};
use crate::memory::CallerMemory;
use crate::state::Errno;
use crate::verbs;

/// `struct ibv_pd *ibv_alloc_pd(struct ibv_context *)`: NULL with errno on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_alloc_pd(context: *mut IbvContext) -> *mut IbvPd {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::alloc_pd(context as usize))
    })
}

/// `int ibv_dealloc_pd(struct ibv_pd *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dealloc_pd(pd: *mut IbvPd) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::dealloc_pd(pd as usize)))
}

/// `struct ibv_mr *ibv_reg_mr(struct ibv_pd *, void *addr, size_t length, int access)`.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `[addr, addr + length)` is the program's memory, mapped until `ibv_dereg_mr`, which
/// the device reads and writes meanwhile (the libibverbs contract of a registration).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut IbvMr {
    // SAFETY: forwarded; the region is named by its own address.
    unsafe { ibv_reg_mr_iova(pd, addr, length, addr as u64, access) }
}

/// `struct ibv_mr *ibv_reg_mr_iova(pd, addr, length, uint64_t iova, int access)`.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `[addr, addr + length)` as for `ibv_reg_mr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut IbvMr {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the program keeps `[addr, addr + length)` mapped and leaves it to the device
        // until `ibv_dereg_mr` (the contract of ibv_reg_mr, this function's).
        let memory = unsafe { CallerMemory::new(addr as usize, length) };
        // A NULL or wrapping range is EINVAL.
        let memory = memory.ok_or(Errno(libc::EINVAL));
        null_on_err(memory.and_then(|m| verbs::reg_mr(pd as usize, m, iova, access)))
    })
}

/// `struct ibv_mr *ibv_reg_mr_iova2(pd, addr, length, uint64_t iova, unsigned access)`: what
/// the header's `ibv_reg_mr` macro calls when the access flags are not a constant.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `[addr, addr + length)` as for `ibv_reg_mr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut IbvMr {
    // SAFETY: forwarded.
    unsafe { ibv_reg_mr_iova(pd, addr, length, iova, access as c_int) }
}

/// `int ibv_dereg_mr(struct ibv_mr *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dereg_mr(mr: *mut IbvMr) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::dereg_mr(mr as usize)))
}

/// `struct ibv_ah *ibv_create_ah(struct ibv_pd *, struct ibv_ah_attr *)`: NULL with errno
/// (`EINVAL` without a GRH or from a GID other than 1).
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for reading a `struct ibv_ah_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_ah(pd: *mut IbvPd, attr: *mut IbvAhAttr) -> *mut IbvAh {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller passes a struct ibv_ah_attr.
        null_on_err(unsafe { read_in(attr) }.and_then(|a| verbs::create_ah(pd as usize, &a)))
    })
}

/// `int ibv_destroy_ah(struct ibv_ah *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_ah(ah: *mut IbvAh) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_ah(ah as usize)))
}
