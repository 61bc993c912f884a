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

#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::net::{Ipv4Addr, SocketAddrV4};

use crate::Errno;
use crate::abi::{
    IbvQpInitAttr, IbvQpInitAttrEx, Opaque, RdmaAddrinfo, RdmaCmEvent, RdmaCmId, RdmaConnParam,
    RdmaEventChannel, SockaddrStorage,
};
use crate::state::{EINVAL, with};
use crate::{addr, conn, ibv, id, info, state, strings};
use roce_cabi::CBox;

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

/// A caller's `struct sockaddr *`: the family first (2 bytes), then `sockaddr_in` if it is
/// `AF_INET` (other families are `EAFNOSUPPORT`; NULL is `EINVAL`).
///
/// # Safety
/// `sa` is NULL or points to a socket address of the family it names.
unsafe fn read_sockaddr(sa: *const c_void) -> Result<SocketAddrV4, Errno> {
    if sa.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: every sockaddr starts with its 2-byte family.
    let family = unsafe { sa.cast::<u16>().read_unaligned() };
    if family != addr::AF_INET {
        return Err(Errno(libc::EAFNOSUPPORT));
    }
    let mut s = SockaddrStorage::default();
    // SAFETY: an AF_INET address is a 16-byte sockaddr_in; s has room for it.
    let bytes = unsafe { sa.cast::<[u8; 16]>().read_unaligned() };
    s.family = family;
    s.data[..14].copy_from_slice(&bytes[2..]);
    addr::from_storage(&s)
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

// ---- ids -----------------------------------------------------------------------------------

/// `int rdma_create_id(struct rdma_event_channel *, struct rdma_cm_id **, void *context,
/// enum rdma_port_space)`: a NULL channel makes a synchronous id.
///
/// # Safety
/// `id` is NULL or valid for a pointer write.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_id(
    channel: *mut RdmaEventChannel,
    id: *mut *mut RdmaCmId,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    let ch = (!channel.is_null()).then_some(channel as usize);
    // SAFETY: by the caller's contract.
    unsafe { into_out(id, || id::create_id(ch, context, ps)) }
}

/// `int rdma_destroy_id(struct rdma_cm_id *)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_id(id: *mut RdmaCmId) -> c_int {
    guard(-1, || ret(id::destroy_id(id as usize)))
}

/// `int rdma_bind_addr(struct rdma_cm_id *, struct sockaddr *)`.
///
/// # Safety
/// `addr` is NULL or a socket address of the family it names.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_bind_addr(id: *mut RdmaCmId, addr: *const c_void) -> c_int {
    guard(-1, || {
        ret((|| {
            let id = known_id(id)?;
            // SAFETY: by the caller's contract.
            id::bind(id, unsafe { read_sockaddr(addr) }?)
        })())
    })
}

/// `int rdma_resolve_addr(struct rdma_cm_id *, struct sockaddr *src, struct sockaddr *dst,
/// int timeout_ms)`: a NULL or `AF_UNSPEC` source lets the id bind to the device's address.
///
/// # Safety
/// `src` and `dst` are NULL or socket addresses of the family they name.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_resolve_addr(
    id: *mut RdmaCmId,
    src: *const c_void,
    dst: *const c_void,
    _timeout_ms: c_int,
) -> c_int {
    guard(-1, || {
        ret((|| {
            let id = known_id(id)?;
            // SAFETY: a non-NULL sockaddr starts with its family.
            let src = if src.is_null() || unsafe { src.cast::<u16>().read_unaligned() } == 0 {
                None
            } else {
                // SAFETY: by the caller's contract.
                Some(unsafe { read_sockaddr(src) }?)
            };
            // SAFETY: by the caller's contract.
            let dst = unsafe { read_sockaddr(dst) }?;
            id::resolve_addr(id, src, dst)
        })())
    })
}

/// `int rdma_resolve_route(struct rdma_cm_id *, int timeout_ms)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_resolve_route(id: *mut RdmaCmId, _timeout_ms: c_int) -> c_int {
    guard(-1, || ret(known_id(id).and_then(id::resolve_route)))
}

/// `int rdma_listen(struct rdma_cm_id *, int backlog)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_listen(id: *mut RdmaCmId, _backlog: c_int) -> c_int {
    guard(-1, || ret(known_id(id).and_then(conn::listen).map(|_| ())))
}

/// `__be16 rdma_get_src_port(struct rdma_cm_id *)`: 0 for an id not ours.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_get_src_port(id: *mut RdmaCmId) -> u16 {
    guard(0, || {
        let a = id as usize;
        with(|t| {
            t.ids
                .get(&a)
                .map_or(0, |i| addr::port_be(&i.c.get().route.addr.src))
        })
    })
}

