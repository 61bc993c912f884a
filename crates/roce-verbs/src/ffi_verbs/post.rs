//! Posting: a C list of work requests walked in one step of the engine (`ops.post_send`,
//! `ops.post_recv`, `ops.post_srq_recv`), with the SGEs and inline bytes each names.

use std::ffi::c_int;

use roce_core::{InlineData, QpType, Sge};

use crate::abi::{IbvQp, IbvRecvWr, IbvSendWr, IbvSge, IbvSrq};
use crate::ffi::{guard, set_errno};
use crate::state::Errno;
use crate::verbs;

/// Longest WR list read from one post (a cycle in `next` ends here with `EINVAL`).
const MAX_CHAIN: usize = 1 << 16;

/// Reads `n` SGEs at `list`, as the engine takes them.
///
/// # Safety
/// `list` is NULL or valid for `n` reads of `struct ibv_sge`.
pub(crate) unsafe fn sges(list: *const IbvSge, n: c_int) -> Result<roce_core::Sgl, Errno> {
    let n = usize::try_from(n).map_err(|_| Errno(libc::EINVAL))?;
    if n == 0 {
        return Ok(roce_core::Sgl::default());
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
/// anything is read. Up to 32 bytes are held without an allocation ([`InlineData`]).
///
/// # Safety
/// Each SGE's `addr` is valid for `length` reads, as `ibv_post_send`'s caller promises for an
/// inline WR.
pub(crate) unsafe fn inline_bytes(sgl: &[Sge], max_inline: usize) -> Result<InlineData, Errno> {
    let total: u64 = sgl.iter().map(|s| u64::from(s.length)).sum();
    if total > max_inline as u64 {
        return Err(Errno(libc::EINVAL));
    }
    let gathered = InlineData::gathered(total as usize, |out| {
        let mut at = 0;
        for sge in sgl.iter().filter(|s| s.length > 0) {
            let len = sge.length as usize;
            // SAFETY: by the caller's contract.
            let bytes = unsafe { std::slice::from_raw_parts(sge.addr as usize as *const u8, len) };
            out[at..at + len].copy_from_slice(bytes);
            at += len;
        }
        true
    });
    // The fill above always succeeds.
    gathered.ok_or(Errno(libc::EINVAL))
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
