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

/// `library_dir()/libibverbs.so.1`.
pub fn library_path() -> PathBuf {
    library_dir().join(SONAME)
}
