//! The private functions librdmacm calls to reach the engine's connection manager
//! (`roce_cabi::cm`, version node `ROCE_EMU_PRIVATE_1`). Each returns 0 or an errno value
//! and leaves `errno` alone; a panic is `EIO`.
//!
//! # Safety
//! Only roce-emu's librdmacm calls these, with the pointers `roce_cabi::cm` describes.

#![allow(unsafe_code)]

use std::ffi::c_int;

use roce_cabi::cm::{CmAccept, CmConnect, CmSink, ip_from_bytes};

use crate::cm;
use crate::ffi::guard;
use crate::state::Errno;

fn code(r: Result<(), Errno>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(Errno(e)) => e,
    }
}

/// `len` bytes at `data`, or none for NULL.
///
/// # Safety
/// `data` is NULL or valid for `len` bytes.
unsafe fn bytes(data: *const u8, len: usize) -> Vec<u8> {
    if data.is_null() || len == 0 {
        Vec::new()
    } else {
        // SAFETY: by the caller's contract.
        unsafe { std::slice::from_raw_parts(data, len) }.to_vec()
    }
}

/// Writes `v` to `out`.
///
/// # Safety
/// `out` is valid for a write.
unsafe fn put(out: *mut u32, v: u32) {
    // SAFETY: by the caller's contract.
    unsafe { out.write(v) };
}

/// `int roce_cm_listen(uint64_t service_id, uint32_t *listen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn roce_cm_listen(service_id: u64, listen: *mut u32) -> c_int {
    guard(libc::EIO, || {
        if listen.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: checked non-NULL; by the caller's contract.
        code(cm::listen(service_id).map(|h| unsafe { put(listen, h) }))
    })
}

/// `int roce_cm_unlisten(uint32_t listen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn roce_cm_unlisten(listen: u32) -> c_int {
    guard(libc::EIO, || code(cm::unlisten(listen)))
}

/// Runs `call` on the request at `params` and writes the handle it returns to `conn`.
///
/// # Safety
/// `params` is NULL or valid, its private data valid for its length; `conn` NULL or valid.
unsafe fn request(
    params: *const CmConnect,
    conn: *mut u32,
    call: fn(cm::Connect) -> Result<u32, Errno>,
) -> c_int {
    if params.is_null() || conn.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: checked non-NULL; by the caller's contract.
    let p = unsafe { params.read_unaligned() };
    // SAFETY: as above.
    let private_data = unsafe { bytes(p.private_data, usize::from(p.private_data_len)) };
    let c = cm::Connect {
        qp: p.qp as usize,
        qp_num: p.qp_num,
        local: ip_from_bytes(p.local),
        peer: ip_from_bytes(p.peer),
        service_id: p.service_id,
        src_port: p.src_port,
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
        retry_count: p.retry_count,
        rnr_retry_count: p.rnr_retry_count,
        private_data,
    };
    // SAFETY: checked non-NULL; by the caller's contract.
    code(call(c).map(|id| unsafe { put(conn, id) }))
}

/// `int roce_cm_connect(const struct CmConnect *, uint32_t *conn)`.
///
/// # Safety
/// `params` is NULL or valid, its private data valid for its length; `conn` NULL or valid.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn roce_cm_connect(params: *const CmConnect, conn: *mut u32) -> c_int {
    // SAFETY: by the caller's contract.
    guard(libc::EIO, || unsafe { request(params, conn, cm::connect) })
}

/// `int roce_cm_sidr_resolve(const struct CmConnect *, uint32_t *conn)`: the QP and the retry
/// counts of the request are not used.
///
/// # Safety
/// As `roce_cm_connect`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn roce_cm_sidr_resolve(
    params: *const CmConnect,
    conn: *mut u32,
) -> c_int {
    // SAFETY: by the caller's contract.
    guard(libc::EIO, || unsafe {
        request(params, conn, cm::sidr_resolve)
    })
}

/// `int roce_cm_sidr_accept(uint32_t conn, void *qp, uint32_t qkey, const uint8_t *data,
/// uint32_t len)`.
///
/// # Safety
/// `data` is NULL or valid for `len` bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn roce_cm_sidr_accept(
    conn: u32,
    qp: *mut std::ffi::c_void,
    qkey: u32,
    data: *const u8,
    len: u32,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: by the caller's contract.
        let data = unsafe { bytes(data, len as usize) };
        code(cm::sidr_accept(conn, qp as usize, qkey, &data))
    })
}

/// `int roce_cm_accept(uint32_t conn, const struct CmAccept *)`.
///
/// # Safety
/// `params` is NULL or valid, its private data valid for its length.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn roce_cm_accept(conn: u32, params: *const CmAccept) -> c_int {
    guard(libc::EIO, || {
        if params.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: checked non-NULL; by the caller's contract.
        let p = unsafe { params.read_unaligned() };
        // SAFETY: as above.
        let private_data = unsafe { bytes(p.private_data, usize::from(p.private_data_len)) };
        let a = cm::Accept {
            qp: p.qp as usize,
            qp_num: p.qp_num,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            rnr_retry_count: p.rnr_retry_count,
            private_data,
        };
        code(cm::accept(conn, a))
    })
}

/// `int roce_cm_reject(uint32_t conn, const uint8_t *data, uint32_t len)`.
///
/// # Safety
/// `data` is NULL or valid for `len` bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn roce_cm_reject(conn: u32, data: *const u8, len: u32) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: by the caller's contract.
        let data = unsafe { bytes(data, len as usize) };
        code(cm::reject(conn, &data))
    })
}

/// `int roce_cm_disconnect(uint32_t conn)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn roce_cm_disconnect(conn: u32) -> c_int {
    guard(libc::EIO, || code(cm::disconnect(conn)))
}

/// `int roce_cm_establish(uint32_t conn)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn roce_cm_establish(conn: u32) -> c_int {
    guard(libc::EIO, || code(cm::establish(conn)))
}

/// `int roce_cm_init_qp_attr(uint32_t conn, int state, struct ibv_qp_attr *, int *mask)`.
///
/// # Safety
/// `attr` and `mask` are NULL or valid for a write.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn roce_cm_init_qp_attr(
    conn: u32,
    state: c_int,
    attr: *mut crate::abi::IbvQpAttr,
    mask: *mut c_int,
) -> c_int {
    guard(libc::EIO, || {
        if attr.is_null() || mask.is_null() {
            return libc::EINVAL;
        }
        code(cm::init_qp_attr(conn, state).map(|(a, m)| {
            // SAFETY: checked non-NULL; by the caller's contract.
            unsafe {
                attr.write_unaligned(a);
                mask.write_unaligned(m);
            }
        }))
    })
}

/// `int roce_cm_set_sink(CmSink)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn roce_cm_set_sink(sink: CmSink) -> c_int {
    guard(libc::EIO, || code(cm::set_sink(sink)))
}
