//! The exported data-path verbs (PDs, MRs, CQs, QPs, posting and polling): the second half of
//! the C face, with the same rules as `ffi.rs` (pointers checked for NULL, objects looked up
//! by address in `verbs.rs`, panics caught, errno set). This module only reads the caller's
//! structures into Rust copies and writes results back; `verbs.rs` does the work.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_uint, c_void};

use crate::abi::{
    IbvAh, IbvAhAttr, IbvCompChannel, IbvContext, IbvCq, IbvMr, IbvMw, IbvMwBind, IbvPd, IbvQp,
    IbvQpAttr, IbvQpInitAttr, IbvRecvWr, IbvSendWr, IbvSge, IbvSrq, IbvSrqAttr, IbvSrqInitAttr,
    IbvWc,
};
use crate::ffi_ex::{cq_ex_fns, wr_fns};
use roce_core::{QpType, Sge};

use crate::ffi::{errno_ret, guard, read_in, set_errno, write_out};
use crate::memory::CallerMemory;
use crate::state::Errno;
use crate::verbs;

/// Longest WR list read from one post (a cycle in `next` ends here with `EINVAL`).
const MAX_CHAIN: usize = 1 << 16;

pub(crate) fn null_on_err<T>(r: Result<*mut T, Errno>) -> *mut T {
    r.unwrap_or_else(|Errno(e)| {
        set_errno(e);
        std::ptr::null_mut()
    })
}

/// Reads `n` SGEs at `list`, as the engine takes them.
///
/// # Safety
/// `list` is NULL or valid for `n` reads of `struct ibv_sge`.
pub(crate) unsafe fn sges(list: *const IbvSge, n: c_int) -> Result<Vec<Sge>, Errno> {
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

/// The bytes an inline send's SGEs name, read from the program's memory (registered or not, as
/// a provider's `memcpy` of an inline WR reads them); `EINVAL` past `max_inline`, before
/// anything is read.
///
/// # Safety
/// Each SGE's `addr` is valid for `length` reads, as `ibv_post_send`'s caller promises for an
/// inline WR.
pub(crate) unsafe fn inline_bytes(sgl: &[Sge], max_inline: usize) -> Result<Vec<u8>, Errno> {
    let total: u64 = sgl.iter().map(|s| u64::from(s.length)).sum();
    if total > max_inline as u64 {
        return Err(Errno(libc::EINVAL));
    }
    let mut data = Vec::with_capacity(total as usize);
    for sge in sgl.iter().filter(|s| s.length > 0) {
        // SAFETY: by the caller's contract.
        let bytes = unsafe {
            std::slice::from_raw_parts(sge.addr as usize as *const u8, sge.length as usize)
        };
        data.extend_from_slice(bytes);
    }
    Ok(data)
}

/// A C work request: the next one of its list.
trait Linked: Copy {
    /// A send WR (which makes packets), not a receive WR (which makes none).
    const SENDS: bool;
    fn next(&self) -> *mut Self;
}

impl Linked for IbvSendWr {
    const SENDS: bool = true;
    fn next(&self) -> *mut Self {
        self.next
    }
}

impl Linked for IbvRecvWr {
    const SENDS: bool = false;
    fn next(&self) -> *mut Self {
        self.next
    }
}

/// What a list is posted to: a QP or an SRQ, of a context.
trait Target {
    fn ctx(&self) -> usize;
}

impl Target for verbs::PostQp {
    fn ctx(&self) -> usize {
        self.ctx
    }
}

impl Target for verbs::PostSrq {
    fn ctx(&self) -> usize {
        self.ctx
    }
}

/// Posts the C list of WRs at `first` to `target` (a QP or an SRQ), in order, in one step of the engine
/// (one ring of the doorbell), each through `post`; stops at the first one refused, which is
/// then `*bad_wr`, and returns its errno (those before it stay posted). A list longer than
/// [`MAX_CHAIN`] (a cycle) is refused at that point.
///
/// # Safety
/// `first` is NULL or a list of WRs valid for reads, as `ibv_post_send`'s caller passes it;
/// `bad_wr` is NULL or valid for a write.
unsafe fn post_list<W: Linked, T: Target>(
    target: Result<T, Errno>,
    first: *mut W,
    bad_wr: *mut *mut W,
    mut post: impl FnMut(&T, &mut roce_core::Nic, &W) -> Result<(), Errno>,
) -> c_int {
    let fail = |at: *mut W, Errno(e): Errno| {
        if !bad_wr.is_null() {
            // SAFETY: the caller passes a place for the pointer.
            unsafe { *bad_wr = at };
        }
        set_errno(e);
        e
    };
    let target = match target {
        Ok(t) => t,
        Err(e) => return fail(first, e),
    };
    let walked = verbs::post(target.ctx(), W::SENDS, |nic| {
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
pub(crate) extern "C" fn ibv_alloc_pd(context: *mut IbvContext) -> *mut IbvPd {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::alloc_pd(context as usize))
    })
}

/// `int ibv_dealloc_pd(struct ibv_pd *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dealloc_pd(pd: *mut IbvPd) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::dealloc_pd(pd as usize)))
}

