//! The exported data-path verbs (PDs, MRs, CQs, QPs, posting and polling): the second half of
//! the C face, with the same rules as `ffi.rs` (pointers checked for NULL, objects looked up
//! by address in `verbs.rs`, panics caught, errno set). This module only reads the caller's
//! structures into Rust copies and writes results back; `verbs.rs` does the work.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_uint, c_void};

use crate::abi::{
    IbvAh, IbvAhAttr, IbvCompChannel, IbvContext, IbvCq, IbvCqEx, IbvCqInitAttrEx, IbvMr, IbvPd,
    IbvQp, IbvQpAttr, IbvQpEx, IbvQpInitAttr, IbvQpInitAttrEx, IbvRecvWr, IbvSendWr, IbvSge, IbvWc,
};
use roce_core::{QpType, Remote, SendOp, Sge};

use crate::ffi::{errno_ret, guard, set_errno, write_out};
use crate::state::Errno;
use crate::verbs;

/// Longest WR list read from one post (a cycle in `next` ends here with `EINVAL`).
const MAX_CHAIN: usize = 1 << 16;

fn null_on_err<T>(r: Result<*mut T, Errno>) -> *mut T {
    r.unwrap_or_else(|Errno(e)| {
        set_errno(e);
        std::ptr::null_mut()
    })
}

/// Reads `n` SGEs at `list`, as the engine takes them.
///
/// # Safety
/// `list` is NULL or valid for `n` reads of `struct ibv_sge`.
unsafe fn sges(list: *const IbvSge, n: c_int) -> Result<Vec<Sge>, Errno> {
    let n = usize::try_from(n).map_err(|_| Errno(libc::EINVAL))?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if list.is_null() || n > 1024 {
        return Err(Errno(libc::EINVAL));
    }
    // SAFETY: by the caller's contract.
    Ok((0..n)
        .map(|i| verbs::sge(&unsafe { list.add(i).read_unaligned() }))
        .collect())
}

/// A C work request: the next one of its list.
trait Linked: Copy {
    fn next(&self) -> *mut Self;
}

impl Linked for IbvSendWr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

impl Linked for IbvRecvWr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

/// Posts the C list of WRs at `first` on the QP at `qp`, in order, in one step of the engine
/// (one ring of the doorbell), each through `post`; stops at the first one refused, which is
/// then `*bad_wr`, and returns its errno (those before it stay posted). A list longer than
/// [`MAX_CHAIN`] (a cycle) is refused at that point.
///
/// # Safety
/// `first` is NULL or a list of WRs valid for reads, as `ibv_post_send`'s caller passes it;
/// `bad_wr` is NULL or valid for a write.
unsafe fn post_list<W: Linked>(
    qp: *mut IbvQp,
    first: *mut W,
    bad_wr: *mut *mut W,
    mut post: impl FnMut(&verbs::PostQp, &mut roce_core::Nic, &W) -> Result<(), Errno>,
) -> c_int {
    let fail = |at: *mut W, Errno(e): Errno| {
        if !bad_wr.is_null() {
            // SAFETY: the caller passes a place for the pointer.
            unsafe { *bad_wr = at };
        }
        set_errno(e);
        e
    };
    let target = match verbs::qp_for_post(qp as usize) {
        Ok(q) => q,
        Err(e) => return fail(first, e),
    };
    let walked = verbs::post(target.ctx, |nic| {
        let mut at = first;
        for _ in 0..MAX_CHAIN {
            if at.is_null() {
                return Ok(());
            }
            // SAFETY: a non-NULL WR of the caller's list.
            let w = unsafe { at.read_unaligned() };
            post(&target, nic, &w).map_err(|e| (at, e))?;
            at = w.next();
        }
        if at.is_null() {
            Ok(())
        } else {
            Err((at, Errno(libc::EINVAL)))
        }
    });
    match walked {
        Ok(Ok(())) => 0,
        Ok(Err((at, e))) => fail(at, e),
        Err(e) => fail(first, e),
    }
}

/// `struct ibv_pd *ibv_alloc_pd(struct ibv_context *)`: NULL with errno on failure.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_alloc_pd(context: *mut IbvContext) -> *mut IbvPd {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::alloc_pd(context as usize))
    })
}

