//! Where the replacement `librdmacm.so.1` is.
//!
//! `build.rs` links it from roce-rdmacm against roce-emu's `libibverbs.so.1`; `roce exec` puts
//! [`library_dir`] on `LD_LIBRARY_PATH` next to [`roce_verbs_so::library_dir`] so that an
//! unmodified RDMA CM program loads both instead of the system's libraries.

use std::path::{Path, PathBuf};

/// The library's file name (its soname).
pub const SONAME: &str = "librdmacm.so.1";

/// The directory the build put `librdmacm.so.1` in (inside cargo's target directory).
pub fn library_dir() -> &'static Path {
    Path::new(env!("ROCE_RDMACM_SO_DIR"))
}

/// The library as an installed `roce` carries it, for when [`library_dir`] is gone (`cargo
/// install` builds in a directory it then deletes): without its debug sections (see
/// `roce_cabi::build::carry`). Only a program that calls this holds the bytes (and the crate's
/// metadata does not: hence a function, not inlined, rather than a `pub static`).
#[inline(never)]
pub fn carried() -> &'static [u8] {
    include_bytes!(env!("ROCE_RDMACM_SO_CARRIED"))
}

/// 16 hex digits that change with [`carried`]'s bytes (its FNV-1a, computed by the build).
pub const CARRIED_HASH: &str = env!("ROCE_RDMACM_SO_CARRIED_HASH");

/// `library_dir()/librdmacm.so.1`.
pub fn library_path() -> PathBuf {
    library_dir().join(SONAME)
}

/// `LD_LIBRARY_PATH` for a program that should load both libraries: this one's directory and
/// libibverbs's.
pub fn search_path() -> std::ffi::OsString {
    let mut p = std::ffi::OsString::from(library_dir());
    p.push(":");
    p.push(roce_verbs_so::library_dir());
    p
}
