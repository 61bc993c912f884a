//! Two `roce` processes in two network namespaces joined by a veth pair (198.18.1.0/24): the UDP
//! and the raw backends, with and without loss injected by nftables, every run captured and
//! checked by `roce dump --strict`. Needs root (namespaces, CAP_NET_RAW); elsewhere each test
//! says that it skipped, and why.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::{have_tools, roce_in, run_ok, sh};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Two namespaces and a veth pair, removed on drop.
struct Veth {
    a: String,
    b: String,
    dir: PathBuf,
}

const A_IP: &str = "198.18.1.1";
const B_IP: &str = "198.18.1.2";
/// The address the raw backend plays in namespace b; b's kernel only owns B_IP.
const B_RAW_IP: &str = "198.18.1.4";

impl Veth {
    /// Creates the namespaces, or returns None (and says why) where that cannot be done here.
    /// UDP segmentation offload is off on both ends (see below).
    fn new(tag: &str) -> Option<Self> {
        Self::create(tag, false)
    }

    /// Like [`Veth::new`], but with `udp_offload` the veths keep their default offloads: a UDP
    /// socket's segmentation-offload batch crosses whole, as one frame of up to 64 KiB.
    fn create(tag: &str, udp_offload: bool) -> Option<Self> {
        let root = sh(&["id", "-u"]).stdout == b"0\n";
        if !root {
            common::skipped("veth tests need root (network namespaces, raw sockets)");
            return None;
        }
        if !have_tools("the veth tests", &["ip", "ethtool", "nft", "tshark"]) {
            return None;
        }
        let id = std::process::id();
        let (a, b) = (
            format!("roce-veth-a-{tag}-{id}"),
            format!("roce-veth-b-{tag}-{id}"),
        );
        if !sh(&["ip", "netns", "add", &a]).status.success() {
            common::skipped("cannot create network namespaces here");
            return None;
        }
        run_ok(&["ip", "netns", "add", &b]);
        let veth = Self {
            a,
            b,
            dir: std::env::temp_dir().join(format!("roce-veth-{tag}-{id}")),
        };
        std::fs::create_dir_all(&veth.dir).unwrap();
        run_ok(&[
            "ip", "-n", &veth.a, "link", "add", "va", "type", "veth", "peer", "name", "vb",
            "netns", &veth.b,
        ]);
        for (ns, dev, ip) in [(&veth.a, "va", A_IP), (&veth.b, "vb", B_IP)] {
            run_ok(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{ip}/24"),
                "dev",
                dev,
            ]);
            run_ok(&["ip", "-n", ns, "link", "set", dev, "up"]);
            run_ok(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            // A veth carries a UDP segmentation-offload batch whole, and a packet socket on it
            // (the capture, the raw backend) would see one 64 KiB frame. With the offload off
            // the kernel cuts each batch before the veth, as a real NIC does on the wire: the
            // capture then shows the IPv4 IDs 0, 1, 2, … that the UDP backend sealed each
            // ICRC for, and `roce dump --strict` checks them.
            if udp_offload {
                continue;
            }
            run_ok(&[
                "ip",
                "netns",
                "exec",
                ns,
                "ethtool",
                "-K",
                dev,
                "tx-udp-segmentation",
                "off",
            ]);
        }
        Some(veth)
    }

    fn roce(&self, ns: &str, args: &[&str]) -> Command {
        roce_in(ns, args)
    }

    /// Starts a capture of the veth in namespace a.
    fn capture(&self, name: &str) -> (Child, PathBuf) {
        self.capture_with(name, "udp port 4791 or tcp port 18515")
    }

    /// Starts a capture of the veth in namespace a with a capture filter.
    fn capture_with(&self, name: &str, filter: &str) -> (Child, PathBuf) {
        let file = self.dir.join(format!("{name}.pcap"));
        let child = Command::new("ip")
            .args(["netns", "exec", &self.a, "tshark", "-q", "-i", "va", "-w"])
            .arg(&file)
            .args(["-f", filter])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tshark is installed (.ci/run installs it)");
        std::thread::sleep(Duration::from_millis(1500));
        (child, file)
    }

