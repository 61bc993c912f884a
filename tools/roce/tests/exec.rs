//! `roce exec` runs Debian's unmodified verbs programs (ibverbs-utils) on the emulated NIC:
//! they show the device as rxe would, and two of them exchange traffic over loopback. Each
//! test that opens a device uses addresses of its own in 127.0.13.0/24 (a NIC binds UDP
//! <ip>:4791, and the tests run in parallel). Skips, naming the package, where the programs are
//! not installed; under CI=true that fails.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::exec::{Side, exec_pair, have, ok, result_rows, wait_listening};
use common::roce;
use std::process::{Command, Output};

/// The value after `key:` on the first line that has it.
fn field<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key}: in\n{text}"))
        .trim()
}

#[test]
fn ibv_devices_lists_one_device_with_the_guid_of_the_address() {
    if !have("ibv_devices", "ibverbs-utils") {
        return;
    }
    let text = ok(&roce(&["exec", "--ip", "127.0.0.1", "--", "ibv_devices"]));
    let rows: Vec<&str> = text
        .lines()
        .skip(2)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    let cols: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(cols, ["roce0", "00007ffffe000001"], "{text}");
    // Another address, another GUID.
    let text = ok(&roce(&[
        "exec",
        "--ip",
        "198.18.0.12",
        "--name",
        "rxe0",
        "--",
        "ibv_devices",
    ]));
    assert!(
        text.contains("rxe0") && text.contains("0000c6fffe12000c"),
        "{text}"
    );
}

#[test]
fn ibv_devinfo_shows_an_active_ethernet_port_with_rxe_gids() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let text = ok(&roce(&[
        "exec",
        "--ip",
        "127.0.13.1",
        "--mtu",
        "2048",
        "--",
        "ibv_devinfo",
        "-v",
    ]));
    assert_eq!(field(&text, "hca_id"), "roce0");
    assert_eq!(field(&text, "node_guid"), "0000:7fff:fe00:0d01");
    assert_eq!(field(&text, "phys_port_cnt"), "1");
    assert_eq!(field(&text, "state"), "PORT_ACTIVE (4)");
    assert_eq!(field(&text, "link_layer"), "Ethernet");
    assert_eq!(field(&text, "active_mtu"), "2048 (4)");
    assert_eq!(field(&text, "max_mtu"), "4096 (5)");
    assert_eq!(field(&text, "GID[  0]"), "fe80::7fff:fe00:d01, RoCE v2");
    assert_eq!(field(&text, "GID[  1]"), "::ffff:127.0.13.1, RoCE v2");
    assert!(!text.contains("GID[  2]"), "{text}");
    // Limits no larger than the engine's.
    let nic = roce_core::NicConfig::default();
    let num = |k: &str| field(&text, k).parse::<u64>().unwrap();
    assert!(num("max_sge") <= nic.max_sge as u64, "{text}");
    assert!(num("max_qp") <= nic.max_qp as u64, "{text}");
    let mr = u64::from_str_radix(field(&text, "max_mr_size").trim_start_matches("0x"), 16).unwrap();
    assert!(mr <= nic.max_mr_size as u64, "{text}");
    let msg = u64::from_str_radix(field(&text, "max_msg_sz").trim_start_matches("0x"), 16).unwrap();
    assert!(msg <= u64::from(nic.max_msg_size), "{text}");
    assert!(
        num("max_srq") > 0 && num("max_srq") <= nic.max_srq as u64,
        "{text}"
    );
    assert!(num("max_srq_wr") <= nic.max_srq_wr as u64, "{text}");
}

/// An IPv6 --ip: GID 1 is the address itself, and on `lo`, which has no link-local address,
/// GID 0 is the form made from the GUID (the address's last four bytes).
#[test]
fn ibv_devinfo_shows_an_ipv6_address_as_gid_1() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        common::skipped("no IPv6 loopback here");
        return;
    }
    let text = ok(&roce(&["exec", "--ip", "::1", "--", "ibv_devinfo", "-v"]));
    assert_eq!(field(&text, "node_guid"), "0000:00ff:fe00:0001");
    assert_eq!(field(&text, "GID[  0]"), "fe80::ff:fe00:1, RoCE v2");
    assert_eq!(field(&text, "GID[  1]"), "::1, RoCE v2");
    assert!(!text.contains("GID[  2]"), "{text}");
}

