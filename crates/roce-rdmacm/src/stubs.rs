//! Exported names roce-emu's librdmacm does not have yet (multicast, ECE, SRQs made through
//! an id, the rsocket family, ...). Each sets `errno = ENOSYS`, says once on stderr
//! (`roce-rdmacm: rdma_join_multicast is not supported yet`) and returns
//! what its C signature uses for failure: -1 or nothing. They exist because Debian's programs
//! are linked BIND_NOW: every imported name must resolve at load time, used or not.
//!
//! The functions take no parameters whatever their C signature: on x86_64 and aarch64 the
//! caller owns its arguments, so a callee that ignores them is called correctly (as
//! roce-verbs's stubs). -1 is returned as a 64-bit value, which is -1 for `int`, `ssize_t`
//! and `off_t` callers alike.

#![allow(unsafe_code)]

use crate::ffi::set_errno;
use crate::note;
use roce_cabi::stubs;

pub(crate) fn unsupported(name: &'static str) {
    note(name, "is not supported yet");
    set_errno(libc::ENOSYS);
}

stubs! {
    unsupported -> i64 = -1, "-1, errno `ENOSYS`";
    rdma_create_srq,
    rdma_create_srq_ex,
    rdma_get_remote_ece,
    rdma_join_multicast,
    rdma_join_multicast_ex,
    rdma_leave_multicast,
    rdma_notify,
    rdma_reject_ece,
    rdma_set_local_ece,
    raccept,
    rbind,
    rclose,
    rconnect,
    rfcntl,
    rgetpeername,
    rgetsockname,
    rgetsockopt,
    riomap,
    riounmap,
    riowrite,
    rlisten,
    rread,
    rreadv,
    rrecv,
    rrecvfrom,
    rrecvmsg,
    rselect,
    rsend,
    rsendmsg,
    rsendto,
    rsetsockopt,
    rshutdown,
    rsocket,
    rwrite,
    rwritev,
}
stubs! {
    unsupported, "does nothing";
    rdma_destroy_srq,
}
