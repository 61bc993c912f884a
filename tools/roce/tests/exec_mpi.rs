//! Open MPI, unmodified, on the emulated NIC: `mpirun` starts each rank under a `roce exec`
//! of its own (a NIC per rank, at 127.0.83.(rank + 1)), and the ranks talk through Open MPI's
//! UCX pml over `rc_verbs` (UCX's wire-up over `ud_verbs`); or one `roce exec` around
//! `mpirun`, every rank sharing one address's NIC. The program (`mpi/`) ping-pongs
//! 1 MiB between ranks 0 and 1 and runs an all-to-all, every word checked. The ranks are on one
//! host, so `UCX_TLS` keeps UCX off shared memory and the BTLs are off. A second test puts one
//! rank in each of two network namespaces (root), as on two hosts. Skips, naming the
//! packages, without openmpi-bin and libopenmpi-dev; under CI=true that fails.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::exec::{have, ok_as};
use common::netns::{NsPair, Spec};

/// Open MPI's UCX pml, the BTLs off, UCX on the NIC's RC (wired up over UD): the ranks share a
/// host, where UCX would otherwise take shared memory. UCX logs at its diagnostic level and
/// each rank's NIC says why a WR failed (`roce exec` passes RUST_LOG on to it), so that a
/// failed run's output says why an endpoint failed (at its default level UCX says nothing
/// before it aborts).
const UCX_PML: [&str; 14] = [
    "--mca",
    "pml",
    "ucx",
    "--mca",
    "btl",
    "^vader,tcp,openib,uct",
    "-x",
    "UCX_TLS=rc_verbs,ud_verbs",
    "-x",
    "UCX_NET_DEVICES=roce0:1",
    "-x",
    "UCX_LOG_LEVEL=diag",
    "-x",
    NIC_LOG,
];

/// What each rank's NIC logs: its warnings, and why a WR failed.
const NIC_LOG: &str = "RUST_LOG=warn,roce_core::qp=debug";

#[test]
fn mpi_ranks_on_their_own_nics_pingpong_and_all_to_all_over_ucx() {
    // Each rank's own NIC: the wrapper reads the rank Open MPI gives it.
    let Some((out, _)) = local_mpirun("lo", 3, &[], Some("127.0.83.$((OMPI_COMM_WORLD_RANK + 1))"))
    else {
        return;
    };
    let text = ok_as("mpirun", &out);
    assert!(text.contains("ranks 3 bad 0"), "{text}");
    // Nothing the middleware calls is missing (libibverbs' own log entry, which the providers
    // Open MPI loads call, is quiet as the real one is by default).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("not supported yet"), "{stderr}");
}

/// MPI as people run it on one host: one `roce exec` around `mpirun -np 4`, every rank on the
/// same address — one NIC that the four processes share, each rank's RC QPs in its own slot,
/// the datagrams between ranks looped back through the NIC.
#[test]
fn mpi_ranks_sharing_one_address_pingpong_and_all_to_all_over_ucx() {
    let roce_exec = [
        env!("CARGO_BIN_EXE_roce"),
        "exec",
        "--ip",
        "127.0.83.11",
        "--",
    ];
    let Some((out, _)) = local_mpirun("shared", 4, &roce_exec, None) else {
        return;
    };
    let text = ok_as("roce exec mpirun", &out);
    assert!(text.contains("ranks 4 bad 0"), "{text}");
}

/// Sixteen ranks on two addresses, eight on each (a rank's address by its rank's parity): the
/// eight processes of an address share its NIC, each with an RC QP to every other rank (15),
/// reach each other through it and the other address's ranks from it; the all-to-all checks
/// every word.
///
/// No datagram reaches another rank's engine: a rank sends to the QPs of several ranks of the
/// other address at once, and the kernel steers each offload batch whole by its first packet,
/// so a batch that mixed them was dropped in part as "unknown QP" by the wrong rank and sent
/// again after timeouts (200 to 230 such drops and 60 to 70 timeouts a run before the batches
/// were cut by slot).
#[test]
fn mpi_ranks_on_two_shared_addresses_pingpong_and_all_to_all_over_ucx() {
    let ip = "127.0.83.$((21 + OMPI_COMM_WORLD_RANK % 2))";
    let Some((out, stats)) = local_mpirun("two-shared", 16, &[], Some(ip)) else {
        return;
    };
    let text = ok_as("mpirun", &out);
    assert!(text.contains("ranks 16 bad 0"), "{text}");
    assert_eq!(stats.len(), 16, "a rank's counters are missing: {out:?}");
    for (rank, counters) in stats.iter().enumerate() {
        assert_eq!(
            counters["rx_unknown_qp"], 0,
            "rank {rank} got datagrams for another rank's QPs: {counters}"
        );
    }
}

