//! Queries of the device and its port: attributes, GIDs and their table, P_Keys.

use std::ffi::{c_int, c_uint};

use super::{errno_ret, guard, minus1_ret, port_ok, write_out, write_prefix};
use crate::abi::{
    self, IbvContext, IbvDeviceAttr, IbvDeviceAttrEx, IbvGid, IbvGidEntry, IbvPortAttr,
};
use crate::device::{self, GID_TABLE_LEN};
use crate::state::{self, Errno};

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
