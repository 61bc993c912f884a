//! `roce exec` over IPv6: Debian's unmodified ibverbs-utils, each program under its own `roce
//! exec --ip <IPv6 address>`, in two network namespaces joined by a veth pair the test creates
//! (the ULA prefix fd00:198:18:6::/64, which never leaves the namespaces; duplicate address
//! detection off so that the addresses are usable at once). RoCEv2 runs over IPv6 between GID
//! 1 (the `--ip` address) of each side; the programs' own out-of-band TCP exchange goes over
//! IPv4 (198.18.6.0/24 on the same veth), because ibv_*_pingpong's server listens on 0.0.0.0
//! only. Needs root (namespaces); elsewhere each test says that it skipped.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::exec::{Side, have, ok_as as ok, spawn_exec, wait_listening};
use common::{have_tools, run_ok, sh};
use std::process::Output;

/// Namespace a (clients) and b (servers), removed on drop.
struct Pair {
    a: String,
    b: String,
}

/// The NICs' addresses (GID 1 of each side).
const A_IP6: &str = "fd00:198:18:6::1";
const B_IP6: &str = "fd00:198:18:6::2";
/// The veth ends' MACs.
const A_MAC: &str = "02:00:c6:12:06:01";
const B_MAC: &str = "02:00:c6:12:06:02";
/// The addresses of the programs' TCP exchange.
const A_IP4: &str = "198.18.6.1";
const B_IP4: &str = "198.18.6.2";

