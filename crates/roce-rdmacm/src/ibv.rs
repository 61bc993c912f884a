//! The `ibv_*` functions of roce-emu's `libibverbs.so.1` this library calls, and safe
//! wrappers over them. The link is dynamic (`-l:libibverbs.so.1` from roce-verbs-so's
//! directory, see build.rs): the process has one libibverbs, one NIC, whichever of the two
//! libraries the program calls.
//!
//! Every wrapper passes pointers that libibverbs handed out (a context, PD, CQ or QP) or
//! structures of this module's own stack; libibverbs checks the objects against its tables.

#![allow(unsafe_code)]

use std::ffi::c_int;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;

use roce_cabi::cm::{CmAccept, CmConnect, CmEventRecord, CmSink};

use crate::Errno;
use crate::abi::{IbvGid, IbvPortAttrHead, IbvQpAttr, IbvQpInitAttr, Opaque};
use crate::inbox::CmEvent;

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
    fn ibv_create_comp_channel(ctx: *mut Opaque) -> *mut Opaque;
    fn ibv_destroy_comp_channel(channel: *mut Opaque) -> c_int;
    fn roce_cm_listen(service_id: u64, listen: *mut u32) -> c_int;
    fn roce_cm_unlisten(listen: u32) -> c_int;
    fn roce_cm_connect(params: *const CmConnect, conn: *mut u32) -> c_int;
    fn roce_cm_accept(conn: u32, params: *const CmAccept) -> c_int;
    fn roce_cm_reject(conn: u32, data: *const u8, len: u32) -> c_int;
    fn roce_cm_disconnect(conn: u32) -> c_int;
    fn roce_cm_establish(conn: u32) -> c_int;
    fn roce_cm_init_qp_attr(
        conn: u32,
        state: c_int,
        attr: *mut IbvQpAttr,
        mask: *mut c_int,
    ) -> c_int;
    fn roce_cm_set_sink(sink: CmSink) -> c_int;
    fn roce_cm_sidr_resolve(params: *const CmConnect, conn: *mut u32) -> c_int;
    fn roce_cm_sidr_accept(
        conn: u32,
        qp: *mut Opaque,
        qkey: u32,
        data: *const u8,
        len: u32,
    ) -> c_int;
}

/// The errno libibverbs left.
fn errno() -> Errno {
    Errno(roce_cabi::os::errno())
}

/// The one device of roce-emu's libibverbs, opened once and kept open (librdmacm keeps its
/// device contexts for the life of the process too).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Device {
    /// The `ibv_context` (an address).
    pub(crate) ctx: usize,
    /// Its address (GID 1: `::ffff:a.b.c.d` for IPv4, or the IPv6 address).
    pub(crate) ip: IpAddr,
    /// GID 0, the link-local address of its interface (`fe80::`), which is the source for
    /// link-local destinations as on rxe.
    pub(crate) link_local: Ipv6Addr,
    /// The port's active MTU (`enum ibv_mtu`).
    pub(crate) active_mtu: u8,
}

impl Device {
    /// Whether `ip` is one of the device's addresses (GID 1's, or GID 0's).
    pub(crate) fn has(&self, ip: IpAddr) -> bool {
        ip == self.ip || ip == IpAddr::V6(self.link_local)
    }

    /// The source address of a connection to `dst`, as the kernel's route lookup picks it on
    /// rxe: GID 0 (the interface's link-local address, in `dst`'s scope) for a link-local
    /// destination, else the device's address.
    pub(crate) fn source_for(&self, dst: SocketAddr, port: u16) -> SocketAddr {
        match dst {
            SocketAddr::V6(d) if d.ip().is_unicast_link_local() => SocketAddr::V6(
                std::net::SocketAddrV6::new(self.link_local, port, 0, d.scope_id()),
            ),
            _ => SocketAddr::new(self.ip, port),
        }
    }
}

static DEVICE: Mutex<Option<Device>> = Mutex::new(None);

/// The device if it was opened already (nothing is opened here).
pub(crate) fn opened() -> Option<Device> {
    *DEVICE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

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
    let ip = gid.to_ip();
    let mut gid0 = IbvGid::default();
    // SAFETY: as above.
    if unsafe { ibv_query_gid(ctx, 1, 0, &mut gid0) } != 0 {
        return Err(errno());
    }
    let link_local = Ipv6Addr::from(gid0.raw);
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
        link_local,
        active_mtu,
    };
    // The engine's CM events come to this library from now on.
    // SAFETY: the sink is a function of ours, valid for the life of the process.
    match unsafe { roce_cm_set_sink(crate::inbox::sink) } {
        0 => {}
        e => return Err(Errno(e)),
    }
    *slot = Some(d);
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    AT_EXIT.call_once(crate::ffi::register_at_exit);
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

