//! Links roce-rdmacm's staticlib into `librdmacm.so.1` with librdmacm's symbol versions
//! (`crates/roce-rdmacm/librdmacm.map`), as roce-verbs-so does for libibverbs (why a cdylib
//! will not do, and the command, are in `roce_cabi::build`), adding
//!
//! ```text
//! -L<roce-verbs-so's library_dir> -l:libibverbs.so.1
//! ```
//!
//! so that the `ibv_*` calls bind to roce-emu's libibverbs.so.1 (NEEDED, with its IBVERBS_*
//! versions): the program has one NIC whichever library it calls.

fn main() {
    let manifest = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    println!("cargo:rerun-if-changed=build.rs");
    let verbs_dir = roce_verbs_so::library_dir();
    let so = roce_cabi::build::Relink {
        archive: "roce_rdmacm",
        soname: "librdmacm.so.1",
        map: manifest.join("../roce-rdmacm/librdmacm.map"),
        extra: vec![
            format!("-L{}", verbs_dir.display()).into(),
            "-l:libibverbs.so.1".into(),
        ],
        env: "ROCE_RDMACM_SO_DIR",
    }
    .run();
    roce_cabi::build::carry(&so, "ROCE_RDMACM_SO_CARRIED");
}
