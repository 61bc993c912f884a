//! The exported data-path verbs (PDs, MRs, CQs, QPs, posting and polling): the second half of
//! the C face, with the same rules as `ffi.rs` (pointers checked for NULL, objects looked up
//! by address in `verbs.rs`, panics caught, errno set). This module only reads the caller's
//! structures into Rust copies and writes results back; `verbs.rs` does the work.

#![allow(unsafe_code)]

use crate::ffi::set_errno;
use crate::state::Errno;

mod cq;
mod mw;
mod pd;
mod post;
mod qp;
mod srq;

pub(crate) use cq::{poll_cq, req_notify_cq};
pub(crate) use mw::{alloc_mw, bind_mw, dealloc_mw};
pub(crate) use post::{inline_bytes, post_recv, post_send, post_srq_recv, sges};

pub(crate) fn null_on_err<T>(r: Result<*mut T, Errno>) -> *mut T {
    r.unwrap_or_else(|Errno(e)| {
        set_errno(e);
        std::ptr::null_mut()
    })
}