/// GID 0 on `::1`: `lo` has no link-local address, so GID 0 carries no traffic; the QP is
/// refused at RTR, and the program's stderr says why and which GID works.
#[test]
fn gid_0_on_an_interface_without_a_link_local_address_is_refused_with_the_reason() {
    if !have("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        common::skipped("no IPv6 loopback here");
        return;
    }
    // The server's NIC on ::1 with -g 0; the client (an IPv4 NIC) reaches its TCP exchange,
    // which listens on 0.0.0.0, at 127.0.0.1.
    let argv = ["ibv_rc_pingpong", "-g", "0", "-p", "18731"];
    let server = common::exec::spawn_exec(Side::local("::1", &[]), &argv);
    wait_listening(server.id(), "18731");
    let client_argv = [&argv[..], &["127.0.0.1"]].concat();
    let client = common::exec::spawn_exec(Side::local("127.0.13.40", &[]), &client_argv)
        .wait_with_output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    assert!(!server.status.success() && !client.status.success());
    let err = String::from_utf8_lossy(&server.stderr);
    assert!(
        err.contains(
            "GID 0 carries no traffic here: lo, which holds ::1, has no IPv6 link-local address; \
             use GID 1"
        ),
        "{err}"
    );
}

#[test]
fn devinfo_selects_the_device_by_its_name() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let text = ok(&roce(&[
        "exec",
        "--ip",
        "127.0.13.2",
        "--name",
        "rxe0",
        "--",
        "ibv_devinfo",
        "-d",
        "rxe0",
    ]));
    assert_eq!(field(&text, "hca_id"), "rxe0");
    let out = roce(&[
        "exec",
        "--ip",
        "127.0.13.2",
        "--",
        "ibv_devinfo",
        "-d",
        "rxe0",
    ]);
    assert!(!out.status.success(), "only roce0 exists");
}

#[test]
fn stats_json_reports_the_nic_counters_after_the_program() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let out = roce(&[
        "exec",
        "--ip",
        "127.0.13.3",
        "--stats",
        "json",
        "--",
        "ibv_devinfo",
    ]);
    ok(&out);
    let stderr = String::from_utf8(out.stderr).unwrap();
    // Written at the close and again at exit, without the NIC's runtime: no panic.
    assert!(!stderr.contains("panicked"), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(json["device"], "roce0");
    assert_eq!(json["ip"], "127.0.13.3");
    assert_eq!(json["counters"]["tx_packets"], 0);
    assert!(json["counters"].as_object().unwrap().len() > 10, "{json}");
    // A program that never opens the device has none.
    let out = roce(&["exec", "--ip", "127.0.0.1", "--stats", "--", "ibv_devices"]);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("did not open the device"));
}

/// Ctrl-C on a program that ends by it (ibv_rc_pingpong waiting for its client) still prints
/// `--stats`: the signal reaches the terminal's foreground group, the program and `roce exec`
/// alike, as here; the counters are the program's, and the status is the program's (130).
/// A SIGTERM sent to `roce exec` alone is passed on to the program, with the same outcome.
#[test]
fn ctrl_c_and_sigterm_still_print_the_counters() {
    use std::os::unix::process::CommandExt as _;
    if !have("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    for (port, ip, group, signal, status) in [
        (18_990, "127.0.13.241", true, "-INT", 130),
        (18_991, "127.0.13.242", false, "-TERM", 143),
    ] {
        let child = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["exec", "--ip", ip, "--stats", "json", "--"])
            .args(["ibv_rc_pingpong", "-g", "1", "-p", &port.to_string()])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_listening(child.id(), &port.to_string());
        let target = if group {
            format!("-{}", child.id())
        } else {
            child.id().to_string()
        };
        let sent = Command::new("kill")
            .args([signal, "--", &target])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(status), "{signal}: {stderr}");
        let json: serde_json::Value = serde_json::from_str(
            stderr
                .lines()
                .find(|l| l.starts_with('{'))
                .unwrap_or_else(|| panic!("{signal}: no counters in {stderr}")),
        )
        .unwrap();
        assert_eq!(json["ip"], ip, "{signal}");
        assert!(json["counters"].as_object().unwrap().len() > 10, "{json}");
    }
}

