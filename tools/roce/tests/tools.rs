//! `roce pingpong` and `roce perf` against themselves on loopback (no root): two processes, the
//! out-of-band protocols of ibv_rc_pingpong and perftest over TCP, the traffic over UDP.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::process::Output;

use common::pair;

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn pingpong_with_itself() {
    let (client, server) = pair(
        &["pingpong", "-p", "18801", "-s", "3000", "-n", "50"],
        &[
            "pingpong",
            "127.0.40.1",
            "-p",
            "18801",
            "--ip",
            "127.0.40.2",
            "-s",
            "3000",
            "-n",
            "50",
        ],
    );
    for out in [&client, &server] {
        let text = ok(out);
        assert!(text.contains("300000 bytes in"), "{text}");
        assert!(text.contains("50 iters in"), "{text}");
    }
    // Each side names the other's QP: the server's own QPN is the one the client connected to.
    let qpn = |text: &str, side: &str| {
        let line = text
            .lines()
            .find(|l| l.contains(side))
            .unwrap_or_else(|| panic!("no {side} line in {text}"));
        line.split("QPN ").nth(1).unwrap()[..8].to_string()
    };
    assert_eq!(
        qpn(&ok(&client), "remote address"),
        qpn(&ok(&server), "local address")
    );
}

#[test]
fn perf_bandwidth_tests_with_themselves() {
    for (i, verb) in ["write", "read", "send", "atomic"].into_iter().enumerate() {
        let port = (18810 + i).to_string();
        let ip = format!("127.0.41.{}", 2 * i + 2);
        let (client, server) = pair(
            &[
                "perf", verb, "-p", &port, "-n", "64", "-s", "16384", "--json",
            ],
            &[
                "perf",
                verb,
                "127.0.41.1",
                "-p",
                &port,
                "--ip",
                &ip,
                "-n",
                "64",
                "-s",
                "16384",
                "--json",
            ],
        );
        let client: serde_json::Value = serde_json::from_str(&ok(&client)).unwrap();
        let server: serde_json::Value = serde_json::from_str(&ok(&server)).unwrap();
        assert_eq!(client["iterations"], 64, "{verb}: {client}");
        assert!(
            client["bw_avg_mb_s"].as_f64().unwrap() > 0.0,
            "{verb}: {client}"
        );
        // The server of a one-way test prints the client's report, as perftest does.
        if verb != "send" {
            assert_eq!(server["bw_avg_mb_s"], client["bw_avg_mb_s"], "{verb}");
        }
        let bytes = if verb == "atomic" { 8 } else { 16384 };
        assert_eq!(client["bytes"], bytes, "{verb}");
        // Nothing dropped, and every ICRC checked in full: on loopback a GSO batch arrives as one
        // GRO batch, so each datagram's place in it is the IPv4 ID its ICRC was sealed for.
        for side in [&client, &server] {
            assert_eq!(side["rx_dropped"], 0, "{verb}: {side}");
            assert_eq!(side["rx_icrc_id_solved"], 0, "{verb}: {side}");
        }
    }
}

#[test]
fn perf_send_latency_with_itself() {
    let (client, server) = pair(
        &[
            "perf", "send", "--lat", "-p", "18820", "-n", "100", "--json",
        ],
        &[
            "perf",
            "send",
            "--lat",
            "127.0.42.1",
            "-p",
            "18820",
            "--ip",
            "127.0.42.2",
            "-n",
            "100",
            "--json",
        ],
    );
    for out in [&client, &server] {
        let result: serde_json::Value = serde_json::from_str(&ok(out)).unwrap();
        let (min, typical, max) = (
            result["t_min_us"].as_f64().unwrap(),
            result["t_typical_us"].as_f64().unwrap(),
            result["t_max_us"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= typical && typical <= max, "{result}");
    }
}

#[test]
fn perf_bandwidth_tests_with_several_qps() {
    const QPS: usize = 4;
    for (i, verb) in ["write", "send"].into_iter().enumerate() {
        let port = (18830 + i).to_string();
        let ip = format!("127.0.43.{}", 2 * i + 2);
        let common = ["-p", &port, "-q", "4", "-n", "64", "-s", "16384", "--json"];
        let server: Vec<&str> = ["perf", verb].into_iter().chain(common).collect();
        let client: Vec<&str> = ["perf", verb, "127.0.43.1", "--ip", &ip]
            .into_iter()
            .chain(common)
            .collect();
        let (client, server) = pair(&server, &client);
        let client: serde_json::Value = serde_json::from_str(&ok(&client)).unwrap();
        let server: serde_json::Value = serde_json::from_str(&ok(&server)).unwrap();
        // perftest's figures are those of all QPs: -n iterations on each.
        assert_eq!(client["qps"], QPS, "{verb}: {client}");
        assert_eq!(client["iterations"], 64 * QPS, "{verb}: {client}");
        // A send test's server sees every QP's receives too; a write test's sees nothing.
        let measured = if verb == "send" {
            vec![&client, &server]
        } else {
            assert!(server["per_qp_mb_s"].is_null(), "{verb}: {server}");
            vec![&client]
        };
        for result in measured {
            let bytes = result["per_qp_bytes"].as_array().unwrap();
            assert_eq!(bytes.len(), QPS, "{verb}: {result}");
            // Every QP moved all of its data.
            assert!(bytes.iter().all(|b| b == 64 * 16384), "{verb}: {result}");
            let rates = result["per_qp_mb_s"].as_array().unwrap();
            assert_eq!(rates.len(), QPS, "{verb}: {result}");
            assert!(
                rates.iter().all(|r| r.as_f64().unwrap() > 0.0),
                "{verb}: {result}"
            );
            // No QP can go faster than all of them together.
            let total = result["bw_avg_mb_s"].as_f64().unwrap();
            assert!(
                rates.iter().all(|r| r.as_f64().unwrap() <= total * 1.01),
                "{verb}: {result}"
            );
            let jain = result["jain"].as_f64().unwrap();
            assert!(jain > 0.0 && jain <= 1.0, "{verb}: {result}");
        }
    }
}
