//! Links roce-verbs's staticlib into `libibverbs.so.1` with libibverbs's symbol versions
//! (`crates/roce-verbs/libibverbs.map`), into `$OUT_DIR/lib/libibverbs.so.1`; the crate
//! exports that directory as `roce_verbs_so::library_dir()`. Why a cdylib will not do, and the
//! command, are in `roce_cabi::build`.

fn main() {
    let manifest = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    println!("cargo:rerun-if-changed=build.rs");
    let so = roce_cabi::build::Relink {
        archive: "roce_verbs",
        soname: "libibverbs.so.1",
        map: manifest.join("../roce-verbs/libibverbs.map"),
        extra: Vec::new(),
        env: "ROCE_VERBS_SO_DIR",
    }
    .run();
    roce_cabi::build::carry(&so, "ROCE_VERBS_SO_CARRIED");
}