/// `__be16 rdma_get_dst_port(struct rdma_cm_id *)`: 0 for an id not ours.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_get_dst_port(id: *mut RdmaCmId) -> u16 {
    guard(0, || {
        let a = id as usize;
        with(|t| {
            t.ids
                .get(&a)
                .map_or(0, |i| addr::port_be(&i.c.get().route.addr.dst))
        })
    })
}

/// `int rdma_set_option(struct rdma_cm_id *, int level, int optname, void *optval,
/// size_t optlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_set_option(
    id: *mut RdmaCmId,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    guard(-1, || {
        if optval.is_null() {
            return ret(Err(EINVAL));
        }
        ret(id::set_option(id as usize, level, optname, optlen))
    })
}

// ---- QPs -----------------------------------------------------------------------------------

/// `int rdma_create_qp(struct rdma_cm_id *, struct ibv_pd *, struct ibv_qp_init_attr *)`:
/// writes the granted capabilities (and CQs made for the id) back into `attr`.
///
/// # Safety
/// `attr` is NULL or a valid `ibv_qp_init_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_qp(
    id: *mut RdmaCmId,
    pd: *mut Opaque,
    attr: *mut IbvQpInitAttr,
) -> c_int {
    guard(-1, || {
        ret((|| {
            let id = known_id(id)?;
            if attr.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: checked non-NULL; by the caller's contract.
            let got = id::create_qp(id, pd as usize, unsafe { attr.read_unaligned() })?;
            // SAFETY: as above.
            unsafe { attr.write_unaligned(got) };
            Ok(())
        })())
    })
}

/// `int rdma_create_qp_ex(struct rdma_cm_id *, struct ibv_qp_init_attr_ex *)`: the fields of
/// `ibv_qp_init_attr` and `pd` (`IBV_QP_INIT_ATTR_PD`); any other `comp_mask` bit is
/// `EOPNOTSUPP`, before anything is made.
///
/// # Safety
/// `attr` is NULL or a valid `ibv_qp_init_attr_ex`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut RdmaCmId,
    attr: *mut IbvQpInitAttrEx,
) -> c_int {
    guard(-1, || {
        ret((|| {
            let id = known_id(id)?;
            if attr.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: checked non-NULL; the head is a prefix of the caller's structure.
            let mut head = unsafe { attr.read_unaligned() };
            if head.comp_mask & !crate::abi::IBV_QP_INIT_ATTR_PD != 0 {
                return Err(Errno(libc::EOPNOTSUPP));
            }
            let pd = if head.comp_mask & crate::abi::IBV_QP_INIT_ATTR_PD != 0 {
                head.pd as usize
            } else {
                0
            };
            let got = id::create_qp(id, pd, head.base())?;
            head.set_base(&got);
            // SAFETY: as above; the head is written back whole, with what was read in it.
            unsafe { attr.write_unaligned(head) };
            Ok(())
        })())
    })
}

/// `void rdma_destroy_qp(struct rdma_cm_id *)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_qp(id: *mut RdmaCmId) {
    guard((), || {
        set_errno_on(id::destroy_qp(id as usize));
    });
}

// ---- devices and addresses -----------------------------------------------------------------

/// `struct ibv_context **rdma_get_devices(int *num_devices)`: the one device of roce-emu's
/// libibverbs, NULL-terminated; NULL with errno (`ENODEV` without `ROCE_VERBS_IP`).
///
/// # Safety
/// `num` is NULL or valid for an int write.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_get_devices(num: *mut c_int) -> *mut *mut Opaque {
    guard(std::ptr::null_mut(), || {
        let (list, n) = match ibv::device() {
            Ok(d) => {
                let list = CBox::new([d.ctx, 0]);
                let p = list.ptr().cast::<*mut Opaque>();
                with(|t| t.device_lists.insert(list.addr(), list));
                (p, 1)
            }
            Err(Errno(e)) => {
                set_errno(e);
                (std::ptr::null_mut(), 0)
            }
        };
        if !num.is_null() {
            // SAFETY: checked non-NULL; by the caller's contract.
            unsafe { num.write(n) };
        }
        list
    })
}

/// `void rdma_free_devices(struct ibv_context **)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_free_devices(list: *mut *mut Opaque) {
    guard((), || {
        with(|t| t.device_lists.remove(&(list as usize)));
    });
}

/// A C string argument: NULL is `None`; not UTF-8 is a name (never numeric).
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn opt_str<'a>(s: *const c_char) -> Option<std::borrow::Cow<'a, str>> {
    // SAFETY: by the caller's contract.
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy())
}

