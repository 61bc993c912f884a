//! The extended data-path interfaces: the `ibv_qp_ex` `wr_*` functions (`ibv_rc_pingpong -N`)
//! and the `ibv_cq_ex` polling functions (`ibv_start_poll`, `ibv_next_poll`, `read_*`), with the
//! rules of `ffi.rs`.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_uint, c_void};

use crate::abi::{
    IbvAh, IbvContext, IbvCqEx, IbvCqInitAttrEx, IbvMw, IbvMwBindInfo, IbvQp, IbvQpEx,
    IbvQpInitAttrEx, IbvSge,
};
use roce_core::{Remote, SendOp, Sge};

use crate::ffi::{errno_ret, guard, minus1_ret, read_in, set_errno, write_out};
use crate::ffi_verbs::{inline_bytes, null_on_err, sges};
use crate::state::Errno;
use crate::verbs;

// ---- the ibv_qp_ex API (ibv_wr_*) -------------------------------------------------------------

/// `verbs_context.create_qp_ex`: what the header's `ibv_create_qp_ex` calls when more than the
/// PD is in `comp_mask`. PD, create flags 0 and send-ops flags are accepted; the QP is the one
/// `ibv_create_qp` makes (every QP has the `wr_*` table).
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for reading and writing a `struct ibv_qp_init_attr_ex`.
pub(crate) unsafe extern "C" fn create_qp_ex(
    _context: *mut IbvContext,
    attr: *mut IbvQpInitAttrEx,
) -> *mut IbvQp {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller passes a struct ibv_qp_init_attr_ex.
        let a = match unsafe { read_in(attr) } {
            Ok(v) => v,
            Err(e) => return null_on_err(Err(e)),
        };
        const PD: u32 = 1 << 0;
        const CREATE_FLAGS: u32 = 1 << 2;
        const SEND_OPS_FLAGS: u32 = 1 << 6;
        if a.comp_mask & PD == 0 || a.comp_mask & !(PD | CREATE_FLAGS | SEND_OPS_FLAGS) != 0 {
            set_errno(libc::EOPNOTSUPP);
            return std::ptr::null_mut();
        }
        if a.comp_mask & CREATE_FLAGS != 0 && a.create_flags != 0 {
            set_errno(libc::EOPNOTSUPP);
            return std::ptr::null_mut();
        }
        null_on_err(
            verbs::create_qp(a.pd as usize, a.base(), wr_fns()).map(|(qp, cap)| {
                // SAFETY: as above; only base.cap is written.
                unsafe { (&raw mut (*attr).cap).write_unaligned(cap) };
                qp
            }),
        )
    })
}

/// `struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *)`: the QP itself (all of ours are
/// `ibv_qp_ex`), NULL for a QP not ours.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_qp_to_qp_ex(qp: *mut IbvQp) -> *mut IbvQpEx {
    guard(std::ptr::null_mut(), || {
        if verbs::is_qp(qp as usize) {
            qp.cast::<IbvQpEx>()
        } else {
            set_errno(libc::EINVAL);
            std::ptr::null_mut()
        }
    })
}

/// The `wr_id` and `wr_flags` the application set in `qp`.
///
/// # Safety
/// `qp` is an `ibv_qp_ex` of ours (the only way to reach the `wr_*` functions).
unsafe fn wr_fields(qp: *mut IbvQpEx) -> (u64, u32) {
    // SAFETY: by the caller's contract; two plain field reads.
    unsafe {
        (
            (&raw const (*qp).wr_id).read(),
            (&raw const (*qp).wr_flags).read(),
        )
    }
}

macro_rules! wr_op {
    ($name:ident ( $($arg:ident : $ty:ty),* ) => $op:expr) => {
        #[doc = concat!("`", stringify!($name), "` of `ibv_qp_ex`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`qp` is one of this library's `ibv_qp_ex` (reached through its table), readable."]
        unsafe extern "C" fn $name(qp: *mut IbvQpEx $(, $arg: $ty)*) {
            guard((), || {
                // SAFETY: called through the table of one of our QPs.
                let (wr_id, flags) = unsafe { wr_fields(qp) };
                verbs::wr_op(qp as usize, wr_id, flags, $op);
            });
        }
    };
}