/// `int ibv_dealloc_pd(struct ibv_pd *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_dealloc_pd(pd: *mut IbvPd) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::dealloc_pd(pd as usize)))
}

/// `struct ibv_mr *ibv_reg_mr(struct ibv_pd *, void *addr, size_t length, int access)`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut IbvMr {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::reg_mr(
            pd as usize,
            addr as usize,
            length,
            addr as u64,
            access,
        ))
    })
}

/// `struct ibv_mr *ibv_reg_mr_iova(pd, addr, length, uint64_t iova, int access)`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut IbvMr {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::reg_mr(
            pd as usize,
            addr as usize,
            length,
            iova,
            access,
        ))
    })
}

/// `struct ibv_mr *ibv_reg_mr_iova2(pd, addr, length, uint64_t iova, unsigned access)`: what
/// the header's `ibv_reg_mr` macro calls when the access flags are not a constant.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut IbvMr {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::reg_mr(
            pd as usize,
            addr as usize,
            length,
            iova,
            access as c_int,
        ))
    })
}

/// `int ibv_dereg_mr(struct ibv_mr *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_dereg_mr(mr: *mut IbvMr) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::dereg_mr(mr as usize)))
}

/// `struct ibv_cq *ibv_create_cq(ctx, int cqe, void *cq_context, channel, int comp_vector)`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_cq(
    context: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    _comp_vector: c_int,
) -> *mut IbvCq {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::create_cq(
            context as usize,
            cqe,
            cq_context,
            channel as usize,
            cq_ex_fns(),
        ))
    })
}

/// `int ibv_destroy_cq(struct ibv_cq *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_destroy_cq(cq: *mut IbvCq) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_cq(cq as usize)))
}

/// `void ibv_ack_cq_events(struct ibv_cq *, unsigned nevents)`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_ack_cq_events(cq: *mut IbvCq, nevents: c_uint) {
    guard((), || verbs::ack_cq_events(cq as usize, nevents));
}

/// `struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *)`: its `fd` can be
/// polled, and made non-blocking with fcntl.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut IbvContext,
) -> *mut IbvCompChannel {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::create_comp_channel(context as usize))
    })
}

/// `int ibv_destroy_comp_channel(struct ibv_comp_channel *)`: an errno value (`EBUSY` while a
/// CQ uses it).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut IbvCompChannel) -> c_int {
    guard(libc::EIO, || {
        errno_ret(verbs::destroy_comp_channel(channel as usize))
    })
}

/// `int ibv_get_cq_event(channel, struct ibv_cq **cq, void **cq_context)`: 0, or -1 with
/// errno (`EAGAIN` on a non-blocking fd with no event).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut IbvCompChannel,
    cq: *mut *mut IbvCq,
    cq_context: *mut *mut c_void,
) -> c_int {
    guard(-1, || {
        if cq.is_null() || cq_context.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        match verbs::get_cq_event(channel as usize) {
            Ok((c, ctx)) => {
                // SAFETY: the caller passes places for both pointers (checked non-NULL).
                unsafe {
                    *cq = c as *mut IbvCq;
                    *cq_context = ctx;
                }
                0
            }
            Err(Errno(e)) => {
                set_errno(e);
                -1
            }
        }
    })
}

/// `struct ibv_qp *ibv_create_qp(struct ibv_pd *, struct ibv_qp_init_attr *)`: writes the
/// capabilities the QP got into `init_attr->cap`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_qp(
    pd: *mut IbvPd,
    init_attr: *mut IbvQpInitAttr,
) -> *mut IbvQp {
    guard(std::ptr::null_mut(), || {
        if init_attr.is_null() {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        // SAFETY: the caller passes a struct ibv_qp_init_attr.
        let init = unsafe { init_attr.read_unaligned() };
        null_on_err(
            verbs::create_qp(pd as usize, init, wr_fns()).map(|(qp, cap)| {
                // SAFETY: as above; only the cap field is written.
                unsafe { (&raw mut (*init_attr).cap).write_unaligned(cap) };
                qp
            }),
        )
    })
}

/// `struct ibv_ah *ibv_create_ah(struct ibv_pd *, struct ibv_ah_attr *)`: NULL with errno
/// (`EINVAL` without a GRH or from a GID other than 1).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_ah(pd: *mut IbvPd, attr: *mut IbvAhAttr) -> *mut IbvAh {
    guard(std::ptr::null_mut(), || {
        if attr.is_null() {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        // SAFETY: the caller passes a struct ibv_ah_attr.
        let a = unsafe { attr.read_unaligned() };
        null_on_err(verbs::create_ah(pd as usize, &a))
    })
}

/// `int ibv_destroy_ah(struct ibv_ah *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_destroy_ah(ah: *mut IbvAh) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_ah(ah as usize)))
}