/// `int rdma_getaddrinfo(const char *node, const char *service,
/// const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)`.
///
/// # Safety
/// Strings are NULL or NUL-terminated; `hints` NULL or valid; `res` valid for a write.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const RdmaAddrinfo,
    res: *mut *mut RdmaAddrinfo,
) -> c_int {
    guard(-1, || {
        if res.is_null() || (node.is_null() && service.is_null() && hints.is_null()) {
            return ret(Err(EINVAL));
        }
        let mut h = info::Hints::default();
        if !hints.is_null() {
            // SAFETY: checked non-NULL; by the caller's contract.
            let given = unsafe { hints.read_unaligned() };
            h.flags = given.ai_flags;
            h.family = given.ai_family;
            h.qp_type = given.ai_qp_type;
            h.port_space = given.ai_port_space;
            if !given.ai_src_addr.is_null() {
                // SAFETY: a hints source address is a socket address of its family.
                match unsafe { read_sockaddr(given.ai_src_addr.cast()) } {
                    Ok(a) => h.src = Some(a),
                    Err(_) => return libc::EAI_FAMILY,
                }
            }
        }
        // SAFETY: by the caller's contract.
        let (node, service) = unsafe { (opt_str(node), opt_str(service)) };
        match info::getaddrinfo(node.as_deref(), service.as_deref(), h) {
            Ok(p) => {
                // SAFETY: checked non-NULL; by the caller's contract.
                unsafe { res.write(p) };
                0
            }
            Err(code) => {
                set_errno(libc::EINVAL);
                code
            }
        }
    })
}

/// `void rdma_freeaddrinfo(struct rdma_addrinfo *)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_freeaddrinfo(res: *mut RdmaAddrinfo) {
    guard((), || info::freeaddrinfo(res as usize));
}

// ---- endpoints -----------------------------------------------------------------------------

/// `int rdma_create_ep(struct rdma_cm_id **, struct rdma_addrinfo *res, struct ibv_pd *,
/// struct ibv_qp_init_attr *)`: a synchronous id; passive (`RAI_PASSIVE`): bound to the
/// source address; active: address and route resolved, and the QP made if `attr` is given.
/// On failure nothing is left.
///
/// # Safety
/// `id` is valid for a write; `res` a list from `rdma_getaddrinfo`; `attr` NULL or valid.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut RdmaCmId,
    res: *mut RdmaAddrinfo,
    pd: *mut Opaque,
    attr: *mut IbvQpInitAttr,
) -> c_int {
    guard(-1, || {
        ret((|| {
            if id.is_null() {
                return Err(EINVAL);
            }
            let r =
                with(|t| t.addrinfos.get(&(res as usize)).map(|a| a.info.get())).ok_or(EINVAL)?;
            let new = id::create_id(None, std::ptr::null_mut(), r.ai_port_space)? as usize;
            let made = (|| {
                // SAFETY: the list's addresses are ours (state::AddrInfo), or NULL.
                let (src, dst) = unsafe {
                    (
                        (!r.ai_src_addr.is_null()).then(|| read_sockaddr(r.ai_src_addr.cast())),
                        (!r.ai_dst_addr.is_null()).then(|| read_sockaddr(r.ai_dst_addr.cast())),
                    )
                };
                let src = src.transpose()?;
                if r.ai_flags & crate::abi::RAI_PASSIVE != 0 {
                    id::bind(
                        new,
                        src.unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
                    )?;
                    if !attr.is_null() {
                        // Each child rdma_get_request returns gets a QP of these attributes
                        // (librdmacm keeps them in the listener, `ucma_get_request`).
                        // SAFETY: checked non-NULL; by the caller's contract.
                        let mut a = unsafe { attr.read_unaligned() };
                        a.qp_type = r.ai_qp_type;
                        with(|t| {
                            if let Some(i) = t.ids.get_mut(&new) {
                                i.child_qp = Some((pd as usize, CBox::new(a)));
                            }
                        });
                    }
                    return Ok(());
                }
                id::resolve_addr(new, src, dst.ok_or(EINVAL)??)?;
                id::resolve_route(new)?;
                if !attr.is_null() {
                    // SAFETY: checked non-NULL; by the caller's contract.
                    let mut a = unsafe { attr.read_unaligned() };
                    // The QP type is the list's (librdmacm's rdma_create_ep does the same).
                    a.qp_type = r.ai_qp_type;
                    let got = id::create_qp(new, pd as usize, a)?;
                    // SAFETY: as above.
                    unsafe { attr.write_unaligned(got) };
                }
                Ok(())
            })();
            if let Err(e) = made {
                let _ = id::destroy_id(new);
                return Err(e);
            }
            // SAFETY: checked non-NULL; by the caller's contract.
            unsafe { id.write(new as *mut RdmaCmId) };
            Ok(())
        })())
    })
}

