//! The exported functions that do something (the rest are in `stubs.rs`).
//!
//! This is the `unsafe` face of the crate: each function checks its pointers for NULL, looks up
//! the object it was given in `state.rs` (an address the library did not hand out is `EINVAL`,
//! not a crash), and writes results through the caller's pointers, never more bytes than the
//! caller's size says. Every function runs its body under [`guard`]: a panic becomes an error
//! return with `errno = EIO` instead of unwinding into C (which would abort the program).
//! Return conventions follow libibverbs 44 (verbs.c, device.c): some functions return an errno
//! value, some -1 with `errno` set, some NULL with `errno` set; each says which.
//!
//! # Safety
//! The exported functions are `unsafe`: only C calls them, with the contract of the libibverbs
//! function of the same name (pointers valid for what that function reads or writes). Pointers
//! to objects this library made are checked against its tables before use.

#![allow(unsafe_code)]

use std::ffi::c_int;

use crate::device;
use crate::state::Errno;

mod devices;
mod exit;
mod query;
mod strings_rates;
mod sysfs_fork;

pub(crate) use exit::{register_at_exit, write_stats_on_fatal_signals};

pub(crate) use roce_cabi::os::{guard, set_errno, set_nonblocking};

/// For functions that return an errno value (0 on success): also sets `errno`.
pub(crate) fn errno_ret(r: Result<(), Errno>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(Errno(e)) => {
            set_errno(e);
            e
        }
    }
}

/// For functions that return 0 or -1 with `errno` set.
pub(crate) fn minus1_ret(r: Result<(), Errno>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(Errno(e)) => {
            set_errno(e);
            -1
        }
    }
}

/// Writes the first `len` bytes of `value` to `dst` (all of it if `len` is larger).
///
/// # Safety
/// `dst` is NULL or valid for writes of `min(len, size_of::<T>())` bytes, as the C caller
/// promises by passing it with that size.
pub(crate) unsafe fn write_prefix<T: Copy>(
    dst: *mut T,
    value: &T,
    len: usize,
) -> Result<(), Errno> {
    if dst.is_null() {
        return Err(Errno(libc::EINVAL));
    }
    let n = len.min(size_of::<T>());
    // SAFETY: by the caller's contract; `value` is a live T, and the regions cannot overlap
    // (value is ours, on the stack).
    unsafe { std::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), dst.cast::<u8>(), n) };
    Ok(())
}

/// A copy of the caller's structure at `src`: `EINVAL` for NULL.
///
/// # Safety
/// `src` is NULL or valid for one read of `T`.
pub(crate) unsafe fn read_in<T: Copy>(src: *const T) -> Result<T, Errno> {
    if src.is_null() {
        return Err(Errno(libc::EINVAL));
    }
    // SAFETY: by the caller's contract.
    Ok(unsafe { src.read_unaligned() })
}

/// Writes `value` to `dst` whole.
///
/// # Safety
/// `dst` is NULL or valid for a write of a `T`.
pub(crate) unsafe fn write_out<T: Copy>(dst: *mut T, value: T) -> Result<(), Errno> {
    // SAFETY: forwarded.
    unsafe { write_prefix(dst, &value, size_of::<T>()) }
}

fn port_ok(port: u32) -> Result<(), Errno> {
    if port == u32::from(device::PORT) {
        Ok(())
    } else {
        Err(Errno(libc::EINVAL))
    }
}
