//! Endpoints and connections: `rdma_create_ep`/`rdma_destroy_ep`, `rdma_connect`,
//! `rdma_accept`, `rdma_reject`, `rdma_disconnect`, `rdma_get_request`, and `rpoll`.

use std::ffi::{c_int, c_void};
use std::net::{Ipv4Addr, SocketAddr};

use super::{guard, into_out, known_id, read_sockaddr, ret, set_errno_on};
use crate::Errno;
use crate::abi::{IbvQpAttr, IbvQpInitAttr, Opaque, RdmaAddrinfo, RdmaCmId, RdmaConnParam};
use crate::state::{EINVAL, with};
use crate::{conn, id};
use roce_cabi::CBox;

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
                        src.unwrap_or(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))),
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
        qp_num: p.qp_num,
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

/// `int rdma_establish(struct rdma_cm_id *)`: the RTU of a connection whose QP the program
/// moves, after its CONNECT_RESPONSE.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_establish(id: *mut RdmaCmId) -> c_int {
    guard(-1, || ret(known_id(id).and_then(conn::establish)))
}

/// `int rdma_init_qp_attr(struct rdma_cm_id *, struct ibv_qp_attr *, int *qp_attr_mask)`:
/// the attributes for the state `qp_attr->qp_state` names, and their mask.
///
/// # Safety
/// `attr` and `mask` are NULL or valid.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut RdmaCmId,
    attr: *mut IbvQpAttr,
    mask: *mut c_int,
) -> c_int {
    guard(-1, || {
        ret((|| {
            let id = known_id(id)?;
            if attr.is_null() || mask.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: checked non-NULL; by the caller's contract.
            let state = unsafe { attr.read_unaligned() }.qp_state;
            let (a, m) = conn::init_qp_attr(id, state)?;
            // SAFETY: as above.
            unsafe {
                attr.write_unaligned(a);
                mask.write_unaligned(m);
            }
            Ok(())
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