/// `struct ibv_mr *ibv_reg_mr(struct ibv_pd *, void *addr, size_t length, int access)`.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `[addr, addr + length)` is the program's memory, mapped until `ibv_dereg_mr`, which
/// the device reads and writes meanwhile (the libibverbs contract of a registration).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut IbvMr {
    // SAFETY: forwarded; the region is named by its own address.
    unsafe { ibv_reg_mr_iova(pd, addr, length, addr as u64, access) }
}

/// `struct ibv_mr *ibv_reg_mr_iova(pd, addr, length, uint64_t iova, int access)`.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `[addr, addr + length)` as for `ibv_reg_mr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut IbvMr {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the program keeps `[addr, addr + length)` mapped and leaves it to the device
        // until `ibv_dereg_mr` (the contract of ibv_reg_mr, this function's).
        let memory = unsafe { CallerMemory::new(addr as usize, length) };
        // A NULL or wrapping range is EINVAL.
        let memory = memory.ok_or(Errno(libc::EINVAL));
        null_on_err(memory.and_then(|m| verbs::reg_mr(pd as usize, m, iova, access)))
    })
}

/// `struct ibv_mr *ibv_reg_mr_iova2(pd, addr, length, uint64_t iova, unsigned access)`: what
/// the header's `ibv_reg_mr` macro calls when the access flags are not a constant.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `[addr, addr + length)` as for `ibv_reg_mr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut IbvMr {
    // SAFETY: forwarded.
    unsafe { ibv_reg_mr_iova(pd, addr, length, iova, access as c_int) }
}

/// `int ibv_dereg_mr(struct ibv_mr *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dereg_mr(mr: *mut IbvMr) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::dereg_mr(mr as usize)))
}

/// `struct ibv_cq *ibv_create_cq(ctx, int cqe, void *cq_context, channel, int comp_vector)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_create_cq(
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
pub(crate) extern "C" fn ibv_destroy_cq(cq: *mut IbvCq) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_cq(cq as usize)))
}

/// `int ibv_resize_cq(struct ibv_cq *, int cqe)`: an errno value (`EINVAL` for a size out of
/// 1..=max_cqe or below the completions waiting, or a CQ not ours; nothing changes then).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_resize_cq(cq: *mut IbvCq, cqe: c_int) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::resize_cq(cq as usize, cqe)))
}

/// `void ibv_ack_cq_events(struct ibv_cq *, unsigned nevents)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_ack_cq_events(cq: *mut IbvCq, nevents: c_uint) {
    guard((), || verbs::ack_cq_events(cq as usize, nevents));
}

/// `struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *)`: its `fd` can be
/// polled, and made non-blocking with fcntl.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_create_comp_channel(context: *mut IbvContext) -> *mut IbvCompChannel {
    guard(std::ptr::null_mut(), || {
        null_on_err(verbs::create_comp_channel(context as usize))
    })
}

/// `int ibv_destroy_comp_channel(struct ibv_comp_channel *)`: an errno value (`EBUSY` while a
/// CQ uses it).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_comp_channel(channel: *mut IbvCompChannel) -> c_int {
    guard(libc::EIO, || {
        errno_ret(verbs::destroy_comp_channel(channel as usize))
    })
}

