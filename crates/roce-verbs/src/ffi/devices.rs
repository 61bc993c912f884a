//! The device list and the device: `ibv_get_device_list` and its entries, `ibv_open_device`
//! and `ibv_close_device`, and a context's asynchronous events.

use std::ffi::{c_char, c_int, c_void};

use super::query::{query_device_ex, query_port_ex};
use super::{guard, minus1_ret, set_errno, write_out};
use crate::abi::{IbvAsyncEvent, IbvContext, IbvDevice};
use crate::state::{self, Errno};

/// `struct ibv_device **ibv_get_device_list(int *num_devices)`: a NULL-terminated array from
/// `malloc`, freed by `ibv_free_device_list`; NULL with errno on failure (a bad environment
/// variable: `EINVAL`). No `ROCE_VERBS_IP`: an empty list.
///
/// # Safety
/// `num_devices` is NULL or valid for writing an `int`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_get_device_list(
    num_devices: *mut c_int,
) -> *mut *mut IbvDevice {
    guard(std::ptr::null_mut(), || {
        let dev = match state::device() {
            Ok(d) => d,
            Err(Errno(e)) => {
                set_errno(e);
                return std::ptr::null_mut();
            }
        };
        let n = usize::from(dev.is_some());
        // SAFETY: calloc of n + 1 pointers; checked for NULL below.
        let list =
            unsafe { libc::calloc(n + 1, size_of::<*mut IbvDevice>()) }.cast::<*mut IbvDevice>();
        if list.is_null() {
            set_errno(libc::ENOMEM);
            return list;
        }
        if let Some(d) = dev {
            // SAFETY: the array has n + 1 = 2 slots; slot 1 stays NULL from calloc.
            unsafe { *list = d.c_device.ptr() };
        }
        if !num_devices.is_null() {
            // SAFETY: the caller passes NULL or a valid int.
            unsafe { *num_devices = n as c_int };
        }
        list
    })
}

/// `void ibv_free_device_list(struct ibv_device **list)`.
///
/// # Safety
/// `list` is NULL or a list `ibv_get_device_list` returned, not freed yet.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_free_device_list(list: *mut *mut IbvDevice) {
    guard((), || {
        // SAFETY: `list` came from ibv_get_device_list's calloc (or is NULL: free ignores it).
        unsafe { libc::free(list.cast()) }
    });
}

/// `const char *ibv_get_device_name(struct ibv_device *device)`: NULL with `EINVAL` for a
/// device that is not ours.
///
/// # Safety
/// `device` is NULL or an entry of a list from `ibv_get_device_list` (checked: others give NULL).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_get_device_name(device: *mut IbvDevice) -> *const c_char {
    guard(std::ptr::null(), || {
        match state::device_at(device as usize) {
            // SAFETY: the device is ours and lives for the process; taking a field address.
            Ok(d) => unsafe { (&raw const (*d.c_device.ptr()).name).cast::<c_char>() },
            Err(Errno(e)) => {
                set_errno(e);
                std::ptr::null()
            }
        }
    })
}

/// `__be64 ibv_get_device_guid(struct ibv_device *device)`: 0 with `EINVAL` for a device that
/// is not ours.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_device_guid(device: *mut IbvDevice) -> u64 {
    guard(0, || match state::device_at(device as usize) {
        Ok(d) => d.model.node_guid().to_be(),
        Err(Errno(e)) => {
            set_errno(e);
            0
        }
    })
}

/// `int ibv_get_device_index(struct ibv_device *device)`: 0, or -1 for a device not ours.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_device_index(device: *mut IbvDevice) -> c_int {
    guard(-1, || match state::device_at(device as usize) {
        Ok(_) => 0,
        Err(_) => -1,
    })
}

/// `struct ibv_context *ibv_open_device(struct ibv_device *device)`: NULL with errno on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_open_device(device: *mut IbvDevice) -> *mut IbvContext {
    guard(std::ptr::null_mut(), || {
        match state::open(device as usize, context_fns()) {
            Ok(ctx) => ctx,
            Err(Errno(e)) => {
                set_errno(e);
                std::ptr::null_mut()
            }
        }
    })
}

/// The functions a context's inline verbs call.
fn context_fns() -> state::ContextFns {
    use crate::ffi_verbs as v;
    state::ContextFns {
        query_port: query_port_ex,
        query_device_ex,
        poll_cq: v::poll_cq as *const c_void,
        req_notify_cq: v::req_notify_cq as *const c_void,
        post_send: v::post_send as *const c_void,
        post_recv: v::post_recv as *const c_void,
        post_srq_recv: v::post_srq_recv as *const c_void,
        create_qp_ex: crate::ffi_ex::create_qp_ex as *const c_void,
        create_cq_ex: crate::ffi_ex::create_cq_ex as *const c_void,
        alloc_mw: v::alloc_mw as *const c_void,
        bind_mw: v::bind_mw as *const c_void,
        dealloc_mw: v::dealloc_mw as *const c_void,
    }
}

/// `int ibv_close_device(struct ibv_context *context)`: 0, or -1 with `EINVAL` for a context
/// that is not open.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_close_device(context: *mut IbvContext) -> c_int {
    guard(-1, || minus1_ret(state::close(context as usize)))
}

/// `int ibv_get_async_event(struct ibv_context *, struct ibv_async_event *)`: 0 with the next
/// event of the context, after blocking on its `async_fd` (`EAGAIN` at once on a non-blocking
/// fd), or -1 with errno.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `event` is NULL or valid for writing a `struct ibv_async_event`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_get_async_event(
    context: *mut IbvContext,
    event: *mut IbvAsyncEvent,
) -> c_int {
    guard(-1, || {
        if event.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        minus1_ret(
            crate::verbs::next_async_event(context as usize).and_then(|got| {
                // SAFETY: the caller passes a struct ibv_async_event.
                unsafe { write_out(event, got) }
            }),
        )
    })
}

/// `void ibv_ack_async_event(struct ibv_async_event *)`: counted in the element's
/// `events_completed`, as libibverbs does.
///
/// # Safety
/// `event` is NULL or valid for reading a `struct ibv_async_event`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_ack_async_event(event: *mut IbvAsyncEvent) {
    guard((), || {
        if event.is_null() {
            return;
        }
        // SAFETY: the caller passes the event ibv_get_async_event filled.
        let e = unsafe { event.read_unaligned() };
        crate::verbs::ack_async_event(e.element as usize, e.event_type);
    })
}
