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

#[test]
fn pingpong_through_the_cm() {
    let (client, server) = run_pair(
        &[
            "pingpong",
            "-R",
            "-p",
            "18960",
            "--ip",
            "127.0.160.1",
            "-n",
            "40",
            "-s",
            "1000",
            "--json",
        ],
        &[
            "pingpong",
            "-R",
            "127.0.160.1",
            "-p",
            "18960",
            "--ip",
            "127.0.160.2",
            "-n",
            "40",
            "-s",
            "1000",
            "--json",
        ],
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

#[test]
fn pingpong_to_a_port_nobody_listens_on_is_rejected_at_once() {
    let server = spawn(&[
        "pingpong",
        "-R",
        "-p",
        "18961",
        "--ip",
        "127.0.161.1",
        "-n",
        "5",
        "--json",
    ]);
    std::thread::sleep(Duration::from_millis(400));
    let start = Instant::now();
    let client = spawn(&[
        "pingpong",
        "-R",
        "127.0.161.1",
        "-p",
        "18962",
        "--ip",
        "127.0.161.2",
        "-n",
        "5",
    ])
    .wait_with_output()
    .unwrap();
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert_eq!(client.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("127.0.161.1 port 18962: rejected: no listener (reason 8"),
        "{stderr}"
    );
    // The REJ answers the REQ: no waiting for the timeout.
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Nothing happened before the rejection: no remote address, no round trip.
    let stdout = String::from_utf8_lossy(&client.stdout);
    assert!(!stdout.contains("remote address"), "{stdout}");
    assert!(!stdout.contains("iters"), "{stdout}");
    // The server on the other port is still waiting for its client, and saw none.
    let server = stop(server);
    assert!(
        server.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&server.stdout)
    );
}

#[test]
fn a_cm_server_needs_its_address() {
    let out = common::roce(&["pingpong", "-R", "-p", "18963"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("-R: the server needs --ip"), "{stderr}");
}
