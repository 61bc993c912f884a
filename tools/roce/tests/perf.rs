//! `roce perf` against itself on loopback: what its figures mean, the options perftest's
//! users type, what it says when the two sides disagree, its counters and Ctrl-C.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output};

use common::{finish, interrupt, spawn_pair, spawn_tool_pair};

use serde_json::Value;

/// `roce perf VERB` as a server on `port` and as a client, both with `common`; the client
/// connects to `net`.1 and plays `net`.2 (each test its own `net`: two servers cannot share
/// an address's UDP port 4791).
fn perf_pair(verb: &[&str], port: &str, net: &str, common: &[&str]) -> (Output, Output) {
    let tool: Vec<&str> = ["perf"].iter().chain(verb).copied().collect();
    outputs(spawn_tool_pair(&tool, port, net, common, &[]))
}

/// Runs a server with `server` arguments, then a client with `client` arguments.
fn pair(server: &[&str], client: &[&str]) -> (Output, Output) {
    outputs(spawn_pair(server, client))
}

/// The client's output once it ends, then the server's.
fn outputs((server, client): (Child, Child)) -> (Output, Output) {
    let client = client.wait_with_output().unwrap();
    // A server whose client never came would wait for ever.
    (client, finish(server))
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).unwrap()
}

#[test]
fn the_peak_is_perftests_not_the_average() {
    let (client, server) = perf_pair(
        &["write"],
        "18870",
        "127.0.90",
        &["-n", "2000", "-s", "4096", "--json"],
    );
    let (client, server) = (json(&client), json(&server));
    let peak = client["bw_peak_mb_s"].as_f64().unwrap();
    let avg = client["bw_avg_mb_s"].as_f64().unwrap();
    // The window over the whole run is one of those searched: the best is faster.
    assert!(peak > avg, "{client}");
    // The server shows the client's report.
    assert_eq!(server["bw_peak_mb_s"], client["bw_peak_mb_s"]);
    // A send test's server computes none, as perftest's.
    let (_, server) = perf_pair(
        &["send"],
        "18871",
        "127.0.91",
        &["-n", "500", "-s", "4096", "--json"],
    );
    let server = json(&server);
    assert!(server["bw_peak_mb_s"].is_null(), "{server}");
    assert!(server["bw_avg_mb_s"].as_f64().unwrap() > 0.0, "{server}");
}

#[test]
fn a_latency_server_that_measures_nothing_says_null() {
    for (i, verb) in ["read", "atomic"].into_iter().enumerate() {
        let port = (18872 + i).to_string();
        let net = format!("127.0.{}", 102 + 4 * i);
        let (client, server) = perf_pair(&[verb, "--lat"], &port, &net, &["-n", "50", "--json"]);
        let (client, server) = (json(&client), json(&server));
        for key in [
            "t_min_us",
            "t_max_us",
            "t_typical_us",
            "t_avg_us",
            "t_stdev_us",
            "p99_us",
        ] {
            assert!(server[key].is_null(), "{verb} {key}: {server}");
            assert!(
                client[key].as_f64().unwrap() > 0.0,
                "{verb} {key}: {client}"
            );
        }
    }
}

#[test]
fn fairness_of_one_iteration_per_qp_means_something() {
    let (client, _) = perf_pair(
        &["write"],
        "18874",
        "127.0.92",
        &["-n", "1", "-q", "8", "-s", "4096", "--json"],
    );
    let client = json(&client);
    let rates = client["per_qp_mb_s"].as_array().unwrap();
    assert_eq!(rates.len(), 8);
    assert!(rates.iter().all(|r| r.as_f64().unwrap() > 0.0), "{client}");
    // Each QP over its own transfer: 8 equal shares of one message each are fair (the
    // window that ended at the first completion gave 1/8).
    let jain = client["jain"].as_f64().unwrap();
    assert!(jain > 0.5 && jain <= 1.0, "{client}");
}

#[test]
fn different_parameters_on_the_two_sides_are_named_on_both() {
    for (i, (server, client, named)) in [
        (["-n", "50"], ["-n", "100"], "-n 50"),
        (["-q", "2"], ["-q", "1"], "-q 2"),
        (["-s", "64"], ["-s", "128"], "-s 64"),
    ]
    .into_iter()
    .enumerate()
    {
        let port = (18875 + i).to_string();
        let ip = format!("127.0.103.{}", i + 2);
        let mut s = vec!["perf", "send", "-p", &port];
        s.extend(server);
        let mut c = vec!["perf", "send", "127.0.103.1", "-p", &port, "--ip", &ip];
        c.extend(client);
        let (client, server) = pair(&s, &c);
        for out in [&client, &server] {
            let (stdout, stderr) = text(out);
            assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
            assert!(
                stderr.contains("the peer was given other parameters"),
                "{stderr}"
            );
            assert!(stderr.contains(named), "{named}: {stderr}");
            // Nothing was measured or printed.
            assert!(stdout.is_empty(), "{stdout}");
        }
    }
}