/// `int ibv_get_cq_event(channel, struct ibv_cq **cq, void **cq_context)`: 0, or -1 with
/// errno (`EAGAIN` on a non-blocking fd with no event).
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `cq` and `cq_context` are NULL or valid for writing a pointer.
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
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `init_attr` is NULL or valid for reading and writing a `struct ibv_qp_init_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_qp(
    pd: *mut IbvPd,
    init_attr: *mut IbvQpInitAttr,
) -> *mut IbvQp {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller passes a struct ibv_qp_init_attr.
        null_on_err(unsafe { read_in(init_attr) }.and_then(|init| {
            verbs::create_qp(pd as usize, init, wr_fns()).map(|(qp, cap)| {
                // SAFETY: as above; only the cap field is written.
                unsafe { (&raw mut (*init_attr).cap).write_unaligned(cap) };
                qp
            })
        }))
    })
}

/// `struct ibv_ah *ibv_create_ah(struct ibv_pd *, struct ibv_ah_attr *)`: NULL with errno
/// (`EINVAL` without a GRH or from a GID other than 1).
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for reading a `struct ibv_ah_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_ah(pd: *mut IbvPd, attr: *mut IbvAhAttr) -> *mut IbvAh {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller passes a struct ibv_ah_attr.
        null_on_err(unsafe { read_in(attr) }.and_then(|a| verbs::create_ah(pd as usize, &a)))
    })
}

/// `int ibv_destroy_ah(struct ibv_ah *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_ah(ah: *mut IbvAh) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_ah(ah as usize)))
}

/// `int ibv_destroy_qp(struct ibv_qp *)`: an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_qp(qp: *mut IbvQp) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_qp(qp as usize)))
}

/// `int ibv_modify_qp(struct ibv_qp *, struct ibv_qp_attr *, int attr_mask)`: an errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for reading a `struct ibv_qp_attr`.
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
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` and `init_attr` are NULL or valid for writing a `struct ibv_qp_attr` and a
/// `struct ibv_qp_init_attr`.
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
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `wc` is NULL or valid for writing `num_entries` `struct ibv_wc`.
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
pub(crate) extern "C" fn req_notify_cq(cq: *mut IbvCq, solicited_only: c_int) -> c_int {
    guard(libc::EIO, || {
        errno_ret(verbs::req_notify_cq(cq as usize, solicited_only != 0))
    })
}

/// `ops.alloc_mw`, what the header's `ibv_alloc_mw` calls: NULL with errno (`EINVAL`) for a
/// PD not ours or a type other than 1 and 2.
pub(crate) extern "C" fn alloc_mw(pd: *mut IbvPd, mw_type: c_int) -> *mut IbvMw {
    guard(std::ptr::null_mut(), || {
        match verbs::alloc_mw(pd as usize, mw_type) {
            Ok(mw) => mw,
            Err(Errno(e)) => {
                set_errno(e);
                std::ptr::null_mut()
            }
        }
    })
}

/// `ops.dealloc_mw`, what the header's `ibv_dealloc_mw` calls: an errno value.
pub(crate) extern "C" fn dealloc_mw(mw: *mut IbvMw) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::dealloc_mw(mw as usize)))
}

/// `ops.bind_mw`, what the header's `ibv_bind_mw` calls for a type 1 window: an errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `mw_bind` is NULL or valid for reading a `struct ibv_mw_bind`.
pub(crate) unsafe extern "C" fn bind_mw(
    qp: *mut IbvQp,
    mw: *mut IbvMw,
    mw_bind: *mut IbvMwBind,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the caller's struct ibv_mw_bind, as ibv_bind_mw passes it.
        let bind = match unsafe { read_in(mw_bind) } {
            Ok(b) => b,
            Err(e) => return errno_ret(Err(e)),
        };
        errno_ret(verbs::bind_mw(qp as usize, mw as usize, &bind))
    })
}

/// `ops.post_send`: an errno value; `*bad_wr` is the first WR not posted.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `wr` is NULL or a list of `struct ibv_send_wr`, each with `num_sge` readable SGEs
/// (and inline data readable where asked), linked by `next`; `bad_wr` is NULL or valid for writing
/// a pointer.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad_wr: *mut *mut IbvSendWr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the caller's list, as ibv_post_send passes it.
        unsafe {
            post_list(
                verbs::qp_for_post(qp as usize),
                wr,
                bad_wr,
                |target, nic, w| {
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
                    let mut wr = verbs::send_wr(w, sgl, target.sig_all, ud)?;
                    if wr.inline && !wr.op.is_read_or_atomic() {
                        // IBV_SEND_INLINE: the bytes may lie in any memory of the program's.
                        wr.inline_data = Some(inline_bytes(&wr.sgl, nic.config().max_inline)?);
                    }
                    target.send(nic, wr)
                },
            )
        }
    })
}

/// What takes receive WRs: a QP or an SRQ.
trait Receives: Target {
    fn recv(&self, nic: &mut roce_core::Nic, wr: roce_core::RecvWr) -> Result<(), Errno>;
}

impl Receives for verbs::PostQp {
    fn recv(&self, nic: &mut roce_core::Nic, wr: roce_core::RecvWr) -> Result<(), Errno> {
        self.post_recv(nic, wr)
    }
}

impl Receives for verbs::PostSrq {
    fn recv(&self, nic: &mut roce_core::Nic, wr: roce_core::RecvWr) -> Result<(), Errno> {
        self.post_recv(nic, wr)
    }
}

/// Posts a C list of receive WRs to `target`, as [`post_list`].
///
/// # Safety
/// As [`post_list`].
unsafe fn post_receives<T: Receives>(
    target: Result<T, Errno>,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: forwarded.
        unsafe {
            post_list(target, wr, bad_wr, |target, nic, w| {
                let sgl = sges(w.sg_list, w.num_sge)?;
                target.recv(nic, verbs::recv_wr(w.wr_id, sgl))
            })
        }
    })
}

/// `ops.post_recv`: an errno value; `*bad_wr` is the first WR not posted.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `wr` is NULL or a list of `struct ibv_recv_wr`, each with `num_sge` readable SGEs,
/// linked by `next`; `bad_wr` is NULL or valid for writing a pointer.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut IbvQp,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    // SAFETY: the caller's list, as ibv_post_recv passes it.
    unsafe { post_receives(verbs::qp_for_post(qp as usize), wr, bad_wr) }
}

/// `ops.post_srq_recv`: an errno value; `*bad_wr` is the first WR not posted.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `wr` and `bad_wr` as for `post_recv`.
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut IbvSrq,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    // SAFETY: the caller's list, as ibv_post_srq_recv passes it.
    unsafe { post_receives(verbs::srq_for_post(srq as usize), wr, bad_wr) }
}

/// `struct ibv_srq *ibv_create_srq(struct ibv_pd *, struct ibv_srq_init_attr *)`: NULL with
/// errno on failure; the attributes the SRQ got are written back.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `init` is NULL or valid for reading and writing a `struct ibv_srq_init_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_srq(
    pd: *mut IbvPd,
    init: *mut IbvSrqInitAttr,
) -> *mut IbvSrq {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller passes a struct ibv_srq_init_attr.
        null_on_err(unsafe { read_in(init) }.and_then(|i| {
            verbs::create_srq(pd as usize, i.srq_context, i.attr).map(|(srq, got)| {
                // SAFETY: as above; only the attr member is written.
                unsafe { std::ptr::addr_of_mut!((*init).attr).write_unaligned(got) };
                srq
            })
        }))
    })
}

