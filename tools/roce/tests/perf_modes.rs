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

/// `roce perf ARGS --ip IP`, or (`perftest`) perftest's `ARGS` under `roce exec --ip IP`.
fn spawn_side(perftest: bool, args: &[&str], ip: &str) -> std::process::Child {
    if perftest {
        return spawn_exec(Side::local(ip, &[]), args);
    }
    let args: Vec<&str> = ["perf"]
        .iter()
        .chain(args)
        .chain(&["--ip", ip])
        .copied()
        .collect();
    spawn(&args)
}

/// The server (`server.1`: its arguments; `server.0`: perftest rather than `roce perf`) on
/// `port` with its NIC at `net`.1, then, once it listens, the client at `net`.2. Returns
/// (client, server).
fn mixed_pair(
    server: (bool, &[&str]),
    client: (bool, &[&str]),
    port: &str,
    net: &str,
) -> (Output, Output) {
    let (server_ip, client_ip) = (format!("{net}.1"), format!("{net}.2"));
    let args: Vec<&str> = server.1.iter().chain(&["-p", port]).copied().collect();
    let server = spawn_side(server.0, &args, &server_ip);
    wait_listening(server.id(), port);
    let args: Vec<&str> = client
        .1
        .iter()
        .chain(&["-p", port, server_ip.as_str()])
        .copied()
        .collect();
    let client = spawn_side(client.0, &args, &client_ip)
        .wait_with_output()
        .unwrap();
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
    mixed_pair((false, perf), (true, argv), port, net)
}