#[test]
fn all_sizes_as_perftest() {
    let (client, server) = perf_pair(
        &["write", "-a"],
        "18878",
        "127.0.93",
        &["-n", "2", "--json"],
    );
    let rows: Vec<Value> = ok(&client)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sizes: Vec<u64> = rows.iter().map(|r| r["bytes"].as_u64().unwrap()).collect();
    assert_eq!(sizes, (1..24).map(|i| 1u64 << i).collect::<Vec<_>>());
    assert!(rows.iter().all(|r| r["iterations"] == 2), "{rows:?}");
    // The server shows the client's report of the last size.
    let server = json(&server);
    assert_eq!(server["bytes"], 1 << 23);
    // Send tests synchronise between sizes; text rows, one per size under one header.
    let (client, server) = perf_pair(&["send", "-a"], "18879", "127.0.98", &["-n", "2"]);
    for out in [&client, &server] {
        let table = ok(out);
        assert_eq!(table.matches("#bytes").count(), 1, "{table}");
        assert!(table.contains("\n 8388608 "), "{table}");
    }
}

#[test]
fn duration_and_gbits_and_cpu_freq() {
    let (client, server) = perf_pair(
        &["send"],
        "18880",
        "127.0.94",
        &["-D", "2", "-s", "1024", "-F", "--json"],
    );
    for side in [json(&client), json(&server)] {
        assert_eq!(side["duration_s"], 2, "{side}");
        assert!(side["iterations"].as_u64().unwrap() > 0, "{side}");
        assert!(side["bw_avg_mb_s"].as_f64().unwrap() > 0.0, "{side}");
        assert!(side["bw_peak_mb_s"].is_null(), "{side}");
    }
    let (client, _) = perf_pair(
        &["write"],
        "18881",
        "127.0.95",
        &["-n", "200", "--report_gbits"],
    );
    let table = ok(&client);
    assert!(table.contains("BW average[Gb/sec]"), "{table}");
}

