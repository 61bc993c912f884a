//! The linked library from C: `tests/c/errors.c` (the error paths, on a device at
//! 127.0.13.60), `tests/c/inline.c` (inline data from unregistered memory, 127.0.13.61) and
//! `tests/c/ud.c` (a UD receive's completion and GRH area as middleware reads them,
//! 127.0.13.62) are compiled against Debian's `<infiniband/verbs.h>` and this library. Each prints one line
//! per check and exits with the number that failed. Skips (fails under CI=true) without the
//! header (libibverbs-dev) or a C compiler.

use std::path::Path;

/// Builds `tests/c/NAME.c` against the installed header and our library, runs it on a device
/// at `ip`, and returns its "ok" lines once it exited 0; `None` when it was skipped.
fn run_c_program(name: &str, ip: &str) -> Option<Vec<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let run = roce_cabi::testing::run_c_program(
        &src,
        "infiniband/verbs.h",
        "libibverbs-dev",
        &[roce_verbs_so::library_path()],
        &[
            ("LD_LIBRARY_PATH", roce_verbs_so::library_dir().as_os_str()),
            ("ROCE_VERBS_IP", ip.as_ref()),
        ],
    )?;
    Some(run.ok)
}

#[test]
fn c_program_sees_libibverbs_errors_and_nothing_changes_on_a_refusal() {
    if let Some(checks) = run_c_program("errors", "127.0.13.60") {
        assert!(
            checks.len() >= 40,
            "only {} checks ran:\n{checks:?}",
            checks.len()
        );
    }
}

#[test]
fn inline_sends_take_their_bytes_from_any_memory_of_the_program() {
    if let Some(checks) = run_c_program("inline", "127.0.13.61") {
        assert!(
            checks.len() >= 12,
            "only {} checks ran:\n{checks:?}",
            checks.len()
        );
    }
}

#[test]
fn a_ud_receive_carries_its_l3_type_in_sl_and_its_ipv4_header_at_offset_20() {
    if let Some(checks) = run_c_program("ud", "127.0.13.62") {
        assert!(
            checks.len() >= 20,
            "only {} checks ran:\n{checks:?}",
            checks.len()
        );
    }
}
