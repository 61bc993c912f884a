//! The libibverbs 1.x C ABI over a roce-emu NIC: the code of the replacement `libibverbs.so.1`
//! that `roce exec` puts in front of unmodified verbs programs.
//!
//! The crate is built as a staticlib and relinked by `crates/roce-verbs-so` into a shared
//! library with libibverbs's symbol versions (`libibverbs.map`). Which verbs work, and what a
//! program gets for the others, is in `docs/verbs.md`.
//!
//! Layout: [`abi`] the C structures, [`config`] the environment variables that describe the
//! device, [`device`] what the device and its port show, [`sysfs`] the same as the kernel's sysfs and /dev show it, `engine` the NIC's thread, `cm` the connection manager for roce-emu's librdmacm, `log` the NIC's log on the program's stderr, `state`
//! the device and its open contexts, `verbs` the program's objects and their translation to
//! the engine. The modules that may use `unsafe`: `ffi`, `ffi_verbs`, `ffi_ex` and `ffi_cm` (the exported
//! functions), `stubs` (the names that fail with `EOPNOTSUPP`) and `memory`
//! (a program's registered buffer); objects handed to C are roce-cabi's `CBox`, shared with
//! roce-rdmacm.

#![deny(unsafe_code)]

pub mod abi;
mod cm;
pub mod config;
pub mod device;
mod engine;
mod ffi;
mod ffi_cm;
mod ffi_ex;
mod ffi_verbs;
mod log;
mod memory;
mod state;
mod strings;
mod stubs;
pub mod sysfs;
mod verbs;