/// perftest's `ARGV` under `roce exec` as the server on `port` (its NIC at `net`.1) and `roce
/// perf PERF` as the client (at `net`.2). Returns (roce perf client, perftest server).
fn perftest_server_perf_client(
    argv: &[&str],
    perf: &[&str],
    port: &str,
    net: &str,
) -> (Output, Output) {
    mixed_pair((true, argv), (false, perf), port, net)
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

/// The (average, rate) of a result, and its local and remote averages with -b.
fn duplex_figures(side: &Value) -> (f64, f64, f64) {
    (
        side["bw_avg_mb_s"].as_f64().unwrap(),
        side["local_bw_avg_mb_s"].as_f64().unwrap(),
        side["remote_bw_avg_mb_s"].as_f64().unwrap(),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn bidirectional_sides_each_show_both_directions() {
    for (i, verb) in ["write", "send", "read"].into_iter().enumerate() {
        let port = (19210 + i).to_string();
        let net = format!("127.0.{}", 210 + i);
        let (client, server) = perf_pair(
            &[verb, "-b"],
            &port,
            &net,
            &["-n", "300", "-s", "4096", "--json"],
        );
        let (client, server) = (json_as("client", &client), json_as("server", &server));
        for side in [&client, &server] {
            // Each side ran its own 300 iterations (a one-way server has none).
            assert_eq!(side["iterations"], 300, "{verb}: {side}");
            let (sum, local, remote) = duplex_figures(side);
            assert!(local > 0.0 && remote > 0.0, "{verb}: {side}");
            assert!(close(sum, local + remote), "{verb}: {side}");
        }
        // What one side measured is what the other was told.
        let ((_, c_local, c_remote), (_, s_local, s_remote)) =
            (duplex_figures(&client), duplex_figures(&server));
        assert!(
            close(c_local, s_remote) && close(s_local, c_remote),
            "{verb}: {client}\n{server}"
        );
    }
}

#[test]
fn bidirectional_against_perftest_both_ways() {
    if !have("ib_write_bw", "perftest") {
        return;
    }
    // perftest prints its own #iterations and the sum of both directions: the same sum as ours.
    let same_sum = |perftest: &[f64], ours: &[f64], what: &str| {
        assert_eq!(perftest[..2], ours[..2], "{what}: {perftest:?} {ours:?}");
        assert!(
            (perftest[3] - ours[3]).abs() <= 0.011 && ours[3] > 0.0,
            "{what}: {perftest:?} {ours:?}"
        );
    };
    for (i, verb) in ["write", "send"].into_iter().enumerate() {
        let ib = format!("ib_{verb}_bw");
        let common = ["-b", "-n", "300", "-s", "4096"];
        let (client, server) = perf_server_perftest_client(
            &[&[verb][..], &common].concat(),
            &[&[ib.as_str()][..], &common].concat(),
            &(19213 + 2 * i).to_string(),
            &format!("127.0.{}", 213 + 2 * i),
        );
        let what = format!("roce perf {verb} -b server, {ib} -b client");
        same_sum(
            &perftest_row(&what, &client),
            &perftest_row(&what, &server),
            &what,
        );
        let (client, server) = perftest_server_perf_client(
            &[&[ib.as_str()][..], &common].concat(),
            &[&[verb][..], &common].concat(),
            &(19214 + 2 * i).to_string(),
            &format!("127.0.{}", 214 + 2 * i),
        );
        let what = format!("{ib} -b server, roce perf {verb} -b client");
        same_sum(
            &perftest_row(&what, &server),
            &perftest_row(&what, &client),
            &what,
        );
    }
}

#[test]
fn bidirectional_is_refused_where_it_means_nothing() {
    refused(
        &["send", "-b", "--lat", "127.0.217.1", "-p", "19217"],
        "Bidirectional is only available in BW test",
    );
    refused(
        &["write", "-b", "--check", "127.0.217.1", "-p", "19217"],
        "--check: not with -b",
    );
}

#[test]
fn two_roce_perfs_given_different_modes_both_stop_naming_them() {
    let (client, server) = {
        let server = spawn(&["perf", "write", "-b", "-p", "19218", "-n", "50"]);
        wait_listening(server.id(), "19218");
        let client = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args([
                "perf",
                "write",
                "127.0.218.1",
                "-p",
                "19218",
                "--ip",
                "127.0.218.2",
            ])
            .args(["-n", "50"])
            .output()
            .unwrap();
        (client, finish(server))
    };
    for out in [&client, &server] {
        let (stdout, stderr) = text(out);
        assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
        assert!(stderr.contains("-b"), "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
    }
}

/// The next `n` result rows a running program prints on `stdout`: lines that start with a
/// number (perftest's table and `roce perf`'s) or JSON objects; panics if it ends first.
fn rows(stdout: &mut impl std::io::BufRead, n: usize) -> Vec<String> {
    let mut found = Vec::new();
    let mut line = String::new();
    while found.len() < n {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the program ended after {found:?}"
        );
        let first = line.split_whitespace().next().unwrap_or("");
        if first.starts_with('{') || first.parse::<u64>().is_ok() {
            found.push(line.trim().to_owned());
        }
    }
    found
}

/// SIGINT to the process group `group` (a `roce exec` and its program), as Ctrl-C would.
fn interrupt_group(group: u32) {
    let status = Command::new("kill")
        .args(["-INT", "--", &format!("-{group}")])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn run_infinitely_prints_a_row_every_interval_until_ctrl_c() {
    use std::io::{BufReader, Read};
    let (server, mut client) = spawn_tool_pair(
        &["perf", "write", "--run_infinitely"],
        "19220",
        "127.0.220",
        &["-D", "1", "-s", "4096"],
        &["--json"],
    );
    let mut stdout = BufReader::new(client.stdout.take().unwrap());
    let rows: Vec<Value> = rows(&mut stdout, 2)
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    for row in &rows {
        // One interval each: what completed in it, over it.
        let secs = row["seconds"].as_f64().unwrap();
        assert!((1.0..3.0).contains(&secs), "{row}");
        assert!(row["iterations"].as_u64().unwrap() > 0, "{row}");
        assert!(row["bw_peak_mb_s"].is_null(), "{row}");
        assert_eq!(row["interrupted"], false, "{row}");
    }
    common::interrupt(&client);
    let out = client.wait_with_output().unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out).1);
    // The last row: since the row before, marked interrupted.
    let last: Value = serde_json::from_str(rest.lines().last().unwrap()).unwrap();
    assert_eq!(last["interrupted"], true, "{last}");
    assert!(last["seconds"].as_f64().unwrap() < 3.0, "{last}");
    // The one-way server printed nothing and ends when its client does.
    let server = finish(server);
    let (stdout, stderr) = text(&server);
    assert!(server.status.success(), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("the client ended the run"), "{stderr}");
}

#[test]
fn run_infinitely_against_perftest_both_ways() {
    use std::io::BufReader;
    if !have("ib_send_bw", "perftest") {
        return;
    }
    // ib_send_bw's client runs until Ctrl-C; our server prints its rows and ends when nothing
    // more comes for --timeout.
    let server = spawn(&[
        "perf",
        "send",
        "--run_infinitely",
        "-D",
        "1",
        "-s",
        "4096",
        "--timeout",
        "2",
        "-p",
        "19221",
        "--ip",
        "127.0.221.1",
    ]);
    wait_listening(server.id(), "19221");
    let client = spawn_exec(
        Side::local("127.0.221.2", &[]),
        &[
            "ib_send_bw",
            "--run_infinitely",
            "-D",
            "1",
            "-s",
            "4096",
            "-p",
            "19221",
            "127.0.221.1",
        ],
    );
    let mut server = server;
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    for row in rows(&mut stdout, 2) {
        let cols: Vec<f64> = row.split_whitespace().map(|c| c.parse().unwrap()).collect();
        assert!(cols[0] == 4096.0 && cols[1] > 0.0 && cols[3] > 0.0, "{row}");
    }
    interrupt_group(client.id());
    let _ = client.wait_with_output().unwrap();
    let server = finish(server);
    let (_, stderr) = text(&server);
    assert!(server.status.success(), "{stderr}");
    assert!(stderr.contains("the peer ended the run"), "{stderr}");

    // ib_write_bw's server waits while our client runs; Ctrl-C ends our client.
    let perftest = spawn_exec(
        Side::local("127.0.222.1", &[]),
        &[
            "ib_write_bw",
            "--run_infinitely",
            "-D",
            "1",
            "-s",
            "4096",
            "-p",
            "19222",
        ],
    );
    wait_listening(perftest.id(), "19222");
    let mut client = spawn(&[
        "perf",
        "write",
        "--run_infinitely",
        "-D",
        "1",
        "-s",
        "4096",
        "127.0.222.1",
        "-p",
        "19222",
        "--ip",
        "127.0.222.2",
    ]);
    let mut stdout = BufReader::new(client.stdout.take().unwrap());
    for row in rows(&mut stdout, 2) {
        let cols: Vec<f64> = row.split_whitespace().map(|c| c.parse().unwrap()).collect();
        assert!(cols[0] == 4096.0 && cols[1] > 0.0 && cols[3] > 0.0, "{row}");
    }
    common::interrupt(&client);
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out).1);
    // perftest's server fails its end handshake when the client goes: its own way to end.
    let _ = finish(perftest);
}

