//! Links roce-rdmacm's staticlib into `librdmacm.so.1` with librdmacm's symbol versions, as
//! roce-verbs-so does for libibverbs (see there for why a cdylib will not do):
//!
//! ```text
//! cc -shared -Wl,--whole-archive libroce_rdmacm.a -Wl,--no-whole-archive
//!    -Wl,--version-script=crates/roce-rdmacm/librdmacm.map -Wl,-soname,librdmacm.so.1
//!    -L<roce-verbs-so's library_dir> -l:libibverbs.so.1
//! ```
//!
//! into `$OUT_DIR/lib/librdmacm.so.1`. The `ibv_*` calls bind to roce-emu's libibverbs.so.1
//! (NEEDED, with its IBVERBS_* versions), so the program has one NIC whichever library it
//! calls. `CC` chooses the compiler driver (default `cc`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let map = manifest.join("../roce-rdmacm/librdmacm.map");
    println!("cargo:rerun-if-changed={}", map.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");

    let archive = find_archive(&out_dir);
    let verbs_dir = roce_verbs_so::library_dir();
    let lib_dir = out_dir.join("lib");
    std::fs::create_dir_all(&lib_dir).expect("create $OUT_DIR/lib");
    let so = lib_dir.join("librdmacm.so.1");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .arg("-shared")
        .arg("-o")
        .arg(&so)
        .arg("-Wl,--whole-archive")
        .arg(&archive)
        .arg("-Wl,--no-whole-archive")
        .arg(format!("-Wl,--version-script={}", map.display()))
        .arg("-Wl,-soname,librdmacm.so.1")
        .arg("-Wl,-z,now")
        .arg("-Wl,-z,defs")
        .arg(format!("-L{}", verbs_dir.display()))
        .arg("-l:libibverbs.so.1")
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
            panic!("cannot run {cc} to link librdmacm.so.1 (install gcc or set CC): {e}")
        });
    assert!(
        status.success(),
        "{cc} failed to link librdmacm.so.1 from {}",
        archive.display()
    );
    println!("cargo:rustc-env=ROCE_RDMACM_SO_DIR={}", lib_dir.display());
}

/// The newest `libroce_rdmacm-*.a` in the deps directory where cargo put the
/// build-dependency (as roce-verbs-so's build.rs finds roce-verbs's).
fn find_archive(out_dir: &Path) -> PathBuf {
    // $target/$profile/build/roce-rdmacm-so-HASH/out -> $target/$profile/deps
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
        if !(name.starts_with("libroce_rdmacm-") && name.ends_with(".a")) {
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
            "no libroce_rdmacm-*.a in {}: roce-rdmacm must be a build-dependency",
            deps.display()
        )
    })
}
