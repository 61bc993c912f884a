//! Transparent huge pages for a simulation's heap.
//!
//! At research scale the state a packet-hop reads — its pooled packet, its event, a switch
//! port's queue — is spread over hundreds of megabytes, and with 4 KiB pages nearly every such
//! read also misses the TLB. Where the kernel gives huge pages only to memory that asks for
//! them (`/sys/kernel/mm/transparent_hugepage/enabled` is `madvise`, the common default),
//! glibc's malloc asks for them when its `glibc.malloc.hugetlb=1` tunable is set (glibc 2.35,
//! `GLIBC_TUNABLES`). It reads its tunables once, as the process starts, so `roce sim` runs
//! itself again with the tunable added (the same arguments, standard streams and process id:
//! `exec`), and with `ROCE_SIM_HUGE_PAGES=asked`, so that it runs only once again even where
//! glibc ignores the tunable. Only the main thread's heap is so marked (a spawned thread's
//! arena is not), so the run itself stays on the main thread (`progress.rs`), and each point of
//! a sweep runs in a process of its own (`sweep.rs`). Measured on the reference run: 5 % more
//! packet-hops per second, and 7–11 % more again once the run moved to the main thread
//! (docs/benchmarks.md). `ROCE_SIM_HUGE_PAGES=0` keeps the process as it is — which a tool
//! that does not follow `exec` needs (valgrind without `--trace-children=yes` would measure
//! only the few instructions before it).

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;

/// glibc's tunable: malloc marks the memory it maps and grows `MADV_HUGEPAGE`.
const TUNABLE: &str = "glibc.malloc.hugetlb=1";

/// `0` keeps the process as it started; the re-run has it `asked`.
const OPT_OUT: &str = "ROCE_SIM_HUGE_PAGES";

/// [`OPT_OUT`]'s value in the re-run.
const ASKED: &str = "asked";

/// Runs the process again with huge pages asked for, when they are to be had only so and
/// have not been asked for yet; returns when it does not (or cannot: then it says why in a
/// debug trace and the run goes on with small pages).
pub(super) fn ask() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let current = std::env::var_os("GLIBC_TUNABLES");
    let policy = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
    let Some(tunables) = tunables(
        policy.as_deref().ok(),
        current.as_deref(),
        std::env::var_os(OPT_OUT).as_deref(),
    ) else {
        tracing::debug!(?current, policy = ?policy.ok(), "GLIBC_TUNABLES kept");
        return;
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(err) => {
            tracing::debug!(%err, "huge pages not asked for: no path to this program");
            return;
        }
    };
    let mut args = std::env::args_os();
    let argv0 = args.next();
    let mut command = std::process::Command::new(exe);
    if let Some(argv0) = argv0 {
        command.arg0(argv0);
    }
    // `exec` returns only when it failed.
    let err = command
        .args(args)
        .env("GLIBC_TUNABLES", tunables)
        .env(OPT_OUT, ASKED)
        .exec();
    tracing::debug!(%err, "huge pages not asked for: cannot run this program again");
}

/// The `GLIBC_TUNABLES` to run again with, given the kernel's THP policy (the `enabled` file),
/// the tunables set now and the opt-out variable; `None` to go on as the process is: huge
/// pages already asked for, declined (`0`), this the re-run (`asked`), given to all memory
/// anyway (`always`) or to none (`never`), or the policy unknown.
fn tunables(
    policy: Option<&str>,
    current: Option<&OsStr>,
    opt_out: Option<&OsStr>,
) -> Option<String> {
    let declined = [OsStr::new("0"), OsStr::new(ASKED)];
    if opt_out.is_some_and(|o| declined.contains(&o)) || !policy?.contains("[madvise]") {
        return None;
    }
    match current.map(|c| c.to_str()) {
        None => Some(TUNABLE.to_owned()),
        // Not ours to rewrite: it may mean something glibc reads byte for byte.
        Some(None) => None,
        Some(Some(c)) if c.contains("glibc.malloc.hugetlb") => None,
        Some(Some("")) => Some(TUNABLE.to_owned()),
        Some(Some(c)) => Some(format!("{c}:{TUNABLE}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MADVISE: &str = "always [madvise] never\n";

    fn os(s: &str) -> Option<&OsStr> {
        Some(OsStr::new(s))
    }

    #[test]
    fn huge_pages_are_asked_for_only_where_memory_must_ask() {
        assert_eq!(
            tunables(Some(MADVISE), None, None).as_deref(),
            Some("glibc.malloc.hugetlb=1")
        );
        assert_eq!(tunables(Some("[always] madvise never\n"), None, None), None);
        assert_eq!(tunables(Some("always madvise [never]\n"), None, None), None);
        assert_eq!(tunables(None, None, None), None, "no THP in this kernel");
    }

    #[test]
    fn the_tunable_is_added_to_those_set_and_ends_the_rerun() {
        assert_eq!(
            tunables(Some(MADVISE), os("glibc.malloc.arena_max=2"), None).as_deref(),
            Some("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1")
        );
        assert_eq!(
            tunables(Some(MADVISE), os(""), None).as_deref(),
            Some("glibc.malloc.hugetlb=1")
        );
        // The re-run sees its own tunable (or the user's choice of it) and goes on.
        assert_eq!(
            tunables(Some(MADVISE), os("glibc.malloc.hugetlb=1"), None),
            None
        );
        assert_eq!(
            tunables(Some(MADVISE), os("glibc.malloc.hugetlb=0"), None),
            None
        );
    }

    #[test]
    fn roce_sim_huge_pages_0_declines_them() {
        assert_eq!(tunables(Some(MADVISE), None, os("0")), None);
        // The re-run runs once, whatever glibc made of the tunable.
        assert_eq!(tunables(Some(MADVISE), None, os("asked")), None);
        assert!(tunables(Some(MADVISE), None, os("1")).is_some());
    }
}