fn remote(rkey: u32, addr: u64) -> Remote {
    Remote { addr, rkey }
}

wr_op!(wr_send() => SendOp::Send);
wr_op!(wr_send_imm(imm: u32) => SendOp::SendWithImm(u32::from_be(imm)));
wr_op!(wr_send_inv(rkey: u32) => SendOp::SendWithInv(rkey));
wr_op!(wr_rdma_write(rkey: u32, addr: u64) => SendOp::RdmaWrite(remote(rkey, addr)));
wr_op!(wr_rdma_write_imm(rkey: u32, addr: u64, imm: u32) =>
    SendOp::RdmaWriteWithImm(remote(rkey, addr), u32::from_be(imm)));
wr_op!(wr_rdma_read(rkey: u32, addr: u64) => SendOp::RdmaRead(remote(rkey, addr)));
wr_op!(wr_atomic_cmp_swp(rkey: u32, addr: u64, compare: u64, swap: u64) =>
    SendOp::CompareSwap { remote: remote(rkey, addr), compare, swap });
wr_op!(wr_atomic_fetch_add(rkey: u32, addr: u64, add: u64) =>
    SendOp::FetchAdd { remote: remote(rkey, addr), add });

wr_op!(wr_local_inv(rkey: u32) => SendOp::LocalInv(rkey));

/// `wr_bind_mw` of `ibv_qp_ex` (rxe's provider `wr_bind_mw`): a window or region not ours
/// makes `wr_complete` fail with `EINVAL`.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `info` is NULL or valid for reading a `struct ibv_mw_bind_info`.
unsafe extern "C" fn wr_bind_mw(
    qp: *mut IbvQpEx,
    mw: *mut IbvMw,
    rkey: u32,
    info: *const IbvMwBindInfo,
) {
    guard((), || {
        // SAFETY: called through the table of one of our QPs.
        let (wr_id, flags) = unsafe { wr_fields(qp) };
        // SAFETY: the caller's struct ibv_mw_bind_info, as ibv_wr_bind_mw passes it.
        let bind = unsafe { read_in(info) }.and_then(|i| verbs::mw_bind(mw as usize, rkey, &i));
        match bind {
            Ok(b) => verbs::wr_op(qp as usize, wr_id, flags, SendOp::BindMw(b)),
            Err(e) => {
                verbs::wr_op(qp as usize, wr_id, flags, SendOp::Send);
                verbs::wr_fail(qp as usize, e);
            }
        }
    });
}

extern "C" fn wr_set_sge(qp: *mut IbvQpEx, lkey: u32, addr: u64, length: u32) {
    guard((), || {
        verbs::wr_set_sgl(qp as usize, Sge { addr, length, lkey }.into())
    });
}

/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `list` is NULL or valid for reading `num_sge` `struct ibv_sge`.
unsafe extern "C" fn wr_set_sge_list(qp: *mut IbvQpEx, num_sge: usize, list: *const IbvSge) {
    guard((), || {
        // SAFETY: the caller's array of num_sge SGEs.
        match c_int::try_from(num_sge)
            .map_err(|_| Errno(libc::EINVAL))
            .and_then(|n| unsafe { sges(list, n) })
        {
            Ok(s) => verbs::wr_set_sgl(qp as usize, s),
            Err(e) => verbs::wr_fail(qp as usize, e),
        }
    });
}

extern "C" fn wr_set_ud_addr(qp: *mut IbvQpEx, ah: *mut IbvAh, remote_qpn: u32, remote_qkey: u32) {
    guard((), || {
        verbs::wr_set_ud_addr(qp as usize, ah as usize, remote_qpn, remote_qkey)
    });
}

/// Inline data from memory that need not be registered: not offered (the engine gathers
/// inline data from registered regions); `wr_complete` then fails with `EOPNOTSUPP`.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `[addr, addr + length)` is readable.
unsafe extern "C" fn wr_set_inline_data(qp: *mut IbvQpEx, addr: *mut c_void, length: usize) {
    guard((), || {
        let sge = Sge {
            addr: addr as u64,
            length: u32::try_from(length).unwrap_or(u32::MAX),
            lkey: 0,
        };
        // SAFETY: the caller's buffer of `length` bytes, as ibv_wr_set_inline_data takes it.
        match unsafe { inline_bytes(&[sge], verbs::max_inline()) } {
            Ok(data) => verbs::wr_set_inline(qp as usize, data),
            Err(e) => verbs::wr_fail(qp as usize, e),
        }
    });
}

