//! Links roce-verbs's staticlib into `libibverbs.so.1` with libibverbs's symbol versions.
//!
//! A Rust cdylib cannot do this: rustc hands the linker its own version script, and the
//! symbols end up unversioned, which glibc's loader refuses for Debian's BIND_NOW binaries
//! (`Inconsistency detected by ld.so: dl-lookup.c: … check_match`, or `version 'IBVERBS_1.6'
//! not found`; zlib-rs relinks the same way). So roce-verbs is a build-dependency built
//! as a staticlib, and this script runs
//!
//! ```text
//! cc -shared -Wl,--whole-archive libroce_verbs.a -Wl,--no-whole-archive
//!    -Wl,--version-script=crates/roce-verbs/libibverbs.map -Wl,-soname,libibverbs.so.1
//! ```
//!
//! into `$OUT_DIR/lib/libibverbs.so.1`; the crate exports that directory as
//! `roce_verbs_so::library_dir()`. `CC` chooses the compiler driver (default `cc`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let map = manifest.join("../roce-verbs/libibverbs.map");
    println!("cargo:rerun-if-changed={}", map.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");

    let archive = find_archive(&out_dir);
    let lib_dir = out_dir.join("lib");
    std::fs::create_dir_all(&lib_dir).expect("create $OUT_DIR/lib");
    let so = lib_dir.join("libibverbs.so.1");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .arg("-shared")
        .arg("-o")
        .arg(&so)
        .arg("-Wl,--whole-archive")
        .arg(&archive)
        .arg("-Wl,--no-whole-archive")
        .arg(format!("-Wl,--version-script={}", map.display()))
        .arg("-Wl,-soname,libibverbs.so.1")
        .arg("-Wl,-z,now")
        .arg("-Wl,-z,defs")
        // What Rust's std needs on Linux (`rustc --print native-static-libs`).
        .args([
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ])
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run {cc} to link libibverbs.so.1 (install gcc or set CC): {e}")
        });
    assert!(
        status.success(),
        "{cc} failed to link libibverbs.so.1 from {}",
        archive.display()
    );
    println!("cargo:rustc-env=ROCE_VERBS_SO_DIR={}", lib_dir.display());
}

/// The newest `libroce_verbs-*.a` in the deps directory where cargo put the build-dependency.
/// (Cargo tells a build script nothing about its build-dependencies' files; newest is the one
/// just built from the current sources.)
fn find_archive(out_dir: &Path) -> PathBuf {
    // $target/$profile/build/roce-verbs-so-HASH/out -> $target/$profile/deps
    let deps = out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is target/<profile>/build/<pkg>/out")
        .join("deps");
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(&deps).unwrap_or_else(|e| panic!("read {}: {e}", deps.display()))
    {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("libroce_verbs-") && name.ends_with(".a")) {
            continue;
        }
        let Ok(modified) = entry.metadata().and_then(|m| m.modified()) else {
            continue;
        };
        if best.as_ref().is_none_or(|(t, _)| modified > *t) {
            best = Some((modified, entry.path()));
        }
    }
    best.map(|(_, p)| p).unwrap_or_else(|| {
        panic!(
            "no libroce_verbs-*.a in {}: roce-verbs must be a build-dependency",
            deps.display()
        )
    })
}
