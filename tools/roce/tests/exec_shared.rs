//! One NIC per address, shared by every process on it (`roce exec` without `--private-nic`):
//! Debian's perftest and rping, several processes on one loopback address, reaching each other
//! through the NIC and the processes of another address; a process killed mid-transfer; the
//! agent gone after the last process.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

use common::exec::{
    Side, end_group, exec_pair, have, ok_as, result_rows, rping_done, spawn_exec, wait_listening,
};

const WRITE: [&str; 5] = ["ib_write_bw", "-n", "300", "-s", "65536"];

/// `ib_write_bw ... -p PORT`.
fn write_bw(port: &str) -> Vec<&str> {
    [&WRITE[..], &["-p", port]].concat()
}

fn side(ip: &str) -> Side<'_> {
    Side {
        wrapper: &["timeout", "60"],
        ip,
        exec_args: &[],
    }
}

/// The client's average MB/s (perftest's one result row).
fn client_rate(what: &str, client: &Output) -> f64 {
    let text = ok_as(what, client);
    let rows = result_rows(&text);
    assert_eq!(rows.len(), 1, "{what}: {text}");
    rows[0][3]
}

/// The agent of `ip` runs (its abstract socket is in /proc/net/unix).
fn agent_runs(ip: &str) -> bool {
    let name = format!("@roce-emu/agent/{ip}");
    std::fs::read_to_string("/proc/net/unix")
        .unwrap()
        .lines()
        .any(|l| l.ends_with(&name))
}

/// An ib_write_bw server and its client on one address: both under one NIC, the client's
/// WRITEs looped back to the server by it. With a NIC per process, the second one to start
/// cannot have the address.
#[test]
fn a_perftest_server_and_client_share_one_address() {
    if !have("ib_write_bw", "perftest") {
        return;
    }
    let ip = "127.0.14.1";
    let (client, server) = exec_pair(side(ip), side(ip), "18711", &write_bw("18711"));
    assert!(client_rate("ib_write_bw client", &client) > 0.0);
    ok_as("ib_write_bw server", &server);
    // The agent ends once its processes have.
    let deadline = Instant::now() + Duration::from_secs(5);
    while agent_runs(ip) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!agent_runs(ip), "the agent of {ip} outlived its processes");

    // The control: NICs of their own cannot share the address.
    let private = Side {
        exec_args: &["--private-nic"],
        ..side(ip)
    };
    let server = spawn_exec(private, &write_bw("18712"));
    wait_listening(server.id(), "18712");
    let client = spawn_exec(private, &[&write_bw("18712")[..], &[ip]].concat())
        .wait_with_output()
        .unwrap();
    assert!(!client.status.success());
    let err = String::from_utf8_lossy(&client.stderr);
    assert!(err.contains(&format!("{ip}:4791: in use")), "{err}");
    end_group(server);
}

/// Two pairs on two addresses, crosswise (a server of each address's pair on the other): four
/// processes, two NICs, each NIC's datagrams steered to the process whose QP they name. Then
/// one client is killed (SIGKILL) in the middle of its transfer: the other pair still ends
/// well, and a pair that starts after it too.
#[test]
fn processes_on_two_shared_addresses_keep_going_when_one_is_killed() {
    if !have("ib_write_bw", "perftest") {
        return;
    }
    let (a, b) = ("127.0.14.11", "127.0.14.12");
    // The long pair: server at a, client at b; killed in the middle.
    let long = ["ib_write_bw", "-n", "200000", "-s", "65536", "-p", "18721"];
    let long_server = spawn_exec(side(a), &long);
    wait_listening(long_server.id(), "18721");
    let mut long_client = spawn_exec(side(b), &[&long[..], &[a]].concat());
    // Meanwhile: servers at b, clients at a, one after the other.
    let (client, server) = exec_pair(side(b), side(a), "18722", &write_bw("18722"));
    assert!(client_rate("the first crosswise client", &client) > 0.0);
    ok_as("the first crosswise server", &server);
    assert!(
        long_client.try_wait().unwrap().is_none(),
        "the long client ended before it could be killed"
    );
    long_client.kill().unwrap();
    let _ = long_client.wait();
    end_group(long_server);
    let (client, server) = exec_pair(side(b), side(a), "18723", &write_bw("18723"));
    assert!(client_rate("a client after the kill", &client) > 0.0);
    ok_as("a server after the kill", &server);
}

