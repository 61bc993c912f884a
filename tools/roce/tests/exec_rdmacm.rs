//! `roce exec` gives RDMA CM programs roce-emu's librdmacm.so.1 next to its libibverbs.so.1,
//! and its connection manager: Debian's unmodified rping, ucmatose, rdma_server/rdma_client
//! and perftest's `-R` connect through IB CM MADs between two `roce exec` processes on
//! loopback addresses of their own (127.0.13.0/24), exchange their data and disconnect; udaddy
//! resolves its UD service with SIDR. Each test checks what the programs themselves report. A
//! connect to a port nobody listens on is rejected (reason 8, invalid service ID) before
//! anything is sent. Skips, naming the package, where the programs are not installed;
//! under CI=true that fails. The same programs over a veth: exec_veth.rs.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::exec::{
    Side, end_group, exec_cm_pair, exec_pair, have, ok_as, ok_as as ok, result_rows, rping_done,
    spawn_exec, transfers_complete, wait_listening,
};
use std::process::Output;

/// Runs `server` at `server_ip` and `client` at `client_ip`, each under `roce exec` (at most
/// 60 s); (client, server).
fn cm_pair(server_ip: &str, server: &[&str], client_ip: &str, client: &[&str]) -> (Output, Output) {
    let wrap = ["timeout", "60"];
    exec_cm_pair(
        Side {
            wrapper: &wrap,
            ip: server_ip,
            exec_args: &[],
        },
        Side {
            wrapper: &wrap,
            ip: client_ip,
            exec_args: &[],
        },
        server,
        client,
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// rping's `ping data` lines, with the number each carries (`rdma-ping-N`).
fn pings(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|l| l.split(':').next().unwrap_or_default().to_owned())
        .collect()
}

/// One rping server at `ip` that listens for a connection for 8 s (ended by timeout, status
/// 124, if none comes).
fn rping_listener(ip: &str) -> [&str; 8] {
    ["timeout", "8", "rping", "-s", "-C", "1", "-a", ip]
}

/// `program -b SERVER_IP -C COUNT` and `program -s SERVER_IP -C COUNT` (ucmatose, udaddy):
/// both sides report their data transfers complete.
fn transfers_between(program: &str, server_ip: &str, client_ip: &str, count: &str) {
    if !have(program, "rdmacm-utils") {
        return;
    }
    let run = cm_pair(
        server_ip,
        &[program, "-b", server_ip, "-C", count],
        client_ip,
        &[program, "-s", server_ip, "-C", count],
    );
    transfers_complete(program, &run);
}

#[test]
fn rping_connects_reads_writes_and_disconnects_through_our_connection_manager() {
    if !have("rping", "rdmacm-utils") {
        return;
    }
    let (client, server) = cm_pair(
        "127.0.13.81",
        &["rping", "-s", "-v", "-V", "-C", "3", "-a", "127.0.13.81"],
        "127.0.13.82",
        &["rping", "-c", "-v", "-V", "-C", "3", "-a", "127.0.13.81"],
    );
    let (c, s) = (
        rping_done("rping -c", &client),
        rping_done("rping -s", &server),
    );
    let want: Vec<String> = (0..3).map(|n| format!(" rdma-ping-{n}")).collect();
    // The client sees its buffer come back through the server's RDMA READ and RDMA WRITE (-V
    // compares it), the server what it read.
    assert_eq!(pings(&c, "ping data:"), want, "{c}");
    assert_eq!(pings(&s, "server ping data:"), want, "{s}");
    // The server learns of the end from the client's DREQ.
    assert!(
        stderr(&server).contains("server DISCONNECT EVENT"),
        "{}",
        stderr(&server)
    );
}

#[test]
fn rping_to_a_port_nobody_listens_on_is_rejected_before_anything_is_sent() {
    if !have("rping", "rdmacm-utils") {
        return;
    }
    // The server listens on rping's port 7174; the client asks for 7175.
    let (client, server) = cm_pair(
        "127.0.13.83",
        &rping_listener("127.0.13.83"),
        "127.0.13.84",
        &[
            "rping",
            "-c",
            "-v",
            "-C",
            "1",
            "-a",
            "127.0.13.83",
            "-p",
            "7175",
        ],
    );
    let text = stderr(&client);
    assert!(!client.status.success(), "{text}");
    assert!(
        text.contains("RDMA_CM_EVENT_REJECTED, error 8"),
        "not rejected for its service ID:\n{text}"
    );
    assert!(
        pings(&String::from_utf8_lossy(&client.stdout), "ping data:").is_empty(),
        "data moved before the rejection"
    );
    // The listener saw no connection request: it was still waiting when timeout ended it.
    assert_eq!(server.status.code(), Some(124), "{}", stderr(&server));
}

#[test]
fn ucmatose_exchanges_its_messages_and_disconnects() {
    transfers_between("ucmatose", "127.0.13.85", "127.0.13.86", "5");
}

#[test]
fn rdma_server_and_rdma_client_use_synchronous_endpoints() {
    if !have("rdma_server", "rdmacm-utils") {
        return;
    }
    let (client, server) = cm_pair(
        "127.0.13.87",
        &["rdma_server", "-s", "127.0.13.87"],
        "127.0.13.88",
        &["rdma_client", "-s", "127.0.13.87"],
    );
    // Each side sends one message and waits for the other's (rdma_get_recv_comp).
    assert!(
        ok("rdma_client", &client).contains("rdma_client: end 0"),
        "{}",
        stderr(&client)
    );
    assert!(
        ok("rdma_server", &server).contains("rdma_server: end 0"),
        "{}",
        stderr(&server)
    );
}

/// perftest `-R`: both sides exit 0, and the client reports every iteration at a size. Run
/// once: a client rejected because the server did not listen again in time fails the test.
fn perftest_rdma_cm(program: &str, server_ip: &str, client_ip: &str) {
    if !have(program, "perftest") {
        return;
    }
    let args = [program, "-R", "-n", "200", "-s", "4096"];
    let client_args = [&args[..], &[server_ip]].concat();
    let (client, server) = cm_pair(server_ip, &args, client_ip, &client_args);
    // A side that fails shows the other's output too: a hang of one is often the other's story.
    let both = |what: &str, out: &Output, other: &Output| {
        let side = format!(
            "{program} -R {what} (the other side: {:?}\n{}\n{})",
            other.status,
            String::from_utf8_lossy(&other.stdout),
            stderr(other)
        );
        ok(&side, out)
    };
    let text = both("client", &client, &server);
    both("server", &server, &client);
    assert!(text.contains("rdma_cm"), "not through the CM:\n{text}");
    let rows = result_rows(&text);
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0][..2], [4096.0, 200.0], "{text}");
    assert!(rows[0][3] > 0.0, "no bandwidth: {text}");
}

