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

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

use crate::abi::{
    self, IbvAsyncEvent, IbvContext, IbvDevice, IbvDeviceAttr, IbvDeviceAttrEx, IbvGid,
    IbvGidEntry, IbvPortAttr,
};
use crate::device::{self, GID_TABLE_LEN};
use crate::state::{self, Errno};
use crate::strings;

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

// ---- devices -------------------------------------------------------------------------------

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

/// Called once, at the first `ibv_open_device`: counters are written at exit too, for programs
/// that exit without closing their device.
pub(crate) fn register_at_exit() {
    extern "C" fn at_exit() {
        guard((), crate::cm::flush);
        // ACKs left for a post the program did not make before it returned from main.
        guard((), || {
            if let Ok(engine) = state::running_engine() {
                engine.device.flush();
            }
        });
        guard((), state::write_stats);
    }
    // SAFETY: registering a function that takes and returns nothing; a failure (ENOMEM) only
    // loses the at-exit write.
    let _ = unsafe { libc::atexit(at_exit) };
}

/// With `ROCE_VERBS_STATS` (`roce exec --stats`): a program that Ctrl-C, SIGTERM or SIGHUP ends
/// by the signal's default action still leaves its counters. For each of those signals whose
/// action the program left at the default when it opened the device, a handler writes the
/// signal's number to a pipe (all a handler may safely do); a thread reads it, writes the
/// counters, restores the default action and sends the signal again, so that the program ends
/// as it would have, by that signal, a few milliseconds later. A program that catches the
/// signal itself is not touched (it exits its own way, and the at-exit write runs). In a child
/// of `fork()`, where the thread does not exist, the handler restores the default and
/// re-raises at once.
pub(crate) fn write_stats_on_fatal_signals() {
    use std::io::Read as _;
    use std::os::fd::IntoRawFd as _;
    use std::sync::atomic::{AtomicI32, Ordering};

    static PIPE: AtomicI32 = AtomicI32::new(-1);
    static PID: AtomicI32 = AtomicI32::new(0);
    const SIGNALS: [c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    /// Restores `sig`'s default action and sends it to this process (both async-signal-safe).
    fn die_by(sig: c_int) {
        // SAFETY: resetting a signal's action to the default and sending it to ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig);
        }
    }

    extern "C" fn on_signal(sig: c_int) {
        // SAFETY: getpid and write are async-signal-safe; the byte lives on this stack.
        if unsafe { libc::getpid() } != PID.load(Ordering::Relaxed) {
            die_by(sig);
            return;
        }
        let byte = sig as u8;
        // SAFETY: writing one byte from a live local to the pipe's write end.
        unsafe { libc::write(PIPE.load(Ordering::Relaxed), (&raw const byte).cast(), 1) };
    }

    let Ok((mut reader, writer)) = std::io::pipe() else {
        return;
    };
    PIPE.store(writer.into_raw_fd(), Ordering::Relaxed);
    // SAFETY: getpid cannot fail.
    PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name("roce-verbs-signals".into())
        .spawn(move || {
            let mut byte = [0u8];
            if reader.read_exact(&mut byte).is_ok() {
                guard((), state::write_stats);
                die_by(c_int::from(byte[0]));
            }
        });
    if spawned.is_err() {
        return;
    }
    for sig in SIGNALS {
        // SAFETY: sigaction reads and writes the plain C structs given; the handler only calls
        // async-signal-safe functions.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

// ---- queries -------------------------------------------------------------------------------

/// `int ibv_query_device(struct ibv_context *, struct ibv_device_attr *)`: an errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for writing a `struct ibv_device_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_device(
    context: *mut IbvContext,
    attr: *mut IbvDeviceAttr,
) -> c_int {
    guard(libc::EIO, || {
        errno_ret(state::context(context as usize).and_then(|d| {
            // SAFETY: the caller passes a struct ibv_device_attr.
            unsafe { write_out(attr, d.model.device_attr()) }
        }))
    })
}

/// `verbs_context.query_device_ex`: what the header's inline `ibv_query_device_ex` calls. As
/// libibverbs' `ibv_cmd_query_device_any` (rdma-core v44 libibverbs/cmd_device.c), which rxe's
/// provider calls (providers/rxe/rxe.c `rxe_query_device`): a non-zero `input->comp_mask` or a
/// size smaller than `struct ibv_device_attr` is `EINVAL`; the caller's `attr_size` bytes are
/// zeroed, then every field that fits in them is written. An errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `input` is unused; `attr` is NULL or valid for writing `attr_size` bytes.
pub(crate) unsafe extern "C" fn query_device_ex(
    context: *mut IbvContext,
    input: *const u32,
    attr: *mut IbvDeviceAttrEx,
    attr_size: usize,
) -> c_int {
    guard(libc::EIO, || {
        errno_ret(state::context(context as usize).and_then(|d| {
            // SAFETY: `input` is NULL or the caller's `struct ibv_query_device_ex_input`,
            // whose only field is the u32 `comp_mask`.
            if !input.is_null() && unsafe { input.read_unaligned() } != 0 {
                return Err(Errno(libc::EINVAL));
            }
            if attr.is_null() || attr_size < size_of::<IbvDeviceAttr>() {
                return Err(Errno(libc::EINVAL));
            }
            let n = attr_size.min(size_of::<IbvDeviceAttrEx>());
            // SAFETY: the caller's struct is `attr_size` bytes (its own sizeof); bytes past
            // ours are zeroed as libibverbs' memset(attr, 0, attr_size) does.
            unsafe {
                std::ptr::write_bytes(attr.cast::<u8>().add(n), 0, attr_size - n);
                write_prefix(attr, &d.model.device_attr_ex(), n)
            }
        }))
    })
}

fn query_port(context: *mut IbvContext, port: u8, attr: *mut IbvPortAttr, len: usize) -> c_int {
    errno_ret(state::context(context as usize).and_then(|d| {
        port_ok(u32::from(port))?;
        // SAFETY: the caller's struct is `len` bytes long (its own sizeof).
        unsafe { write_prefix(attr, &d.model.port_attr(), len) }
    }))
}

/// `int ibv_query_port(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *)`: the
/// exported, old-layout entry (48 bytes; the header's inline `ibv_query_port` calls
/// [`query_port_ex`] instead). An errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_query_port(
    context: *mut IbvContext,
    port: u8,
    attr: *mut IbvPortAttr,
) -> c_int {
    guard(libc::EIO, || {
        query_port(context, port, attr, abi::COMPAT_PORT_ATTR_LEN)
    })
}