/// `int ibv_destroy_qp(struct ibv_qp *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_destroy_qp(qp: *mut IbvQp) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_qp(qp as usize)))
}

/// `int ibv_modify_qp(struct ibv_qp *, struct ibv_qp_attr *, int attr_mask)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_modify_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        if attr.is_null() {
            return errno_ret(Err(Errno(libc::EINVAL)));
        }
        // SAFETY: the caller passes a struct ibv_qp_attr.
        let a = unsafe { attr.read_unaligned() };
        errno_ret(verbs::modify_qp(qp as usize, &a, mask))
    })
}

/// `int ibv_query_qp(qp, struct ibv_qp_attr *, int attr_mask, struct ibv_qp_init_attr *)`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    _mask: c_int,
    init_attr: *mut IbvQpInitAttr,
) -> c_int {
    guard(libc::EIO, || {
        errno_ret(verbs::query_qp(qp as usize).and_then(|(a, init)| {
            // SAFETY: the caller passes both structs.
            unsafe {
                write_out(attr, a)?;
                write_out(init_attr, init)
            }
        }))
    })
}

/// `ops.poll_cq`: the number of completions written to `wc`, or -1 (errno set).
pub(crate) unsafe extern "C" fn poll_cq(
    cq: *mut IbvCq,
    num_entries: c_int,
    wc: *mut IbvWc,
) -> c_int {
    guard(-1, || {
        let Ok(max) = usize::try_from(num_entries) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if max > 0 && wc.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        let polled = verbs::poll_cq(cq as usize, max, |i, w| {
            // SAFETY: the caller's array holds num_entries > i entries.
            unsafe { wc.add(i).write_unaligned(w) };
        });
        match polled {
            Ok(n) => n as c_int,
            Err(Errno(e)) => {
                set_errno(e);
                -1
            }
        }
    })
}

/// `ops.req_notify_cq`: an errno value (`EINVAL` for a CQ without a channel).
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut IbvCq, _solicited_only: c_int) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::req_notify_cq(cq as usize)))
}

/// `ops.post_send`: an errno value; `*bad_wr` is the first WR not posted.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad_wr: *mut *mut IbvSendWr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the caller's list, as ibv_post_send passes it.
        unsafe {
            post_list(qp, wr, bad_wr, |target, nic, w| {
                // wr.ud of a UD QP: the AH pointer, then remote_qpn and remote_qkey.
                let ud = match target.qp_type {
                    QpType::Ud => {
                        let (qpn, qkey) = (w.wr_word1 as u32, (w.wr_word1 >> 32) as u32);
                        let ah = w.wr_remote_addr as usize;
                        Some(verbs::ud_dest(target.qp, ah, qpn, qkey)?)
                    }
                    _ => None,
                };
                let sgl = sges(w.sg_list, w.num_sge)?;
                target.send(nic, verbs::send_wr(w, sgl, target.sig_all, ud)?)
            })
        }
    })
}

/// `ops.post_recv`: an errno value; `*bad_wr` is the first WR not posted.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut IbvQp,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the caller's list, as ibv_post_recv passes it.
        unsafe {
            post_list(qp, wr, bad_wr, |target, nic, w| {
                let sgl = sges(w.sg_list, w.num_sge)?;
                target.recv(nic, verbs::recv_wr(w.wr_id, sgl))
            })
        }
    })
}

/// `ops.post_srq_recv`: `EOPNOTSUPP` (no SRQ can exist: `ibv_create_srq` fails).
pub(crate) unsafe extern "C" fn post_srq_recv(
    _srq: *mut c_void,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    if !bad_wr.is_null() {
        // SAFETY: the caller passes a place for the pointer.
        unsafe { *bad_wr = wr };
    }
    set_errno(libc::EOPNOTSUPP);
    libc::EOPNOTSUPP
}