extern "C" fn wr_start(qp: *mut IbvQpEx) {
    guard((), || verbs::wr_start(qp as usize));
}

extern "C" fn wr_complete(qp: *mut IbvQpEx) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::wr_complete(qp as usize)))
}

extern "C" fn wr_abort(qp: *mut IbvQpEx) {
    guard((), || verbs::wr_abort(qp as usize));
}

/// The table every QP gets.
pub(crate) fn wr_fns() -> verbs::WrFns {
    verbs::WrFns {
        atomic_cmp_swp: wr_atomic_cmp_swp as *const c_void,
        atomic_fetch_add: wr_atomic_fetch_add as *const c_void,
        rdma_read: wr_rdma_read as *const c_void,
        rdma_write: wr_rdma_write as *const c_void,
        rdma_write_imm: wr_rdma_write_imm as *const c_void,
        send: wr_send as *const c_void,
        send_imm: wr_send_imm as *const c_void,
        send_inv: wr_send_inv as *const c_void,
        bind_mw: wr_bind_mw as *const c_void,
        local_inv: wr_local_inv as *const c_void,
        set_ud_addr: wr_set_ud_addr as *const c_void,
        set_inline_data: wr_set_inline_data as *const c_void,
        set_sge: wr_set_sge as *const c_void,
        set_sge_list: wr_set_sge_list as *const c_void,
        start: wr_start as *const c_void,
        complete: wr_complete as *const c_void,
        abort: wr_abort as *const c_void,
    }
}

// ---- the ibv_cq_ex API (ibv_start_poll, ...) -------------------------------------------------

/// `verbs_context.create_cq_ex`: what the header's `ibv_create_cq_ex` calls. The `wc_flags`
/// of `ibv_poll_cq` ([`verbs::CQ_EX_WC_FLAGS`]) and `comp_mask` flags 0 are offered; others
/// (timestamps, a parent domain) are `EOPNOTSUPP`.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for reading a `struct ibv_cq_init_attr_ex`.
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut IbvContext,
    attr: *mut IbvCqInitAttrEx,
) -> *mut IbvCqEx {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller passes a struct ibv_cq_init_attr_ex.
        let a = match unsafe { read_in(attr) } {
            Ok(v) => v,
            Err(e) => return null_on_err(Err(e)),
        };
        const MASK_FLAGS: u32 = 1 << 0;
        if a.wc_flags & !verbs::CQ_EX_WC_FLAGS != 0
            || a.comp_mask & !MASK_FLAGS != 0
            || (a.comp_mask & MASK_FLAGS != 0 && a.flags != 0)
        {
            set_errno(libc::EOPNOTSUPP);
            return std::ptr::null_mut();
        }
        let Ok(cqe) = c_int::try_from(a.cqe) else {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        };
        null_on_err(verbs::create_cq(
            context as usize,
            cqe,
            a.cq_context,
            a.channel as usize,
            cq_ex_fns(),
        ))
        .cast::<IbvCqEx>()
    })
}

extern "C" fn start_poll(cq: *mut IbvCqEx, _attr: *mut c_void) -> c_int {
    guard(libc::EIO, || {
        verbs::next_poll(cq as usize, true).map_or_else(|Errno(e)| e, |_| 0)
    })
}

extern "C" fn next_poll(cq: *mut IbvCqEx) -> c_int {
    guard(libc::EIO, || {
        verbs::next_poll(cq as usize, false).map_or_else(|Errno(e)| e, |_| 0)
    })
}

extern "C" fn end_poll(cq: *mut IbvCqEx) {
    guard((), || verbs::end_poll(cq as usize));
}

