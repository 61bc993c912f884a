//! The relink of a crate's staticlib into a shared library with symbol versions, for the
//! build scripts of roce-verbs-so and roce-rdmacm-so.
//!
//! A Rust cdylib cannot carry symbol versions: rustc hands the linker its own version script,
//! and the symbols end up unversioned, which glibc's loader refuses for Debian's BIND_NOW
//! binaries (`Inconsistency detected by ld.so: dl-lookup.c: … check_match`, or `version
//! 'IBVERBS_1.6' not found`; zlib-rs relinks the same way). So the library crate is a
//! build-dependency built as a staticlib, and [`Relink::run`] runs
//!
//! ```text
//! cc -shared -o $OUT_DIR/lib/SONAME -Wl,--whole-archive libCRATE.a -Wl,--no-whole-archive
//!    -Wl,--version-script=MAP -Wl,-soname,SONAME -Wl,-z,now -Wl,-z,defs [EXTRA] -l<std's>
//! ```
//!
//! `CC` chooses the compiler driver (default `cc`). A build script may panic: that is how it
//! reports a failure to cargo.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// One relink.
#[derive(Debug)]
pub struct Relink<'a> {
    /// The library crate's name as in its archive, `roce_verbs` for `libroce_verbs-HASH.a`.
    pub archive: &'a str,
    /// The output's file name and soname, `libibverbs.so.1`.
    pub soname: &'a str,
    /// The version script.
    pub map: PathBuf,
    /// Linker arguments after the version script (`-L…`, `-l:…`).
    pub extra: Vec<OsString>,
    /// The `cargo:rustc-env` variable that gets the output's directory.
    pub env: &'a str,
}

impl Relink<'_> {
    /// Links `$OUT_DIR/lib/SONAME`, sets `env` to that directory for the crate, and returns
    /// the library's path.
    pub fn run(&self) -> PathBuf {
        let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        println!("cargo:rerun-if-changed={}", self.map.display());
        println!("cargo:rerun-if-env-changed=CC");
        let archive = find_archive(&out_dir, self.archive);
        let lib_dir = out_dir.join("lib");
        std::fs::create_dir_all(&lib_dir).expect("create $OUT_DIR/lib");
        let so = lib_dir.join(self.soname);
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
        let soname = self.soname;
        let status = Command::new(&cc)
            .arg("-shared")
            .arg("-o")
            .arg(&so)
            .arg("-Wl,--whole-archive")
            .arg(&archive)
            .arg("-Wl,--no-whole-archive")
            .arg(format!("-Wl,--version-script={}", self.map.display()))
            .arg(format!("-Wl,-soname,{soname}"))
            .arg("-Wl,-z,now")
            .arg("-Wl,-z,defs")
            .args(&self.extra)
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
                panic!("cannot run {cc} to link {soname} (install gcc or set CC): {e}")
            });
        assert!(
            status.success(),
            "{cc} failed to link {soname} from {}",
            archive.display()
        );
        println!("cargo:rustc-env={}={}", self.env, lib_dir.display());
        so
    }
}

/// The copy of a linked library that an installed `roce` carries inside itself (with
/// `include_bytes!`) and writes out where cargo's target directory is gone: `so` without its
/// debug sections (`strip --strip-debug`: the symbol table stays, so backtraces still name the
/// functions), in `$OUT_DIR/carried/`. Sets `env` to the copy's path and `env_HASH` to the
/// 16 hex digits of its [`fnv1a`] for the crate. Where `strip` (binutils, beside `cc`) fails,
/// the copy is the library as linked, and cargo shows a warning.
pub fn carry(so: &Path, env: &str) {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = out_dir.join("carried");
    std::fs::create_dir_all(&dir).expect("create $OUT_DIR/carried");
    let name = so.file_name().expect("a library has a file name");
    let copy = dir.join(name);
    let _ = std::fs::remove_file(&copy);
    let stripped = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&copy)
        .arg(so)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        println!(
            "cargo:warning=strip --strip-debug failed on {}: the copy roce carries keeps its debug sections",
            so.display()
        );
        std::fs::copy(so, &copy).expect("copy the library to $OUT_DIR/carried");
    }
    let bytes = std::fs::read(&copy).expect("read the carried library");
    println!("cargo:rustc-env={env}={}", copy.display());
    println!("cargo:rustc-env={env}_HASH={:016x}", fnv1a(&bytes));
}

/// 64-bit FNV-1a: a name for the carried libraries' contents (their cache directory), not a
/// check of them (the cache's files are compared byte for byte).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The newest `lib<name>-*.a` in the deps directories where cargo put the build-dependency.
/// (Cargo tells a build script nothing about its build-dependencies' files; the newest is the
/// one just built from the current sources.)
fn find_archive(out_dir: &Path, name: &str) -> PathBuf {
    let dirs = deps_dirs(out_dir, std::env::var_os("TARGET").as_deref());
    let prefix = format!("lib{name}-");
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for entry in dirs
        .iter()
        .filter_map(|deps| std::fs::read_dir(deps).ok())
        .flatten()
    {
        let Ok(entry) = entry else { continue };
        let file = entry.file_name();
        let file = file.to_string_lossy();
        if !(file.starts_with(&prefix) && file.ends_with(".a")) {
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
            "no {prefix}*.a in {}: the crate must be a build-dependency",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        )
    })
}

/// Where cargo puts build-dependencies: `$target/$profile/deps` beside the package's own
/// build directory (`$target/$profile/build/<pkg>-HASH/out`), and with `--target TRIPLE`
/// (`triple`, cargo's `TARGET`), where the package's directory is `$target/TRIPLE/$profile/…`,
/// in the host's `$target/$profile/deps` too (build-dependencies are built for the host).
fn deps_dirs(out_dir: &Path, triple: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is target/<profile>/build/<pkg>/out");
    let mut dirs = vec![profile_dir.join("deps")];
    if let (Some(profile), Some(triple_dir)) = (profile_dir.file_name(), profile_dir.parent())
        && triple.is_some_and(|t| triple_dir.file_name() == Some(t))
        && let Some(target_dir) = triple_dir.parent()
    {
        dirs.push(target_dir.join(profile).join("deps"));
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRIPLE: &str = "x86_64-unknown-linux-gnu";

    #[test]
    fn fnv1a_is_the_published_function() {
        // The test vectors of the FNV reference (draft-eastlake-fnv): "" and "a".
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_build_for_the_host_finds_its_build_dependencies_beside_it() {
        let out = Path::new("/t/release/build/roce-verbs-so-1234/out");
        assert_eq!(
            deps_dirs(out, Some(TRIPLE.as_ref())),
            [PathBuf::from("/t/release/deps")]
        );
    }

    #[test]
    fn a_build_with_target_also_looks_where_the_host_build_dependencies_are() {
        // `cargo build --target x86_64-unknown-linux-gnu` (bench/guests.sh's static binary):
        // the package is built under the triple, its build-dependencies for the host.
        let out = Path::new("/t/x86_64-unknown-linux-gnu/release/build/roce-verbs-so-1234/out");
        assert_eq!(
            deps_dirs(out, Some(TRIPLE.as_ref())),
            [
                PathBuf::from("/t/x86_64-unknown-linux-gnu/release/deps"),
                PathBuf::from("/t/release/deps")
            ]
        );
    }
}
