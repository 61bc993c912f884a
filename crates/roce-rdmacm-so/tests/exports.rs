//! The linked librdmacm.so.1 exports what Debian's RDMA CM programs import, each name at its
//! version (they are linked BIND_NOW: a missing one makes the loader refuse the program), and
//! it loads roce-emu's libibverbs.so.1, not the system's. Reads symbol tables with
//! `objdump -T` (binutils) and checks the loader with `ldd -r`. The programs come from the
//! packages rdmacm-utils and perftest; where one is missing the test says so and skips it
//! (under CI=true it fails).

mod common;

use common::skip_or_fail;
use std::collections::BTreeSet;
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

fn system_librdmacm() -> PathBuf {
    Path::new("/usr/lib")
        .join(format!("{}-linux-gnu", std::env::consts::ARCH))
        .join("librdmacm.so.1")
}

/// `(version, name)` of `objdump -T` lines whose version is `RDMACM_*`: the defined ones
/// (`undefined == false`) or the imports. `None` without objdump.
fn rdmacm_symbols(file: &Path, undefined: bool) -> Option<BTreeSet<(String, String)>> {
    let out = Command::new("objdump").arg("-T").arg(file).output().ok()?;
    assert!(
        out.status.success(),
        "objdump -T {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("objdump prints text");
    let mut set = BTreeSet::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [.., version, name] = fields[..] else {
            continue;
        };
        let version = version.trim_start_matches('(').trim_end_matches(')');
        if !version.starts_with("RDMACM_") || version == name {
            continue;
        }
        if line.contains("*UND*") == undefined {
            set.insert((version.to_owned(), name.to_owned()));
        }
    }
    Some(set)
}

/// `(version, name)` for every name in the version script.
fn map_symbols() -> BTreeSet<(String, String)> {
    let map = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../roce-rdmacm/librdmacm.map"),
    )
    .expect("read crates/roce-rdmacm/librdmacm.map");
    let mut set = BTreeSet::new();
    let mut node = None;
    for line in map.lines().map(str::trim) {
        if let Some(n) = line.strip_suffix(" {") {
            node = Some(n.to_owned());
        } else if let Some(name) = line.strip_suffix(';')
            && !name.contains(':')
            && !name.starts_with('}')
        {
            set.insert((
                node.clone().expect("names are inside a node"),
                name.to_owned(),
            ));
        }
    }
    set
}

fn ours() -> Option<BTreeSet<(String, String)>> {
    let so = roce_rdmacm_so::library_path();
    assert!(so.exists(), "{} was not built", so.display());
    rdmacm_symbols(&so, false)
}

#[test]
fn every_name_of_the_version_script_is_exported_at_its_node() {
    let Some(ours) = ours() else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    let map = map_symbols();
    assert_eq!(
        map.len(),
        68,
        "rdma-core 44's librdmacm exports 62 + 1 + 2 + 3 names"
    );
    let missing: Vec<_> = map.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&map).collect();
    assert!(
        missing.is_empty(),
        "in the map but not defined in roce-rdmacm: {missing:?}"
    );
    assert!(extra.is_empty(), "exported but not in the map: {extra:?}");
}

#[test]
fn the_system_librarys_exports_are_all_ours() {
    let Some(ours) = ours() else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    let real = system_librdmacm();
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
    let mut absent = Vec::new();
    let mut missing = Vec::new();
    let mut checked = 0;
    for (name, package) in IMPORTERS {
        let file = Path::new("/usr/bin").join(name);
        if !file.exists() {
            absent.push(format!("{} ({package})", file.display()));
            continue;
        }
        let imports = rdmacm_symbols(&file, true).expect("objdump ran above");
        assert!(
            !imports.is_empty(),
            "{} imports nothing from librdmacm?",
            file.display()
        );
        for sym in imports.difference(&ours) {
            missing.push(format!("{}: {}@{}", file.display(), sym.1, sym.0));
        }
        checked += 1;
    }
    assert!(
        missing.is_empty(),
        "imports we do not export:\n{}",
        missing.join("\n")
    );
    if !absent.is_empty() {
        skip_or_fail(&format!(
            "not installed, not checked: {} (apt-get install rdmacm-utils perftest)",
            absent.join(", ")
        ));
    }
    eprintln!("{checked} programs checked");
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
    let out = Command::new("objdump")
        .arg("-T")
        .arg(roce_rdmacm_so::library_path())
        .output()
        .expect("objdump ran above");
    let text = String::from_utf8_lossy(&out.stdout);
    let imports: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("*UND*") && l.contains(" ibv_"))
        .collect();
    assert!(imports.len() >= 10, "{imports:?}");
    assert!(
        imports.iter().all(|l| l.contains("(IBVERBS_1.1)")),
        "{imports:?}"
    );
}

#[test]
fn the_loader_resolves_debian_programs_against_both_of_ours() {
    let ours = roce_rdmacm_so::library_dir().display().to_string();
    let verbs = roce_verbs_so::library_dir().display().to_string();
    let mut absent = Vec::new();
    for (name, package) in IMPORTERS {
        let file = Path::new("/usr/bin").join(name);
        if !file.exists() {
            absent.push(format!("{} ({package})", file.display()));
            continue;
        }
        // ldd -r performs every relocation as BIND_NOW would and reports what fails.
        let Ok(out) = Command::new("ldd")
            .arg("-r")
            .arg(&file)
            .env("LD_LIBRARY_PATH", roce_rdmacm_so::search_path())
            .output()
        else {
            return skip_or_fail("ldd not found (package libc-bin)");
        };
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for (soname, dir) in [("librdmacm.so.1 ", &ours), ("libibverbs.so.1 ", &verbs)] {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(soname))
                .unwrap_or_else(|| panic!("{} does not load {soname}:\n{text}", file.display()));
            assert!(
                line.contains(dir.as_str()),
                "{} loads another {soname}: {line}",
                file.display()
            );
        }
        for bad in ["undefined symbol", "not found", "no version information"] {
            assert!(!text.contains(bad), "{}: {bad}:\n{text}", file.display());
        }
    }
    if !absent.is_empty() {
        skip_or_fail(&format!(
            "not installed, not checked: {}",
            absent.join(", ")
        ));
    }
}