#[test]
fn the_program_gets_the_library_and_the_device_and_its_exit_status_is_ours() {
    // A capture of this process's own (roce exec empties it first: a fixed path another user
    // had written would refuse it).
    let pcap = std::env::temp_dir().join(format!("roce-exec-env-{}.pcap", std::process::id()));
    let pcap = pcap.to_str().unwrap();
    let out = roce(&[
        "exec",
        "--ip",
        "127.0.0.3",
        "--mtu",
        "4096",
        "--pcap",
        pcap,
        "--cc",
        "dcqcn",
        "--",
        "sh",
        "-c",
        "echo $LD_LIBRARY_PATH; echo $ROCE_VERBS_IP $ROCE_VERBS_MTU $ROCE_VERBS_PCAP $ROCE_VERBS_CC; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let first_dir = lines.next().unwrap().split(':').next().unwrap().to_owned();
    assert!(
        std::path::Path::new(&first_dir)
            .join("libibverbs.so.1")
            .is_file(),
        "{text}"
    );
    assert_eq!(
        lines.next(),
        Some(format!("127.0.0.3 4096 {pcap} dcqcn").as_str())
    );
    let _ = std::fs::remove_file(pcap);
}

#[test]
fn bad_arguments_are_refused_before_the_program_runs() {
    for args in [
        &[
            "exec",
            "--ip",
            "127.0.0.1",
            "--mtu",
            "1500",
            "--",
            "touch",
            "/tmp/roce-exec-ran",
        ][..],
        // IPv6 is the UDP backend's only.
        &[
            "exec",
            "--ip",
            "::1",
            "--backend",
            "raw",
            "--dev",
            "lo",
            "--",
            "touch",
            "/tmp/roce-exec-ran",
        ][..],
        &[
            "exec",
            "--ip",
            "127.0.0.1",
            "--backend",
            "raw",
            "--",
            "touch",
            "/tmp/roce-exec-ran",
        ][..],
        &[
            "exec",
            "--ip",
            "127.0.0.1",
            "--lib-dir",
            "/nonexistent",
            "--",
            "touch",
            "/tmp/roce-exec-ran",
        ][..],
        &["exec", "--ip", "127.0.0.1", "touch", "/tmp/roce-exec-ran"][..],
        &[
            "exec",
            "--ip",
            "127.0.0.1",
            "--loss",
            "2",
            "--",
            "touch",
            "/tmp/roce-exec-ran",
        ][..],
        &[
            "exec",
            "--ip",
            "127.0.0.1",
            "--cc",
            "reno",
            "--",
            "touch",
            "/tmp/roce-exec-ran",
        ][..],
        &[
            "exec",
            "--ip",
            "127.0.0.1",
            "--loss-recovery",
            "sack",
            "--",
            "touch",
            "/tmp/roce-exec-ran",
        ][..],
    ] {
        let _ = std::fs::remove_file("/tmp/roce-exec-ran");
        let out = roce(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !std::path::Path::new("/tmp/roce-exec-ran").exists(),
            "{args:?} ran the program"
        );
    }
}

#[test]
fn a_bad_variable_fails_the_device_list_and_names_the_variable() {
    if !have("ibv_devices", "ibverbs-utils") {
        return;
    }
    let out = Command::new("ibv_devices")
        .env("LD_LIBRARY_PATH", roce_verbs_so::library_dir())
        .env("ROCE_VERBS_IP", "127.0.0.1")
        .env("ROCE_VERBS_MTU", "1500")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ROCE_VERBS_MTU=\"1500\""), "{stderr}");
    // No address: no device, and no failure.
    let out = Command::new("ibv_devices")
        .env("LD_LIBRARY_PATH", roce_verbs_so::library_dir())
        .env_remove("ROCE_VERBS_IP")
        .output()
        .unwrap();
    let text = ok(&out);
    assert_eq!(
        text.lines()
            .skip(2)
            .filter(|l| !l.trim().is_empty())
            .count(),
        0,
        "{text}"
    );
}