/// `void rdma_destroy_ep(struct rdma_cm_id *)`: its QP, then the id.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_ep(id: *mut RdmaCmId) {
    guard((), || {
        let _ = id::destroy_qp(id as usize);
        set_errno_on(id::destroy_id(id as usize));
    });
}

/// A caller's `struct rdma_conn_param`, NULL for none; private data beyond what a REQ or REP
/// carries is `EINVAL`.
///
/// # Safety
/// `p` is NULL or valid, its private data valid for its length.
unsafe fn read_conn_param(p: *const RdmaConnParam) -> Option<conn::ConnParam> {
    if p.is_null() {
        return None;
    }
    // SAFETY: checked non-NULL; by the caller's contract.
    let p = unsafe { p.read_unaligned() };
    let private_data = if p.private_data.is_null() || p.private_data_len == 0 {
        Vec::new()
    } else {
        // SAFETY: by the caller's contract.
        unsafe {
            std::slice::from_raw_parts(p.private_data.cast::<u8>(), usize::from(p.private_data_len))
        }
        .to_vec()
    };
    Some(conn::ConnParam {
        private_data,
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
        retry_count: p.retry_count,
        rnr_retry_count: p.rnr_retry_count,
    })
}

/// `int rdma_connect(struct rdma_cm_id *, struct rdma_conn_param *)`: the REQ leaves; a
/// synchronous id waits for ESTABLISHED (`ECONNREFUSED` if rejected, `ETIMEDOUT` if
/// unanswered).
///
/// # Safety
/// `param` is NULL or valid.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_connect(
    id: *mut RdmaCmId,
    param: *const RdmaConnParam,
) -> c_int {
    // SAFETY: by the caller's contract.
    unsafe { with_conn_param(id, param, conn::connect) }
}

/// Runs `f` on the id and the caller's conn param: 0, or -1 with errno.
///
/// # Safety
/// `param` is NULL or valid.
unsafe fn with_conn_param(
    id: *mut RdmaCmId,
    param: *const RdmaConnParam,
    f: fn(usize, Option<conn::ConnParam>) -> Result<(), Errno>,
) -> c_int {
    guard(-1, || {
        ret((|| {
            let id = known_id(id)?;
            // SAFETY: by the caller's contract.
            f(id, unsafe { read_conn_param(param) })
        })())
    })
}

/// `int rdma_accept(struct rdma_cm_id *, struct rdma_conn_param *)`.
///
/// # Safety
/// `param` is NULL or valid.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_accept(
    id: *mut RdmaCmId,
    param: *const RdmaConnParam,
) -> c_int {
    // SAFETY: by the caller's contract.
    unsafe { with_conn_param(id, param, conn::accept) }
}

/// `int rdma_reject(struct rdma_cm_id *, const void *private_data, uint8_t len)`.
///
/// # Safety
/// `data` is NULL or valid for `len` bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_reject(
    id: *mut RdmaCmId,
    data: *const c_void,
    len: u8,
) -> c_int {
    guard(-1, || {
        ret((|| {
            let id = known_id(id)?;
            let data = if data.is_null() || len == 0 {
                &[][..]
            } else {
                // SAFETY: by the caller's contract.
                unsafe { std::slice::from_raw_parts(data.cast::<u8>(), usize::from(len)) }
            };
            conn::reject(id, data)
        })())
    })
}

/// `int rdma_disconnect(struct rdma_cm_id *)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_disconnect(id: *mut RdmaCmId) -> c_int {
    guard(-1, || ret(known_id(id).and_then(conn::disconnect)))
}

/// `int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)`: a synchronous
/// listener's next connection request, as a child id (with its QP if the endpoint was made
/// with QP attributes).
///
/// # Safety
/// `id` is NULL or valid for a pointer write.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_get_request(
    listen: *mut RdmaCmId,
    id: *mut *mut RdmaCmId,
) -> c_int {
    // SAFETY: by the caller's contract.
    unsafe {
        into_out(id, || {
            conn::get_request(known_id(listen)?).map(|child| child as *mut RdmaCmId)
        })
    }
}

/// `int rpoll(struct pollfd *, nfds_t, int timeout)`: rsockets are not there yet, so every
/// descriptor is an ordinary one and this is poll(2) (what librdmacm's rpoll does for them).
///
/// # Safety
/// As poll(2).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rpoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    // SAFETY: forwarded with the caller's contract.
    unsafe { libc::poll(fds, nfds, timeout) }
}
