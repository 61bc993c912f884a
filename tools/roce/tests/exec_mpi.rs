//! Open MPI, unmodified, on the emulated NIC: `mpirun` starts each rank under a `roce exec`
//! of its own (a NIC per rank, at 127.0.83.(rank + 1)), and the ranks talk through Open MPI's
//! UCX pml over `rc_verbs` (UCX's wire-up over `ud_verbs`). The program (`mpi/`) ping-pongs
//! 1 MiB between ranks 0 and 1 and runs an all-to-all, every word checked. The ranks are on one
//! host, so `UCX_TLS` keeps UCX off shared memory and the BTLs are off. Skips, naming the
//! packages, without openmpi-bin and libopenmpi-dev; under CI=true that fails.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::path::Path;
use std::process::Command;

use common::exec::{have, ok_as};

#[test]
fn mpi_ranks_on_their_own_nics_pingpong_and_all_to_all_over_ucx() {
    if !have("mpirun", "openmpi-bin") || !have("mpicc", "libopenmpi-dev") {
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpi/pingpong_alltoall.c");
    let exe = std::env::temp_dir().join(format!("roce-mpi-{}", std::process::id()));
    let built = Command::new("mpicc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    ok_as("mpicc", &built);
    // Each rank's own NIC: the wrapper reads the rank Open MPI gives it.
    let rank = format!(
        "exec {} exec --ip 127.0.83.$((OMPI_COMM_WORLD_RANK + 1)) -- {}",
        env!("CARGO_BIN_EXE_roce"),
        exe.display()
    );
    // Bounded: ranks that cannot reach each other would wait for ever.
    let out = Command::new("timeout")
        .args([
            "120",
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "3",
        ])
        .args([
            "--mca",
            "pml",
            "ucx",
            "--mca",
            "btl",
            "^vader,tcp,openib,uct",
        ])
        .args([
            "-x",
            "UCX_TLS=rc_verbs,ud_verbs",
            "-x",
            "UCX_NET_DEVICES=roce0:1",
        ])
        .args(["sh", "-c", &rank])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&exe);
    let text = ok_as("mpirun", &out);
    assert!(text.contains("ranks 3 bad 0"), "{text}");
    // Nothing the middleware calls is missing (libibverbs' own log entry, which the providers
    // Open MPI loads call, is quiet as the real one is by default).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("not supported yet"), "{stderr}");
}