/// Two rping servers on one address, each its own process listening on its own port: each
/// REQ is steered to the process that listens for its service ID.
#[test]
fn two_rping_listeners_on_one_address_each_get_their_connection() {
    if !have("rping", "rdmacm-utils") {
        return;
    }
    let (server_ip, client_ip) = ("127.0.14.21", "127.0.14.22");
    let rping = |role: &'static str, port: &'static str| -> Vec<&'static str> {
        vec![
            "rping",
            role,
            "-v",
            "-C",
            "2",
            "-a",
            "127.0.14.21",
            "-p",
            port,
        ]
    };
    let first = spawn_exec(side(server_ip), &rping("-s", "18731"));
    let second = spawn_exec(side(server_ip), &rping("-s", "18732"));
    // Both listen once the agent steers their REQs (RDMA_PS_TCP's service IDs of the ports).
    let ip = server_ip.parse().unwrap();
    let want = [0x0106_0000 | 18731, 0x0106_0000 | 18732];
    let deadline = Instant::now() + Duration::from_secs(20);
    while !roce_device::share::member::services(ip)
        .unwrap()
        .is_some_and(|ids| want.iter().all(|id| ids.contains(id)))
    {
        assert!(
            Instant::now() < deadline,
            "the two servers do not listen after 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for (port, server) in [("18732", second), ("18731", first)] {
        let client = spawn_exec(side(client_ip), &rping("-c", port))
            .wait_with_output()
            .unwrap();
        // rping's own end-of-run race (rdma-core #1622) is let through, its pings checked.
        for (who, out) in [
            ("client", client),
            ("server", server.wait_with_output().unwrap()),
        ] {
            let text = rping_done(&format!("rping {who} on port {port}"), &out);
            let pings = text.lines().filter(|l| l.contains("ping data: ")).count();
            assert_eq!(pings, 2, "rping {who} on port {port}: {text}");
        }
    }
}

