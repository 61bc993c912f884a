//! Two NIC processes through `roce switch`: namespaces a and b (198.18.2.0/24) each joined by
//! a veth pair to a third namespace where the switch bridges the two ends with a 100 Mb/s
//! bottleneck towards b and RED ECN marking. With `--cc dcqcn` on both NICs, the switch marks
//! the WRITEs it queues, b's notification point answers with CNPs, and a's reaction point cuts
//! its rate: the story of DCQCN on real packets. Needs root; elsewhere it says that it skipped.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::{have_tools, roce_in, run_ok, sh};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const A_IP: &str = "198.18.2.1";
const B_IP: &str = "198.18.2.2";

/// Namespaces a, b and s; veths a:va—s:sa and b:vb—s:sb. Removed on drop.
struct Topology {
    a: String,
    b: String,
    s: String,
}

impl Topology {
    fn new() -> Option<Self> {
        if sh(&["id", "-u"]).stdout != b"0\n" {
            common::skipped("the switch test needs root (namespaces, raw sockets)");
            return None;
        }
        if !have_tools("the switch test", &["ip"]) {
            return None;
        }
        let id = std::process::id();
        let names = ["a", "b", "s"].map(|n| format!("roce-sw-{n}-{id}"));
        if !sh(&["ip", "netns", "add", &names[0]]).status.success() {
            common::skipped("cannot create network namespaces here");
            return None;
        }
        let [a, b, s] = names;
        run_ok(&["ip", "netns", "add", &b]);
        run_ok(&["ip", "netns", "add", &s]);
        let topology = Self { a, b, s };
        for (ns, host_dev, switch_dev, ip) in [
            (&topology.a, "va", "sa", A_IP),
            (&topology.b, "vb", "sb", B_IP),
        ] {
            run_ok(&[
                "ip",
                "-n",
                ns,
                "link",
                "add",
                host_dev,
                "type",
                "veth",
                "peer",
                "name",
                switch_dev,
                "netns",
                &topology.s,
            ]);
            let cidr = format!("{ip}/24");
            run_ok(&["ip", "-n", ns, "addr", "add", &cidr, "dev", host_dev]);
            run_ok(&["ip", "-n", ns, "link", "set", host_dev, "up"]);
            run_ok(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            run_ok(&["ip", "-n", &topology.s, "link", "set", switch_dev, "up"]);
        }
        Some(topology)
    }

    fn roce(&self, ns: &str, args: &[&str]) -> Command {
        roce_in(ns, args)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b, &self.s] {
            let _ = sh(&["ip", "netns", "delete", ns]);
        }
    }
}

fn json(out: &Output, who: &str) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{who} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{who}: {e}: {text}"))
}

#[test]
fn dcqcn_through_roce_switch_marks_notifies_and_cuts_the_rate() {
    let Some(net) = Topology::new() else {
        return;
    };
    let switch = net
        .roce(
            &net.s,
            &[
                "switch",
                "--port",
                "sa",
                "--port",
                "sb",
                "--rate",
                "100m",
                "--ecn",
                "5000,50000,0.2",
                "--interval",
                "0.5",
                "--json",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // The NICs send UDP GSO batches, which cross the veths whole: the switch cuts each into
    // its datagrams before they join its queues.
    let cc = ["--cc", "dcqcn", "--line-rate", "1", "--json"];
    let sizes = ["-s", "65536", "-n", "200"];
    let server = net
        .roce(&net.b, &[&["perf", "write"], &sizes[..], &cc[..]].concat())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let client = net
        .roce(
            &net.a,
            &[&["perf", "write", B_IP], &sizes[..], &cc[..]].concat(),
        )
        .output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    let client = json(&client, "client");
    let server = json(&server, "server");
    // The switch prints its counters every half second: stop it after one more report.
    std::thread::sleep(Duration::from_millis(800));
    let mut switch = switch;
    switch.kill().unwrap();
    let out = switch.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    let switch: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "switch: {e}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    eprintln!("client: {client}\nserver: {server}\nswitch: {switch}");
    let towards_b = &switch["ports"][1];
    assert!(
        towards_b["ce_marked"].as_u64().unwrap() > 0,
        "the bottleneck marked nothing: {switch}"
    );
    assert!(
        server["congestion"]["cnps_sent"].as_u64().unwrap() > 0,
        "b sent no CNP: {server}"
    );
    let cc = &client["congestion"];
    assert!(cc["cnps_received"].as_u64().unwrap() > 0, "{client}");
    assert!(cc["rate_decreases"].as_u64().unwrap() > 0, "{client}");
    // 100 Mb/s is 12.5 MB/s: the WRITEs went through the bottleneck, not around it, and DCQCN
    // kept most of it busy (a QP paced to one packet per timer tick would not).
    let bw = client["bw_avg_mb_s"].as_f64().unwrap();
    assert!(bw > 4.0 && bw < 13.0, "{client}");
}