impl Pair {
    /// Creates the namespaces and the veth, or returns None (and says why) where that cannot
    /// be done here, or where `program` (from Debian's `package`) is missing.
    fn new(tag: &str, program: &str, package: &str) -> Option<Self> {
        if !have(program, package) {
            return None;
        }
        if sh(&["id", "-u"]).stdout != b"0\n" {
            common::skipped("roce exec IPv6 tests need root (network namespaces)");
            return None;
        }
        if !have_tools("the roce exec IPv6 tests", &["ip"]) {
            return None;
        }
        let id = std::process::id();
        let (a, b) = (
            format!("roce-x6-a-{tag}-{id}"),
            format!("roce-x6-b-{tag}-{id}"),
        );
        if !sh(&["ip", "netns", "add", &a]).status.success() {
            common::skipped("cannot create network namespaces here");
            return None;
        }
        run_ok(&["ip", "netns", "add", &b]);
        let pair = Self { a, b };
        for ns in [&pair.a, &pair.b] {
            // Interfaces made from now on skip duplicate address detection: their addresses,
            // the link-local one too, are usable as soon as the link is up.
            for conf in ["default", "all"] {
                let key = format!("net.ipv6.conf.{conf}.accept_dad=0");
                run_ok(&["ip", "netns", "exec", ns, "sysctl", "-qw", &key]);
            }
        }
        run_ok(&[
            "ip", "-n", &pair.a, "link", "add", "va", "address", A_MAC, "type", "veth", "peer",
            "name", "vb", "address", B_MAC, "netns", &pair.b,
        ]);
        for (ns, dev, ip6, ip4, peer_ip6, peer_mac) in [
            (&pair.a, "va", A_IP6, A_IP4, B_IP6, B_MAC),
            (&pair.b, "vb", B_IP6, B_IP4, A_IP6, A_MAC),
        ] {
            // The peer's link-layer address, known from the start: right after a link comes
            // up, IPv6 neighbour discovery can take a second (its retransmission timer), in
            // which an RC QP's retries run out.
            run_ok(&[
                "ip",
                "-n",
                ns,
                "neigh",
                "replace",
                peer_ip6,
                "lladdr",
                peer_mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ]);
            let cidr6 = format!("{ip6}/64");
            run_ok(&["ip", "-n", ns, "addr", "add", &cidr6, "dev", dev, "nodad"]);
            let cidr4 = format!("{ip4}/24");
            run_ok(&["ip", "-n", ns, "addr", "add", &cidr4, "dev", dev]);
            run_ok(&["ip", "-n", ns, "link", "set", dev, "mtu", "9000", "up"]);
            run_ok(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        Some(pair)
    }

    /// Runs `argv` as the server in b and `argv B_IP4` as the client in a, each under `roce
    /// exec --ip <its IPv6 address> EXEC_ARGS` (at most 120 s), the client once the server
    /// listens on TCP `port`; returns (client, server) once both have ended.
    fn run(&self, exec_args: &[&str], argv: &[&str], port: &str) -> (Output, Output) {
        let [wa, wb] = [self.a.as_str(), self.b.as_str()]
            .map(|ns| vec!["ip", "netns", "exec", ns, "timeout", "120"]);
        let server = Side {
            wrapper: &wb,
            ip: B_IP6,
            exec_args,
        };
        let client = Side {
            wrapper: &wa,
            ip: A_IP6,
            exec_args,
        };
        let server_child = spawn_exec(server, argv);
        wait_listening(server_child.id(), port);
        let client_argv = [argv, &[B_IP4]].concat();
        let client = spawn_exec(client, &client_argv).wait_with_output().unwrap();
        (client, server_child.wait_with_output().unwrap())
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = sh(&["ip", "netns", "delete", ns]);
        }
    }
}

/// Checks an ibv_*_pingpong run: both sides exit 0, report `iters` iterations and
/// 2 × size × iters bytes, and name the GIDs `local` and `remote` (IPv6 addresses) as theirs
/// and the peer's.
fn assert_pingpong(what: &str, (client, server): (Output, Output), size: u64, iters: u64) {
    for (who, out, local, remote) in [
        ("client", &client, A_IP6, B_IP6),
        ("server", &server, B_IP6, A_IP6),
    ] {
        let text = ok(&format!("{what} {who}"), out);
        let bytes = format!("{} bytes in", 2 * size * iters);
        assert!(text.contains(&bytes), "{what} {who}: no {bytes:?}\n{text}");
        let line = format!("{iters} iters in");
        assert!(text.contains(&line), "{what} {who}: no {line:?}\n{text}");
        for (label, gid) in [("local address", local), ("remote address", remote)] {
            let l = text
                .lines()
                .find(|l| l.contains(label))
                .unwrap_or_else(|| panic!("{what} {who}: no {label}\n{text}"));
            assert!(l.ends_with(&format!("GID {gid}")), "{what} {who}: {l}");
        }
    }
}

/// ibv_rc_pingpong -g 1 over IPv6: 1 B (inline, 1024-byte MTU) and 1 MiB (256 packets of 4096
/// bytes each way, the ICRC over IPv6 checked on each); -c: each side checks every byte.
#[test]
fn ibv_rc_pingpong_over_ipv6() {
    let Some(pair) = Pair::new("rc", "ibv_rc_pingpong", "ibverbs-utils") else {
        return;
    };
    for (port, (size, iters, mtu)) in (18760..).zip([("1", "50", "1024"), ("1048576", "5", "4096")])
    {
        let port = port.to_string();
        let mut argv = vec!["ibv_rc_pingpong", "-g", "1", "-p", &port, "-c"];
        argv.extend(["-s", size, "-n", iters, "-m", mtu]);
        let out = pair.run(&["--mtu", mtu], &argv, &port);
        let what = format!("ibv_rc_pingpong -s {size}");
        assert_pingpong(&what, out, size.parse().unwrap(), iters.parse().unwrap());
    }
}

/// ibv_ud_pingpong -g 1 over IPv6: datagrams whose 40-byte GRH area holds the IPv6 header,
/// -c checking the data after it.
#[test]
fn ibv_ud_pingpong_over_ipv6() {
    let Some(pair) = Pair::new("ud", "ibv_ud_pingpong", "ibverbs-utils") else {
        return;
    };
    let argv = [
        "ibv_ud_pingpong",
        "-g",
        "1",
        "-p",
        "18765",
        "-c",
        "-n",
        "50",
        "-s",
        "1024",
    ];
    let out = pair.run(&[], &argv, "18765");
    assert_pingpong("ibv_ud_pingpong", out, 1024, 50);
}
