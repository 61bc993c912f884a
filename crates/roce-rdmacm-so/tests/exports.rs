//! The linked librdmacm.so.1 exports what Debian's RDMA CM programs import, each name at its
//! version (they are linked BIND_NOW: a missing one makes the loader refuse the program), and
//! it loads roce-emu's libibverbs.so.1, not the system's. Reads symbol tables with
//! `objdump -T` (binutils) and checks the loader with `ldd -r`. The programs come from the
//! packages rdmacm-utils and perftest; where one is missing the test says so and skips it
//! (under CI=true it fails).

use roce_cabi::testing::{
    Symbols, check_exports, check_imports, check_loader, map_symbols, skip_or_fail, system_lib,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Programs whose imports must resolve against ours, and their packages.
const IMPORTERS: &[(&str, &str)] = &[
    ("rping", "rdmacm-utils"),
    ("ucmatose", "rdmacm-utils"),
    ("udaddy", "rdmacm-utils"),
    ("rdma_server", "rdmacm-utils"),
    ("rdma_client", "rdmacm-utils"),
    ("rdma_xserver", "rdmacm-utils"),
    ("rdma_xclient", "rdmacm-utils"),
    ("riostream", "rdmacm-utils"),
    ("rstream", "rdmacm-utils"),
    ("ib_send_bw", "perftest"),
    ("ib_write_bw", "perftest"),
    ("ib_read_bw", "perftest"),
    ("ib_send_lat", "perftest"),
];

/// `(version, name)` of the `RDMACM_*` symbols of `file`: the defined ones or the imports.
fn rdmacm_symbols(file: &Path, undefined: bool) -> Option<Symbols> {
    roce_cabi::testing::versioned_symbols(file, "RDMACM_", undefined)
}

fn importers() -> Vec<(PathBuf, &'static str)> {
    IMPORTERS
        .iter()
        .map(|(name, p)| (Path::new("/usr/bin").join(name), *p))
        .collect()
}

fn ours() -> Option<Symbols> {
    let so = roce_rdmacm_so::library_path();
    assert!(so.exists(), "{} was not built", so.display());
    rdmacm_symbols(&so, false)
}

#[test]
fn every_name_of_the_version_script_is_exported_at_its_node() {
    let Some(ours) = ours() else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    let map =
        map_symbols(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../roce-rdmacm/librdmacm.map"));
    assert_eq!(
        map.len(),
        68,
        "rdma-core 44's librdmacm exports 62 + 1 + 2 + 3 names"
    );
    check_exports(&ours, &map);
}

#[test]
fn the_system_librarys_exports_are_all_ours() {
    let Some(ours) = ours() else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    let real = system_lib("librdmacm.so.1");
    let Some(theirs) = real
        .exists()
        .then(|| rdmacm_symbols(&real, false))
        .flatten()
    else {
        return skip_or_fail(&format!(
            "{} not found: apt-get install librdmacm1",
            real.display()
        ));
    };
    assert!(
        theirs.len() >= 68,
        "the system's exports are parsed: {theirs:?}"
    );
    let missing: Vec<_> = theirs.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "the system's librdmacm exports these, we do not: {missing:?}"
    );
}

#[test]
fn debian_programs_find_every_import() {
    let Some(ours) = ours() else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    check_imports(&importers(), &ours, "RDMACM_", "rdmacm-utils perftest");
}

#[test]
fn our_library_needs_our_libibverbs() {
    let Ok(out) = Command::new("readelf")
        .arg("-d")
        .arg(roce_rdmacm_so::library_path())
        .output()
    else {
        return skip_or_fail("readelf not found: apt-get install binutils");
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Shared library: [libibverbs.so.1]"), "{text}");
    // Its ibv_* imports carry libibverbs's versions, which ours defines.
    let Ok(out) = Command::new("objdump")
        .arg("-T")
        .arg(roce_rdmacm_so::library_path())
        .output()
    else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let imports: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("*UND*") && l.contains(" ibv_"))
        .collect();
    assert!(imports.len() >= 10, "{imports:?}");
    assert!(
        imports
            .iter()
            .all(|l| l.contains("(IBVERBS_1.1)") || l.contains("(IBVERBS_1.0)")),
        "{imports:?}"
    );
    // The connection manager is reached through the private node of ours alone.
    let private: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("*UND*") && l.contains(" roce_cm_"))
        .collect();
    assert_eq!(private.len(), 11, "{private:?}");
    assert!(
        private
            .iter()
            .all(|l| l.contains(&format!("({})", roce_cabi::cm::VERSION_NODE))),
        "{private:?}"
    );
}

#[test]
fn the_loader_resolves_debian_programs_against_both_of_ours() {
    check_loader(
        &importers(),
        &roce_rdmacm_so::search_path(),
        &[
            ("librdmacm.so.1", roce_rdmacm_so::library_dir()),
            ("libibverbs.so.1", roce_verbs_so::library_dir()),
        ],
    );
}
