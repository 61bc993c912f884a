//! What the two C libraries of roce-emu, roce-verbs (`libibverbs.so.1`) and roce-rdmacm
//! (`librdmacm.so.1`), share in facing C, without sharing an engine: roce-rdmacm calls the
//! `ibv_*` functions of roce-emu's libibverbs dynamically (one NIC per process), so this crate
//! holds only plain pieces.
//!
//! - [`CBox`]: a heap object whose address C holds.
//! - [`os`]: `errno`, non-blocking descriptors, the panic guard of the exported functions.
//! - [`FirstTime`]: a name said once on stderr; [`stubs!`]: the exported names that only fail.
//! - [`ibv`]: the `<infiniband/verbs.h>` structures both libraries fill.
//! - [`spawn_settled`]: a library's thread, started before the call that starts it returns.
//! - [`cm`]: the private interface through which librdmacm reaches the engine's CM.
//! - `build` (feature `build`): the relink of a staticlib into a `.so` with symbol versions,
//!   for the build scripts of roce-verbs-so and roce-rdmacm-so.
//! - `testing` (feature `testing`): the checks their tests share (exported symbols against a
//!   version script, `repr(C)` layouts against a C header, C test programs).
//!
//! The modules that may use `unsafe`: `cbox` and `os`.

#![deny(unsafe_code)]

#[cfg(any(test, feature = "build"))]
pub mod build;
mod cbox;
pub mod cm;
pub mod ibv;
pub mod os;
mod stubs;
#[cfg(feature = "testing")]
pub mod testing;
mod thread;

pub use cbox::CBox;
pub use stubs::FirstTime;
pub use thread::spawn_settled;
