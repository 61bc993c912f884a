//! The linked library from C: `tests/c/cm.c` is compiled against Debian's
//! `<rdma/rdma_cma.h>` and both of our libraries, and runs on a device at 127.0.13.80 with
//! `LD_LIBRARY_PATH` holding both directories. It prints one line per check and exits with
//! the number that failed. Skips (fails under CI=true) without the header (librdmacm-dev) or
//! a C compiler.

use std::path::Path;

#[test]
fn c_program_resolves_creates_qps_and_sees_misuse_refused() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/cm.c");
    let search = roce_rdmacm_so::search_path();
    let Some(run) = roce_cabi::testing::run_c_program(
        &src,
        "rdma/rdma_cma.h",
        "librdmacm-dev",
        &[
            roce_rdmacm_so::library_path(),
            roce_verbs_so::library_path(),
        ],
        &[
            ("LD_LIBRARY_PATH", search.as_os_str()),
            ("ROCE_VERBS_IP", "127.0.13.80".as_ref()),
        ],
    ) else {
        return;
    };
    let checks = run.ok.len();
    assert!(checks >= 60, "only {checks} checks ran:\n{}", run.stdout);
    // The names that are not there say once why they fail.
    let stderr = &run.stderr;
    assert!(
        stderr.contains("roce-rdmacm: rdma_join_multicast is not supported yet"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("rdma_join_multicast is").count(),
        1,
        "{stderr}"
    );
}
