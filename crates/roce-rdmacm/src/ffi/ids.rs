//! Ids and their QPs: `rdma_create_id` to `rdma_set_option`, `rdma_create_qp(_ex)` and
//! `rdma_destroy_qp`.

use std::ffi::{c_int, c_void};

use super::{guard, into_out, known_id, read_sockaddr, ret, set_errno_on};
use crate::Errno;
use crate::abi::{
    IbvQpInitAttr, IbvQpInitAttrEx, Opaque, RdmaAddr, RdmaCmId, RdmaEventChannel, SockaddrStorage,
};
use crate::state::{EINVAL, with};
use crate::{addr, conn, id};

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

/// `int rdma_migrate_id(struct rdma_cm_id *, struct rdma_event_channel *)`: a NULL channel
/// makes the id synchronous.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_migrate_id(
    id: *mut RdmaCmId,
    channel: *mut RdmaEventChannel,
) -> c_int {
    guard(-1, || {
        ret(known_id(id).and_then(|id| {
            crate::state::migrate_id(id, (!channel.is_null()).then_some(channel as usize))
        }))
    })
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

/// The big-endian port of one end of a known id's route: 0 for an id not ours.
fn route_port(id: *mut RdmaCmId, end: fn(&RdmaAddr) -> &SockaddrStorage) -> u16 {
    guard(0, || {
        let a = id as usize;
        with(|t| {
            t.ids
                .get(&a)
                .map_or(0, |i| addr::port_be(end(&i.c.get().route.addr)))
        })
    })
}

/// `__be16 rdma_get_src_port(struct rdma_cm_id *)`: 0 for an id not ours.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_get_src_port(id: *mut RdmaCmId) -> u16 {
    route_port(id, |a| &a.src)
}

/// `__be16 rdma_get_dst_port(struct rdma_cm_id *)`: 0 for an id not ours.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_get_dst_port(id: *mut RdmaCmId) -> u16 {
    route_port(id, |a| &a.dst)
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

/// Reads the caller's `attr` of a known id, runs `f` on them and writes what it gives back:
/// 0, or -1 with `errno` (`EINVAL` for an id not ours or a NULL `attr`, before `f` runs).
///
/// # Safety
/// `attr` is NULL or valid for a read and a write of a `T`.
unsafe fn update_attr<T>(
    id: *mut RdmaCmId,
    attr: *mut T,
    f: impl FnOnce(usize, T) -> Result<T, Errno>,
) -> c_int {
    guard(-1, || {
        ret((|| {
            let id = known_id(id)?;
            if attr.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: checked non-NULL; by the caller's contract.
            let got = f(id, unsafe { attr.read_unaligned() })?;
            // SAFETY: as above.
            unsafe { attr.write_unaligned(got) };
            Ok(())
        })())
    })
}

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
    // SAFETY: by the caller's contract.
    unsafe { update_attr(id, attr, |id, a| id::create_qp(id, pd as usize, a)) }
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
    // SAFETY: by the caller's contract; the head is a prefix of the caller's structure,
    // written back whole, with what was read in it.
    unsafe {
        update_attr(id, attr, |id, mut head: IbvQpInitAttrEx| {
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
            Ok(head)
        })
    }
}

/// `void rdma_destroy_qp(struct rdma_cm_id *)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_qp(id: *mut RdmaCmId) {
    guard((), || {
        set_errno_on(id::destroy_qp(id as usize));
    });
}
