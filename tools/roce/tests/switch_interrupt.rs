//! Ctrl-C on `roce switch` ends it with its final report and exit status 130. Needs root (a
//! namespace, veths, raw sockets); elsewhere it says that it skipped.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::{have_tools, interrupt, run_ok, sh};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// A namespace with two veth pairs (p0—q0, p1—q1), removed on drop.
struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        sh(&["ip", "netns", "del", &self.0]);
    }
}

#[test]
fn ctrl_c_prints_the_final_report_and_exits_130() {
    if sh(&["id", "-u"]).stdout != b"0\n" {
        common::skipped("the switch test needs root (namespaces, raw sockets)");
        return;
    }
    if !have_tools("the switch test", &["ip"]) {
        return;
    }
    let name = format!("roce-swint-{}", std::process::id());
    if !sh(&["ip", "netns", "add", &name]).status.success() {
        common::skipped("cannot create network namespaces here");
        return;
    }
    let ns = Namespace(name);
    for i in 0..2 {
        let (p, q) = (format!("p{i}"), format!("q{i}"));
        run_ok(&[
            "ip", "-n", &ns.0, "link", "add", &p, "type", "veth", "peer", "name", &q,
        ]);
        run_ok(&["ip", "-n", &ns.0, "link", "set", &p, "up"]);
        run_ok(&["ip", "-n", &ns.0, "link", "set", &q, "up"]);
    }
    let mut switch = Command::new("ip")
        .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_roce")])
        .args(["switch", "--port", "p0", "--port", "p1", "--json"])
        .args(["--interval", "0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Running: a periodic report came.
    let mut stdout = BufReader::new(switch.stdout.take().unwrap());
    let mut line = String::new();
    assert!(stdout.read_line(&mut line).unwrap() > 0, "no report");
    assert!(line.contains("\"final\":false"), "{line}");
    // `ip netns exec` execs the switch: its process is the child's.
    interrupt(&switch);
    let mut last = String::new();
    let mut rest = String::new();
    while stdout.read_line(&mut rest).unwrap() > 0 {
        last = rest.clone();
        rest.clear();
    }
    let out = switch.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(last.contains("\"final\":true"), "{last}");
    assert!(stderr.contains("interrupted"), "{stderr}");
}
