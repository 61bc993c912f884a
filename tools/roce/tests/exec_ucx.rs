//! UCX, unmodified, on the emulated NIC: Debian's `ucx_perftest` between two `roce exec`
//! processes on loopback, through UCP's tag matching over `rc_verbs` (with `ud_verbs` for its
//! wire-up) and over `ud_verbs` alone, and through UCT's RDMA PUT, GET and active messages.
//! UCX finds the device as it finds rxe's (`/dev/infiniband/uverbs0` and sysfs, which
//! `roce exec` shows the program); the two processes are on one host, so `UCX_TLS` keeps UCX
//! off its shared-memory transports. Each run must end with its `Final:` row of as many
//! iterations as asked. Skips, naming the package, without ucx-utils; under CI=true that fails.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::exec::{Side, end_group, have, ok_as, spawn_exec, wait_listening};

/// `ucx_perftest` as the server (NIC at `net`.1, TCP `port`) and as its client (at `net`.2)
/// with `env` (`NAME=VALUE`, for both) and the client's `test` options; the iterations of
/// the client's `Final:` row, after checking that both ended well.
fn perftest(net: &str, port: u16, env: &[&str], test: &[&str]) -> u64 {
    let (server_ip, client_ip) = (format!("{net}.1"), format!("{net}.2"));
    let port = port.to_string();
    let with_env = |args: &[&str]| -> Vec<String> {
        let mut argv = vec!["env".to_owned()];
        argv.extend(env.iter().map(|e| (*e).to_owned()));
        argv.push("ucx_perftest".to_owned());
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        argv
    };
    let server_argv = with_env(&["-p", &port]);
    let server_argv: Vec<&str> = server_argv.iter().map(String::as_str).collect();
    let server = spawn_exec(Side::local(&server_ip, &[]), &server_argv);
    wait_listening(server.id(), &port);
    let client_argv = with_env(&[test, &["-p", &port, &server_ip]].concat());
    let client_argv: Vec<&str> = client_argv.iter().map(String::as_str).collect();
    let client = spawn_exec(Side::local(&client_ip, &[]), &client_argv)
        .wait_with_output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    let what = format!("ucx_perftest {test:?} with {env:?}");
    let text = ok_as(&format!("{what} (client)"), &client);
    ok_as(&format!("{what} (server)"), &server);
    let row = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Final:"))
        .unwrap_or_else(|| panic!("{what}: no Final: row in\n{text}"));
    row.split_whitespace().next().unwrap().parse().unwrap()
}

/// UCP's tag matching, latency and bandwidth, over RC (`rc_verbs`, which UCX wires up over
/// `ud_verbs`) and over UD alone: every message UCX sent arrived (ud_verbs drops datagrams
/// whose completion says the wrong network header type: wc.sl).
#[test]
fn ucp_tag_matching_runs_over_rc_verbs_and_over_ud_verbs() {
    if !have("ucx_perftest", "ucx-utils") {
        return;
    }
    for (i, tls) in ["UCX_TLS=rc_verbs,ud_verbs", "UCX_TLS=ud_verbs"]
        .into_iter()
        .enumerate()
    {
        let env = [tls, "UCX_NET_DEVICES=roce0:1"];
        let port = 13_600 + 2 * i as u16;
        assert_eq!(
            perftest("127.0.81", port, &env, &["-t", "tag_lat", "-n", "300"]),
            300
        );
        let bw = ["-t", "tag_bw", "-s", "65536", "-n", "100"];
        assert_eq!(perftest("127.0.81", port + 1, &env, &bw), 100);
    }
}

/// UCT over the device itself: RDMA WRITE (`put_bw`, zero copy) and READ (`get`) of 64 KiB,
/// PUT latency and active messages over `rc_verbs`, and active messages over `ud_verbs`.
#[test]
fn uct_puts_gets_and_active_messages_run_over_rc_and_ud() {
    if !have("ucx_perftest", "ucx-utils") {
        return;
    }
    let runs: [&[&str]; 6] = [
        &[
            "-x", "rc_verbs", "-t", "put_bw", "-D", "zcopy", "-s", "65536", "-n", "100",
        ],
        &[
            "-x", "rc_verbs", "-t", "get", "-D", "zcopy", "-s", "65536", "-n", "100",
        ],
        &["-x", "rc_verbs", "-t", "put_lat", "-n", "300"],
        &[
            "-x", "rc_verbs", "-t", "am_bw", "-D", "bcopy", "-s", "1024", "-n", "300",
        ],
        &["-x", "ud_verbs", "-t", "am_lat", "-n", "300"],
        &[
            "-x", "ud_verbs", "-t", "am_bw", "-D", "bcopy", "-s", "512", "-n", "300",
        ],
    ];
    for (i, run) in runs.iter().enumerate() {
        let test = [*run, &["-d", "roce0:1"]].concat();
        let n: u64 = run[run.len() - 1].parse().unwrap();
        assert_eq!(
            perftest("127.0.82", 13_620 + i as u16, &[], &test),
            n,
            "{run:?}"
        );
    }
}

/// UCX's rdmacm connection manager: io_demo's client connects to its server through
/// librdmacm (`rdma_connect` on an id without a QP, the UCP address in the REQ's private data;
/// CONNECT_RESPONSE, `rdma_init_qp_attr`, `rdma_establish`), then writes over rc_verbs; the
/// client ends well once every write was answered. The server serves until it is ended.
#[test]
fn io_demo_connects_through_ucxs_rdmacm_connection_manager() {
    if !have("io_demo", "ucx-utils") {
        return;
    }
    let env = [
        "env",
        "UCX_TLS=rc_verbs,ud_verbs",
        "UCX_NET_DEVICES=roce0:1",
    ];
    let (server_ip, client_ip) = ("127.0.13.231", "127.0.13.232");
    let server_argv = [&env[..], &["io_demo", "-d", "4096"]].concat();
    // At most a minute each: a client that cannot connect tries again every 5 s for ever.
    let wrapper = ["timeout", "60"];
    let side = |ip, exec_args| Side {
        wrapper: &wrapper,
        ip,
        exec_args,
    };
    let server = spawn_exec(side(server_ip, &[]), &server_argv);
    common::exec::wait_nic(server.id(), server_ip);
    let client_argv = [&env[..], &["io_demo", "-d", "4096", "-i", "20", server_ip]].concat();
    let client = spawn_exec(side(client_ip, &["--stats", "json"]), &client_argv)
        .wait_with_output()
        .unwrap();
    end_group(server);
    let text = ok_as("io_demo (client)", &client);
    assert!(text.contains("Connected to server [0]"), "{text}");
    // io_demo prints its counts once a second and again at the end, each line what completed
    // since the one before (`total min:N max:N total:N | read …`): a run that crosses a
    // second's boundary (a connection that took one) prints its 20 in two lines.
    let answered: u64 = text
        .lines()
        .filter_map(|l| l.split("[DEMO] total min:").nth(1))
        .filter_map(|rest| rest.split(" total:").nth(1))
        .filter_map(|n| n.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(answered, 20, "every write answered:\n{text}");
    assert!(text.contains("Client exit with status 'OK'"), "{text}");
    // The connection went through the CM: the REQ and the RTU left, the REP came.
    let stderr = String::from_utf8_lossy(&client.stderr);
    let stats: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    let counter = |name: &str| stats["counters"][name].as_u64().unwrap();
    assert!(counter("cm_rx_mads") >= 1, "{stats}");
    assert!(counter("tx_gsi_mads") >= 2, "{stats}");
}
