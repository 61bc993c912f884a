//! The error paths of the linked library, from C: `tests/c/errors.c` is compiled against
//! Debian's `<infiniband/verbs.h>` and this library, and run with a device on 127.0.13.60. It
//! prints one line per check and exits with the number that failed. Skips (fails under
//! CI=true) without the header (libibverbs-dev) or a C compiler.

mod common;

use common::skip_or_fail;
use std::path::Path;
use std::process::Command;

#[test]
fn c_program_sees_libibverbs_errors_and_nothing_changes_on_a_refusal() {
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        return skip_or_fail("no /usr/include/infiniband/verbs.h: apt-get install libibverbs-dev");
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/errors.c");
    let exe = std::env::temp_dir().join(format!("roce-verbs-errors-{}", std::process::id()));
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
        Err(e) => return skip_or_fail(&format!("cannot run {cc}: {e}")),
    };
    assert!(
        built.status.success(),
        "{cc}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe)
        .env("LD_LIBRARY_PATH", roce_verbs_so::library_dir())
        .env("ROCE_VERBS_IP", "127.0.13.60")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&exe);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let checks = text.lines().filter(|l| l.starts_with("ok ")).count();
    assert!(checks >= 40, "only {checks} checks ran:\n{text}");
}
