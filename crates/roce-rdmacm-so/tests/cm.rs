//! The linked library from C: `tests/c/cm.c` is compiled against Debian's
//! `<rdma/rdma_cma.h>` and both of our libraries, and runs on a device at 127.0.13.80 with
//! `LD_LIBRARY_PATH` holding both directories. It prints one line per check and exits with
//! the number that failed. Skips (fails under CI=true) without the header (librdmacm-dev) or
//! a C compiler.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::skip_or_fail;
use std::path::Path;
use std::process::Command;

#[test]
fn c_program_resolves_creates_qps_and_sees_the_connecting_calls_fail_with_enosys() {
    if !Path::new("/usr/include/rdma/rdma_cma.h").exists() {
        return skip_or_fail("no /usr/include/rdma/rdma_cma.h: apt-get install librdmacm-dev");
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/cm.c");
    let exe = std::env::temp_dir().join(format!("roce-rdmacm-cm-{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = match Command::new(&cc)
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(roce_rdmacm_so::library_path())
        .arg(roce_verbs_so::library_path())
        .output()
    {
        Ok(o) => o,
        Err(e) => return skip_or_fail(&format!("cannot run {cc}: {e}")),
    };
    assert!(
        built.status.success(),
        "{cc}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe)
        .env("LD_LIBRARY_PATH", roce_rdmacm_so::search_path())
        .env("ROCE_VERBS_IP", "127.0.13.80")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&exe);
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cm: {:?}\n{text}\n{stderr}",
        out.status
    );
    let checks = text.lines().filter(|l| l.starts_with("ok ")).count();
    assert!(checks >= 60, "only {checks} checks ran:\n{text}");
    // The connecting calls say once why they fail.
    assert!(
        stderr.contains("roce-rdmacm: rdma_connect needs the connection manager, not there yet"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("rdma_connect needs").count(), 1, "{stderr}");
}