macro_rules! read_field {
    ($name:ident -> $ty:ty = |$w:ident| $e:expr) => {
        extern "C" fn $name(cq: *mut IbvCqEx) -> $ty {
            guard(Default::default(), || {
                let $w = verbs::current(cq as usize);
                $e
            })
        }
    };
}

read_field!(read_opcode -> c_int = |w| w.opcode);
read_field!(read_vendor_err -> u32 = |w| w.vendor_err);
read_field!(read_byte_len -> u32 = |w| w.byte_len);
read_field!(read_imm_data -> u32 = |w| w.imm_data);
read_field!(read_qp_num -> u32 = |w| w.qp_num);
read_field!(read_src_qp -> u32 = |w| w.src_qp);
read_field!(read_wc_flags -> c_uint = |w| w.wc_flags);
read_field!(read_slid -> u32 = |w| u32::from(w.slid));
read_field!(read_sl -> u8 = |w| w.sl);
read_field!(read_dlid_path_bits -> u8 = |w| w.dlid_path_bits);

/// The table every CQ gets.
pub(crate) fn cq_ex_fns() -> verbs::CqExFns {
    verbs::CqExFns {
        start_poll: start_poll as *const c_void,
        next_poll: next_poll as *const c_void,
        end_poll: end_poll as *const c_void,
        read_opcode: read_opcode as *const c_void,
        read_vendor_err: read_vendor_err as *const c_void,
        read_byte_len: read_byte_len as *const c_void,
        read_imm_data: read_imm_data as *const c_void,
        read_qp_num: read_qp_num as *const c_void,
        read_src_qp: read_src_qp as *const c_void,
        read_wc_flags: read_wc_flags as *const c_void,
        read_slid: read_slid as *const c_void,
        read_sl: read_sl as *const c_void,
        read_dlid_path_bits: read_dlid_path_bits as *const c_void,
    }
}

// ---- address handles from a completion --------------------------------------------------------

/// The `ibv_ah_attr` of a reply to the sender of `wc`, from the GRH area at `grh`.
///
/// # Safety
/// `wc` is a valid `struct ibv_wc`, `grh` valid for 40 bytes.
unsafe fn ah_attr_of(
    port_num: u8,
    wc: *const crate::abi::IbvWc,
    grh: *const c_void,
) -> Result<crate::abi::IbvAhAttr, Errno> {
    if wc.is_null() || grh.is_null() {
        return Err(Errno(libc::EINVAL));
    }
    // SAFETY: by the caller's contract.
    let (w, area) = unsafe { (wc.read_unaligned(), grh.cast::<[u8; 40]>().read_unaligned()) };
    verbs::ah_attr_from_wc(port_num, w.wc_flags, w.slid, w.sl, &area)
}

/// `int ibv_init_ah_from_wc(struct ibv_context *, uint8_t port_num, struct ibv_wc *, struct
/// ibv_grh *, struct ibv_ah_attr *)`: 0, or -1 with errno.
///
/// # Safety
/// As libibverbs: `wc` and `ah_attr` valid, `grh` the 40 bytes in front of the receive.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_init_ah_from_wc(
    _context: *mut IbvContext,
    port_num: u8,
    wc: *const crate::abi::IbvWc,
    grh: *const c_void,
    ah_attr: *mut crate::abi::IbvAhAttr,
) -> c_int {
    guard(-1, || {
        // SAFETY: by the caller's contract (write_out refuses a NULL ah_attr).
        minus1_ret(unsafe { ah_attr_of(port_num, wc, grh).and_then(|a| write_out(ah_attr, a)) })
    })
}

/// `struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *, struct ibv_wc *, struct ibv_grh *,
/// uint8_t port_num)`: NULL with errno.
///
/// # Safety
/// As libibverbs: `wc` valid, `grh` the 40 bytes in front of the receive.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut crate::abi::IbvPd,
    wc: *const crate::abi::IbvWc,
    grh: *const c_void,
    port_num: u8,
) -> *mut IbvAh {
    guard(std::ptr::null_mut(), || {
        // SAFETY: by the caller's contract.
        let attr = unsafe { ah_attr_of(port_num, wc, grh) };
        null_on_err(attr.and_then(|a| verbs::create_ah(pd as usize, &a)))
    })
}