/// `ibv_create_cq` with `cqe` entries on the completion channel `channel` (0: none).
pub(crate) fn create_cq(ctx: usize, cqe: u32, channel: usize) -> Result<usize, Errno> {
    let cqe = c_int::try_from(cqe.max(1)).map_err(|_| Errno(libc::EINVAL))?;
    // SAFETY: ctx is the device's context; NULL context and channel are allowed.
    let cq = unsafe {
        ibv_create_cq(
            ctx as *mut Opaque,
            cqe,
            std::ptr::null_mut(),
            channel as *mut Opaque,
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

/// `ibv_create_comp_channel`.
pub(crate) fn create_comp_channel(ctx: usize) -> Result<usize, Errno> {
    // SAFETY: ctx is the device's open context.
    let ch = unsafe { ibv_create_comp_channel(ctx as *mut Opaque) };
    if ch.is_null() {
        Err(errno())
    } else {
        Ok(ch as usize)
    }
}

/// `ibv_destroy_comp_channel`.
pub(crate) fn destroy_comp_channel(channel: usize) {
    // SAFETY: libibverbs checks the channel against its table.
    unsafe { ibv_destroy_comp_channel(channel as *mut Opaque) };
}

fn code(e: c_int) -> Result<(), Errno> {
    match e {
        0 => Ok(()),
        e => Err(Errno(e)),
    }
}

/// Listens on an RDMA IP CM service ID: the listener's handle.
pub(crate) fn cm_listen(service_id: u64) -> Result<u32, Errno> {
    let mut h = 0;
    // SAFETY: h is ours.
    code(unsafe { roce_cm_listen(service_id, &mut h) }).map(|()| h)
}

/// Stops listening.
pub(crate) fn cm_unlisten(listen: u32) -> Result<(), Errno> {
    // SAFETY: a plain value.
    code(unsafe { roce_cm_unlisten(listen) })
}

/// Sends a REQ: the connection's handle. `p.private_data` points into `data`.
pub(crate) fn cm_connect(mut p: CmConnect, data: &[u8]) -> Result<u32, Errno> {
    p.private_data_len = u8::try_from(data.len()).map_err(|_| Errno(libc::EINVAL))?;
    p.private_data = data.as_ptr();
    let mut conn = 0;
    // SAFETY: p and data are live for the call; conn is ours.
    code(unsafe { roce_cm_connect(&p, &mut conn) }).map(|()| conn)
}

/// Sends a SIDR_REQ: the request's handle. `p.private_data` points into `data`.
pub(crate) fn cm_sidr_resolve(mut p: CmConnect, data: &[u8]) -> Result<u32, Errno> {
    p.private_data_len = u8::try_from(data.len()).map_err(|_| Errno(libc::EINVAL))?;
    p.private_data = data.as_ptr();
    let mut conn = 0;
    // SAFETY: p and data are live for the call; conn is ours.
    code(unsafe { roce_cm_sidr_resolve(&p, &mut conn) }).map(|()| conn)
}

/// Answers a SIDR request with the UD QP `qp` and its Q_Key.
pub(crate) fn cm_sidr_accept(conn: u32, qp: usize, qkey: u32, data: &[u8]) -> Result<(), Errno> {
    let len = u32::try_from(data.len()).map_err(|_| Errno(libc::EINVAL))?;
    // SAFETY: data is live for the call; libibverbs checks the QP.
    code(unsafe { roce_cm_sidr_accept(conn, qp as *mut Opaque, qkey, data.as_ptr(), len) })
}

/// Accepts a REQ.
pub(crate) fn cm_accept(conn: u32, mut p: CmAccept, data: &[u8]) -> Result<(), Errno> {
    p.private_data_len = u8::try_from(data.len()).map_err(|_| Errno(libc::EINVAL))?;
    p.private_data = data.as_ptr();
    // SAFETY: p and data are live for the call.
    code(unsafe { roce_cm_accept(conn, &p) })
}

/// Rejects a REQ.
pub(crate) fn cm_reject(conn: u32, data: &[u8]) -> Result<(), Errno> {
    let len = u32::try_from(data.len()).map_err(|_| Errno(libc::EINVAL))?;
    // SAFETY: data is live for the call.
    code(unsafe { roce_cm_reject(conn, data.as_ptr(), len) })
}

/// Disconnects.
pub(crate) fn cm_disconnect(conn: u32) -> Result<(), Errno> {
    // SAFETY: a plain value.
    code(unsafe { roce_cm_disconnect(conn) })
}

/// Sends the RTU of a connection whose QP the program moves.
pub(crate) fn cm_establish(conn: u32) -> Result<(), Errno> {
    // SAFETY: a plain value.
    code(unsafe { roce_cm_establish(conn) })
}

/// The attributes (and mask) that take the connection's QP to `state`.
pub(crate) fn cm_init_qp_attr(conn: u32, state: c_int) -> Result<(IbvQpAttr, c_int), Errno> {
    let mut attr = IbvQpAttr::default();
    let mut mask = 0;
    // SAFETY: attr and mask are ours.
    code(unsafe { roce_cm_init_qp_attr(conn, state, &mut attr, &mut mask) }).map(|()| (attr, mask))
}

/// A copy of the record libibverbs handed the sink; `None` for NULL.
pub(crate) fn read_record(record: *const CmEventRecord) -> Option<CmEvent> {
    if record.is_null() {
        return None;
    }
    // SAFETY: libibverbs passes a valid record (roce_cabi::cm's contract).
    let r = unsafe { record.read_unaligned() };
    let private_data = if r.private_data.is_null() || r.private_data_len == 0 {
        Vec::new()
    } else {
        // SAFETY: the record's data is valid for its length during the sink's call.
        unsafe { std::slice::from_raw_parts(r.private_data, r.private_data_len as usize) }.to_vec()
    };
    Some(CmEvent {
        kind: r.kind,
        conn: r.conn,
        listen: r.listen,
        status: r.status,
        peer: r.peer,
        local: r.local,
        peer_port: r.peer_port,
        responder_resources: r.responder_resources,
        initiator_depth: r.initiator_depth,
        retry_count: r.retry_count,
        rnr_retry_count: r.rnr_retry_count,
        srq: r.srq,
        peer_qpn: r.peer_qpn,
        qkey: r.qkey,
        private_data,
    })
}