#[test]
fn zero_iterations_depths_and_timeouts_are_refused_before_anything() {
    for (args, why) in [
        (["-n", "0"], "0 iterations"),
        (["-t", "0"], "nothing would ever be posted"),
        (["-r", "0"], "nothing would ever be posted"),
        (["-Q", "0"], "no WR would ask for a completion"),
        (["--timeout", "0"], "give up at once"),
        (["-D", "0"], "0 seconds"),
        (["-s", "0"], "0 bytes"),
    ] {
        let mut all = vec!["perf", "write", "127.0.105.1", "-p", "18882"];
        all.extend(args);
        let out = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(&all)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
        // It never got to connecting.
        assert!(!stderr.contains("couldn't connect"), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
    }
}

/// A message too large for the NIC's regions is refused with the limit in bytes before the
/// client reaches its server: a listener on the server's port is never connected to.
#[test]
fn a_size_over_the_region_limit_is_refused_before_connecting() {
    let listener = std::net::TcpListener::bind("127.0.106.1:18887").unwrap();
    listener.set_nonblocking(true).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args([
            "perf",
            "write",
            "127.0.106.1",
            "-p",
            "18887",
            "-s",
            "3000000000",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("-s 3000000000"), "{stderr}");
    assert!(stderr.contains("6000000000 bytes"), "{stderr}");
    assert!(stderr.contains("4294967296 bytes"), "{stderr}");
    assert!(!stderr.contains("max_mr_size"), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        listener.accept().is_err(),
        "the client connected before refusing"
    );
}

#[test]
fn counters_come_in_full_and_a_server_says_it_waits() {
    let (client, server) = perf_pair(&["send"], "18883", "127.0.96", &["-n", "100", "--json"]);
    let names: Vec<&str> = roce_core::Stats::default()
        .counters()
        .map(|(name, _)| name)
        .collect();
    let drops: Vec<&str> = roce_core::Stats::default()
        .drop_reasons()
        .map(|(name, _)| name)
        .collect();
    let (_, server_err) = text(&server);
    assert!(
        ["[::]", "0.0.0.0"]
            .iter()
            .any(|at| server_err.contains(&format!("waiting for a client on {at}:18883"))),
        "{server_err}"
    );
    for side in [json(&client), json(&server)] {
        let counters = side["counters"].as_object().unwrap();
        assert_eq!(counters.len(), names.len(), "{side}");
        assert!(names.iter().all(|n| counters.contains_key(*n)), "{side}");
        let by_reason = side["drops"].as_object().unwrap();
        assert!(drops.iter().all(|n| by_reason.contains_key(*n)), "{side}");
        for key in [
            "rx_dropped",
            "naks_sent",
            "naks_received",
            "rnr_naks_sent",
            "rnr_naks_received",
            "duplicates",
        ] {
            assert!(side[key].is_u64(), "{key}: {side}");
        }
    }
    // A sender's packets are the receiver's.
    let (client, server) = (json(&client), json(&server));
    assert_eq!(
        client["counters"]["tx_packets"],
        server["counters"]["rx_packets"]
    );
    // --stats in text.
    let (client, _) = perf_pair(&["write"], "18884", "127.0.97", &["-n", "100", "--stats"]);
    let table = ok(&client);
    assert!(table.contains(" dropped: 0"), "{table}");
    assert!(table.contains("RNR NAKs sent 0"), "{table}");
    assert!(table.contains("tx_packets"), "{table}");
}

#[test]
fn ctrl_c_on_a_client_prints_what_was_measured() {
    let shared = ["-n", "100000000", "-s", "64"];
    let (server, mut client) = spawn_tool_pair(
        &["perf", "write"],
        "18885",
        "127.0.104",
        &shared,
        &["--json"],
    );
    // The progress line says the traffic runs (after 3 s).
    let mut stderr = BufReader::new(client.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("iterations") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no progress line");
    }
    interrupt(&client);
    let out = client.wait_with_output().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(out.status.code(), Some(130), "{rest}");
    assert!(rest.contains("interrupted after"), "{rest}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["interrupted"], true, "{result}");
    let done = result["iterations"].as_u64().unwrap();
    assert!(done > 0 && done < 100_000_000, "{result}");
    assert!(result["bw_avg_mb_s"].as_f64().unwrap() > 0.0, "{result}");
    // The server learns that its client went away and stops.
    let server = server.wait_with_output().unwrap();
    assert!(!server.status.success());
}

/// CQ moderation as perftest's -Q: the poster asks for a completion every -Q WRs of each QP
/// and for its last, so a run whose length is no multiple still ends, each completion counts
/// the WRs before it, and -Q above the depth is the depth. Without -Q, perftest's 100, but
/// every WR asks for messages over 8 KiB.
#[test]
fn cq_moderation_asks_for_one_completion_in_cq_mod_wrs() {
    for (args, completions, net, port) in [
        // 250 WRs a QP, two QPs: WRs 99, 199 and 249 of each ask.
        (&["-s", "64", "-Q", "100"][..], 6, "127.0.123", "18953"),
        // Every WR asks.
        (&["-s", "64", "-Q", "1"][..], 500, "127.0.124", "18954"),
        // perftest's default of 100, at most the depth of 16: 15 full windows and the last.
        (&["-s", "64", "-t", "16"][..], 32, "127.0.125", "18955"),
        // perftest's default up to 8 KiB, none above it (MSG_SIZE_CQ_MOD_LIMIT) unless -Q.
        (&["-s", "8192"][..], 6, "127.0.127", "18957"),
        (&["-s", "8193"][..], 500, "127.0.128", "18958"),
        (&["-s", "9000", "-Q", "100"][..], 6, "127.0.129", "18959"),
    ] {
        for verb in ["write", "send"] {
            let mut common = vec!["-n", "250", "-q", "2", "--json"];
            common.extend(args);
            let (client, server) = perf_pair(&[verb], port, net, &common);
            let (client, server) = (json(&client), json(&server));
            assert_eq!(client["iterations"], 500, "{verb} {args:?}: {client}");
            assert_eq!(
                client["completions"], completions,
                "{verb} {args:?}: {client}"
            );
            let size: u64 = args[1].parse().unwrap();
            let per_qp = client["per_qp_bytes"].as_array().unwrap();
            assert!(per_qp.iter().all(|b| b == 250 * size), "{client}");
            // A send test's server takes a completion for every receive.
            if verb == "send" {
                assert_eq!(server["completions"], 500, "{server}");
            }
        }
    }
    // A READ test with --check asks for every completion, whatever -Q says.
    let common = ["-n", "250", "-s", "64", "-Q", "100", "--check", "--json"];
    let (client, _) = perf_pair(&["read"], "18956", "127.0.126", &common);
    assert_eq!(json(&client)["completions"], 250);
}

/// Issue 11 (hardening), item 24: with `--check` the receiving side checks every byte that
/// arrives against the seeded pattern it was sent with: the server for WRITE and SEND, the
/// client for READ; several QPs, and sizes over the path MTU.
#[test]
fn check_verifies_every_byte_of_write_read_and_send() {
    for (verb, port, net) in [
        ("write", "18950", "127.0.120"),
        ("read", "18951", "127.0.121"),
        ("send", "18952", "127.0.122"),
    ] {
        let common = ["-n", "200", "-s", "5000", "-q", "2", "--check"];
        let (client, server) = perf_pair(&[verb], port, net, &common);
        ok(&client);
        ok(&server);
        let checker = if verb == "read" { &client } else { &server };
        let (_, stderr) = text(checker);
        // Every message of both QPs (the last one of each for WRITE, whose target sees no
        // completion), each of 5000 bytes.
        let messages = if verb == "write" { 2 } else { 400 };
        assert!(
            stderr.contains(&format!(
                "--check: {messages} messages ({} bytes) checked, every byte as sent",
                messages * 5000
            )),
            "{verb}: {stderr}"
        );
    }
}

#[test]
fn check_is_refused_where_nothing_can_be_checked() {
    for args in [
        &["perf", "atomic", "--check"][..],
        &["perf", "send", "--lat", "--check"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--check"));
    }
}

/// `--loss` and `--loss-recovery selective-repeat` on both sides: every WRITE completes, the
/// server sends selective repeat's NACKs and the client sends packets again.
#[test]
fn writes_over_a_lossy_path_recover_by_selective_repeat() {
    let common = [
        "-n",
        "64",
        "-s",
        "65536",
        "--json",
        "--loss",
        "0.02",
        "--loss-recovery",
        "selective-repeat",
    ];
    let (client, server) = perf_pair(&["write"], "18889", "127.0.89", &common);
    let (_, client_err) = text(&client);
    assert!(client.status.success(), "{client_err}");
    assert!(server.status.success(), "{}", text(&server).1);
    let (client, server) = (json(&client), json(&server));
    let (c, s) = (&client["counters"], &server["counters"]);
    assert!(c["retransmitted_packets"].as_u64().unwrap() > 0, "{client}");
    assert!(s["tx_sacks"].as_u64().unwrap() > 0, "{server}");
    // Each side drops 2 % of what it receives, NACKs included.
    let (rx, tx) = (
        c["rx_sacks"].as_u64().unwrap(),
        s["tx_sacks"].as_u64().unwrap(),
    );
    assert!(rx > 0 && rx <= tx, "{client} {server}");
}

/// `--cc-param` sets the algorithm's parameters over its defaults: HPCC's window starts at the
/// line rate times T, so T given as 400 µs at 1 Gb/s is a window of 50 000 bytes (13 µs, the
/// default, 1 625). On loopback no switch stamps the INT header, so no ACK moves the window.
#[test]
fn cc_params_set_the_algorithms_parameters() {
    let common = [
        "-n",
        "16",
        "-s",
        "4096",
        "--json",
        "--cc",
        "hpcc",
        "--line-rate",
        "1",
        "--cc-param",
        "base_rtt_ns=400000",
    ];
    let (client, server) = perf_pair(&["write"], "18976", "127.0.147", &common);
    assert!(server.status.success(), "{}", text(&server).1);
    let client = json(&client);
    let cc = &client["congestion"];
    assert_eq!(cc["algorithm"], "hpcc", "{client}");
    assert_eq!(
        cc["params"],
        serde_json::json!(["base_rtt_ns=400000"]),
        "{client}"
    );
    assert_eq!(cc["window_bytes"].as_u64(), Some(50_000), "{client}");
}

/// A parameter the algorithm does not take is refused with the ones it takes, before the
/// device starts: its capture is never created.
#[test]
fn a_cc_param_the_algorithm_does_not_take_is_refused_before_the_device_starts() {
    let dir = common::ScratchDir::new("perf-cc-param");
    let pcap = dir.join("never.pcap");
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args([
            "perf",
            "write",
            "--ip",
            "127.0.148.1",
            "-p",
            "18977",
            "--cc",
            "dcqcn",
        ])
        .args(["--cc-param", "eta=990", "--pcap"])
        .arg(&pcap)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stderr.contains("dcqcn has no parameter \"eta\"; its parameters: rpg_time_reset"),
        "{stderr}"
    );
    assert!(!pcap.exists(), "the device started before refusing");
    assert!(!stderr.contains("waiting for a client"), "{stderr}");
}
