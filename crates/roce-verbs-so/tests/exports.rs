//! The linked libibverbs.so.1 exports what Debian's RDMA programs import, each name at its
//! version: a missing one would make the dynamic linker refuse the program at load time
//! (they are linked BIND_NOW). Reads symbol tables with `objdump -T` (binutils) and checks
//! the loader itself with `ldd -r`. The Debian programs come from the packages ibverbs-utils,
//! perftest, rdmacm-utils and ibverbs-providers; where one is missing the test says so and
//! skips it (under CI=true it fails).

use roce_cabi::testing::{
    Symbols, check_exports, check_imports, check_loader, map_symbols, skip_or_fail,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Programs and libraries whose imports must resolve against ours, and their packages.
const IMPORTERS: &[(&str, &str)] = &[
    ("bin/ibv_devices", "ibverbs-utils"),
    ("bin/ibv_devinfo", "ibverbs-utils"),
    ("bin/ibv_asyncwatch", "ibverbs-utils"),
    ("bin/ibv_rc_pingpong", "ibverbs-utils"),
    ("bin/ibv_uc_pingpong", "ibverbs-utils"),
    ("bin/ibv_ud_pingpong", "ibverbs-utils"),
    ("bin/ibv_srq_pingpong", "ibverbs-utils"),
    ("bin/ibv_xsrq_pingpong", "ibverbs-utils"),
    ("bin/ib_write_bw", "perftest"),
    ("bin/ib_read_bw", "perftest"),
    ("bin/ib_send_bw", "perftest"),
    ("bin/ib_atomic_bw", "perftest"),
    ("bin/ib_write_lat", "perftest"),
    ("bin/ib_read_lat", "perftest"),
    ("bin/ib_send_lat", "perftest"),
    ("bin/ib_atomic_lat", "perftest"),
    ("bin/rping", "rdmacm-utils"),
    ("lib/libmlx5.so.1", "ibverbs-providers"),
    ("lib/libefa.so.1", "ibverbs-providers"),
    ("lib/librdmacm.so.1", "librdmacm1"),
];

fn resolve(entry: &str) -> PathBuf {
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    match entry.split_once('/') {
        Some(("bin", name)) => Path::new("/usr/bin").join(name),
        Some((_, name)) => Path::new("/usr/lib").join(multiarch).join(name),
        None => PathBuf::from(entry),
    }
}

/// `(version, name)` of the `IBVERBS_*` symbols of `file`: the defined ones or the imports.
fn ibverbs_symbols(file: &Path, undefined: bool) -> Option<Symbols> {
    roce_cabi::testing::versioned_symbols(file, "IBVERBS_", undefined)
}

/// The version script's names at the nodes whose name starts with `prefix`.
fn map_of(prefix: &str) -> Symbols {
    map_symbols(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../roce-verbs/libibverbs.map"))
        .into_iter()
        .filter(|(node, _)| node.starts_with(prefix))
        .collect()
}

/// libibverbs's names (the private node of roce-emu apart).
fn map() -> Symbols {
    map_of("IBVERBS_")
}

fn importers(programs_only: bool) -> Vec<(PathBuf, &'static str)> {
    IMPORTERS
        .iter()
        .filter(|(e, _)| !programs_only || e.starts_with("bin/"))
        .map(|(e, p)| (resolve(e), *p))
        .collect()
}

fn ours() -> Option<Symbols> {
    let so = roce_verbs_so::library_path();
    assert!(so.exists(), "{} was not built", so.display());
    ibverbs_symbols(&so, false)
}

#[test]
fn every_name_of_the_version_script_is_exported_at_its_node() {
    let Some(ours) = ours() else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    let map = map();
    assert_eq!(
        map.len(),
        146,
        "rdma-core 44 has 146 default-versioned names"
    );
    check_exports(&ours, &map);
}

#[test]
fn the_private_node_exports_the_connection_managers_functions() {
    let so = roce_verbs_so::library_path();
    let Some(ours) = roce_cabi::testing::versioned_symbols(&so, roce_cabi::cm::VERSION_NODE, false)
    else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    let map = map_of(roce_cabi::cm::VERSION_NODE);
    assert_eq!(
        map.len(),
        11,
        "roce_cabi::cm names eleven functions: {map:?}"
    );
    check_exports(&ours, &map);
}

#[test]
fn the_real_librarys_default_exports_are_all_ours() {
    let Some(ours) = ours() else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    let real = resolve("lib/libibverbs.so.1");
    let Some(theirs) = real
        .exists()
        .then(|| ibverbs_symbols(&real, false))
        .flatten()
    else {
        return skip_or_fail(&format!(
            "{} not found: apt-get install libibverbs1",
            real.display()
        ));
    };
    // objdump shows non-default versions in parentheses ("(IBVERBS_1.0) ibv_get_device_list",
    // the old-ABI aliases): those are not provided (see the map's header).
    let out = Command::new("objdump")
        .arg("-T")
        .arg(&real)
        .output()
        .unwrap();
    let hidden: Symbols = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(IBVERBS_") && !l.contains("*UND*"))
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let name = f.next()?.to_owned();
            Some((f.next()?.trim_matches(['(', ')']).to_owned(), name))
        })
        .collect();
    assert!(
        hidden.len() >= 30,
        "the old-ABI aliases are parsed: {hidden:?}"
    );
    let missing: Vec<_> = theirs
        .difference(&hidden)
        .filter(|s| !ours.contains(*s))
        .collect();
    assert!(
        missing.is_empty(),
        "the system's libibverbs exports these, we do not: {missing:?}"
    );
}

#[test]
fn debian_programs_find_every_import() {
    let Some(ours) = ours() else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    check_imports(
        &importers(false),
        &ours,
        "IBVERBS_",
        "libibverbs-dev ibverbs-utils perftest rdmacm-utils",
    );
}

#[test]
fn the_loader_resolves_debian_programs_against_ours() {
    let dir = roce_verbs_so::library_dir();
    check_loader(
        &importers(true),
        dir.as_os_str(),
        &[("libibverbs.so.1", dir)],
    );
}
