//! Where the replacement `libibverbs.so.1` is.
//!
//! `build.rs` links it from roce-verbs (see there for why a cdylib will not do); `roce exec`
//! puts [`library_dir`] first on `LD_LIBRARY_PATH` so that an unmodified verbs program loads
//! it instead of the system's libibverbs.

use std::path::{Path, PathBuf};

/// The library's file name (its soname).
pub const SONAME: &str = "libibverbs.so.1";

/// The directory the build put `libibverbs.so.1` in (inside cargo's target directory).
pub fn library_dir() -> &'static Path {
    Path::new(env!("ROCE_VERBS_SO_DIR"))
}

/// The library as an installed `roce` carries it, for when [`library_dir`] is gone (`cargo
/// install` builds in a directory it then deletes): without its debug sections (see
/// `roce_cabi::build::carry`). Only a program that calls this holds the bytes (and the crate's
/// metadata does not: hence a function, not inlined, rather than a `pub static`).
#[inline(never)]
pub fn carried() -> &'static [u8] {
    include_bytes!(env!("ROCE_VERBS_SO_CARRIED"))
}

/// 16 hex digits that change with [`carried`]'s bytes (its FNV-1a, computed by the build).
pub const CARRIED_HASH: &str = env!("ROCE_VERBS_SO_CARRIED_HASH");

/// `library_dir()/libibverbs.so.1`.
pub fn library_path() -> PathBuf {
    library_dir().join(SONAME)
}
