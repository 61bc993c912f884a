//! Two NIC processes through `roce switch`: namespaces a and b (198.18.2.0/24) each joined by
//! a veth pair to a third namespace where the switch bridges the two ends with a 100 Mb/s
//! bottleneck towards b and RED ECN marking. With `--cc dcqcn` on both NICs, the switch marks
//! the WRITEs it queues, b's notification point answers with CNPs, and a's reaction point cuts
//! its rate: the story of DCQCN on real packets. With `--cc hpcc` the requests carry INT, which
//! the switch stamps and b's ACKs echo, and a's HPCC measures the bottleneck from the records.
//! Needs root; elsewhere it says that it skipped.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::{have_tools, roce_in, run_ok, sh};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const A_IP: &str = "198.18.2.1";
const B_IP: &str = "198.18.2.2";
/// The same hosts over IPv6 (the ULA fd00:198:18::/48's subnet 2, on the test's veths only).
const A_IP6: &str = "fd00:198:18:2::1";
const B_IP6: &str = "fd00:198:18:2::2";

/// Namespaces a, b and s; veths a:va—s:sa and b:vb—s:sb. Removed on drop. Their names carry
/// the test's tag: the tests of this file run at once in one process, and a name another test
/// holds made the second `ip netns add` fail, which skipped that test even as root.
struct Topology {
    a: String,
    b: String,
    s: String,
}

