//! The linked libibverbs.so.1 exports what Debian's RDMA programs import, each name at its
//! version: a missing one would make the dynamic linker refuse the program at load time
//! (they are linked BIND_NOW). Reads symbol tables with `objdump -T` (binutils) and checks
//! the loader itself with `ldd -r`. The Debian programs come from the packages ibverbs-utils,
//! perftest, rdmacm-utils and ibverbs-providers; where one is missing the test says so and
//! skips it (under CI=true it fails).

mod common;

use common::skip_or_fail;
use std::collections::BTreeSet;
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

/// `(version, name)` of `objdump -T` lines whose version is `IBVERBS_*`: the defined ones
/// (`undefined == false`) or the imports.
fn ibverbs_symbols(file: &Path, undefined: bool) -> Option<BTreeSet<(String, String)>> {
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
        // Imports print their version in parentheses, as do hidden (non-default) versions.
        let version = version.trim_start_matches('(').trim_end_matches(')');
        if !version.starts_with("IBVERBS_") || version == name {
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
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../roce-verbs/libibverbs.map"),
    )
    .expect("read crates/roce-verbs/libibverbs.map");
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
    let so = roce_verbs_so::library_path();
    assert!(so.exists(), "{} was not built", so.display());
    ibverbs_symbols(&so, false)
}

#[test]
fn every_name_of_the_version_script_is_exported_at_its_node() {
    let Some(ours) = ours() else {
        return skip_or_fail("objdump not found: apt-get install binutils");
    };
    let map = map_symbols();
    assert_eq!(
        map.len(),
        146,
        "rdma-core 44 has 146 default-versioned names"
    );
    let missing: Vec<_> = map.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&map).collect();
    assert!(
        missing.is_empty(),
        "in the map but not defined in roce-verbs: {missing:?}"
    );
    assert!(extra.is_empty(), "exported but not in the map: {extra:?}");
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
    let hidden: BTreeSet<(String, String)> = String::from_utf8_lossy(&out.stdout)
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
    let mut checked = 0;
    let mut absent = Vec::new();
    let mut missing = Vec::new();
    for (entry, package) in IMPORTERS {
        let file = resolve(entry);
        if !file.exists() {
            absent.push(format!("{} ({package})", file.display()));
            continue;
        }
        let imports = ibverbs_symbols(&file, true).expect("objdump ran above");
        assert!(
            !imports.is_empty(),
            "{} imports nothing from libibverbs?",
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
            "not installed, not checked: {} (apt-get install libibverbs-dev ibverbs-utils perftest rdmacm-utils)",
            absent.join(", ")
        ));
    }
    eprintln!("{checked} programs and libraries checked");
}

#[test]
fn the_loader_resolves_debian_programs_against_ours() {
    let dir = roce_verbs_so::library_dir();
    let mut absent = Vec::new();
    for (entry, package) in IMPORTERS.iter().filter(|(e, _)| e.starts_with("bin/")) {
        let file = resolve(entry);
        if !file.exists() {
            absent.push(format!("{} ({package})", file.display()));
            continue;
        }
        // ldd -r performs every relocation as BIND_NOW would and reports what fails.
        let Ok(out) = Command::new("ldd")
            .arg("-r")
            .arg(&file)
            .env("LD_LIBRARY_PATH", dir)
            .output()
        else {
            return skip_or_fail("ldd not found (package libc-bin)");
        };
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let ours = text
            .lines()
            .find(|l| l.trim_start().starts_with("libibverbs.so.1 "))
            .unwrap_or_else(|| panic!("{} does not load libibverbs.so.1:\n{text}", file.display()));
        assert!(
            ours.contains(&dir.display().to_string()),
            "{} loads another libibverbs: {ours}",
            file.display()
        );
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