/// `int ibv_modify_srq(struct ibv_srq *, struct ibv_srq_attr *, int mask)`: an errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for reading a `struct ibv_srq_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_modify_srq(
    srq: *mut IbvSrq,
    attr: *mut IbvSrqAttr,
    mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        if attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller passes a struct ibv_srq_attr.
        let a = unsafe { attr.read_unaligned() };
        errno_ret(verbs::modify_srq(srq as usize, a, mask))
    })
}

/// `int ibv_query_srq(struct ibv_srq *, struct ibv_srq_attr *)`: an errno value.
///
/// # Safety
/// Handles (contexts, PDs, CQs, QPs, ...) are looked up in this library's tables, so any value is
/// safe there; `attr` is NULL or valid for writing a `struct ibv_srq_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_srq(srq: *mut IbvSrq, attr: *mut IbvSrqAttr) -> c_int {
    guard(libc::EIO, || {
        errno_ret(verbs::query_srq(srq as usize).and_then(|a| {
            // SAFETY: the caller passes a struct ibv_srq_attr.
            unsafe { write_out(attr, a) }
        }))
    })
}

/// `int ibv_destroy_srq(struct ibv_srq *)`: an errno value (`EBUSY` while a QP uses it).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_srq(srq: *mut IbvSrq) -> c_int {
    guard(libc::EIO, || errno_ret(verbs::destroy_srq(srq as usize)))
}