impl Topology {
    fn new(tag: &str) -> Option<Self> {
        if sh(&["id", "-u"]).stdout != b"0\n" {
            common::skipped("the switch test needs root (namespaces, raw sockets)");
            return None;
        }
        if !have_tools("the switch test", &["ip"]) {
            return None;
        }
        let id = std::process::id();
        let names = ["a", "b", "s"].map(|n| format!("roce-sw-{n}-{tag}-{id}"));
        if !sh(&["ip", "netns", "add", &names[0]]).status.success() {
            common::skipped("cannot create network namespaces here");
            return None;
        }
        let [a, b, s] = names;
        run_ok(&["ip", "netns", "add", &b]);
        run_ok(&["ip", "netns", "add", &s]);
        let topology = Self { a, b, s };
        for (ns, host_dev, switch_dev, ip, ip6) in [
            (&topology.a, "va", "sa", A_IP, A_IP6),
            (&topology.b, "vb", "sb", B_IP, B_IP6),
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
            let cidr6 = format!("{ip6}/64");
            run_ok(&[
                "ip", "-n", ns, "addr", "add", &cidr6, "dev", host_dev, "nodad",
            ]);
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

/// Client, server and switch reports of 200 `op`s (`write`, or `read`: the data then flows
/// from b to a) of 64 KiB between a and b (at `b_ip`, IPv4 or IPv6) through `roce switch` at
/// 100 Mb/s (with `switch_args` too: RED marking, say), both NICs running `cc` from 1 Gb/s
/// with the options `cc_args` (`--cc-param`s) too.
fn run_through_switch(
    net: &Topology,
    op: &str,
    b_ip: &str,
    cc: &str,
    cc_args: &[&str],
    switch_args: &[&str],
) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
    let mut args = vec![
        "switch",
        "--port",
        "sa",
        "--port",
        "sb",
        "--rate",
        "100m",
        "--interval",
        "0.5",
        "--json",
    ];
    args.extend(switch_args);
    let switch = net
        .roce(&net.s, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // The NICs send UDP GSO batches, which cross the veths whole: the switch cuts each into
    // its datagrams before they join its queues.
    let cc = [&["--cc", cc, "--line-rate", "1", "--json"][..], cc_args].concat();
    let sizes = ["-s", "65536", "-n", "200"];
    let server = net
        .roce(&net.b, &[&["perf", op], &sizes[..], &cc[..]].concat())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let client = net
        .roce(&net.a, &[&["perf", op, b_ip], &sizes[..], &cc[..]].concat())
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
    (client, server, switch)
}

/// Neither NIC dropped a packet for its ICRC or its INT (or PINT) header.
fn assert_no_icrc_or_int_error(client: &serde_json::Value, server: &serde_json::Value) {
    for (who, v) in [("client", client), ("server", server)] {
        let c = &v["counters"];
        for counter in ["rx_icrc_errors", "rx_int_malformed", "rx_int_unexpected"] {
            assert_eq!(c[counter], 0, "{who} {counter}: {v}");
        }
    }
}

#[test]
fn dcqcn_through_roce_switch_marks_notifies_and_cuts_the_rate() {
    if let Some(net) = Topology::new("dcqcn") {
        assert_dcqcn_through_the_switch(&net, "write");
    }
}

/// DCQCN on READs through the switch: the data are b's READ responses, which queue towards a
/// and are marked there; a, the requester, is the notification point and sends the CNPs; b's
/// rate, which paces its responses, is cut, and the READs keep most of the bottleneck busy.
#[test]
fn dcqcn_on_reads_through_roce_switch_notifies_and_cuts_the_responder() {
    if let Some(net) = Topology::new("dcqcnr") {
        assert_dcqcn_through_the_switch(&net, "read");
    }
}

/// `op` (`write` or `read`) from a to b with DCQCN through the switch with RED marking: the port
/// towards the host that receives the data marks, that host (b for WRITEs, a for READs) sends
/// CNPs, the other one's rate is cut, and the data keep most of the bottleneck busy.
fn assert_dcqcn_through_the_switch(net: &Topology, op: &str) {
    let ecn = ["--ecn", "5000,50000,0.2"];
    let (client, server, switch) = run_through_switch(net, op, B_IP, "dcqcn", &[], &ecn);
    eprintln!("client: {client}\nserver: {server}\nswitch: {switch}");
    let (towards, notifier, sender) = match op {
        "read" => (&switch["ports"][0], &client, &server),
        _ => (&switch["ports"][1], &server, &client),
    };
    assert!(
        towards["ce_marked"].as_u64().unwrap() > 0,
        "the bottleneck marked nothing: {switch}"
    );
    assert!(
        notifier["congestion"]["cnps_sent"].as_u64().unwrap() > 0,
        "no CNP from the data's receiver: {notifier}"
    );
    let cc = &sender["congestion"];
    assert!(cc["cnps_received"].as_u64().unwrap() > 0, "{sender}");
    assert!(cc["rate_decreases"].as_u64().unwrap() > 0, "{sender}");
    // 100 Mb/s is 12.5 MB/s: the data went through the bottleneck, not around it, and DCQCN
    // kept most of it busy (a QP paced to one packet per timer tick would not).
    let bw = client["bw_avg_mb_s"].as_f64().unwrap();
    assert!(bw > 4.0 && bw < 13.0, "{client}");
}

/// HPCC on real packets: both NICs run HPCC through `roce switch` at 100 Mb/s, no ECN. The
/// requests carry the INT header, the switch appends its record (and writes the UDP checksum
/// again), b's ACKs echo it, and a's HPCC measures the bottleneck's utilisation from the
/// records (U moves off its initial 1); every WRITE lands with no ICRC or INT error and the
/// queue never holds more than a few packets. Nothing is cut: ns-3's floor, `min_rate` 1 Gb/s,
/// is these NICs' line rate, and with the default T of 13 µs and a veth RTT of hundreds of µs
/// HPCC's window (T at line rate) allows about two packets per RTT, far from filling the link.
#[test]
fn hpcc_through_roce_switch_reads_the_int_records() {
    if let Some(net) = Topology::new("hpcc") {
        assert_hpcc_reads_the_records(&net, B_IP);
    }
}

/// The same over IPv6: the switch finds the INT header behind the IPv6 header and writes the
/// UDP checksum (which IPv6 requires) again.
#[test]
fn hpcc_over_ipv6_through_roce_switch_reads_the_int_records() {
    if let Some(net) = Topology::new("hpcc6") {
        assert_hpcc_reads_the_records(&net, B_IP6);
    }
}

/// HPCC from a to b at `b_ip` through the switch hears the records (see above).
fn assert_hpcc_reads_the_records(net: &Topology, b_ip: &str) {
    let (client, server, switch) = run_through_switch(net, "write", b_ip, "hpcc", &[], &[]);
    eprintln!("client: {client}\nserver: {server}\nswitch: {switch}");
    let u = client["congestion"]["alpha"].as_f64().unwrap();
    assert!(
        u > 0.0 && (u - 1.0).abs() > 1e-9,
        "U from the records: {client}"
    );
    assert_no_icrc_or_int_error(&client, &server);
    let towards_b = &switch["ports"][1];
    assert_eq!(towards_b["drops"], 0, "{switch}");
    assert!(
        towards_b["max_queue_bytes"].as_u64().unwrap() < 10_000,
        "{switch}"
    );
    let bw = client["bw_avg_mb_s"].as_f64().unwrap();
    assert!(bw > 1.0 && bw < 13.0, "{client}");
}

/// HPCC on real packets with its T and floor set for the path (`--cc-param`): a veth's round
/// trip is hundreds of µs, so T = 400 µs, and the floor 10 Mb/s, under the 100 Mb/s
/// bottleneck. Then the records' utilisation passes η and HPCC cuts its rate from the 1 Gb/s
/// line rate towards the bottleneck's (its rate ends near it, 114–126 Mb/s in release runs, a
/// moment's value that this test does not hold it to), and the WRITEs keep most of the
/// bottleneck busy, with nothing dropped.
#[test]
fn hpcc_with_t_and_floor_for_the_path_cuts_to_the_bottleneck() {
    let Some(net) = Topology::new("hpcct") else {
        return;
    };
    let client = hpcc_for_the_path(&net, &[], &[]);
    assert_eq!(
        client["congestion"]["params"],
        serde_json::json!(["base_rtt_ns=400000", "min_rate=10"]),
        "{client}"
    );
}

/// Runs HPCC through `roce switch` with the path's T (400 µs) and floor (10 Mb/s), and
/// `cc_args` and `switch_args` besides, and checks what both HPCC tests expect: HPCC cut its
/// rate (with the default T the window never lets U reach η, and nothing is cut), no ICRC or
/// INT error, nothing dropped at the bottleneck, and most of it kept busy. The client's report.
fn hpcc_for_the_path(net: &Topology, cc_args: &[&str], switch_args: &[&str]) -> serde_json::Value {
    let path = [
        "--cc-param",
        "base_rtt_ns=400000",
        "--cc-param",
        "min_rate=10",
    ];
    let params = [&path[..], cc_args].concat();
    let (client, server, switch) =
        run_through_switch(net, "write", B_IP, "hpcc", &params, switch_args);
    eprintln!("client: {client}\nserver: {server}\nswitch: {switch}");
    assert!(
        client["congestion"]["rate_decreases"].as_u64().unwrap() > 0,
        "{client}"
    );
    assert_no_icrc_or_int_error(&client, &server);
    assert_eq!(switch["ports"][1]["drops"], 0, "{switch}");
    let bw = client["bw_avg_mb_s"].as_f64().unwrap();
    assert!(bw > 4.0 && bw < 13.0, "{client}");
    client
}

/// HPCC-PINT on real packets: both NICs run HPCC with PINT's header (`pint=true`) and the
/// path's T and floor, through `roce switch --pint` with the same T. The bottleneck meters its
/// utilisation and raises each request's value, b's ACKs echo it, and a's HPCC cuts towards
/// the bottleneck as with INT's records; nothing dropped, no ICRC or INT error. Without the
/// switch's meter the values stay 0 (U = 1/512), and nothing is cut.
#[test]
fn hpcc_pint_through_roce_switch_cuts_to_the_bottleneck() {
    let Some(net) = Topology::new("pint") else {
        return;
    };
    let client = hpcc_for_the_path(&net, &["--cc-param", "pint=true"], &["--pint", "400000"]);
    let u = client["congestion"]["alpha"].as_f64().unwrap();
    assert!(u > 1.0 / 512.0, "U from the raised values: {client}");
}
