//! `roce sim` asks glibc for transparent huge pages by running itself again with
//! `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` where the kernel gives them only to memory that asks
//! (`madvise`), and not when `ROCE_SIM_HUGE_PAGES=0`. The run says, in a debug trace, which
//! tunables it kept.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::path::Path;
use std::process::Command;

const POLICY: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// The debug trace of a short `roce sim` run, with `extra` in its environment.
fn trace(tag: &str, extra: &[(&str, &str)]) -> String {
    let out = std::env::temp_dir().join(format!("roce-sim-thp-{tag}-{}", std::process::id()));
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/fairness.toml");
    let mut command = Command::new(env!("CARGO_BIN_EXE_roce"));
    command
        .args(["sim", scenario.to_str().unwrap(), "--json", "--out"])
        .arg(&out)
        .env("RUST_LOG", "roce::sim::huge_pages=debug")
        .env("NO_COLOR", "1")
        .env_remove("GLIBC_TUNABLES")
        .env_remove("ROCE_SIM_HUGE_PAGES");
    for (k, v) in extra {
        command.env(k, v);
    }
    let o = command.output().unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("GLIBC_TUNABLES kept"),
        "no trace of the choice: {err}"
    );
    err
}

/// Whether this machine is one where the re-run happens: glibc, and THP on `madvise`.
fn madvise_machine() -> bool {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        common::skipped("huge pages are asked for through glibc only");
        return false;
    }
    match std::fs::read_to_string(POLICY) {
        Ok(policy) if policy.contains("[madvise]") => true,
        Ok(policy) => {
            common::skipped(&format!(
                "{POLICY} is {policy:?}, not madvise: nothing to ask for"
            ));
            false
        }
        Err(err) => {
            common::skipped(&format!("no {POLICY} ({err})"));
            false
        }
    }
}

#[test]
fn roce_sim_runs_again_with_huge_pages_asked_for() {
    if !madvise_machine() {
        return;
    }
    let err = trace("on", &[]);
    assert!(err.contains("glibc.malloc.hugetlb=1"), "{err}");
    // Tunables of the user's own are kept, and the huge pages added to them.
    let err = trace("more", &[("GLIBC_TUNABLES", "glibc.malloc.arena_max=4")]);
    assert!(
        err.contains("glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1"),
        "{err}"
    );
}

#[test]
fn roce_sim_huge_pages_0_runs_as_started() {
    if !madvise_machine() {
        return;
    }
    let err = trace("off", &[("ROCE_SIM_HUGE_PAGES", "0")]);
    assert!(!err.contains("hugetlb"), "{err}");
}