/// The NIC inside the program logs on the program's stderr: its warnings by default, more
/// when `roce exec`'s RUST_LOG asks (passed on as ROCE_VERBS_LOG), such as the NIC it opened
/// and whether it is shared; a filter that does not parse is named and the warnings stay.
#[test]
fn the_nic_in_the_program_logs_on_its_stderr_as_rust_log_asks() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let devinfo = |rust_log: Option<&str>, ip: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_roce"));
        // A NIC of its own, but at .236 the shared NIC roce exec gives by default.
        let private = if ip.ends_with(".236") {
            None
        } else {
            Some("--private-nic")
        };
        cmd.arg("exec")
            .args(private)
            .args(["--ip", ip, "--", "ibv_devinfo"]);
        match rust_log {
            Some(filter) => cmd.env("RUST_LOG", filter),
            None => cmd.env_remove("RUST_LOG"),
        };
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = devinfo(Some("roce_verbs=info"), "127.0.13.233");
    assert!(
        stderr.contains("NIC opened device=roce0 ip=127.0.13.233 backend=Udp shared=false"),
        "{stderr}"
    );
    let stderr = devinfo(Some("roce_verbs=info"), "127.0.13.236");
    assert!(
        stderr.contains("NIC opened device=roce0 ip=127.0.13.236 backend=Udp shared=true"),
        "{stderr}"
    );
    let stderr = devinfo(None, "127.0.13.234");
    assert!(!stderr.contains("NIC opened"), "{stderr}");
    let stderr = devinfo(Some("roce_verbs=loud"), "127.0.13.235");
    assert!(
        stderr.contains("ROCE_VERBS_LOG=roce_verbs=loud") && stderr.contains("warnings only"),
        "{stderr}"
    );
    assert!(!stderr.contains("NIC opened"), "{stderr}");
}