#[test]
fn run_infinitely_is_refused_where_perftest_refuses_it() {
    refused(
        &[
            "send",
            "--run_infinitely",
            "-e",
            "127.0.223.1",
            "-p",
            "19223",
        ],
        "run_infinitely does not support events feature yet",
    );
    refused(
        &[
            "send",
            "--run_infinitely",
            "--lat",
            "127.0.223.1",
            "-p",
            "19223",
        ],
        "run_infinitely exists only in BW tests for now",
    );
    refused(
        &[
            "send",
            "--run_infinitely",
            "-b",
            "127.0.223.1",
            "-p",
            "19223",
        ],
        "not supported in SEND Bidirectional BW test",
    );
    refused(
        &[
            "write",
            "--run_infinitely",
            "-n",
            "5",
            "127.0.223.1",
            "-p",
            "19223",
        ],
        "cannot be used with",
    );
}

#[test]
fn uc_and_ud_run_against_themselves() {
    for (i, (verb, connection, size)) in [
        ("write", "UC", 65536),
        ("send", "UC", 65536),
        ("send", "UD", 1024),
    ]
    .into_iter()
    .enumerate()
    {
        let port = (19230 + i).to_string();
        let net = format!("127.0.{}", 230 + i);
        let (client, server) = perf_pair(
            &[verb, "-c", connection],
            &port,
            &net,
            &["-n", "200", "--json", "--stats"],
        );
        let (client, server) = (json_as("client", &client), json_as("server", &server));
        let what = format!("{verb} -c {connection}");
        assert_eq!(client["iterations"], 200, "{what}: {client}");
        assert_eq!(client["bytes"], size, "{what}: {client}");
        if verb == "send" {
            assert_eq!(server["iterations"], 200, "{what}: {server}");
        }
        // Nothing is acknowledged on UC and UD: the receiver sent no packet at all.
        assert_eq!(server["counters"]["tx_packets"], 0, "{what}: {server}");
    }
    // RC, for comparison, acknowledges.
    let (_, server) = perf_pair(&["write"], "19233", "127.0.233", &["-n", "20", "--json"]);
    let server = json_as("server", &server);
    assert!(
        server["counters"]["tx_packets"].as_u64().unwrap() > 0,
        "{server}"
    );
}