/// `verbs_context.query_port`: writes `port_attr_len` bytes at most.
pub(crate) extern "C" fn query_port_ex(
    context: *mut IbvContext,
    port: u8,
    attr: *mut IbvPortAttr,
    port_attr_len: usize,
) -> c_int {
    guard(libc::EIO, || query_port(context, port, attr, port_attr_len))
}

/// `int ibv_query_gid(struct ibv_context *, uint8_t port, int index, union ibv_gid *)`: 0 or
/// -1 with errno. An empty slot of the table reads as the zero GID, as libibverbs returns it.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `gid` is NULL or valid for writing a `union ibv_gid`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_gid(
    context: *mut IbvContext,
    port: u8,
    index: c_int,
    gid: *mut IbvGid,
) -> c_int {
    guard(-1, || {
        minus1_ret(state::context(context as usize).and_then(|d| {
            port_ok(u32::from(port))?;
            if !(0..GID_TABLE_LEN).contains(&index) {
                return Err(Errno(libc::EINVAL));
            }
            let g = d.model.gid(index as u32).unwrap_or_default();
            // SAFETY: the caller passes a union ibv_gid.
            unsafe { write_out(gid, g) }
        }))
    })
}

/// `int _ibv_query_gid_ex(ctx, port, index, struct ibv_gid_entry *, flags, entry_size)`: an
/// errno value; `ENODATA` for an empty slot (as libibverbs).
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `entry` is NULL or valid for writing `entry_size` bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut IbvContext,
    port: u32,
    index: u32,
    entry: *mut IbvGidEntry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    guard(libc::EIO, || {
        errno_ret(state::context(context as usize).and_then(|d| {
            port_ok(port)?;
            if flags != 0 || index >= GID_TABLE_LEN as u32 {
                return Err(Errno(libc::EINVAL));
            }
            let e = d.model.gid_entry(index).ok_or(Errno(libc::ENODATA))?;
            // SAFETY: the caller's entry is `entry_size` bytes (its sizeof).
            unsafe { write_prefix(entry, &e, entry_size) }
        }))
    })
}

/// `ssize_t _ibv_query_gid_table(ctx, entries, max_entries, flags, entry_size)`: the number of
/// entries written, or -errno.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `entries` is NULL or valid for writing `max_entries` entries of `entry_size` bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut IbvContext,
    entries: *mut IbvGidEntry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    guard(-(libc::EIO as isize), || {
        let r = state::context(context as usize).and_then(|d| {
            if flags != 0 || entries.is_null() || entry_size < size_of::<IbvGidEntry>() {
                return Err(Errno(libc::EINVAL));
            }
            let mut n = 0;
            for index in 0..device::GID_COUNT {
                let Some(e) = d.model.gid_entry(index) else {
                    continue;
                };
                if n == max_entries {
                    return Err(Errno(libc::EINVAL));
                }
                // SAFETY: the caller's array holds max_entries entries of entry_size bytes.
                let slot =
                    unsafe { entries.cast::<u8>().add(n * entry_size) }.cast::<IbvGidEntry>();
                // SAFETY: as above.
                unsafe { write_prefix(slot, &e, entry_size)? };
                n += 1;
            }
            Ok(n as isize)
        });
        r.unwrap_or_else(|Errno(e)| -(e as isize))
    })
}

