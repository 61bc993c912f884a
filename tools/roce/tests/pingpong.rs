//! `roce pingpong --json`, `--stats`, the server's waiting line and Ctrl-C, against itself on
//! loopback.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::io::Read;
use std::time::Duration;

use common::{finish, interrupt, spawn_tool_pair};

use serde_json::Value;

#[test]
fn json_has_the_figures_and_every_counter() {
    let shared = ["-n", "20", "-s", "1000", "--json"];
    let (server, client) = spawn_tool_pair(&["pingpong"], "18890", "127.0.110", &shared, &[]);
    let client = client.wait_with_output().unwrap();
    let server = finish(server);
    let stderr = String::from_utf8_lossy(&server.stderr);
    assert!(
        ["[::]", "0.0.0.0"]
            .iter()
            .any(|at| stderr.contains(&format!("waiting for a client on {at}:18890"))),
        "{stderr}"
    );
    let names = roce_core::Stats::default().counters().count();
    for out in [&client, &server] {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(result["iterations"], 20, "{result}");
        assert_eq!(result["interrupted"], false, "{result}");
        assert!(result["usec_per_iter"].as_f64().unwrap() > 0.0, "{result}");
        assert_eq!(
            result["counters"].as_object().unwrap().len(),
            names,
            "{result}"
        );
        assert!(result["drops"].is_object(), "{result}");
        assert_eq!(result["rx_dropped"], 0, "{result}");
        assert!(result["rnr_naks_received"].is_u64(), "{result}");
        assert!(result["remote"]["qpn"].is_u64(), "{result}");
    }
    let client: Value = serde_json::from_slice(&client.stdout).unwrap();
    assert_eq!(client["bytes"], 1000 * 20 * 2);
}

#[test]
fn stats_in_text() {
    let (server, client) = spawn_tool_pair(
        &["pingpong"],
        "18891",
        "127.0.111",
        &["-n", "10"],
        &["--stats"],
    );
    let client = client.wait_with_output().unwrap();
    finish(server);
    let text = String::from_utf8_lossy(&client.stdout);
    assert!(text.contains("10 iters in"), "{text}");
    assert!(text.contains(" dropped: 0"), "{text}");
    assert!(text.contains("tx_packets"), "{text}");
}

#[test]
fn ctrl_c_on_a_client_prints_the_round_trips_so_far() {
    let shared = ["-n", "100000000", "-s", "64"];
    let (server, mut client) =
        spawn_tool_pair(&["pingpong"], "18892", "127.0.112", &shared, &["--json"]);
    // Round trips are under way once the addresses are exchanged; give them a second.
    std::thread::sleep(Duration::from_millis(1500));
    interrupt(&client);
    let mut stderr = String::new();
    client
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted after"), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["interrupted"], true, "{result}");
    let done = result["iterations"].as_u64().unwrap();
    assert!(done > 0 && done < 100_000_000, "{result}");
    finish(server);
}
