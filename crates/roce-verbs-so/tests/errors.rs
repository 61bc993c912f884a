//! The linked library from C: `tests/c/errors.c` (the error paths, on a device at
//! 127.0.13.60) and `tests/c/inline.c` (inline data from unregistered memory, 127.0.13.61)
//! are compiled against Debian's `<infiniband/verbs.h>` and this library. Each prints one line
//! per check and exits with the number that failed. Skips (fails under CI=true) without the
//! header (libibverbs-dev) or a C compiler.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::skip_or_fail;
use std::path::Path;
use std::process::Command;

/// Builds `tests/c/NAME.c` against the installed header and our library, runs it on a device
/// at `ip`, and returns its "ok" lines once it exited 0; `None` when it was skipped.
fn run_c_program(name: &str, ip: &str) -> Option<Vec<String>> {
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        skip_or_fail("no /usr/include/infiniband/verbs.h: apt-get install libibverbs-dev");
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let exe = std::env::temp_dir().join(format!("roce-verbs-{name}-{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = match Command::new(&cc)
        .arg("-Wall")
        .arg("-Werror")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .arg(roce_verbs_so::library_path())
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            skip_or_fail(&format!("cannot run {cc}: {e}"));
            return None;
        }
    };
    assert!(
        built.status.success(),
        "{cc}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe)
        .env("LD_LIBRARY_PATH", roce_verbs_so::library_dir())
        .env("ROCE_VERBS_IP", ip)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&exe);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name}: {:?}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        text.lines()
            .filter(|l| l.starts_with("ok "))
            .map(str::to_owned)
            .collect(),
    )
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