// ---- the ibv_qp_ex API (ibv_wr_*) -------------------------------------------------------------

/// `verbs_context.create_qp_ex`: what the header's `ibv_create_qp_ex` calls when more than the
/// PD is in `comp_mask`. PD, create flags 0 and send-ops flags are accepted; the QP is the one
/// `ibv_create_qp` makes (every QP has the `wr_*` table).
pub(crate) unsafe extern "C" fn create_qp_ex(
    _context: *mut IbvContext,
    attr: *mut IbvQpInitAttrEx,
) -> *mut IbvQp {
    guard(std::ptr::null_mut(), || {
        if attr.is_null() {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        // SAFETY: the caller passes a struct ibv_qp_init_attr_ex.
        let a = unsafe { attr.read_unaligned() };
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
pub(crate) unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut IbvQp) -> *mut IbvQpEx {
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

unsafe extern "C" fn wr_set_sge(qp: *mut IbvQpEx, lkey: u32, addr: u64, length: u32) {
    guard((), || {
        verbs::wr_set_sgl(qp as usize, vec![Sge { addr, length, lkey }])
    });
}

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

unsafe extern "C" fn wr_set_ud_addr(
    qp: *mut IbvQpEx,
    ah: *mut IbvAh,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    guard((), || {
        verbs::wr_set_ud_addr(qp as usize, ah as usize, remote_qpn, remote_qkey)
    });
}

/// Inline data from memory that need not be registered: not offered (the engine gathers
/// inline data from registered regions); `wr_complete` then fails with `EOPNOTSUPP`.
unsafe extern "C" fn wr_set_inline_data(qp: *mut IbvQpEx, _addr: *mut c_void, _length: usize) {
    guard((), || verbs::wr_fail(qp as usize, Errno(libc::EOPNOTSUPP)));
}

unsafe extern "C" fn wr_start(qp: *mut IbvQpEx) {
    guard((), || verbs::wr_start(qp as usize));
}

unsafe extern "C" fn wr_complete(qp: *mut IbvQpEx) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::wr_complete(qp as usize)))
}

unsafe extern "C" fn wr_abort(qp: *mut IbvQpEx) {
    guard((), || verbs::wr_abort(qp as usize));
}

/// The table every QP gets.
fn wr_fns() -> verbs::WrFns {
    verbs::WrFns {
        atomic_cmp_swp: wr_atomic_cmp_swp as *const c_void,
        atomic_fetch_add: wr_atomic_fetch_add as *const c_void,
        rdma_read: wr_rdma_read as *const c_void,
        rdma_write: wr_rdma_write as *const c_void,
        rdma_write_imm: wr_rdma_write_imm as *const c_void,
        send: wr_send as *const c_void,
        send_imm: wr_send_imm as *const c_void,
        send_inv: wr_send_inv as *const c_void,
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
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut IbvContext,
    attr: *mut IbvCqInitAttrEx,
) -> *mut IbvCqEx {
    guard(std::ptr::null_mut(), || {
        if attr.is_null() {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        // SAFETY: the caller passes a struct ibv_cq_init_attr_ex.
        let a = unsafe { attr.read_unaligned() };
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

unsafe extern "C" fn start_poll(cq: *mut IbvCqEx, _attr: *mut c_void) -> c_int {
    guard(libc::EIO, || {
        verbs::next_poll(cq as usize).map_or_else(|Errno(e)| e, |_| 0)
    })
}

unsafe extern "C" fn next_poll(cq: *mut IbvCqEx) -> c_int {
    guard(libc::EIO, || {
        verbs::next_poll(cq as usize).map_or_else(|Errno(e)| e, |_| 0)
    })
}

unsafe extern "C" fn end_poll(cq: *mut IbvCqEx) {
    guard((), || verbs::end_poll(cq as usize));
}

macro_rules! read_field {
    ($name:ident -> $ty:ty = |$w:ident| $e:expr) => {
        unsafe extern "C" fn $name(cq: *mut IbvCqEx) -> $ty {
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
fn cq_ex_fns() -> verbs::CqExFns {
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