/// A second NIC on an address whose port 4791 is taken is told that it is in use, and what to
/// do, not asked whether the address is this host's; one on an address this host lacks is
/// told that instead.
#[test]
fn a_taken_or_missing_address_is_named_by_its_cause() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let _taken = std::net::UdpSocket::bind("127.0.13.240:4791").unwrap();
    let out = roce(&["exec", "--ip", "127.0.13.240", "--", "ibv_devinfo"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("127.0.13.240:4791: in use"), "{stderr}");
    assert!(
        stderr.contains("another loopback address with roce exec --ip"),
        "{stderr}"
    );
    assert!(!stderr.contains("address of this host"), "{stderr}");
    let out = roce(&["exec", "--ip", "198.18.255.252", "--", "ibv_devinfo"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("198.18.255.252 is not an address of this host"),
        "{stderr}"
    );
    assert!(!stderr.contains("in use"), "{stderr}");
}

/// Runs `PROGRAM -g 1 -p PORT ARGS` (an ibv_*_pingpong) as [`exec_pair`] does.
fn pingpong(
    program: &str,
    server: Side,
    client: Side,
    port: &str,
    args: &[&str],
) -> (Output, Output) {
    let argv = [&[program, "-g", "1", "-p", port][..], args].concat();
    exec_pair(server, client, port, &argv)
}

/// Runs `ibv_rc_pingpong -g 1 -p PORT ARGS`, both sides with `exec_args`.
fn rc_pingpong(
    server_ip: &str,
    client_ip: &str,
    port: &str,
    exec_args: &[&str],
    args: &[&str],
) -> (Output, Output) {
    pingpong(
        "ibv_rc_pingpong",
        Side::local(server_ip, exec_args),
        Side::local(client_ip, exec_args),
        port,
        args,
    )
}

/// The `--stats json` line a side printed last on stderr.
fn stats(out: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    serde_json::from_str(stderr.lines().last().unwrap()).unwrap()
}

#[test]
fn ibv_rc_pingpong_runs_between_two_roce_exec_processes() {
    if !have("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    // -c: each side checks the bytes it received. 1 B (inline), 64 KiB in 1024-byte packets,
    // 1 MiB in 4096-byte packets.
    for (i, (size, iters, mtu)) in [
        ("1", "20", "1024"),
        ("65536", "20", "1024"),
        ("1048576", "5", "4096"),
    ]
    .into_iter()
    .enumerate()
    {
        let port = (18611 + i).to_string();
        let (client, server) = rc_pingpong(
            "127.0.13.10",
            "127.0.13.11",
            &port,
            &["--mtu", mtu, "--stats", "json"],
            &["-s", size, "-n", iters, "-m", mtu, "-c"],
        );
        let (c, s) = (ok(&client), ok(&server));
        for out in [&c, &s] {
            assert!(
                out.contains(&format!("{iters} iters in")),
                "size {size}:\n{out}"
            );
            assert!(out.contains("GID ::ffff:127.0.13.1"), "{out}");
        }
        let stats = stats(&client);
        let bytes = stats["counters"]["tx_bytes"].as_u64().unwrap();
        let sent = size.parse::<u64>().unwrap() * iters.parse::<u64>().unwrap();
        assert!(
            bytes >= sent,
            "size {size}: {bytes} bytes sent, at least {sent} expected"
        );
        // Nothing is lost on loopback, unless the kernel caps the sockets' receive buffers
        // below what the NIC asks for (an ordinary user, net.core.rmem_max at its default of
        // 208 KiB: a 1 MiB message's window overflows it), which the NIC then says.
        let capped = [&client, &server]
            .iter()
            .any(|o| String::from_utf8_lossy(&o.stderr).contains("UDP receive buffer capped"));
        if !capped {
            assert_eq!(stats["counters"]["retransmitted_packets"], 0, "{stats}");
        }
    }
}

#[test]
fn ibv_rc_pingpong_waits_on_completion_channels_with_e_and_posts_with_the_wr_api_with_n() {
    if !have("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    // -e: ibv_req_notify_cq, then ibv_get_cq_event on the channel's fd before each poll; the
    // events are acknowledged at the end. -N: ibv_create_qp_ex (through the context's
    // create_qp_ex), ibv_qp_to_qp_ex, then ibv_wr_start / ibv_wr_send / ibv_wr_set_sge /
    // ibv_wr_complete for each send.
    for (flag, server, client, port) in [
        ("-e", "127.0.13.12", "127.0.13.13", "18615"),
        ("-N", "127.0.13.16", "127.0.13.17", "18617"),
    ] {
        let (client, server) = rc_pingpong(server, client, port, &[], &[flag, "-n", "50", "-c"]);
        for out in [ok(&client), ok(&server)] {
            assert!(out.contains("50 iters in"), "{flag}: {out}");
        }
    }
}

#[test]
fn ibv_srq_pingpong_shares_one_receive_queue_between_sixteen_qps() {
    if !have("ibv_srq_pingpong", "ibverbs-utils") {
        return;
    }
    // 16 QPs a side (srq_pingpong's default), every receive posted with ibv_post_srq_recv to one
    // SRQ; plain, and with -e waiting on a completion channel.
    for (i, extra) in [&[][..], &["-e"][..]].into_iter().enumerate() {
        let port = (18631 + i).to_string();
        let (client, server) = pingpong(
            "ibv_srq_pingpong",
            Side::local("127.0.13.24", &[]),
            Side::local("127.0.13.25", &[]),
            &port,
            &[&["-n", "100"][..], extra].concat(),
        );
        for out in [ok(&client), ok(&server)] {
            assert!(out.contains("100 iters in"), "{extra:?}:\n{out}");
            let qps = out.lines().filter(|l| l.contains("local address")).count();
            assert_eq!(qps, 16, "{extra:?}: one line per QP\n{out}");
        }
    }
}

#[test]
fn a_lossy_nic_recovers_and_counts_its_retransmissions() {
    if !have("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    // The server's NIC drops 5% of what it receives (--loss): the client's NIC retransmits,
    // the data still checks (-c), and the client's counters show it.
    let (client, server) = pingpong(
        "ibv_rc_pingpong",
        Side::local("127.0.13.18", &["--loss", "0.05"]),
        Side::local("127.0.13.19", &["--stats", "json"]),
        "18618",
        &["-n", "100", "-c"],
    );
    ok(&server);
    assert!(ok(&client).contains("100 iters in"));
    let stats = stats(&client);
    assert!(
        stats["counters"]["retransmitted_packets"].as_u64().unwrap() > 0,
        "{stats}"
    );
}

#[test]
fn a_lossy_pair_with_selective_repeat_nacks_and_sends_again_only_what_was_lost() {
    if !have("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    // Both NICs run selective repeat (--loss-recovery); the server's drops 5 % of what it
    // receives. Its NACKs reach the client, which sends packets again, and the data checks.
    let sr = ["--loss-recovery", "selective-repeat"];
    let (client, server) = pingpong(
        "ibv_rc_pingpong",
        Side::local("127.0.13.66", &[&sr[..], &["--loss", "0.05"]].concat()),
        Side::local("127.0.13.67", &[&sr[..], &["--stats", "json"]].concat()),
        "18640",
        &["-n", "100", "-s", "16384", "-c"],
    );
    ok(&server);
    assert!(ok(&client).contains("100 iters in"));
    let stats = stats(&client);
    let counter = |name: &str| stats["counters"][name].as_u64().unwrap();
    assert!(counter("rx_sacks") > 0, "{stats}");
    assert!(counter("retransmitted_packets") > 0, "{stats}");
}

#[test]
fn uc_and_ud_pingpong_run_too() {
    if !have("ibv_uc_pingpong", "ibverbs-utils") {
        return;
    }
    // UD: address handles (ibv_create_ah), a Q_Key, and the 40-byte GRH area in front of each
    // received message; the message must fit the port MTU (1024 here).
    for (i, (program, args)) in [
        ("ibv_uc_pingpong", &["-n", "50", "-c"][..]),
        ("ibv_ud_pingpong", &["-n", "50", "-s", "1000", "-c"][..]),
    ]
    .into_iter()
    .enumerate()
    {
        let port = (18655 + i).to_string();
        let (client, server) = pingpong(
            program,
            Side::local("127.0.13.14", &[]),
            Side::local("127.0.13.15", &[]),
            &port,
            args,
        );
        for out in [ok(&client), ok(&server)] {
            assert!(out.contains("50 iters in"), "{program}:\n{out}");
        }
    }
}

#[test]
fn a_capture_of_the_exchange_is_written() {
    if !have("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    let pcap = std::env::temp_dir().join(format!("roce-exec-{}.pcap", std::process::id()));
    let pcap_arg = pcap.to_str().unwrap();
    let (client, server) = rc_pingpong(
        "127.0.13.20",
        "127.0.13.21",
        "18621",
        &["--pcap", pcap_arg],
        &["-n", "3"],
    );
    ok(&server);
    ok(&client);
    let dump = ok(&roce(&["dump", pcap_arg]));
    let _ = std::fs::remove_file(&pcap);
    // 3 iterations each way: SENDs of 4096 bytes in 1024-byte packets, and their ACKs.
    assert!(
        dump.lines().filter(|l| l.contains("SEND")).count() >= 12,
        "{dump}"
    );
    assert!(
        dump.contains("127.0.13.21") && dump.contains("127.0.13.20"),
        "{dump}"
    );
}

#[test]
fn a_qp_on_the_link_local_gid_is_refused_at_rtr() {
    if !have("ibv_rc_pingpong", "ibverbs-utils") {
        return;
    }
    // -g 0 names the link-local GID, which carries no traffic here: the move to RTR is refused
    // (EINVAL) rather than the QP sending into nowhere. The server, which moves first, says so
    // and exits non-zero; the client sees it hang up.
    let (client, server) = rc_pingpong(
        "127.0.13.30",
        "127.0.13.31",
        "18631",
        &[],
        &["-n", "1", "-g", "0"],
    );
    assert!(!server.status.success() && !client.status.success());
    let stderr = String::from_utf8_lossy(&server.stderr);
    assert!(stderr.contains("Failed to modify QP to RTR"), "{stderr}");
}

#[test]
fn perftest_runs_every_operation_between_two_roce_exec_processes() {
    if !have("ib_write_bw", "perftest") {
        return;
    }
    // perftest 4.5 on a device it does not know uses ibv_post_send (its
    // verify_params_with_device_context): WRITE, READ, SEND and atomics, bandwidth and latency, over RC, and SEND over UD
    // and WRITE over UC; -q 4 runs four QPs at once; --use-srq has two QPs take their receives
    // from one shared receive queue.
    let runs: &[&[&str]] = &[
        &["ib_write_bw", "-q", "4"],
        &["ib_read_bw"],
        &["ib_send_bw"],
        &["ib_atomic_bw"],
        &["ib_write_lat"],
        &["ib_read_lat"],
        &["ib_send_lat"],
        &["ib_atomic_lat"],
        &["ib_send_bw", "-c", "UD"],
        &["ib_send_lat", "-c", "UD"],
        &["ib_write_bw", "-c", "UC"],
        &["ib_send_bw", "--use-srq", "-q", "2"],
    ];
    for (i, run) in runs.iter().enumerate() {
        let port = (18641 + i).to_string();
        let argv = [*run, &["-x", "1", "-n", "20", "-p", &port][..]].concat();
        let (client, server) = exec_pair(
            Side::local("127.0.13.50", &[]),
            Side::local("127.0.13.51", &[]),
            &port,
            &argv,
        );
        let out = ok(&client);
        ok(&server);
        // The result row follows the header: a size and the iterations, then numbers.
        let rows = result_rows(&out);
        let cols = rows
            .first()
            .unwrap_or_else(|| panic!("{run:?}: no result row\n{out}"));
        assert!(
            cols.len() >= 3 && cols[0] > 0.0 && cols[1] >= 20.0,
            "{run:?}: {cols:?}"
        );
    }
}

/// A scratch directory for one test, empty, that every user may enter.
fn scratch(name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = std::env::temp_dir().join(format!("roce-exec-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `roce exec ARGS` as an installed `roce` runs: the build's library directory skipped, the
/// cache in `cache`, from `/`.
fn installed(cache: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_roce"));
    cmd.arg("exec")
        .args(args)
        .current_dir("/")
        .env("ROCE_EXEC_NO_BUILD_DIR", "1")
        .env("XDG_CACHE_HOME", cache)
        .env_remove("ROCE_VERBS_LIB_DIR");
    cmd
}

/// The one directory under `cache/roce-emu`.
fn cached_dir(cache: &std::path::Path) -> std::path::PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(cache.join("roce-emu"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// Where the loader finds `lib` for `program` under `roce exec` (ldd's `lib => PATH`).
fn loaded_from(cache: &std::path::Path, program: &str, lib: &str) -> String {
    let script = format!("ldd \"$(command -v {program})\"");
    let text = ok(
        &installed(cache, &["--ip", "127.0.0.1", "--", "sh", "-c", &script])
            .output()
            .unwrap(),
    );
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{lib} => ")))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no {lib} in\n{text}"))
        .to_owned()
}

/// `cargo install` deletes the build's directory: `roce` then writes out the libraries it
/// carries into the user's cache, once, readable by all, and programs load them from there,
/// whatever the working directory.
#[test]
fn without_the_build_the_carried_libraries_are_written_to_the_cache_and_loaded() {
    use std::os::unix::fs::MetadataExt as _;
    if !have("ibv_devices", "ibverbs-utils") || !have("readelf", "binutils") {
        return;
    }
    let root = scratch("carried");
    let cache = root.join("cache");
    let text = ok(
        &installed(&cache, &["--ip", "127.0.0.1", "--", "ibv_devices"])
            .output()
            .unwrap(),
    );
    assert!(text.contains("roce0"), "{text}");
    let dir = cached_dir(&cache);
    let libs = [
        ("libibverbs.so.1", roce_verbs_so::carried()),
        ("librdmacm.so.1", roce_rdmacm_so::carried()),
    ];
    let mut inodes = Vec::new();
    for (name, bytes) in libs {
        let path = dir.join(name);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o644, "{name}");
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "{name} differs from the carried copy"
        );
        let dynamic = ok(&Command::new("readelf")
            .arg("-d")
            .arg(&path)
            .output()
            .unwrap());
        assert!(
            dynamic.contains(&format!("Library soname: [{name}]")),
            "{name}: {dynamic}"
        );
        inodes.push(meta.ino());
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), libs.len());
    // The program loaded that copy, not the build's nor the system's.
    let from = loaded_from(&cache, "ibv_devices", "libibverbs.so.1");
    assert_eq!(std::path::Path::new(&from), dir.join("libibverbs.so.1"));
    if have("rping", "rdmacm-utils") {
        let from = loaded_from(&cache, "rping", "librdmacm.so.1");
        assert_eq!(std::path::Path::new(&from), dir.join("librdmacm.so.1"));
    }
    // Used again as they are.
    for ((name, _), ino) in libs.iter().zip(&inodes) {
        assert_eq!(
            std::fs::metadata(dir.join(name)).unwrap().ino(),
            *ino,
            "{name}"
        );
    }
    // --lib-dir and ROCE_VERBS_LIB_DIR still come first.
    let script = "echo \"$LD_LIBRARY_PATH\"";
    let explicit = roce_verbs_so::library_dir().to_str().unwrap();
    for (lib_dir_arg, lib_dir_env) in [(Some(explicit), None), (None, Some(explicit))] {
        let mut cmd = installed(&cache, &[]);
        if let Some(dir) = lib_dir_arg {
            cmd.args(["--lib-dir", dir]);
        }
        if let Some(dir) = lib_dir_env {
            cmd.env("ROCE_VERBS_LIB_DIR", dir);
        }
        let text = ok(&cmd
            .args(["--ip", "127.0.0.1", "--", "sh", "-c", script])
            .output()
            .unwrap());
        assert!(text.starts_with(&format!("{explicit}:")), "{text}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

/// Another user (here `nobody`) reads a cache root filled, since it may not write there; when
/// that cache is wrong it writes its own copy into a private directory in its temporary
/// directory instead. Needs root, to be two users.
#[test]
fn another_user_reuses_a_cache_it_cannot_write_or_falls_back_to_a_private_directory() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use std::os::unix::process::CommandExt as _;
    const NOBODY: u32 = 65534;
    if !have("ibv_devices", "ibverbs-utils") {
        return;
    }
    if common::sh(&["id", "-u"]).stdout != b"0\n" {
        common::skipped("needs root, to run roce exec as another user");
        return;
    }
    let root = scratch("users");
    let cache = root.join("cache");
    let tmp = root.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let as_nobody = |args: &[&str]| {
        let mut cmd = installed(&cache, args);
        cmd.uid(NOBODY).gid(NOBODY).env("TMPDIR", &tmp);
        cmd.output().unwrap()
    };
    ok(
        &installed(&cache, &["--ip", "127.0.0.1", "--", "ibv_devices"])
            .output()
            .unwrap(),
    );
    // The cache's parent is private when roce makes it; this user's own would be its own.
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = cached_dir(&cache);
    let text = ok(&as_nobody(&["--ip", "127.0.0.1", "--", "ibv_devices"]));
    assert!(text.contains("roce0"), "{text}");
    let private = tmp.join(format!("roce-emu-{NOBODY}"));
    assert!(!private.exists(), "a good cache was not used");
    // Spoil root's copy: nobody cannot mend it, and uses its own.
    let verbs = dir.join("libibverbs.so.1");
    let mut spoiled = std::fs::read(&verbs).unwrap();
    spoiled[100] ^= 0xff;
    std::fs::write(&verbs, &spoiled).unwrap();
    let text = ok(&as_nobody(&["--ip", "127.0.0.1", "--", "ibv_devices"]));
    assert!(text.contains("roce0"), "{text}");
    assert_eq!(std::fs::read(&verbs).unwrap(), spoiled);
    let meta = std::fs::metadata(&private).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (NOBODY, 0o700));
    let own = private
        .join(dir.file_name().unwrap())
        .join("libibverbs.so.1");
    assert!(std::fs::read(&own).unwrap() == roce_verbs_so::carried());
    std::fs::remove_dir_all(&root).unwrap();
}
