//! `-R` of `roce pingpong` and `roce perf`: QPs connected through the communication manager
//! (REQ, REP, RTU over QP 1) between two `roce` processes on loopback, and what a connect to a
//! port nobody listens on says.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::{finish, spawn};

use serde_json::Value;

/// A `roce` server with `server` arguments and, once it listens, a client with `client`
/// arguments; the client's output when it ends, then the server's.
fn run_pair(server: &[&str], client: &[&str]) -> (Output, Output) {
    let server = spawn(server);
    std::thread::sleep(Duration::from_millis(400));
    let client = spawn(client).wait_with_output().unwrap();
    (client, finish(server))
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Kills a server that is still waiting and returns its output.
fn stop(mut server: Child) -> Output {
    let _ = server.kill();
    server.wait_with_output().unwrap()
}

/// `COMMAND -R [SERVER] -p PORT --ip IP TAIL`: a server's arguments without `server`, a
/// client's with.
fn cm_args<'a>(
    command: &[&'a str],
    server: Option<&'a str>,
    port: &'a str,
    ip: &'a str,
    tail: &[&'a str],
) -> Vec<&'a str> {
    [
        command,
        &["-R"],
        server.as_slice(),
        &["-p", port, "--ip", ip],
        tail,
    ]
    .concat()
}

/// `roce COMMAND -R` as a server on `net`.1 and a client on `net`.2, both with `shared`.
fn cm_pair(command: &[&str], port: &str, net: &str, shared: &[&str]) -> (Output, Output) {
    let (server_ip, client_ip) = (format!("{net}.1"), format!("{net}.2"));
    run_pair(
        &cm_args(command, None, port, &server_ip, shared),
        &cm_args(command, Some(&server_ip), port, &client_ip, shared),
    )
}

#[test]
fn pingpong_through_the_cm() {
    let (client, server) = cm_pair(
        &["pingpong"],
        "18960",
        "127.0.160",
        &["-n", "40", "-s", "1000", "--json"],
    );
    let stderr = String::from_utf8_lossy(&server.stderr);
    assert!(stderr.contains("through the CM"), "{stderr}");
    let (client, server) = (json(&client), json(&server));
    for (side, result) in [("client", &client), ("server", &server)] {
        assert_eq!(result["iterations"], 40, "{side}: {result}");
        assert_eq!(result["bytes"], 40 * 1000 * 2, "{side}: {result}");
        // The connection went through QP 1: CM MADs both ways.
        assert!(
            result["counters"]["cm_rx_mads"].as_u64().unwrap() >= 1,
            "{side}: {result}"
        );
    }
    // Each side learnt the other's QP from the REQ's and the REP's private data.
    assert_eq!(
        client["remote"]["qpn"], server["local"]["qpn"],
        "{client}\n{server}"
    );
    assert_eq!(
        server["remote"]["qpn"], client["local"]["qpn"],
        "{client}\n{server}"
    );
    assert_eq!(server["remote"]["gid"], "::ffff:127.0.160.2", "{server}");
}

/// A `roce COMMAND -R` server on `net`.1 port `port` and a client that connects to `port` + 1,
/// where nobody listens: the client is told "rejected: no listener" at once (status 2, well
/// before any timeout), and the server saw nothing. The client's output.
fn rejected_at_once(command: &[&str], server_extra: &[&str], net: &str, port: u16) -> Output {
    let (server_ip, client_ip) = (format!("{net}.1"), format!("{net}.2"));
    let (port, wrong) = (port.to_string(), (port + 1).to_string());
    let server = spawn(&cm_args(
        command,
        None,
        &port,
        &server_ip,
        &[&["-n", "5"], server_extra].concat(),
    ));
    std::thread::sleep(Duration::from_millis(400));
    let client = cm_args(command, Some(&server_ip), &wrong, &client_ip, &["-n", "5"]);
    let start = Instant::now();
    let client = spawn(&client).wait_with_output().unwrap();
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert_eq!(client.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{server_ip} port {wrong}: rejected: no listener (reason 8"
        )),
        "{stderr}"
    );
    // The REJ answers the REQ: no waiting for the timeout.
    assert!(took < Duration::from_secs(5), "{took:?}");
    // The server on the other port is still waiting for its client, and saw none.
    let server = stop(server);
    assert!(
        server.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&server.stdout)
    );
    client
}