#[test]
fn ib_send_bw_connects_through_the_connection_manager() {
    perftest_rdma_cm("ib_send_bw", "127.0.13.89", "127.0.13.90");
}

#[test]
fn ib_write_bw_connects_through_the_connection_manager() {
    perftest_rdma_cm("ib_write_bw", "127.0.13.91", "127.0.13.92");
}

#[test]
fn udaddy_resolves_the_service_with_sidr_and_exchanges_datagrams() {
    // The client learns the server's QP and Q_Key from the SIDR_REP; the server answers each
    // client from the GRH of its first datagram (ibv_create_ah_from_wc).
    transfers_between("udaddy", "127.0.13.99", "127.0.13.100", "10");
}

#[test]
fn udaddy_to_a_service_nobody_listens_for_is_unreachable_at_once() {
    if !have("udaddy", "rdmacm-utils") || !have("rping", "rdmacm-utils") {
        return;
    }
    // rping listens on port 7174 of the TCP port space; udaddy asks for 7174 of the UDP one:
    // the SIDR_REP says "unsupported" (1), which rdma_cm reports as UNREACHABLE.
    let (client, server) = cm_pair(
        "127.0.13.101",
        &rping_listener("127.0.13.101"),
        "127.0.13.102",
        &["udaddy", "-s", "127.0.13.101", "-C", "1"],
    );
    let text = String::from_utf8_lossy(&client.stdout);
    assert!(!client.status.success(), "{text}");
    assert!(
        text.contains("udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 1"),
        "{text}"
    );
    assert!(!text.contains("initiating data transfers"), "{text}");
    // rping saw no connection request: timeout ended it.
    assert_eq!(server.status.code(), Some(124), "{}", stderr(&server));
}

