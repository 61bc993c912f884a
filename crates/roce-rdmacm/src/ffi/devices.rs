//! The device list and address resolution: `rdma_get_devices`, `rdma_free_devices`,
//! `rdma_getaddrinfo` and `rdma_freeaddrinfo`.

use std::ffi::{CStr, c_char, c_int};

use super::{guard, read_sockaddr, ret, set_errno};
use crate::Errno;
use crate::abi::{Opaque, RdmaAddrinfo};
use crate::state::{EINVAL, with};
use crate::{ibv, info};
use roce_cabi::CBox;

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
/// const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)`: 0, or -1 with errno
/// (`EINVAL` for no node, service or hints; getaddrinfo's code for a failed lookup).
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
        let mut h = info::Hints {
            // Which answer of a name of both families is kept: the device's family, once it
            // is open (a lookup opens nothing); IPv4 before.
            prefer: match ibv::opened() {
                Some(d) if d.ip.is_ipv6() => libc::AF_INET6,
                _ => libc::AF_INET,
            },
            ..info::Hints::default()
        };
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
                    Err(_) => return gai_error(libc::EAI_FAMILY),
                }
            }
            if !given.ai_dst_addr.is_null() && given.ai_dst_len != 0 {
                // SAFETY: a hints destination address is a socket address of its family.
                match unsafe { read_sockaddr(given.ai_dst_addr.cast()) } {
                    Ok(a) => h.dst = Some(a),
                    Err(_) => return gai_error(libc::EAI_FAMILY),
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
            Err(code) => gai_error(code),
        }
    })
}

/// A failed lookup as librdmacm reports it (`ERR(ret)` in `rdma_getaddrinfo`): -1, with
/// getaddrinfo's code (`EAI_NONAME`, ...; negative in glibc) in `errno`.
fn gai_error(code: c_int) -> c_int {
    set_errno(code);
    -1
}

/// `void rdma_freeaddrinfo(struct rdma_addrinfo *)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_freeaddrinfo(res: *mut RdmaAddrinfo) {
    guard((), || info::freeaddrinfo(res as usize));
}