#[test]
fn pingpong_to_a_port_nobody_listens_on_is_rejected_at_once() {
    let client = rejected_at_once(&["pingpong"], &["--json"], "127.0.161", 18961);
    // Nothing happened before the rejection: no remote address, no round trip.
    let stdout = String::from_utf8_lossy(&client.stdout);
    assert!(!stdout.contains("remote address"), "{stdout}");
    assert!(!stdout.contains("iters"), "{stdout}");
}

#[test]
fn a_cm_server_needs_its_address() {
    let out = common::roce(&["pingpong", "-R", "-p", "18963"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("-R: the server needs --ip"), "{stderr}");
}

#[test]
fn perf_write_through_the_cm() {
    let (client, server) = cm_pair(
        &["perf", "write"],
        "18964",
        "127.0.164",
        &["-n", "300", "-s", "4096", "--json"],
    );
    let stderr = String::from_utf8_lossy(&server.stderr).into_owned();
    assert!(
        stderr.contains("127.0.164.1 port 18964 through the CM"),
        "{stderr}"
    );
    let (client, server) = (json(&client), json(&server));
    assert_eq!(client["iterations"], 300, "{client}");
    assert_eq!(client["bytes"], 4096, "{client}");
    assert!(client["bw_avg_mb_s"].as_f64().unwrap() > 0.0, "{client}");
    // The report came back over the control connection: the server shows the client's.
    assert_eq!(server["bw_avg_mb_s"], client["bw_avg_mb_s"], "{server}");
    // The client's CM took a REP for the control QP and one for the test QP (and a REJ for
    // each try that came before the server listened again).
    assert!(
        client["counters"]["cm_rx_mads"].as_u64().unwrap() >= 2,
        "{client}"
    );
    // The WRITEs themselves: 300 messages of 4096 bytes, 4 packets each at MTU 1024.
    assert!(
        server["counters"]["rx_packets"].as_u64().unwrap() >= 1200,
        "{server}"
    );
}

#[test]
fn perf_send_with_two_qps_through_the_cm_checks_every_byte() {
    let (client, server) = cm_pair(
        &["perf", "send"],
        "18965",
        "127.0.165",
        &["-q", "2", "-n", "100", "-s", "2000", "--check", "--json"],
    );
    let stderr = String::from_utf8_lossy(&server.stderr).into_owned();
    let (client, server) = (json(&client), json(&server));
    assert_eq!(client["iterations"], 200, "{client}");
    assert_eq!(server["iterations"], 200, "{server}");
    assert!(
        stderr.contains("--check: 200 messages (400000 bytes) checked"),
        "{stderr}"
    );
    // One REP for the control QP, one for each test QP.
    assert!(
        client["counters"]["cm_rx_mads"].as_u64().unwrap() >= 3,
        "{client}"
    );
    assert_eq!(
        client["per_qp_bytes"],
        serde_json::json!([200000, 200000]),
        "{client}"
    );
}

#[test]
fn perf_send_latency_through_the_cm() {
    let (client, server) = cm_pair(
        &["perf", "send", "--lat"],
        "18966",
        "127.0.166",
        &["-n", "200", "--json"],
    );
    for (side, result) in [("client", json(&client)), ("server", json(&server))] {
        assert_eq!(result["iterations"], 200, "{side}: {result}");
    }
}

#[test]
fn perf_to_a_port_nobody_listens_on_is_rejected_at_once() {
    let client = rejected_at_once(&["perf", "write"], &[], "127.0.167", 18967);
    // Nothing was measured or printed before the rejection.
    assert!(
        client.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&client.stdout)
    );
}

#[test]
fn perf_to_a_host_without_a_nic_gives_up_after_the_timeout() {
    let start = Instant::now();
    let client = common::roce(&[
        "perf",
        "write",
        "-R",
        "127.0.168.1",
        "-p",
        "18969",
        "--ip",
        "127.0.168.2",
        "--timeout",
        "2",
    ]);
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert_eq!(client.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("127.0.168.1 port 18969: no answer from the CM within 2 s"),
        "{stderr}"
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

#[test]
fn a_one_way_server_waits_out_a_test_longer_than_the_timeout() {
    // The server of a WRITE test hears nothing on the control connection until the client's
    // 3 seconds are over: longer than --timeout, but the connection is up.
    let (client, server) = cm_pair(
        &["perf", "write"],
        "18970",
        "127.0.170",
        &["-D", "3", "-s", "4096", "--timeout", "1", "--json"],
    );
    let (client, server) = (json(&client), json(&server));
    assert!(client["iterations"].as_u64().unwrap() > 0, "{client}");
    assert_eq!(server["bw_avg_mb_s"], client["bw_avg_mb_s"], "{server}");
}
