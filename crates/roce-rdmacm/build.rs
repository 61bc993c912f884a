//! Links the crate's own test binaries against roce-emu's `libibverbs.so.1` (the staticlib is
//! relinked by roce-rdmacm-so, which names the same library): the `ibv_*` functions called by
//! `src/ibv.rs` must come from there, never from the system's libibverbs, so the library is
//! named by its file (`-l:libibverbs.so.1` in that directory) and found at run time via rpath.

fn main() {
    let dir = roce_verbs_so::library_dir();
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib:+verbatim=libibverbs.so.1");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!("cargo:rerun-if-changed=build.rs");
}