/// `roce perf ARGS` with its output piped.
fn roce_perf(args: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_roce"))
        .arg("perf")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn roce_perf_and_perftest_connect_through_the_connection_manager_both_ways() {
    if !have("ib_write_bw", "perftest") {
        return;
    }
    // perftest's server, our client.
    let server = spawn_exec(
        Side::local("127.0.13.95", &[]),
        &["ib_write_bw", "-R", "-n", "300"],
    );
    common::exec::wait_nic(server.id(), "127.0.13.95");
    let client = roce_perf(&[
        "write",
        "-R",
        "--ip",
        "127.0.13.96",
        "-n",
        "300",
        "127.0.13.95",
    ])
    .wait_with_output()
    .unwrap();
    let server = server.wait_with_output().unwrap();
    let ours = ok("roce perf write -R", &client);
    let theirs = ok("ib_write_bw -R server", &server);
    assert_eq!(result_rows(&ours)[0][..2], [65536.0, 300.0], "{ours}");
    assert!(theirs.contains("rdma_cm QPs\t : ON"), "{theirs}");
    // Our server, perftest's client.
    let server = roce_perf(&["send", "-R", "--ip", "127.0.13.97", "-n", "300"]);
    common::exec::wait_nic(server.id(), "127.0.13.97");
    let client = spawn_exec(
        Side::local("127.0.13.98", &[]),
        &["ib_send_bw", "-R", "-n", "300", "127.0.13.97"],
    )
    .wait_with_output()
    .unwrap();
    let server = server.wait_with_output().unwrap();
    let theirs = ok("ib_send_bw -R client", &client);
    ok("roce perf send -R server", &server);
    let rows = result_rows(&theirs);
    assert_eq!(rows[0][..2], [65536.0, 300.0], "{theirs}");
    assert!(rows[0][3] > 0.0, "{theirs}");
}

/// Only rping's own end-of-run race is let through: the same status with any other last words
/// fails, as does a failure before the disconnect.
#[test]
fn only_rpings_own_end_of_run_race_is_let_through() {
    use std::os::unix::process::ExitStatusExt;
    let run = |code: i32, err: &str| Output {
        status: std::process::ExitStatus::from_raw(code << 8),
        stdout: b"ping data: rdma-ping-0: ABC\n".to_vec(),
        stderr: err.as_bytes().to_vec(),
    };
    let raced = "client DISCONNECT EVENT...\nrdma_get_cm_event: Invalid argument\n";
    assert!(rping_done("rping", &run(255, raced)).starts_with("ping data"));
    assert!(rping_done("rping", &run(0, "")).starts_with("ping data"));
    for (code, err) in [
        (255, "rdma_get_cm_event: Invalid argument\n"),
        (
            255,
            "client DISCONNECT EVENT...\ncq completion failed status 5\n",
        ),
        (1, raced),
    ] {
        let failed = std::panic::catch_unwind(|| rping_done("rping", &run(code, err)));
        assert!(failed.is_err(), "{code} {err:?} was let through");
    }
}

/// A librdmacm program in Python (ctypes, the C library itself): `server IP PORT` listens,
/// accepts one connection on a QP made on `id->pd` (`rdma_create_qp` with no PD), and once it
/// is ESTABLISHED returns from its main without disconnecting or destroying anything, as
/// qperf's server does; `client IP PORT` connects, and prints the event that ends its
/// connection. Every event is printed as it comes.
const EXIT_CONNECTED: &str = r#"
import ctypes, socket, struct, sys
L = ctypes.CDLL("librdmacm.so.1", use_errno=True)
vp = ctypes.c_void_p
L.rdma_create_event_channel.restype = vp
L.rdma_event_str.restype = ctypes.c_char_p
for f in ("rdma_create_id", "rdma_bind_addr", "rdma_listen", "rdma_resolve_addr",
          "rdma_resolve_route", "rdma_create_qp", "rdma_connect", "rdma_accept",
          "rdma_get_cm_event", "rdma_ack_cm_event"):
    getattr(L, f).argtypes = None
ch = vp(L.rdma_create_event_channel())

def event():
    e = vp()
    assert L.rdma_get_cm_event(ch, ctypes.byref(e)) == 0, ctypes.get_errno()
    kind = ctypes.c_int.from_address(e.value + 16).value
    status = ctypes.c_int.from_address(e.value + 20).value
    id_ = vp.from_address(e.value).value
    L.rdma_ack_cm_event(e)
    name = L.rdma_event_str(kind).decode()
    print(name, status, flush=True)
    return name, vp(id_)

def expect(want):
    name, id_ = event()
    assert name == want, name
    return id_

def make_qp(id_):
    # struct ibv_qp_init_attr: no CQs (the library makes them), cap at 32, qp_type RC at 52.
    attr = ctypes.create_string_buffer(64)
    struct.pack_into("<IIIII", attr, 32, 4, 4, 1, 1, 0)
    struct.pack_into("<i", attr, 52, 2)
    pd = vp.from_address(id_.value + 400).value  # id->pd
    assert pd, "no id->pd"
    assert L.rdma_create_qp(id_, None, attr) == 0, ctypes.get_errno()

role, ip, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
sin = ctypes.create_string_buffer(struct.pack("<H", socket.AF_INET) + struct.pack(">H", port)
                                  + socket.inet_aton(ip) + bytes(8), 16)
id_ = vp()
assert L.rdma_create_id(ch, ctypes.byref(id_), None, 0x0106) == 0
if role == "server":
    assert L.rdma_bind_addr(id_, sin) == 0 and L.rdma_listen(id_, 1) == 0
    child = expect("RDMA_CM_EVENT_CONNECT_REQUEST")
    make_qp(child)
    assert L.rdma_accept(child, None) == 0, ctypes.get_errno()
    expect("RDMA_CM_EVENT_ESTABLISHED")
    sys.exit(0)
assert L.rdma_resolve_addr(id_, None, sin, 2000) == 0
expect("RDMA_CM_EVENT_ADDR_RESOLVED")
assert L.rdma_resolve_route(id_, 2000) == 0
expect("RDMA_CM_EVENT_ROUTE_RESOLVED")
make_qp(id_)
assert L.rdma_connect(id_, None) == 0, ctypes.get_errno()
expect("RDMA_CM_EVENT_ESTABLISHED")
event()
"#;

#[test]
fn a_program_that_exits_connected_disconnects_its_peer_as_the_kernel_does() {
    if !have("python3", "python3") {
        return;
    }
    // Without a DREQ from the exiting server nothing would end the client's connection (no
    // traffic, no timer): its `timeout 30` would end it, status 124.
    let wrap = ["timeout", "30"];
    let (client, server) = exec_cm_pair(
        Side {
            wrapper: &wrap,
            ip: "127.0.13.110",
            exec_args: &[],
        },
        Side {
            wrapper: &wrap,
            ip: "127.0.13.111",
            exec_args: &["--stats", "json"],
        },
        &[
            "python3",
            "-c",
            EXIT_CONNECTED,
            "server",
            "127.0.13.110",
            "7490",
        ],
        &[
            "python3",
            "-c",
            EXIT_CONNECTED,
            "client",
            "127.0.13.110",
            "7490",
        ],
    );
    let s = ok_as("server", &server);
    assert!(s.ends_with("RDMA_CM_EVENT_ESTABLISHED 0\n"), "{s}");
    let c = ok_as("client", &client);
    assert!(
        c.ends_with("RDMA_CM_EVENT_ESTABLISHED 0\nRDMA_CM_EVENT_DISCONNECTED 0\n"),
        "{c}"
    );
    // What the client's NIC received of the CM: the REP and the server's DREQ (no REJ, no
    // retransmission), and it answered with a DREP after its REQ and RTU.
    let stats = stats(&client);
    assert_eq!(stats["counters"]["cm_rx_mads"], 2, "{stats}");
    assert_eq!(stats["counters"]["tx_gsi_mads"], 3, "{stats}");
    assert_eq!(stats["counters"]["cm_retransmits"], 0, "{stats}");
}

/// The `--stats json` line a side printed last on stderr.
fn stats(out: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    serde_json::from_str(stderr.lines().last().unwrap()).unwrap()
}

#[test]
fn qperf_rc_tests_through_its_connection_manager_end_cleanly() {
    if !have("qperf", "qperf") {
        return;
    }
    // qperf's server serves until it is killed: it is ended once the client is done.
    let server = spawn_exec(
        Side {
            wrapper: &["timeout", "60"],
            ip: "127.0.13.112",
            exec_args: &[],
        },
        &["qperf"],
    );
    wait_listening(server.id(), "19765");
    let tests = ["rc_bw", "rc_lat", "rc_rdma_write_bw", "rc_rdma_read_bw"];
    let client = spawn_exec(
        Side {
            wrapper: &["timeout", "60"],
            ip: "127.0.13.113",
            exec_args: &["--stats", "json"],
        },
        &[&["qperf", "-t", "1", "-cm1", "127.0.13.112"], &tests[..]].concat(),
    )
    .wait_with_output()
    .unwrap();
    end_group(server);
    let out = ok_as("qperf -cm1", &client);
    for t in tests {
        assert!(out.contains(&format!("{t}:\n")), "{out}");
    }
    assert_eq!(out.matches("bw  =").count(), 3, "{out}");
    assert_eq!(out.matches("latency  =").count(), 1, "{out}");
    // Each test connected and disconnected through the CM, with nothing sent twice.
    let stats = stats(&client);
    assert_eq!(stats["counters"]["cm_retransmits"], 0, "{stats}");
    assert_eq!(stats["counters"]["cm_rx_mads"], 2 * tests.len(), "{stats}");
    assert_eq!(stats["counters"]["retransmit_timeouts"], 0, "{stats}");
}

/// fi_pingpong between the NIC at 127.0.0.1 (server) and one at 127.0.13.114, with `args`
/// after `env` (`NAME=VALUE`, for both): every size from 64 B to 1 MiB, 10 sent and acked.
/// The server finds its device by binding the addresses of the host's interfaces and
/// "localhost" (`vrb_get_rai_id`): on loopback only 127.0.0.1 is one of them. The client first
/// connects to the server's TCP control port (47592).
fn fi_pingpong(env: &[&str], args: &[&str]) {
    if !have("fi_pingpong", "libfabric-bin") {
        return;
    }
    let wrap = ["timeout", "60"];
    let side = |ip| Side {
        wrapper: &wrap,
        ip,
        exec_args: &[],
    };
    let argv = [&["env"], env, &["fi_pingpong"], args].concat();
    let (client, server) = exec_pair(side("127.0.0.1"), side("127.0.13.114"), "47592", &argv);
    for (side, out) in [("server", &server), ("client", &client)] {
        let text = ok_as(side, out);
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.split_whitespace().nth(2) == Some("=10"))
            .collect();
        assert_eq!(
            rows.len(),
            6,
            "{side} of {args:?}: 64 B to 1 MiB, each 10 sent and acked:\n{text}"
        );
    }
}

/// libfabric's MSG endpoints go through librdmacm: rdma_getaddrinfo("localhost", NULL,
/// RAI_PASSIVE) for every device, rdma_migrate_id to its event queues, RDMA_MAX_* depths. Then
/// RDM endpoints of ofi_rxm over them: rxm sizes its completion queues from the universe size
/// (256 by default), beyond the device's 32767 entries, rxe's `max_cqe`, so as on rxe
/// `FI_UNIVERSE_SIZE=16` is needed ("Unable to create verbs CQ" otherwise). One after the
/// other: both servers must be the NIC at 127.0.0.1.
#[test]
fn fi_pingpong_msg_and_rdm_over_rxm_run_over_libfabrics_verbs_provider() {
    fi_pingpong(&[], &["-p", "verbs", "-e", "msg", "-d", "roce0"]);
    let rxm = ["-p", "verbs;ofi_rxm", "-e", "rdm", "-d", "roce0"];
    fi_pingpong(&["FI_UNIVERSE_SIZE=16"], &rxm);
}