/// `int ibv_query_gid_type(ctx, uint8_t port, unsigned index, enum ibv_gid_type_sysfs *)`
/// (IBVERBS_PRIVATE_34; ibv_devinfo calls it): 0 or -1 with errno.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `ty` is NULL or valid for writing an `int`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_gid_type(
    context: *mut IbvContext,
    port: u8,
    index: c_uint,
    ty: *mut c_int,
) -> c_int {
    guard(-1, || {
        minus1_ret(state::context(context as usize).and_then(|d| {
            port_ok(u32::from(port))?;
            d.model.gid(index).ok_or(Errno(libc::EINVAL))?;
            // SAFETY: the caller passes an enum (int).
            unsafe { write_out(ty, abi::GID_TYPE_SYSFS_ROCE_V2) }
        }))
    })
}

/// `int ibv_query_pkey(ctx, uint8_t port, int index, __be16 *pkey)`: 0 or -1 with errno.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `pkey` is NULL or valid for writing a `__be16`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_pkey(
    context: *mut IbvContext,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard(-1, || {
        minus1_ret(state::context(context as usize).and_then(|_| {
            port_ok(u32::from(port))?;
            if index != 0 {
                return Err(Errno(libc::EINVAL));
            }
            // SAFETY: the caller passes a __be16.
            unsafe { write_out(pkey, device::DEFAULT_PKEY.to_be()) }
        }))
    })
}

/// `int ibv_get_pkey_index(ctx, uint8_t port, __be16 pkey)`: the index, or -1 with errno.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_pkey_index(
    context: *mut IbvContext,
    port: u8,
    pkey: u16,
) -> c_int {
    guard(-1, || {
        let r = state::context(context as usize).and_then(|_| {
            port_ok(u32::from(port))?;
            if u16::from_be(pkey) == device::DEFAULT_PKEY {
                Ok(())
            } else {
                Err(Errno(libc::ENOENT))
            }
        });
        minus1_ret(r)
    })
}

// ---- sysfs, fork ---------------------------------------------------------------------------

/// `int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)`: reads
/// `dir/file` as libibverbs does (a trailing newline becomes NUL); the bytes read, or -1.
/// The device's own paths are the kernel's (`/sys/class/infiniband/<name>`): `roce exec` mounts
/// a tree there (crate `sysfs`); without it, reads under them fail.
///
/// # Safety
/// `dir` and `file` are NULL or NUL-terminated strings; `buf` is NULL or valid for writing `size`
/// bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    guard(-1, || {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller passes NUL-terminated strings.
        let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        use std::os::unix::ffi::OsStrExt as _;
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(dir.to_bytes()))
            .join(std::ffi::OsStr::from_bytes(file.to_bytes()));
        match std::fs::read(&path) {
            Ok(mut bytes) => {
                bytes.truncate(size);
                let n = bytes.len();
                if bytes.last() == Some(&b'\n') {
                    bytes[n - 1] = 0;
                }
                // SAFETY: the caller's buffer holds `size` >= n bytes.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n) };
                n as c_int
            }
            Err(err) => {
                set_errno(err.raw_os_error().unwrap_or(libc::EIO));
                -1
            }
        }
    })
}

/// `const char *ibv_get_sysfs_path(void)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}

/// `int ibv_fork_init(void)`: 0. The device lives in this process; a forked child has the
/// memory but not the device's thread, so its verbs objects are unusable (as libibverbs says
/// of a child that did not re-open the device).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `enum ibv_fork_status ibv_is_fork_initialized(void)`: `IBV_FORK_UNNEEDED` (2).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}

/// `int ibv_dontfork_range(void *base, size_t size)`: 0 (nothing to protect: no DMA).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `int ibv_dofork_range(void *base, size_t size)`: 0.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `void verbs_register_driver_34(const struct verbs_device_ops *)` (IBVERBS_PRIVATE_34):
/// called by the constructors of libmlx5/libefa, which perftest's binaries load. Ignored: the
/// only device is ours.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn verbs_register_driver_34(_ops: *const c_void) {}

/// `bool verbs_allow_disassociate_destroy` (IBVERBS_PRIVATE_34, a variable).
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub(crate) static verbs_allow_disassociate_destroy: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

// ---- strings and rates ---------------------------------------------------------------------

/// `const char *ibv_wc_status_str(enum ibv_wc_status)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    strings::wc_status(status).as_ptr()
}

/// `const char *ibv_node_type_str(enum ibv_node_type)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    strings::node_type(node_type).as_ptr()
}

/// `const char *ibv_port_state_str(enum ibv_port_state)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_port_state_str(state: c_int) -> *const c_char {
    strings::port_state(state).as_ptr()
}

/// `const char *ibv_event_type_str(enum ibv_event_type)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    strings::event_type(event).as_ptr()
}

/// `int ibv_rate_to_mult(enum ibv_rate)`: -1 for an unknown rate.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    strings::rate_to_mult(rate)
}

/// `enum ibv_rate mult_to_ibv_rate(int mult)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    strings::mult_to_rate(mult)
}

/// `int ibv_rate_to_mbps(enum ibv_rate)`: -1 for an unknown rate.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    strings::rate_to_mbps(rate)
}

/// `enum ibv_rate mbps_to_ibv_rate(int mbps)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    strings::mbps_to_rate(mbps)
}
