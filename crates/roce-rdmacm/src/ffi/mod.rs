//! The exported functions that do something (the rest are in `stubs.rs`).
//!
//! The `unsafe` face of the crate: each function checks its pointers for NULL, finds the
//! object it was given in `state.rs` (an address this library did not hand out is `EINVAL`),
//! reads the caller's structures by value and writes results back whole. A panic becomes an
//! error return with `errno = EIO` ([`guard`]). Return conventions are librdmacm 44's: 0 or
//! -1 with `errno`, NULL with `errno`, getaddrinfo codes for `rdma_getaddrinfo`.
//!
//! # Safety
//! The exported functions are `unsafe`: only C calls them, with the contract of the librdmacm
//! function of the same name (pointers valid for what that function reads or writes).
//!
//! Here: the conventions every function shares and the event channels; by family, `ids`
//! (ids and their QPs), `devices` (the device list and `rdma_getaddrinfo`) and `connect`
//! (endpoints and connections).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void};
use std::net::SocketAddr;

use crate::Errno;
use crate::abi::{RdmaCmEvent, RdmaCmId, RdmaEventChannel, SockaddrStorage};
use crate::state::{EINVAL, with};
use crate::{addr, state, strings};

mod connect;
mod devices;
pub(crate) mod gai;
mod ids;

pub(crate) use roce_cabi::os::{guard, set_errno, set_nonblocking};

/// For the calls that return nothing: errno set on a failure.
fn set_errno_on(r: Result<(), Errno>) {
    let _ = ret(r);
}

/// 0, or -1 with `errno`.
fn ret(r: Result<(), Errno>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(Errno(e)) => {
            set_errno(e);
            -1
        }
    }
}

/// Runs `f` and writes what it makes to `out`: 0, or -1 with `errno` (`EINVAL` for a NULL
/// `out`, before `f` runs).
///
/// # Safety
/// `out` is NULL or valid for a write.
unsafe fn into_out<T>(out: *mut T, f: impl FnOnce() -> Result<T, Errno>) -> c_int {
    guard(-1, || {
        ret((|| {
            if out.is_null() {
                return Err(EINVAL);
            }
            let value = f()?;
            // SAFETY: checked non-NULL; by the caller's contract.
            unsafe { out.write(value) };
            Ok(())
        })())
    })
}

/// The id at `id` if it is one of ours.
fn known_id(id: *mut RdmaCmId) -> Result<usize, Errno> {
    let a = id as usize;
    with(|t| t.ids.contains_key(&a)).then_some(a).ok_or(EINVAL)
}

/// A caller's `struct sockaddr *`: the family first (2 bytes), then `sockaddr_in` for
/// `AF_INET` or `sockaddr_in6` for `AF_INET6` (other families are `EAFNOSUPPORT`; NULL is
/// `EINVAL`).
///
/// # Safety
/// `sa` is NULL or points to a socket address of the family it names.
unsafe fn read_sockaddr(sa: *const c_void) -> Result<SocketAddr, Errno> {
    if sa.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: every sockaddr starts with its 2-byte family.
    let family = unsafe { sa.cast::<u16>().read_unaligned() };
    let len = match family {
        addr::AF_INET => addr::SOCKADDR_IN_LEN,
        addr::AF_INET6 => addr::SOCKADDR_IN6_LEN,
        _ => return Err(Errno(libc::EAFNOSUPPORT)),
    } as usize;
    let mut s = SockaddrStorage {
        family,
        ..SockaddrStorage::default()
    };
    // SAFETY: an address of this family is `len` bytes (16 or 28), the family first; s has
    // room for the rest.
    let bytes = unsafe { std::slice::from_raw_parts(sa.cast::<u8>(), len) };
    s.data[..len - 2].copy_from_slice(&bytes[2..]);
    addr::from_storage(&s)
}

/// Called once, when the device is first opened (after libibverbs registered its own at-exit,
/// so this one runs first): at exit, every id's connection and listener is closed as the
/// kernel closes them with the process's rdma_cm file (`conn::close_all`); libibverbs's
/// at-exit then lets the NIC send the DREQs and REJs before the process ends.
///
/// Only in the process that opened the device: a child of `fork()` shares the kernel's
/// rdma_cm file with its parent, whose ids stay up when the child exits (and the child has no
/// NIC thread to send anything).
pub(crate) fn register_at_exit() {
    use std::sync::atomic::{AtomicI32, Ordering};
    static PID: AtomicI32 = AtomicI32::new(0);
    extern "C" fn at_exit() {
        // SAFETY: getpid cannot fail.
        if unsafe { libc::getpid() } == PID.load(Ordering::Relaxed) {
            guard((), crate::conn::close_all);
        }
    }
    // SAFETY: getpid cannot fail.
    PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    // SAFETY: registering a function that takes and returns nothing; a failure (ENOMEM) only
    // loses the disconnections at exit.
    let _ = unsafe { libc::atexit(at_exit) };
}

// ---- event channels and events -------------------------------------------------------------

/// `struct rdma_event_channel *rdma_create_event_channel(void)`: NULL with errno.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_create_event_channel() -> *mut RdmaEventChannel {
    guard(std::ptr::null_mut(), || {
        state::create_channel().unwrap_or_else(|Errno(e)| {
            set_errno(e);
            std::ptr::null_mut()
        })
    })
}

/// `void rdma_destroy_event_channel(struct rdma_event_channel *)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_event_channel(channel: *mut RdmaEventChannel) {
    guard((), || {
        set_errno_on(state::destroy_channel(channel as usize));
    });
}

/// `int rdma_get_cm_event(struct rdma_event_channel *, struct rdma_cm_event **)`.
///
/// # Safety
/// `event` is NULL or valid for a pointer write.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut RdmaEventChannel,
    event: *mut *mut RdmaCmEvent,
) -> c_int {
    // SAFETY: by the caller's contract.
    unsafe { into_out(event, || state::get_event(channel as usize)) }
}

/// `int rdma_ack_cm_event(struct rdma_cm_event *)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_ack_cm_event(event: *mut RdmaCmEvent) -> c_int {
    guard(-1, || ret(state::ack_event(event as usize)))
}

/// `const char *rdma_event_str(enum rdma_cm_event_type)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_event_str(event: c_int) -> *const c_char {
    strings::event_str(event).as_ptr()
}
