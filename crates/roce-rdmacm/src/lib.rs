//! The librdmacm C ABI over roce-emu's libibverbs: the code of the replacement
//! `librdmacm.so.1` that `roce exec` puts in front of unmodified RDMA CM programs (rping,
//! perftest's `-R`, ucmatose, ...).
//!
//! Built as a staticlib and relinked by `crates/roce-rdmacm-so` into a shared library with
//! librdmacm's symbol versions (`librdmacm.map`) that NEEDs roce-emu's `libibverbs.so.1`:
//! the verbs objects (the device context, PDs, CQs, QPs) are made there, through the
//! exported `ibv_*` functions (`ibv`), and connections by the engine's connection manager,
//! through libibverbs's private `roce_cm_*` functions (`roce_cabi::cm`). What each call does,
//! and what fails how, is in `docs/rdmacm.md`.
//!
//! Layout: [`abi`] the C structures, `state` the channels, ids, events and lists handed out,
//! `id` what an id does before a connection, `conn` what it does through the engine's
//! connection manager, `inbox` where the CM's events land, `info` `rdma_getaddrinfo`, `addr`
//! socket addresses. The modules that
//! may use `unsafe`: `ffi` (the exported functions), `stubs` (the names that fail with
//! `ENOSYS`), `ibv` (the calls into libibverbs); objects handed to C are roce-cabi's `CBox`, shared with
//! roce-verbs.

#![deny(unsafe_code)]

pub mod abi;
mod addr;
mod conn;
mod ffi;
mod ibv;
mod id;
mod inbox;
mod info;
mod state;
mod strings;
mod stubs;
mod work;

use roce_cabi::FirstTime;

/// An errno value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) i32);

static SAID: FirstTime = FirstTime::new();

/// Says `roce-rdmacm: NAME WHAT` on stderr, the first time only for each name.
pub(crate) fn note(name: &'static str, what: &str) {
    if SAID.first(name) {
        eprintln!("roce-rdmacm: {name} {what}");
    }
}