/// Runs the program of `mpi/` as `np` ranks on this host, bounded (ranks that cannot reach each
/// other would wait for ever): `[BEFORE…] mpirun … -np NP` with Open MPI's UCX pml, each rank
/// under a `roce exec --ip RANK_IP` of its own (`RANK_IP` a shell expression of the rank), or
/// bare where `BEFORE` is a `roce exec` around mpirun. Each rank's `roce exec` writes its
/// standard error, the NIC's counters last (`--stats json`), to a file of its own; the output's
/// standard error has them all, rank by rank, after mpirun's, and the counters of each rank
/// come with it, in rank order. `None` (skipped, naming the packages) without Open MPI.
fn local_mpirun(
    tag: &str,
    np: u32,
    before: &[&str],
    rank_ip: Option<&str>,
) -> Option<(Output, Vec<serde_json::Value>)> {
    if !have("mpirun", "openmpi-bin") || !have("mpicc", "libopenmpi-dev") {
        return None;
    }
    let exe = build_program(tag);
    let mut cmd = Command::new("timeout");
    cmd.arg("180").args(before).args([
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        &np.to_string(),
    ]);
    cmd.args(UCX_PML);
    // A `roce exec` around mpirun (BEFORE) reads it from its own environment.
    if let Some((key, value)) = NIC_LOG.split_once('=') {
        cmd.env(key, value);
    }
    let logs = std::env::temp_dir().join(format!("roce-mpi-{tag}-{}-ranks", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    match rank_ip {
        Some(ip) => {
            let rank = format!(
                "exec {} exec --stats json --ip {ip} -- {} 2> {}/$OMPI_COMM_WORLD_RANK",
                env!("CARGO_BIN_EXE_roce"),
                exe.display(),
                logs.display()
            );
            cmd.args(["sh", "-c", &rank]);
        }
        None => {
            cmd.arg(&exe);
        }
    }
    let mut out = cmd.output().unwrap();
    // Timed out (124): what is left of the job, for the failure's report.
    if out.status.code() == Some(124) {
        let ps = Command::new("ps")
            .args(["-eo", "pid,ppid,pgid,stat,etime,args", "--forest"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let exe_name = exe.file_name().unwrap().to_string_lossy().into_owned();
        let left: Vec<&str> = ps
            .lines()
            .filter(|l| {
                [
                    "/roce ",
                    "[roce]",
                    "mpirun",
                    "orted",
                    "prte",
                    exe_name.as_str(),
                ]
                .iter()
                .any(|w| l.contains(w))
            })
            .collect();
        out.stderr.extend_from_slice(
            format!(
                "--- processes left when mpirun timed out:\n{}\n",
                left.join("\n")
            )
            .as_bytes(),
        );
    }
    let _ = std::fs::remove_file(&exe);
    let mut stats = Vec::new();
    for rank in 0..np {
        let Ok(text) = std::fs::read_to_string(logs.join(rank.to_string())) else {
            continue;
        };
        out.stderr
            .extend_from_slice(format!("--- rank {rank}'s roce exec:\n{text}").as_bytes());
        let counters = text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find_map(|v| v.get("counters").cloned());
        stats.extend(counters);
    }
    let _ = std::fs::remove_dir_all(&logs);
    Some((out, stats))
}

/// Builds the program of `mpi/` with mpicc (a failure fails the test); its path, in the
/// temporary directory, named after `tag` (the tests run at once).
fn build_program(tag: &str) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpi/pingpong_alltoall.c");
    let exe = std::env::temp_dir().join(format!("roce-mpi-{tag}-{}", std::process::id()));
    let built = Command::new("mpicc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    ok_as("mpicc", &built);
    exe
}

/// One rank per network namespace, as on two hosts: mpirun runs in namespace a (rank 0 at
/// 198.18.9.1) and starts its daemon for rank 1 in namespace b (198.18.9.2) through an "rsh
/// agent" that enters b (the daemons talk over the veth as over a network, and each rank
/// reaches its own daemon on its namespace's loopback). Each rank under `roce exec` at its
/// namespace's address; Open MPI's UCX pml over rc_verbs between the two NICs.
#[test]
fn mpi_ranks_in_two_namespaces_pingpong_and_all_to_all_over_ucx() {
    // mpirun is NsPair::new's to check.
    if !have("mpicc", "libopenmpi-dev") {
        return;
    }
    let spec = Spec {
        what: "the MPI namespace test",
        prefix: "mpi",
        mac: ["02:00:c6:12:09:01", "02:00:c6:12:09:02"],
        link_local: ["fe80::c6ff:fe12:901", "fe80::c6ff:fe12:902"],
        ip4: ["198.18.9.1", "198.18.9.2"],
        ip6: None,
    };
    let Some(pair) = NsPair::new(&spec, "pp", "mpirun", "openmpi-bin") else {
        return;
    };
    let exe = build_program("ns");
    let agent = std::env::temp_dir().join(format!("roce-mpi-agent-{}", std::process::id()));
    let script = format!(
        "#!/bin/sh\n# mpirun's rsh agent: the daemon's command, in the namespace of its host.\n\
         host=$1; shift\ncase $host in 198.18.9.2) ns={b};; *) ns={a};; esac\n\
         exec ip netns exec \"$ns\" sh -c \"$*\"\n",
        a = pair.a,
        b = pair.b
    );
    std::fs::write(&agent, script).unwrap();
    let exec_bits = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&agent, exec_bits).unwrap();
    let rank = format!(
        "exec {} exec --ip 198.18.9.$((OMPI_COMM_WORLD_RANK + 1)) -- {}",
        env!("CARGO_BIN_EXE_roce"),
        exe.display()
    );
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.a, "timeout", "120", "mpirun"])
        .args([
            "--allow-run-as-root",
            "-np",
            "2",
            "-host",
            "198.18.9.1,198.18.9.2",
        ])
        .arg("--mca")
        .arg("plm_rsh_agent")
        .arg(&agent)
        .args(UCX_PML)
        .args(["sh", "-c", &rank])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&exe);
    let _ = std::fs::remove_file(&agent);
    let text = ok_as("mpirun across namespaces", &out);
    assert!(text.contains("ranks 2 bad 0"), "{text}");
}
