//! The `ibv_*` functions of roce-emu's `libibverbs.so.1` this library calls, and safe
//! wrappers over them. The link is dynamic (`-l:libibverbs.so.1` from roce-verbs-so's
//! directory, see build.rs): the process has one libibverbs, one NIC, whichever of the two
//! libraries the program calls.
//!
//! Every wrapper passes pointers that libibverbs handed out (a context, PD, CQ or QP) or
//! structures of this module's own stack; libibverbs checks the objects against its tables.

#![allow(unsafe_code)]

use std::ffi::c_int;
use std::net::Ipv4Addr;
use std::sync::Mutex;

use crate::Errno;
use crate::abi::{IbvGid, IbvPortAttrHead, IbvQpAttr, IbvQpInitAttr, Opaque};

unsafe extern "C" {
    fn ibv_get_device_list(num: *mut c_int) -> *mut *mut Opaque;
    fn ibv_free_device_list(list: *mut *mut Opaque);
    fn ibv_open_device(dev: *mut Opaque) -> *mut Opaque;
    fn ibv_query_gid(ctx: *mut Opaque, port: u8, index: c_int, gid: *mut IbvGid) -> c_int;
    fn ibv_query_port(ctx: *mut Opaque, port: u8, attr: *mut IbvPortAttrHead) -> c_int;
    fn ibv_alloc_pd(ctx: *mut Opaque) -> *mut Opaque;
    fn ibv_dealloc_pd(pd: *mut Opaque) -> c_int;
    fn ibv_create_cq(
        ctx: *mut Opaque,
        cqe: c_int,
        cq_context: *mut Opaque,
        channel: *mut Opaque,
        comp_vector: c_int,
    ) -> *mut Opaque;
    fn ibv_destroy_cq(cq: *mut Opaque) -> c_int;
    fn ibv_create_qp(pd: *mut Opaque, attr: *mut IbvQpInitAttr) -> *mut Opaque;
    fn ibv_modify_qp(qp: *mut Opaque, attr: *mut IbvQpAttr, mask: c_int) -> c_int;
    fn ibv_destroy_qp(qp: *mut Opaque) -> c_int;
}

fn errno() -> Errno {
    Errno(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

/// The one device of roce-emu's libibverbs, opened once and kept open (librdmacm keeps its
/// device contexts for the life of the process too).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Device {
    /// The `ibv_context` (an address).
    pub(crate) ctx: usize,
    /// Its IPv4 address (GID 1, `::ffff:a.b.c.d`).
    pub(crate) ip: Ipv4Addr,
    /// The port's active MTU (`enum ibv_mtu`).
    pub(crate) active_mtu: u8,
}

static DEVICE: Mutex<Option<Device>> = Mutex::new(None);

/// The device, opened on first use: `ENODEV` when libibverbs lists none (no `ROCE_VERBS_IP`).
pub(crate) fn device() -> Result<Device, Errno> {
    let mut slot = DEVICE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(d) = *slot {
        return Ok(d);
    }
    let mut n: c_int = 0;
    // SAFETY: n is a valid out-parameter; the list is freed below, after its first entry was
    // opened (a context outlives the list, as in libibverbs).
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(errno());
    }
    // SAFETY: a non-NULL list holds n entries and a NULL terminator.
    let first = if n > 0 {
        unsafe { *list }
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: first is an entry of the list (or NULL, not passed on).
    let ctx = (!first.is_null()).then(|| unsafe { ibv_open_device(first) });
    // SAFETY: the list came from ibv_get_device_list.
    unsafe { ibv_free_device_list(list) };
    let ctx = match ctx {
        Some(c) if !c.is_null() => c,
        Some(_) => return Err(errno()),
        None => return Err(Errno(libc::ENODEV)),
    };
    let mut gid = IbvGid::default();
    // SAFETY: ctx is open; gid is ours.
    if unsafe { ibv_query_gid(ctx, 1, 1, &mut gid) } != 0 {
        return Err(errno());
    }
    let ip = gid.to_ipv4().ok_or(Errno(libc::ENODEV))?;
    let mut port = IbvPortAttrHead::default();
    // SAFETY: ctx is open; port is larger than the compat struct the exported function fills.
    let active_mtu = if unsafe { ibv_query_port(ctx, 1, &mut port) } == 0 {
        u8::try_from(port.active_mtu).unwrap_or(3)
    } else {
        3 // IBV_MTU_1024
    };
    let d = Device {
        ctx: ctx as usize,
        ip,
        active_mtu,
    };
    *slot = Some(d);
    Ok(d)
}

/// `ibv_alloc_pd` on the device.
pub(crate) fn alloc_pd(ctx: usize) -> Result<usize, Errno> {
    // SAFETY: ctx is the device's open context (from `device()`).
    let pd = unsafe { ibv_alloc_pd(ctx as *mut Opaque) };
    if pd.is_null() {
        Err(errno())
    } else {
        Ok(pd as usize)
    }
}

/// `ibv_dealloc_pd`.
pub(crate) fn dealloc_pd(pd: usize) {
    // SAFETY: libibverbs checks the PD against its table.
    unsafe { ibv_dealloc_pd(pd as *mut Opaque) };
}

/// `ibv_create_cq` with `cqe` entries, no channel.
pub(crate) fn create_cq(ctx: usize, cqe: u32) -> Result<usize, Errno> {
    let cqe = c_int::try_from(cqe.max(1)).map_err(|_| Errno(libc::EINVAL))?;
    // SAFETY: ctx is the device's context; NULL context and channel are allowed.
    let cq = unsafe {
        ibv_create_cq(
            ctx as *mut Opaque,
            cqe,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if cq.is_null() {
        Err(errno())
    } else {
        Ok(cq as usize)
    }
}

/// `ibv_destroy_cq`.
pub(crate) fn destroy_cq(cq: usize) {
    // SAFETY: libibverbs checks the CQ against its table.
    unsafe { ibv_destroy_cq(cq as *mut Opaque) };
}

/// `ibv_create_qp(pd, attr)`; libibverbs writes the granted capabilities back into `attr`.
pub(crate) fn create_qp(pd: usize, attr: &mut IbvQpInitAttr) -> Result<usize, Errno> {
    // SAFETY: attr is a live structure; libibverbs checks pd and the CQs in attr.
    let qp = unsafe { ibv_create_qp(pd as *mut Opaque, attr) };
    if qp.is_null() {
        Err(errno())
    } else {
        Ok(qp as usize)
    }
}

/// `ibv_modify_qp`: its errno value on failure.
pub(crate) fn modify_qp(qp: usize, mut attr: IbvQpAttr, mask: c_int) -> Result<(), Errno> {
    // SAFETY: attr is ours; libibverbs checks the QP.
    match unsafe { ibv_modify_qp(qp as *mut Opaque, &mut attr, mask) } {
        0 => Ok(()),
        e => Err(Errno(e)),
    }
}

/// `ibv_destroy_qp`.
pub(crate) fn destroy_qp(qp: usize) -> Result<(), Errno> {
    // SAFETY: libibverbs checks the QP against its table.
    match unsafe { ibv_destroy_qp(qp as *mut Opaque) } {
        0 => Ok(()),
        e => Err(Errno(e)),
    }
}