#[test]
fn uc_and_ud_against_perftest_both_ways() {
    if !have("ib_send_bw", "perftest") {
        return;
    }
    for (i, (verb, connection, size)) in [("write", "UC", 65536.0), ("send", "UD", 1024.0)]
        .into_iter()
        .enumerate()
    {
        let ib = format!("ib_{verb}_bw");
        let common = ["-c", connection, "-n", "200"];
        let (client, server) = perf_server_perftest_client(
            &[&[verb][..], &common, &["--json"]].concat(),
            &[&[ib.as_str()][..], &common].concat(),
            &(19234 + 2 * i).to_string(),
            &format!("127.0.{}", 234 + 2 * i),
        );
        let what = format!("roce perf {verb} -c {connection} server, {ib} client");
        let row = perftest_row(&what, &client);
        assert_eq!(row[..2], [size, 200.0], "{what}: {row:?}");
        let server = json_as(&what, &server);
        assert_eq!(server["bytes"].as_f64(), Some(size), "{what}: {server}");
        assert_eq!(server["counters"]["tx_packets"], 0, "{what}: {server}");
        let (client, server) = perftest_server_perf_client(
            &[&[ib.as_str()][..], &common].concat(),
            &[&[verb][..], &common, &["--json"]].concat(),
            &(19235 + 2 * i).to_string(),
            &format!("127.0.{}", 235 + 2 * i),
        );
        let what = format!("{ib} -c {connection} server, roce perf {verb} client");
        let client = json_as(&what, &client);
        assert_eq!(client["iterations"], 200, "{what}: {client}");
        assert_eq!(client["bytes"].as_f64(), Some(size), "{what}: {client}");
        let row = perftest_row(&what, &server);
        assert_eq!(row[..2], [size, 200.0], "{what}: {row:?}");
    }
}

#[test]
fn connections_are_refused_where_perftest_refuses_them() {
    refused(
        &["read", "-c", "UC", "127.0.238.1", "-p", "19238"],
        "UC connection not possible in READ/ATOMIC verbs",
    );
    refused(
        &["atomic", "-c", "UC", "127.0.238.1", "-p", "19238"],
        "UC connection not possible in READ/ATOMIC verbs",
    );
    refused(
        &["write", "-c", "UD", "127.0.238.1", "-p", "19238"],
        "UD connection only possible in SEND verb",
    );
    refused(
        &["send", "-c", "UC", "-R", "127.0.238.1", "-p", "19238"],
        "UC is not supported in librdmacm",
    );
    refused(
        &["send", "-c", "UD", "--check", "127.0.238.1", "-p", "19238"],
        "--check: not with -c UD",
    );
    // A UD message larger than the path MTU: both sides stop once they know the MTU, before
    // their devices start.
    let (client, server) = perf_pair(
        &["send", "-c", "UD"],
        "19239",
        "127.0.239",
        &["-s", "2048", "-m", "1024", "--json"],
    );
    for out in [&client, &server] {
        let (stdout, stderr) = text(out);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("Max message size in UD cannot be greater than MTU"),
            "{stderr}"
        );
        assert!(stdout.is_empty(), "{stdout}");
    }
}