/// `--stats` and `--pcap` of one `roce exec` whose program is two processes on the address
/// (a shell that runs a perftest server and its client): the counters of the whole NIC, which
/// are each process's added up, with each process's own; and one capture that holds every
/// frame either process sent or received, readable whole.
#[test]
fn counters_and_capture_show_the_whole_nic_and_each_process() {
    if !have("ib_write_bw", "perftest") {
        return;
    }
    let ip = "127.0.14.41";
    let pcap = std::env::temp_dir().join(format!("roce-shared-{}.pcap", std::process::id()));
    let script = format!(
        "ib_write_bw -n 50 -s 4096 -p 18741 & sleep 1; ib_write_bw -n 50 -s 4096 -p 18741 {ip}; wait"
    );
    let out = std::process::Command::new("timeout")
        .args([
            "60",
            env!("CARGO_BIN_EXE_roce"),
            "exec",
            "--ip",
            ip,
            "--stats",
            "json",
        ])
        .arg("--pcap")
        .arg(&pcap)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    ok_as("two ib_write_bw under one roce exec", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json = stderr.lines().rev().find(|l| l.starts_with('{')).unwrap();
    let report: serde_json::Value = serde_json::from_str(json).unwrap();
    let processes = report["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 2, "{report}");
    let count = |v: &serde_json::Value, name: &str| v["counters"][name].as_u64().unwrap();
    for name in ["tx_packets", "rx_packets"] {
        let sum: u64 = processes.iter().map(|p| count(p, name)).sum();
        assert_eq!(count(&report, name), sum, "{name}: {report}");
        assert!(
            processes.iter().all(|p| count(p, name) > 0),
            "{name}: {report}"
        );
    }
    let frames: Vec<_> = roce_pcap::Capture::open(&pcap)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let _ = std::fs::remove_file(&pcap);
    assert_eq!(
        frames.len() as u64,
        count(&report, "tx_packets") + count(&report, "rx_packets"),
        "{report}"
    );
}

/// The same as an ordinary user, when the tests run as root (as in CI): the agent and the
/// sockets need no privilege. `setpriv` runs both sides as `nobody`.
#[test]
fn a_perftest_server_and_client_share_one_address_as_an_ordinary_user() {
    if !nix::unistd::Uid::effective().is_root() {
        // Not root: the test above ran as an ordinary user already.
        return;
    }
    if !have("ib_write_bw", "perftest") || !have("setpriv", "util-linux") {
        return;
    }
    let as_nobody = [
        "timeout",
        "60",
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
    ];
    let user = Side {
        wrapper: &as_nobody,
        ip: "127.0.14.51",
        exec_args: &[],
    };
    let (client, server) = exec_pair(user, user, "18751", &write_bw("18751"));
    assert!(client_rate("ib_write_bw client as nobody", &client) > 0.0);
    ok_as("ib_write_bw server as nobody", &server);
}

/// `fork()` in a verbs program on a shared NIC (`tests/c/fork.c`): after `ibv_fork_init`, a
/// child that exits at once leaves the parent's device working, and its exit does nothing in
/// the parent's name — no counters of its own, nothing sent from the parent's sockets.
#[test]
fn a_forked_child_that_exits_leaves_the_parents_nic_alone() {
    let stats = std::env::temp_dir().join(format!("roce-fork-stats-{}", std::process::id()));
    let Some(_) = run_fork_c(
        "127.0.14.61",
        env!("CARGO_BIN_EXE_roce"),
        &[("ROCE_VERBS_STATS", stats.as_os_str())],
    ) else {
        return;
    };
    let prefix = format!("{}.", stats.file_name().unwrap().to_string_lossy());
    let written: Vec<_> = std::fs::read_dir(stats.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    for name in &written {
        let _ = std::fs::remove_file(stats.parent().unwrap().join(name));
    }
    assert_eq!(written.len(), 1, "counters written by {written:?}");
}

/// The roce tools share the address's NIC too: a `roce perf write` server, and Debian's
/// `ib_write_bw` under `roce exec` as its client, on one address.
#[test]
fn a_roce_perf_server_and_a_perftest_client_share_one_address() {
    if !have("ib_write_bw", "perftest") {
        return;
    }
    let ip = "127.0.14.81";
    let roce = env!("CARGO_BIN_EXE_roce");
    let server = std::process::Command::new("timeout")
        .args([
            "60", roce, "perf", "write", "--ip", ip, "-n", "300", "-s", "65536",
        ])
        .args(["-p", "18761"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_listening(server.id(), "18761");
    let client = spawn_exec(side(ip), &[&write_bw("18761")[..], &[ip]].concat())
        .wait_with_output()
        .unwrap();
    assert!(client_rate("ib_write_bw client of roce perf", &client) > 0.0);
    ok_as(
        "roce perf write server",
        &server.wait_with_output().unwrap(),
    );
}

/// Over IPv6 as over IPv4: a perftest server and client on `::1`, IPv6's one loopback address,
/// share its NIC (GID 1, `-x 1`; their TCP exchange on IPv4, where ib_write_bw's server
/// listens).
#[test]
fn a_perftest_server_and_client_share_ipv6_loopback() {
    if !have("ib_write_bw", "perftest") {
        return;
    }
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        eprintln!("SKIP: no IPv6 loopback here");
        return;
    }
    let argv = [&write_bw("18781")[..], &["-x", "1"]].concat();
    let server = spawn_exec(side("::1"), &argv);
    wait_listening(server.id(), "18781");
    let client = spawn_exec(side("::1"), &[&argv[..], &["127.0.0.1"]].concat())
        .wait_with_output()
        .unwrap();
    assert!(client_rate("ib_write_bw client over ::1", &client) > 0.0);
    ok_as(
        "ib_write_bw server over ::1",
        &server.wait_with_output().unwrap(),
    );
}

/// Where no agent can be had (its program does not run here), a process's NIC is its own, as
/// with `--private-nic`, and the library says why on stderr: the program runs all the same.
#[test]
fn without_an_agent_the_nic_is_the_process_s_own_and_says_why() {
    let Some(run) = run_fork_c("127.0.14.91", "/nonexistent/roce", &[]) else {
        return;
    };
    assert!(
        run.stderr
            .contains("cannot share 127.0.14.91 with other processes"),
        "{}",
        run.stderr
    );
}

/// Runs `tests/c/fork.c` on a device at `ip` whose agent program is `agent`, with `env` too;
/// checks that every one of its checks passed (it exits with the number that failed) and
/// returns the run. `None` (skipped, naming the package) without verbs.h or a C compiler.
fn run_fork_c(
    ip: &str,
    agent: &str,
    env: &[(&str, &std::ffi::OsStr)],
) -> Option<roce_cabi::testing::CRun> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/fork.c");
    let library_dir = roce_verbs_so::library_dir();
    let base = [
        ("LD_LIBRARY_PATH", library_dir.as_os_str()),
        ("ROCE_VERBS_IP", ip.as_ref()),
        ("ROCE_VERBS_AGENT", agent.as_ref()),
    ];
    let run = roce_cabi::testing::run_c_program(
        &src,
        "infiniband/verbs.h",
        "libibverbs-dev",
        &[roce_verbs_so::library_path()],
        &[&base[..], env].concat(),
    )?;
    assert!(run.ok.len() >= 9, "{:?}", run.ok);
    Some(run)
}

/// The agent that the first process of an address starts keeps none of that process's
/// descriptors: a pipe the process holds without close-on-exec (as an MPI rank holds its
/// launcher's) reads its end once the process closes its own copy, while the agent still runs
/// (the member joined here keeps it).
#[test]
fn the_agent_keeps_none_of_the_descriptors_of_the_process_that_started_it() {
    use std::io::Read;
    let (read, write) = nix::unistd::pipe().unwrap();
    let member = roce_device::share::member::join(
        "127.0.14.95".parse().unwrap(),
        std::path::Path::new(env!("CARGO_BIN_EXE_roce")),
    )
    .unwrap();
    drop(write);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1];
        let _ = tx.send(std::fs::File::from(read).read(&mut buf).ok());
    });
    let eof = rx.recv_timeout(Duration::from_secs(5));
    assert_eq!(eof, Ok(Some(0)), "the agent holds the pipe's write end");
    drop(member);
}