    /// Drops `percent` % of RoCEv2 datagrams leaving each veth, with nftables.
    fn lose(&self, percent: u32) {
        // The netdev egress hook sees what UDP sockets and raw sockets send alike.
        for (ns, dev) in [(&self.a, "va"), (&self.b, "vb")] {
            let chain = format!("{{ type filter hook egress device \"{dev}\" priority 0; }}");
            let nft = |args: &[&str]| run_ok(&[&["ip", "netns", "exec", ns, "nft"], args].concat());
            nft(&["add", "table", "netdev", "roce"]);
            nft(&["add", "chain", "netdev", "roce", "egress", &chain]);
            let percent = percent.to_string();
            nft(&[
                "add", "rule", "netdev", "roce", "egress", "udp", "dport", "4791", "numgen",
                "random", "mod", "100", "<", &percent, "drop",
            ]);
        }
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = sh(&["ip", "netns", "delete", ns]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a pingpong server in b and a client in a; returns the client's and the server's output.
fn pingpong(veth: &Veth, server_args: &[&str], client_args: &[&str]) -> (Output, Output) {
    let server = veth
        .roce(&veth.b, server_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let client = veth.roce(&veth.a, client_args).output().unwrap();
    let server = server.wait_with_output().unwrap();
    (client, server)
}

fn assert_pingpong(client: &Output, server: &Output, bytes: u64) {
    for (who, out) in [("client", client), ("server", server)] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{who}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("{bytes} bytes in")),
            "{who}: {stdout}"
        );
    }
}

fn assert_clean_capture(mut tshark: Child, file: &Path) {
    std::thread::sleep(Duration::from_millis(500));
    let _ = sh(&["kill", "-INT", &tshark.id().to_string()]);
    let _ = tshark.wait();
    let dump = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(["dump", "--strict", "-q"])
        .arg(file)
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&dump.stderr);
    assert!(dump.status.success(), "roce dump --strict: {summary}");
    assert!(!dump.stdout.is_empty(), "nothing captured: {summary}");
    let malformed = sh(&[
        "tshark",
        "-r",
        file.to_str().unwrap(),
        "-Y",
        "_ws.malformed",
    ]);
    assert!(
        malformed.stdout.is_empty(),
        "tshark: malformed packets: {}",
        String::from_utf8_lossy(&malformed.stdout)
    );
}

#[test]
fn udp_backends_pingpong_over_veth() {
    let Some(veth) = Veth::new("udp") else { return };
    let (tshark, file) = veth.capture("udp");
    for size in ["64", "4096", "65536"] {
        let (client, server) = pingpong(
            &veth,
            &["pingpong", "-s", size, "-n", "50"],
            &["pingpong", B_IP, "-s", size, "-n", "50", "--dscp", "26"],
        );
        assert_pingpong(&client, &server, size.parse::<u64>().unwrap() * 100);
    }
    assert_clean_capture(tshark, &file);
    // The client asked for DSCP 26, the server for the default 0: both on the wire as asked.
    let dscp = |src: &str| {
        let filter = format!("ip.src == {src} && udp.dstport == 4791");
        let out = sh(&[
            "tshark",
            "-r",
            file.to_str().unwrap(),
            "-Y",
            &filter,
            "-T",
            "fields",
            "-e",
            "ip.dsfield.dscp",
        ]);
        let mut values: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        values.dedup();
        values
    };
    assert_eq!(dscp(A_IP), ["26"]);
    assert_eq!(dscp(B_IP), ["0"]);
}

#[test]
fn raw_backend_against_udp_backend_over_veth() {
    let Some(veth) = Veth::new("raw") else { return };
    let (tshark, file) = veth.capture("raw");
    let server = [
        "pingpong",
        "--backend",
        "raw",
        "--dev",
        "vb",
        "--ip",
        B_RAW_IP,
        "-s",
        "4096",
        "-n",
        "50",
    ];
    let (client, server) = pingpong(
        &veth,
        &server,
        &["pingpong", B_IP, "-s", "4096", "-n", "50"],
    );
    assert_pingpong(&client, &server, 4096 * 100);
    // The raw NIC checks every ICRC in full and the UDP NIC sees its packets come from per-QP
    // source ports: both worked, or the test would have failed above.
    assert_clean_capture(tshark, &file);
}

