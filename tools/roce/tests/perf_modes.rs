//! `roce perf`'s perftest modes: -e (completion events), -b (bidirectional),
//! --run_infinitely and -c UC|UD, each against itself and against Debian's perftest under
//! `roce exec` in both roles (skipping, named, where perftest is not installed), and the
//! combinations perftest refuses, refused before anything connects. Each test uses addresses
//! of its own in 127.0.0.0/8 (a NIC binds UDP <ip>:4791, and the tests run in parallel).

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::process::{Command, Output};

use common::exec::{Side, have, result_rows, spawn_exec, wait_listening};
use common::{finish, spawn, spawn_tool_pair};
use serde_json::Value;

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok_as(what: &str, out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{what}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

fn json_as(what: &str, out: &Output) -> Value {
    let stdout = ok_as(what, out);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{what}: {e}: {stdout}"))
}

/// `roce perf ARGS` as a server on `port` and as a client, both with `shared`; the client
/// connects to `net`.1 and plays `net`.2. Returns (client, server).
fn perf_pair(tool: &[&str], port: &str, net: &str, shared: &[&str]) -> (Output, Output) {
    let tool: Vec<&str> = ["perf"].iter().chain(tool).copied().collect();
    let (server, client) = spawn_tool_pair(&tool, port, net, shared, &[]);
    let client = client.wait_with_output().unwrap();
    (client, finish(server))
}

/// `roce perf PERF` as the server on `port` (its NIC at `net`.1) and perftest's `ARGV` under
/// `roce exec` as the client (at `net`.2). Returns (perftest client, roce perf server).
fn perf_server_perftest_client(
    perf: &[&str],
    argv: &[&str],
    port: &str,
    net: &str,
) -> (Output, Output) {
    let (server_ip, client_ip) = (format!("{net}.1"), format!("{net}.2"));
    let args: Vec<&str> = ["perf"]
        .iter()
        .chain(perf)
        .chain(&["-p", port, "--ip", &server_ip])
        .copied()
        .collect();
    let server = spawn(&args);
    wait_listening(server.id(), port);
    let argv: Vec<&str> = argv
        .iter()
        .chain(&["-p", port, server_ip.as_str()])
        .copied()
        .collect();
    let client = spawn_exec(Side::local(&client_ip, &[]), &argv)
        .wait_with_output()
        .unwrap();
    (client, finish(server))
}

/// perftest's `ARGV` under `roce exec` as the server on `port` (its NIC at `net`.1) and `roce
/// perf PERF` as the client (at `net`.2). Returns (roce perf client, perftest server).
fn perftest_server_perf_client(
    argv: &[&str],
    perf: &[&str],
    port: &str,
    net: &str,
) -> (Output, Output) {
    let (server_ip, client_ip) = (format!("{net}.1"), format!("{net}.2"));
    let argv: Vec<&str> = argv.iter().chain(&["-p", port]).copied().collect();
    let server = spawn_exec(Side::local(&server_ip, &[]), &argv);
    wait_listening(server.id(), port);
    let args: Vec<&str> = ["perf"]
        .iter()
        .chain(perf)
        .chain(&[server_ip.as_str(), "-p", port, "--ip", &client_ip])
        .copied()
        .collect();
    let client = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(&args)
        .output()
        .unwrap();
    (client, finish(server))
}

/// perftest's one result row (size, iterations, peak, average, rate), from its stdout.
fn perftest_row(what: &str, out: &Output) -> Vec<f64> {
    let stdout = ok_as(what, out);
    let rows = result_rows(&stdout);
    assert_eq!(rows.len(), 1, "{what}: {stdout}");
    rows[0].clone()
}

/// `roce perf ARGS` alone: it must be refused (exit 2) saying `why`, before it listened or
/// connected (a client named a server where nothing listens: had it tried, it would say it
/// could not connect; a server would wait for ever).
fn refused(args: &[&str], why: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(["perf"])
        .args(args)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(why), "{args:?}: {stderr}");
    assert!(
        !stderr.contains("waiting for a client"),
        "{args:?}: {stderr}"
    );
    assert!(!stderr.contains("couldn't connect"), "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "{args:?}: {stdout}");
}

#[test]
fn events_wait_on_the_completion_channel() {
    // Both sides of a send test and the client of a read test wait by events: --json counts
    // them (at least one for a run that waited at all; null without -e).
    for (i, verb) in ["send", "read"].into_iter().enumerate() {
        let port = (19200 + i).to_string();
        let net = format!("127.0.{}", 200 + i);
        let (client, server) = perf_pair(
            &[verb, "-e"],
            &port,
            &net,
            &["-n", "300", "-s", "4096", "--json"],
        );
        let (client, server) = (json_as("client", &client), json_as("server", &server));
        assert_eq!(client["iterations"], 300, "{verb}: {client}");
        assert!(
            client["cq_events"].as_u64().unwrap() > 0,
            "{verb}: {client}"
        );
        if verb == "send" {
            assert_eq!(server["iterations"], 300, "{server}");
            assert!(server["cq_events"].as_u64().unwrap() > 0, "{server}");
        }
    }
    let (client, _) = perf_pair(&["send"], "19202", "127.0.202", &["-n", "50", "--json"]);
    let client = json_as("client", &client);
    assert!(client["cq_events"].is_null(), "{client}");
}

#[test]
fn events_against_perftest_both_ways() {
    if !have("ib_send_bw", "perftest") {
        return;
    }
    let common = ["-e", "-n", "300", "-s", "4096"];
    let (client, server) = perf_server_perftest_client(
        &["send", "-e", "-n", "300", "-s", "4096", "--json"],
        &[&["ib_send_bw"][..], &common].concat(),
        "19203",
        "127.0.203",
    );
    let row = perftest_row("ib_send_bw -e client", &client);
    assert_eq!(row[..2], [4096.0, 300.0], "{row:?}");
    let server = json_as("roce perf send -e server", &server);
    assert_eq!(server["iterations"], 300, "{server}");
    assert!(server["cq_events"].as_u64().unwrap() > 0, "{server}");
    let (client, server) = perftest_server_perf_client(
        &[&["ib_read_bw"][..], &common].concat(),
        &["read", "-e", "-n", "300", "-s", "4096", "--json"],
        "19204",
        "127.0.204",
    );
    let client = json_as("roce perf read -e client", &client);
    assert_eq!(client["iterations"], 300, "{client}");
    assert!(client["cq_events"].as_u64().unwrap() > 0, "{client}");
    // perftest's read server prints the client's report.
    let row = perftest_row("ib_read_bw -e server", &server);
    assert_eq!(row[..2], [4096.0, 300.0], "{row:?}");
}

#[test]
fn events_are_refused_where_perftest_refuses_them() {
    refused(
        &["write", "-e", "127.0.205.1", "-p", "19205"],
        "Events feature not available on WRITE verb",
    );
    refused(
        &["send", "-e", "-D", "2", "127.0.205.1", "-p", "19205"],
        "Duration mode doesn't work with events",
    );
    refused(
        &["send", "-e", "--busy-poll", "127.0.205.1", "-p", "19205"],
        "--busy-poll",
    );
    // As a server too: refused before it listens.
    refused(&["write", "-e", "-p", "19205"], "WRITE verb");
}