#[test]
fn loss_on_the_veth_is_recovered_with_data_intact() {
    let Some(veth) = Veth::new("loss") else {
        return;
    };
    veth.lose(3);
    let (client, server) = pingpong(
        &veth,
        &["pingpong", "-s", "8192", "-n", "200"],
        &["pingpong", B_IP, "-s", "8192", "-n", "200"],
    );
    assert_pingpong(&client, &server, 8192 * 400);
    let stderr = String::from_utf8_lossy(&client.stderr).into_owned()
        + &String::from_utf8_lossy(&server.stderr);
    assert!(
        stderr.contains("packets retransmitted"),
        "3 % loss and no retransmission reported: {stderr}"
    );
}

#[test]
fn perftest_tools_over_veth_with_both_backends() {
    let Some(veth) = Veth::new("perf") else {
        return;
    };
    let (tshark, file) = veth.capture("perf");
    for verb in ["write", "read", "send", "atomic"] {
        for raw in [false, true] {
            let mut server = vec!["perf", verb, "-n", "100", "-s", "32768", "--json"];
            if raw {
                server.extend(["--backend", "raw", "--dev", "vb", "--ip", B_RAW_IP]);
            }
            let client = ["perf", verb, B_IP, "-n", "100", "-s", "32768", "--json"];
            let (client, server) = pingpong(&veth, &server, &client);
            for (who, out) in [("client", &client), ("server", &server)] {
                assert!(
                    out.status.success(),
                    "{verb} raw={raw} {who}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(
                    result["iterations"], 100,
                    "{verb} raw={raw} {who}: {result}"
                );
            }
        }
    }
    assert_clean_capture(tshark, &file);
}

#[test]
fn raw_backend_cuts_the_udp_backends_offload_batches() {
    let Some(veth) = Veth::create("gso", true) else {
        return;
    };
    // On the veth itself: the batches cross whole (frames far longer than the MTU of 1500).
    let (tshark, wire) = veth.capture_with("gso-wire", "udp port 4791 and greater 9000");
    // The raw NIC records every datagram it receives with the IPv4 ID it saw (or, for a
    // datagram cut from a batch, the batch's ID plus its place), so `roce dump --strict`
    // checks every received ICRC against those IDs.
    let received = veth.dir.join("gso-received.pcap");
    let received_arg = received.to_str().unwrap();
    let raw = ["--backend", "raw", "--dev", "vb", "--ip", B_RAW_IP];
    for (verb, size) in [("write", "65536"), ("send", "16384")] {
        let mut server = vec!["perf", verb, "-n", "200", "-s", size, "--json"];
        server.extend(raw);
        server.extend(["--pcap", received_arg]);
        let client = ["perf", verb, B_IP, "-n", "200", "-s", size, "--json"];
        let (client, server) = pingpong(&veth, &server, &client);
        for (who, out) in [("client", &client), ("server", &server)] {
            assert!(
                out.status.success(),
                "{verb} {who}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(result["iterations"], 200, "{verb} {who}: {result}");
        }
        let dump = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["dump", "--strict", "-q"])
            .arg(&received)
            .output()
            .unwrap();
        let summary = String::from_utf8_lossy(&dump.stderr);
        assert!(
            dump.status.success(),
            "{verb}: roce dump --strict: {summary}"
        );
        assert!(summary.contains(" 0 bad ICRCs"), "{verb}: {summary}");
        // Datagrams from the UDP NIC with IDs above 0: cut from batches.
        let filter = format!("ip.src == {A_IP} && ip.id > 0");
        let cut = sh(&["tshark", "-r", received_arg, "-Y", &filter]);
        assert!(
            !cut.stdout.is_empty(),
            "{verb}: no datagram cut from a batch reached the raw NIC"
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    let _ = sh(&["kill", "-INT", &tshark.id().to_string()]);
    let mut tshark = tshark;
    let _ = tshark.wait();
    let batches = sh(&["tshark", "-r", wire.to_str().unwrap()]);
    assert!(
        !batches.stdout.is_empty(),
        "no offload batch crossed the veth whole: the test proves nothing"
    );
}
